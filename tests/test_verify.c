/* SPDX-License-Identifier: MIT */
/*
 * test_verify.c - verified backups (CMS_REGION_VERIFY, since 1.3): round trips
 * on HOST and DISK; a backup changed between pause and resume (the HOST
 * buffer through cms_backup_get, the DISK file through /proc/self/fd) fails
 * the resume with CMS_ERR_VERIFY_FAILED, the region paused with its backup,
 * until the flag is cleared; declared content-free ranges are not checked;
 * a swap's resume side checks too; the checksum's rounds over many
 * allocations; the flag's rules; the kernel's module loaded once per device
 * and unloaded with the context; on a full device the first verified pause
 * succeeds (what the checksum needs was reserved with the flag) and setting
 * the flag fails cleanly; the flag turned on and off by two threads while a
 * third region cycles; (simulation only) a fault at every driver call of a
 * verified pause and resume rolls back whole, one of setting the flag leaves
 * nothing. On a GPU (label gpu) the same (the device filled for real), and
 * the kernel's PTX JITs and computes what the C definition does on random
 * data, and a 1 GiB allocation round trips.
 */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checksum.h"
#include "checksum_ptx.h"
#include "common.h"

#define NA 3 /* allocations per region */
static const uint64_t sizes[NA] = { 1 * MiB + 4096, 3 * MiB, 100 * 1024 };
static char dir[PATH_MAX];

static cms_region *region(cms_context *ctx, const char *tag, uint32_t policy, uint64_t flags)
{
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_region *r = NULL;

	o.policy = policy;
	o.flags = flags;
	ck_ok(cms_region_create(ctx, tag, &o, &r));
	if (policy == CMS_POLICY_DISK) {
		const char *t = getenv("TMPDIR");

		snprintf(dir, sizeof(dir), "%s/cms-verify-XXXXXX", t && *t ? t : "/tmp");
		ck_assert_ptr_nonnull(mkdtemp(dir));
		ck_ok(cms_region_disk_dir_set(r, dir));
	}
	return r;
}

static void alloc_fill(cms_region *r, uint64_t *p, uint32_t seed)
{
	size_t i;

	for (i = 0; i < NA; i++) {
		ck_ok(cms_alloc(r, sizes[i], &p[i]));
		ck_assert_int_eq(t_fill(0, p[i], sizes[i], seed + (uint32_t)i), 0);
	}
}

static void ck_content(const uint64_t *p, uint32_t seed)
{
	size_t i;

	for (i = 0; i < NA; i++)
		ck_assert_int_eq(t_check(0, p[i], sizes[i], seed + (uint32_t)i), -1);
}

static uint64_t modules(void)
{
	return t_is_sim() ? t_counters().modules : 0;
}

/* Flips the bits of the DISK backup byte at file offset off: the region's file is unlinked,
 * but open in this process (/proc/self/fd). */
static void flip_disk_byte(off_t off)
{
	char path[PATH_MAX], target[PATH_MAX];
	struct dirent *e;
	DIR *d = opendir("/proc/self/fd");
	int found = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d))) {
		ssize_t n;
		unsigned char c;
		int fd;

		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		n = readlink(path, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = 0;
		if (strncmp(target, dir, strlen(dir)) || !strstr(target, "cumemsaver-"))
			continue;
		fd = open(path, O_RDWR);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(pread(fd, &c, 1, off), 1);
		c ^= 0xff;
		ck_assert_int_eq(pwrite(fd, &c, 1, off), 1);
		ck_assert_int_eq(fsync(fd), 0);
		close(fd);
		found++;
	}
	closedir(d);
	ck_assert_int_eq(found, 1);
}

static void round_trip(uint32_t policy)
{
	cms_context *ctx = t_ctx();
	cms_region *r = region(ctx, "v", policy, CMS_REGION_VERIFY);
	uint64_t p[NA], live = 0;
	cms_region_stats s;
	int cycle;
	size_t i;

	for (i = 0; i < NA; i++)
		live += sizes[i];
	alloc_fill(r, p, 10);
	ck_assert_uint_eq(t_info(r).flags, CMS_REGION_VERIFY);
	for (cycle = 0; cycle < 3; cycle++) {
		ck_ok(cms_region_pause(r, NULL, NULL));
		ck_ok(cms_region_resume(r, NULL, NULL));
		ck_content(p, 10);
		ck_assert_int_eq(t_fill(0, p[1], sizes[1], 20), 0); /* changed between cycles */
		ck_assert_int_eq(t_fill(0, p[1], sizes[1], 11), 0);
	}
	s = t_stats(r);
	ck_assert_uint_eq(s.bytes_verified, 3 * live);
	ck_assert_uint_gt(s.verify_ns, 0);
	ck_assert_uint_eq(s.failures, 0);
	if (t_is_sim())
		ck_assert_uint_eq(modules(), 1); /* one per device, loaded once */
	ck_ok(cms_context_destroy(ctx));
	if (t_is_sim()) {
		ck_assert_uint_eq(modules(), 0);
		t_nothing_left(1);
	}
	if (policy == CMS_POLICY_DISK)
		ck_assert_int_eq(rmdir(dir), 0);
}

START_TEST(host_round_trip)
{
	round_trip(CMS_POLICY_HOST);
}
END_TEST

START_TEST(disk_round_trip)
{
	round_trip(CMS_POLICY_DISK);
}
END_TEST

/* The resume of a region whose backup changed fails, again and again, rolled back: paused,
 * backup kept (its changed byte visible), nothing mapped; cleared, the flag lets it resume
 * with the changed content. */
static void corrupt(uint32_t policy)
{
	/* HOST: the second allocation (not the first slot); DISK: the first, whose slot starts
	 * the file (cms_backup_read below proves the byte flipped is the one that backs at). */
	size_t victim = policy == CMS_POLICY_HOST ? 1 : 0;
	cms_context *ctx = t_ctx();
	cms_region *r = region(ctx, "v", policy, CMS_REGION_VERIFY);
	uint64_t p[NA], at, base_bytes;
	unsigned char b, want;
	char hex[32];
	int k;

	alloc_fill(r, p, 30);
	at = p[victim] + 12345;
	ck_assert_int_eq(t_read(0, &want, at, 1), 0);
	base_bytes = t_info(r).backed_bytes;
	ck_ok(cms_region_pause(r, NULL, NULL));
	if (policy == CMS_POLICY_HOST)
		*t_host_byte(ctx, at) ^= 0xff; /* "writing changes what a resume restores" */
	else
		flip_disk_byte(12345);
	want ^= 0xff;
	for (k = 0; k < 2; k++) {
		ck_status(cms_region_resume(r, NULL, NULL), CMS_ERR_VERIFY_FAILED);
		ck_assert_ptr_nonnull(strstr(cms_last_error(), "region \"v\""));
		snprintf(hex, sizeof(hex), "0x%llx:", (unsigned long long)p[victim]);
		ck_assert_msg(strstr(cms_last_error(), hex), "%s lacks %s", cms_last_error(), hex);
		ck_assert_uint_eq(t_info(r).state, CMS_STATE_PAUSED);
		ck_assert_uint_eq(t_info(r).backed_bytes, 0);
		ck_ok(cms_backup_read(ctx, at, &b, 1)); /* the backup is kept */
		ck_assert_uint_eq(b, want);
	}
	ck_assert_uint_eq(t_stats(r).failures_by_status[-CMS_ERR_VERIFY_FAILED], 2);
	ck_assert_uint_eq(t_stats(r).resumes, 0);
	ck_ok(cms_region_flags_set(r, CMS_REGION_VERIFY, 0));
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_assert_uint_eq(t_info(r).backed_bytes, base_bytes);
	ck_assert_int_eq(t_read(0, &b, at, 1), 0);
	ck_assert_uint_eq(b, want); /* taken back as it was */
	ck_assert_int_eq(
		t_check_except(0, p[victim], sizes[victim], 30 + (uint32_t)victim, 12344, 12348),
		-1);
	ck_assert_uint_eq(t_stats(r).bytes_verified, 0);
	ck_ok(cms_context_destroy(ctx));
	if (policy == CMS_POLICY_DISK)
		ck_assert_int_eq(rmdir(dir), 0);
}

START_TEST(host_corrupt)
{
	corrupt(CMS_POLICY_HOST);
}
END_TEST

START_TEST(disk_corrupt)
{
	corrupt(CMS_POLICY_DISK);
}
END_TEST

/* Declared content-free bytes are neither saved nor checked: a change there passes, one byte
 * beyond it does not. */
START_TEST(discarded_excluded)
{
	cms_context *ctx = t_ctx();
	cms_region *r = region(ctx, "v", CMS_POLICY_HOST, CMS_REGION_VERIFY);
	uint64_t p[NA], lo = 4096 + 3, hi = 2 * MiB + 5; /* unaligned ends: byte-exact pieces */

	alloc_fill(r, p, 40);
	ck_ok(cms_range_discard(ctx, p[1] + lo, hi - lo));
	ck_ok(cms_region_pause(r, NULL, NULL));
	*t_host_byte(ctx, p[1] + lo) ^= 0xff; /* inside the declared range */
	*t_host_byte(ctx, p[1] + hi - 1) ^= 0xff;
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_assert_uint_eq(t_stats(r).bytes_verified, sizes[0] + sizes[1] - (hi - lo) + sizes[2]);
	ck_assert_int_eq(t_check_except(0, p[1], sizes[1], 41, 4096, 2 * MiB + 8), -1);
	ck_assert_int_eq(t_check(0, p[0], sizes[0], 40), -1);
	/* The declaration ended with the resume: the next cycle checks every byte. */
	ck_assert_int_eq(t_fill(0, p[1], sizes[1], 41), 0);
	ck_ok(cms_range_discard(ctx, p[1] + lo, hi - lo));
	ck_ok(cms_region_pause(r, NULL, NULL));
	*t_host_byte(ctx, p[1] + hi) ^= 0xff; /* the first byte after it */
	ck_status(cms_region_resume(r, NULL, NULL), CMS_ERR_VERIFY_FAILED);
	*t_host_byte(ctx, p[1] + hi) ^= 0xff; /* put back */
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_assert_int_eq(t_check_except(0, p[1], sizes[1], 41, 4096, 2 * MiB + 8), -1);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* cms_swap: the resume side checks, the pause side checksums; a mismatch rolls both back. */
START_TEST(swap_checks)
{
	cms_context *ctx = t_ctx();
	cms_region *a = region(ctx, "a", CMS_POLICY_HOST, CMS_REGION_VERIFY);
	cms_region *b = region(ctx, "b", CMS_POLICY_HOST, CMS_REGION_VERIFY);
	uint64_t pa[NA], pb[NA];

	alloc_fill(a, pa, 50);
	alloc_fill(b, pb, 60);
	ck_ok(cms_region_pause(b, NULL, NULL));
	ck_ok(cms_swap(ctx, "a", "b", NULL, NULL, NULL, NULL)); /* a checksummed, b checked */
	ck_content(pb, 60);
	ck_assert_uint_eq(t_stats(b).bytes_verified, sizes[0] + sizes[1] + sizes[2]);
	*t_host_byte(ctx, pa[2] + 7) ^= 0x01;
	ck_status(cms_swap(ctx, "b", "a", NULL, NULL, NULL, NULL), CMS_ERR_VERIFY_FAILED);
	ck_assert_ptr_nonnull(strstr(cms_last_error(), "region \"a\""));
	ck_assert_uint_eq(t_info(a).state, CMS_STATE_PAUSED);
	ck_assert_uint_eq(t_info(b).state, CMS_STATE_ACTIVE);
	ck_content(pb, 60); /* the pause side rolled back */
	*t_host_byte(ctx, pa[2] + 7) ^= 0x01;
	ck_ok(cms_swap(ctx, "b", "a", NULL, NULL, NULL, NULL));
	ck_content(pa, 50);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* More allocations than one round's sums hold (the simulation's 64 KiB granule: 2048): the
 * rounds add up per allocation; a change in the last one is found there. */
START_TEST(many_allocations)
{
	enum { N = 2100 };
	cms_context *ctx = t_ctx();
	cms_region *r = region(ctx, "v", CMS_POLICY_HOST, CMS_REGION_VERIFY);
	uint64_t *p = calloc(N, sizeof(*p));
	char hex[32];
	size_t i;

	ck_assert_ptr_nonnull(p);
	for (i = 0; i < N; i++) {
		ck_ok(cms_alloc(r, 4096, &p[i]));
		ck_assert_int_eq(t_fill(0, p[i], 4096, (uint32_t)i), 0);
	}
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_assert_uint_eq(t_stats(r).bytes_verified, (uint64_t)N * 4096);
	ck_ok(cms_region_pause(r, NULL, NULL));
	*t_host_byte(ctx, p[N - 1] + 100) ^= 0x80;
	ck_status(cms_region_resume(r, NULL, NULL), CMS_ERR_VERIFY_FAILED);
	snprintf(hex, sizeof(hex), "0x%llx:", (unsigned long long)p[N - 1]);
	ck_assert_msg(strstr(cms_last_error(), hex), "%s lacks %s", cms_last_error(), hex);
	*t_host_byte(ctx, p[N - 1] + 100) ^= 0x80;
	ck_ok(cms_region_resume(r, NULL, NULL));
	for (i = 0; i < N; i++)
		ck_assert_int_eq(t_check(0, p[i], 4096, (uint32_t)i), -1);
	free(p);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* The flag's rules: policies, cms_region_flags_set, CMS_RESUME_ASYNC; set while paused, the
 * resume checks nothing; no kernel loaded without the flag. */
START_TEST(flag_rules)
{
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_resume_options ro = CMS_RESUME_OPTIONS_INIT;
	cms_context *ctx = t_ctx();
	cms_region *r, *z, *x = NULL;
	uint64_t p[NA];

	o.flags = CMS_REGION_VERIFY;
	o.policy = CMS_POLICY_DISCARD;
	ck_status(cms_region_create(ctx, "x", &o, &x), CMS_ERR_INVALID_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(cms_last_error(), "CMS_REGION_VERIFY"));
	o.policy = CMS_POLICY_ZERO;
	ck_status(cms_region_create(ctx, "x", &o, &x), CMS_ERR_INVALID_ARGUMENT);
	ck_assert_ptr_null(x);
	z = region(ctx, "z", CMS_POLICY_ZERO, 0);
	ck_status(cms_region_flags_set(z, CMS_REGION_VERIFY, CMS_REGION_VERIFY),
		  CMS_ERR_INVALID_ARGUMENT);
	ck_ok(cms_region_flags_set(z, CMS_REGION_VERIFY, 0)); /* clearing is always fine */
	r = region(ctx, "v", CMS_POLICY_HOST, 0);
	alloc_fill(r, p, 70);
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_assert_uint_eq(modules(), 0); /* no flag, no kernel */
	ck_ok(cms_region_flags_set(r, CMS_REGION_VERIFY, CMS_REGION_VERIFY));
	ck_assert_uint_eq(t_info(r).flags, CMS_REGION_VERIFY);
	*t_host_byte(ctx, p[0] + 1) ^= 0x10; /* not checksummed by that pause: not seen */
	ro.flags = CMS_RESUME_ASYNC;
	ck_status(cms_region_resume(r, &ro, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(cms_last_error(), "CMS_RESUME_ASYNC"));
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_assert_uint_eq(t_stats(r).bytes_verified, 0);
	ck_ok(cms_region_pause(r, NULL, NULL)); /* now with the flag */
	ck_assert_uint_eq(modules(), t_is_sim() ? 1 : 0);
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_assert_uint_eq(t_stats(r).bytes_verified, sizes[0] + sizes[1] + sizes[2]);
	/* A pause without the flag forgets the checksum of the pause before. */
	ck_ok(cms_region_flags_set(r, CMS_REGION_VERIFY, 0));
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_ok(cms_region_flags_set(r, CMS_REGION_VERIFY, CMS_REGION_VERIFY));
	*t_host_byte(ctx, p[2] + 3) ^= 0x10;
	ck_ok(cms_region_resume(r, NULL, NULL)); /* nothing to check it against */
	ck_assert_uint_eq(t_stats(r).bytes_verified, sizes[0] + sizes[1] + sizes[2]);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* Whether the last error names the checksum kernel's launch. */
static bool launch_failed(void)
{
	return strstr(cms_last_error(), "cuLaunchKernel") != NULL;
}

/* Fails the i-th driver call of a verified pause, then of a verified resume, for every i until
 * the call succeeds (the checksum's copies, launch, read back included; its kernel was loaded
 * with the region): each failure leaves the region as it was (content, state, backup), and
 * the context destroy leaves nothing. */
static void fault_sweep(uint32_t policy)
{
	const struct t_sim *sim = t_sim();
	cms_context *ctx = t_ctx();
	cms_region *r = region(ctx, "v", policy, CMS_REGION_VERIFY);
	uint64_t p[NA], i, failed = 0;
	bool launch = false;
	cms_status st;
	unsigned char b;

	alloc_fill(r, p, 80);
	ck_assert_uint_eq(modules(), 1);
	for (i = 1;; i++) {
		ck_assert_int_eq(sim->fail_call(NULL, i, CUDA_ERROR_UNKNOWN), 0);
		st = cms_region_pause(r, NULL, NULL);
		sim->clear_faults();
		if (!st)
			break;
		ck_assert_msg(st != CMS_ERR_ROLLBACK_FAILED, "call %llu: %s", (unsigned long long)i,
			      cms_last_error());
		launch |= launch_failed();
		ck_assert_uint_eq(t_info(r).state, CMS_STATE_ACTIVE);
		ck_content(p, 80);
		failed++;
	}
	ck_assert_uint_ge(failed, 7);
	ck_assert_msg(launch, "no failed pause met the checksum's launch");
	ck_assert_uint_eq(modules(), 1);
	for (i = 1, failed = 0, launch = false;; i++) {
		ck_assert_int_eq(sim->fail_call(NULL, i, CUDA_ERROR_UNKNOWN), 0);
		st = cms_region_resume(r, NULL, NULL);
		sim->clear_faults();
		if (!st)
			break;
		ck_assert_msg(st != CMS_ERR_ROLLBACK_FAILED && st != CMS_ERR_VERIFY_FAILED,
			      "call %llu: %s: %s", (unsigned long long)i, cms_status_name(st),
			      cms_last_error());
		launch |= launch_failed();
		ck_assert_uint_eq(t_info(r).state, CMS_STATE_PAUSED);
		ck_assert_uint_eq(t_info(r).backed_bytes, 0);
		ck_ok(cms_backup_read(ctx, p[1] + 5, &b, 1));
		failed++;
	}
	ck_assert_uint_ge(failed, 5);
	/* (DISK: the sweep ends at the first fault the resume survives, before its check) */
	ck_assert_msg(launch || policy == CMS_POLICY_DISK,
		      "no failed resume met the checksum's launch");
	ck_content(p, 80);
	ck_assert_uint_eq(t_stats(r).bytes_verified, sizes[0] + sizes[1] + sizes[2]);
	ck_ok(cms_context_destroy(ctx));
	ck_assert_uint_eq(modules(), 0);
	t_nothing_left(1);
	if (policy == CMS_POLICY_DISK)
		ck_assert_int_eq(rmdir(dir), 0);
}

START_TEST(faults_host)
{
	if (t_is_sim())
		fault_sweep(CMS_POLICY_HOST);
}
END_TEST

START_TEST(faults_disk)
{
	if (t_is_sim())
		fault_sweep(CMS_POLICY_DISK);
}
END_TEST

/* The kernel's load fails (an image the driver refuses): cms_region_create with the flag and
 * cms_region_flags_set setting it fail, name the call and hold nothing; once it is loaded, a
 * failed launch fails the pause whole, and the next pause works. */
START_TEST(module_load_fails)
{
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	const struct t_sim *sim;
	cms_region *r, *w = NULL;
	cms_context *ctx;
	uint64_t p[NA];

	if (!t_is_sim())
		return;
	sim = t_sim();
	ctx = t_ctx();
	r = region(ctx, "v", CMS_POLICY_HOST, 0);
	alloc_fill(r, p, 90);
	o.policy = CMS_POLICY_HOST;
	o.flags = CMS_REGION_VERIFY;
	ck_assert_int_eq(sim->fail_call("cuModuleLoadData", 1, CUDA_ERROR_INVALID_PTX), 0);
	ck_assert_int_ne(cms_region_create(ctx, "w", &o, &w), CMS_OK);
	ck_assert_ptr_nonnull(strstr(cms_last_error(), "cuModuleLoadData"));
	ck_assert_ptr_null(w);
	ck_assert_int_eq(sim->fail_call("cuModuleLoadData", 1, CUDA_ERROR_INVALID_PTX), 0);
	ck_assert_int_ne(cms_region_flags_set(r, CMS_REGION_VERIFY, CMS_REGION_VERIFY), CMS_OK);
	ck_assert_ptr_nonnull(strstr(cms_last_error(), "cuModuleLoadData"));
	ck_assert_uint_eq(t_info(r).flags, 0);
	ck_assert_uint_eq(modules(), 0);
	sim->clear_faults();
	ck_ok(cms_region_flags_set(r, CMS_REGION_VERIFY, CMS_REGION_VERIFY));
	ck_assert_uint_eq(modules(), 1);
	ck_assert_int_eq(sim->fail_call("cuLaunchKernel", 1, CUDA_ERROR_UNKNOWN), 0);
	ck_assert_int_ne(cms_region_pause(r, NULL, NULL), CMS_OK);
	ck_assert_msg(launch_failed(), "%s", cms_last_error());
	ck_assert_uint_eq(t_info(r).state, CMS_STATE_ACTIVE);
	ck_assert_uint_eq(modules(), 1); /* loaded; the launch failed */
	sim->clear_faults();
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_content(p, 90);
	ck_ok(cms_context_destroy(ctx));
	ck_assert_uint_eq(modules(), 0);
}
END_TEST

/* Fills device 0 with allocations of region f (DISCARD) until not one granule more fits
 * (cms_alloc: CMS_ERR_OUT_OF_DEVICE_MEMORY): on the simulation in a capacity lowered to what
 * is in use plus 8 MiB, on a GPU the whole device (1 GiB at a time, then halves). The
 * allocations into p[0..cap), largest first; returns how many. */
static size_t fill_device(cms_region *f, uint64_t *p, size_t cap)
{
	uint64_t size = t_is_sim() ? 4 * MiB : 1024 * MiB, gran = t_info(f).granularity;
	size_t n = 0;
	cms_status st;

	if (t_is_sim())
		ck_assert_int_eq(
			t_sim()->set_capacity(0, t_counters().device_used_bytes[0] + 8 * MiB), 0);
	while (size >= gran) {
		ck_assert_uint_lt(n, cap);
		st = cms_alloc(f, size, &p[n]);
		if (!st) {
			n++;
			continue;
		}
		ck_assert_msg(st == CMS_ERR_OUT_OF_DEVICE_MEMORY, "cms_alloc(%llu): %s: %s",
			      (unsigned long long)size, cms_status_name(st), cms_last_error());
		size /= 2;
	}
	ck_assert_uint_gt(n, 0);
	return n;
}

#define FILL_MAX 512

/* The first pause of a verified region on a full device: what the checksum needs was
 * reserved with the flag (at the region's create), so the pause takes no device memory; it
 * gives the region's back, the resume takes it again and checks (a changed backup byte is
 * caught, so the check ran). On a GPU the device is really full. */
START_TEST(full_device_pause)
{
	cms_context *ctx = t_ctx();
	cms_region *r = region(ctx, "v", CMS_POLICY_HOST, CMS_REGION_VERIFY);
	cms_region *f = region(ctx, "fill", CMS_POLICY_DISCARD, 0);
	uint64_t p[NA], fp[FILL_MAX], cap = t_is_sim() ? t_sim()->get_capacity(0) : 0;
	cms_pause_result res = { .struct_size = sizeof(res) };

	alloc_fill(r, p, 110);
	fill_device(f, fp, FILL_MAX);
	ck_ok(cms_region_pause(r, NULL, &res));
	ck_assert_uint_eq(res.bytes_backed_up, sizes[0] + sizes[1] + sizes[2]);
	ck_assert_uint_eq(t_info(r).backed_bytes, 0);
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_content(p, 110);
	ck_assert_uint_eq(t_stats(r).bytes_verified, sizes[0] + sizes[1] + sizes[2]);
	ck_ok(cms_region_pause(r, NULL, NULL));
	*t_host_byte(ctx, p[1] + 77) ^= 0x20;
	ck_status(cms_region_resume(r, NULL, NULL), CMS_ERR_VERIFY_FAILED);
	*t_host_byte(ctx, p[1] + 77) ^= 0x20;
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_content(p, 110);
	ck_ok(cms_context_destroy(ctx));
	if (t_is_sim()) {
		t_nothing_left(1);
		ck_assert_int_eq(t_sim()->set_capacity(0, cap), 0);
	}
}
END_TEST

/* Debug lines of a context (the accounting of what the library holds on a device). */
struct logcap {
	char lines[64][512];
	int n;
};

static void cap_log(void *user, int32_t level, const char *message)
{
	struct logcap *c = user;

	(void)level;
	if (c->n < 64)
		snprintf(c->lines[c->n++], sizeof(c->lines[0]), "%s", message);
}

/* Whether a captured line says that the library holds bytes of device 0 for itself. */
static bool holds(const struct logcap *c, uint64_t bytes)
{
	char want[128];
	int i;

	snprintf(want, sizeof(want), "the library holds %llu bytes of the device",
		 (unsigned long long)bytes);
	for (i = 0; i < c->n; i++)
		if (strstr(c->lines[i], "device 0: ") && strstr(c->lines[i], want))
			return true;
	return false;
}

/* What the simulation holds: reservations, handles, mappings, device 0's bytes, modules. */
static void sim_held(uint64_t v[5])
{
	cmssim_counters c;

	if (!t_is_sim()) {
		memset(v, 0, 5 * sizeof(*v));
		return;
	}
	c = t_counters();
	v[0] = c.reservations;
	v[1] = c.handles;
	v[2] = c.mappings;
	v[3] = c.device_used_bytes[0];
	v[4] = c.modules;
}

/* With no device memory left, CMS_REGION_VERIFY cannot be reserved: cms_region_flags_set
 * turning it on and cms_region_create with it fail with CMS_ERR_OUT_OF_DEVICE_MEMORY (with
 * a tag in use, CMS_ERR_EXISTS, as for CMS_REGION_GUARD) and change nothing (flags as they
 * were, no region, no module, no driver object, no device byte held). With room again the
 * flag takes one granule per device, counted in what the library holds (one for two
 * regions), given back when the last verified region clears the flag or goes. */
START_TEST(full_device_flag_refused)
{
	cms_context_options co = CMS_CONTEXT_OPTIONS_INIT;
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	uint64_t p[NA], fp[FILL_MAX], before[5], after[5], gran, cap = 0;
	struct logcap *log = calloc(1, sizeof(*log));
	cms_region *r, *f, *w = NULL;
	cms_context *ctx;
	size_t nf;

	ck_assert_ptr_nonnull(log);
	if (t_is_sim())
		cap = t_sim()->get_capacity(0);
	co.log_fn = cap_log;
	co.log_user = log;
	co.log_level = CMS_LOG_DEBUG;
	ck_ok(cms_context_create(&co, &ctx));
	r = region(ctx, "v", CMS_POLICY_HOST, 0);
	f = region(ctx, "fill", CMS_POLICY_DISCARD, 0);
	gran = t_info(r).granularity;
	alloc_fill(r, p, 120);
	nf = fill_device(f, fp, FILL_MAX);
	sim_held(before);
	ck_status(cms_region_flags_set(r, CMS_REGION_VERIFY, CMS_REGION_VERIFY),
		  CMS_ERR_OUT_OF_DEVICE_MEMORY);
	ck_assert_uint_eq(t_info(r).flags, 0);
	o.policy = CMS_POLICY_HOST;
	o.flags = CMS_REGION_VERIFY;
	ck_status(cms_region_create(ctx, "w", &o, &w), CMS_ERR_OUT_OF_DEVICE_MEMORY);
	ck_assert_ptr_null(w);
	ck_status(cms_region_find(ctx, "w", 0, &w), CMS_ERR_NOT_FOUND);
	/* a duplicate tag is refused as one, before the flag's device work */
	ck_status(cms_region_create(ctx, "v", &o, &w), CMS_ERR_EXISTS);
	ck_assert_ptr_null(w);
	o.flags = CMS_REGION_GUARD;
	ck_status(cms_region_create(ctx, "v", &o, &w), CMS_ERR_EXISTS);
	ck_assert_ptr_null(w);
	o.flags = CMS_REGION_VERIFY;
	sim_held(after);
	ck_assert_mem_eq(before, after, sizeof(before));
	ck_assert_uint_eq(after[4], 0);
	/* nothing changed: the region pauses and resumes unverified */
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_content(p, 120);
	ck_assert_uint_eq(t_stats(r).bytes_verified, 0);
	/* room again: the flag holds one granule, once per device however many regions */
	ck_ok(cms_free(ctx, fp[0]));
	sim_held(before);
	log->n = 0;
	ck_ok(cms_region_flags_set(r, CMS_REGION_VERIFY, CMS_REGION_VERIFY));
	ck_assert_msg(holds(log, gran), "no line says the library holds %llu bytes",
		      (unsigned long long)gran);
	ck_ok(cms_region_flags_set(r, CMS_REGION_VERIFY, CMS_REGION_VERIFY)); /* no change */
	ck_ok(cms_region_create(ctx, "w", &o, &w));
	sim_held(after);
	if (t_is_sim()) {
		ck_assert_uint_eq(after[3] - before[3], gran);
		ck_assert_uint_eq(after[4], 1);
	}
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_assert_uint_eq(t_stats(r).bytes_verified, sizes[0] + sizes[1] + sizes[2]);
	ck_ok(cms_region_destroy(w)); /* r still holds it */
	sim_held(after);
	if (t_is_sim()) {
		ck_assert_uint_eq(after[3] - before[3], gran);
		ck_assert_uint_eq(after[4], 1);
	}
	log->n = 0;
	ck_ok(cms_region_flags_set(r, CMS_REGION_VERIFY, 0)); /* the last: given back */
	ck_assert_msg(holds(log, 0), "no line says the library holds 0 bytes");
	sim_held(after);
	ck_assert_mem_eq(before, after, sizeof(before));
	ck_ok(cms_region_flags_set(r, CMS_REGION_VERIFY, 0)); /* no change */
	ck_assert_uint_gt(nf, 1);
	ck_ok(cms_context_destroy(ctx));
	free(log);
	if (t_is_sim()) {
		t_nothing_left(1);
		ck_assert_uint_eq(t_counters().modules, 0);
		ck_assert_int_eq(t_sim()->set_capacity(0, cap), 0);
	}
}
END_TEST

/* Fails the i-th driver call of what turns CMS_REGION_VERIFY on (cms_region_flags_set setting
 * it, then cms_region_create with it: the kernel's load, the scratch's reservation, handle,
 * mapping and access), for every i until the call succeeds: each failure leaves nothing (the
 * flag clear, no region, no module, no driver object, no device byte); clearing the flag and
 * the region's destroy give everything back. */
START_TEST(faults_hold)
{
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	uint64_t before[5], after[5], i, failed;
	const struct t_sim *sim;
	cms_region *r, *w = NULL;
	cms_context *ctx;
	cms_status st;

	if (!t_is_sim())
		return;
	sim = t_sim();
	ctx = t_ctx();
	r = region(ctx, "v", CMS_POLICY_HOST, 0);
	sim_held(before);
	for (i = 1, failed = 0;; i++) {
		ck_assert_int_eq(sim->fail_call(NULL, i, CUDA_ERROR_UNKNOWN), 0);
		st = cms_region_flags_set(r, CMS_REGION_VERIFY, CMS_REGION_VERIFY);
		sim->clear_faults();
		if (!st)
			break;
		ck_assert_uint_eq(t_info(r).flags, 0);
		sim_held(after);
		ck_assert_mem_eq(before, after, sizeof(before));
		failed++;
	}
	ck_assert_uint_ge(failed, 6);
	ck_assert_uint_eq(modules(), 1);
	ck_ok(cms_region_flags_set(r, CMS_REGION_VERIFY, 0));
	sim_held(after);
	ck_assert_mem_eq(before, after, sizeof(before));
	o.policy = CMS_POLICY_HOST;
	o.flags = CMS_REGION_VERIFY;
	for (i = 1, failed = 0;; i++) {
		w = NULL;
		ck_assert_int_eq(sim->fail_call(NULL, i, CUDA_ERROR_UNKNOWN), 0);
		st = cms_region_create(ctx, "w", &o, &w);
		sim->clear_faults();
		if (!st)
			break;
		ck_assert_ptr_null(w);
		ck_status(cms_region_find(ctx, "w", 0, &w), CMS_ERR_NOT_FOUND);
		sim_held(after);
		ck_assert_mem_eq(before, after, sizeof(before));
		failed++;
	}
	ck_assert_uint_ge(failed, 6);
	ck_assert_uint_eq(modules(), 1);
	ck_ok(cms_region_destroy(w));
	sim_held(after);
	ck_assert_mem_eq(before, after, sizeof(before));
	ck_ok(cms_context_destroy(ctx));
	t_nothing_left(1);
}
END_TEST

/* When the unmap of the checksum scratch fails as the last verified region goes (and again
 * at its retry at once), the scratch stays mapped, kept for a later cleanup: its bytes stay
 * counted in what the library holds until the next pause's cleanup unmaps them, then are
 * uncounted (they were uncounted at the handle's release, still mapped). */
START_TEST(unload_unmap_fails)
{
	cms_context_options co = CMS_CONTEXT_OPTIONS_INIT;
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	struct logcap *log = calloc(1, sizeof(*log));
	const struct t_sim *sim;
	cms_region *v, *h;
	cms_context *ctx;
	uint64_t gran, p;

	if (!t_is_sim())
		return;
	sim = t_sim();
	ck_assert_ptr_nonnull(log);
	co.log_fn = cap_log;
	co.log_user = log;
	co.log_level = CMS_LOG_DEBUG;
	ck_ok(cms_context_create(&co, &ctx));
	o.policy = CMS_POLICY_HOST;
	o.flags = CMS_REGION_VERIFY;
	ck_ok(cms_region_create(ctx, "v", &o, &v));
	gran = t_info(v).granularity;
	ck_assert(holds(log, gran));
	ck_assert_int_eq(sim->fail_call("cuMemUnmap", 1, CUDA_ERROR_UNKNOWN), 0);
	ck_assert_int_eq(sim->fail_call("cuMemUnmap", 2, CUDA_ERROR_UNKNOWN), 0);
	log->n = 0;
	ck_ok(cms_region_destroy(v));
	ck_assert_int_eq(sim->armed_faults(), 0);
	ck_assert_uint_eq(t_counters().mappings, 1); /* the scratch, kept for a cleanup */
	ck_assert_msg(holds(log, gran), "no line says the library holds %llu bytes (%d lines)",
		      (unsigned long long)gran, log->n);
	h = region(ctx, "h", CMS_POLICY_HOST, 0);
	ck_ok(cms_alloc(h, gran, &p));
	ck_ok(cms_region_pause(h, NULL, NULL)); /* the cleanup unmaps the scratch */
	ck_ok(cms_region_resume(h, NULL, NULL));
	ck_assert_uint_eq(t_counters().mappings, 1); /* p */
	log->n = 0;
	ck_ok(cms_region_create(ctx, "v", &o, &v));
	ck_assert_msg(holds(log, gran), "no line says the library holds %llu bytes",
		      (unsigned long long)gran);
	ck_ok(cms_context_destroy(ctx));
	free(log);
	t_nothing_left(1);
}
END_TEST

/* One thread's turns of CMS_REGION_VERIFY on and off on its region. */
struct toggler {
	cms_region *r;
	int turns;
	cms_status st; /* the first failure */
};

static void *toggle(void *arg)
{
	struct toggler *t = arg;
	int k;

	for (k = 0; k < t->turns && !t->st; k++) {
		t->st = cms_region_flags_set(t->r, CMS_REGION_VERIFY, CMS_REGION_VERIFY);
		if (!t->st)
			t->st = cms_region_flags_set(t->r, CMS_REGION_VERIFY, 0);
	}
	return NULL;
}

/* Two threads turn the flag on and off on two regions of one device while a third verified
 * region pauses and resumes (checksumming with the same kernel): every call succeeds, the
 * third's checks pass, and after the joins the kernel is held once (the third's); its clear
 * gives everything back. ThreadSanitizer checks the holds. */
START_TEST(holds_race)
{
	enum { TURNS = 40, CYCLES = 10 };
	cms_context *ctx = t_ctx();
	cms_region *c = region(ctx, "c", CMS_POLICY_HOST, CMS_REGION_VERIFY);
	struct toggler t[2] = { { region(ctx, "a", CMS_POLICY_HOST, 0), TURNS, CMS_OK },
				{ region(ctx, "b", CMS_POLICY_HOST, 0), TURNS, CMS_OK } };
	uint64_t p[NA], before[5], after[5];
	pthread_t th[2];
	int k;

	alloc_fill(c, p, 130);
	for (k = 0; k < 2; k++)
		ck_assert_int_eq(pthread_create(&th[k], NULL, toggle, &t[k]), 0);
	for (k = 0; k < CYCLES; k++) {
		ck_ok(cms_region_pause(c, NULL, NULL));
		ck_ok(cms_region_resume(c, NULL, NULL));
	}
	for (k = 0; k < 2; k++) {
		ck_assert_int_eq(pthread_join(th[k], NULL), 0);
		ck_assert_msg(t[k].st == CMS_OK, "thread %d: %s", k, cms_status_name(t[k].st));
		ck_assert_uint_eq(t_info(t[k].r).flags, 0);
	}
	ck_content(p, 130);
	ck_assert_uint_eq(t_stats(c).bytes_verified, CYCLES * (sizes[0] + sizes[1] + sizes[2]));
	ck_assert_uint_eq(modules(), t_is_sim() ? 1 : 0);
	sim_held(before);
	ck_ok(cms_region_flags_set(c, CMS_REGION_VERIFY, 0));
	sim_held(after);
	if (t_is_sim()) {
		ck_assert_uint_eq(before[3] - after[3], t_info(c).granularity);
		ck_assert_uint_eq(after[4], 0);
	}
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

static uint64_t rnd_state = 0x1234567887654321ull;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

/* The kernel itself, loaded by the test from the library's PTX (the real driver JITs it; the
 * simulation runs its C definition): tasks of every shape (aligned or not, tails of 1..7
 * bytes, larger than a block's stride, several per slot) over random bytes give the sums of
 * cms_checksum_span over the same bytes. */
START_TEST(kernel_matches_c)
{
	enum { NT = 12, NSLOTS = 4 };
	const uint64_t data_len = 8 * MiB + 13;
	struct cms_driver *d = t_drv();
	cms_context *ctx = t_ctx();
	cms_region *r = region(ctx, "k", CMS_POLICY_DISCARD, 0);
	struct cms_checksum_task t[NT];
	uint64_t data, scratch, n = NT, sums_dev, want[NSLOTS] = { 0 }, got[NSLOTS];
	void *params[] = { &scratch, &n, &sums_dev };
	unsigned char *h = malloc(data_len);
	CUcontext c, popped;
	CUmodule mod = NULL;
	CUfunction fn = NULL;
	CUdevice cu;
	size_t i;

	ck_assert_ptr_nonnull(h);
	for (i = 0; i < data_len; i++)
		h[i] = (unsigned char)rnd();
	ck_ok(cms_alloc(r, data_len, &data));
	ck_ok(cms_alloc(r, 4096, &scratch));
	sums_dev = scratch + NT * sizeof(t[0]);
	ck_assert_int_eq(t_write(0, data, h, data_len), 0);
	for (i = 0; i < NT; i++) {
		uint64_t off = i < 2 ? 0 : rnd() % (data_len / 2);
		uint64_t len = i == 0 ? data_len : i == 1 ? 7 : 1 + rnd() % (data_len - off - 1);

		if (i == 2) { /* aligned, a whole task */
			off &= ~(uint64_t)7;
			len = CMS_CHECKSUM_TASK_BYTES;
		}
		if (i == 3)
			off |= 3; /* unaligned start */
		t[i] = (struct cms_checksum_task){
			.ptr = data + off, .len = len, .off = off + 17 * i, .slot = i % NSLOTS
		};
		want[i % NSLOTS] += cms_checksum_span(h + off, len, off + 17 * i);
	}
	ck_assert_int_eq(t_write(0, scratch, t, sizeof(t)), 0);
	ck_assert_int_eq(d->cuDeviceGet(&cu, 0), 0);
	ck_assert_int_eq(d->cuDevicePrimaryCtxRetain(&c, cu), 0);
	ck_assert_int_eq(d->cuCtxPushCurrent(c), 0);
	memset(got, 0, sizeof(got));
	ck_assert_int_eq(d->cuMemcpyHtoD(sums_dev, got, sizeof(got)), 0);
	ck_assert_int_eq(d->cuModuleLoadData(&mod, cms_checksum_ptx), 0);
	ck_assert_int_eq(d->cuModuleGetFunction(&fn, mod, CMS_CHECKSUM_ENTRY), 0);
	/* fewer blocks than tasks: the blocks' loop over tasks too */
	ck_assert_int_eq(d->cuLaunchKernel(fn, NT / 3, 1, 1, CMS_CHECKSUM_BLOCK, 1, 1, 0, NULL,
					   params, NULL),
			 0);
	ck_assert_int_eq(d->cuCtxSynchronize(), 0);
	ck_assert_int_eq(d->cuMemcpyDtoH(got, sums_dev, sizeof(got)), 0);
	ck_assert_int_eq(d->cuModuleUnload(mod), 0);
	ck_assert_int_eq(d->cuCtxPopCurrent(&popped), 0);
	d->cuDevicePrimaryCtxRelease(cu);
	for (i = 0; i < NSLOTS; i++)
		ck_assert_msg(got[i] == want[i], "slot %zu: kernel 0x%016llx, C 0x%016llx", i,
			      (unsigned long long)got[i], (unsigned long long)want[i]);
	free(h);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* One 1 GiB allocation (64 MiB on the simulation) round trips verified; one flipped bit in
 * its backup's last word is caught. */
START_TEST(big_round_trip)
{
	uint64_t size = t_is_sim() ? 64 * MiB : 1024 * MiB, p;
	cms_context *ctx = t_ctx();
	cms_region *r = region(ctx, "big", CMS_POLICY_HOST, CMS_REGION_VERIFY);
	cms_region_stats st;

	ck_ok(cms_alloc(r, size, &p));
	ck_assert_int_eq(t_fill(0, p, size, 5), 0);
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_assert_int_eq(t_check(0, p, size, 5), -1);
	st = t_stats(r);
	ck_assert_uint_eq(st.bytes_verified, size);
	ck_ok(cms_region_pause(r, NULL, NULL));
	*t_host_byte(ctx, p + size - 1) ^= 0x01;
	ck_status(cms_region_resume(r, NULL, NULL), CMS_ERR_VERIFY_FAILED);
	*t_host_byte(ctx, p + size - 1) ^= 0x01;
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_assert_int_eq(t_check(0, p, size, 5), -1);
	fprintf(stderr, "big_round_trip: %llu MiB, verify_ns %llu over 2 pauses and 2 resumes\n",
		(unsigned long long)(size / MiB), (unsigned long long)t_stats(r).verify_ns);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* One tag on two devices (a thread each): each device loads its own kernel; a change in the
 * second device's backup fails the resume of both, all or nothing. */
START_TEST(two_devices)
{
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_context *ctx = t_ctx();
	cms_region *r[2];
	uint64_t p[2][NA];
	int d, n = 0;

	ck_assert_int_eq(t_drv()->cuDeviceGetCount(&n), 0);
	ck_assert(!t_is_sim() || n == 2); /* CMS_SIM_DEVICES=2 */
	if (n < 2) {
		ck_ok(cms_context_destroy(ctx));
		return;
	}
	o.policy = CMS_POLICY_HOST;
	o.flags = CMS_REGION_VERIFY;
	for (d = 0; d < 2; d++) {
		size_t i;

		o.device = d;
		ck_ok(cms_region_create(ctx, "m", &o, &r[d]));
		for (i = 0; i < NA; i++) {
			ck_ok(cms_alloc(r[d], sizes[i], &p[d][i]));
			ck_assert_int_eq(
				t_fill(d, p[d][i], sizes[i], 100u * (uint32_t)d + (uint32_t)i), 0);
		}
	}
	ck_ok(cms_pause(ctx, "m", NULL, NULL));
	if (t_is_sim())
		ck_assert_uint_eq(modules(), 2);
	ck_ok(cms_resume(ctx, "m", NULL, NULL));
	ck_ok(cms_pause(ctx, "m", NULL, NULL));
	*t_host_byte(ctx, p[1][0] + 99) ^= 0x04;
	ck_status(cms_resume(ctx, "m", NULL, NULL), CMS_ERR_VERIFY_FAILED);
	ck_assert_uint_eq(t_info(r[0]).state, CMS_STATE_PAUSED);
	ck_assert_uint_eq(t_info(r[1]).state, CMS_STATE_PAUSED);
	ck_assert_uint_eq(t_info(r[0]).backed_bytes, 0);
	*t_host_byte(ctx, p[1][0] + 99) ^= 0x04;
	ck_ok(cms_resume(ctx, "m", NULL, NULL));
	for (d = 0; d < 2; d++) {
		size_t i;

		for (i = 0; i < NA; i++)
			ck_assert_int_eq(
				t_check(d, p[d][i], sizes[i], 100u * (uint32_t)d + (uint32_t)i),
				-1);
		ck_assert_uint_eq(t_stats(r[d]).bytes_verified,
				  2 * (sizes[0] + sizes[1] + sizes[2]));
	}
	ck_ok(cms_context_destroy(ctx));
	if (t_is_sim())
		ck_assert_uint_eq(modules(), 0);
}
END_TEST

static Suite *make(void)
{
	Suite *s = suite_create("verify");
	TCase *tc = tcase_create("verify");

	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, host_round_trip);
	tcase_add_test(tc, disk_round_trip);
	tcase_add_test(tc, host_corrupt);
	tcase_add_test(tc, disk_corrupt);
	tcase_add_test(tc, discarded_excluded);
	tcase_add_test(tc, swap_checks);
	tcase_add_test(tc, many_allocations);
	tcase_add_test(tc, flag_rules);
	tcase_add_test(tc, two_devices);
	tcase_add_test(tc, kernel_matches_c);
	tcase_add_test(tc, big_round_trip);
	tcase_add_test(tc, full_device_pause);
	tcase_add_test(tc, full_device_flag_refused);
	tcase_add_test(tc, holds_race);
	tcase_add_test(tc, faults_host);	/* simulation only */
	tcase_add_test(tc, faults_disk);	/* simulation only */
	tcase_add_test(tc, module_load_fails);	/* simulation only */
	tcase_add_test(tc, faults_hold);	/* simulation only */
	tcase_add_test(tc, unload_unmap_fails); /* simulation only */
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return t_main(make, T_NEEDS_DEVICE);
}
