/* SPDX-License-Identifier: MIT */
/*
 * ipc_proto.h - the wire protocol of cumemsaver's IPC (exporter/importer and
 * control socket): a pure encode/decode layer, no I/O, so that it can be
 * fuzzed (tests/fuzz/fuzz_ipc.c). docs/ipc.md describes the messages.
 *
 * Every message is a 16-byte header followed by its payload, all integers
 * little-endian:
 *   u32 magic "CMSI" | u16 version | u16 type | u32 payload bytes | u32 descriptors
 * "descriptors" is the number of file descriptors sent with the message
 * (SCM_RIGHTS); only CMS_IPC_FDS may carry any, and the receiver checks that
 * the number it received is exactly that. Strings are u16 length + bytes
 * (no NUL inside). Every field is validated by cms_ipc_decode.
 *
 * Self-contained (compiled into the library, cmsctl, the tests and the fuzz
 * target): returns cms_status numbers and writes its reason into a caller's
 * buffer instead of the thread-local error message.
 */
#ifndef CMS_IPC_PROTO_H
#define CMS_IPC_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "cumemsaver.h"

#define CMS_IPC_MAGIC 0x49534d43u /* "CMSI" read as little-endian u32 */
#define CMS_IPC_VERSION 1u
#define CMS_IPC_HEADER_SIZE 16u
#define CMS_IPC_MAX_PAYLOAD (8u << 20)
#define CMS_IPC_MAX_ALLOCS 65536u
#define CMS_IPC_MAX_FDS 250u /* per message; the kernel's SCM_MAX_FD is 253 */
#define CMS_IPC_MAX_TEXT 1024u
#define CMS_IPC_MAX_NAME 63u
#define CMS_IPC_MAX_REGIONS 4096u

enum cms_ipc_type {
	CMS_IPC_HELLO = 1,	  /* importer -> exporter: which region, access wanted, name */
	CMS_IPC_LAYOUT = 2,	  /* exporter -> importer: layout, epoch, state, access granted */
	CMS_IPC_FDS = 3,	  /* exporter -> importer: descriptors of allocations first.. */
	CMS_IPC_MAPPED = 4,	  /* importer -> exporter: a grant's outcome (status) */
	CMS_IPC_REVOKE = 5,	  /* exporter -> importer: drop your mappings (seq) */
	CMS_IPC_REVOKED = 6,	  /* importer -> exporter: dropped (status 0) or refused */
	CMS_IPC_ERROR = 7,	  /* either way: status + text; the sender closes */
	CMS_IPC_CTL_REQUEST = 8,  /* cmsctl -> control socket: op + tag */
	CMS_IPC_CTL_PROGRESS = 9, /* control socket -> cmsctl: a progress line */
	CMS_IPC_CTL_REPLY = 10,	  /* control socket -> cmsctl: outcome + region table */
	CMS_IPC_CTL_STATS = 11,	  /* control socket -> cmsctl: region counters (since 1.2) */
};
#define CMS_IPC_TYPE_MAX 11

/* Access granted to an importer (HELLO asks, LAYOUT grants). */
#define CMS_IPC_ACCESS_READ 1u
#define CMS_IPC_ACCESS_READWRITE 3u

/* Control operations (CTL_REQUEST). */
#define CMS_IPC_OP_STATUS 1u
#define CMS_IPC_OP_PAUSE 2u
#define CMS_IPC_OP_RESUME 3u
/* Since 1.2, answered with CTL_STATS; a 1.1 server refuses it (CMS_IPC_ERROR, CMS_ERR_PROTOCOL,
 * "request: op 4, tag"). */
#define CMS_IPC_OP_STATS 4u
/* "status", "pause", "resume", "stats"; NULL for another number. */
const char *cms_ipc_op_name(uint32_t op);

/* One allocation of an exported region. offset: from the importer's base, a multiple of
 * the granularity, offsets increasing and not overlapping; size <= physical; physical a
 * non-zero multiple of the granularity; offset + physical <= total. */
struct cms_ipc_alloc_desc {
	uint64_t offset;
	uint64_t size;
	uint64_t physical;
	uint64_t exporter_ptr; /* the allocation's device pointer in the exporter */
};

/* One region in a control status reply. */
struct cms_ipc_region_status {
	char tag[CMS_TAG_MAX + 1];
	int32_t device;
	uint32_t policy;
	uint32_t state;
	uint32_t importers;
	uint64_t allocations;
	uint64_t logical_bytes;
	uint64_t physical_bytes;
	uint64_t backed_bytes;
	uint64_t epoch;
};

/* One region in a CTL_STATS reply: cms_region_stats on the wire (all of it, in field order). */
#define CMS_IPC_STATS_SLOTS 32 /* = CMS_STATS_STATUS_SLOTS */
struct cms_ipc_region_stats {
	char tag[CMS_TAG_MAX + 1];
	int32_t device;
	uint32_t policy;
	uint32_t state;
	uint64_t region_id;
	uint64_t pauses, resumes, swaps, failures;
	uint64_t failures_by_status[CMS_IPC_STATS_SLOTS];
	uint64_t bytes_released, bytes_backed, bytes_to_store, bytes_from_store;
	uint64_t pause_ns, resume_ns;
};

/* A decoded message: the fields of its type are set, the rest zero. */
struct cms_ipc_msg {
	uint16_t type;
	uint32_t nfds; /* descriptors announced in the header (FDS only) */
	/* HELLO, LAYOUT, CTL_REQUEST */
	char tag[CMS_TAG_MAX + 1];
	int32_t device;
	uint32_t access;
	/* HELLO */
	char name[CMS_IPC_MAX_NAME + 1];
	/* LAYOUT */
	uint32_t state; /* CMS_STATE_* */
	uint64_t epoch;
	uint64_t granularity;
	uint64_t total; /* bytes of address space the importer reserves */
	uint32_t nallocs;
	struct cms_ipc_alloc_desc *allocs; /* nallocs, malloc'ed by decode */
	/* FDS: descriptors of allocations [first, first + nfds) */
	uint32_t first;
	/* MAPPED, REVOKED, ERROR, CTL_REPLY */
	int32_t status;
	/* REVOKE, REVOKED, MAPPED */
	uint64_t seq;
	/* ERROR, CTL_PROGRESS, CTL_REPLY */
	char text[CMS_IPC_MAX_TEXT + 1];
	/* CTL_REQUEST */
	uint32_t op;
	/* CTL_REPLY: figures of a pause/resume, and the region table of a status */
	uint64_t bytes;
	uint64_t elapsed_ns;
	uint64_t driver_free_before;
	uint64_t driver_free_after;
	uint32_t nregions;
	struct cms_ipc_region_status *regions; /* nregions, malloc'ed by decode */
	/* CTL_STATS (status, text too) */
	uint32_t nstats;
	struct cms_ipc_region_stats *stats; /* nstats, malloc'ed by decode */
};

/*
 * cms_ipc_decode_header - validates a 16-byte header: magic, version, type,
 * payload length (<= CMS_IPC_MAX_PAYLOAD), descriptors (only FDS, <=
 * CMS_IPC_MAX_FDS). Returns CMS_OK or CMS_ERR_PROTOCOL with why.
 */
cms_status cms_ipc_decode_header(const uint8_t *hdr, uint16_t *type, uint32_t *payload,
				 uint32_t *nfds, char *why, size_t whylen);

/*
 * cms_ipc_decode - decodes one whole message (header + payload, len bytes
 * exactly) received together with nfds_received descriptors. Fills *m (the
 * arrays it allocates are freed by cms_ipc_msg_free; after a failure *m is
 * zeroed and holds nothing).
 * Returns CMS_OK, CMS_ERR_PROTOCOL (why says which field), or
 * CMS_ERR_OUT_OF_HOST_MEMORY.
 */
cms_status cms_ipc_decode(const uint8_t *buf, size_t len, size_t nfds_received,
			  struct cms_ipc_msg *m, char *why, size_t whylen);

/*
 * cms_ipc_encode - encodes *m (validated as decode would) into a malloc'ed
 * buffer *out of *len bytes. Returns CMS_OK, CMS_ERR_INVALID_ARGUMENT (a
 * field decode would refuse), CMS_ERR_OUT_OF_HOST_MEMORY.
 */
cms_status cms_ipc_encode(const struct cms_ipc_msg *m, uint8_t **out, size_t *len, char *why,
			  size_t whylen);

/* Frees the arrays of a decoded or built message and zeroes it. */
void cms_ipc_msg_free(struct cms_ipc_msg *m);

/* Builds an ERROR message of status st (CMS_ERR_INTERNAL unless negative) and text (cut to
 * fit, control characters made spaces) into *m. */
void cms_ipc_msg_error(struct cms_ipc_msg *m, cms_status st, const char *text);

/*
 * cms_ipc_fail - writes the printf-style reason into why (whylen bytes, may
 * be NULL/0: nothing written) and returns st. The reason reporting of this
 * layer and of ipc_sock.c.
 */
cms_status cms_ipc_fail(cms_status st, char *why, size_t whylen, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Checks a layout: what decode checks for LAYOUT. Returns CMS_OK or CMS_ERR_PROTOCOL. */
cms_status cms_ipc_check_layout(const struct cms_ipc_msg *m, char *why, size_t whylen);

#endif /* CMS_IPC_PROTO_H */
