/* SPDX-License-Identifier: MIT */
/*
 * conformance_1_2.c - a program written against the release 1.2 headers
 * (abi/1.2/cumemsaver*.h, compiled with -I abi/1.2 and never include/),
 * linked as a 1.2 binary was (every reference bound to its CMS_1.0, CMS_1.1
 * or CMS_1.2 node), and run against the current library: what 1.2 added
 * (region statistics and their enumeration, content-free ranges, backups,
 * retention flags changed between cycles, the region flags CHUNKS, GUARD and
 * HOST_PAGEABLE, default hook regions and their template, the hook memory
 * margin) with valid and invalid arguments gets its documented statuses, and
 * structs of the 1.2 size (cms_region_stats, also as cms_region_list's array
 * stride, and cms_backup_info) are accepted and never written past. The
 * earlier functions are covered by conformance_1_0.c and conformance_1_1.c;
 * this is what a binary built in the 1.2 days sees when the .so under it is
 * upgraded.
 *
 * Needs a device: the host simulation (ctest conformance_1_2.sim, two
 * simulated devices) or a GPU; exits 77 when CMS_DRIVER_LIBRARY is unset.
 * Content checks read device memory directly, so they run on the simulation
 * only (its device pointers are host addresses). Sizes are multiples of the
 * region's granularity, so that any granularity serves.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cumemsaver.h>

#if CMS_VERSION_MAJOR != 1 || CMS_VERSION_MINOR != 2
#error "conformance_1_2.c must be compiled against the 1.2 headers (-I abi/1.2)"
#endif

#include "conformance.h"

/* The 1.2 sizes (LP64) of its new structs, as abi/1.2/cumemsaver.json gives them. */
_Static_assert(sizeof(cms_region_stats) == 432, "cms_region_stats of 1.2: 432 bytes");
_Static_assert(sizeof(cms_backup_info) == 40, "cms_backup_info of 1.2: 40 bytes");

/* 1.2-size structs at the start of a STRUCT_MAX buffer: room for tails and canaries. */
union big {
	cms_region_stats stats;
	cms_region_stats list[3];
	cms_backup_info binfo;
	cms_region_info rinfo;
	cms_pause_result presult;
	cms_resume_result rresult;
	unsigned char bytes[STRUCT_MAX];
};

static cms_region_info info_of(cms_region *r)
{
	cms_region_info i = { .struct_size = sizeof(i) };

	ck_ok(cms_region_info_get(r, &i));
	return i;
}

static cms_region_stats stats_of(cms_region *r)
{
	union big s;

	canary(&s, sizeof(cms_region_stats));
	ck_ok(cms_region_stats_get(r, &s.stats));
	ck_assert(tail_is(&s, sizeof(cms_region_stats), CANARY));
	ck_assert_uint_eq(s.stats.struct_size, sizeof(cms_region_stats));
	return s.stats;
}

static cms_region *region_of(cms_context *ctx, uint64_t ptr)
{
	cms_pointer_info pi = { .struct_size = sizeof(pi) };

	ck_ok(cms_pointer_info_get(ctx, ptr, &pi));
	return pi.region;
}

/* Identity and counters over a pause, a resume and a swap, read with 1.2-size structs. */
START_TEST(region_stats_of_the_1_2_size)
{
	cms_context *ctx = new_ctx();
	cms_region *h = new_region(ctx, "h", CMS_POLICY_HOST, 0);
	cms_region *d = new_region(ctx, "d", CMS_POLICY_DISCARD, 0);
	uint64_t g = info_of(h).granularity, p, q;
	union big res, res2, s;
	cms_region_stats sh, sd;
	size_t k;

	ck_assert_uint_ge(cms_version(), CMS_VERSION_NUMBER);
	ck_ok(cms_alloc(h, 3 * g, &p));
	ck_ok(cms_alloc(d, g, &q));
	if (on_sim())
		fill(p, 3 * g, 4);
	sh = stats_of(h);
	ck_assert_str_eq(sh.tag, "h");
	ck_assert_int_eq(sh.device, 0);
	ck_assert_uint_eq(sh.policy, CMS_POLICY_HOST);
	ck_assert_uint_eq(sh.state, CMS_STATE_ACTIVE);
	ck_assert_uint_eq(sh.reserved, 0);
	ck_assert_uint_eq(sh.pauses + sh.resumes + sh.swaps + sh.failures, 0);
	ck_assert_uint_eq(sh.bytes_released + sh.bytes_backed, 0);
	ck_assert_uint_gt(stats_of(d).region_id, sh.region_id); /* ascending */

	canary(&res, sizeof(cms_pause_result));
	canary(&res2, sizeof(cms_resume_result));
	ck_ok(cms_region_pause(h, NULL, &res.presult));
	ck_assert_uint_eq(stats_of(h).state, CMS_STATE_PAUSED);
	ck_ok(cms_region_resume(h, NULL, &res2.rresult));
	sh = stats_of(h);
	ck_assert_uint_eq(sh.pauses, 1);
	ck_assert_uint_eq(sh.resumes, 1);
	ck_assert_uint_eq(sh.swaps, 0);
	ck_assert_uint_eq(sh.failures, 0);
	for (k = 0; k < CMS_STATS_STATUS_SLOTS; k++)
		ck_assert_uint_eq(sh.failures_by_status[k], 0);
	ck_assert_uint_eq(sh.bytes_to_store, 3 * g);
	ck_assert_uint_eq(sh.bytes_to_store, res.presult.bytes_backed_up);
	ck_assert_uint_eq(sh.bytes_from_store, res2.rresult.bytes_restored);
	ck_assert_uint_eq(sh.bytes_released, res.presult.bytes_released);
	ck_assert_uint_eq(sh.bytes_backed, res2.rresult.bytes_backed);
	ck_assert_uint_gt(sh.pause_ns, 0);
	ck_assert_uint_gt(sh.resume_ns, 0);
	if (on_sim())
		ck_assert(holds(p, 3 * g, 4));

	/* A swap: h out, d in; both count it. */
	ck_ok(cms_region_pause(d, NULL, NULL));
	ck_ok(cms_swap(ctx, "h", "d", NULL, NULL, NULL, NULL));
	sh = stats_of(h);
	sd = stats_of(d);
	ck_assert_uint_eq(sh.pauses, 2);
	ck_assert_uint_eq(sh.swaps, 1);
	ck_assert_uint_eq(sh.bytes_to_store, 6 * g);
	ck_assert_uint_eq(sd.pauses, 1);
	ck_assert_uint_eq(sd.resumes, 1);
	ck_assert_uint_eq(sd.swaps, 1);
	ck_assert_uint_eq(sd.bytes_to_store, 0); /* DISCARD keeps nothing */

	/* A larger struct: the 1.2 part as above, the bytes a 1.2 program does not know zero
	 * (zeroed past the library's struct; its own newer fields are zero for a caller that
	 * uses no newer feature), struct_size kept. Past STRUCT_MAX, or below the 1.2 size:
	 * refused, nothing written. */
	memset(s.bytes, CANARY, sizeof(s.bytes));
	s.stats.struct_size = STRUCT_MAX;
	ck_ok(cms_region_stats_get(h, &s.stats));
	ck_assert_uint_eq(s.stats.struct_size, STRUCT_MAX);
	ck_assert_uint_eq(s.stats.swaps, 1);
	ck_assert_str_eq(s.stats.tag, "h");
	ck_assert(tail_is(&s, sizeof(cms_region_stats), 0));
	canary(&s, sizeof(cms_region_stats));
	s.stats.struct_size = STRUCT_MAX + 1;
	ck_status(cms_region_stats_get(h, &s.stats), CMS_ERR_STRUCT_SIZE);
	s.stats.struct_size = offsetof(cms_region_stats, resume_ns);
	ck_status(cms_region_stats_get(h, &s.stats), CMS_ERR_STRUCT_SIZE);
	ck_assert_uint_eq(s.stats.pauses, 0);
	ck_assert(tail_is(&s, sizeof(cms_region_stats), CANARY));
	ck_status(cms_region_stats_get(NULL, &s.stats), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_region_stats_get(h, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* Sets each entry's struct_size in a zeroed, canaried array of n 1.2-size entries. */
static void list_canary(union big *v, size_t n)
{
	size_t k;

	canary(v, n * sizeof(cms_region_stats));
	for (k = 0; k < n; k++)
		v->list[k].struct_size = sizeof(cms_region_stats);
}

/* Enumeration into an array whose stride is the 1.2 size. */
START_TEST(region_list_of_the_1_2_stride)
{
	static const char *const tags[] = { "a", "b", "c" };
	cms_context *ctx = new_ctx();
	cms_region *r[3];
	size_t k, w = 99, n = 99;
	union big v;

	for (k = 0; k < 3; k++)
		r[k] = new_region(ctx, tags[k], (uint32_t)k, 0);
	ck_ok(cms_region_pause(r[1], NULL, NULL));
	ck_ok(cms_region_list(ctx, NULL, 0, &w, &n));
	ck_assert_uint_eq(w, 0);
	ck_assert_uint_eq(n, 3);
	list_canary(&v, 3);
	ck_ok(cms_region_list(ctx, v.list, 3, &w, &n));
	ck_assert_uint_eq(w, 3);
	ck_assert_uint_eq(n, 3);
	ck_assert(tail_is(&v, 3 * sizeof(cms_region_stats), CANARY));
	for (k = 0; k < 3; k++) {
		ck_assert_uint_eq(v.list[k].struct_size, sizeof(cms_region_stats));
		ck_assert_str_eq(v.list[k].tag, tags[k]);
		ck_assert_uint_eq(v.list[k].policy, k);
		ck_assert_uint_eq(v.list[k].pauses, k == 1);
		ck_assert_uint_eq(v.list[k].state, k == 1 ? CMS_STATE_PAUSED : CMS_STATE_ACTIVE);
		ck_assert_uint_eq(v.list[k].region_id, stats_of(r[k]).region_id);
	}
	list_canary(&v, 2); /* short: the first two, the total */
	ck_ok(cms_region_list(ctx, v.list, 2, &w, &n));
	ck_assert_uint_eq(w, 2);
	ck_assert_uint_eq(n, 3);
	ck_assert(tail_is(&v, 2 * sizeof(cms_region_stats), CANARY));
	ck_ok(cms_region_destroy(r[1]));
	list_canary(&v, 3);
	ck_ok(cms_region_list(ctx, v.list, 3, &w, NULL));
	ck_assert_uint_eq(w, 2);
	ck_assert_str_eq(v.list[1].tag, "c");

	/* Entries that disagree, or below the 1.2 size: nothing written. */
	list_canary(&v, 2);
	v.list[1].struct_size = sizeof(cms_region_stats) + 8;
	w = n = 99;
	ck_status(cms_region_list(ctx, v.list, 2, &w, &n), CMS_ERR_STRUCT_SIZE);
	ck_assert_uint_eq(w, 99);
	ck_assert_str_eq(v.list[0].tag, "");
	list_canary(&v, 1);
	v.list[0].struct_size = offsetof(cms_region_stats, resume_ns);
	ck_status(cms_region_list(ctx, v.list, 1, &w, &n), CMS_ERR_STRUCT_SIZE);
	ck_status(cms_region_list(NULL, v.list, 1, &w, &n), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_region_list(ctx, NULL, 1, &w, &n), CMS_ERR_INVALID_ARGUMENT);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* A pause-resume cycle of r; its byte counts through 1.2-size results. */
static void cycle(cms_region *r, uint64_t *out, uint64_t *in)
{
	union big pr, rr;

	canary(&pr, sizeof(cms_pause_result));
	canary(&rr, sizeof(cms_resume_result));
	ck_ok(cms_region_pause(r, NULL, &pr.presult));
	ck_ok(cms_region_resume(r, NULL, &rr.rresult));
	ck_assert(tail_is(&pr, sizeof(cms_pause_result), CANARY));
	ck_assert(tail_is(&rr, sizeof(cms_resume_result), CANARY));
	*out = pr.presult.bytes_backed_up;
	*in = rr.rresult.bytes_restored;
}

START_TEST(range_discard_and_keep)
{
	cms_context *ctx = new_ctx();
	cms_region *h = new_region(ctx, "h", CMS_POLICY_HOST, 0);
	cms_region *d = new_region(ctx, "d", CMS_POLICY_DISCARD, 0);
	uint64_t g = info_of(h).granularity, p, q, out, in;

	ck_ok(cms_alloc(h, 4 * g, &p));
	ck_ok(cms_alloc(d, g, &q));
	if (on_sim())
		fill(p, 4 * g, 6);
	/* Declared: [g, 3g) less [2g, 2g + g/2) kept again. */
	ck_ok(cms_range_discard(ctx, p + g, 2 * g));
	ck_ok(cms_range_keep(ctx, p + 2 * g, g / 2));
	cycle(h, &out, &in);
	ck_assert_uint_eq(out, 4 * g - g - g / 2);
	ck_assert_uint_eq(in, out);
	if (on_sim()) {
		ck_assert(holds(p, g, 6));
		ck_assert(holds(p + 2 * g, g / 2, (unsigned char)(6 + 2 * g * 7)));
		ck_assert(holds(p + 3 * g, g, (unsigned char)(6 + 3 * g * 7)));
	}
	cycle(h, &out, &in); /* the declaration ended with the resume */
	ck_assert_uint_eq(out, 4 * g);
	ck_assert_uint_eq(in, 4 * g);
	ck_ok(cms_range_discard(ctx, q, g)); /* accepted, ignored */

	ck_status(cms_range_discard(NULL, p, g), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_range_discard(ctx, p, 0), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_range_discard(ctx, p + 4 * g - 1, 2), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_range_discard(ctx, p + 8, UINT64_MAX), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_range_keep(NULL, p, g), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_range_keep(ctx, p, 0), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_range_keep(ctx, p + 1, 4 * g), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_range_discard(ctx, 0, 1), CMS_ERR_NOT_FOUND);
	ck_status(cms_range_keep(ctx, 0, 1), CMS_ERR_NOT_FOUND);
	ck_ok(cms_free(ctx, q));
	ck_status(cms_range_discard(ctx, q, 1), CMS_ERR_NOT_FOUND);
	ck_ok(cms_region_pause(h, NULL, NULL));
	ck_status(cms_range_discard(ctx, p, g), CMS_ERR_PAUSED);
	ck_status(cms_range_keep(ctx, p, g), CMS_ERR_PAUSED);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* The backup of a HOST allocation while paused (current) and after the resume (retained),
 * of a DISK one through reads; 1.2-size cms_backup_info. */
START_TEST(backup_get_and_read)
{
	char dir[] = "/tmp/cms-conf12-XXXXXX";
	cms_context *ctx = new_ctx();
	cms_region *h = new_region(ctx, "h", CMS_POLICY_HOST, 0);
	cms_region *k = new_region(ctx, "k", CMS_POLICY_DISK, 0);
	cms_region *z = new_region(ctx, "z", CMS_POLICY_ZERO, 0);
	uint64_t g = info_of(h).granularity, p, pk, pz;
	unsigned char buf[64], c;
	union big b;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_ok(cms_region_disk_dir_set(k, dir));
	ck_ok(cms_alloc(h, 2 * g, &p));
	ck_ok(cms_alloc(k, g, &pk));
	ck_ok(cms_alloc(z, g, &pz));
	if (on_sim()) {
		fill(p, 2 * g, 8);
		fill(pk, g, 9);
	}
	canary(&b, sizeof(cms_backup_info));
	ck_status(cms_backup_get(ctx, p, &b.binfo), CMS_ERR_NOT_PAUSED); /* never paused */
	ck_status(cms_backup_read(ctx, p, buf, 1), CMS_ERR_NOT_PAUSED);
	ck_status(cms_backup_get(ctx, pz, &b.binfo), CMS_ERR_NOT_SUPPORTED);
	ck_status(cms_backup_read(ctx, pz, buf, 1), CMS_ERR_NOT_SUPPORTED);
	ck_ok(cms_pause(ctx, NULL, NULL, NULL));

	ck_ok(cms_backup_get(ctx, p + g + 5, &b.binfo));
	ck_assert(tail_is(&b, sizeof(cms_backup_info), CANARY));
	ck_assert_uint_eq(b.binfo.struct_size, sizeof(cms_backup_info));
	ck_assert_uint_eq(b.binfo.base, p);
	ck_assert_uint_eq(b.binfo.size, 2 * g);
	ck_assert_ptr_nonnull(b.binfo.host);
	ck_assert_uint_eq(b.binfo.policy, CMS_POLICY_HOST);
	ck_assert_uint_eq(b.binfo.state, CMS_BACKUP_CURRENT);
	ck_ok(cms_backup_read(ctx, p + g, buf, sizeof(buf)));
	ck_assert_mem_eq(buf, (const unsigned char *)b.binfo.host + g, sizeof(buf));
	if (on_sim())
		ck_assert(holds((uint64_t)(uintptr_t)b.binfo.host, 2 * g, 8));
	canary(&b, sizeof(cms_backup_info));
	ck_ok(cms_backup_get(ctx, pk, &b.binfo));
	ck_assert_ptr_null(b.binfo.host); /* DISK: read it */
	ck_assert_uint_eq(b.binfo.policy, CMS_POLICY_DISK);
	ck_assert_uint_eq(b.binfo.state, CMS_BACKUP_CURRENT);
	ck_ok(cms_backup_read(ctx, pk + 7, buf, sizeof(buf)));
	if (on_sim())
		ck_assert(holds((uint64_t)(uintptr_t)buf, sizeof(buf), (unsigned char)(9 + 7 * 7)));

	ck_ok(cms_resume(ctx, NULL, NULL, NULL));
	ck_ok(cms_backup_get(ctx, p, &b.binfo));
	ck_assert_uint_eq(b.binfo.state, CMS_BACKUP_RETAINED);
	ck_ok(cms_backup_read(ctx, p + 2 * g - 1, buf, 1));
	ck_ok(cms_backup_read(ctx, p, buf, 0)); /* copies nothing */

	ck_status(cms_backup_get(NULL, p, &b.binfo), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_backup_get(ctx, p, NULL), CMS_ERR_INVALID_ARGUMENT);
	b.binfo.struct_size = offsetof(cms_backup_info, state);
	ck_status(cms_backup_get(ctx, p, &b.binfo), CMS_ERR_STRUCT_SIZE);
	b.binfo.struct_size = sizeof(cms_backup_info);
	ck_status(cms_backup_get(ctx, 0, &b.binfo), CMS_ERR_NOT_FOUND);
	ck_status(cms_backup_read(NULL, p, buf, 1), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_backup_read(ctx, p, NULL, 1), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_backup_read(ctx, p + 2 * g - 1, buf, 2), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_backup_read(ctx, 0, &c, 1), CMS_ERR_NOT_FOUND);
	ck_ok(cms_free(ctx, p));
	ck_status(cms_backup_get(ctx, p, &b.binfo), CMS_ERR_NOT_FOUND);
	ck_ok(cms_context_destroy(ctx));
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* cms_region_flags_set, and the region flags of 1.2 at cms_region_create. */
START_TEST(region_flags_of_1_2)
{
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_context *ctx = new_ctx();
	cms_region *bad = NULL, *pg, *d, *c, *gd;
	uint64_t g, p, p1, retained;
	cms_region_info i;

	o.flags = CMS_REGION_CHUNKS; /* without COALESCE */
	ck_status(cms_region_create(ctx, "bad", &o, &bad), CMS_ERR_INVALID_ARGUMENT);
	o.flags = CMS_REGION_HOST_PAGEABLE; /* without HOST */
	o.policy = CMS_POLICY_DISCARD;
	ck_status(cms_region_create(ctx, "bad", &o, &bad), CMS_ERR_INVALID_ARGUMENT);
	ck_assert_ptr_null(bad);

	/* Pageable backups: nothing page-locked; content across a cycle; changeable between
	 * cycles, not while paused. */
	pg = new_region(ctx, "pg", CMS_POLICY_HOST, CMS_REGION_HOST_PAGEABLE);
	d = new_region(ctx, "d", CMS_POLICY_DISCARD, 0);
	g = info_of(pg).granularity;
	ck_assert_uint_eq(info_of(pg).flags, CMS_REGION_HOST_PAGEABLE);
	ck_ok(cms_alloc(pg, 2 * g, &p));
	if (on_sim())
		fill(p, 2 * g, 3);
	ck_ok(cms_region_pause(pg, NULL, NULL));
	i = info_of(pg);
	ck_assert_uint_ge(i.host_bytes, 2 * g);
	ck_assert_uint_eq(i.pinned_bytes, 0);
	ck_status(cms_region_flags_set(pg, CMS_REGION_HOST_PAGEABLE, 0), CMS_ERR_PAUSED);
	ck_ok(cms_region_resume(pg, NULL, NULL));
	if (on_sim())
		ck_assert(holds(p, 2 * g, 3));
	ck_ok(cms_region_flags_set(pg, CMS_REGION_HOST_PAGEABLE | CMS_REGION_RELEASE_HOST,
				   CMS_REGION_RELEASE_HOST));
	i = info_of(pg);
	ck_assert_uint_eq(i.flags, CMS_REGION_RELEASE_HOST);
	ck_assert_uint_eq(i.host_bytes, 0); /* given back now */
	ck_ok(cms_region_flags_set(pg, CMS_REGION_RELEASE_HOST, 0));
	ck_assert_uint_eq(info_of(pg).flags, 0);
	ck_status(cms_region_flags_set(NULL, 0, 0), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_region_flags_set(pg, CMS_REGION_GUARD, 0), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_region_flags_set(pg, CMS_REGION_RELEASE_HOST, CMS_REGION_HOST_PAGEABLE),
		  CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_region_flags_set(d, CMS_REGION_HOST_PAGEABLE, CMS_REGION_HOST_PAGEABLE),
		  CMS_ERR_INVALID_ARGUMENT);
	ck_assert_uint_eq(info_of(d).flags, 0);

	/* Chunks: a small allocation opens a chunk, the next is carved from its tail. */
	c = new_region(ctx, "c", CMS_POLICY_DISCARD, CMS_REGION_COALESCE | CMS_REGION_CHUNKS);
	ck_ok(cms_alloc(c, 1000, &p));
	retained = info_of(c).retained_bytes;
	ck_assert_uint_gt(retained, 0);
	ck_ok(cms_alloc(c, g, &p1));
	ck_assert_uint_eq(p1, p + g);
	ck_assert_uint_eq(info_of(c).retained_bytes, retained - g);
	ck_ok(cms_region_pause(c, NULL, NULL));
	ck_assert_uint_eq(info_of(c).retained_bytes, 0);
	ck_ok(cms_region_resume(c, NULL, NULL));

	/* Guard: a paused range reads zeros; the content comes back. */
	gd = new_region(ctx, "gd", CMS_POLICY_HOST, CMS_REGION_GUARD);
	ck_assert_uint_eq(info_of(gd).flags, CMS_REGION_GUARD);
	ck_ok(cms_alloc(gd, 3 * g, &p));
	if (on_sim())
		fill(p, 3 * g, 5);
	ck_ok(cms_region_pause(gd, NULL, NULL));
	ck_assert_uint_eq(info_of(gd).backed_bytes, 0);
	if (on_sim())
		ck_assert(all_zero(p, 3 * g));
	ck_ok(cms_region_resume(gd, NULL, NULL));
	if (on_sim())
		ck_assert(holds(p, 3 * g, 5));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* Default hook regions (explicit, from a template), and the memory margin. */
START_TEST(hook_defaults_and_margin)
{
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_context *ctx = new_ctx();
	cms_region *r = new_region(ctx, "dflt", CMS_POLICY_DISCARD, 0), *t = NULL;
	uint64_t p = 1, free_bytes = 0;
	void *tp;

	ck_status(cms_hook_region_default_set(0, r), CMS_ERR_INVALID_ARGUMENT); /* no context */
	ck_status(cms_hook_region_default_template_set("t", NULL, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_assert_ptr_null(cms_hook_region_default(0));
	ck_ok(cms_hook_context_set(ctx));
	ck_status(cms_hook_alloc(MiB, 0, &p), CMS_ERR_NOT_FOUND); /* no default */
	ck_assert_uint_eq(p, 0);
	ck_status(cms_hook_region_default_set(-1, r), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_hook_region_default_set(64, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_hook_region_default_set(1, r), CMS_ERR_INVALID_ARGUMENT); /* on device 0 */
	ck_ok(cms_hook_region_default_set(0, r));
	ck_assert_ptr_eq(cms_hook_region_default(0), r);
	ck_assert_ptr_null(cms_hook_region_default(64));
	ck_ok(cms_hook_alloc(MiB, 0, &p));
	ck_assert_ptr_eq(region_of(ctx, p), r);
	ck_ok(cms_hook_free((void *)(uintptr_t)p));
	tp = cms_torch_alloc((ssize_t)MiB, 0, NULL);
	ck_assert_ptr_nonnull(tp);
	ck_assert_ptr_eq(region_of(ctx, (uint64_t)(uintptr_t)tp), r);
	cms_torch_free(tp, (ssize_t)MiB, 0, NULL);

	/* The margin: no room left refuses, creating nothing; 0 turns it off. */
	ck_ok(cms_device_memory_info(ctx, 0, &free_bytes, NULL));
	ck_ok(cms_hook_memory_margin_set(free_bytes));
	ck_status(cms_hook_alloc(MiB, 0, &p), CMS_ERR_OUT_OF_DEVICE_MEMORY);
	ck_assert_uint_eq(p, 0);
	ck_assert_uint_eq(info_of(r).allocations, 0);
	ck_ok(cms_hook_memory_margin_set(0));
	ck_ok(cms_hook_alloc(MiB, 0, &p));
	ck_ok(cms_hook_free((void *)(uintptr_t)p));
	ck_ok(cms_hook_region_default_set(0, NULL));
	ck_status(cms_hook_alloc(MiB, 0, &p), CMS_ERR_NOT_FOUND);

	/* The template: checked as cms_region_create checks; makes the region on demand. */
	ck_status(cms_hook_region_default_template_set("", NULL, NULL), CMS_ERR_INVALID_ARGUMENT);
	o.flags = CMS_REGION_HOST_PAGEABLE; /* DISCARD */
	ck_status(cms_hook_region_default_template_set("t", &o, NULL), CMS_ERR_INVALID_ARGUMENT);
	o.flags = 0;
	o.struct_size = 3;
	ck_status(cms_hook_region_default_template_set("t", &o, NULL), CMS_ERR_STRUCT_SIZE);
	o.struct_size = sizeof(o);
	ck_status(cms_hook_region_default_template_set("t", &o, "/tmp"), CMS_ERR_INVALID_ARGUMENT);
	o.policy = CMS_POLICY_DISK;
	ck_status(cms_hook_region_default_template_set("t", &o, "/nonexistent/cms"),
		  CMS_ERR_NOT_FOUND);
	o.policy = CMS_POLICY_HOST;
	ck_ok(cms_hook_region_default_template_set("t", &o, NULL));
	ck_status(cms_region_find(ctx, "t", 0, &t), CMS_ERR_NOT_FOUND);
	ck_ok(cms_hook_alloc(MiB, 0, &p));
	ck_ok(cms_region_find(ctx, "t", 0, &t));
	ck_assert_ptr_eq(region_of(ctx, p), t);
	ck_assert_ptr_eq(cms_hook_region_default(0), t);
	ck_assert_uint_eq(info_of(t).policy, CMS_POLICY_HOST);
	ck_ok(cms_hook_free((void *)(uintptr_t)p));
	ck_ok(cms_hook_region_default_template_set(NULL, NULL, NULL));
	ck_ok(cms_hook_context_set(NULL));
	ck_assert_ptr_null(cms_hook_region_default(0));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("conformance_1_2");
	TCase *tc = tcase_create("1.2 headers, current library");

	tcase_add_test(tc, region_stats_of_the_1_2_size);
	tcase_add_test(tc, region_list_of_the_1_2_stride);
	tcase_add_test(tc, range_discard_and_keep);
	tcase_add_test(tc, backup_get_and_read);
	tcase_add_test(tc, region_flags_of_1_2);
	tcase_add_test(tc, hook_defaults_and_margin);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return conformance_main("conformance_1_2", suite);
}
