/* SPDX-License-Identifier: MIT */
/*
 * common.h - helpers shared by the Check suites: the test's own view of the
 * driver (same library the context loads, so the host simulation's state is
 * shared), device memory read/write, patterns, simulation control, and the
 * main() that skips (exit 77) where the needed driver is missing.
 */
#ifndef CMS_TEST_COMMON_H
#define CMS_TEST_COMMON_H

#include <check.h>
#include <stdint.h>

#include "cumemsaver.h"
#include "cumemsaver_sim.h"
#include "driver.h"

#define MiB (1024ull * 1024ull)

/* A function whose own loads and stores ThreadSanitizer does not check: the fill and check loops
 * over a test's private staging buffers (no other thread sees them), which were most of a
 * sanitized test's time. Calls from it (the driver's copies, malloc) are still seen. */
#if defined(__SANITIZE_THREAD__)
#define T_UNCHECKED __attribute__((no_sanitize("thread")))
#else
#define T_UNCHECKED
#endif

/* What a suite needs from the environment. */
enum t_needs {
	T_NEEDS_NOTHING, /* pure API tests, no driver */
	T_NEEDS_DEVICE,	 /* the simulation or a real GPU, whichever CMS_DRIVER_LIBRARY selects */
	T_NEEDS_SIM,	 /* the simulation (fault injection, counters) */
	T_NEEDS_GPU,	 /* a real GPU */
};

/* The driver's device count (and, in *is_sim, whether it is the simulation), asked in a forked
 * child so that main() never touches CUDA itself; 0 without a driver. */
int t_probe_devices(int *is_sim);

/* Runs the suite in forked children; exits 77 if needs are not met. */
int t_main(Suite *(*make)(void), enum t_needs needs);

/* The driver's device count (in a case: the test process's driver). */
int t_devices(void);
/* A case that cannot run here: prints one line "SKIP <case>[ #<i>]: <why>" (fn: the case's
 * function, its Check suffix _fn dropped; i: the loop index, or -1 for a plain case) and
 * returns 1. Check has no skipped state: the case then returns and counts as passed, and the
 * line is what tells which case did not run. */
int t_skip_case(const char *fn, int i, const char *why);
/* t_skip_case with "needs <need> devices, the driver has <n>" when the driver has fewer than
 * need devices; else 0. */
int t_skip_unless_devices(const char *fn, int i, int need);
/* In a START_TEST body: return from the case unless the driver has need devices. */
#define T_NEED_DEVICES(need)                                   \
	do {                                                   \
		if (t_skip_unless_devices(__func__, -1, need)) \
			return;                                \
	} while (0)
/* The same in a loop test, the line naming the loop index. */
#define T_NEED_DEVICES_LOOP(need)                              \
	do {                                                   \
		if (t_skip_unless_devices(__func__, _i, need)) \
			return;                                \
	} while (0)
/* In a START_TEST body: return from the case unless the driver is the host simulation (its
 * fault injection, capacity and counters); _LOOP: in a loop test. */
#define T_NEED_SIM()                                                                       \
	do {                                                                               \
		if (!t_is_sim() && t_skip_case(__func__, -1, "needs the host simulation")) \
			return;                                                            \
	} while (0)
#define T_NEED_SIM_LOOP()                                                                  \
	do {                                                                               \
		if (!t_is_sim() && t_skip_case(__func__, _i, "needs the host simulation")) \
			return;                                                            \
	} while (0)

/* The driver table of the test process (opened once per process). */
struct cms_driver *t_drv(void);
int t_is_sim(void);

cms_context *t_ctx(void);
/* Flags t_region creates regions with (default 0; a test sets and restores it). */
extern uint64_t t_region_flags;
cms_region *t_region(cms_context *ctx, const char *tag, int32_t device, uint32_t policy);

/* Copies between host and device memory of device dev (primary context pushed). Returns CUresult.
 */
int t_write(int dev, uint64_t dst, const void *src, size_t n);
int t_read(int dev, void *dst, uint64_t src, size_t n);
/* Fills with / compares against a pattern derived from seed (u32 words; n a multiple of 4). */
int t_fill(int dev, uint64_t ptr, size_t n, uint32_t seed);
/* Returns the index of the first mismatching word, or -1 when all match. */
long t_check(int dev, uint64_t ptr, size_t n, uint32_t seed);
/* t_check over the words outside bytes [lo, hi) (multiples of 4): the first mismatch or -1. */
long t_check_except(int dev, uint64_t ptr, size_t n, uint32_t seed, size_t lo, size_t hi);
/* t_check_except of n bytes of host memory (any alignment): one call, one assertion, however
 * large (Check's ck_assert marks a point through a pipe: too slow for a word at a time). */
long t_host_check_except(const void *host, size_t n, uint32_t seed, size_t lo, size_t hi);
/* cms_region_info_get / cms_region_stats_get of r, asserted CMS_OK. */
cms_region_info t_info(cms_region *r);
cms_region_stats t_stats(cms_region *r);
/* The host byte of the HOST backup that backs ptr (its region paused: CMS_BACKUP_CURRENT). */
unsigned char *t_host_byte(cms_context *ctx, uint64_t ptr);
/* Waits (at most 60 s) until r's host buffers hold at least bytes, page-locked when pinned
 * (CMS_REGION_PREPARE's background thread); whether they did. */
int t_wait_host_bytes(cms_region *r, uint64_t bytes, int pinned);
/* t_fill of each allocation p[i] of sizes[i] bytes (rounded down to 4) with seed + i, i < n. */
void t_fill_each(int dev, const uint64_t *p, const uint64_t *sizes, size_t n, uint32_t seed);
/* Asserts that each holds what t_fill_each(dev, p, sizes, n, seed) wrote. */
void t_check_each(int dev, const uint64_t *p, const uint64_t *sizes, size_t n, uint32_t seed);
/* Returns 1 when all n bytes are zero. */
int t_is_zero(int dev, uint64_t ptr, size_t n);
uint32_t t_pattern(uint32_t seed, size_t i);

/* Simulation control (NULL-safe: only valid when t_is_sim()). */
struct t_sim {
	int (*get_counters)(cmssim_counters *out);
	int (*fail_call)(const char *fn, uint64_t nth, int result);
	int (*fail_host_alloc)(uint64_t nth);
	void (*clear_faults)(void);
	uint64_t (*call_count)(void);
	int (*set_capacity)(int device, uint64_t bytes);
	uint64_t (*get_capacity)(int device);
	int (*armed_faults)(void);
};
const struct t_sim *t_sim(void);
cmssim_counters t_counters(void);
/* Asserts that the simulation holds no handle, mapping, physical allocation or reservation,
 * and no device bytes on devices 0..ndev-1. */
void t_nothing_left(int ndev);
int t_open_fds(void);

#define ck_ok(expr)                                                                       \
	do {                                                                              \
		cms_status st_ = (expr);                                                  \
		ck_assert_msg(st_ == CMS_OK, "%s -> %s: %s", #expr, cms_status_name(st_), \
			      cms_last_error());                                          \
	} while (0)

#define ck_status(expr, want)                                                                 \
	do {                                                                                  \
		cms_status st_ = (expr);                                                      \
		ck_assert_msg(st_ == (want), "%s -> %s (%s), want %s", #expr,                 \
			      cms_status_name(st_), cms_last_error(), cms_status_name(want)); \
	} while (0)

#endif /* CMS_TEST_COMMON_H */
