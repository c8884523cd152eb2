/* SPDX-License-Identifier: MIT */
/*
 * bench_report.c - the results of cms-bench: a table on stdout (one row per
 * workload, cycle kind and phase, next to its floor) and the same data as
 * JSON (--json FILE).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"

#define TARGET_A_RATIO 1.10
#define TARGET_B_PAUSE_MS 20.0
#define TARGET_B_RESUME_MS 10.0
#define TARGET_HOST_RATIO 0.95
#define TARGET_HOST_FIRST_GBS 15.0
#define TARGET_F_RETURN_MS 10.0
#define TARGET_RELEASE_GBS 25.0	   /* (i): first and steady pause without retention */
#define TARGET_PREPARED_RATIO 0.90 /* (l): the first pause after the preparation, x the floor */

/* One phase of a workload, with its floor and ratio. */
struct bench_row {
	double ms;
	double gbs;	  /* HOST: logical bytes / time; else NAN */
	double floor;	  /* ms (DISCARD) or GB/s (HOST); NAN if not measured */
	double ratio;	  /* DISCARD: ms / floor ms; HOST: GB/s / floor GB/s */
	const char *spec; /* the target for this row, or NULL */
	int met;	  /* 1 met, 0 missed, -1 not judged (simulation, scaled, no floor) */
};

static void bench_row(const struct bench *b, const struct bench_work *w, bool median,
		      enum bench_phase phase, struct bench_row *r)
{
	bool host = w->policy == CMS_POLICY_HOST;
	bool judge = !b->sim && b->scale == 1;
	bool pause = phase == BENCH_PAUSE;
	const struct bench_vmm_floor *f = w->vmm_floor >= 0 ? &b->vmm[w->vmm_floor] : NULL;

	r->ms = median ? bench_work_median_ms(w, phase) : bench_work_first_ms(w, phase);
	if (w->async && phase == BENCH_RESUME) { /* the return of the call: no bandwidth */
		r->gbs = r->floor = r->ratio = NAN;
		r->spec = median ? "<=10 ms" : NULL;
		r->met = judge && median && !isnan(r->ms) ? r->ms <= TARGET_F_RETURN_MS : -1;
		return;
	}
	r->gbs = host ? (double)w->logical / (r->ms * 1e6) : NAN;
	r->floor = NAN;
	if (host && b->copy.measured)
		r->floor = pause ? b->copy.d2h_gbs : b->copy.h2d_gbs;
	else if (!host && f && f->measured)
		r->floor = pause ? f->release_ms : f->back_ms;
	r->ratio = host ? r->gbs / r->floor : r->ms / r->floor;
	r->spec = NULL;
	r->met = -1;
	switch (w->id) {
	case 'a':
		if (median) {
			r->spec = "<=1.10x";
			if (judge && !isnan(r->ratio))
				r->met = r->ratio <= TARGET_A_RATIO;
		}
		break;
	case 'b':
		if (median) {
			r->spec = pause ? "<=20 ms" : "<=10 ms";
			if (judge && !isnan(r->ms))
				r->met = r->ms <= (pause ? TARGET_B_PAUSE_MS : TARGET_B_RESUME_MS);
		}
		break;
	case 'i': /* issue 17 item 3: non-retaining cycles */
		if (pause) {
			r->spec = ">=25 GB/s";
			if (judge && !isnan(r->gbs))
				r->met = r->gbs >= TARGET_RELEASE_GBS;
		}
		break;
	case 'l': /* issue 27 item 2: a first pause after the preparation */
		if (pause && !median) {
			r->spec = ">=0.90x";
			if (judge && !isnan(r->ratio))
				r->met = r->ratio >= TARGET_PREPARED_RATIO;
		}
		break;
	case 'c':
	case 'd':
		r->spec = median ? ">=0.95x" : ">=15 GB/s";
		if (judge && median && !isnan(r->ratio))
			r->met = r->ratio >= TARGET_HOST_RATIO;
		else if (judge && !median && !isnan(r->gbs))
			r->met = r->gbs >= TARGET_HOST_FIRST_GBS;
		break;
	default:
		break;
	}
}

static const char *fmt_num(char *buf, size_t len, double v, const char *fmt)
{
	if (isnan(v) || isinf(v))
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, fmt, v);
	return buf;
}

static const char *work_name(char *buf, size_t len, const struct bench_work *w)
{
	char b1[32];

	if (!w->ran)
		snprintf(buf, len, "(%c) %s", w->id, w->what);
	else
		snprintf(buf, len, "(%c) %" PRIu64 " x %s %s%s", w->id, w->count,
			 bench_fmt_bytes(b1, sizeof(b1), w->size),
			 w->policy == CMS_POLICY_HOST ? "HOST" :
			 w->policy == CMS_POLICY_DISK ? "DISK" :
							"DISCARD",
			 w->flags & CMS_REGION_VERIFY	     ? " VERIFY" :
			 w->flags & CMS_REGION_GUARD	     ? " GUARD" :
			 w->flags & CMS_REGION_HOST_PAGEABLE ? " PAGEABLE" :
			 w->flags & CMS_REGION_RELEASE_HOST  ? " RELEASE" :
			 w->flags & CMS_REGION_PREPARE	     ? " PREPARE" :
							       "");
	return buf;
}

/* A verified workload ((m), (n)) and the one it repeats without the flag ((c), (d)). */
static const struct bench_work *verify_base(const struct bench *b, const struct bench_work *w)
{
	if (w->id == 'a' + BENCH_WM)
		return &b->work[BENCH_WC];
	if (w->id == 'a' + BENCH_WN)
		return &b->work[BENCH_WD];
	return NULL;
}

/* The checksums' throughput: each cycle checksums the content at its pause and at its resume
 * (cms_region_stats counts the resume's bytes), GB/s; NAN without a measure. */
static double verify_gbs(const struct bench_work *w)
{
	return w->verify_ns ? 2.0 * (double)w->bytes_verified / (double)w->verify_ns : NAN;
}

/* Median time of w's phase over that of base's, the same run: what the checksums cost. */
static double verify_ratio(const struct bench_work *w, const struct bench_work *base,
			   enum bench_phase phase)
{
	if (!base || !base->ran || base->failed || base->cycles_done < 2 || w->cycles_done < 2)
		return NAN;
	return bench_work_median_ms(w, phase) / bench_work_median_ms(base, phase);
}

/* (m), (n): the cost of CMS_REGION_VERIFY against (c), (d) of the same run. */
static void verify_report(const struct bench *b)
{
	char name[96], c1[32], c2[32], c3[32], c4[32];
	bool head = false;
	int i;

	for (i = BENCH_WM; i <= BENCH_WN; i++) {
		const struct bench_work *w = &b->work[i], *base = verify_base(b, w);
		double cycle_ms;

		if (!w->selected || !w->ran || w->failed || w->cycles_done < 2)
			continue;
		if (!head)
			printf("\nverified backups (CMS_REGION_VERIFY): medians against the same "
			       "workload without the flag in this run; checksum GB/s = 2 x "
			       "bytes_verified / verify_ns (cms_region_stats); verify share = "
			       "verify_ns per cycle / median cycle\n%-28s %-6s %12s %12s %13s "
			       "%13s\n",
			       "workload", "vs", "pause ratio", "resume ratio", "checksum GB/s",
			       "verify share");
		head = true;
		work_name(name, sizeof(name), w);
		cycle_ms = bench_work_median_ms(w, BENCH_PAUSE) +
			   bench_work_median_ms(w, BENCH_RESUME);
		snprintf(c4, sizeof(c4), "%.1f%%",
			 100.0 * (double)w->verify_ns / 1e6 / w->cycles_done / cycle_ms);
		printf("%-28s (%c)    %12s %12s %13s %13s\n", name, base->id,
		       fmt_num(c1, sizeof(c1), verify_ratio(w, base, BENCH_PAUSE), "%.3fx"),
		       fmt_num(c2, sizeof(c2), verify_ratio(w, base, BENCH_RESUME), "%.3fx"),
		       fmt_num(c3, sizeof(c3), verify_gbs(w), "%.1f"), c4);
	}
}

void bench_report_table(const struct bench *b)
{
	char name[96], c1[32], c2[32], c3[48], c4[32], c5[32], c6[32], c7[32], b1[32];
	const struct bench_vmm_floor *pa = &b->vmm[BENCH_VB_ALLOC];
	int i, m, p, k, ran = 0, reset = 0;

	for (i = 0; i < BENCH_NWORK; i++)
		if (b->work[i].selected)
			break;
	if (i == BENCH_NWORK)
		return;

	printf("\nresults: wall time of each cms_region_pause / cms_region_resume call; first "
	       "cycle, then the median of cycles 2..N\n");
	if (b->work[BENCH_WF].selected && b->work[BENCH_WF].ran)
		printf("(f): return = the CMS_RESUME_ASYNC resume call; ready = from that call to "
		       "the end of the %s enqueued right after it on the resume stream\n",
		       b->work[BENCH_WF].kernel ? "kernel" : "copy (the simulation's kernel)");
	printf("%-28s %-6s %-6s %10s %8s  %-22s %7s  %s\n", "workload", "cycle", "phase", "time ms",
	       "GB/s", "floor", "ratio",
	       !b->sim && b->scale == 1 ? "target (issue 3)" :
					  "target (not judged: simulation or --scale)");
	for (i = 0; i < BENCH_NWORK; i++) {
		const struct bench_work *w = &b->work[i];
		bool host = w->policy == CMS_POLICY_HOST;
		bool shown = false;

		work_name(name, sizeof(name), w);
		if (i == BENCH_WG && w->implemented)
			continue; /* its own table, against the disk (bench_disk_report) */
		if (i == BENCH_WE && w->implemented)
			continue; /* its own table, aggregate GB/s (bench_swap_report) */
		if (i == BENCH_WK)
			continue; /* its own table, a row per size (bench_nonret_report) */
		if (i == BENCH_WO && w->implemented)
			continue; /* its own table, against DISCARD (bench_frozen_report) */
		if (!w->implemented) {
			if (w->selected)
				printf("%-28s not implemented yet (no such feature in the "
				       "library)\n",
				       name);
			continue;
		}
		if (!w->selected || !w->ran)
			continue;
		if (!w->cycles_done) {
			printf("%-28s %s\n", name, w->note[0] ? w->note : "no cycle completed");
			continue;
		}
		for (m = 0; m < 2; m++) {
			static const enum bench_phase sync_ph[] = { BENCH_PAUSE, BENCH_RESUME },
						      async_ph[] = { BENCH_PAUSE, BENCH_RESUME,
								     BENCH_READY };
			const enum bench_phase *ph = w->async ? async_ph : sync_ph;
			int nph = w->async ? 3 : 2;

			if (m && w->cycles_done < 2)
				continue;
			for (k = 0; k < nph; k++) {
				struct bench_row r;

				p = ph[k] == BENCH_PAUSE;
				bench_row(b, w, m, ph[k], &r);
				if (host)
					fmt_num(c3, sizeof(c3), r.floor,
						p ? "D2H %.2f GB/s" : "H2D %.2f GB/s");
				else
					fmt_num(c3, sizeof(c3), r.floor,
						p ? "release %.3f ms" : "back %.3f ms");
				snprintf(c7, sizeof(c7), "%s%s", r.spec ? r.spec : "",
					 !r.spec   ? "" :
					 r.met < 0 ? " -" :
					 r.met	   ? " yes" :
						     " NO");
				printf("%-28s %-6s %-6s %10s %8s  %-22s %7s  %s\n",
				       shown ? "" : name, m ? "median" : "first",
				       p		     ? "pause" :
				       !w->async	     ? "resume" :
				       ph[k] == BENCH_RESUME ? "return" :
							       "ready",
				       fmt_num(c1, sizeof(c1), r.ms, "%.3f"),
				       fmt_num(c2, sizeof(c2), r.gbs, "%.2f"), c3,
				       fmt_num(c4, sizeof(c4), r.ratio, "%.2fx"), c7);
				shown = true;
			}
		}
		if (w->id == 'b' && pa->measured && w->cycles_done >= 2)
			printf("%-28s per-allocation floor (%" PRIu64 " x %s handles): back %.3f "
			       "ms, release %.3f ms; median pause %s, resume %s of it\n",
			       "", pa->count, bench_fmt_bytes(b1, sizeof(b1), pa->size),
			       pa->back_ms, pa->release_ms,
			       fmt_num(c5, sizeof(c5),
				       bench_work_median_ms(w, BENCH_PAUSE) / pa->release_ms,
				       "%.2fx"),
			       fmt_num(c6, sizeof(c6),
				       bench_work_median_ms(w, BENCH_RESUME) / pa->back_ms,
				       "%.2fx"));
		if (w->async && w->sync_done) {
			double ready = w->cycles_done >= 2 ? bench_work_median_ms(w, BENCH_READY) :
							     bench_work_first_ms(w, BENCH_READY);
			double floor_ms = b->copy.measured ?
						  (double)w->logical / (b->copy.h2d_gbs * 1e6) :
						  NAN;

			printf("%-28s synchronous resume (one cycle after these, no flag): %.3f ms "
			       "(%.2f GB/s); %s ready %.3f ms is %s of it; %s at the H2D floor: "
			       "%s ms, ready is %s of it\n",
			       "", (double)w->sync_resume_ns / 1e6,
			       (double)w->logical / (double)w->sync_resume_ns,
			       w->cycles_done >= 2 ? "median" : "first", ready,
			       fmt_num(c5, sizeof(c5), ready * 1e6 / (double)w->sync_resume_ns,
				       "%.2fx"),
			       bench_fmt_bytes(b1, sizeof(b1), w->logical),
			       fmt_num(c6, sizeof(c6), floor_ms, "%.3f"),
			       fmt_num(c4, sizeof(c4), ready / floor_ms, "%.2fx"));
			printf("%-28s restore_pending read 1 once the %s was queued in %u of %u "
			       "cycles (0 once it was done: checked)\n",
			       "", w->kernel ? "kernel" : "copy", w->pending_seen, w->cycles_done);
		}
		if (w->note[0])
			printf("%-28s %s\n", "", w->note);
	}
	verify_report(b);
	if (b->work[BENCH_WE].implemented)
		bench_swap_report(b, &b->work[BENCH_WE]);
	if (b->work[BENCH_WG].implemented)
		bench_disk_report(b, &b->work[BENCH_WG]);
	bench_nonret_report(b, &b->work[BENCH_WK]);
	if (b->work[BENCH_WO].implemented)
		bench_frozen_report(b, &b->work[BENCH_WO]);
	for (i = 0; i < BENCH_NWORK; i++)
		if (b->work[i].ran && i != BENCH_WK)
			ran++, reset += b->work[i].hwm_reset;
	if (!ran)
		return;
	printf("\nhost memory per workload (VmHWM %s)\n",
	       reset ? "reset before each workload through /proc/self/clear_refs" :
		       "cannot be reset: see the delta");
	printf("%-28s %6s %8s %13s %13s %13s %13s %13s\n", "workload", "cycles", "fill s",
	       "VmRSS@pause1", "peak VmHWM", "VmHWM delta", "backup@pause1", "pinned@pause1");
	for (i = 0; i < BENCH_NWORK; i++) {
		const struct bench_work *w = &b->work[i];

		if (!w->implemented || !w->selected || !w->ran || !w->cycles_done || i == BENCH_WK)
			continue; /* (k): host bytes in its own table */
		work_name(name, sizeof(name), w);
		printf("%-28s %6u %8s %13s %13s %13s %13s %13s\n", name, w->cycles_done,
		       w->policy == CMS_POLICY_HOST || w->policy == CMS_POLICY_DISK ?
			       fmt_num(c1, sizeof(c1), w->fill_s, "%.2f") :
			       "-",
		       bench_fmt_bytes(c2, sizeof(c2), w->rss_after_pause),
		       w->hwm_reset ? bench_fmt_bytes(c3, sizeof(c3), w->hwm_after) : "-",
		       bench_fmt_bytes(c4, sizeof(c4),
				       w->hwm_after > w->hwm_before ? w->hwm_after - w->hwm_before :
								      0),
		       bench_fmt_bytes(c5, sizeof(c5), w->backup_after_pause),
		       bench_fmt_bytes(c6, sizeof(c6), w->pinned_after_pause));
		if (w->policy == CMS_POLICY_DISK)
			printf("%-28s DISK staging: 2 x %s page-locked per device during each "
			       "pause "
			       "or resume call only (not in pinned@pause1)\n",
			       "", b->sim ? "1.00 MiB" : "64.0 MiB");
	}
	printf("(pinned@pause1: cms_region_info.pinned_bytes, host backups page-locked with "
	       "cuMemHostRegister, summed over the workload's regions)\n");
	if (b->sim)
		printf("(on the simulation, device memory is host memory and counts in VmRSS)\n");
}

/* ---- JSON ------------------------------------------------------------------------- */

static void json_row(FILE *f, const struct bench *b, const struct bench_work *w, bool median)
{
	struct bench_row pr, rr, dr;

	bench_row(b, w, median, BENCH_PAUSE, &pr);
	bench_row(b, w, median, BENCH_RESUME, &rr);
	fputs("{\"pause_ms\": ", f);
	bench_json_num(f, pr.ms);
	fputs(", \"resume_ms\": ", f);
	bench_json_num(f, rr.ms);
	fputs(", \"pause_gbs\": ", f);
	bench_json_num(f, pr.gbs);
	fputs(", \"resume_gbs\": ", f);
	bench_json_num(f, rr.gbs);
	fputs(", \"pause_floor\": ", f);
	bench_json_num(f, pr.floor);
	fputs(", \"resume_floor\": ", f);
	bench_json_num(f, rr.floor);
	fputs(", \"pause_ratio\": ", f);
	bench_json_num(f, pr.ratio);
	fputs(", \"resume_ratio\": ", f);
	bench_json_num(f, rr.ratio);
	fputs(", \"pause_target\": ", f);
	if (pr.spec)
		tool_json_str(f, pr.spec);
	else
		fputs("null", f);
	fprintf(f, ", \"pause_target_met\": %s", pr.met < 0 ? "null" : pr.met ? "true" : "false");
	fputs(", \"resume_target\": ", f);
	if (rr.spec)
		tool_json_str(f, rr.spec);
	else
		fputs("null", f);
	fprintf(f, ", \"resume_target_met\": %s", rr.met < 0 ? "null" : rr.met ? "true" : "false");
	if (w->async) { /* resume_* is the return of the call; ready_* the work after it */
		bench_row(b, w, median, BENCH_READY, &dr);
		fputs(", \"ready_ms\": ", f);
		bench_json_num(f, dr.ms);
		fputs(", \"ready_gbs\": ", f);
		bench_json_num(f, dr.gbs);
		fputs(", \"ready_floor\": ", f);
		bench_json_num(f, dr.floor);
		fputs(", \"ready_ratio\": ", f);
		bench_json_num(f, dr.ratio);
		fputs(", \"ready_to_sync_resume\": ", f);
		bench_json_num(f, w->sync_done ? dr.ms * 1e6 / (double)w->sync_resume_ns : NAN);
	}
	fputs("}", f);
}

static void json_work(FILE *f, const struct bench *b, const struct bench_work *w)
{
	const char *status;
	unsigned int c, k;

	if (!w->implemented)
		status = "not implemented";
	else if (!w->selected)
		status = "not selected";
	else if (w->failed)
		status = "failed";
	else if (!w->ran)
		status = "not run";
	else
		status = "ok";
	fprintf(f, "    {\"id\": \"%c\", \"name\": ", w->id);
	tool_json_str(f, w->what);
	fputs(", \"status\": ", f);
	tool_json_str(f, status);
	fprintf(f, ", \"policy\": \"%s\"",
		w->policy == CMS_POLICY_HOST ? "HOST" :
		w->policy == CMS_POLICY_DISK ? "DISK" :
					       "DISCARD");
	if (!w->ran) {
		fputs("}", f);
		return;
	}
	fprintf(f,
		",\n     \"allocations\": %" PRIu64 ", \"allocation_bytes\": %" PRIu64
		", \"logical_bytes\": %" PRIu64 ", \"physical_bytes\": %" PRIu64
		", \"check_window_bytes\": %" PRIu64 ", \"cycles\": %u, \"truncated\": %s"
		", \"region_flags\": %" PRIu64,
		w->count, w->size, w->logical, w->physical, w->window, w->cycles_done,
		w->truncated ? "true" : "false", w->region_flags);
	fputs(", \"note\": ", f);
	tool_json_str(f, w->note);
	if (verify_base(b, w)) {
		fprintf(f,
			",\n     \"bytes_verified\": %" PRIu64 ", \"verify_ns\": %" PRIu64
			", \"checksum_gbs\": ",
			w->bytes_verified, w->verify_ns);
		bench_json_num(f, verify_gbs(w));
		fprintf(f, ", \"versus\": \"%c\", \"pause_ratio\": ", verify_base(b, w)->id);
		bench_json_num(f, verify_ratio(w, verify_base(b, w), BENCH_PAUSE));
		fputs(", \"resume_ratio\": ", f);
		bench_json_num(f, verify_ratio(w, verify_base(b, w), BENCH_RESUME));
	}
	if (w->id == 'g')
		bench_disk_json(b, w, f);
	if (w->id == 'e') { /* its own per-cycle and row keys; closes the object */
		bench_swap_json(b, w, f);
		return;
	}
	if (w->id == 'k') { /* a row per layout and size; closes the object */
		bench_nonret_json(b, w, f);
		return;
	}
	if (w->id == 'o') { /* its own keys; closes the object */
		bench_frozen_json(b, w, f);
		return;
	}
	fputs(",\n     \"pause_ms\": [", f);
	for (c = 0; c < w->cycles_done; c++) {
		fputs(c ? ", " : "", f);
		bench_json_num(f, (double)w->pause_ns[c] / 1e6);
	}
	fputs("], \"resume_ms\": [", f);
	for (c = 0; c < w->cycles_done; c++) {
		fputs(c ? ", " : "", f);
		bench_json_num(f, (double)w->resume_ns[c] / 1e6);
	}
	fputs("]", f);
	if (w->rss_ns[0]) {
		static const char *const key[3] = { "vmrss_before_pause", "vmrss_after_pause",
						    "vmrss_after_resume" };

		for (k = 0; k < 3; k++) {
			fprintf(f, ", \"%s\": [", key[k]);
			for (c = 0; c < w->cycles_done; c++)
				fprintf(f, "%s%" PRIu64, c ? ", " : "", w->rss_ns[k][c]);
			fputs("]", f);
		}
	}
	if (w->async) {
		fputs(", \"ready_ms\": [", f);
		for (c = 0; c < w->cycles_done; c++) {
			fputs(c ? ", " : "", f);
			bench_json_num(f, (double)w->ready_ns[c] / 1e6);
		}
		fprintf(f,
			"],\n     \"resume_flags\": \"CMS_RESUME_ASYNC\", \"ready_work\": \"%s\", "
			"\"ready_read_bytes\": %" PRIu64
			", \"restore_pending_seen_cycles\": %u, \"sync_cycle\": ",
			w->kernel ? "cms_affine_u32" : "cuMemcpyDtoDAsync", w->probe,
			w->pending_seen);
		if (!w->sync_done) {
			fputs("null", f);
		} else {
			fputs("{\"pause_ms\": ", f);
			bench_json_num(f, (double)w->sync_pause_ns / 1e6);
			fputs(", \"resume_ms\": ", f);
			bench_json_num(f, (double)w->sync_resume_ns / 1e6);
			fputs(", \"resume_gbs\": ", f);
			bench_json_num(f, (double)w->logical / (double)w->sync_resume_ns);
			fputs("}", f);
		}
		fputs(", \"h2d_floor_ms\": ", f);
		bench_json_num(f, b->copy.measured ? (double)w->logical / (b->copy.h2d_gbs * 1e6) :
						     NAN);
	}
	if (w->flags & CMS_REGION_PREPARE)
		bench_prepare_json(w, f);
	fputs(",\n     \"first\": ", f);
	json_row(f, b, w, false);
	fputs(",\n     \"median\": ", f);
	json_row(f, b, w, true);
	fputs(",\n     \"fill_s\": ", f);
	bench_json_num(f, w->policy == CMS_POLICY_HOST ? w->fill_s : NAN);
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

int bench_report_json(struct bench *b)
{
	const struct bench_copy_floor *cf = &b->copy;
	FILE *f = b->json;
	int i, rc = 0, first = 1;

	bench_json_head(b, f);
	fprintf(f,
		",\n  \"device_total_bytes\": %" PRIu64 ", \"granularity\": %" PRIu64
		", \"scale\": %u, \"cycles\": %u, \"gap_ms\": %u, \"verify_full\": %s,"
		" \"coalesce\": %s,\n",
		b->dev_total, b->granularity, b->scale, b->cycles, b->gap_ms,
		b->verify_full ? "true" : "false", b->coalesce ? "true" : "false");
	fputs("  \"floor\": {\n    \"vmm\": [", f);
	for (i = 0; i < BENCH_NVMM; i++) {
		const struct bench_vmm_floor *v = &b->vmm[i];

		if (!v->measured)
			continue;
		fprintf(f,
			"%s\n      {\"for\": \"%s\", \"handles\": %" PRIu64
			", \"handle_bytes\": %" PRIu64 ", \"bytes\": %" PRIu64
			", \"reps\": %u, \"back_ms\": ",
			first ? "" : ",", v->label, v->count, v->size, v->count * v->size, v->reps);
		first = 0;
		bench_json_num(f, v->back_ms);
		fputs(", \"release_ms\": ", f);
		bench_json_num(f, v->release_ms);
		fputs(", \"back_min_ms\": ", f);
		bench_json_num(f, v->back_min_ms);
		fputs(", \"release_min_ms\": ", f);
		bench_json_num(f, v->release_min_ms);
		fputs("}", f);
	}
	fputs("],\n    \"copy\": ", f);
	if (!cf->measured) {
		fputs("null", f);
	} else {
		fprintf(f,
			"{\"bytes\": %" PRIu64 ", \"chunk_bytes\": %" PRIu64
			", \"reps\": %u, \"touch_threads\": %u, \"touch_s\": ",
			cf->bytes, cf->chunk, cf->reps, cf->touch_threads);
		bench_json_num(f, cf->touch_s);
		fputs(", \"register_s\": ", f);
		bench_json_num(f, cf->register_s);
		fputs(", \"d2h_gbs\": ", f);
		bench_json_num(f, cf->d2h_gbs);
		fputs(", \"h2d_gbs\": ", f);
		bench_json_num(f, cf->h2d_gbs);
		fputs(", \"bidir_gbs\": ", f);
		bench_json_num(f, cf->bidir_gbs);
		fputs("}", f);
	}
	fputs("\n  },\n  \"workloads\": [\n", f);
	for (i = 0; i < BENCH_NWORK; i++) {
		json_work(f, b, &b->work[i]);
		fputs(i + 1 < BENCH_NWORK ? ",\n" : "\n", f);
	}
	fputs("  ],\n", f);
	bench_multi_json(b, f);
	fprintf(f, "  \"checks\": %u, \"result\": \"%s\", \"failure\": ", b->checks,
		b->failed ? "fail" : "pass");
	if (b->failed)
		tool_json_str(f, b->failure);
	else
		fputs("null", f);
	fputs("\n}\n", f);
	if (ferror(f))
		rc = -1;
	if (fclose(f))
		rc = -1;
	if (rc && !errno)
		errno = EIO;
	return rc;
}
