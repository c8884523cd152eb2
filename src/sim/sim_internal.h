/* SPDX-License-Identifier: MIT */
/*
 * sim_internal.h - shared state of the host simulation of the CUDA driver.
 *
 * Locking: one global read-write lock (sim.lock) protects every object set
 * and the per-device accounting. Copies and memsets take it for reading (so
 * they run in parallel but no mapping can change under them); everything that
 * changes state takes it for writing. The call counter and the fault table
 * have their own mutex (sim_core.c). No lock is held while a memfd is created
 * or filled.
 */
#ifndef CMS_SIM_INTERNAL_H
#define CMS_SIM_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "../driver/cuda_api.h"
#include "cumemsaver_sim.h"

#define SIM_EXPORT __attribute__((visibility("default")))

/* Result codes the driver has but cuda_api.h does not list. */
#define SIM_ERROR_ILLEGAL_STATE 401
#define SIM_ERROR_STREAM_CAPTURE_INVALIDATED 901
/* cuGetProcAddress symbol status */
#define SIM_PROC_SYMBOL_NOT_FOUND 1
#define SIM_PROC_VERSION_NOT_SUFFICIENT 2

/* Every object lives in a set keyed by base (an address, an id or its own pointer). */
struct sim_range {
	uint64_t base;
	uint64_t size;
};

/* Sorted array of non-overlapping ranges. */
struct sim_set {
	struct sim_range **v;
	size_t n;
	size_t cap;
};

/* Backing store of a physical allocation: a memfd. */
struct sim_phys {
	struct sim_phys *next; /* list of live physical allocations */
	int fd;
	int device;
	uint64_t size;
	uint64_t counted; /* bytes charged to device's capacity (0 when imported) */
	uint64_t refs;	  /* handles + mappings */
	dev_t st_dev;
	ino_t st_ino;
};

struct sim_handle {
	struct sim_range r; /* base = handle id, size = 1 */
	struct sim_phys *phys;
	int handle_types; /* requested handle types */
	uint64_t refs;	  /* 1 + cuMemRetainAllocationHandle calls not yet released */
};

struct sim_reservation {
	struct sim_range r;
};

struct sim_mapping {
	struct sim_range r;
	struct sim_phys *phys;
	uint64_t handle;	 /* the handle mapped (cuMemRetainAllocationHandle) */
	int handle_types;	 /* its requested handle types */
	unsigned char *prot;	 /* access flags per granule: the widest given to any device */
	unsigned char *dev_prot; /* per granule, CMSSIM_MAX_DEVICES flags each: per device */
};

/* One recorded operation (capture node / graph node). */
enum sim_op_kind {
	SIM_OP_DTOH,
	SIM_OP_HTOD,
	SIM_OP_DTOD,
	SIM_OP_MEMSET8,
	SIM_OP_MEMSET32,
};

struct sim_op {
	int kind;
	uint64_t dst;	/* device address, or host address for DTOH */
	uint64_t src;	/* device address, or host address for HTOD */
	uint64_t bytes; /* bytes touched */
	unsigned int value;
};

struct sim_ops {
	struct sim_op *v;
	size_t n;
	size_t cap;
};

struct CUgraph_st {
	struct sim_range r; /* base = own address */
	struct sim_ops ops;
};

struct CUgraphExec_st {
	struct sim_range r;
	struct sim_ops ops;
};

struct CUstream_st {
	struct sim_range r;
	unsigned int flags;
	int device;
	struct CUgraph_st *capture; /* non-NULL while capturing */
};

struct CUevent_st {
	struct sim_range r;
	unsigned int flags;
	int recorded;
};

struct CUctx_st {
	int device;
};

struct sim_state {
	pthread_rwlock_t lock;
	int initialized; /* atomic */

	/* configuration (set once) */
	int ndev;
	int gdr;
	int chunk_granules; /* CMS_SIM_CHUNK_GRANULES (cmssim_chunk_granules) */
	char tunables[160]; /* the library's (cmssim_tunables), with chunk_granules */
	int poison;	    /* -1: do not fill */
	uint64_t gran;

	/* per device, under lock */
	uint64_t capacity[CMSSIM_MAX_DEVICES];
	uint64_t used[CMSSIM_MAX_DEVICES];
	int ctx_refs[CMSSIM_MAX_DEVICES]; /* atomic reads outside the lock */
	struct CUctx_st ctx[CMSSIM_MAX_DEVICES];

	struct sim_set reservations;
	struct sim_set mappings;
	struct sim_set handles;
	struct sim_set streams;
	struct sim_set events;
	struct sim_set graphs;
	struct sim_set execs;
	struct sim_phys *phys_list;
	uint64_t nphys;
	uint64_t next_handle;

	uint64_t host_buffers;
	uint64_t host_bytes;
	struct sim_set host_regs; /* cuMemHostRegister ranges */
	uint64_t modules;	  /* the checksum kernel's modules loaded (sim_ctx.c) */
	uint64_t host_reg_bytes;

	/* peer[d][p]: device d may access memory of device p (set once, then under lock) */
	unsigned char peer[CMSSIM_MAX_DEVICES][CMSSIM_MAX_DEVICES];
};

extern struct sim_state sim;

/* SIM_TSAN: defined in a ThreadSanitizer build (GCC or clang). */
#if defined(__SANITIZE_THREAD__)
#define SIM_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SIM_TSAN 1
#endif
#endif

/*
 * sim_copy.c: the simulated device's transfers (copies, memsets, the poison fill). On a GPU
 * these are DMA and kernels, which ThreadSanitizer never sees; here they are host memcpy and
 * memset, whose every byte ThreadSanitizer would check (most of a sanitized test's time). In a
 * ThreadSanitizer build only the first and last SIM_TSAN_EDGE bytes of each side, and one byte
 * at each SIM_TSAN_STRIDE-aligned address between them, are reported to it: a race on a buffer
 * being copied is still seen, and so is one between two transfers that share SIM_TSAN_STRIDE
 * bytes or more. Small and overlapping moves are checked whole. Other builds copy the same
 * bytes, all of them checked by the sanitizer there is (ASan).
 */
#define SIM_TSAN_EDGE 64
#define SIM_TSAN_STRIDE (64 * 1024)
void sim_device_move(void *dst, const void *src, size_t n);
void sim_device_set(void *dst, int byte, size_t n);

/* sim_core.c */
void sim_setup(void);
int sim_config_error(void);
CUresult sim_enter(const char *fn, int need_init);
int sim_known_function(const char *fn);
uint64_t sim_parse_size(const char *s, int *ok);
/* pthread_atfork handlers of sim_io.c's lock (called by sim_core.c's). */
void sim_io_fork_prepare(void);
void sim_io_fork_parent(void);
void sim_io_fork_child(void);

void sim_rdlock(void);
void sim_wrlock(void);
void sim_unlock(void);
CUresult sim_current_device(int *device);
/* Device of the calling thread's current context, or -1 when none is current (no checks). */
int sim_thread_device(void);
/* Copy gate (cmssim_copy_gate): waits there when armed. No lock held. */
void sim_copy_gate_pass(void);

ssize_t sim_set_floor(const struct sim_set *s, uint64_t key);
struct sim_range *sim_set_find(const struct sim_set *s, uint64_t key);
struct sim_range *sim_set_containing(const struct sim_set *s, uint64_t addr, ssize_t *idx);
int sim_set_insert(struct sim_set *s, struct sim_range *r);
void sim_set_remove(struct sim_set *s, uint64_t key);
void sim_set_remove_at(struct sim_set *s, size_t idx, size_t count);

/* Runs the library's checksum kernel (kernels/checksum.h) in stream order: for each of the
 * ntasks struct cms_checksum_task at device address tasks, its checksum is added to the 64-bit
 * sums[slot] at device address sums. All device ranges are checked before any runs. */
CUresult sim_checksum_launch(uint64_t tasks, uint64_t ntasks, uint64_t sums, CUstream stream);

/* sim_vmm.c */
/* Access check of a copy: device dev's rights (dev < 0: any device's, the widest). */
CUresult sim_check_access(uint64_t addr, uint64_t bytes, int need_write, int dev);
int sim_in_reservation(uint64_t addr, uint64_t bytes);

/* sim_host.c */
/* A host range of a copy: inside one registration or outside all of them (read lock held). */
CUresult sim_check_host_registration(uint64_t host, uint64_t bytes);
/* In a child created by fork() (pthread_atfork, every lock held or new): no registration. */
void sim_host_fork_child(void);

/* sim_errors.c */
int sim_error_lookup(CUresult error, const char **name, const char **string);

/* Prototypes of every driver entry point, checked against the X-macro. */
/* The library's tunables with the simulation ("key=value,...", engine/tunables.c); found by the
 * library's driver loader (dlsym), not a part of cumemsaver_sim.h. */
SIM_EXPORT const char *cmssim_tunables(void);
#define SIM_DECLARE(name, ret, params) SIM_EXPORT ret name params;
CMS_CUDA_FUNCTIONS(SIM_DECLARE)
#undef SIM_DECLARE
SIM_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
					unsigned long long flags, int *status);
SIM_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version,
				     unsigned long long flags);

/* Entry helpers: count the call, apply faults, check cuInit. */
#define SIM_ENTER(fn)                                      \
	do {                                               \
		CUresult sim_enter_rc_ = sim_enter(fn, 1); \
		if (sim_enter_rc_ != CUDA_SUCCESS)         \
			return sim_enter_rc_;              \
	} while (0)

#endif /* CMS_SIM_INTERNAL_H */
