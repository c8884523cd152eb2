/* SPDX-License-Identifier: MIT */
/*
 * ipc_proto.c - encode/decode of the IPC messages (see ipc_proto.h). No I/O,
 * no global state: safe to fuzz and to call from any thread.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipc_proto.h"

/* The u64 counters of a CTL_STATS entry, in wire order (failures_by_status follows). */
#define STATS_COUNTERS(s)                                                                  \
	{                                                                                  \
		&(s)->region_id, &(s)->pauses, &(s)->resumes, &(s)->swaps, &(s)->failures, \
			&(s)->bytes_released, &(s)->bytes_backed, &(s)->bytes_to_store,    \
			&(s)->bytes_from_store, &(s)->pause_ns, &(s)->resume_ns            \
	}
/* Smallest CTL_STATS entry: tag length, 3 u32, 11 + 32 u64. */
#define STATS_MIN (2 + 3 * 4 + (11 + CMS_IPC_STATS_SLOTS) * 8)

#define MAX_TOTAL (1ull << 50) /* 1 PiB of address space: far above any device */
#define MAX_GRANULARITY (1ull << 40)

cms_status cms_ipc_fail(cms_status st, char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	if (why && whylen) {
		va_start(ap, fmt);
		vsnprintf(why, whylen, fmt, ap);
		va_end(ap);
	}
	return st;
}

/* ---- reader ---- */

struct rd {
	const uint8_t *p;
	size_t n, off;
	const char *bad; /* first field that did not fit */
};

static int take(struct rd *r, void *dst, size_t n, const char *field)
{
	if (r->bad)
		return -1;
	if (r->n - r->off < n) {
		r->bad = field;
		return -1;
	}
	if (dst)
		memcpy(dst, r->p + r->off, n);
	r->off += n;
	return 0;
}

static uint64_t get_le(struct rd *r, size_t n, const char *field)
{
	uint8_t b[8] = { 0 };
	uint64_t v = 0;
	size_t i;

	if (take(r, b, n, field))
		return 0;
	for (i = n; i-- > 0;)
		v = (v << 8) | b[i];
	return v;
}

static uint16_t get_u16(struct rd *r, const char *f)
{
	return (uint16_t)get_le(r, 2, f);
}
static uint32_t get_u32(struct rd *r, const char *f)
{
	return (uint32_t)get_le(r, 4, f);
}
static uint64_t get_u64(struct rd *r, const char *f)
{
	return get_le(r, 8, f);
}
static int32_t get_i32(struct rd *r, const char *f)
{
	uint32_t v = get_u32(r, f);
	int32_t s;

	memcpy(&s, &v, sizeof(s));
	return s;
}

/* A printable string of at most max bytes into dst (room for max + 1). */
static int check_text(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return -1;
	return 0;
}

static cms_status get_str(struct rd *r, char *dst, size_t max, const char *field, char *why,
			  size_t whylen)
{
	uint16_t n = get_u16(r, field);

	if (r->bad)
		return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen,
				    "message ends inside field \"%s\"", r->bad);
	if (n > max)
		return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen, "%s: %u bytes, at most %zu",
				    field, n, max);
	if (take(r, dst, n, field))
		return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen,
				    "message ends inside field \"%s\"", field);
	dst[n] = '\0';
	if (check_text(dst, n))
		return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen, "%s: control character or NUL",
				    field);
	return CMS_OK;
}

/* ---- writer ---- */

struct wr {
	uint8_t *p;
	size_t n, cap;
	int oom;
};

static void put(struct wr *w, const void *src, size_t n)
{
	if (w->oom)
		return;
	if (w->cap - w->n < n) {
		size_t cap = w->cap ? w->cap : 256;
		uint8_t *p;

		while (cap - w->n < n)
			cap *= 2;
		p = realloc(w->p, cap);
		if (!p) {
			w->oom = 1;
			return;
		}
		w->p = p;
		w->cap = cap;
	}
	memcpy(w->p + w->n, src, n);
	w->n += n;
}

static void put_le(struct wr *w, uint64_t v, size_t n)
{
	uint8_t b[8];
	size_t i;

	for (i = 0; i < n; i++, v >>= 8)
		b[i] = (uint8_t)v;
	put(w, b, n);
}

static void put_str(struct wr *w, const char *s)
{
	size_t n = strlen(s);

	put_le(w, n, 2);
	put(w, s, n);
}

/* ---- field checks shared by encode and decode ---- */

static int valid_tag(const char *t, int allow_empty)
{
	size_t n = strlen(t);

	if (!n)
		return allow_empty;
	return n <= CMS_TAG_MAX && !check_text(t, n);
}

static int valid_status(int32_t st)
{
	return st <= 0 && st >= -1000;
}

static int valid_access(uint32_t a)
{
	return a == CMS_IPC_ACCESS_READ || a == CMS_IPC_ACCESS_READWRITE;
}

cms_status cms_ipc_check_layout(const struct cms_ipc_msg *m, char *why, size_t whylen)
{
	uint64_t g = m->granularity, end = 0, ptr_end = 0;
	uint32_t i;

	if (!valid_tag(m->tag, 0))
		return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen, "layout: bad tag");
	if (m->device < 0 || m->device >= 64)
		return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen, "layout: device %d", m->device);
	if (!valid_access(m->access))
		return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen, "layout: access %u", m->access);
	if (m->state != CMS_STATE_ACTIVE && m->state != CMS_STATE_PAUSED)
		return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen, "layout: state %u", m->state);
	if (g < 4096 || g > MAX_GRANULARITY || (g & (g - 1)))
		return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen, "layout: granularity %llu",
				    (unsigned long long)g);
	if (m->nallocs > CMS_IPC_MAX_ALLOCS)
		return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen,
				    "layout: %u allocations, at most %u", m->nallocs,
				    CMS_IPC_MAX_ALLOCS);
	if (m->total > MAX_TOTAL || (m->total & (g - 1)))
		return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen, "layout: total %llu",
				    (unsigned long long)m->total);
	if (m->nallocs && !m->allocs)
		return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen, "layout: no allocation table");
	for (i = 0; i < m->nallocs; i++) {
		const struct cms_ipc_alloc_desc *a = &m->allocs[i];

		if (a->offset < end || (a->offset & (g - 1)) || !a->physical ||
		    (a->physical & (g - 1)) || !a->size || a->size > a->physical ||
		    a->physical > m->total || a->offset > m->total - a->physical ||
		    a->exporter_ptr < ptr_end || a->exporter_ptr > UINT64_MAX - a->physical)
			return cms_ipc_fail(
				CMS_ERR_PROTOCOL, why, whylen,
				"layout: allocation %u (offset %llu, size %llu, physical %llu) "
				"is not aligned, overlaps or lies outside %llu bytes (or its "
				"pointer is out of order)",
				i, (unsigned long long)a->offset, (unsigned long long)a->size,
				(unsigned long long)a->physical, (unsigned long long)m->total);
		end = a->offset + a->physical;
		ptr_end = a->exporter_ptr + a->physical;
	}
	if (end != m->total)
		return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen,
				    "layout: allocations end at %llu, total is %llu",
				    (unsigned long long)end, (unsigned long long)m->total);
	return CMS_OK;
}

const char *cms_ipc_op_name(uint32_t op)
{
	switch (op) {
	case CMS_IPC_OP_STATUS:
		return "status";
	case CMS_IPC_OP_PAUSE:
		return "pause";
	case CMS_IPC_OP_RESUME:
		return "resume";
	case CMS_IPC_OP_STATS:
		return "stats";
	default:
		return NULL;
	}
}

/* A control request: a known operation; pause and resume name a tag, status and stats may. */
static cms_status check_request(const struct cms_ipc_msg *m, char *why, size_t whylen)
{
	const char *op = cms_ipc_op_name(m->op);
	int any = m->op == CMS_IPC_OP_STATUS || m->op == CMS_IPC_OP_STATS;

	if (!op)
		return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen, "request: unknown operation %u",
				    m->op);
	if (!m->tag[0] && !any)
		return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen,
				    "request: %s of an empty tag (a tag is needed)", op);
	if (!valid_tag(m->tag, any))
		return cms_ipc_fail(
			CMS_ERR_PROTOCOL, why, whylen,
			"request: %s: the tag is longer than %d bytes or holds a control "
			"character",
			op, CMS_TAG_MAX);
	return CMS_OK;
}

/* What decode checks beyond the wire format; encode checks the same before writing. */
static cms_status check_fields(const struct cms_ipc_msg *m, size_t nfds, char *why, size_t whylen)
{
	uint32_t i;

	switch (m->type) {
	case CMS_IPC_HELLO:
		if (!valid_tag(m->tag, 0) || m->device < -1 || m->device >= 64 ||
		    !valid_access(m->access))
			return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen,
					    "hello: bad tag, device %d or access %u", m->device,
					    m->access);
		return CMS_OK;
	case CMS_IPC_LAYOUT:
		return cms_ipc_check_layout(m, why, whylen);
	case CMS_IPC_FDS:
		if (!m->nfds || m->nfds != nfds || m->nfds > CMS_IPC_MAX_FDS ||
		    m->first >= CMS_IPC_MAX_ALLOCS || m->nfds > CMS_IPC_MAX_ALLOCS - m->first)
			return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen,
					    "descriptors: %u announced from %u, %zu received",
					    m->nfds, m->first, nfds);
		return CMS_OK;
	case CMS_IPC_MAPPED:
	case CMS_IPC_REVOKED:
	case CMS_IPC_ERROR:
		if (!valid_status(m->status) || (m->type == CMS_IPC_ERROR && !m->status))
			return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen, "status %d", m->status);
		return CMS_OK;
	case CMS_IPC_REVOKE:
	case CMS_IPC_CTL_PROGRESS:
		return CMS_OK;
	case CMS_IPC_CTL_REQUEST:
		return check_request(m, why, whylen);
	case CMS_IPC_CTL_REPLY:
		if (!valid_status(m->status) || m->nregions > CMS_IPC_MAX_REGIONS ||
		    (m->nregions && !m->regions))
			return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen,
					    "reply: status %d, %u regions", m->status, m->nregions);
		for (i = 0; i < m->nregions; i++)
			if (!valid_tag(m->regions[i].tag, 0) || m->regions[i].device < 0 ||
			    m->regions[i].device >= 64 || m->regions[i].state > CMS_STATE_PAUSED)
				return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen,
						    "reply: region %u", i);
		return CMS_OK;
	case CMS_IPC_CTL_STATS:
		if (!valid_status(m->status) || m->nstats > CMS_IPC_MAX_REGIONS ||
		    (m->nstats && !m->stats))
			return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen,
					    "stats: status %d, %u regions", m->status, m->nstats);
		for (i = 0; i < m->nstats; i++)
			if (!valid_tag(m->stats[i].tag, 0) || m->stats[i].device < 0 ||
			    m->stats[i].device >= 64 || m->stats[i].state > CMS_STATE_PAUSED)
				return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen,
						    "stats: region %u", i);
		return CMS_OK;
	default:
		return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen, "unknown message type %u",
				    m->type);
	}
}

/* A string field encode writes: at most max bytes, no control character. */
static cms_status check_string(const char *s, size_t max, const char *field, char *why,
			       size_t whylen)
{
	size_t n = strnlen(s, max + 1);

	if (n > max)
		return cms_ipc_fail(CMS_ERR_INVALID_ARGUMENT, why, whylen,
				    "%s: longer than %zu bytes", field, max);
	if (check_text(s, n))
		return cms_ipc_fail(CMS_ERR_INVALID_ARGUMENT, why, whylen, "%s: control character",
				    field);
	return CMS_OK;
}

/* ---- public functions ---- */

cms_status cms_ipc_decode_header(const uint8_t *hdr, uint16_t *type, uint32_t *payload,
				 uint32_t *nfds, char *why, size_t whylen)
{
	struct rd r = { hdr, CMS_IPC_HEADER_SIZE, 0, NULL };
	uint32_t magic = get_u32(&r, "magic");
	uint16_t version = get_u16(&r, "version");

	*type = get_u16(&r, "type");
	*payload = get_u32(&r, "length");
	*nfds = get_u32(&r, "descriptors");
	if (magic != CMS_IPC_MAGIC)
		return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen,
				    "not a cumemsaver message (magic 0x%08x)", magic);
	if (version != CMS_IPC_VERSION)
		return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen,
				    "protocol version %u is not supported (this library speaks %u)",
				    version, CMS_IPC_VERSION);
	if (*type < 1 || *type > CMS_IPC_TYPE_MAX)
		return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen, "unknown message type %u",
				    *type);
	if (*payload > CMS_IPC_MAX_PAYLOAD)
		return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen,
				    "payload of %u bytes, at most %u", *payload,
				    CMS_IPC_MAX_PAYLOAD);
	if (*nfds > CMS_IPC_MAX_FDS || (*nfds && *type != CMS_IPC_FDS))
		return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen,
				    "%u descriptors announced with message type %u", *nfds, *type);
	return CMS_OK;
}

static cms_status decode_payload(struct rd *r, struct cms_ipc_msg *m, char *why, size_t whylen)
{
	cms_status st = CMS_OK;
	uint32_t i, count;

	switch (m->type) {
	case CMS_IPC_HELLO:
		st = get_str(r, m->tag, CMS_TAG_MAX, "tag", why, whylen);
		m->device = get_i32(r, "device");
		m->access = get_u32(r, "access");
		if (!st)
			st = get_str(r, m->name, CMS_IPC_MAX_NAME, "name", why, whylen);
		break;
	case CMS_IPC_LAYOUT:
		st = get_str(r, m->tag, CMS_TAG_MAX, "tag", why, whylen);
		m->device = get_i32(r, "device");
		m->access = get_u32(r, "access");
		m->state = get_u32(r, "state");
		m->epoch = get_u64(r, "epoch");
		m->granularity = get_u64(r, "granularity");
		m->total = get_u64(r, "total");
		count = get_u32(r, "allocations");
		if (st || r->bad)
			break;
		if (count > CMS_IPC_MAX_ALLOCS || (size_t)count * 32 > r->n - r->off)
			return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen,
					    "layout: %u allocations do not fit the message", count);
		if (count) {
			m->allocs = calloc(count, sizeof(*m->allocs));
			if (!m->allocs)
				return cms_ipc_fail(CMS_ERR_OUT_OF_HOST_MEMORY, why, whylen,
						    "cannot allocate %u layout entries", count);
		}
		m->nallocs = count;
		for (i = 0; i < count; i++) {
			m->allocs[i].offset = get_u64(r, "offset");
			m->allocs[i].size = get_u64(r, "size");
			m->allocs[i].physical = get_u64(r, "physical");
			m->allocs[i].exporter_ptr = get_u64(r, "pointer");
		}
		break;
	case CMS_IPC_FDS:
		m->first = get_u32(r, "first");
		count = get_u32(r, "count");
		if (!r->bad && count != m->nfds)
			return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen,
					    "descriptors: header announces %u, payload %u", m->nfds,
					    count);
		break;
	case CMS_IPC_MAPPED:
	case CMS_IPC_REVOKED:
		m->seq = get_u64(r, "seq");
		m->status = get_i32(r, "status");
		break;
	case CMS_IPC_REVOKE:
		m->seq = get_u64(r, "seq");
		break;
	case CMS_IPC_ERROR:
		m->status = get_i32(r, "status");
		st = get_str(r, m->text, CMS_IPC_MAX_TEXT, "text", why, whylen);
		break;
	case CMS_IPC_CTL_REQUEST:
		m->op = get_u32(r, "op");
		st = get_str(r, m->tag, CMS_TAG_MAX, "tag", why, whylen);
		break;
	case CMS_IPC_CTL_PROGRESS:
		st = get_str(r, m->text, CMS_IPC_MAX_TEXT, "text", why, whylen);
		break;
	case CMS_IPC_CTL_REPLY:
		m->status = get_i32(r, "status");
		st = get_str(r, m->text, CMS_IPC_MAX_TEXT, "text", why, whylen);
		m->bytes = get_u64(r, "bytes");
		m->elapsed_ns = get_u64(r, "elapsed");
		m->driver_free_before = get_u64(r, "free before");
		m->driver_free_after = get_u64(r, "free after");
		count = get_u32(r, "regions");
		if (st || r->bad)
			break;
		/* each entry is at least 2 + 4 * 4 + 5 * 8 = 58 bytes */
		if (count > CMS_IPC_MAX_REGIONS || (size_t)count * 58 > r->n - r->off)
			return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen,
					    "reply: %u regions do not fit the message", count);
		if (count) {
			m->regions = calloc(count, sizeof(*m->regions));
			if (!m->regions)
				return cms_ipc_fail(CMS_ERR_OUT_OF_HOST_MEMORY, why, whylen,
						    "cannot allocate %u region entries", count);
		}
		m->nregions = count;
		for (i = 0; i < count && !st; i++) {
			struct cms_ipc_region_status *s = &m->regions[i];

			st = get_str(r, s->tag, CMS_TAG_MAX, "region tag", why, whylen);
			s->device = get_i32(r, "region device");
			s->policy = get_u32(r, "region policy");
			s->state = get_u32(r, "region state");
			s->importers = get_u32(r, "region importers");
			s->allocations = get_u64(r, "region allocations");
			s->logical_bytes = get_u64(r, "region logical");
			s->physical_bytes = get_u64(r, "region physical");
			s->backed_bytes = get_u64(r, "region backed");
			s->epoch = get_u64(r, "region epoch");
		}
		break;
	case CMS_IPC_CTL_STATS:
		m->status = get_i32(r, "status");
		st = get_str(r, m->text, CMS_IPC_MAX_TEXT, "text", why, whylen);
		count = get_u32(r, "regions");
		if (st || r->bad)
			break;
		if (count > CMS_IPC_MAX_REGIONS || (size_t)count * STATS_MIN > r->n - r->off)
			return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen,
					    "stats: %u regions do not fit the message", count);
		if (count) {
			m->stats = calloc(count, sizeof(*m->stats));
			if (!m->stats)
				return cms_ipc_fail(CMS_ERR_OUT_OF_HOST_MEMORY, why, whylen,
						    "cannot allocate %u stats entries", count);
		}
		m->nstats = count;
		for (i = 0; i < count && !st; i++) {
			struct cms_ipc_region_stats *s = &m->stats[i];
			uint64_t *c[] = STATS_COUNTERS(s);
			size_t k;

			st = get_str(r, s->tag, CMS_TAG_MAX, "stats tag", why, whylen);
			s->device = get_i32(r, "stats device");
			s->policy = get_u32(r, "stats policy");
			s->state = get_u32(r, "stats state");
			for (k = 0; k < sizeof(c) / sizeof(c[0]); k++)
				*c[k] = get_u64(r, "stats counter");
			for (k = 0; k < CMS_IPC_STATS_SLOTS; k++)
				s->failures_by_status[k] = get_u64(r, "stats failures");
		}
		break;
	default:
		return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen, "unknown message type %u",
				    m->type);
	}
	if (st)
		return st;
	if (r->bad)
		return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen,
				    "message ends inside field \"%s\"", r->bad);
	if (r->off != r->n)
		return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen,
				    "%zu unexpected bytes after the message", r->n - r->off);
	return CMS_OK;
}

cms_status cms_ipc_decode(const uint8_t *buf, size_t len, size_t nfds_received,
			  struct cms_ipc_msg *m, char *why, size_t whylen)
{
	struct rd r;
	uint32_t payload, nfds;
	uint16_t type;
	cms_status st;

	memset(m, 0, sizeof(*m));
	if (!buf || len < CMS_IPC_HEADER_SIZE)
		return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen,
				    "message of %zu bytes: no header", len);
	st = cms_ipc_decode_header(buf, &type, &payload, &nfds, why, whylen);
	if (st)
		return st;
	if (len - CMS_IPC_HEADER_SIZE != payload)
		return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen,
				    "header announces %u payload bytes, %zu present", payload,
				    len - CMS_IPC_HEADER_SIZE);
	if (nfds != nfds_received)
		return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen,
				    "header announces %u descriptors, %zu received", nfds,
				    nfds_received);
	m->type = type;
	m->nfds = nfds;
	r.p = buf + CMS_IPC_HEADER_SIZE;
	r.n = payload;
	r.off = 0;
	r.bad = NULL;
	st = decode_payload(&r, m, why, whylen);
	if (!st)
		st = check_fields(m, nfds_received, why, whylen);
	if (st)
		cms_ipc_msg_free(m); /* nothing stays allocated after a refusal */
	return st;
}

cms_status cms_ipc_encode(const struct cms_ipc_msg *m, uint8_t **out, size_t *len, char *why,
			  size_t whylen)
{
	struct wr w = { NULL, 0, 0, 0 };
	size_t payload;
	uint32_t i;
	cms_status st;

	*out = NULL;
	*len = 0;
	st = check_string(m->tag, CMS_TAG_MAX, "tag", why, whylen);
	if (!st)
		st = check_string(m->name, CMS_IPC_MAX_NAME, "name", why, whylen);
	if (!st)
		st = check_string(m->text, CMS_IPC_MAX_TEXT, "text", why, whylen);
	if (!st)
		st = check_fields(m, m->nfds, why, whylen);
	if (st)
		return CMS_ERR_INVALID_ARGUMENT;
	put_le(&w, CMS_IPC_MAGIC, 4);
	put_le(&w, CMS_IPC_VERSION, 2);
	put_le(&w, m->type, 2);
	put_le(&w, 0, 4); /* length, patched below */
	put_le(&w, m->type == CMS_IPC_FDS ? m->nfds : 0, 4);
	switch (m->type) {
	case CMS_IPC_HELLO:
		put_str(&w, m->tag);
		put_le(&w, (uint32_t)m->device, 4);
		put_le(&w, m->access, 4);
		put_str(&w, m->name);
		break;
	case CMS_IPC_LAYOUT:
		put_str(&w, m->tag);
		put_le(&w, (uint32_t)m->device, 4);
		put_le(&w, m->access, 4);
		put_le(&w, m->state, 4);
		put_le(&w, m->epoch, 8);
		put_le(&w, m->granularity, 8);
		put_le(&w, m->total, 8);
		put_le(&w, m->nallocs, 4);
		for (i = 0; i < m->nallocs; i++) {
			put_le(&w, m->allocs[i].offset, 8);
			put_le(&w, m->allocs[i].size, 8);
			put_le(&w, m->allocs[i].physical, 8);
			put_le(&w, m->allocs[i].exporter_ptr, 8);
		}
		break;
	case CMS_IPC_FDS:
		put_le(&w, m->first, 4);
		put_le(&w, m->nfds, 4);
		break;
	case CMS_IPC_MAPPED:
	case CMS_IPC_REVOKED:
		put_le(&w, m->seq, 8);
		put_le(&w, (uint32_t)m->status, 4);
		break;
	case CMS_IPC_REVOKE:
		put_le(&w, m->seq, 8);
		break;
	case CMS_IPC_ERROR:
		put_le(&w, (uint32_t)m->status, 4);
		put_str(&w, m->text);
		break;
	case CMS_IPC_CTL_REQUEST:
		put_le(&w, m->op, 4);
		put_str(&w, m->tag);
		break;
	case CMS_IPC_CTL_PROGRESS:
		put_str(&w, m->text);
		break;
	case CMS_IPC_CTL_REPLY:
		put_le(&w, (uint32_t)m->status, 4);
		put_str(&w, m->text);
		put_le(&w, m->bytes, 8);
		put_le(&w, m->elapsed_ns, 8);
		put_le(&w, m->driver_free_before, 8);
		put_le(&w, m->driver_free_after, 8);
		put_le(&w, m->nregions, 4);
		for (i = 0; i < m->nregions; i++) {
			const struct cms_ipc_region_status *s = &m->regions[i];

			put_str(&w, s->tag);
			put_le(&w, (uint32_t)s->device, 4);
			put_le(&w, s->policy, 4);
			put_le(&w, s->state, 4);
			put_le(&w, s->importers, 4);
			put_le(&w, s->allocations, 8);
			put_le(&w, s->logical_bytes, 8);
			put_le(&w, s->physical_bytes, 8);
			put_le(&w, s->backed_bytes, 8);
			put_le(&w, s->epoch, 8);
		}
		break;
	case CMS_IPC_CTL_STATS:
		put_le(&w, (uint32_t)m->status, 4);
		put_str(&w, m->text);
		put_le(&w, m->nstats, 4);
		for (i = 0; i < m->nstats; i++) {
			struct cms_ipc_region_stats *s = &m->stats[i];
			uint64_t *c[] = STATS_COUNTERS(s);
			size_t k;

			put_str(&w, s->tag);
			put_le(&w, (uint32_t)s->device, 4);
			put_le(&w, s->policy, 4);
			put_le(&w, s->state, 4);
			for (k = 0; k < sizeof(c) / sizeof(c[0]); k++)
				put_le(&w, *c[k], 8);
			for (k = 0; k < CMS_IPC_STATS_SLOTS; k++)
				put_le(&w, s->failures_by_status[k], 8);
		}
		break;
	default:
		break; /* refused by check_fields */
	}
	if (w.oom) {
		free(w.p);
		return cms_ipc_fail(CMS_ERR_OUT_OF_HOST_MEMORY, why, whylen,
				    "cannot allocate a message");
	}
	payload = w.n - CMS_IPC_HEADER_SIZE;
	if (payload > CMS_IPC_MAX_PAYLOAD) {
		free(w.p);
		return cms_ipc_fail(CMS_ERR_INVALID_ARGUMENT, why, whylen,
				    "message of %zu bytes is too long", payload);
	}
	for (i = 0; i < 4; i++)
		w.p[8 + i] = (uint8_t)(payload >> (8 * i));
	*out = w.p;
	*len = w.n;
	return CMS_OK;
}

void cms_ipc_msg_free(struct cms_ipc_msg *m)
{
	free(m->allocs);
	free(m->regions);
	free(m->stats);
	memset(m, 0, sizeof(*m));
}

void cms_ipc_msg_error(struct cms_ipc_msg *m, cms_status st, const char *text)
{
	memset(m, 0, sizeof(*m));
	m->type = CMS_IPC_ERROR;
	m->status = st < 0 ? st : CMS_ERR_INTERNAL;
	snprintf(m->text, sizeof(m->text), "%s", text);
	for (char *p = m->text; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = ' ';
}
