/* SPDX-License-Identifier: MIT */
/*
 * cumemsaver_sim.h - control API of libcumemsaver-sim, the host simulation of
 * the subset of the CUDA driver API that cumemsaver uses.
 *
 * The simulation exports the driver entry points (cuInit, cuMemCreate, ...,
 * cuGetProcAddress_v2) so that a program that loads the driver with
 * dlopen()/dlsym() can load libcumemsaver-sim.so instead of libcuda.so.1.
 * The functions below are extra: tests use them to inject faults, change the
 * device capacity and read live-object counters. All of them are thread-safe,
 * may be called before cuInit() and never print, abort or exit.
 *
 * A program normally resolves them with dlsym() on the handle it got from
 * dlopen() of the simulation (so the program runs unchanged on a real GPU,
 * where they do not exist), but it may also link the library directly.
 *
 * See docs/simulation.md for the environment variables and what the
 * simulation does not model.
 */
#ifndef CUMEMSAVER_SIM_H
#define CUMEMSAVER_SIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CMSSIM_API __attribute__((visibility("default")))
#else
#define CMSSIM_API
#endif

/* Most simulated devices (CMS_SIM_DEVICES is clamped to this). */
#define CMSSIM_MAX_DEVICES 8
/* Most faults armed at once (cmssim_fail_call, cmssim_fail_host_alloc). */
#define CMSSIM_MAX_FAULTS 32
/* Byte written into fresh physical memory unless CMS_SIM_POISON says otherwise. */
#define CMSSIM_DEFAULT_POISON 0xA5

/* Version string of the simulation; its presence tells a test that the sim is loaded. */
#define CMSSIM_VERSION_STRING "cumemsaver-sim 1.0.0"

/*
 * Live-object counters, a snapshot taken under the simulation's lock.
 *
 * Set struct_size to sizeof(cmssim_counters) before the call (or use
 * CMSSIM_COUNTERS_INIT); fields are only ever appended, and the simulation
 * fills min(struct_size, its own size) bytes.
 */
typedef struct cmssim_counters {
	uint64_t struct_size;	       /* in: caller's sizeof(cmssim_counters), left unchanged */
	uint64_t reservations;	       /* cuMemAddressReserve ranges not yet freed */
	uint64_t handles;	       /* handles created or imported and not released */
	uint64_t physical_allocations; /* backing objects alive, incl. released but still mapped */
	uint64_t mappings;	       /* cuMemMap ranges not yet unmapped */
	uint64_t device_used_bytes[CMSSIM_MAX_DEVICES]; /* physical bytes counted per device */
	uint64_t streams;				/* live CUstream objects */
	uint64_t events;				/* live CUevent objects */
	uint64_t graphs;				/* live CUgraph objects (ended captures) */
	uint64_t graph_execs;				/* live CUgraphExec objects */
	uint64_t primary_ctx_refs;	/* sum over devices of primary context retain counts */
	uint64_t host_buffers;		/* allowed cmssim_host_alloc_hook calls minus frees */
	uint64_t host_buffer_bytes;	/* bytes of those */
	uint64_t calls;			/* counted driver calls so far (cmssim_call_count) */
	uint64_t host_registrations;	/* cuMemHostRegister ranges not yet unregistered */
	uint64_t host_registered_bytes; /* bytes of those */
	/* Modules loaded and not unloaded: the library's checksum kernel (CMS_REGION_VERIFY), the
	 * only image the simulation loads (its launches run a C implementation of it). */
	uint64_t modules;
} cmssim_counters;

#define CMSSIM_COUNTERS_INIT                           \
	{                                              \
		.struct_size = sizeof(cmssim_counters) \
	}

/* Returns CMSSIM_VERSION_STRING. Never NULL. */
CMSSIM_API const char *cmssim_version(void);

/*
 * Number of simulated devices (CMS_SIM_DEVICES, default 1, at most
 * CMSSIM_MAX_DEVICES).
 */
CMSSIM_API int cmssim_device_count(void);

/*
 * Sets the physical capacity of @device to @bytes from now on. Memory already
 * created stays; a lower capacity than what is in use makes every further
 * cuMemCreate on that device fail with CUDA_ERROR_OUT_OF_MEMORY and
 * cuMemGetInfo report 0 free bytes. Returns 0, or -1 for an invalid device.
 */
CMSSIM_API int cmssim_set_capacity(int device, uint64_t bytes);

/* Capacity of @device in bytes, or 0 for an invalid device. */
CMSSIM_API uint64_t cmssim_get_capacity(int device);

/*
 * Number of counted driver calls since the library was loaded: every driver
 * entry point except cuGetProcAddress, cuGetProcAddress_v2, cuGetErrorName,
 * cuGetErrorString and cuDriverGetVersion, whether it succeeds or not
 * (calls made before cuInit and calls failed by a fault count too).
 */
CMSSIM_API uint64_t cmssim_call_count(void);

/*
 * Arms a fault: the @nth counted driver call from now (1-based) whose name is
 * @fn (a base name such as "cuMemCreate"; NULL or "any" matches every counted
 * call) returns @result (a CUresult, non-zero) without doing anything. The
 * fault then disarms itself. Several faults may be armed at once (up to
 * CMSSIM_MAX_FAULTS); a call decrements every fault it matches, and when
 * several fire on the same call the one armed first gives the result.
 * Returns 0, or -1 if @nth is 0, @result is 0, @fn is not a simulated driver
 * entry point or the table is full.
 */
CMSSIM_API int cmssim_fail_call(const char *fn, uint64_t nth, int result);

/*
 * Arms a host allocation fault: the @nth call of cmssim_host_alloc_hook from
 * now (1-based) returns non-zero. Returns 0, or -1 if @nth is 0 or the
 * fault table is full.
 */
CMSSIM_API int cmssim_fail_host_alloc(uint64_t nth);

/* Disarms every armed fault (driver calls and host allocations). */
CMSSIM_API void cmssim_clear_faults(void);

/* Number of faults armed and not yet fired. */
CMSSIM_API int cmssim_armed_faults(void);

/*
 * Host allocation hook for the library under test. The library calls it
 * (when the loaded driver exports it) before each host buffer it allocates:
 * returns 0 to allow the allocation, which then counts as one live host
 * buffer of @bytes, or non-zero (an armed host allocation fault fired) to
 * make the library behave as if its allocation had failed; a refused
 * allocation is not counted and must not be passed to the free hook.
 */
CMSSIM_API int cmssim_host_alloc_hook(size_t bytes);

/* Counterpart of an allowed cmssim_host_alloc_hook(@bytes): one buffer fewer. */
CMSSIM_API void cmssim_host_free_hook(size_t bytes);

/* File I/O operations of cmssim_fail_io and cmssim_io_hook (DISK policy files). */
#define CMSSIM_IO_WRITE 1 /* a pwrite of a DISK region's file */
#define CMSSIM_IO_READ 2  /* a pread of a DISK region's file */
#define CMSSIM_IO_SYNC 3  /* the fdatasync of a DISK region's file that ends a pause */

/*
 * Arms a file I/O fault: the @nth file operation @op (CMSSIM_IO_*) of the
 * library from now (1-based) fails with errno @err (e.g. ENOSPC, EIO)
 * without touching the file; the fault then disarms itself. One fault per
 * op; arming again replaces it, @nth 0 with @err 0 disarms it. Independent of
 * cmssim_clear_faults. Returns 0, or -1 for an unknown op or only one of @nth
 * and @err zero.
 */
CMSSIM_API int cmssim_fail_io(int op, uint64_t nth, int err);

/*
 * File I/O hook for the library under test: called (when the loaded driver
 * exports it) before each pwrite/pread/fdatasync of a DISK region's file. Returns 0, or
 * the errno with which that operation must fail (an armed fault fired).
 */
CMSSIM_API int cmssim_io_hook(int op);

/*
 * Copies a snapshot of the counters into @out: min(out->struct_size,
 * sizeof(cmssim_counters)) bytes, struct_size itself left as the caller set
 * it. Returns 0, or -1 if @out is NULL or out->struct_size < 8.
 */
CMSSIM_API int cmssim_get_counters(cmssim_counters *out);

/*
 * Granules of a chunk (cumemsaver's CMS_REGION_COALESCE regions carve their
 * allocations from chunks of this many granules on the simulation; 64 MiB on
 * a real driver): $CMS_SIM_CHUNK_GRANULES, 16 by default (small tests fill
 * several), 0 for none (every allocation gets its own handle until a resume
 * coalesces it, as before chunks). Read by the library when it loads the
 * simulation; invalid values make cuInit fail, as the other variables.
 */
CMSSIM_API int cmssim_chunk_granules(void);

/* ---- several devices ------------------------------------------------------ */

/*
 * Like cmssim_fail_call, but counts only the calls made while a context of
 * @device is current on the calling thread (cuCtxPushCurrent). With one
 * worker thread per device, as cumemsaver runs a pause or resume spanning
 * devices, the @nth such call is the same from run to run although the
 * devices' threads interleave differently. Calls made with no context
 * current (VMM calls from a thread that pushed none) never match. Returns
 * 0, or -1 as cmssim_fail_call or for an invalid @device.
 */
CMSSIM_API int cmssim_fail_call_device(const char *fn, int device, uint64_t nth, int result);

/*
 * Whether @device may access memory of @peer (cuDeviceCanAccessPeer, and
 * cuMemSetAccess of a mapping of @peer's memory for @device). Every pair of
 * distinct devices can by default (CMS_SIM_PEER=0 makes none able to); a
 * device is never its own peer. Returns 0, or -1 for invalid devices or
 * @device == @peer.
 */
CMSSIM_API int cmssim_set_peer_access(int device, int peer, int can);

/*
 * Access flags (CU_MEM_ACCESS_FLAGS_PROT_NONE 0, READ 1, READWRITE 3) that
 * the last cuMemSetAccess covering the mapped byte at @addr gave @device
 * (0 when none did since it was mapped: a new mapping has no access), or -1
 * when @addr is not mapped or @device is invalid. Copies and memsets check
 * the access of the device whose context is current.
 */
CMSSIM_API int cmssim_get_access(uint64_t addr, int device);

/*
 * Copy gate: a test's proof that several threads copy at once. After
 * cmssim_copy_gate(@threads, @timeout_ms), each copy or memset call
 * (cuMemcpy*, cuMemset*, cuGraphLaunch) waits, before it touches anything,
 * until @threads calls are waiting together (the gate then opens for all:
 * "met") or until @timeout_ms passed for one of them (it opens: "timed
 * out"). Calls on one thread can never meet it. @threads <= 0 disarms it.
 * Returns 0, or -1 if @threads is larger than 64.
 */
CMSSIM_API int cmssim_copy_gate(int threads, uint32_t timeout_ms);

/* The gate's outcome: 1 met, 0 timed out, -1 still armed (or never armed). */
CMSSIM_API int cmssim_copy_gate_result(void);

#ifdef __cplusplus
}
#endif

#endif /* CUMEMSAVER_SIM_H */
