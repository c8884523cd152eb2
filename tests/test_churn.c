/* SPDX-License-Identifier: MIT */
/*
 * test_churn.c - host memory of a HOST region stays bounded under churn
 * (issue 15): whatever the sequence of alloc, free, pause and resume, the
 * region holds at most its live backup bytes plus one buffer's worth of
 * slack (cms_region_info.host_bytes in include/cumemsaver.h):
 *
 *   host_bytes <= sum over its live allocations of size rounded up to the
 *                 page size  +  B
 *
 * B, "one buffer's worth", is the most bytes of backups one host buffer holds
 * for several allocations: 1 GiB on a GPU, 16 granules on the simulation
 * (docs/internals.md, docs/simulation.md). Checked after every step on the
 * region's host_bytes and, on the simulation, on its host-buffer counters
 * (every buffer the library maps goes through cmssim_host_alloc_hook).
 *
 * The churn is random (seeded: CMS_CHURN_SEED, default 1, printed), with
 * content checks after each resume: a quarter of the allocations live long
 * (like weights next to a KV cache), so that buffers made at one pause keep a
 * user while their other slices are freed. Runs with CMS_SIM_GRANULARITY=64K
 * (1,000 cycles); the gpu mode runs 200 cycles of allocations of 2-16 MiB on
 * a real GPU and also bounds the process's resident memory. The random churn
 * runs twice: without flags, and with CMS_REGION_COALESCE (allocations carved
 * from chunks, vmm/run.c), where the simulation's device bytes must equal the
 * region's backed plus retained bytes after every step and no retained byte
 * (freed member, spare tail) may outlive a pause.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define GiB (1024ull * MiB)
#define MAXA 96

struct profile {
	int cycles;
	unsigned live_max;  /* allocations alive at most */
	unsigned per_cycle; /* allocations made and freed per cycle, at most */
	unsigned granules;  /* an allocation is 1 .. granules granules */
	size_t check_len;   /* content checked at each end of an allocation (0: all of it) */
};

/* ~18 x 160 KiB on the simulation; ~48 x 9 MiB on a GPU (about 430 MiB alive). */
static const struct profile sim_profile = { 1000, 24, 4, 4, 0 };
static const struct profile gpu_profile = { 200, 64, 6, 8, 64 * 1024 };

struct churn {
	cms_context *ctx;
	cms_region *r;
	const struct profile *p;
	uint64_t gran, bound, page;
	uint64_t seed_state;
	unsigned n;
	struct {
		uint64_t ptr, size;
		uint32_t seed;
		bool sticky; /* long-lived */
	} a[MAXA];
	uint32_t next_seed;
	uint64_t host_base; /* the simulation's host buffer bytes before the test */
	long rss_base;	    /* pages resident after the first cycles (gpu mode) */
	uint64_t live_base;
};

static uint64_t rnd(struct churn *c)
{
	uint64_t z = (c->seed_state += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static cms_region_info info(cms_region *r)
{
	cms_region_info i = { .struct_size = sizeof(i) };

	ck_ok(cms_region_info_get(r, &i));
	return i;
}

static uint64_t live_backup_bytes(const struct churn *c)
{
	uint64_t sum = 0;
	unsigned i;

	for (i = 0; i < c->n; i++)
		sum += (c->a[i].size + c->page - 1) / c->page * c->page;
	return sum;
}

static long rss_pages(void)
{
	long size = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f)
		return 0;
	if (fscanf(f, "%ld %ld", &size, &rss) != 2)
		rss = 0;
	fclose(f);
	return rss;
}

/* The bound, after every step. */
static void check_bound(struct churn *c, const char *step, int cycle)
{
	uint64_t live = live_backup_bytes(c);
	cms_region_info ri = info(c->r);

	ck_assert_msg(ri.host_bytes <= live + c->bound,
		      "cycle %d, after %s: host_bytes %llu > live %llu + bound %llu", cycle, step,
		      (unsigned long long)ri.host_bytes, (unsigned long long)live,
		      (unsigned long long)c->bound);
	ck_assert_uint_le(ri.pinned_bytes, ri.host_bytes);
	if (t_is_sim()) {
		cmssim_counters k = t_counters();

		ck_assert_msg(k.host_buffer_bytes - c->host_base == ri.host_bytes,
			      "cycle %d, after %s: simulation holds %llu host bytes, region %llu",
			      cycle, step, (unsigned long long)(k.host_buffer_bytes - c->host_base),
			      (unsigned long long)ri.host_bytes);
		ck_assert_msg(k.host_buffer_bytes - c->host_base <= live + c->bound,
			      "cycle %d, after %s: simulation host bytes %llu > live %llu + %llu",
			      cycle, step, (unsigned long long)(k.host_buffer_bytes - c->host_base),
			      (unsigned long long)live, (unsigned long long)c->bound);
		ck_assert_uint_eq(k.host_registered_bytes, ri.pinned_bytes);
		/* Device memory: the allocations' and what runs and chunks retain (freed
		 * members, spare tails), nothing else; none while paused. */
		ck_assert_msg(k.device_used_bytes[0] == ri.backed_bytes + ri.retained_bytes,
			      "cycle %d, after %s: device bytes %llu, backed %llu + retained %llu",
			      cycle, step, (unsigned long long)k.device_used_bytes[0],
			      (unsigned long long)ri.backed_bytes,
			      (unsigned long long)ri.retained_bytes);
	}
}

static void check_content(struct churn *c, int cycle)
{
	unsigned i;

	for (i = 0; i < c->n; i++) {
		uint64_t n = c->a[i].size & ~3ull, k = c->p->check_len;
		long bad;

		if (!k || 2 * k >= n) {
			bad = t_check(0, c->a[i].ptr, n, c->a[i].seed);
		} else {
			bad = t_check(0, c->a[i].ptr, k, c->a[i].seed);
			/* The tail: the pattern of the whole allocation, from word (n - k) / 4. */
			if (bad < 0) {
				uint32_t *want = malloc(k), *got = malloc(k);
				size_t w, off = n - k;

				ck_assert_ptr_nonnull(want);
				ck_assert_ptr_nonnull(got);
				for (w = 0; w < k / 4; w++)
					want[w] = t_pattern(c->a[i].seed, off / 4 + w);
				ck_assert_int_eq(t_read(0, got, c->a[i].ptr + off, k), 0);
				bad = memcmp(want, got, k) ? (long)(off / 4) : -1;
				free(want);
				free(got);
			}
		}
		ck_assert_msg(bad < 0, "cycle %d: allocation %u (%llu bytes) differs at word %ld",
			      cycle, i, (unsigned long long)c->a[i].size, bad);
	}
}

static void churn_alloc(struct churn *c, int cycle)
{
	unsigned sticky = 0, i, k = c->n;
	uint64_t g = 1 + rnd(c) % c->p->granules;

	if (c->n >= c->p->live_max)
		return;
	for (i = 0; i < c->n; i++)
		sticky += c->a[i].sticky;
	c->a[k].size = g * c->gran - 4 * (rnd(c) % 64);
	c->a[k].seed = c->next_seed++;
	c->a[k].sticky = rnd(c) % 4 == 0 && sticky < c->p->live_max / 4;
	ck_ok(cms_alloc(c->r, c->a[k].size, &c->a[k].ptr));
	ck_assert_int_eq(t_fill(0, c->a[k].ptr, c->a[k].size & ~3ull, c->a[k].seed), 0);
	c->n++;
	check_bound(c, "alloc", cycle);
}

/* Frees a short-lived allocation, or now and then a long-lived one. */
static void churn_free(struct churn *c, int cycle, bool sticky)
{
	unsigned cand[MAXA], m = 0, i, k;

	for (i = 0; i < c->n; i++)
		if (c->a[i].sticky == sticky)
			cand[m++] = i;
	if (!m)
		return;
	k = cand[rnd(c) % m];
	ck_ok(cms_free(c->ctx, c->a[k].ptr));
	c->a[k] = c->a[--c->n];
	check_bound(c, "free", cycle);
}

static void churn_frees(struct churn *c, int cycle)
{
	unsigned k = (unsigned)(rnd(c) % (c->p->per_cycle + 1));

	while (k--)
		churn_free(c, cycle, false);
	if (rnd(c) % 4 == 0)
		churn_free(c, cycle, true);
}

static void rss_check(struct churn *c, int cycle)
{
	long pages = rss_pages();
	int64_t grown, allowed;

	if (t_is_sim() || !pages)
		return;
	if (cycle == 2) {
		c->rss_base = pages;
		c->live_base = live_backup_bytes(c);
		return;
	}
	if (cycle < 2 || cycle % 10)
		return;
	/* Driver and allocator noise: 256 MiB on top of the bound. */
	grown = (int64_t)(pages - c->rss_base) * (int64_t)c->page;
	allowed = (int64_t)live_backup_bytes(c) - (int64_t)c->live_base + (int64_t)c->bound +
		  (int64_t)(256 * MiB);
	ck_assert_msg(grown <= allowed, "cycle %d: resident memory grew by %lld MiB since cycle 2",
		      cycle, (long long)(grown / (int64_t)MiB));
}

START_TEST(random_churn_stays_bounded)
{
	struct churn *c = calloc(1, sizeof(*c));
	const char *s = getenv("CMS_CHURN_SEED");
	int cycle;
	unsigned i;

	ck_assert_ptr_nonnull(c);
	c->p = t_is_sim() ? &sim_profile : &gpu_profile;
	c->seed_state = s ? strtoull(s, NULL, 0) : 1;
	printf("churn: seed %llu, %d cycles\n", (unsigned long long)c->seed_state, c->p->cycles);
	c->page = (uint64_t)sysconf(_SC_PAGESIZE);
	c->ctx = t_ctx();
	t_region_flags = _i ? CMS_REGION_COALESCE | CMS_REGION_CHUNKS : 0; /* 1: chunks, runs */
	c->r = t_region(c->ctx, "churn", 0, CMS_POLICY_HOST);
	t_region_flags = 0;
	c->gran = info(c->r).granularity;
	if (t_is_sim()) {
		ck_assert_msg(c->gran == 64 * 1024, "run with CMS_SIM_GRANULARITY=64K");
		c->bound = 16 * c->gran; /* docs/simulation.md */
		c->host_base = t_counters().host_buffer_bytes;
	} else {
		c->gran = 2 * MiB > c->gran ? 2 * MiB : c->gran;
		c->bound = GiB; /* docs/internals.md */
	}
	while (c->n < c->p->live_max * 3 / 4)
		churn_alloc(c, -1);
	for (cycle = 0; cycle < c->p->cycles; cycle++) {
		unsigned k = (unsigned)(rnd(c) % (c->p->per_cycle + 1));

		churn_frees(c, cycle);
		while (k--)
			churn_alloc(c, cycle);
		if (rnd(c) % 8 == 0)
			continue; /* no pause this cycle */
		ck_ok(cms_region_pause(c->r, NULL, NULL));
		check_bound(c, "pause", cycle);
		churn_frees(c, cycle); /* frees of paused allocations */
		ck_ok(cms_region_resume(c->r, NULL, NULL));
		check_bound(c, "resume", cycle);
		ck_assert_uint_eq(info(c->r).retained_bytes,
				  0); /* no chunk tail outlives a pause */
		check_content(c, cycle);
		rss_check(c, cycle);
	}
	for (i = c->n; i > 0; i--) {
		ck_ok(cms_free(c->ctx, c->a[i - 1].ptr));
		c->n--;
		check_bound(c, "free", c->p->cycles);
	}
	ck_assert_uint_eq(info(c->r).host_bytes, 0);
	ck_ok(cms_context_destroy(c->ctx));
	if (t_is_sim())
		ck_assert_uint_eq(t_counters().host_buffer_bytes, c->host_base);
	free(c);
}
END_TEST

/* One buffer's worth (B) on this device. */
static uint64_t bound_of(cms_region *r)
{
	return t_is_sim() ? 16 * info(r).granularity : GiB;
}

static void fill(uint64_t p, uint64_t size, uint32_t seed)
{
	ck_assert_int_eq(t_fill(0, p, size & ~3ull, seed), 0);
}

static void check(uint64_t p, uint64_t size, uint32_t seed)
{
	ck_assert_int_eq(t_check(0, p, size & ~3ull, seed), -1);
}

/*
 * The soak test of issue 15: 64 allocations of B / 64 (16 MiB on a GPU: one buffer of 1 GiB;
 * one granule on the simulation: four buffers), cycled 100 times with one allocation freed
 * and made again every 10 cycles. The new allocation's backup goes into the freed slice: the
 * region's host memory stays what it was, and (simulation) no buffer is made or page-locked.
 */
START_TEST(freed_slice_reused)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "soak", 0, CMS_POLICY_HOST);
	uint64_t bound = bound_of(r), gran = info(r).granularity;
	uint64_t size = bound / 64 > gran ? bound / 64 : gran, p[64], held = 0;
	uint32_t seed[64];
	cmssim_counters c0 = { 0 }, c;
	int cycle, i;

	for (i = 0; i < 64; i++) {
		ck_ok(cms_alloc(r, size, &p[i]));
		seed[i] = (uint32_t)i;
		fill(p[i], size, seed[i]);
	}
	for (cycle = 0; cycle < 100; cycle++) {
		if (cycle && cycle % 10 == 0) {
			i = (cycle * 7) % 64;
			ck_ok(cms_free(ctx, p[i]));
			ck_ok(cms_alloc(r, size, &p[i]));
			seed[i] = 1000u + (uint32_t)cycle;
			fill(p[i], size, seed[i]);
		}
		ck_ok(cms_region_pause(r, NULL, NULL));
		ck_ok(cms_region_resume(r, NULL, NULL));
		if (!cycle) {
			held = info(r).host_bytes;
			if (t_is_sim()) {
				c0 = t_counters();
				/* From now on no buffer may be page-locked: arm a fault that says
				 * so. */
				ck_assert_int_eq(t_sim()->fail_call("cuMemHostRegister", 1,
								    CUDA_ERROR_OUT_OF_MEMORY),
						 0);
			}
		}
		ck_assert_uint_eq(info(r).host_bytes, held);
		ck_assert_uint_eq(info(r).pinned_bytes, held);
		if (t_is_sim()) {
			c = t_counters();
			ck_assert_uint_eq(c.host_buffers, c0.host_buffers);
			ck_assert_uint_eq(c.host_registrations, c0.host_registrations);
			ck_assert_int_eq(t_sim()->armed_faults(), 1);
		}
	}
	for (i = 0; i < 64; i++)
		check(p[i], size, seed[i]);
	if (t_is_sim())
		t_sim()->clear_faults();
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/*
 * Frees while paused: the holes pass one buffer's worth, so the buffers are split (their
 * holes unmapped, the rest page-locked again by the next copy). Content stays; the bound
 * holds after every free; the next cycles make no new buffer.
 */
START_TEST(paused_frees_split_buffers)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "split", 0, CMS_POLICY_HOST);
	uint64_t bound = bound_of(r), gran = info(r).granularity;
	uint64_t size = bound / 16 > gran ? bound / 16 : gran, p[64], page;
	uint64_t live = 0, held;
	cmssim_counters c0;
	cms_region_info ri;
	int i, n = t_is_sim() ? 64 : 40; /* 40 x 64 MiB on a GPU */

	page = (uint64_t)sysconf(_SC_PAGESIZE);
	for (i = 0; i < n; i++) {
		ck_ok(cms_alloc(r, size - 4 * (uint64_t)i, &p[i]));
		fill(p[i], size - 4 * (uint64_t)i, (uint32_t)i);
	}
	ck_ok(cms_region_pause(r, NULL, NULL));
	for (i = 0; i < n; i++)
		live += (size - 4 * (uint64_t)i + page - 1) / page * page;
	ck_assert_uint_eq(info(r).host_bytes, live);
	for (i = 0; i < n; i += 2) {
		ck_ok(cms_free(ctx, p[i]));
		live -= (size - 4 * (uint64_t)i + page - 1) / page * page;
		ri = info(r);
		ck_assert_uint_le(ri.host_bytes, live + bound);
		ck_assert_uint_le(ri.pinned_bytes, ri.host_bytes);
		if (t_is_sim())
			ck_assert_uint_eq(t_counters().host_registered_bytes, ri.pinned_bytes);
	}
	ri = info(r);
	ck_assert_uint_le(ri.host_bytes, live + bound);
	ck_assert_uint_lt(ri.pinned_bytes, ri.host_bytes); /* split pieces wait for a copy */
	ck_ok(cms_region_resume(r, NULL, NULL));
	for (i = 1; i < n; i += 2)
		check(p[i], size - 4 * (uint64_t)i, (uint32_t)i);
	ri = info(r);
	ck_assert_uint_eq(ri.pinned_bytes, ri.host_bytes); /* page-locked again */
	held = ri.host_bytes;
	c0 = t_is_sim() ? t_counters() : (cmssim_counters){ 0 };
	for (i = 0; i < 2; i++) {
		ck_ok(cms_region_pause(r, NULL, NULL));
		ck_ok(cms_region_resume(r, NULL, NULL));
		ck_assert_uint_eq(info(r).host_bytes, held);
		if (t_is_sim())
			ck_assert_uint_eq(t_counters().host_buffers, c0.host_buffers);
	}
	for (i = 1; i < n; i += 2)
		check(p[i], size - 4 * (uint64_t)i, (uint32_t)i);
	ck_ok(cms_context_destroy(ctx));
	if (t_is_sim()) {
		ck_assert_uint_eq(t_counters().host_buffers, 0);
		ck_assert_uint_eq(t_counters().host_registered_bytes, 0);
	}
}
END_TEST

/* A split whose cuMemHostUnregister fails leaves the holes (the free still succeeds); the
 * next free splits again and the bound holds (simulation: faults). */
START_TEST(failed_split_retried)
{
	cms_context *ctx;
	cms_region *r;
	uint64_t p[64], gran, bound, live = 0;
	int i, over = 0;

	if (!t_is_sim())
		return;
	ctx = t_ctx();
	r = t_region(ctx, "retry", 0, CMS_POLICY_HOST);
	gran = info(r).granularity;
	bound = bound_of(r);
	for (i = 0; i < 64; i++) {
		ck_ok(cms_alloc(r, gran, &p[i]));
		fill(p[i], gran, (uint32_t)i);
		live += gran;
	}
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_assert_int_eq(t_sim()->fail_call("cuMemHostUnregister", 1, CUDA_ERROR_UNKNOWN), 0);
	for (i = 0; i < 64; i += 2) {
		cms_region_info ri;

		ck_ok(cms_free(ctx, p[i]));
		live -= gran;
		ri = info(r);
		over += ri.host_bytes > live + bound;
		ck_assert_uint_eq(t_counters().host_registered_bytes, ri.pinned_bytes);
	}
	ck_assert_int_eq(t_sim()->armed_faults(), 0); /* a split failed */
	ck_assert_int_eq(over, 1);		      /* once: the next free split again */
	ck_assert_uint_le(info(r).host_bytes, live + bound);
	ck_ok(cms_region_resume(r, NULL, NULL));
	for (i = 1; i < 64; i += 2)
		check(p[i], gran, (uint32_t)i);
	ck_ok(cms_context_destroy(ctx));
	ck_assert_uint_eq(t_counters().host_buffers, 0);
	ck_assert_uint_eq(t_counters().host_registered_bytes, 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("churn");
	TCase *tc = tcase_create("soak");
	TCase *rc = tcase_create("random");

	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, freed_slice_reused);
	tcase_add_test(tc, paused_frees_split_buffers);
	tcase_add_test(tc, failed_split_retried);
	suite_add_tcase(s, tc);
	tcase_set_timeout(rc, 600);
	tcase_add_loop_test(rc, random_churn_stays_bounded, 0, 2);
	suite_add_tcase(s, rc);
	return s;
}

int main(void)
{
	return t_main(suite, T_NEEDS_DEVICE);
}
