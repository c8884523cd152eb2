/* SPDX-License-Identifier: MIT */
/*
 * test_backup.c - host backups readable (cms_backup_get, cms_backup_read) and
 * retention changeable between cycles (cms_region_flags_set), since 1.2: the
 * backup while paused (CURRENT) and kept by a retaining resume (RETAINED),
 * none after a releasing resume, none for DISCARD and ZERO, any pointer inside
 * an allocation, a DISK region's file read back, bad arguments; the flags'
 * rules and the buffers they give back at once; (simulation only) injected
 * driver and file faults.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define NA 3 /* allocations per region */
static const uint64_t sizes[NA] = { 1 * MiB + 4096, 3 * MiB, 100 * 1024 };

static cms_region_info info(cms_region *r)
{
	cms_region_info i = { .struct_size = sizeof(i) };

	ck_ok(cms_region_info_get(r, &i));
	return i;
}

static void alloc_fill(cms_region *r, uint64_t *p, uint32_t seed)
{
	size_t i;

	for (i = 0; i < NA; i++) {
		ck_ok(cms_alloc(r, sizes[i], &p[i]));
		ck_assert_int_eq(t_fill(0, p[i], sizes[i], seed + (uint32_t)i), 0);
	}
}

/* Whether the n bytes at h are bytes [off, off + n) of the pattern of seed. */
static int same_as_pattern(const void *h, size_t off, size_t n, uint32_t seed)
{
	const unsigned char *b = h;
	size_t i;

	for (i = 0; i < n; i++) {
		uint32_t w = t_pattern(seed, (off + i) / 4);

		if (b[i] != (unsigned char)(w >> (8 * ((off + i) % 4))))
			return 0;
	}
	return 1;
}

static cms_backup_info backup(cms_context *ctx, uint64_t ptr)
{
	cms_backup_info b;

	memset(&b, 0xa5, sizeof(b));
	b.struct_size = sizeof(b);
	ck_ok(cms_backup_get(ctx, ptr, &b));
	return b;
}

/* Every allocation's backup holds its pattern of seed: in place and read back, from a pointer
 * inside it too; state as given. */
static void ck_backups(cms_context *ctx, const uint64_t *p, uint32_t seed, uint32_t policy,
		       uint32_t state)
{
	size_t i;

	for (i = 0; i < NA; i++) {
		size_t off = 4096 + 3 * i + 1, n = sizes[i] - off;
		cms_backup_info b = backup(ctx, p[i] + off); /* not the base */
		unsigned char *buf = malloc(sizes[i]);

		ck_assert_ptr_nonnull(buf);
		ck_assert_uint_eq(b.struct_size, sizeof(b));
		ck_assert_uint_eq(b.base, p[i]);
		ck_assert_uint_eq(b.size, sizes[i]);
		ck_assert_uint_eq(b.policy, policy);
		ck_assert_uint_eq(b.state, state);
		if (policy == CMS_POLICY_HOST) {
			ck_assert_ptr_nonnull(b.host);
			ck_assert(same_as_pattern(b.host, 0, sizes[i], seed + (uint32_t)i));
		} else {
			ck_assert_ptr_null(b.host);
		}
		ck_ok(cms_backup_read(ctx, p[i] + off, buf, n));
		ck_assert(same_as_pattern(buf, off, n, seed + (uint32_t)i));
		ck_ok(cms_backup_read(ctx, p[i], buf, sizes[i]));
		ck_assert(same_as_pattern(buf, 0, sizes[i], seed + (uint32_t)i));
		ck_ok(cms_backup_read(ctx, p[i] + sizes[i] - 1, buf, 1)); /* the last byte */
		ck_assert(same_as_pattern(buf, sizes[i] - 1, 1, seed + (uint32_t)i));
		free(buf);
	}
}

static void ck_no_backups(cms_context *ctx, const uint64_t *p, cms_status want)
{
	cms_backup_info b = { .struct_size = sizeof(b) };
	char c;
	size_t i;

	for (i = 0; i < NA; i++) {
		ck_status(cms_backup_get(ctx, p[i], &b), want);
		ck_status(cms_backup_read(ctx, p[i] + 1, &c, 1), want);
	}
}

START_TEST(host_current_then_retained)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "w", 0, CMS_POLICY_HOST);
	uint64_t p[NA];

	alloc_fill(r, p, 10);
	ck_no_backups(ctx, p, CMS_ERR_NOT_PAUSED); /* never paused */
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_backups(ctx, p, 10, CMS_POLICY_HOST, CMS_BACKUP_CURRENT);
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_assert_int_eq(t_check(0, p[1], sizes[1], 11), -1);
	/* Retained: the content of the last pause, whatever the device holds now. */
	ck_assert_int_eq(t_fill(0, p[0], sizes[0], 99), 0);
	ck_backups(ctx, p, 10, CMS_POLICY_HOST, CMS_BACKUP_RETAINED);
	/* The next pause writes the new content into the same buffers. */
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_assert(same_as_pattern(backup(ctx, p[0]).host, 0, sizes[0], 99));
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_ok(cms_free(ctx, p[2]));
	ck_status(cms_backup_get(ctx, p[2],
				 &(cms_backup_info){ .struct_size = sizeof(cms_backup_info) }),
		  CMS_ERR_NOT_FOUND);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

START_TEST(releasing_resume_keeps_none)
{
	cms_context *ctx = t_ctx();
	cms_region *r;
	uint64_t p[NA];

	t_region_flags = CMS_REGION_RELEASE_HOST;
	r = t_region(ctx, "w", 0, CMS_POLICY_HOST);
	t_region_flags = 0;
	alloc_fill(r, p, 20);
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_backups(ctx, p, 20, CMS_POLICY_HOST, CMS_BACKUP_CURRENT);
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_no_backups(ctx, p, CMS_ERR_NOT_PAUSED);
	ck_assert_uint_eq(info(r).host_bytes, 0);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

START_TEST(policies_without_content)
{
	static const uint32_t pol[] = { CMS_POLICY_DISCARD, CMS_POLICY_ZERO };
	cms_context *ctx = t_ctx();
	size_t k;

	for (k = 0; k < 2; k++) {
		char tag[8];
		cms_region *r;
		uint64_t p[NA];

		snprintf(tag, sizeof(tag), "r%zu", k);
		r = t_region(ctx, tag, 0, pol[k]);
		alloc_fill(r, p, 30);
		ck_no_backups(ctx, p, CMS_ERR_NOT_SUPPORTED);
		ck_ok(cms_region_pause(r, NULL, NULL));
		ck_no_backups(ctx, p, CMS_ERR_NOT_SUPPORTED);
		ck_ok(cms_region_resume(r, NULL, NULL));
		ck_no_backups(ctx, p, CMS_ERR_NOT_SUPPORTED);
	}
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

static char dir[256];

static void make_dir(void)
{
	const char *t = getenv("TMPDIR");

	snprintf(dir, sizeof(dir), "%s/cms-backup-XXXXXX", t && *t ? t : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

START_TEST(disk_read_back)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "d", 0, CMS_POLICY_DISK);
	uint64_t p[NA];

	make_dir();
	ck_ok(cms_region_disk_dir_set(r, dir));
	alloc_fill(r, p, 40);
	ck_no_backups(ctx, p, CMS_ERR_NOT_PAUSED);
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_backups(ctx, p, 40, CMS_POLICY_DISK, CMS_BACKUP_CURRENT);
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_assert_int_eq(t_fill(0, p[1], sizes[1], 77), 0);
	ck_backups(ctx, p, 40, CMS_POLICY_DISK, CMS_BACKUP_RETAINED); /* the file keeps it */
	/* Asking for the file's space back now: nothing kept any more. */
	ck_ok(cms_region_flags_set(r, CMS_REGION_RELEASE_HOST, CMS_REGION_RELEASE_HOST));
	ck_no_backups(ctx, p, CMS_ERR_NOT_PAUSED);
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_assert(backup(ctx, p[1]).state == CMS_BACKUP_CURRENT);
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_assert_int_eq(t_check(0, p[1], sizes[1], 77), -1);
	ck_no_backups(ctx, p, CMS_ERR_NOT_PAUSED); /* the releasing resume emptied the file */
	ck_ok(cms_context_destroy(ctx));
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* A DISK backup whose last staging chunks were declared content-free (cms_range_discard) is
 * not written there, so the file ends inside the slot: a read of the whole allocation still
 * succeeds (the declared bytes read zeros) and the live bytes come back. */
START_TEST(disk_read_past_a_declared_tail)
{
	uint64_t chunk = t_is_sim() ? (1ull << 20) : (64ull << 20), n = 3 * chunk, p;
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "d", 0, CMS_POLICY_DISK);
	uint32_t *buf = malloc(n);

	ck_assert_ptr_nonnull(buf);
	make_dir();
	ck_ok(cms_region_disk_dir_set(r, dir));
	ck_ok(cms_alloc(r, n, &p));
	ck_assert_int_eq(t_fill(0, p, n, 9), 0);
	ck_ok(cms_range_discard(ctx, p + chunk, 2 * chunk));
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_ok(cms_backup_read(ctx, p, buf, n));
	ck_assert_int_eq(t_host_check_except(buf, chunk, 9, 0, 0), -1); /* the live first chunk */
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_ok(cms_context_destroy(ctx));
	ck_assert_int_eq(rmdir(dir), 0);
	free(buf);
}
END_TEST

START_TEST(bad_arguments)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "w", 0, CMS_POLICY_HOST);
	cms_backup_info b = { .struct_size = sizeof(b) };
	unsigned char big[4097] = { 0 };
	uint64_t p[NA];
	char c;

	alloc_fill(r, p, 50);
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_status(cms_backup_get(NULL, p[0], &b), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_backup_get(ctx, p[0], NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_backup_read(NULL, p[0], &c, 1), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_backup_read(ctx, p[0], NULL, 1), CMS_ERR_INVALID_ARGUMENT);
	b.struct_size = 0;
	ck_status(cms_backup_get(ctx, p[0], &b), CMS_ERR_STRUCT_SIZE);
	b.struct_size = offsetof(cms_backup_info, state); /* smaller than the 1.2 struct */
	ck_status(cms_backup_get(ctx, p[0], &b), CMS_ERR_STRUCT_SIZE);
	/* A larger struct with a zero tail is filled and its tail stays zero. */
	memset(big, 0xff, sizeof(big));
	memset(big, 0, 256);
	*(size_t *)(void *)big = 256;
	ck_ok(cms_backup_get(ctx, p[0] + 5, (cms_backup_info *)(void *)big));
	ck_assert_uint_eq(((cms_backup_info *)(void *)big)->base, p[0]);
	ck_assert_uint_eq(big[sizeof(cms_backup_info)], 0);
	ck_assert_uint_eq(big[255], 0);
	*(size_t *)(void *)big = 4097;
	ck_status(cms_backup_get(ctx, p[0], (cms_backup_info *)(void *)big), CMS_ERR_STRUCT_SIZE);
	b.struct_size = sizeof(b);
	/* Not an allocation: 0, past the end (in its granule's padding), freed. */
	ck_status(cms_backup_get(ctx, 0, &b), CMS_ERR_NOT_FOUND);
	ck_status(cms_backup_get(ctx, p[0] + sizes[0], &b), CMS_ERR_NOT_FOUND);
	ck_status(cms_backup_read(ctx, p[0] + sizes[0], &c, 1), CMS_ERR_NOT_FOUND);
	/* Ranges passing the end. */
	ck_status(cms_backup_read(ctx, p[0] + sizes[0] - 1, big, 2), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_backup_read(ctx, p[0] + 1, big, sizes[0]), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_backup_read(ctx, p[0] + 8, big, UINT64_MAX), CMS_ERR_INVALID_ARGUMENT);
	ck_ok(cms_backup_read(ctx, p[0] + 8, big, 0));
	ck_ok(cms_free(ctx, p[2]));
	ck_status(cms_backup_get(ctx, p[2], &b), CMS_ERR_NOT_FOUND);
	ck_status(cms_backup_read(ctx, p[2], &c, 1), CMS_ERR_NOT_FOUND);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

START_TEST(flags_rules)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "w", 0, CMS_POLICY_HOST);
	cms_region_info i;
	uint64_t p[NA];

	alloc_fill(r, p, 60);
	ck_status(cms_region_flags_set(NULL, 0, 0), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_region_flags_set(r, CMS_REGION_GUARD, 0), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_region_flags_set(r, CMS_REGION_COALESCE | CMS_REGION_RELEASE_HOST, 0),
		  CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_region_flags_set(r, CMS_REGION_RELEASE_HOST, CMS_REGION_HOST_PAGEABLE),
		  CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_region_flags_set(r, 1ull << 63, 1ull << 63), CMS_ERR_INVALID_ARGUMENT);
	ck_assert_uint_eq(info(r).flags, 0);
	{ /* pageable backups only for HOST, as at cms_region_create */
		cms_region *z = t_region(ctx, "z", 0, CMS_POLICY_DISCARD);

		ck_status(
			cms_region_flags_set(z, CMS_REGION_HOST_PAGEABLE, CMS_REGION_HOST_PAGEABLE),
			CMS_ERR_INVALID_ARGUMENT);
		ck_assert_uint_eq(info(z).flags, 0);
		ck_ok(cms_region_destroy(z));
	}
	ck_ok(cms_region_flags_set(r, 0, 0)); /* nothing to change */

	/* Paused: HOST_PAGEABLE cannot change; RELEASE_HOST applies at the resume. */
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_status(cms_region_flags_set(r, CMS_REGION_HOST_PAGEABLE, CMS_REGION_HOST_PAGEABLE),
		  CMS_ERR_PAUSED);
	ck_ok(cms_region_flags_set(r, CMS_REGION_HOST_PAGEABLE, 0)); /* no change */
	ck_ok(cms_region_flags_set(r, CMS_REGION_RELEASE_HOST, CMS_REGION_RELEASE_HOST));
	i = info(r);
	ck_assert_uint_eq(i.flags, CMS_REGION_RELEASE_HOST);
	ck_assert_uint_gt(i.host_bytes, 0); /* the content is there until the resume */
	ck_backups(ctx, p, 60, CMS_POLICY_HOST, CMS_BACKUP_CURRENT);
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_assert_uint_eq(info(r).host_bytes, 0);
	ck_assert_int_eq(t_check(0, p[0], sizes[0], 60), -1);

	/* Retaining again: buffers kept after a resume, given back at once when asked. */
	ck_ok(cms_region_flags_set(r, CMS_REGION_RELEASE_HOST, 0));
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_ok(cms_region_resume(r, NULL, NULL));
	i = info(r);
	ck_assert_uint_gt(i.host_bytes, 0);
	if (t_is_sim())
		ck_assert_uint_eq(i.pinned_bytes, i.host_bytes);
	ck_ok(cms_region_flags_set(r, CMS_REGION_HOST_PAGEABLE, CMS_REGION_HOST_PAGEABLE));
	i = info(r);
	ck_assert_uint_eq(i.flags, CMS_REGION_HOST_PAGEABLE);
	ck_assert_uint_eq(i.host_bytes, 0);
	ck_assert_uint_eq(i.pinned_bytes, 0);
	ck_no_backups(ctx, p, CMS_ERR_NOT_PAUSED);
	ck_ok(cms_region_flags_set(r, CMS_REGION_HOST_PAGEABLE, 0));
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_assert_uint_gt(info(r).host_bytes, 0);
	ck_ok(cms_region_flags_set(r, CMS_REGION_RELEASE_HOST, CMS_REGION_RELEASE_HOST));
	i = info(r);
	ck_assert_uint_eq(i.host_bytes, 0);
	ck_assert_uint_eq(i.pinned_bytes, 0);
	ck_assert_int_eq(t_check(0, p[2], sizes[2], 62), -1);
	/* Cycles go on with the new flags. */
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_assert_uint_eq(info(r).host_bytes, 0);
	ck_assert_int_eq(t_check(0, p[1], sizes[1], 61), -1);
	ck_ok(cms_context_destroy(ctx));
	if (t_is_sim()) {
		cmssim_counters c = t_counters();

		ck_assert_uint_eq(c.host_registered_bytes, 0);
	}
}
END_TEST

/* Giving buffers back after an asynchronous resume waits for its copies out of them. */
START_TEST(flags_after_async_resume)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "w", 0, CMS_POLICY_HOST);
	cms_resume_options ro = CMS_RESUME_OPTIONS_INIT;
	uint64_t p[NA];
	int round;

	ro.flags = CMS_RESUME_ASYNC;
	alloc_fill(r, p, 70);
	for (round = 0; round < 20; round++) {
		ck_ok(cms_region_flags_set(r, CMS_REGION_RELEASE_HOST, 0));
		ck_ok(cms_region_pause(r, NULL, NULL));
		ck_ok(cms_region_resume(r, &ro, NULL));
		ck_ok(cms_region_flags_set(r, CMS_REGION_RELEASE_HOST, CMS_REGION_RELEASE_HOST));
		ck_assert_uint_eq(info(r).restore_pending, 0);
		ck_assert_uint_eq(info(r).host_bytes, 0);
		ck_assert_int_eq(t_check(0, p[1], sizes[1], 71), -1);
	}
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* Reads racing a free and a pause of the same allocations: each either reads a backup or
 * finds none, never freed memory (ASan, TSan). */
struct reader {
	cms_context *ctx;
	_Atomic uint64_t ptr;
	atomic_int stop;
	atomic_int reads;
};

static void *read_loop(void *arg)
{
	struct reader *rd = arg;
	unsigned char buf[256];

	while (!atomic_load(&rd->stop)) {
		cms_status st = cms_backup_read(rd->ctx, atomic_load(&rd->ptr), buf, sizeof(buf));

		if (st != CMS_OK && st != CMS_ERR_NOT_FOUND && st != CMS_ERR_NOT_PAUSED)
			return (void *)(intptr_t)st;
		atomic_fetch_add(&rd->reads, st == CMS_OK);
	}
	return NULL;
}

START_TEST(read_races_free_and_pause)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "w", 0, CMS_POLICY_HOST);
	struct reader rd = { .ctx = ctx };
	pthread_t th;
	void *ret;
	int i;

	ck_assert_int_eq(pthread_create(&th, NULL, read_loop, &rd), 0);
	for (i = 0; i < 50; i++) {
		uint64_t p;

		ck_ok(cms_alloc(r, 256 * 1024, &p));
		atomic_store(&rd.ptr, p + 4096);
		ck_ok(cms_region_pause(r, NULL, NULL));
		ck_ok(cms_region_resume(r, NULL, NULL));
		ck_ok(cms_free(ctx, p));
	}
	atomic_store(&rd.stop, 1);
	ck_assert_int_eq(pthread_join(th, &ret), 0);
	ck_assert_ptr_null(ret);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* ---- simulation only: injected faults ---- */

/* A failed cuMemHostUnregister keeps the buffer (never unmapped while page-locked); the flag
 * is set anyway and the next free or resume gives it back. */
START_TEST(flags_unregister_fails)
{
	const struct t_sim *sim;
	cms_context *ctx;
	cms_region *r;
	uint64_t p[NA];
	int nth;

	if (!t_is_sim()) /* it fails driver calls on purpose */
		return;
	sim = t_sim();
	for (nth = 1; nth <= 2; nth++) {
		cms_region_info i;

		ctx = t_ctx();
		r = t_region(ctx, "w", 0, CMS_POLICY_HOST);
		alloc_fill(r, p, 80);
		ck_ok(cms_region_pause(r, NULL, NULL));
		ck_ok(cms_region_resume(r, NULL, NULL));
		ck_assert_int_eq(
			sim->fail_call("cuMemHostUnregister", (uint64_t)nth, CUDA_ERROR_UNKNOWN),
			0);
		ck_ok(cms_region_flags_set(r, CMS_REGION_RELEASE_HOST, CMS_REGION_RELEASE_HOST));
		sim->clear_faults();
		i = info(r);
		ck_assert_uint_eq(i.flags, CMS_REGION_RELEASE_HOST);
		ck_assert_uint_gt(i.host_bytes, 0); /* what could not be unregistered stays */
		ck_assert_uint_eq(i.pinned_bytes, i.host_bytes);
		ck_ok(cms_region_pause(r, NULL, NULL));
		ck_ok(cms_region_resume(r, NULL, NULL));
		ck_assert_uint_eq(info(r).host_bytes, 0);
		ck_assert_int_eq(t_check(0, p[0], sizes[0], 80), -1);
		ck_ok(cms_context_destroy(ctx));
		ck_assert_uint_eq(t_counters().host_registered_bytes, 0);
	}
}
END_TEST

/* Waiting for an asynchronous resume fails: nothing changes (flags, buffers). */
START_TEST(flags_settle_fails)
{
	const struct t_sim *sim;
	cms_resume_options ro = CMS_RESUME_OPTIONS_INIT;
	cms_context *ctx;
	cms_region *r;
	cms_region_info i;
	uint64_t p[NA];

	if (!t_is_sim()) /* it fails driver calls on purpose */
		return;
	sim = t_sim();
	ro.flags = CMS_RESUME_ASYNC;
	ctx = t_ctx();
	r = t_region(ctx, "w", 0, CMS_POLICY_HOST);
	alloc_fill(r, p, 90);
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_ok(cms_region_resume(r, &ro, NULL));
	ck_assert_int_eq(sim->fail_call("cuStreamSynchronize", 1, CUDA_ERROR_UNKNOWN), 0);
	ck_assert_int_ne(cms_region_flags_set(r, CMS_REGION_RELEASE_HOST, CMS_REGION_RELEASE_HOST),
			 CMS_OK);
	sim->clear_faults();
	i = info(r);
	ck_assert_uint_eq(i.flags, 0);
	ck_assert_uint_gt(i.host_bytes, 0);
	ck_ok(cms_region_flags_set(r, CMS_REGION_RELEASE_HOST, CMS_REGION_RELEASE_HOST));
	ck_assert_uint_eq(info(r).host_bytes, 0);
	ck_assert_int_eq(t_check(0, p[1], sizes[1], 91), -1);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* A failed read of the DISK file: CMS_ERR_IO naming the read; the next read works. */
START_TEST(disk_read_fails)
{
	int (*fail_io)(int op, uint64_t nth, int err);
	cms_context *ctx;
	cms_region *r;
	uint64_t p[NA];
	char buf[64];

	if (!t_is_sim())
		return;
	fail_io = (int (*)(int, uint64_t, int))dlsym(t_drv()->dl, "cmssim_fail_io");
	ck_assert_ptr_nonnull(fail_io);
	ctx = t_ctx();
	r = t_region(ctx, "d", 0, CMS_POLICY_DISK);
	make_dir();
	ck_ok(cms_region_disk_dir_set(r, dir));
	alloc_fill(r, p, 100);
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_assert_int_eq(fail_io(CMSSIM_IO_READ, 1, EIO), 0);
	ck_status(cms_backup_read(ctx, p[1] + 10, buf, sizeof(buf)), CMS_ERR_IO);
	ck_assert_ptr_nonnull(strstr(cms_last_error(), "read"));
	ck_ok(cms_backup_read(ctx, p[1] + 10, buf, sizeof(buf)));
	ck_assert(same_as_pattern(buf, 10, sizeof(buf), 101));
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_assert_int_eq(t_check(0, p[1], sizes[1], 101), -1);
	ck_ok(cms_context_destroy(ctx));
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

static Suite *make(void)
{
	Suite *s = suite_create("backup");
	TCase *tc = tcase_create("backup");

	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, host_current_then_retained);
	tcase_add_test(tc, releasing_resume_keeps_none);
	tcase_add_test(tc, policies_without_content);
	tcase_add_test(tc, disk_read_back);
	tcase_add_test(tc, disk_read_past_a_declared_tail);
	tcase_add_test(tc, bad_arguments);
	tcase_add_test(tc, flags_rules);
	tcase_add_test(tc, flags_after_async_resume);
	tcase_add_test(tc, read_races_free_and_pause);
	tcase_add_test(tc, flags_unregister_fails); /* simulation only */
	tcase_add_test(tc, flags_settle_fails);	    /* simulation only */
	tcase_add_test(tc, disk_read_fails);	    /* simulation only */
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return t_main(make, T_NEEDS_DEVICE);
}
