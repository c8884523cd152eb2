/* SPDX-License-Identifier: MIT */
/*
 * bench_nonret.c - (k): non-retaining HOST pauses (CMS_REGION_RELEASE_HOST,
 * the drop-in's default) swept over the bytes backed up, 256 MiB .. 16 GiB,
 * in two layouts: a model's PyTorch pool (segments of mixed sizes whose free
 * tails are declared content-free before each pause, as the drop-in does)
 * and 1 GiB allocations. Next to each, in the same run, the floor for the
 * same bytes: what a non-retaining pause cannot avoid, one step after the
 * other (fresh anonymous memory faulted in with MADV_POPULATE_WRITE on the
 * library's thread count, one cuMemHostRegister, the copies of the same live
 * pieces). docs/bench.md.
 */
#include <dlfcn.h>
#include <math.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench.h"
#include "cumemsaver_sim.h"

#define MIB (1ull << 20)
#define GIB (1ull << 30)
#define NR_SLICE (32ull * MIB) /* the library's fault-in task (store/host_policy.c) */
#define NR_MAX_WORKERS 16u     /* the library's default worker cap */
#define NR_FLOOR_REPS 3u
#define NR_STAMP 4096ull /* bytes written and checked at each end of an allocation's live part */

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* A model's pool, at --scale 1: segment bytes and live 64ths (a bf16 block carved from the
 * start of a freed float32 one: half live; k/v blocks in a 20 MiB segment; norms in a 2 MiB
 * one; a segment left all free), repeated until the live bytes reach the row's target. */
static const struct {
	uint64_t size;
	unsigned int live64;
} nr_mix[] = {
	{ 46 * MIB, 32 }, { 46 * MIB, 32 }, { 46 * MIB, 32 }, { 16 * MIB, 32 },
	{ 16 * MIB, 32 }, { 20 * MIB, 26 }, { 2 * MIB, 1 },   { 20 * MIB, 0 },
};

static const uint64_t nr_targets[BENCH_NR_SIZES] = { 256 * MIB, GIB, 4 * GIB, 16 * GIB };

struct nr_alloc {
	uint64_t ptr, size, live;
};

static uint64_t nr_round(uint64_t n, uint64_t to)
{
	return (n + to - 1) / to * to;
}

/* The allocations of a row; *n their count (malloc'ed; NULL when out of memory). */
static struct nr_alloc *nr_layout(const struct bench *b, struct bench_nr_row *row, size_t *n)
{
	uint64_t g = b->granularity, live = 0, target = row->target;
	struct nr_alloc *v = NULL, *nv;
	size_t cap = 0, k = 0;

	*n = 0;
	while (live < target) {
		uint64_t size, l;

		if (row->model) {
			size = nr_round(nr_mix[k % 8].size / b->scale, g);
			l = size * nr_mix[k % 8].live64 / 64 & ~(NR_STAMP - 1);
		} else {
			size = nr_round(target - live < GIB ? target - live : GIB, g);
			l = size;
		}
		if (l > target - live && row->model)
			l = nr_round(target - live, NR_STAMP);
		if (*n == cap) {
			cap = cap ? 2 * cap : 64;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				free(v);
				return NULL;
			}
			v = nv;
		}
		v[(*n)++] = (struct nr_alloc){ 0, size, l };
		live += l;
		row->alloc_bytes += size;
		k++;
	}
	row->count = *n;
	row->live = live;
	return v;
}

static int nr_threads(uint64_t bytes)
{
	cpu_set_t set;
	long cpus = sched_getaffinity(0, sizeof(set), &set) ? sysconf(_SC_NPROCESSORS_ONLN) :
							      CPU_COUNT(&set);
	uint64_t by_size = bytes / NR_SLICE;

	if (bytes < 2 * NR_SLICE || cpus < 2) /* the library's PARALLEL_MIN: no threads */
		return 1;
	if (cpus > NR_MAX_WORKERS)
		cpus = NR_MAX_WORKERS;
	return (int)((uint64_t)cpus < by_size ? (uint64_t)cpus : by_size);
}

struct nr_fault {
	char *base;
	uint64_t bytes;
	atomic_uint_fast64_t next;
};

static void *nr_fault_worker(void *arg)
{
	struct nr_fault *f = arg;
	uint64_t s, off, len;

	while ((s = atomic_fetch_add(&f->next, 1)) * NR_SLICE < f->bytes) {
		off = s * NR_SLICE;
		len = f->bytes - off < NR_SLICE ? f->bytes - off : NR_SLICE;
		if (madvise(f->base + off, len, MADV_POPULATE_WRITE))
			for (uint64_t i = 0; i < len; i += 4096) /* kernels before 5.14 */
				((volatile char *)f->base)[off + i] = 0;
	}
	return NULL;
}

/* Faults bytes at base in on nthreads threads (this one among them), in NR_SLICE tasks. */
static void nr_fault_in(char *base, uint64_t bytes, int nthreads)
{
	struct nr_fault f = { .base = base, .bytes = bytes };
	pthread_t t[NR_MAX_WORKERS];
	int i, started = 0;

	atomic_init(&f.next, 0);
	for (i = 1; i < nthreads; i++)
		if (!pthread_create(&t[started], NULL, nr_fault_worker, &f))
			started++;
	nr_fault_worker(&f);
	for (i = 0; i < started; i++)
		pthread_join(t[i], NULL);
}

static double nr_median3(double *v)
{
	double t;

	for (int i = 0; i < 3; i++)
		for (int j = i + 1; j < 3; j++)
			if (v[j] < v[i])
				t = v[i], v[i] = v[j], v[j] = t;
	return v[1];
}

/* The floor for the row's live bytes: fault in, register, copy the same pieces. */
static int nr_floor(struct bench *b, struct bench_nr_row *row, const struct nr_alloc *v, size_t n)
{
	double pop[NR_FLOOR_REPS], reg[NR_FLOOR_REPS], cp[NR_FLOOR_REPS], tot[NR_FLOOR_REPS];
	uint64_t bytes = 0, off, t0;
	unsigned int rep;
	size_t i;

	for (i = 0; i < n; i++)
		bytes += nr_round(v[i].live, 4096);
	row->floor_threads = (unsigned int)nr_threads(bytes);
	for (rep = 0; rep < NR_FLOOR_REPS; rep++) {
		char *h;

		t0 = bench_now_ns();
		h = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (h == MAP_FAILED) {
			bench_fail(b, "(k) floor: mmap of %" PRIu64 " bytes failed", bytes);
			return -1;
		}
		madvise(h, bytes, MADV_HUGEPAGE);
		nr_fault_in(h, bytes, (int)row->floor_threads);
		pop[rep] = (double)(bench_now_ns() - t0) / 1e6;
		t0 = bench_now_ns();
		BENCH_CU(b, err_unmap, cuMemHostRegister, h, bytes, CU_MEMHOSTREGISTER_PORTABLE);
		reg[rep] = (double)(bench_now_ns() - t0) / 1e6;
		t0 = bench_now_ns();
		for (i = 0, off = 0; i < n; off += nr_round(v[i].live, 4096), i++)
			if (v[i].live)
				BENCH_CU(b, err_unregister, cuMemcpyDtoHAsync, h + off, v[i].ptr,
					 v[i].live, NULL);
		BENCH_CU(b, err_unregister, cuStreamSynchronize, NULL);
		cp[rep] = (double)(bench_now_ns() - t0) / 1e6;
		tot[rep] = pop[rep] + reg[rep] + cp[rep];
		BENCH_CU(b, err_unmap, cuMemHostUnregister, h);
		munmap(h, bytes);
		continue;
	err_unregister:
		b->drv.cuMemHostUnregister(h);
	err_unmap:
		munmap(h, bytes);
		return -1;
	}
	row->floor_populate_ms = nr_median3(pop);
	row->floor_register_ms = nr_median3(reg);
	row->floor_copy_ms = nr_median3(cp);
	row->floor_ms = nr_median3(tot);
	return 0;
}

/* Writes (check false) or checks the stamps at both ends of each live part for cycle c. */
static int nr_stamps(struct bench *b, const struct nr_alloc *v, size_t n, unsigned int c,
		     bool check)
{
	uint64_t *s = b->stage, words = NR_STAMP / 8, k;
	size_t i;
	int end;

	for (i = 0; i < n; i++)
		for (end = 0; end < 2 && v[i].live >= NR_STAMP; end++) {
			CUdeviceptr at = v[i].ptr + (end ? v[i].live - NR_STAMP : 0);

			if (check) {
				BENCH_CU(b, err, cuMemcpyDtoH, s, at, NR_STAMP);
				for (k = 0; k < words; k++)
					if (s[k] !=
					    bench_pattern_word(k * 8,
							       i * 4 + (uint64_t)end + c * 65536u))
						break;
				if (!bench_check(
					    b, k == words,
					    "(k) allocation %zu: its live %s holds the content "
					    "of cycle %u after the resume",
					    i, end ? "end" : "start", c + 1))
					return -1;
				continue;
			}
			bench_pattern_fill(s, NR_STAMP, 0, i * 4 + (uint64_t)end + c * 65536u);
			BENCH_CU(b, err, cuMemcpyHtoD, at, s, NR_STAMP);
		}
	return 0;
err:
	return -1;
}

/* Declares each allocation's free tail content-free (model rows), as the drop-in's pause. */
static int nr_declare(struct bench *b, cms_context *ctx, const struct nr_alloc *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].live < v[i].size)
			BENCH_CMS(b, err, cms_range_discard, ctx, v[i].ptr + v[i].live,
				  v[i].size - v[i].live);
	return 0;
err:
	return -1;
}

/* Simulation only (else zeros): its counters now. */
static cmssim_counters nr_sim_counts(const struct bench *b)
{
	int (*get)(cmssim_counters *) =
		b->sim ? (int (*)(cmssim_counters *))dlsym(b->drv.dl, "cmssim_get_counters") : NULL;
	cmssim_counters k = CMSSIM_COUNTERS_INIT;

	if (!get || get(&k))
		memset(&k, 0, sizeof(k));
	return k;
}

static int nr_row_run(struct bench *b, struct bench_work *w, struct bench_nr_row *row)
{
	cms_context_options copts = CMS_CONTEXT_OPTIONS_INIT;
	cms_region_options ropts = CMS_REGION_OPTIONS_INIT;
	cms_region_info info = { .struct_size = sizeof(info) };
	uint64_t *pause_ns = NULL, t0;
	cmssim_counters k0, k1;
	cms_context *ctx = NULL;
	cms_region *region = NULL;
	struct nr_alloc *v;
	size_t n = 0, i, fr = 0, tot = 0;
	unsigned int c;
	char b1[32], b2[32];
	int rc = -1;

	v = nr_layout(b, row, &n);
	pause_ns = calloc(b->cycles, sizeof(*pause_ns));
	if (!v || !pause_ns) {
		bench_fail(b, "(k): out of host memory");
		goto out;
	}
	BENCH_CU(b, out, cuMemGetInfo, &fr, &tot);
	if (row->alloc_bytes > fr || (b->sim && 2 * row->alloc_bytes > bench_mem_available())) {
		snprintf(row->skipped, sizeof(row->skipped), "skipped: needs %s of device memory",
			 bench_fmt_bytes(b1, sizeof(b1), row->alloc_bytes));
		printf("  %s %s: %s\n", row->model ? "model" : "1 GiB",
		       bench_fmt_bytes(b2, sizeof(b2), row->target), row->skipped);
		rc = 0;
		goto out;
	}
	copts.driver_path = b->drv_path;
	BENCH_CMS(b, out, cms_context_create, &copts, &ctx);
	ropts.device = BENCH_DEVICE;
	ropts.policy = CMS_POLICY_HOST;
	ropts.flags = w->flags;
	BENCH_CMS(b, out, cms_region_create, ctx, "bench_k", &ropts, &region);
	for (i = 0; i < n; i++)
		BENCH_CMS(b, out, cms_alloc, region, v[i].size, &v[i].ptr);
	if (nr_floor(b, row, v, n))
		goto out;
	for (c = 0; c < b->cycles; c++) {
		if (nr_stamps(b, v, n, c, false) || (row->model && nr_declare(b, ctx, v, n)))
			goto out;
		k0 = nr_sim_counts(b);
		t0 = bench_now_ns();
		BENCH_CMS(b, out, cms_region_pause, region, NULL, NULL);
		pause_ns[c] = bench_now_ns() - t0;
		if (!c) {
			k1 = nr_sim_counts(b);
			BENCH_CMS(b, out, cms_region_info_get, region, &info);
			row->host_bytes = info.host_bytes;
			row->pinned_bytes = info.pinned_bytes;
			row->sim_registrations = k1.host_registrations;
			row->sim_buffers = k1.host_buffers;
			row->sim_calls = k1.calls - k0.calls;
		}
		BENCH_CMS(b, out, cms_region_resume, region, NULL, NULL);
		if (nr_stamps(b, v, n, c, true))
			goto out;
		row->cycles_done = c + 1;
	}
	row->first_ms = (double)pause_ns[0] / 1e6;
	row->median_ms =
		bench_median_ns(pause_ns + (b->cycles > 1), b->cycles - (b->cycles > 1)) / 1e6;
	printf("  %-5s %9s live in %5zu allocations (%9s): pause first %9.3f ms, median %9.3f ms "
	       "(%6.2f GB/s); floor %9.3f ms = populate %.3f (%u threads) + register %.3f + copy "
	       "%.3f; median %.2fx the floor; host %.3f GB made (%.2fx the live bytes)\n",
	       row->model ? "model" : "1 GiB", bench_fmt_bytes(b1, sizeof(b1), row->target), n,
	       bench_fmt_bytes(b2, sizeof(b2), row->alloc_bytes), row->first_ms, row->median_ms,
	       (double)row->live / (row->median_ms * 1e6), row->floor_ms, row->floor_populate_ms,
	       row->floor_threads, row->floor_register_ms, row->floor_copy_ms,
	       row->median_ms / row->floor_ms, (double)row->host_bytes / 1e9,
	       (double)row->host_bytes / (double)row->live);
	rc = 0;
out:
	if (ctx) {
		cms_status st = cms_context_destroy(ctx); /* frees the allocations and region */

		if (st) {
			bench_cms_fail(b, st, "cms_context_destroy");
			rc = -1;
		}
	}
	free(pause_ns);
	free(v);
	return rc;
}

int bench_nonret_run(struct bench *b, struct bench_work *w)
{
	char b1[32];
	int i, rc = 0;

	w->ran = true;
	printf("\n(%c) %s: each row its own context and region; pause timed after the tails' "
	       "declarations (model rows)\n",
	       w->id, w->what);
	for (i = 0; i < 2 * BENCH_NR_SIZES; i++) {
		struct bench_nr_row *row = &b->nr[i];

		memset(row, 0, sizeof(*row));
		row->model = i < BENCH_NR_SIZES;
		row->target = nr_targets[i % BENCH_NR_SIZES] / b->scale;
		if (row->target < b->granularity)
			row->target = b->granularity;
		snprintf(b->step, sizeof(b->step), "(k) %s %s", row->model ? "model" : "1 GiB",
			 bench_fmt_bytes(b1, sizeof(b1), row->target));
		if (nr_row_run(b, w, row))
			rc = -1;
		if (row->cycles_done)
			w->cycles_done = row->cycles_done;
	}
	w->failed = rc != 0;
	return rc;
}

void bench_nonret_report(const struct bench *b, const struct bench_work *w)
{
	char b1[32];
	int i;

	if (!w->selected || !w->ran)
		return;
	printf("\n(k) non-retaining HOST pause (RELEASE_HOST) against the floor for the same live "
	       "bytes (populate + register + copy, one after the other)%s\n",
	       !b->sim && b->scale == 1 ? "; target: median <= 1.20x" :
					  " (not judged: simulation or --scale)");
	printf("%-6s %9s %6s %10s %10s %8s %10s %7s %9s %9s\n", "layout", "live", "allocs",
	       "first ms", "median ms", "GB/s", "floor ms", "ratio", "host/live", "target");
	for (i = 0; i < 2 * BENCH_NR_SIZES; i++) {
		const struct bench_nr_row *r = &b->nr[i];
		double ratio = r->median_ms / r->floor_ms;

		if (!r->cycles_done) {
			printf("%-6s %9s %s\n", r->model ? "model" : "1g",
			       bench_fmt_bytes(b1, sizeof(b1), r->target),
			       r->skipped[0] ? r->skipped : "failed");
			continue;
		}
		printf("%-6s %9s %6" PRIu64 " %10.3f %10.3f %8.2f %10.3f %6.2fx %8.2fx %9s\n",
		       r->model ? "model" : "1g", bench_fmt_bytes(b1, sizeof(b1), r->target),
		       r->count, r->first_ms, r->median_ms, (double)r->live / (r->median_ms * 1e6),
		       r->floor_ms, ratio, (double)r->host_bytes / (double)r->live,
		       b->sim || b->scale != 1 ? "-" :
		       ratio <= 1.2	       ? "yes" :
						 "NO");
	}
}

void bench_nonret_json(const struct bench *b, const struct bench_work *w, FILE *f)
{
	int i;

	(void)w;
	fputs(",\n     \"rows\": [", f);
	for (i = 0; i < 2 * BENCH_NR_SIZES; i++) {
		const struct bench_nr_row *r = &b->nr[i];

		fprintf(f,
			"%s\n      {\"layout\": \"%s\", \"live_bytes\": %" PRIu64
			", \"target_bytes\": %" PRIu64 ", \"allocations\": %" PRIu64
			", \"allocation_bytes\": %" PRIu64 ", \"host_bytes\": %" PRIu64
			", \"pinned_bytes\": %" PRIu64 ", \"sim_host_registrations\": %" PRIu64
			", \"sim_host_buffers\": %" PRIu64 ", \"sim_pause_driver_calls\": %" PRIu64
			", \"cycles\": %u, \"floor_threads\": %u",
			i ? "," : "", r->model ? "model" : "1g", r->live, r->target, r->count,
			r->alloc_bytes, r->host_bytes, r->pinned_bytes, r->sim_registrations,
			r->sim_buffers, r->sim_calls, r->cycles_done, r->floor_threads);
		fputs(", \"first_pause_ms\": ", f);
		bench_json_num(f, r->cycles_done ? r->first_ms : NAN);
		fputs(", \"median_pause_ms\": ", f);
		bench_json_num(f, r->cycles_done ? r->median_ms : NAN);
		fputs(", \"floor_ms\": ", f);
		bench_json_num(f, r->cycles_done ? r->floor_ms : NAN);
		fputs(", \"floor_populate_ms\": ", f);
		bench_json_num(f, r->cycles_done ? r->floor_populate_ms : NAN);
		fputs(", \"floor_register_ms\": ", f);
		bench_json_num(f, r->cycles_done ? r->floor_register_ms : NAN);
		fputs(", \"floor_copy_ms\": ", f);
		bench_json_num(f, r->cycles_done ? r->floor_copy_ms : NAN);
		fputs(", \"median_over_floor\": ", f);
		bench_json_num(f, r->cycles_done ? r->median_ms / r->floor_ms : NAN);
		fputs(", \"skipped\": ", f);
		tool_json_str(f, r->skipped);
		fputs("}", f);
	}
	fputs("]}", f);
}
