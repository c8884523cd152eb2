/* SPDX-License-Identifier: MIT */
/*
 * test_chunks.c - allocation-time coalescing (CMS_REGION_COALESCE, vmm/run.c)
 * on the host simulation: cms_alloc carves a region's small allocations out
 * of chunks, one physical handle each (at most 16 granules here, the simulation's
 * CMS_SIM_CHUNK_GRANULES default; 64 MiB on a GPU; as many allocations of the
 * first one's size as fit), mapped whole, so that the
 * first pause already releases one handle per chunk. The simulation's
 * counters show how many driver objects back the memory; content checks show
 * that nothing moved.
 *
 * Covers: handles per allocation count, frees inside a chunk (retained until
 * the chunk goes), the spare tail reused by the next allocations and bounded
 * per region, pause/resume content for HOST, ZERO and DISK (backups of the
 * allocations only), guarded pauses, destroy with live chunks, cms_free while
 * paused, and fault sweeps over every driver call of cms_alloc and of a
 * pause and a resume. Runs with CMS_SIM_GRANULARITY=64K. The gpu mode runs
 * first_pause_per_chunk only (the others need the simulation's counters and
 * faults): 64 x 8 MiB share 8 handles of 64 MiB on the real driver
 * (cuMemRetainAllocationHandle gives the handle mapped at an address), the
 * first pause releases them, the resume backs runs, and every allocation is
 * read-write throughout.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define G (64 * 1024ull) /* the granularity this test runs with */
#define CHUNK (16 * G)	 /* the simulation's chunk: 16 granules */
#define MAXA 64

static int (*get_access(void))(uint64_t, int)
{
	int (*fn)(uint64_t, int);

	t_sim();
	fn = (int (*)(uint64_t, int))dlsym(t_drv()->dl, "cmssim_get_access");
	ck_assert_ptr_nonnull(fn);
	return fn;
}

static cms_region_info info(cms_region *r)
{
	cms_region_info i = { .struct_size = sizeof(i) };

	ck_ok(cms_region_info_get(r, &i));
	return i;
}

static void counts_at(int line, uint64_t handles, uint64_t mappings, uint64_t used)
{
	cmssim_counters c = t_counters();

	ck_assert_msg(c.handles == handles && c.mappings == mappings &&
			      c.device_used_bytes[0] == used,
		      "line %d: handles %llu (want %llu), mappings %llu (%llu), device bytes "
		      "%llu (%llu)",
		      line, (unsigned long long)c.handles, (unsigned long long)handles,
		      (unsigned long long)c.mappings, (unsigned long long)mappings,
		      (unsigned long long)c.device_used_bytes[0], (unsigned long long)used);
}
#define counts(...) counts_at(__LINE__, __VA_ARGS__)

static void everything_freed(void)
{
	t_nothing_left(1);
}

static cms_region *region(cms_context *ctx, uint32_t policy, uint64_t flags)
{
	static int n;
	char tag[32];
	cms_region *r;

	snprintf(tag, sizeof(tag), "chunks-%d", n++);
	t_region_flags = CMS_REGION_COALESCE | CMS_REGION_CHUNKS | flags;
	r = t_region(ctx, tag, 0, policy);
	t_region_flags = 0;
	ck_assert_uint_eq(info(r).granularity, G);
	return r;
}

static uint64_t alloc(cms_region *r, uint64_t bytes)
{
	uint64_t p = 0;

	ck_ok(cms_alloc(r, bytes, &p));
	ck_assert_uint_ne(p, 0);
	return p;
}

/* Every byte of [p, p + len) read-write for device 0 (one check per granule). */
static void rw_at(uint64_t p, uint64_t len)
{
	int (*acc)(uint64_t, int) = get_access();
	uint64_t o;

	for (o = 0; o < len; o += G)
		ck_assert_int_eq(acc(p + o, 0), CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
}

/* The tests that need the simulation's counters pass at once on a GPU (said on stdout). */
static bool sim_only(const char *name)
{
	if (t_is_sim())
		return true;
	printf("%s: simulation only, skipped\n", name);
	return false;
}

/* ---- the real driver too: handles per chunk, first pause, resume ------------ */

typedef CUresult (*retain_fn)(CUmemGenericAllocationHandle *handle, void *addr);

/* The handle mapped at addr (cuMemRetainAllocationHandle, then released), 0 if none; retain
 * NULL: a driver without the call. Device 0's primary context current. */
static CUmemGenericAllocationHandle handle_at(retain_fn retain, uint64_t addr)
{
	struct cms_driver *d = t_drv();
	CUmemGenericAllocationHandle h = 0;
	CUcontext c, popped;
	CUdevice cu;

	ck_assert_int_eq(d->cuDeviceGet(&cu, 0), 0);
	ck_assert_int_eq(d->cuDevicePrimaryCtxRetain(&c, cu), 0);
	ck_assert_int_eq(d->cuCtxPushCurrent(c), 0);
	if (retain(&h, (void *)(uintptr_t)addr) == CUDA_SUCCESS)
		ck_assert_int_eq(d->cuMemRelease(h), 0);
	else
		h = 0;
	d->cuCtxPopCurrent(&popped);
	d->cuDevicePrimaryCtxRelease(cu);
	return h;
}

/* Write and read back the last word of each live allocation. */
static void probe_rw(const uint64_t *p, const bool *live, int n, uint64_t size, uint32_t salt)
{
	int k;

	for (k = 0; k < n; k++) {
		uint32_t v = 0x9e3779b9u * (uint32_t)(k + 1) + salt, got = ~v;

		if (!live[k])
			continue;
		ck_assert_int_eq(t_write(0, p[k] + size - 4, &v, 4), 0);
		ck_assert_int_eq(t_read(0, &got, p[k] + size - 4, 4), 0);
		ck_assert_uint_eq(got, v);
	}
}

/* Distinct handles mapped at the live allocations (address order: runs are consecutive). */
static int distinct_handles(retain_fn retain, const uint64_t *p, const bool *live, int n)
{
	CUmemGenericAllocationHandle h, prev = 0;
	int k, count = 0;

	for (k = 0; k < n; k++) {
		if (!live[k])
			continue;
		h = handle_at(retain, p[k]);
		ck_assert_uint_ne(h, 0);
		count += h != prev;
		prev = h;
	}
	return count;
}

#define NF 64

START_TEST(first_pause_per_chunk)
{
	cms_context *ctx = t_ctx();
	retain_fn retain = (retain_fn)dlsym(t_drv()->dl, "cuMemRetainAllocationHandle");
	cms_pause_result pr = { .struct_size = sizeof(pr) };
	cms_resume_result rr = { .struct_size = sizeof(rr) };
	uint64_t p[NF], gran, chunk, size;
	bool live[NF];
	cms_region *r;
	int k;

	t_region_flags = CMS_REGION_COALESCE | CMS_REGION_CHUNKS;
	r = t_region(ctx, "first", 0, CMS_POLICY_DISCARD);
	t_region_flags = 0;
	gran = info(r).granularity;
	chunk = t_is_sim() ? 16 * gran : 64 * MiB; /* CMS_CHUNK_BYTES (docs/internals.md) */
	ck_assert_uint_eq(chunk % (8 * gran), 0);
	size = chunk / 8; /* 8 MiB on a GPU: the bench's (b) */
	for (k = 0; k < NF; k++) {
		p[k] = alloc(r, size);
		live[k] = true;
		if (k)
			ck_assert_uint_eq(p[k], p[k - 1] + size);
	}
	ck_assert_uint_eq(info(r).retained_bytes, 0); /* 8 full chunks */
	ck_assert_uint_eq(info(r).backed_bytes, NF * size);
	if (retain)
		ck_assert_int_eq(distinct_handles(retain, p, live, NF), NF / 8);
	else
		counts(NF / 8, NF / 8, NF * size);
	probe_rw(p, live, NF, size, 1);

	ck_ok(cms_free(ctx, p[1])); /* retained in its chunk */
	live[1] = false;
	ck_assert_uint_eq(info(r).retained_bytes, size);
	probe_rw(p, live, NF, size, 2);

	ck_ok(cms_region_pause(r, NULL, &pr)); /* one release per chunk */
	ck_assert_uint_eq(pr.allocations, NF - 1);
	ck_assert_uint_eq(pr.bytes_released, NF * size);
	ck_assert_uint_eq(info(r).retained_bytes, 0);
	if (retain) {
		for (k = 0; k < NF; k++)
			if (live[k])
				ck_assert_uint_eq(handle_at(retain, p[k]), 0);
	} else {
		counts(0, 0, 0);
	}

	ck_ok(cms_region_resume(r, NULL, &rr)); /* runs: p[0] alone, p[2..] together */
	ck_assert_uint_eq(rr.bytes_backed, (NF - 1) * size);
	if (retain)
		ck_assert_int_eq(distinct_handles(retain, p, live, NF), 2);
	else
		counts(2, 2, (NF - 1) * size);
	probe_rw(p, live, NF, size, 3);
	ck_ok(cms_region_destroy(r));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* ---- one handle per chunk from the first allocation ------------------------ */

START_TEST(first_allocations_share_a_handle)
{
	if (!sim_only("first_allocations_share_a_handle"))
		return;
	cms_pointer_info pi = { .struct_size = sizeof(pi) };
	cms_context *ctx = t_ctx();
	cms_region *r = region(ctx, CMS_POLICY_DISCARD, 0);
	cms_pause_result pr = { .struct_size = sizeof(pr) };
	cms_resume_result rr = { .struct_size = sizeof(rr) };
	uint64_t p[17];
	int k;

	p[0] = alloc(r, 1000); /* one granule: a chunk of 16 */
	counts(1, 1, CHUNK);
	ck_assert_uint_eq(info(r).retained_bytes, CHUNK - G); /* the spare tail */
	ck_assert_uint_eq(info(r).backed_bytes, G);
	for (k = 1; k < 16; k++) {
		p[k] = alloc(r, G);
		ck_assert_uint_eq(p[k], p[k - 1] + G); /* carved from the tail, in order */
	}
	counts(1, 1, CHUNK);
	ck_assert_uint_eq(info(r).retained_bytes, 0); /* full */
	rw_at(p[0], CHUNK);
	ck_ok(cms_pointer_info_get(ctx, p[3] + 5, &pi)); /* the allocation, not its chunk */
	ck_assert_uint_eq(pi.base, p[3]);
	ck_assert_uint_eq(pi.size, G);
	ck_assert_uint_eq(pi.physical_size, G);
	ck_assert_uint_eq(pi.offset, 5);
	p[16] = alloc(r, G); /* a second chunk, right after the first */
	ck_assert_uint_eq(p[16], p[15] + G);
	counts(2, 2, 2 * CHUNK);
	for (k = 0; k < 17; k++)
		ck_assert_int_eq(t_fill(0, p[k], G, (uint32_t)k), 0);

	ck_ok(cms_region_pause(r, NULL, &pr));
	ck_assert_uint_eq(pr.bytes_released, 2 * CHUNK); /* with the spare tail */
	counts(0, 0, 0);
	ck_assert_uint_eq(info(r).retained_bytes, 0);
	ck_ok(cms_region_resume(r, NULL, &rr));
	ck_assert_uint_eq(rr.bytes_backed, 17 * G); /* one run of the 17 members, no tail */
	counts(1, 1, 17 * G);
	rw_at(p[0], 17 * G);
	/* After a resume the next allocation opens a new chunk. */
	p[0] = alloc(r, G);
	counts(2, 2, 17 * G + CHUNK);
	ck_ok(cms_region_destroy(r));
	everything_freed();
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* ---- frees inside a chunk; the tail is carved, freed bytes are not --------- */

START_TEST(frees_inside_a_chunk)
{
	if (!sim_only("frees_inside_a_chunk"))
		return;
	cms_context *ctx = t_ctx();
	cms_region *r = region(ctx, CMS_POLICY_HOST, 0);
	uint64_t p[4], q;
	int k;

	for (k = 0; k < 4; k++)
		p[k] = alloc(r, G);
	ck_ok(cms_free(ctx, p[1]));
	/* Retained until the chunk goes: the freed member and the tail. */
	ck_assert_uint_eq(info(r).retained_bytes, CHUNK - 3 * G);
	ck_assert_uint_eq(info(r).allocations, 3);
	counts(1, 1, CHUNK);
	q = alloc(r, G);
	ck_assert_uint_eq(q, p[3] + G); /* from the tail, not the freed member's bytes */
	ck_assert_uint_eq(info(r).retained_bytes, CHUNK - 4 * G);
	ck_ok(cms_free(ctx, p[0]));
	ck_ok(cms_free(ctx, p[2]));
	ck_ok(cms_free(ctx, p[3]));
	counts(1, 1, CHUNK);
	ck_ok(cms_free(ctx, q)); /* the last member: the chunk goes */
	counts(0, 0, 0);
	ck_assert_uint_eq(info(r).retained_bytes, 0);
	ck_assert_uint_eq(t_counters().reservations, 0);
	/* And a new one opens at the next allocation. */
	p[0] = alloc(r, 3 * G); /* a chunk of 5 x 3 granules */
	counts(1, 1, 15 * G);
	ck_ok(cms_free(ctx, p[0]));
	everything_freed();
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* ---- the tails a region holds ahead of need are bounded -------------------- */

START_TEST(spare_tails_bounded)
{
	if (!sim_only("spare_tails_bounded"))
		return;
	cms_context *ctx = t_ctx();
	cms_region *r = region(ctx, CMS_POLICY_DISCARD, 0);
	uint64_t used = 0, p;
	/* Size (granules), then the chunk it opens (0: carved from the open one's tail; -1: a
	 * handle of its own), then the tails held ahead of need after it. */
	static const int64_t steps[][3] = {
		{ 6, 12, 6 },  /* as many of its size as 16 granules hold: 2 */
		{ 7, 14, 13 }, /* does not fit the tail of 6: a new chunk, of 2 x 7 */
		{ 5, 0, 8 },   /* fits the open tail of 7 */
		{ 9, -1, 8 },  /* more than half a chunk: its own handle */
		{ 4, 12, 16 }, /* 4 x 4 would hold 12 ahead: cut to the bound, 16 in all */
		{ 3, 0, 13 },  /* the open tail */
		{ 6, 9, 16 },  /* 2 x 6 would hold 6 ahead: cut to 3 */
		{ 2, 0, 14 },  /* the open tail */
		{ 5, 7, 16 },  /* tail of 1 too short; 3 x 5 cut to 2 ahead */
		{ 4, -1, 16 }, /* tail of 2 too short, no room under the bound: its own handle */
	};
	size_t k, handles = 0;

	for (k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
		p = alloc(r, (uint64_t)steps[k][0] * G);
		if (steps[k][1]) {
			handles++;
			used += (uint64_t)(steps[k][1] < 0 ? steps[k][0] : steps[k][1]) * G;
		}
		ck_assert_msg(info(r).retained_bytes == (uint64_t)steps[k][2] * G,
			      "step %zu: retained %llu granules, want %lld", k,
			      (unsigned long long)(info(r).retained_bytes / G),
			      (long long)steps[k][2]);
		counts(handles, handles, used);
		ck_assert_uint_le(info(r).retained_bytes, CHUNK); /* the bound */
	}
	ck_ok(cms_free(ctx, p)); /* its own handle: back at once */
	counts(handles - 1, handles - 1, used - 4 * G);
	ck_ok(cms_region_pause(r, NULL, NULL));
	counts(0, 0, 0);
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_assert_uint_eq(info(r).retained_bytes, 0);
	ck_assert_uint_eq(t_counters().device_used_bytes[0],
			  (6 + 7 + 5 + 9 + 4 + 3 + 6 + 2 + 5) * G);
	ck_ok(cms_context_destroy(ctx));
	everything_freed();
}
END_TEST

/* ---- content through cycles; backups of the allocations only --------------- */

static const uint32_t policies[] = { CMS_POLICY_HOST, CMS_POLICY_DISK, CMS_POLICY_ZERO };

START_TEST(cycles_keep_content)
{
	if (!sim_only("cycles_keep_content"))
		return;
	uint32_t policy = policies[_i];
	cms_context *ctx = t_ctx();
	cms_region *r = region(ctx, policy, 0);
	uint64_t p[MAXA], sz[MAXA], logical = 0;
	bool live[MAXA];
	char dir[] = "/tmp/cms-chunks-XXXXXX";
	int k, cycle;

	if (policy == CMS_POLICY_DISK) {
		ck_assert_ptr_nonnull(mkdtemp(dir));
		ck_ok(cms_region_disk_dir_set(r, dir));
	}
	for (k = 0; k < MAXA; k++) {
		sz[k] = (1 + (uint64_t)(k % 3)) * G - 4 * (uint64_t)(k % 5);
		p[k] = alloc(r, sz[k]);
		live[k] = true;
		logical += sz[k];
	}
	ck_assert_uint_lt(t_counters().handles, MAXA / 4);
	for (cycle = 0; cycle < 3; cycle++) {
		for (k = 0; k < MAXA; k++)
			if (live[k])
				ck_assert_int_eq(
					t_fill(0, p[k], sz[k] & ~3ull, (uint32_t)(k + 100 * cycle)),
					0);
		if (cycle == 1) { /* frees inside chunks while active */
			for (k = 3; k < MAXA; k += 7) {
				ck_ok(cms_free(ctx, p[k]));
				live[k] = false;
				logical -= sz[k];
			}
		}
		ck_ok(cms_region_pause(r, NULL, NULL));
		counts(0, 0, 0);
		if (policy != CMS_POLICY_ZERO)
			ck_assert_uint_eq(info(r).backup_bytes, logical);
		if (cycle == 2) { /* frees while paused */
			ck_ok(cms_free(ctx, p[0]));
			live[0] = false;
			logical -= sz[0];
		}
		ck_ok(cms_region_resume(r, NULL, NULL));
		for (k = 0; k < MAXA; k++) {
			if (!live[k])
				continue;
			if (policy == CMS_POLICY_ZERO)
				ck_assert_int_eq(t_is_zero(0, p[k], sz[k]), 1);
			else
				ck_assert_int_eq(t_check(0, p[k], sz[k] & ~3ull,
							 (uint32_t)(k + 100 * cycle)),
						 -1);
			rw_at(p[k], sz[k]);
		}
	}
	ck_ok(cms_context_destroy(ctx));
	everything_freed();
	if (policy == CMS_POLICY_DISK)
		rmdir(dir);
}
END_TEST

/* ---- guarded pauses: zeros over every allocation of a released chunk ------- */

START_TEST(guarded_chunks)
{
	if (!sim_only("guarded_chunks"))
		return;
	cms_context *ctx = t_ctx();
	cms_region *r = region(ctx, CMS_POLICY_HOST, CMS_REGION_GUARD);
	int (*acc)(uint64_t, int) = get_access();
	uint64_t p[6];
	int k;

	for (k = 0; k < 6; k++) {
		p[k] = alloc(r, 3 * G);
		ck_assert_int_eq(t_fill(0, p[k], 3 * G, (uint32_t)k), 0);
	}
	ck_ok(cms_free(ctx, p[2]));
	ck_ok(cms_region_pause(r, NULL, NULL));
	for (k = 0; k < 6; k++) {
		if (k == 2)
			continue;
		ck_assert_int_eq(acc(p[k], 0), CU_MEM_ACCESS_FLAGS_PROT_READ);
		ck_assert_int_eq(acc(p[k] + 3 * G - 1, 0), CU_MEM_ACCESS_FLAGS_PROT_READ);
		ck_assert_int_eq(t_is_zero(0, p[k], 3 * G), 1);
	}
	ck_ok(cms_region_resume(r, NULL, NULL));
	for (k = 0; k < 6; k++) {
		if (k == 2)
			continue;
		ck_assert_int_eq(t_check(0, p[k], 3 * G, (uint32_t)k), -1);
		rw_at(p[k], 3 * G);
	}
	ck_ok(cms_region_destroy(r));
	ck_ok(cms_context_destroy(ctx));
	everything_freed();
}
END_TEST

/* ---- swap: the out side releases chunks whole, the in side backs runs ------- */

START_TEST(swap_chunks)
{
	if (!sim_only("swap_chunks"))
		return;
	cms_context *ctx = t_ctx();
	cms_region *a, *b;
	uint64_t pa[6], pb[6];
	int k;

	t_region_flags = CMS_REGION_COALESCE | CMS_REGION_CHUNKS;
	a = t_region(ctx, "a", 0, CMS_POLICY_HOST);
	b = t_region(ctx, "b", 0, CMS_POLICY_HOST);
	t_region_flags = 0;
	for (k = 0; k < 6; k++) {
		pa[k] = alloc(a, 2 * G);
		pb[k] = alloc(b, 3 * G);
		ck_assert_int_eq(t_fill(0, pa[k], 2 * G, (uint32_t)k), 0);
		ck_assert_int_eq(t_fill(0, pb[k], 3 * G, (uint32_t)(k + 50)), 0);
	}
	ck_ok(cms_free(ctx, pa[3])); /* retained in a's chunk */
	ck_ok(cms_region_pause(b, NULL, NULL));
	counts(1, 1, CHUNK); /* a: one chunk of 16 granules (12 live, 2 freed, 2 spare) */
	ck_ok(cms_swap(ctx, "a", "b", NULL, NULL, NULL, NULL));
	counts(1, 1, 18 * G); /* b: one run (chunks of 5 x 3 granules: no unused end) */
	ck_assert_uint_eq(info(a).retained_bytes, 0);
	for (k = 0; k < 6; k++)
		ck_assert_int_eq(t_check(0, pb[k], 3 * G, (uint32_t)(k + 50)), -1);
	ck_ok(cms_swap(ctx, "b", "a", NULL, NULL, NULL, NULL));
	counts(2, 2, 10 * G); /* a: runs split by the freed member's addresses */
	for (k = 0; k < 6; k++)
		if (k != 3)
			ck_assert_int_eq(t_check(0, pa[k], 2 * G, (uint32_t)k), -1);
	ck_ok(cms_context_destroy(ctx));
	everything_freed();
}
END_TEST

/* ---- shareable regions never chunk (importers map each allocation's handle) -- */

START_TEST(shareable_regions_never_chunk)
{
	if (!sim_only("shareable_regions_never_chunk"))
		return;
	cms_context *ctx = t_ctx();
	cms_region *r = region(ctx, CMS_POLICY_DISCARD, CMS_REGION_SHAREABLE);
	int k;

	for (k = 0; k < 4; k++)
		alloc(r, G);
	counts(4, 4, 4 * G);
	ck_assert_uint_eq(info(r).retained_bytes, 0);
	ck_ok(cms_context_destroy(ctx));
	everything_freed();
}
END_TEST

/* Chunks are opt-in (CMS_REGION_CHUNKS): COALESCE alone keeps one handle per allocation until
 * the first resume, and CHUNKS without COALESCE is refused. */
START_TEST(chunks_only_when_asked)
{
	if (!sim_only("chunks_only_when_asked"))
		return;
	cms_context *ctx = t_ctx();
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_region *r, *bad = NULL;
	int k;

	o.flags = CMS_REGION_CHUNKS;
	ck_status(cms_region_create(ctx, "bad", &o, &bad), CMS_ERR_INVALID_ARGUMENT);
	ck_assert_ptr_null(bad);
	o.flags = CMS_REGION_COALESCE;
	ck_ok(cms_region_create(ctx, "coalesce", &o, &r));
	for (k = 0; k < 4; k++)
		alloc(r, G);
	counts(4, 4, 4 * G);
	ck_assert_uint_eq(info(r).retained_bytes, 0);
	ck_ok(cms_context_destroy(ctx));
	everything_freed();
}
END_TEST

/* ---- destroy with live chunks, active and paused --------------------------- */

START_TEST(destroy_live_chunks)
{
	if (!sim_only("destroy_live_chunks"))
		return;
	cms_context *ctx = t_ctx();
	cms_region *r = region(ctx, CMS_POLICY_HOST, 0);
	cms_region *r2 = region(ctx, CMS_POLICY_DISCARD, 0);
	uint64_t p[5];
	int k;

	for (k = 0; k < 5; k++) {
		p[k] = alloc(r, 5 * G);
		alloc(r2, 2 * G);
	}
	ck_ok(cms_free(ctx, p[1]));
	ck_ok(cms_region_pause(r2, NULL, NULL));
	ck_ok(cms_region_destroy(r));  /* live chunks, one member freed, a tail */
	ck_ok(cms_region_destroy(r2)); /* paused */
	everything_freed();
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* ---- fault sweeps ------------------------------------------------------------ */

/*
 * Every driver call of a sequence of allocations fails in turn (the nth call, whatever it
 * is): the failed cms_alloc leaves nothing behind (the same driver objects and accounting as
 * before it), the allocations made stay usable, and a later pause and resume keep content.
 */
START_TEST(alloc_fault_sweep)
{
	if (!sim_only("alloc_fault_sweep"))
		return;
	uint64_t nth;
	bool fired = true;

	for (nth = 1; fired; nth++) {
		cms_context *ctx = t_ctx();
		cms_region *r = region(ctx, CMS_POLICY_HOST, 0);
		uint64_t p[12] = { 0 }, sz[12];
		int k, n = 0;

		ck_assert_int_eq(t_sim()->fail_call("any", nth, CUDA_ERROR_OUT_OF_MEMORY), 0);
		for (k = 0; k < 12; k++) {
			cmssim_counters c0 = t_counters();
			cms_region_info i0 = info(r);
			cms_status st;

			sz[n] = (uint64_t)(1 + k % 5) * G;
			st = cms_alloc(r, sz[n], &p[n]);
			if (!st) { /* filled after the sweep: copies are driver calls too */
				n++;
				continue;
			}
			ck_assert_uint_eq(p[n], 0);
			/* Nothing left behind. */
			cmssim_counters c1 = t_counters();
			cms_region_info i1 = info(r);

			ck_assert_uint_eq(c1.handles, c0.handles);
			ck_assert_uint_eq(c1.mappings, c0.mappings);
			ck_assert_uint_eq(c1.reservations, c0.reservations);
			ck_assert_uint_eq(c1.device_used_bytes[0], c0.device_used_bytes[0]);
			ck_assert_uint_eq(i1.allocations, i0.allocations);
			ck_assert_uint_eq(i1.backed_bytes, i0.backed_bytes);
			ck_assert_uint_eq(i1.retained_bytes, i0.retained_bytes);
		}
		fired = t_sim()->armed_faults() == 0;
		t_sim()->clear_faults();
		ck_assert_int_eq(n, fired ? 11 : 12);
		for (k = 0; k < n; k++) {
			rw_at(p[k], sz[k]);
			ck_assert_int_eq(t_fill(0, p[k], sz[k], (uint32_t)k), 0);
		}
		ck_ok(cms_region_pause(r, NULL, NULL));
		ck_ok(cms_region_resume(r, NULL, NULL));
		for (k = 0; k < n; k++)
			ck_assert_int_eq(t_check(0, p[k], sz[k], (uint32_t)k), -1);
		for (k = 0; k < n; k += 2) /* frees inside chunks, then destroy */
			ck_ok(cms_free(ctx, p[k]));
		ck_ok(cms_context_destroy(ctx));
		everything_freed();
	}
	ck_assert_uint_ge(nth, 5); /* reserve, create, map, access: each failed once at least */
}
END_TEST

/*
 * Every driver call of the first pause of live chunks (one member freed, a spare tail), and
 * then of its resume, fails in turn: the call fails as a whole (the region as before it,
 * content intact), and a pause and resume without faults then succeed.
 */
START_TEST(cycle_fault_sweep)
{
	if (!sim_only("cycle_fault_sweep"))
		return;
	uint64_t nth;
	int side = _i; /* 0: the pause fails, 1: the resume */
	bool fired = true;

	for (nth = 1; fired; nth++) {
		cms_context *ctx = t_ctx();
		cms_region *r = region(ctx, CMS_POLICY_HOST, CMS_REGION_GUARD);
		uint64_t p[10], sz[10];
		cms_status st;
		int k;

		for (k = 0; k < 10; k++) {
			sz[k] = (uint64_t)(1 + k % 4) * G;
			p[k] = alloc(r, sz[k]);
			ck_assert_int_eq(t_fill(0, p[k], sz[k], (uint32_t)k), 0);
		}
		ck_ok(cms_free(ctx, p[4]));
		if (side)
			ck_ok(cms_region_pause(r, NULL, NULL));
		ck_assert_int_eq(t_sim()->fail_call("any", nth, CUDA_ERROR_OUT_OF_MEMORY), 0);
		st = side ? cms_region_resume(r, NULL, NULL) : cms_region_pause(r, NULL, NULL);
		fired = t_sim()->armed_faults() == 0;
		t_sim()->clear_faults();
		if (!fired)
			ck_ok(st);
		/* A failed call leaves the state as before it (a fault in a best-effort step may
		 * let the call succeed). */
		ck_assert_uint_eq(info(r).state, (st == CMS_OK) == (side == 1) ? CMS_STATE_ACTIVE :
										 CMS_STATE_PAUSED);
		if (info(r).state == CMS_STATE_PAUSED)
			ck_ok(cms_region_resume(r, NULL, NULL));
		for (k = 0; k < 10; k++)
			if (k != 4)
				ck_assert_int_eq(t_check(0, p[k], sz[k], (uint32_t)k), -1);
		p[4] = alloc(r, G); /* a chunk's tail or a new one, after whatever happened */
		ck_ok(cms_region_pause(r, NULL, NULL));
		ck_ok(cms_region_resume(r, NULL, NULL));
		for (k = 0; k < 10; k++)
			if (k != 4)
				ck_assert_int_eq(t_check(0, p[k], sz[k], (uint32_t)k), -1);
		ck_ok(cms_context_destroy(ctx));
		everything_freed();
	}
	ck_assert_uint_gt(nth, 4);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("chunks");
	TCase *tc = tcase_create("chunks");
	TCase *fc = tcase_create("faults");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, first_pause_per_chunk);
	tcase_add_test(tc, first_allocations_share_a_handle);
	tcase_add_test(tc, frees_inside_a_chunk);
	tcase_add_test(tc, spare_tails_bounded);
	tcase_add_loop_test(tc, cycles_keep_content, 0, 3);
	tcase_add_test(tc, guarded_chunks);
	tcase_add_test(tc, swap_chunks);
	tcase_add_test(tc, shareable_regions_never_chunk);
	tcase_add_test(tc, chunks_only_when_asked);
	tcase_add_test(tc, destroy_live_chunks);
	suite_add_tcase(s, tc);
	tcase_set_timeout(fc, 600);
	tcase_add_test(fc, alloc_fault_sweep);
	tcase_add_loop_test(fc, cycle_fault_sweep, 0, 2);
	suite_add_tcase(s, fc);
	return s;
}

int main(void)
{
	return t_main(suite, T_NEEDS_DEVICE);
}
