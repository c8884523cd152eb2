/* SPDX-License-Identifier: MIT */
/*
 * bench_prepare.c - workload (l)'s preparation (CMS_REGION_PREPARE): after
 * the allocations, the library's background thread makes the host backups
 * (mmap, faulting in, cuMemHostRegister) while the application runs on. The
 * tool measures how long that takes (from the first cms_alloc until every
 * backup is page-locked: cms_region_info) and what it costs a workload on
 * the GPU meanwhile: the throughput of a loop of device-to-device copies
 * (cuMemcpyDtoDAsync of 256 MiB, scaled, between two allocations of a
 * DISCARD region) while the preparation runs, against the same loop alone
 * just before. The first pause then comes after the preparation; the table
 * judges it against the copy floor (bench_report.c).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "bench.h"

#define LOAD_BYTES (256ull << 20)      /* per copy at --scale 1 */
#define LOAD_IDLE_NS 500000000ull      /* the loop alone: 0.5 s */
#define PREPARE_MAX_NS 300000000000ull /* give up after 300 s */

/* One copy, waited for; bytes moved (read + written) on success, 0 on failure. */
static uint64_t load_step(struct bench *b, const struct bench_load *l)
{
	BENCH_CU(b, err, cuMemcpyDtoDAsync, l->dst, l->src, (size_t)l->bytes, l->stream);
	BENCH_CU(b, err, cuStreamSynchronize, l->stream);
	return 2 * l->bytes;
err:
	return 0;
}

int bench_prepare_before(struct bench *b, struct bench_work *w, cms_context *ctx,
			 struct bench_load *l)
{
	cms_region_options ro = CMS_REGION_OPTIONS_INIT;
	cms_region *scratch;
	uint64_t t0, t, moved = 0, step;
	char tag[32];

	l->bytes = LOAD_BYTES / b->scale;
	if (l->bytes < b->granularity)
		l->bytes = b->granularity;
	ro.device = BENCH_DEVICE;
	ro.policy = CMS_POLICY_DISCARD;
	snprintf(tag, sizeof(tag), "bench_%c_load", w->id);
	BENCH_CMS(b, err, cms_region_create, ctx, tag, &ro, &scratch);
	BENCH_CMS(b, err, cms_alloc, scratch, l->bytes, &l->src);
	BENCH_CMS(b, err, cms_alloc, scratch, l->bytes, &l->dst);
	BENCH_CU(b, err, cuStreamCreate, &l->stream, CU_STREAM_NON_BLOCKING);
	t0 = bench_now_ns();
	do {
		step = load_step(b, l);
		if (!step)
			goto err;
		moved += step;
		t = bench_now_ns();
	} while (t - t0 < LOAD_IDLE_NS);
	w->load_idle_gbs = (double)moved / (double)(t - t0);
	return 0;
err:
	return -1;
}

int bench_prepare_wait(struct bench *b, struct bench_work *w, cms_region *region,
		       const struct bench_load *l, uint64_t t0)
{
	cms_region_info info = { .struct_size = sizeof(info) };
	cms_region_stats st = { .struct_size = sizeof(st) };
	uint64_t t1 = bench_now_ns(), t, moved = 0, step;
	char b1[32];
	int rc = -1;

	for (;;) {
		BENCH_CMS(b, out, cms_region_info_get, region, &info);
		t = bench_now_ns();
		if (info.host_bytes >= info.logical_bytes && info.pinned_bytes == info.host_bytes)
			break;
		if (t - t0 > PREPARE_MAX_NS) {
			bench_fail(b,
				   "(%c) the backups were not prepared after %.0f s: %" PRIu64
				   " of %" PRIu64 " bytes held, %" PRIu64 " page-locked",
				   w->id, (double)PREPARE_MAX_NS / 1e9, info.host_bytes,
				   info.logical_bytes, info.pinned_bytes);
			goto out;
		}
		step = load_step(b, l);
		if (!step)
			goto out;
		moved += step;
	}
	w->prepare_s = (double)(t - t0) / 1e9;
	w->load_busy_gbs = t > t1 && moved ? (double)moved / (double)(t - t1) : NAN;
	BENCH_CMS(b, out, cms_region_stats_get, region, &st);
	w->prepare_ns = st.prepare_ns;
	w->bytes_prepared = st.bytes_prepared;
	printf("  prepared %s of host backups in %.2f s after the first cms_alloc (the "
	       "background thread busy %.2f s); a device copy loop ran at %.1f GB/s meanwhile, "
	       "%.1f GB/s alone (%.2fx)\n",
	       bench_fmt_bytes(b1, sizeof(b1), w->bytes_prepared), w->prepare_s,
	       (double)w->prepare_ns / 1e9, w->load_busy_gbs, w->load_idle_gbs,
	       w->load_busy_gbs / w->load_idle_gbs);
	rc = 0;
out:
	return rc;
}

void bench_prepare_end(struct bench *b, struct bench_load *l)
{
	if (l->stream)
		b->drv.cuStreamDestroy(l->stream);
	l->stream = NULL;
}

void bench_prepare_json(const struct bench_work *w, FILE *f)
{
	fputs(", \"prepare\": {\"prepare_s\": ", f);
	bench_json_num(f, w->prepare_s);
	fprintf(f, ", \"prepare_thread_ns\": %" PRIu64 ", \"bytes_prepared\": %" PRIu64,
		w->prepare_ns, w->bytes_prepared);
	fputs(", \"load\": \"cuMemcpyDtoDAsync loop\", \"load_alone_gbs\": ", f);
	bench_json_num(f, w->load_idle_gbs);
	fputs(", \"load_while_preparing_gbs\": ", f);
	bench_json_num(f, w->load_busy_gbs);
	fputs("}", f);
}
