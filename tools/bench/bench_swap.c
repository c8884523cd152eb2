/* SPDX-License-Identifier: MIT */
/*
 * bench_swap.c - workload (e) of cms-bench: two HOST tags "swap_a" and
 * "swap_b" of 16 x 1 GiB each (scaled like the others) in one context, both
 * filled with the pattern of bench_work.c (allocation indices 0..n-1 for
 * swap_a, n..2n-1 for swap_b, so a backup restored into the wrong tag fails),
 * then swap_b paused (untimed). Every cycle is one cms_swap pausing the active
 * tag and resuming the paused one, alternating direction, timed around the
 * call. The figure is the aggregate bandwidth: (bytes copied out + bytes
 * copied in) / wall time, against the pinned-copy floor with both directions
 * at once (bench_floor.c), target >= 60 GB/s on the H200 (issue 3).
 *
 * After every cycle (outside the timing): the results (every allocation of
 * each side, all bytes released, backed up, re-backed and restored), every
 * allocation of both tags at its address in the expected state, the resumed
 * region's epoch (one more per resume) and restore_pending 0, and the content
 * of the resumed tag: the sample windows (or all of it, --verify-full) hold
 * the generation written before its last pause; then the next generation is
 * written into them, so a stale backup fails its next resume.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define SWAP_TARGET_GBS 60.0

static const char *const swap_tags[2] = { "swap_a", "swap_b" };

/* Per cycle: what the two sides reported (cms_pause_result.bytes_backed_up and
 * cms_resume_result.bytes_restored); the wall time is in w->pause_ns. */
static struct {
	uint64_t out[BENCH_MAX_CYCLES];
	uint64_t in[BENCH_MAX_CYCLES];
} e;

/* Device memory for both tags at once; host RAM for both backups (and the simulated device). */
static int swap_room(struct bench *b, struct bench_work *w, const char *what)
{
	uint64_t need = 2 * w->count * w->size, avail = bench_mem_available();
	size_t fr = 0, tot = 0;
	char b1[32], b2[32];

	BENCH_CU(b, err, cuMemGetInfo, &fr, &tot);
	if (need > fr) {
		bench_fail(b, "%s needs %s of device memory, %s is free; use a larger --scale",
			   what, bench_fmt_bytes(b1, sizeof(b1), need),
			   bench_fmt_bytes(b2, sizeof(b2), fr));
		return -1;
	}
	need = need + (b->sim ? need : 0) + BENCH_STAGE_BYTES;
	if (avail && need > avail) {
		bench_fail(b,
			   "%s needs about %s of host RAM, %s is available; use a larger --scale",
			   what, bench_fmt_bytes(b1, sizeof(b1), need),
			   bench_fmt_bytes(b2, sizeof(b2), avail));
		return -1;
	}
	return 0;
err:
	return -1;
}

/* One cms_swap from tag `from` (active) to tag `to` (paused), checked. */
static int swap_cycle(struct bench *b, struct bench_work *w, cms_context *ctx,
		      cms_region *const region[2], uint64_t *const ptr[2], uint64_t gen[2],
		      uint64_t resumes[2], unsigned int c)
{
	cms_pause_result pr = { .struct_size = sizeof(pr) };
	cms_resume_result rr = { .struct_size = sizeof(rr) };
	cms_region_info info = { .struct_size = sizeof(info) };
	int from = (int)(c % 2), to = 1 - from;
	uint64_t t0, t1;
	cms_status st;

	snprintf(b->step, sizeof(b->step), "(%c) cycle %u", w->id, c + 1);
	t0 = bench_now_ns();
	st = cms_swap(ctx, swap_tags[from], swap_tags[to], NULL, NULL, &pr, &rr);
	t1 = bench_now_ns();
	if (st)
		return bench_cms_fail(b, st, "cms_swap");
	w->pause_ns[c] = t1 - t0;
	e.out[c] = pr.bytes_backed_up;
	e.in[c] = rr.bytes_restored;
	if (c == 0) {
		cms_region_info ia = { .struct_size = sizeof(ia) };

		w->rss_after_pause = bench_proc_status("VmRSS");
		w->bytes_backed_up = pr.bytes_backed_up;
		BENCH_CMS(b, err, cms_region_info_get, region[0], &ia);
		BENCH_CMS(b, err, cms_region_info_get, region[1], &info);
		w->backup_after_pause = ia.backup_bytes + info.backup_bytes;
		w->pinned_after_pause = ia.pinned_bytes + info.pinned_bytes;
	}
	if (!bench_check(b,
			 pr.allocations == w->count && pr.bytes_released == w->physical &&
				 pr.bytes_backed_up == w->logical && rr.allocations == w->count &&
				 rr.bytes_backed == w->physical && rr.bytes_restored == w->logical,
			 "(%c) cycle %u: cms_swap(%s -> %s) paused %" PRIu64 " allocations, "
			 "released %" PRIu64 ", backed up %" PRIu64 " bytes; resumed %" PRIu64
			 " allocations, backed %" PRIu64 ", restored %" PRIu64
			 " bytes (expected %" PRIu64 " allocations, %" PRIu64 " physical, %" PRIu64
			 " logical bytes each side)",
			 w->id, c + 1, swap_tags[from], swap_tags[to], pr.allocations,
			 pr.bytes_released, pr.bytes_backed_up, rr.allocations, rr.bytes_backed,
			 rr.bytes_restored, w->count, w->physical, w->logical) ||
	    bench_check_addresses(b, w, ctx, region[from], ptr[from], CMS_STATE_PAUSED,
				  swap_tags[from], c) ||
	    bench_check_addresses(b, w, ctx, region[to], ptr[to], CMS_STATE_ACTIVE, swap_tags[to],
				  c))
		return -1;
	resumes[to]++;
	BENCH_CMS(b, err, cms_region_info_get, region[to], &info);
	if (!bench_check(b,
			 info.epoch == resumes[to] && info.backed_bytes == w->physical &&
				 !info.restore_pending,
			 "(%c) cycle %u: %s has epoch %" PRIu64 " (expected %" PRIu64 "), %" PRIu64
			 " of %" PRIu64 " bytes backed, restore_pending %u",
			 w->id, c + 1, swap_tags[to], info.epoch, resumes[to], info.backed_bytes,
			 w->physical, (unsigned int)info.restore_pending))
		return -1;
	if (bench_host_verify(b, w, ptr[to], (uint64_t)to * w->count, gen[to], c))
		return -1;
	gen[to]++;
	w->cycles_done++;
	printf("  cycle %u: swap %s -> %s %10.3f ms, out %.2f + in %.2f GB = %.2f GB/s "
	       "aggregate, addresses and %s content of %s OK\n",
	       c + 1, swap_tags[from], swap_tags[to], (double)w->pause_ns[c] / 1e6,
	       (double)e.out[c] / 1e9, (double)e.in[c] / 1e9,
	       (double)(e.out[c] + e.in[c]) / (double)w->pause_ns[c],
	       b->verify_full ? "all" : "sampled", swap_tags[to]);
	return 0;
err:
	return -1;
}

int bench_swap_run(struct bench *b, struct bench_work *w)
{
	cms_context_options copts = CMS_CONTEXT_OPTIONS_INIT;
	cms_region_options ropts = CMS_REGION_OPTIONS_INIT;
	cms_region_info info = { .struct_size = sizeof(info) };
	cms_pause_result pr = { .struct_size = sizeof(pr) };
	cms_region *region[2] = { NULL, NULL };
	uint64_t *ptr[2] = { NULL, NULL };
	uint64_t gen[2] = { 0, 0 }, resumes[2] = { 0, 0 }, i, t0, slowest = 0;
	cms_context *ctx = NULL;
	char what[64], b1[32], b2[32], b3[32];
	unsigned int c;
	cms_status st;
	int t, rc = -1;

	w->ran = true;
	bench_scale(b, w->count0, w->size0, &w->count, &w->size);
	printf("\n(%c) swap: 2 tags of %" PRIu64 " x %s HOST, %s each (%s at --scale 1%s)\n", w->id,
	       w->count, bench_fmt_bytes(b1, sizeof(b1), w->size),
	       bench_fmt_bytes(b2, sizeof(b2), w->count * w->size), w->what,
	       bench_coalesce_note(w));
	snprintf(what, sizeof(what), "workload (%c)", w->id);
	snprintf(b->step, sizeof(b->step), "%s", what);
	if (swap_room(b, w, what))
		goto fail;
	w->pause_ns = calloc(b->cycles, sizeof(*w->pause_ns));
	ptr[0] = calloc(w->count, sizeof(*ptr[0]));
	ptr[1] = calloc(w->count, sizeof(*ptr[1]));
	if (!w->pause_ns || !ptr[0] || !ptr[1]) {
		bench_fail(b, "%s: out of host memory", what);
		goto fail;
	}

	w->hwm_reset = bench_reset_hwm();
	w->hwm_before = bench_proc_status("VmHWM");
	copts.driver_path = b->drv_path; /* the library the tool loaded */
	BENCH_CMS(b, fail, cms_context_create, &copts, &ctx);
	ropts.device = BENCH_DEVICE;
	ropts.policy = CMS_POLICY_HOST;
	ropts.flags = w->flags;
	for (t = 0; t < 2; t++) {
		BENCH_CMS(b, fail, cms_region_create, ctx, swap_tags[t], &ropts, &region[t]);
		for (i = 0; i < w->count; i++)
			BENCH_CMS(b, fail, cms_alloc, region[t], w->size, &ptr[t][i]);
		BENCH_CMS(b, fail, cms_region_info_get, region[t], &info);
		if (!bench_check(b,
				 info.allocations == w->count &&
					 info.logical_bytes == w->count * w->size,
				 "(%c) %s holds %" PRIu64 " allocations, %" PRIu64
				 " bytes after %" PRIu64 " allocations of %" PRIu64,
				 w->id, swap_tags[t], info.allocations, info.logical_bytes,
				 w->count, w->size))
			goto fail;
		w->logical = info.logical_bytes; /* per tag */
		w->physical = info.physical_bytes;
		w->region_flags = info.flags; /* the same for both tags */
	}
	bench_choose_window(b, w);
	t0 = bench_now_ns();
	for (t = 0; t < 2; t++)
		if (bench_host_fill(b, w, ptr[t], (uint64_t)t * w->count))
			goto fail;
	w->fill_s = (double)(bench_now_ns() - t0) / 1e9;
	printf("  filled 2 x %s from the host with cuMemcpyHtoD in %.2f s; checking %s at the "
	       "start, middle and end of each allocation of the resumed tag%s\n",
	       bench_fmt_bytes(b1, sizeof(b1), w->logical), w->fill_s,
	       bench_fmt_bytes(b3, sizeof(b3), w->window),
	       b->verify_full ? " and all of it (--verify-full)" : "");

	/* swap_b paused first (not timed): the cycles start with swap_a active */
	snprintf(b->step, sizeof(b->step), "(%c) first pause of %s", w->id, swap_tags[1]);
	BENCH_CMS(b, fail, cms_pause, ctx, swap_tags[1], NULL, &pr);
	if (!bench_check(b, pr.allocations == w->count && pr.bytes_backed_up == w->logical,
			 "(%c) cms_pause(%s) paused %" PRIu64 " allocations, backed up %" PRIu64
			 " bytes (expected %" PRIu64 ", %" PRIu64 ")",
			 w->id, swap_tags[1], pr.allocations, pr.bytes_backed_up, w->count,
			 w->logical) ||
	    bench_check_addresses(b, w, ctx, region[1], ptr[1], CMS_STATE_PAUSED, "first pause", 0))
		goto fail;
	printf("  %s paused first (%.3f ms, not counted); each cycle: cms_swap(active tag, paused "
	       "tag), alternating\n",
	       swap_tags[1], (double)pr.elapsed_ns / 1e6);

	for (c = 0; c < b->cycles; c++) {
		if (swap_cycle(b, w, ctx, region, ptr, gen, resumes, c))
			goto fail;
		if (w->pause_ns[c] > slowest)
			slowest = w->pause_ns[c];
		if (c == 1 && c + 1 < b->cycles && slowest > BENCH_SLOW_CYCLE_NS) {
			w->truncated = true;
			snprintf(w->note, sizeof(w->note),
				 "stopped after 2 cycles: a cycle took %.1f s (> %.0f s)",
				 (double)slowest / 1e9, (double)BENCH_SLOW_CYCLE_NS / 1e9);
			printf("  %s\n", w->note);
			break;
		}
	}
	rc = 0;
	goto out;

fail:
	w->failed = true;
	if (!w->note[0])
		snprintf(w->note, sizeof(w->note), "FAILED: %s", b->last_failure);
out:
	w->hwm_after = bench_proc_status("VmHWM");
	/* frees every allocation and both regions */
	st = cms_context_destroy(ctx);
	if (st) {
		bench_cms_fail(b, st, "cms_context_destroy");
		w->failed = true;
		rc = -1;
	}
	free(ptr[0]);
	free(ptr[1]);
	return rc;
}

/* ---- report ---------------------------------------------------------------------- */

/* Cycle 1 (median false) or the median of cycles 2..N: ms, aggregate GB/s, ratio to the floor. */
struct swap_row {
	double ms, gbs, floor, ratio;
	int met; /* 1 met, 0 missed, -1 not judged */
};

static void swap_row(const struct bench *b, const struct bench_work *w, bool median,
		     struct swap_row *r)
{
	r->ms = median ? bench_work_median_ms(w, BENCH_PAUSE) : bench_work_first_ms(w, BENCH_PAUSE);
	/* every passed cycle moved w->logical out and w->logical in (checked) */
	r->gbs = 2.0 * (double)w->logical / (r->ms * 1e6);
	r->floor = b->copy.measured ? b->copy.bidir_gbs : NAN;
	r->ratio = r->gbs / r->floor;
	r->met = -1;
	if (median && !b->sim && b->scale == 1 && !isnan(r->gbs))
		r->met = r->gbs >= SWAP_TARGET_GBS;
}

void bench_swap_report(const struct bench *b, const struct bench_work *w)
{
	char b1[32], b2[32];
	struct swap_row r;
	int m;

	if (!w->selected || !w->ran)
		return;
	printf("\n(e) swap: wall time of each cms_swap; GB/s = (bytes copied out + bytes copied "
	       "in) / time; floor = pinned copies, both directions at once\n");
	printf("%-28s %-6s %10s %8s  %-22s %7s  %s\n", "workload", "cycle", "time ms", "GB/s",
	       "floor", "ratio",
	       !b->sim && b->scale == 1 ? "target (issue 3)" :
					  "target (not judged: simulation or --scale)");
	snprintf(b1, sizeof(b1), "(e) 2 x %" PRIu64 " x %s", w->count,
		 bench_fmt_bytes(b2, sizeof(b2), w->size));
	if (!w->cycles_done) {
		printf("%-28s %s\n", b1, w->note[0] ? w->note : "no cycle completed");
		return;
	}
	for (m = 0; m < 2; m++) {
		char c1[32], c2[32], c3[48], c4[32];

		if (m && w->cycles_done < 2)
			continue;
		swap_row(b, w, m, &r);
		snprintf(c1, sizeof(c1), "%.3f", r.ms);
		snprintf(c2, sizeof(c2), "%.2f", r.gbs);
		if (isnan(r.floor))
			snprintf(c3, sizeof(c3), "-");
		else
			snprintf(c3, sizeof(c3), "both %.2f GB/s", r.floor);
		if (isnan(r.ratio))
			snprintf(c4, sizeof(c4), "-");
		else
			snprintf(c4, sizeof(c4), "%.2fx", r.ratio);
		printf("%-28s %-6s %10s %8s  %-22s %7s  %s\n", m ? "" : b1, m ? "median" : "first",
		       c1, c2, c3, c4,
		       !m	 ? "" :
		       r.met < 0 ? ">=60 GB/s -" :
		       r.met	 ? ">=60 GB/s yes" :
				   ">=60 GB/s NO");
	}
	if (w->note[0])
		printf("%-28s %s\n", "", w->note);
}

static void swap_json_row(FILE *f, const struct bench *b, const struct bench_work *w, bool median)
{
	struct swap_row r;

	swap_row(b, w, median, &r);
	fputs("{\"swap_ms\": ", f);
	bench_json_num(f, r.ms);
	fputs(", \"aggregate_gbs\": ", f);
	bench_json_num(f, r.gbs);
	fputs(", \"floor_bidir_gbs\": ", f);
	bench_json_num(f, r.floor);
	fputs(", \"ratio\": ", f);
	bench_json_num(f, r.ratio);
	fprintf(f, ", \"target\": %s, \"target_met\": %s}", median ? "\">=60 GB/s\"" : "null",
		r.met < 0 ? "null" :
		r.met	  ? "true" :
			    "false");
}

void bench_swap_json(const struct bench *b, const struct bench_work *w, FILE *f)
{
	unsigned int c;

	fprintf(f,
		",\n     \"tags\": [\"%s\", \"%s\"], \"bytes_per_tag\": %" PRIu64
		", \"swap_ms\": [",
		swap_tags[0], swap_tags[1], w->logical);
	for (c = 0; c < w->cycles_done; c++) {
		fputs(c ? ", " : "", f);
		bench_json_num(f, (double)w->pause_ns[c] / 1e6);
	}
	fputs("], \"bytes_out\": [", f);
	for (c = 0; c < w->cycles_done; c++)
		fprintf(f, "%s%" PRIu64, c ? ", " : "", e.out[c]);
	fputs("], \"bytes_in\": [", f);
	for (c = 0; c < w->cycles_done; c++)
		fprintf(f, "%s%" PRIu64, c ? ", " : "", e.in[c]);
	fputs("],\n     \"first\": ", f);
	swap_json_row(f, b, w, false);
	fputs(",\n     \"median\": ", f);
	swap_json_row(f, b, w, true);
	fputs(",\n     \"fill_s\": ", f);
	bench_json_num(f, w->fill_s);
	fprintf(f,
		", \"vmrss_after_first_pause_bytes\": %" PRIu64
		", \"vmhwm_reset\": %s, \"vmhwm_after_bytes\": %" PRIu64
		", \"vmhwm_delta_bytes\": %" PRIu64 ", \"backup_bytes_after_first_pause\": %" PRIu64
		", \"bytes_backed_up_first_pause\": %" PRIu64
		", \"pinned_bytes_after_first_pause\": %" PRIu64 "}",
		w->rss_after_pause, w->hwm_reset ? "true" : "false", w->hwm_after,
		w->hwm_after > w->hwm_before ? w->hwm_after - w->hwm_before : 0,
		w->backup_after_pause, w->bytes_backed_up, w->pinned_after_pause);
}
