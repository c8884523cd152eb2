/* SPDX-License-Identifier: MIT */
/*
 * bench_frozen.c - workload (o) of cms-bench: a frozen HOST region
 * (cms_region_freeze), 16 x 1 GiB at --scale 1, against a DISCARD pause of
 * the same layout measured in the same run (issue 27 item 3: the pause of a
 * frozen region within 1.2x of it, the resume at >= 0.95x of the link).
 *
 * First the DISCARD region "bench_o_discard" (the same allocations, no
 * content) runs its cycles and is destroyed; then "bench_o" is filled with the
 * pattern of bench_work.c, frozen, and cycled: its first pause copies
 * everything (the memory may have changed since it was mapped), every later
 * one copies nothing (cms_region_stats: bytes_to_store unchanged,
 * bytes_unchanged + its bytes), checked each cycle. After every resume
 * (outside the timing): every allocation at its address, epoch and backed
 * bytes, the content (sample windows, or all with --verify-full; never
 * rewritten: the region is read-only). After the last cycle a cuMemcpyHtoD of
 * 8 bytes into the first allocation must fail (the driver enforces read-only
 * mappings) and leave the content as it was.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define FROZEN_PAUSE_TARGET 1.2	  /* x the DISCARD pause of the same layout, at most */
#define FROZEN_RESUME_TARGET 0.95 /* x the pinned host-to-device floor, at least */

/* The DISCARD cycles of the same layout; what each frozen pause copied and skipped. */
static struct {
	uint64_t discard_pause_ns[BENCH_MAX_CYCLES];
	uint64_t discard_resume_ns[BENCH_MAX_CYCLES];
	unsigned int discard_cycles;
	uint64_t to_store[BENCH_MAX_CYCLES];
	uint64_t unchanged[BENCH_MAX_CYCLES];
	unsigned int writes_refused;
	uint64_t freeze_ns, thaw_ns; /* cuMemSetAccess of the whole layout: read-only, read-write */
	struct bench_frozen_floor same; /* the floors in the frozen region's conditions */
} k;

/* Median of cycles 2..n of ns in ms (a copy is sorted); NAN for fewer than 2 cycles. */
static double median_ms(const uint64_t *ns, unsigned int n)
{
	uint64_t v[BENCH_MAX_CYCLES];

	if (n < 2)
		return NAN;
	memcpy(v, ns + 1, (n - 1) * sizeof(v[0]));
	return bench_median_ns(v, n - 1) / 1e6;
}

static int make_region(struct bench *b, struct bench_work *w, cms_context *ctx, const char *tag,
		       uint32_t policy, cms_region **r, uint64_t *ptr)
{
	cms_region_options ro = CMS_REGION_OPTIONS_INIT;
	cms_region_info info = { .struct_size = sizeof(info) };
	uint64_t i;

	ro.device = BENCH_DEVICE;
	ro.policy = policy;
	ro.flags = w->flags;
	BENCH_CMS(b, err, cms_region_create, ctx, tag, &ro, r);
	for (i = 0; i < w->count; i++)
		BENCH_CMS(b, err, cms_alloc, *r, w->size, &ptr[i]);
	BENCH_CMS(b, err, cms_region_info_get, *r, &info);
	w->logical = info.logical_bytes;
	w->physical = info.physical_bytes;
	w->region_flags = info.flags;
	return 0;
err:
	return -1;
}

/* The DISCARD pause and resume of the layout, b->cycles times; then the region goes. */
static int discard_cycles(struct bench *b, struct bench_work *w, cms_context *ctx, uint64_t *ptr)
{
	cms_pause_result pr = { .struct_size = sizeof(pr) };
	cms_region *r = NULL;
	uint64_t t0, t1, t2;
	unsigned int c;
	char tag[32];

	snprintf(b->step, sizeof(b->step), "(%c) DISCARD cycles", w->id);
	snprintf(tag, sizeof(tag), "bench_%c_discard", w->id);
	if (make_region(b, w, ctx, tag, CMS_POLICY_DISCARD, &r, ptr))
		return -1;
	for (c = 0; c < b->cycles; c++) {
		t0 = bench_now_ns();
		BENCH_CMS(b, err, cms_region_pause, r, NULL, &pr);
		t1 = bench_now_ns();
		bench_gap(b);
		t2 = bench_now_ns();
		BENCH_CMS(b, err, cms_region_resume, r, NULL, NULL);
		k.discard_resume_ns[c] = bench_now_ns() - t2;
		k.discard_pause_ns[c] = t1 - t0;
		if (!bench_check(b, pr.bytes_released == w->physical && pr.bytes_backed_up == 0,
				 "(%c) DISCARD cycle %u released %" PRIu64
				 " bytes (expected %" PRIu64 "), backed up %" PRIu64,
				 w->id, c + 1, pr.bytes_released, w->physical, pr.bytes_backed_up))
			goto err;
		k.discard_cycles++;
	}
	BENCH_CMS(b, err, cms_region_destroy, r);
	printf("  DISCARD, the same layout: pause %.3f ms, resume %.3f ms (medians of cycles "
	       "2..%u; region destroyed)\n",
	       median_ms(k.discard_pause_ns, k.discard_cycles),
	       median_ms(k.discard_resume_ns, k.discard_cycles), k.discard_cycles);
	return 0;
err:
	return -1;
}

/* One timed pause and resume of the frozen region, checked. */
static int frozen_cycle(struct bench *b, struct bench_work *w, cms_context *ctx, cms_region *r,
			const uint64_t *ptr, unsigned int c)
{
	cms_region_stats s0 = { .struct_size = sizeof(s0) }, s1 = { .struct_size = sizeof(s1) };
	cms_region_info info = { .struct_size = sizeof(info) };
	cms_pause_result pr = { .struct_size = sizeof(pr) };
	uint64_t t0, t1;

	snprintf(b->step, sizeof(b->step), "(%c) cycle %u", w->id, c + 1);
	BENCH_CMS(b, err, cms_region_stats_get, r, &s0);
	t0 = bench_now_ns();
	BENCH_CMS(b, err, cms_region_pause, r, NULL, &pr);
	t1 = bench_now_ns();
	w->pause_ns[c] = t1 - t0;
	BENCH_CMS(b, err, cms_region_stats_get, r, &s1);
	k.to_store[c] = s1.bytes_to_store - s0.bytes_to_store;
	k.unchanged[c] = s1.bytes_unchanged - s0.bytes_unchanged;
	if (c == 0) {
		w->rss_after_pause = bench_proc_status("VmRSS");
		w->bytes_backed_up = pr.bytes_backed_up;
		BENCH_CMS(b, err, cms_region_info_get, r, &info);
		w->backup_after_pause = info.backup_bytes;
		w->pinned_after_pause = info.pinned_bytes;
	}
	if (!bench_check(b,
			 pr.bytes_released == w->physical &&
				 k.to_store[c] == (c ? 0 : w->logical) &&
				 k.unchanged[c] == (c ? w->logical : 0),
			 "(%c) cycle %u: the frozen pause released %" PRIu64
			 " bytes (expected %" PRIu64 "), copied %" PRIu64 " and skipped %" PRIu64
			 " (expected %" PRIu64 " and %" PRIu64 ")",
			 w->id, c + 1, pr.bytes_released, w->physical, k.to_store[c],
			 k.unchanged[c], c ? 0 : w->logical, c ? w->logical : 0) ||
	    bench_check_addresses(b, w, ctx, r, ptr, CMS_STATE_PAUSED, "after pause", c))
		goto err;
	bench_gap(b);
	t0 = bench_now_ns();
	BENCH_CMS(b, err, cms_region_resume, r, NULL, NULL);
	w->resume_ns[c] = bench_now_ns() - t0;
	BENCH_CMS(b, err, cms_region_info_get, r, &info);
	if (!bench_check(b, info.epoch == c + 1u && info.backed_bytes == w->physical && info.frozen,
			 "(%c) cycle %u: epoch %" PRIu64 " (expected %u), %" PRIu64 " of %" PRIu64
			 " bytes backed, frozen %u",
			 w->id, c + 1, info.epoch, c + 1, info.backed_bytes, w->physical,
			 info.frozen) ||
	    bench_check_addresses(b, w, ctx, r, ptr, CMS_STATE_ACTIVE, "after resume", c) ||
	    bench_host_check(b, w, ptr, 0, 0, c))
		goto err;
	w->cycles_done++;
	printf("  cycle %u: pause %10.3f ms (copied %" PRIu64 ", unchanged %" PRIu64
	       " bytes), resume %10.3f ms (%.2f GB/s), addresses and %s content OK\n",
	       c + 1, (double)w->pause_ns[c] / 1e6, k.to_store[c], k.unchanged[c],
	       (double)w->resume_ns[c] / 1e6, (double)w->logical / (double)w->resume_ns[c],
	       b->verify_full ? "all" : "sampled");
	return 0;
err:
	return -1;
}

/* After the cycles (a failed copy could leave a driver error behind: outside the timings): a
 * cuMemcpyHtoD into the frozen memory must fail and change nothing. */
static int write_probe(struct bench *b, struct bench_work *w, const uint64_t *ptr)
{
	uint64_t probe = ~bench_host_expected(w, 0, 0, 0);
	CUresult res;

	snprintf(b->step, sizeof(b->step), "(%c) write into frozen memory", w->id);
	res = b->drv.cuMemcpyHtoD(ptr[0], &probe, sizeof(probe));
	if (!bench_check(b, res != CUDA_SUCCESS,
			 "(%c) a cuMemcpyHtoD into the frozen allocation at 0x%" PRIx64
			 " succeeded",
			 w->id, ptr[0]) ||
	    bench_host_check(b, w, ptr, 0, 0, w->cycles_done))
		return -1;
	k.writes_refused++;
	printf("  a cuMemcpyHtoD into the frozen memory failed as it must (%d); content "
	       "unchanged\n",
	       (int)res);
	return 0;
}

int bench_frozen_run(struct bench *b, struct bench_work *w)
{
	cms_context_options copts = CMS_CONTEXT_OPTIONS_INIT;
	cms_region *r = NULL;
	cms_context *ctx = NULL;
	uint64_t *ptr = NULL, t0;
	char what[64], b1[32], b2[32], b3[32], tag[32];
	unsigned int c;
	cms_status st;
	int rc = -1;

	w->ran = true;
	memset(&k, 0, sizeof(k));
	bench_scale(b, w->count0, w->size0, &w->count, &w->size);
	printf("\n(%c) frozen: %" PRIu64 " x %s HOST, %s (%s at --scale 1%s), against a DISCARD "
	       "pause of the same layout\n",
	       w->id, w->count, bench_fmt_bytes(b1, sizeof(b1), w->size),
	       bench_fmt_bytes(b2, sizeof(b2), w->count * w->size), w->what,
	       bench_coalesce_note(w));
	snprintf(what, sizeof(what), "workload (%c)", w->id);
	snprintf(b->step, sizeof(b->step), "%s", what);
	if (bench_room(b, what, w->count * w->size, w->count * w->size))
		goto fail;
	w->pause_ns = calloc(b->cycles, sizeof(*w->pause_ns));
	w->resume_ns = calloc(b->cycles, sizeof(*w->resume_ns));
	ptr = calloc(w->count, sizeof(*ptr));
	if (!w->pause_ns || !w->resume_ns || !ptr) {
		bench_fail(b, "%s: out of host memory", what);
		goto fail;
	}
	w->hwm_reset = bench_reset_hwm();
	w->hwm_before = bench_proc_status("VmHWM");
	copts.driver_path = b->drv_path; /* the library the tool loaded */
	BENCH_CMS(b, fail, cms_context_create, &copts, &ctx);
	if (discard_cycles(b, w, ctx, ptr))
		goto fail;

	snprintf(b->step, sizeof(b->step), "(%c) setup", w->id);
	snprintf(tag, sizeof(tag), "bench_%c", w->id);
	if (make_region(b, w, ctx, tag, CMS_POLICY_HOST, &r, ptr))
		goto fail;
	bench_choose_window(b, w);
	t0 = bench_now_ns();
	if (bench_host_fill(b, w, ptr, 0))
		goto fail;
	w->fill_s = (double)(bench_now_ns() - t0) / 1e9;
	/* The read-only step alone (what each frozen resume does after its copies): a freeze, a
	 * thaw, and the freeze the cycles run under; the two freezes averaged. */
	t0 = bench_now_ns();
	BENCH_CMS(b, fail, cms_region_freeze, r);
	k.freeze_ns = bench_now_ns() - t0;
	t0 = bench_now_ns();
	BENCH_CMS(b, fail, cms_region_thaw, r);
	k.thaw_ns = bench_now_ns() - t0;
	t0 = bench_now_ns();
	BENCH_CMS(b, fail, cms_region_freeze, r);
	k.freeze_ns = (k.freeze_ns + bench_now_ns() - t0) / 2;
	printf("  filled %s from the host in %.2f s, then frozen (read-only %.3f ms, the mean of "
	       "two freezes; read-write again %.3f ms, a thaw); checking %s at the start, middle "
	       "and end of each allocation%s\n",
	       bench_fmt_bytes(b1, sizeof(b1), w->logical), w->fill_s, (double)k.freeze_ns / 1e6,
	       (double)k.thaw_ns / 1e6, bench_fmt_bytes(b3, sizeof(b3), w->window),
	       b->verify_full ? " and all of it (--verify-full)" : "");
	for (c = 0; c < b->cycles; c++)
		if (frozen_cycle(b, w, ctx, r, ptr, c))
			goto fail;
	/* Paused once more (copies nothing) for the floors of its own conditions, resumed. */
	BENCH_CMS(b, fail, cms_region_pause, r, NULL, NULL);
	if (bench_frozen_floor(b, w, ctx, ptr, &k.same))
		goto fail;
	BENCH_CMS(b, fail, cms_region_resume, r, NULL, NULL);
	if (write_probe(b, w, ptr))
		goto fail;
	rc = 0;
	goto out;

fail:
	w->failed = true;
	if (!w->note[0])
		snprintf(w->note, sizeof(w->note), "FAILED: %s", b->last_failure);
out:
	w->hwm_after = bench_proc_status("VmHWM");
	st = cms_context_destroy(ctx); /* frees every allocation and the regions */
	if (st) {
		bench_cms_fail(b, st, "cms_context_destroy");
		w->failed = true;
		rc = -1;
	}
	free(ptr);
	return rc;
}

/* ---- report ---------------------------------------------------------------------- */

/* The medians of cycles 2..N (the steady state: every pause after the first copies nothing). */
struct frozen_row {
	double pause_ms, discard_ms, release_floor_ms, pause_ratio, floor_ratio;
	double resume_ms, resume_gbs, h2d_gbs, resume_ratio;
	double same_release_ratio, same_h2d_ratio; /* to the floors of its own conditions */
	int pause_met, resume_met;		   /* 1 met, 0 missed, -1 not judged */
};

static void frozen_row(const struct bench *b, const struct bench_work *w, struct frozen_row *r)
{
	const struct bench_vmm_floor *v = &b->vmm[BENCH_VB_1G];
	bool judged = !b->sim && b->scale == 1;

	r->pause_ms = bench_work_median_ms(w, BENCH_PAUSE);
	r->resume_ms = bench_work_median_ms(w, BENCH_RESUME);
	r->discard_ms = median_ms(k.discard_pause_ns, k.discard_cycles);
	r->release_floor_ms =
		v->measured && v->count == w->count && v->size == w->size ? v->release_ms : NAN;
	r->pause_ratio = r->pause_ms / r->discard_ms;
	r->floor_ratio = r->pause_ms / r->release_floor_ms;
	r->resume_gbs = (double)w->logical / (r->resume_ms * 1e6);
	r->h2d_gbs = b->copy.measured ? b->copy.h2d_gbs : NAN;
	r->resume_ratio = r->resume_gbs / r->h2d_gbs;
	r->same_release_ratio = k.same.measured ? r->pause_ms / k.same.release_ms : NAN;
	r->same_h2d_ratio = k.same.measured ? k.same.h2d_ms / r->resume_ms : NAN;
	r->pause_met =
		judged && !isnan(r->pause_ratio) ? r->pause_ratio <= FROZEN_PAUSE_TARGET : -1;
	r->resume_met =
		judged && !isnan(r->resume_ratio) ? r->resume_ratio >= FROZEN_RESUME_TARGET : -1;
}

static const char *met(int m)
{
	return m < 0 ? "-" : m ? "yes" : "NO";
}

void bench_frozen_report(const struct bench *b, const struct bench_work *w)
{
	struct frozen_row r;
	char name[48], b1[32];

	if (!w->selected || !w->ran)
		return;
	printf("\n(o) frozen: medians of cycles 2..N (cycle 1, the first pause after the freeze, "
	       "copies: %.3f ms); DISCARD = the same layout in this run; release floor = "
	       "cuMemUnmap + cuMemRelease of the same handles\n",
	       w->cycles_done ? (double)w->pause_ns[0] / 1e6 : NAN);
	snprintf(name, sizeof(name), "(o) %" PRIu64 " x %s", w->count,
		 bench_fmt_bytes(b1, sizeof(b1), w->size));
	if (w->cycles_done < 2) {
		printf("%-28s %s\n", name, w->note[0] ? w->note : "fewer than 2 cycles completed");
		return;
	}
	frozen_row(b, w, &r);
	printf("%-28s pause  %10.3f ms  DISCARD %10.3f ms  %.2fx (target <= %.1fx: %s)  "
	       "release floor %.3f ms  %.2fx\n",
	       name, r.pause_ms, r.discard_ms, r.pause_ratio, FROZEN_PAUSE_TARGET, met(r.pause_met),
	       r.release_floor_ms, r.floor_ratio);
	printf("%-28s resume %10.3f ms  %.2f GB/s  h2d floor %.2f GB/s  %.2fx (target >= %.2fx: "
	       "%s)  of it read-only step ~%.3f ms (cms_region_freeze)\n",
	       "", r.resume_ms, r.resume_gbs, r.h2d_gbs, r.resume_ratio, FROZEN_RESUME_TARGET,
	       met(r.resume_met), (double)k.freeze_ns / 1e6);
	printf("%-28s in its own conditions (the region's backups, read-only handles filled by "
	       "copies): pause %.2fx their release %.3f ms, resume %.2fx their copies %.3f ms\n",
	       "", r.same_release_ratio, k.same.release_ms, r.same_h2d_ratio, k.same.h2d_ms);
	if (w->note[0])
		printf("%-28s %s\n", "", w->note);
}

static void json_ms(FILE *f, const char *key, const uint64_t *ns, unsigned int n)
{
	unsigned int c;

	fprintf(f, ", \"%s\": [", key);
	for (c = 0; c < n; c++) {
		fputs(c ? ", " : "", f);
		bench_json_num(f, (double)ns[c] / 1e6);
	}
	fputs("]", f);
}

static void json_u64(FILE *f, const char *key, const uint64_t *v, unsigned int n)
{
	unsigned int c;

	fprintf(f, ", \"%s\": [", key);
	for (c = 0; c < n; c++)
		fprintf(f, "%s%" PRIu64, c ? ", " : "", v[c]);
	fputs("]", f);
}

void bench_frozen_json(const struct bench *b, const struct bench_work *w, FILE *f)
{
	struct frozen_row r;

	fputs("\n    ", f);
	json_ms(f, "pause_ms", w->pause_ns, w->cycles_done);
	json_ms(f, "resume_ms", w->resume_ns, w->cycles_done);
	json_u64(f, "bytes_to_store", k.to_store, w->cycles_done);
	json_u64(f, "bytes_unchanged", k.unchanged, w->cycles_done);
	json_ms(f, "discard_pause_ms", k.discard_pause_ns, k.discard_cycles);
	json_ms(f, "discard_resume_ms", k.discard_resume_ns, k.discard_cycles);
	fputs(", \"freeze_ms\": ", f);
	bench_json_num(f, (double)k.freeze_ns / 1e6);
	fputs(", \"thaw_ms\": ", f);
	bench_json_num(f, (double)k.thaw_ns / 1e6);
	fprintf(f, ", \"writes_refused\": %u, \"fill_s\": ", k.writes_refused);
	bench_json_num(f, w->fill_s);
	if (w->cycles_done < 2) {
		fputs("}", f);
		return;
	}
	frozen_row(b, w, &r);
	fputs(",\n     \"median\": {\"pause_ms\": ", f);
	bench_json_num(f, r.pause_ms);
	fputs(", \"discard_pause_ms\": ", f);
	bench_json_num(f, r.discard_ms);
	fputs(", \"pause_ratio_to_discard\": ", f);
	bench_json_num(f, r.pause_ratio);
	fputs(", \"release_floor_ms\": ", f);
	bench_json_num(f, r.release_floor_ms);
	fputs(", \"pause_ratio_to_release_floor\": ", f);
	bench_json_num(f, r.floor_ratio);
	fputs(", \"resume_ms\": ", f);
	bench_json_num(f, r.resume_ms);
	fputs(", \"resume_gbs\": ", f);
	bench_json_num(f, r.resume_gbs);
	fputs(", \"floor_h2d_gbs\": ", f);
	bench_json_num(f, r.h2d_gbs);
	fputs(", \"resume_ratio_to_h2d\": ", f);
	bench_json_num(f, r.resume_ratio);
	fputs(", \"same_release_floor_ms\": ", f);
	bench_json_num(f, k.same.measured ? k.same.release_ms : NAN);
	fputs(", \"pause_ratio_to_same_release\": ", f);
	bench_json_num(f, r.same_release_ratio);
	fputs(", \"same_h2d_floor_ms\": ", f);
	bench_json_num(f, k.same.measured ? k.same.h2d_ms : NAN);
	fputs(", \"resume_ratio_to_same_h2d\": ", f);
	bench_json_num(f, r.same_h2d_ratio);
	fprintf(f, ", \"pause_target_met\": %s, \"resume_target_met\": %s}}",
		r.pause_met < 0 ? "null" :
		r.pause_met	? "true" :
				  "false",
		r.resume_met < 0 ? "null" :
		r.resume_met	 ? "true" :
				   "false");
}
