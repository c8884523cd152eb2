/* SPDX-License-Identifier: MIT */
/*
 * bench.h - shared state of cms-bench, the benchmark of cumemsaver against
 * the driver floor measured in the same run (docs/bench.md).
 *
 * Its files, each calling only the ones below it (never up, never sideways
 * between the workloads):
 *
 *   cms-bench.c         options, the run, main
 *   bench_report.c      the table on stdout and the JSON file (each workload's
 *                       own table and keys come from its file)
 *   bench_work.c        the workloads: (a)-(d), (f) and (h);
 *   bench_swap.c          (e), cms_swap;
 *   bench_frozen.c        (o), a frozen HOST region against DISCARD;
 *   bench_disk.c          (g), the DISK policy, with the disk's floor;
 *   bench_nonret.c        (k), non-retaining HOST pauses against their floor;
 *   bench_multi.c         --devices: (a) and (c) on 1 and on N devices
 *   bench_prepare.c       (l)'s preparation: its wait and a device copy loop meanwhile
 *   bench_multi_floor.c the driver's multi-device floor of (a)
 *   bench_check.c       the checks after a cycle: HOST content pattern, addresses
 *   bench_floor.c       the floors: raw VMM calls, pinned copy bandwidth
 *   bench_common.c      helpers, timings' medians, driver choice, device setup
 *
 * bench_common.c and bench_floor.c are also the base of the lab's experiments
 * (library cms_bench_base).
 */
#ifndef CMS_BENCH_H
#define CMS_BENCH_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "cumemsaver.h"
#include "driver.h"
#include "tool_common.h"

#define BENCH_DEVICE 0
#define BENCH_MAX_CYCLES 1000u
#define BENCH_DEFAULT_CYCLES 6u
#define BENCH_DEFAULT_SIM_SCALE 64u
#define BENCH_MAX_SCALE 1048576u
#define BENCH_FLOOR_REPS 5u		   /* timed repetitions of each floor (after one warm-up) */
#define BENCH_SLOW_CYCLE_NS 10000000000ull /* a cycle slower than 10 s: stop after 2 cycles */
#define BENCH_STAGE_BYTES (64ull << 20)	   /* host staging buffer for fills and checks */
#define BENCH_SAMPLE_BUDGET (384ull << 20) /* bytes checked per cycle at --scale 1 */
#define BENCH_SAMPLE_MAX_WINDOW (2ull << 20)
#define BENCH_SAMPLE_MIN_WINDOW 4096ull

enum bench_mode { BENCH_AUTO, BENCH_SIM, BENCH_GPU };

/* Workloads, in the order. */
enum {
	BENCH_WA,
	BENCH_WB,
	BENCH_WC,
	BENCH_WD,
	BENCH_WE,
	BENCH_WF,
	BENCH_WG,
	BENCH_WH,
	BENCH_WI, /* (c) with CMS_REGION_RELEASE_HOST: every cycle a first cycle (issue 17 item 3)
		   */
	BENCH_WJ, /* (i) with CMS_REGION_HOST_PAGEABLE: pageable backups through staging */
	BENCH_WK, /* non-retaining HOST pauses swept over sizes, model pool and 1 GiB (issue 27) */
	BENCH_WL, /* (c) with CMS_REGION_PREPARE: backups prepared ahead (issue 27 item 2) */
	BENCH_WM, /* (c) with CMS_REGION_VERIFY: verified backups (issue 27 item 4) */
	BENCH_WN, /* (d) with CMS_REGION_VERIFY */
	BENCH_WO, /* (c) frozen (cms_region_freeze) against a DISCARD pause of its layout */
	BENCH_NWORK
};

/* VMM floors: (a) 32 x 1 GiB, (b) 16 x 1 GiB and 2048 x 8 MiB. */
enum { BENCH_VA, BENCH_VB_1G, BENCH_VB_ALLOC, BENCH_NVMM };

/* A set of timings: the first and the median of the rest (or of all, for floors). */
struct bench_vmm_floor {
	const char *label; /* "a", "b-1g", "b-alloc" */
	uint64_t count;	   /* handles */
	uint64_t size;	   /* bytes per handle */
	bool wanted;
	bool measured;
	unsigned int reps;
	double back_ms;	   /* median over reps: cuMemCreate + cuMemMap + cuMemSetAccess */
	double release_ms; /* median over reps: cuMemUnmap + cuMemRelease */
	double back_min_ms;
	double release_min_ms;
};

struct bench_copy_floor {
	bool wanted;
	bool measured;
	uint64_t bytes; /* per direction */
	uint64_t chunk;
	unsigned int reps;
	unsigned int touch_threads;
	double touch_s;	   /* faulting in 2 x bytes of fresh pageable memory */
	double register_s; /* cuMemHostRegister of those 2 x bytes, touched */
	double d2h_gbs;	   /* medians, 1e9 bytes/s */
	double h2d_gbs;
	double bidir_gbs; /* both directions at once, total bytes moved / time */
};

struct bench_work {
	char id;	  /* 'a'.. */
	const char *what; /* "32 x 1 GiB DISCARD" at --scale 1 */
	uint32_t policy;  /* CMS_POLICY_* */
	uint64_t flags;	  /* CMS_REGION_* its region is created with */
	/* cms_region_info.flags of its region (JSON region_flags) */
	uint64_t region_flags;
	uint64_t count0; /* allocations at --scale 1 */
	uint64_t size0;	 /* bytes per allocation at --scale 1 */
	bool implemented;
	bool async; /* (f): resume with CMS_RESUME_ASYNC, then work on a stream of the tool */
	bool selected;
	int vmm_floor; /* BENCH_V*, or -1 */
	/* set by the run */
	uint64_t count;
	uint64_t size;
	uint64_t logical;
	uint64_t physical;
	uint64_t window; /* HOST: bytes checked at the start, middle and end of each allocation */
	bool ran;
	bool failed;
	bool truncated; /* stopped after 2 cycles because a cycle took > 10 s */
	unsigned int cycles_done;
	uint64_t *pause_ns;
	uint64_t *resume_ns;
	double fill_s;
	uint64_t rss_after_pause; /* VmRSS after the first pause */
	/* VmRSS before the pause, after it and after the resume: per cycle (HOST, (a)-(d), (f),
	 * (h)-(j)) */
	uint64_t *rss_ns[3];
	uint64_t hwm_before;
	uint64_t hwm_after;
	bool hwm_reset; /* VmHWM was reset before the workload (/proc/self/clear_refs) */
	/* after the first pause: sum of cms_region_info.pinned_bytes of the workload's regions */
	uint64_t pinned_after_pause;
	uint64_t backup_after_pause; /* cms_region_info.backup_bytes after the first pause */
	uint64_t bytes_backed_up;    /* cms_pause_result of the first pause */
	/* CMS_REGION_VERIFY ((m), (n)): cms_region_stats after the last cycle */
	uint64_t bytes_verified, verify_ns;
	/* (f) only */
	uint64_t *ready_ns; /* from the resume call to the end of the work enqueued after it */
	bool kernel;	    /* that work is cms_affine_u32 (else cuMemcpyDtoDAsync: simulation) */
	uint64_t probe;	    /* bytes it reads from the start of the last allocation */
	unsigned int pending_seen; /* cycles whose restore_pending was 1 once the work was queued */
	bool sync_done;		   /* the synchronous comparison cycle after the async ones */
	uint64_t sync_pause_ns;
	uint64_t sync_resume_ns;
	/* (l) only (bench_prepare.c): the preparation after the allocations and its cost */
	double prepare_s;	 /* from the first cms_alloc until the backups were prepared */
	uint64_t prepare_ns;	 /* cms_region_stats.prepare_ns: the background thread's time */
	uint64_t bytes_prepared; /* cms_region_stats.bytes_prepared */
	double load_idle_gbs;	 /* a device copy loop alone, 1e9 bytes/s (read + written) */
	double load_busy_gbs;	 /* the same loop while the preparation runs */
	char note[1100];
};

/* (k), bench_nonret.c: one row per layout (a model's pool, 1 GiB allocations) and size. */
#define BENCH_NR_SIZES 4 /* 256 MiB, 1 GiB, 4 GiB, 16 GiB of live bytes at --scale 1 */
struct bench_nr_row {
	bool model;	       /* a model's pool with its free tails declared; else 1 GiB */
	uint64_t target;       /* live bytes wanted (scaled) */
	uint64_t live;	       /* live bytes: what a pause copies */
	uint64_t count;	       /* allocations */
	uint64_t alloc_bytes;  /* their sizes */
	uint64_t host_bytes;   /* cms_region_info after the first pause */
	uint64_t pinned_bytes; /* likewise */
	uint64_t sim_registrations, sim_buffers; /* simulation: live after the first pause */
	uint64_t sim_calls;			 /* simulation: driver calls of the first pause */
	unsigned int cycles_done;
	unsigned int floor_threads;
	double first_ms, median_ms; /* pause: the first, the median of the others */
	double floor_ms;	    /* median of the sum below */
	double floor_populate_ms, floor_register_ms, floor_copy_ms;
	char skipped[96];
};

/* Multi-device mode (--devices, bench_multi.c): (a) and (c) on 1 device, then on all listed. */
#define BENCH_MAX_MDEV 16
enum { BENCH_MA, BENCH_MC, BENCH_NMWORK };

/* One phase of a multi-device workload: the tag on 1 device or on all listed. */
struct bench_mphase {
	unsigned int ndev;
	unsigned int cycles_done;
	uint64_t *pause_ns; /* per cycle: the cms_pause / cms_resume call */
	uint64_t *resume_ns;
	uint64_t *dev_pause_ns; /* [cycle * ndev + i]: cms_device_result.elapsed_ns */
	uint64_t *dev_resume_ns;
};

/* The driver's own floor of the multi-device DISCARD workload (bench_multi_floor.c): its
 * handles per device, raw cuMemCreate + cuMemMap + cuMemSetAccess ("back") and cuMemUnmap +
 * cuMemRelease ("release") with the library's allocation properties, no cumemsaver. */
enum {
	BENCH_MF_ONE,	       /* the first listed device alone, one thread */
	BENCH_MF_ONE_PEER,     /* the same, every mapping also accessible by the other devices */
	BENCH_MF_THREADS,      /* every listed device at once, one thread each, barrier start */
	BENCH_MF_THREADS_PEER, /* the same with peer access: the library's N-device tag */
	BENCH_MF_INTERLEAVED,  /* every listed device on one thread, handle by handle */
	BENCH_NMF
};

struct bench_mfloor {
	const char *id; /* "one", "one_peer", "threads", "threads_peer", "interleaved" */
	unsigned int ndev;
	unsigned int threads;
	bool peer;
	bool measured;
	unsigned int reps;		    /* timed repetitions, after one warm-up */
	uint64_t back_ns[BENCH_FLOOR_REPS]; /* wall time: first start to last end */
	uint64_t release_ns[BENCH_FLOOR_REPS];
	/* [rep * ndev + i]: device i's own time (its thread's; interleaved: its calls' sum) */
	uint64_t dev_back_ns[BENCH_FLOOR_REPS * BENCH_MAX_MDEV];
	uint64_t dev_release_ns[BENCH_FLOOR_REPS * BENCH_MAX_MDEV];
};

struct bench_mwork {
	char id;	  /* 'a', 'c' */
	const char *what; /* at --scale 1 */
	uint32_t policy;
	uint64_t count0, size0;
	bool selected;
	bool ran;
	bool failed;
	uint64_t count; /* per device */
	uint64_t size;
	uint64_t window; /* bytes checked at the start and end of each allocation */
	struct bench_mphase one, all;
	unsigned int peer_reads; /* peer reads after a resume that matched */
	bool peer_kernel;	 /* cms_affine_u32 (else cuMemcpyDtoDAsync: simulation) */
	char note[1100];
	/* (a): the driver's own floor on the same devices (--only floor: the floor alone) */
	bool floor_wanted;
	bool floor_ran;
	bool floor_failed;
	struct bench_mfloor floor[BENCH_NMF];
};

struct bench {
	const char *tool; /* name in messages; NULL: "cms-bench" */
	/* options */
	unsigned int scale;
	bool scale_given;
	unsigned int cycles;
	enum bench_mode mode;
	bool verify_full;
	bool coalesce; /* --coalesce: HOST and DISK workloads' regions get CMS_REGION_COALESCE */
	unsigned int gap_ms; /* --gap: idle time before each resume and each floor back */
	bool only_floor;
	bool only_given; /* --only named the workloads: one of them that cannot run fails the run */
	unsigned int nmdev; /* --devices: 0, or the number of devices listed (>= 2) */
	int mdev[BENCH_MAX_MDEV];
	struct bench_mwork mwork[BENCH_NMWORK];
	const char *json_path;
	FILE *json; /* json_path, opened before the run; closed by bench_report_json */
	char *cmdline;

	/* the tool's own view of the driver */
	struct cms_driver drv;
	bool drv_open;
	bool sim;
	char drv_path[PATH_MAX];
	char drv_why[600]; /* why the simulation was chosen */
	char device_name[256];
	int drv_version; /* cuDriverGetVersion, kept after the driver is closed */
	CUdevice dev;
	CUcontext primary;
	bool retained;
	bool pushed;
	uint64_t granularity;
	int gdr;
	uint64_t dev_free;
	uint64_t dev_total;
	char date[32];

	struct bench_vmm_floor vmm[BENCH_NVMM];
	struct bench_copy_floor copy;
	struct bench_work work[BENCH_NWORK];
	struct bench_nr_row nr[2 * BENCH_NR_SIZES]; /* (k) */

	/* host side */
	uint64_t *stage; /* BENCH_STAGE_BYTES */
	unsigned int checks;
	char step[96]; /* what the bench is doing, for failure messages */
	bool failed;
	unsigned int failures;	 /* bench_fail calls, each printed at once */
	char failure[1024];	 /* the first failure */
	char last_failure[1024]; /* the latest one */
};

/* ---- bench_common.c: helpers shared by the parts (and by the lab's experiments) ---- */

/* b->tool, or "cms-bench". */
const char *bench_tool(const struct bench *b);
void bench_fail(struct bench *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A passed check counts; a failed one records the failure. Returns ok. */
bool bench_check(struct bench *b, bool ok, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* A driver call of the tool failed: records "what: CUDA_ERROR_... (n)"; returns -1. */
int bench_cu_fail(struct bench *b, CUresult res, const char *what);
/* A library call failed: records "what: CMS_ERR_... (last error)"; returns -1. */
int bench_cms_fail(struct bench *b, cms_status st, const char *what);

uint64_t bench_now_ns(void);
/* A /proc/self/status field ("VmRSS", "VmHWM", "VmPin") in bytes; 0 when unknown. */
uint64_t bench_proc_status(const char *field);
/* The same from another file of "Field:  N kB" lines ("/proc/self/smaps_rollup"). */
uint64_t bench_proc_field(const char *file, const char *field);
/* MemAvailable of /proc/meminfo in bytes; 0 when unknown. */
uint64_t bench_mem_available(void);
/* Resets VmHWM to VmRSS (echo 5 > /proc/self/clear_refs). Returns whether it worked. */
bool bench_reset_hwm(void);
/* "64.0 MiB", "1.00 GiB" */
const char *bench_fmt_bytes(char *buf, size_t len, uint64_t bytes);
/* "; CMS_REGION_COALESCE by --coalesce" for a HOST or DISK workload that has the flag (only
 * --coalesce gives it one), else "": the end of its heading. */
const char *bench_coalesce_note(const struct bench_work *w);
/* Sorts v[0..n) and returns the median (n > 0); the mean of the middle two for even n. */
double bench_median_ns(const uint64_t *v, unsigned int n);
/* What a time of a workload's cycle is: the pause call, the resume call (with
 * CMS_RESUME_ASYNC: until it returns), or (f) until the work enqueued after it is done. */
enum bench_phase { BENCH_RESUME, BENCH_PAUSE, BENCH_READY };
/* Median of cycles 2.. of a workload (NAN when fewer than 2 cycles ran). */
double bench_work_median_ms(const struct bench_work *w, enum bench_phase phase);
double bench_work_first_ms(const struct bench_work *w, enum bench_phase phase);
/* A phase's first cycle or median of cycles 2..N in ms (NAN when it has too few cycles). */
double bench_mphase_ms(const struct bench_mphase *ph, bool pause, bool median);

/* Writes to one byte of every page of [p, p + bytes) on up to max_threads threads. */
unsigned int bench_touch(void *p, uint64_t bytes, unsigned int max_threads);
/* The 8-byte word of a test pattern at byte offset off (a multiple of 8) for salt. */
uint64_t bench_pattern_word(uint64_t off, uint64_t salt);
/* Writes the pattern of offsets off0.. and salt into [p, p + bytes) (bytes a multiple of 8). */
void bench_pattern_fill(void *p, uint64_t bytes, uint64_t off0, uint64_t salt);
/* bench_pattern_fill on up to max_threads threads (p and bytes page aligned): the fault-in of
 * fresh memory and its content at once. Returns the number of threads used. */
unsigned int bench_touch_pattern(void *p, uint64_t bytes, unsigned int max_threads, uint64_t off0,
				 uint64_t salt);
/* Parses a decimal in [lo, hi] into *out. Returns 0 or -1. */
int bench_parse_uint(const char *s, unsigned int lo, unsigned int hi, unsigned int *out);
/* Sleeps --gap milliseconds (nothing when 0). */
void bench_gap(const struct bench *b);
/* The command line joined with spaces (malloc'ed; NULL when out of memory). */
char *bench_join_args(int argc, char **argv);
/* A JSON string: tool_json_str (tool_common.h), under the name the lab's experiments use.
 * A JSON number ("%.6g", null for NaN and infinities). */
static inline void bench_json_str(FILE *f, const char *s)
{
	tool_json_str(f, s);
}
void bench_json_num(FILE *f, double v);
/* Opens the JSON object: "{", then tool, library_version, date, command, simulation,
 * driver_library, driver_version, device and device_name (no comma after the last). */
void bench_json_head(const struct bench *b, FILE *f);
/* The options shared by the tools: 's' (--scale N), 'S' (--sim), 'G' (--gpu), arg the
 * option's argument. Returns 0 (taken), 2 (bad: message on stderr) or -1 (not one of them). */
int bench_parse_option(struct bench *b, int c, const char *arg);
/* Chooses the driver (b->mode: a GPU, else the host simulation) and prints the first line.
 * Returns 0 or -1 (failure recorded). */
int bench_choose_driver(struct bench *b);
/* Device BENCH_DEVICE's primary context retained and pushed, b->granularity of the library's
 * allocation properties, a line about the device. Returns 0 or -1 (failure recorded). */
int bench_setup_device(struct bench *b);
/* Pops and releases the primary context, closes the driver; on the simulation (when nothing
 * failed) checks that no driver object is left alive. */
void bench_close_driver(struct bench *b);
/* The start of a lab experiment (lab/): b->tool = tool, the options -s N, -S, -G from argv,
 * b->date now (UTC), the driver chosen, the scale (sim_scale on the simulation unless -s), the
 * device set up. Returns 0, or nonzero (a bad option: message on stderr; else the failure
 * recorded): the caller exits then, bench_close_driver not needed. */
int bench_exp_start(struct bench *b, const char *tool, int argc, char **argv,
		    unsigned int sim_scale);

/* Calls b->drv.fn(...); on failure records it and jumps to label. */
#define BENCH_CU(b, label, fn, ...)                       \
	do {                                              \
		CUresult res_ = (b)->drv.fn(__VA_ARGS__); \
		if (res_ != CUDA_SUCCESS) {               \
			bench_cu_fail((b), res_, #fn);    \
			goto label;                       \
		}                                         \
	} while (0)

/* Calls fn(...) of the library; on failure records it and jumps to label. */
#define BENCH_CMS(b, label, fn, ...)                   \
	do {                                           \
		cms_status st_ = fn(__VA_ARGS__);      \
		if (st_ != CMS_OK) {                   \
			bench_cms_fail((b), st_, #fn); \
			goto label;                    \
		}                                      \
	} while (0)

/* ---- bench_floor.c ---- */

/* What a handle of a set is (bench_vmm_undo). */
enum { BENCH_H_NONE, BENCH_H_CREATED, BENCH_H_MAPPED };
/* The allocation properties and access descriptor src/vmm.c uses, for device b->dev. */
void bench_fill_prop(const struct bench *b, CUmemAllocationProp *prop, CUmemAccessDesc *acc);
/* Device memory for need bytes free (and, on the simulation, host RAM for host_need + need);
 * else records a failure naming what and returns -1. */
int bench_room(struct bench *b, const char *what, uint64_t need, uint64_t host_need);
/* Unmaps (BENCH_H_MAPPED) and releases (not BENCH_H_NONE) handle i of h[0..n), mapped at
 * base + i * size, and sets st[i] to BENCH_H_NONE; records the first failure. */
void bench_vmm_undo(struct bench *b, CUdeviceptr base, uint64_t size,
		    CUmemGenericAllocationHandle *h, unsigned char *st, uint64_t n);
/* Creates handle i of h[0..n) (size bytes, prop), maps it at base + i * size with access acc,
 * st[i] following; 0, or -1 with the failure recorded (bench_vmm_undo what st[] says). */
int bench_vmm_back(struct bench *b, CUdeviceptr base, uint64_t size,
		   CUmemGenericAllocationHandle *h, unsigned char *st, uint64_t n,
		   const CUmemAllocationProp *prop, const CUmemAccessDesc *acc);
/* Unmaps and releases every handle of h[0..n) that bench_vmm_back made, st[i] following; 0, or
 * -1 with the failure recorded. */
int bench_vmm_release(struct bench *b, CUdeviceptr base, uint64_t size,
		      CUmemGenericAllocationHandle *h, unsigned char *st, uint64_t n);

/* Scales (count0 x size0) by b->scale: see docs/bench.md. */
void bench_scale(const struct bench *b, uint64_t count0, uint64_t size0, uint64_t *count,
		 uint64_t *size);
int bench_vmm_floor(struct bench *b, struct bench_vmm_floor *f);
int bench_copy_floor(struct bench *b);

/* ---- bench_check.c: the checks after a cycle (HOST content pattern, addresses) ---- */

/* HOST sample windows for w->count x w->size (sets w->window). */
void bench_choose_window(const struct bench *b, struct bench_work *w);
/* HOST pattern: writes generation 0 into all of allocations first.. of ptr[0..w->count). */
int bench_host_fill(struct bench *b, const struct bench_work *w, const uint64_t *ptr,
		    uint64_t first);
/* HOST: checks generation gen of allocations first.. (sample windows, or all with
 * --verify-full), then writes generation gen + 1 into the windows. Returns 0 or -1. */
int bench_host_verify(struct bench *b, const struct bench_work *w, const uint64_t *ptr,
		      uint64_t first, uint64_t gen, unsigned int cycle);
/* The same check without the write: memory that must not change (a frozen region). */
int bench_host_check(struct bench *b, const struct bench_work *w, const uint64_t *ptr,
		     uint64_t first, uint64_t gen, unsigned int cycle);
/* Every allocation of ptr[0..w->count) at its address, of w->size, in region, in state. */
int bench_check_addresses(struct bench *b, struct bench_work *w, cms_context *ctx,
			  cms_region *region, const uint64_t *ptr, uint32_t state, const char *when,
			  unsigned int cycle);
/* The pattern's seed of allocation alloc, generation gen (also a value to write anywhere). */
uint64_t bench_host_seed(uint64_t alloc, uint64_t gen);
/* The word at byte offset off of allocation alloc once generation gen was written into its
 * sample windows (generation 0 elsewhere). */
uint64_t bench_host_expected(const struct bench_work *w, uint64_t alloc, uint64_t off,
			     uint64_t gen);

/* ---- bench_multi_floor.c: the driver's multi-device floor of (a) ---- */

/* Measures w's floor variants on the n listed devices dev[] whose primary contexts primary[]
 * the caller retains; prints a line per variant. Returns 0 or -1 (failure recorded). */
int bench_mfloor_run(struct bench *b, struct bench_mwork *w, const CUdevice *dev,
		     const CUcontext *primary, unsigned int n);
/* The floor table of w and cumemsaver's (a) against it (nothing if the floor did not run). */
void bench_mfloor_report(const struct bench *b, const struct bench_mwork *w);
/* Writes ", \"driver_floor\": {...}" (or null) into w's JSON object. */
void bench_mfloor_json(const struct bench *b, const struct bench_mwork *w, FILE *f);

/* ---- bench_work.c: workloads (a)-(d) and (f) ---- */

void bench_works_init(struct bench *b);
int bench_work_run(struct bench *b, struct bench_work *w);

/* ---- bench_prepare.c: (l)'s preparation (CMS_REGION_PREPARE) and its cost ---- */
/* A device copy loop: copies of bytes from src to dst on the tool's stream. */
struct bench_load {
	uint64_t src, dst, bytes;
	CUstream stream;
};
/* Before (l)'s allocations: a DISCARD region of ctx (destroyed with it) with the loop's two
 * buffers, and the loop's throughput alone (w->load_idle_gbs). Returns 0 or -1 (failure
 * recorded). */
int bench_prepare_before(struct bench *b, struct bench_work *w, cms_context *ctx,
			 struct bench_load *l);
/* After them (t0: before the first cms_alloc): runs the loop until the region's backups are
 * prepared (host_bytes >= its logical bytes, all page-locked), then records the time, the
 * loop's throughput meanwhile and the region's stats. Returns 0 or -1. */
int bench_prepare_wait(struct bench *b, struct bench_work *w, cms_region *region,
		       const struct bench_load *l, uint64_t t0);
/* Destroys the loop's stream, if made. */
void bench_prepare_end(struct bench *b, struct bench_load *l);
/* Writes (l)'s keys (", \"prepare\": {...}") into its JSON object. */
void bench_prepare_json(const struct bench_work *w, FILE *f);

/* ---- bench_swap.c: workload (e), cms_swap between two HOST tags ---- */
int bench_swap_run(struct bench *b, struct bench_work *w);
/* (e)'s own table: aggregate GB/s against the both-directions pinned copy floor. */
void bench_swap_report(const struct bench *b, const struct bench_work *w);
/* Writes (e)'s per-cycle times and first/median rows, then closes its JSON object. */
void bench_swap_json(const struct bench *b, const struct bench_work *w, FILE *f);

/* ---- bench_frozen.c: workload (o), a frozen HOST region ---- */
int bench_frozen_run(struct bench *b, struct bench_work *w);
/* (o)'s own table: the frozen pause against a DISCARD pause of the same layout and the
 * driver's release floor, the resume against the pinned host-to-device floor. */
void bench_frozen_report(const struct bench *b, const struct bench_work *w);
/* Writes (o)'s keys, then closes its JSON object. */
void bench_frozen_json(const struct bench *b, const struct bench_work *w, FILE *f);

/* ---- bench_frozen_floor.c: (o)'s floors in its own conditions ---- */
struct bench_frozen_floor {
	bool measured;
	double h2d_ms;	   /* every handle filled from the region's backups */
	double release_ms; /* those handles, read-only, unmapped and released */
};
/* With (o)'s region paused: raw copies from its backups (cms_backup_get of each ptr) into as
 * many new handles, then their release; medians into *out. 0, or -1 after bench_fail. */
int bench_frozen_floor(struct bench *b, const struct bench_work *w, cms_context *ctx,
		       const uint64_t *ptr, struct bench_frozen_floor *out);

/* ---- bench_disk.c: workload (g), the DISK policy ---- */
/* --disk-dir (default: $TMPDIR, else /tmp); the string is copied. */
/* ---- bench_nonret.c: (k), non-retaining HOST pauses against their floor ---- */
int bench_nonret_run(struct bench *b, struct bench_work *w);
void bench_nonret_report(const struct bench *b, const struct bench_work *w);
/* Its keys; closes the workload's object. */
void bench_nonret_json(const struct bench *b, const struct bench_work *w, FILE *f);

void bench_disk_dir_set(const char *dir);
/* --disk-dir, else $TMPDIR, else /tmp. */
const char *bench_disk_dir(void);
/* Runs (g) with the disk floor. When the disk lacks room: skipped (a note, not a failure),
 * unless --only named it (b->only_given): then a failure. */
int bench_disk_run(struct bench *b, struct bench_work *w);
/* (g)'s own table: pause/resume against the disk's write/read bandwidth. */
void bench_disk_report(const struct bench *b, const struct bench_work *w);
/* Writes ", \"disk_floor\": {...}" (or null) into (g)'s JSON object. */
void bench_disk_json(const struct bench *b, const struct bench_work *w, FILE *f);

/* ---- bench_multi.c: --devices ---- */

/* Parses "0,1" into b->mdev (2..BENCH_MAX_MDEV distinct ordinals). Returns 0 or -1. */
int bench_multi_parse(struct bench *b, const char *arg);
/* Runs the selected multi-device workloads (after the driver and device 0 are set up). */
void bench_multi_run(struct bench *b);
void bench_multi_report(const struct bench *b);
/* Writes "  \"multi_device\": ...,\n" into the JSON file (null without --devices). */
void bench_multi_json(const struct bench *b, FILE *f);
void bench_multi_free(struct bench *b);

/* ---- bench_report.c: the table and the JSON file of every workload ---- */

void bench_report_table(const struct bench *b);
/* Writes the JSON report to b->json and closes it. Returns 0, or -1 with errno. */
int bench_report_json(struct bench *b);

#endif /* CMS_BENCH_H */
