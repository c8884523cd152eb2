/* SPDX-License-Identifier: MIT */
/*
 * cms-exp-copy.c - an experiment, not a benchmark: why a HOST-policy resume of
 * 16 x 1 GiB runs at 0.90x of the pinned H2D copy floor while its pause runs
 * at 0.97x of D2H (lab/results/2026-11-30-h200-session2.txt).
 *
 * The engine (src/resume.c, src/host.c) backs each allocation in order
 * (cuMemCreate + cuMemMap + cuMemSetAccess) and enqueues its whole copy from
 * a cuMemHostRegister'ed pageable buffer on stream i % 4 of 4 non-blocking
 * streams, then synchronizes. This tool times that and variations of it with
 * raw driver calls (cms-bench's driver table and helpers, bench_common.c):
 *
 *   A  engine-like: per 1 GiB handle, back it, enqueue its copy (i % 4)
 *   B  back every handle first, then the copies (1 GiB, i % 4)
 *   C  as B, copies in 256 MiB pieces round-robin over 4 streams
 *   D  as A with 2 GiB handles, 1 GiB copies
 *   E  as B on 1 stream (E1) and on 2 streams (E2)
 *   F  copies only, into memory mapped before the timing: 1 GiB (F1) and
 *      256 MiB pieces (F2) on 4 streams: the H2D ceiling
 *   G  D2H of 1 GiB copies on 4 streams, then unmap + release all (pause)
 *   H  as G in 256 MiB pieces
 *   I  unmap + release of every handle, then at once (I0) or after 200 ms
 *      (I1) back them all again: is backing slow right after a release?
 *   J  2048 x 8 MiB in one reservation: per-mapping cuMemSetAccess (J1),
 *      one cuMemSetAccess over all mappings (J2; and one cuMemUnmap over all
 *      of them on release), 8 x 2 GiB handles (J3); return codes recorded
 *   K  (extra) A with the host side as src/host.c lays it out: one mmap'ed,
 *      faulted and registered buffer per 1 GiB instead of one for all
 *   L  does a copy into memory backed just before run slower because the driver
 *      scrubs physical memory on the copy engines, at cuMemCreate or after
 *      cuMemRelease? Each repetition starts from the handles mapped and
 *      written by the one before (as after a resume); only the copies (1 GiB,
 *      4 streams) are timed, back is outside that time:
 *      L0 release all, at once back all, at once the copies
 *      L1 release all, 500 ms later back all, at once the copies
 *      L2 release all, at once back all, 500 ms later the copies
 *      L3 release all, at once back all, cuCtxSynchronize, the copies
 *      L4 back a second set in a second reservation while the first stays
 *         mapped (no release), at once the copies into it; then release the
 *         first set (not timed)
 *      with cuMemGetInfo's free bytes just before the copies (free in the
 *      table, rep_free_bytes in the JSON; L3's wait: rep_sync_ms)
 *
 * All H2D variants copy from one host buffer (mmap, MADV_HUGEPAGE, faulted in
 * with a pattern on 16 threads, cuMemHostRegister PORTABLE once, as the
 * engine registers). Each time is the median of 5 repetitions after a
 * warm-up, from before the first driver call to after the last
 * synchronize. Before each repetition, 4 KiB samples at the start, middle
 * and end of every handle get a fresh pattern in the host buffer; after it
 * they are read back with cuMemcpyDtoH and compared (A-F, K, L).
 *
 * Exits 0 when every call and check passed, 1 otherwise, 2 on bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "bench.h"
#include "tool_common.h"

#define EXP_TOOL "cms-exp-copy"
#define EXP_REPS 5u
#define EXP_STREAMS 4u
#define EXP_SAMPLE 4096ull
#define EXP_SLEEP_MS 200
#define EXP_L_SLEEP_MS 500 /* L1, L2 (their what says 500 ms) */
#define EXP_DEFAULT_GIB 16u
#define EXP_MAX_GIB 1024u
#define EXP_UNIT (1ull << 30)  /* the engine's allocation and copy size */
#define EXP_PIECES 4u	       /* C, F2, H: a unit in 4 pieces (256 MiB) */
#define EXP_SMALL (8ull << 20) /* J: bench workload (b)'s allocation size */
#define EXP_MAX_ROWS 40
#define EXP_THREADS 16u
#define EXP_SHOWN 8u /* mismatches printed */
#define EXP_HUGE (2ull << 20)

enum exp_dir { EXP_VMM, EXP_H2D, EXP_D2H };

struct exp_row {
	char id[12];
	char what[120];
	enum exp_dir dir;
	uint64_t bytes; /* copied (H2D, D2H) or backed / released (VMM) */
	uint64_t handles;
	uint64_t handle_bytes;
	unsigned int reps;
	uint64_t total_ns[EXP_REPS];
	uint64_t back_ns[EXP_REPS]; /* time in cuMemCreate + cuMemMap + cuMemSetAccess */
	uint64_t enq_ns[EXP_REPS];  /* from the start until the last copy was enqueued */
	uint64_t free_b[EXP_REPS];  /* L: cuMemGetInfo's free bytes just before the copies */
	uint64_t sync_ns[EXP_REPS]; /* L3: time in the cuCtxSynchronize after the back */
	bool has_back;
	bool has_enq;
	bool has_free;
	bool has_sync;
	bool has_result;
	CUresult result; /* the driver call the row is about (J2) */
	char result_name[48];
	char note[200];
};

/* An H2D variant: A-E, K. */
struct exp_h2d {
	const char *id;
	const char *what;
	unsigned int units;   /* per handle: 1 (1 GiB) or 2 */
	bool interleave;      /* back a handle, enqueue its copies; else back all first */
	bool pieces;	      /* 256 MiB copies (else 1 GiB) */
	unsigned int streams; /* round-robin over the first streams */
	bool separate;	      /* host buffers as src/host.c makes them */
};

/* An L variant: what comes between the written set and the timed copies. */
struct exp_after {
	const char *id;
	const char *what;
	unsigned int sleep_before_ms; /* between the release and the back */
	unsigned int sleep_after_ms;  /* between the back and the copies */
	bool sync;		      /* cuCtxSynchronize after the back */
	bool keep_old;		      /* back the other set; release this one after the copies */
};

struct exp {
	struct bench b;
	unsigned int gib;
	uint64_t unit;	/* bytes per unit: 1 GiB / scale, a multiple of the granularity */
	uint64_t nunit; /* units, even */
	uint64_t total; /* nunit * unit */
	uint64_t piece; /* unit / EXP_PIECES */
	uint64_t jsize; /* J: 8 MiB / scale, a multiple of the granularity */
	uint64_t jcount;

	/* host: one buffer of total bytes, 2 MiB aligned, registered once */
	char *host_map;
	uint64_t host_map_len;
	char *host;
	bool host_reg;
	double touch_s, register_s;
	unsigned int touch_threads;
	uint64_t thp_bytes;
	/* K: a buffer per unit (mmap + MADV_HUGEPAGE + fault-in + register, as src/host.c) */
	char **sep;
	bool *sep_reg;
	bool use_sep;
	double sep_touch_s, sep_register_s;
	uint64_t sep_thp_bytes;

	/* device: one reservation of total bytes; the handle set at base + i * hsize */
	CUmemAllocationProp prop;
	CUmemAccessDesc acc;
	CUdeviceptr base;
	CUmemGenericAllocationHandle *h;
	unsigned char *st;
	uint64_t hmax, hn, hsize;
	/* L4: a second reservation of total bytes and its set (hmax entries), exp_swap'ed */
	CUdeviceptr alt_base;
	CUmemGenericAllocationHandle *alt_h;
	unsigned char *alt_st;
	CUstream s[EXP_STREAMS];
	unsigned char *stage; /* EXP_SAMPLE bytes */

	uint64_t salt;
	uint64_t samples;
	uint64_t mismatches;
	CUresult span_access, span_unmap;
	bool span_access_tried, span_unmap_tried;
	char span_access_name[48], span_unmap_name[48]; /* kept: the driver is closed first */
	char access_check[160];
	struct exp_row rows[EXP_MAX_ROWS];
	unsigned int nrows;
};

static uint64_t exp_thp(void)
{
	return bench_proc_field("/proc/self/smaps_rollup", "AnonHugePages");
}

static struct exp_row *exp_row(struct exp *x, const char *id, enum exp_dir dir, uint64_t handles,
			       uint64_t handle_bytes, const char *what)
{
	struct exp_row *r;

	if (x->nrows == EXP_MAX_ROWS)
		return NULL;
	r = &x->rows[x->nrows++];
	memset(r, 0, sizeof(*r));
	snprintf(r->id, sizeof(r->id), "%s", id);
	snprintf(r->what, sizeof(r->what), "%s", what);
	r->dir = dir;
	r->handles = handles;
	r->handle_bytes = handle_bytes;
	r->bytes = handles * handle_bytes;
	return r;
}

/* Repetition rep (0: the warm-up, not kept). */
static void exp_put(struct exp_row *r, unsigned int rep, uint64_t total, uint64_t back,
		    uint64_t enq)
{
	if (!rep || !r)
		return;
	r->total_ns[rep - 1] = total;
	r->back_ns[rep - 1] = back;
	r->enq_ns[rep - 1] = enq;
	r->reps = rep;
}

/* L: the free bytes before repetition rep's copies and its cuCtxSynchronize time. */
static void exp_put_after(struct exp_row *r, unsigned int rep, uint64_t free_b, uint64_t sync)
{
	if (!rep || !r)
		return;
	r->free_b[rep - 1] = free_b;
	r->sync_ns[rep - 1] = sync;
}

static double exp_ms(const uint64_t *v, unsigned int n)
{
	return n ? bench_median_ns(v, n) / 1e6 : NAN;
}

static uint64_t exp_min(const uint64_t *v, unsigned int n)
{
	uint64_t m = UINT64_MAX;
	unsigned int i;

	for (i = 0; i < n; i++)
		if (v[i] < m)
			m = v[i];
	return m;
}

static uint64_t exp_max(const uint64_t *v, unsigned int n)
{
	uint64_t m = 0;
	unsigned int i;

	for (i = 0; i < n; i++)
		if (v[i] > m)
			m = v[i];
	return m;
}

static double exp_min_ms(const uint64_t *v, unsigned int n)
{
	return n ? (double)exp_min(v, n) / 1e6 : NAN;
}

static double exp_gbs(const struct exp_row *r)
{
	double ms = exp_ms(r->total_ns, r->reps);

	return r->dir == EXP_VMM || !(ms > 0) ? NAN : (double)r->bytes / (ms * 1e6);
}

/* "16 x 1.00 GiB" into buf (32 bytes at least). */
static const char *exp_shape(char *buf, size_t len, const struct exp_row *r)
{
	char b1[32];

	snprintf(buf, len, "%" PRIu64 " x %s", r->handles,
		 bench_fmt_bytes(b1, sizeof(b1), r->handle_bytes));
	return buf;
}

static void exp_line(const struct exp_row *r)
{
	char b1[48];

	printf("  %-8s %-16s %-52s %10.3f ms", r->id, exp_shape(b1, sizeof(b1), r), r->what,
	       exp_ms(r->total_ns, r->reps));
	if (r->dir != EXP_VMM)
		printf(" %7.2f GB/s", exp_gbs(r));
	if (r->has_back)
		printf(", back %.3f ms", exp_ms(r->back_ns, r->reps));
	if (r->has_enq)
		printf(", enqueued %.3f ms", exp_ms(r->enq_ns, r->reps));
	if (r->note[0])
		printf(" (%s)", r->note);
	printf("\n");
}

/* ---- device memory: the handle set ------------------------------------------------ */

static void exp_set(struct exp *x, uint64_t n, uint64_t size)
{
	x->hn = n;
	x->hsize = size;
}

static int exp_back_one(struct exp *x, uint64_t i)
{
	struct bench *b = &x->b;
	CUdeviceptr p = x->base + i * x->hsize;

	BENCH_CU(b, err, cuMemCreate, &x->h[i], x->hsize, &x->prop, 0);
	x->st[i] = BENCH_H_CREATED;
	BENCH_CU(b, err, cuMemMap, p, x->hsize, 0, x->h[i], 0);
	x->st[i] = BENCH_H_MAPPED;
	BENCH_CU(b, err, cuMemSetAccess, p, x->hsize, &x->acc, 1);
	return 0;
err:
	return -1;
}

static int exp_back_all(struct exp *x, uint64_t n, uint64_t size)
{
	uint64_t i;

	exp_set(x, n, size);
	for (i = 0; i < n; i++)
		if (exp_back_one(x, i))
			return -1;
	return 0;
}

/* Releases the set: per handle, cuMemUnmap of its mapping (if mapped) and cuMemRelease. */
static int exp_release_all(struct exp *x)
{
	struct bench *b = &x->b;
	uint64_t i;

	for (i = 0; i < x->hn; i++) {
		if (x->st[i] == BENCH_H_MAPPED) {
			BENCH_CU(b, err, cuMemUnmap, x->base + i * x->hsize, x->hsize);
			x->st[i] = BENCH_H_CREATED;
		}
		if (x->st[i] == BENCH_H_CREATED) {
			BENCH_CU(b, err, cuMemRelease, x->h[i]);
			x->st[i] = BENCH_H_NONE;
		}
	}
	return 0;
err:
	return -1;
}

/* ---- copies and content --------------------------------------------------------- */

/* Where the host copy of device offset off is (copies never cross a unit). */
static char *exp_host_at(const struct exp *x, uint64_t off)
{
	if (x->use_sep)
		return x->sep[off / x->unit] + off % x->unit;
	return x->host + off;
}

/* Enqueues [off, off + len) of the reservation in pieces of piece bytes (dividing a unit),
 * piece k on stream k % streams, k counting on from *k. */
static int exp_copy(struct exp *x, enum exp_dir dir, uint64_t off, uint64_t len, uint64_t piece,
		    unsigned int streams, unsigned int *k)
{
	struct bench *b = &x->b;
	uint64_t o;

	for (o = off; o < off + len; o += piece) {
		CUstream s = x->s[(*k)++ % streams];

		if (dir == EXP_H2D)
			BENCH_CU(b, err, cuMemcpyHtoDAsync, x->base + o, exp_host_at(x, o), piece,
				 s);
		else
			BENCH_CU(b, err, cuMemcpyDtoHAsync, exp_host_at(x, o), x->base + o, piece,
				 s);
	}
	return 0;
err:
	return -1;
}

static int exp_sync(struct exp *x, unsigned int streams)
{
	struct bench *b = &x->b;
	unsigned int i;

	for (i = 0; i < streams; i++)
		BENCH_CU(b, err, cuStreamSynchronize, x->s[i]);
	return 0;
err:
	return -1;
}

/* Sample j (0..2) of handle i: its start, middle and last EXP_SAMPLE bytes. */
static uint64_t exp_sample_off(const struct exp *x, uint64_t i, unsigned int j)
{
	uint64_t o = i * x->hsize;

	if (j == 1)
		return o + x->hsize / 2;
	return j == 2 ? o + x->hsize - EXP_SAMPLE : o;
}

/* New content for the samples of the set in the host buffer (before an H2D repetition). */
static void exp_stamp(struct exp *x)
{
	uint64_t i, o;
	unsigned int j;

	x->salt++;
	for (i = 0; i < x->hn; i++)
		for (j = 0; j < 3; j++) {
			o = exp_sample_off(x, i, j);
			bench_pattern_fill(exp_host_at(x, o), EXP_SAMPLE, o, x->salt);
		}
}

/* Reads the samples back (cuMemcpyDtoH) and compares them with the host buffer. */
static int exp_check(struct exp *x, const char *id, unsigned int rep)
{
	struct bench *b = &x->b;
	uint64_t i, o;
	unsigned int j;

	for (i = 0; i < x->hn; i++)
		for (j = 0; j < 3; j++) {
			o = exp_sample_off(x, i, j);
			BENCH_CU(b, err, cuMemcpyDtoH, x->stage, x->base + o, EXP_SAMPLE);
			x->samples++;
			if (!memcmp(x->stage, exp_host_at(x, o), EXP_SAMPLE))
				continue;
			if (x->mismatches++ < EXP_SHOWN)
				bench_fail(
					b,
					"%s repetition %u: MISMATCH in the 4 KiB at offset %" PRIu64
					" (handle %" PRIu64 ")",
					id, rep, o, i);
		}
	return 0;
err:
	return -1;
}

/* ---- the variants ----------------------------------------------------------------- */

/* A-E, K: back the handles and copy the host buffer into them; check; release. */
static int exp_run_h2d(struct exp *x, const struct exp_h2d *v)
{
	uint64_t n = x->nunit / v->units, size = x->unit * v->units, piece, i, t0, ta, vmm, tb;
	struct exp_row *r = exp_row(x, v->id, EXP_H2D, n, size, v->what);
	unsigned int rep, k;

	snprintf(x->b.step, sizeof(x->b.step), "variant %s", v->id);
	if (!r)
		return -1;
	r->has_back = true;
	r->has_enq = true;
	piece = v->pieces ? x->piece : x->unit;
	x->use_sep = v->separate;
	for (rep = 0; rep <= EXP_REPS; rep++) {
		exp_set(x, n, size);
		exp_stamp(x);
		k = 0;
		vmm = 0;
		t0 = bench_now_ns();
		if (v->interleave) {
			for (i = 0; i < n; i++) {
				ta = bench_now_ns();
				if (exp_back_one(x, i))
					return -1;
				vmm += bench_now_ns() - ta;
				if (exp_copy(x, EXP_H2D, i * size, size, piece, v->streams, &k))
					return -1;
			}
		} else {
			for (i = 0; i < n; i++)
				if (exp_back_one(x, i))
					return -1;
			vmm = bench_now_ns() - t0;
			if (exp_copy(x, EXP_H2D, 0, n * size, piece, v->streams, &k))
				return -1;
		}
		tb = bench_now_ns() - t0;
		if (exp_sync(x, v->streams))
			return -1;
		exp_put(r, rep, bench_now_ns() - t0, vmm, tb);
		if (exp_check(x, v->id, rep) || exp_release_all(x))
			return -1;
	}
	x->use_sep = false;
	exp_line(r);
	return 0;
}

/* F: copies into memory mapped before the timing (1 GiB copies, then 256 MiB pieces). */
static int exp_run_ceiling(struct exp *x)
{
	static const char *const ids[2] = { "F1", "F2" };
	struct exp_row *r[2];
	unsigned int rep, k, m;
	uint64_t t0, tb;

	snprintf(x->b.step, sizeof(x->b.step), "variant F");
	r[0] = exp_row(x, ids[0], EXP_H2D, x->nunit, x->unit,
		       "copies only, into mapped memory: a copy per handle");
	r[1] = exp_row(x, ids[1], EXP_H2D, x->nunit, x->unit,
		       "copies only, into mapped memory: quarter pieces");
	if (!r[0] || !r[1] || exp_back_all(x, x->nunit, x->unit))
		return -1;
	for (m = 0; m < 2; m++) {
		r[m]->has_enq = true;
		for (rep = 0; rep <= EXP_REPS; rep++) {
			exp_stamp(x);
			k = 0;
			t0 = bench_now_ns();
			if (exp_copy(x, EXP_H2D, 0, x->total, m ? x->piece : x->unit, EXP_STREAMS,
				     &k))
				return -1;
			tb = bench_now_ns() - t0;
			if (exp_sync(x, EXP_STREAMS))
				return -1;
			exp_put(r[m], rep, bench_now_ns() - t0, 0, tb);
			if (exp_check(x, ids[m], rep))
				return -1;
		}
		exp_line(r[m]);
	}
	return exp_release_all(x);
}

/* G, H: what pause does: D2H copies from mapped memory, then unmap + release every handle. */
static int exp_run_d2h(struct exp *x, const char *id, bool pieces)
{
	char what[120], cid[12], rid[12];
	struct exp_row *all, *copy, *rel;
	uint64_t t0, t1, t2, tb;
	unsigned int rep, k;

	snprintf(x->b.step, sizeof(x->b.step), "variant %s", id);
	snprintf(what, sizeof(what), "D2H %s, 4 streams, then release all",
		 pieces ? "quarter pieces" : "a copy per handle");
	snprintf(cid, sizeof(cid), "%s-copy", id);
	snprintf(rid, sizeof(rid), "%s-rel", id);
	all = exp_row(x, id, EXP_D2H, x->nunit, x->unit, what);
	copy = exp_row(x, cid, EXP_D2H, x->nunit, x->unit, "  its copies (until synchronized)");
	rel = exp_row(x, rid, EXP_VMM, x->nunit, x->unit,
		      "  its cuMemUnmap + cuMemRelease of every handle");
	if (!all || !copy || !rel)
		return -1;
	copy->has_enq = true;
	for (rep = 0; rep <= EXP_REPS; rep++) {
		if (exp_back_all(x, x->nunit, x->unit)) /* not timed */
			return -1;
		k = 0;
		t0 = bench_now_ns();
		if (exp_copy(x, EXP_D2H, 0, x->total, pieces ? x->piece : x->unit, EXP_STREAMS, &k))
			return -1;
		tb = bench_now_ns() - t0;
		if (exp_sync(x, EXP_STREAMS))
			return -1;
		t1 = bench_now_ns();
		if (exp_release_all(x))
			return -1;
		t2 = bench_now_ns();
		exp_put(all, rep, t2 - t0, 0, 0);
		exp_put(copy, rep, t1 - t0, 0, tb);
		exp_put(rel, rep, t2 - t1, 0, 0);
	}
	exp_line(all);
	exp_line(copy);
	exp_line(rel);
	return 0;
}

static void exp_sleep_ms(unsigned int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* I: release every handle, then back them all again, at once or after a pause of ms. */
static int exp_run_recreate(struct exp *x, const char *id, unsigned int ms)
{
	char what[120], cid[12], rid[12];
	struct exp_row *rel, *cre;
	unsigned int rep;
	uint64_t t0, t1;

	snprintf(x->b.step, sizeof(x->b.step), "variant %s", id);
	snprintf(rid, sizeof(rid), "%s-rel", id);
	snprintf(cid, sizeof(cid), "%s-back", id);
	rel = exp_row(x, rid, EXP_VMM, x->nunit, x->unit,
		      "cuMemUnmap + cuMemRelease of every handle");
	if (ms)
		snprintf(what, sizeof(what), "  then %u ms later: create + map + setaccess all",
			 ms);
	else
		snprintf(what, sizeof(what), "  then at once: create + map + setaccess all");
	cre = exp_row(x, cid, EXP_VMM, x->nunit, x->unit, what);
	if (!rel || !cre || exp_back_all(x, x->nunit, x->unit))
		return -1;
	for (rep = 0; rep <= EXP_REPS; rep++) {
		t0 = bench_now_ns();
		if (exp_release_all(x))
			return -1;
		exp_put(rel, rep, bench_now_ns() - t0, 0, 0);
		if (ms)
			exp_sleep_ms(ms);
		t1 = bench_now_ns();
		if (exp_back_all(x, x->nunit, x->unit))
			return -1;
		exp_put(cre, rep, bench_now_ns() - t1, 0, 0);
	}
	exp_line(rel);
	exp_line(cre);
	return exp_release_all(x);
}

/* L4: the other reservation and its handle set become the ones exp_copy & co. use. */
static void exp_swap(struct exp *x)
{
	CUdeviceptr base = x->base;
	CUmemGenericAllocationHandle *h = x->h;
	unsigned char *st = x->st;

	x->base = x->alt_base;
	x->h = x->alt_h;
	x->st = x->alt_st;
	x->alt_base = base;
	x->alt_h = h;
	x->alt_st = st;
}

/* L: from the set mapped and written, a new set backed (as v says), then only its copies
 * timed; the new set, mapped and written, is where the next repetition starts. */
static int exp_run_after(struct exp *x, const struct exp_after *v)
{
	struct exp_row *r = exp_row(x, v->id, EXP_H2D, x->nunit, x->unit, v->what);
	struct bench *b = &x->b;
	uint64_t t0, ta, tb, back, sync;
	char b1[32], b2[32], b3[32];
	size_t fr, tot;
	unsigned int rep, k;

	snprintf(b->step, sizeof(b->step), "variant %s", v->id);
	if (!r)
		return -1;
	r->has_back = true;
	r->has_enq = true;
	r->has_free = true;
	r->has_sync = v->sync;
	for (rep = 0; rep <= EXP_REPS; rep++) {
		exp_stamp(
			x); /* host side only: the samples of either set are at the same offsets */
		if (v->keep_old)
			exp_swap(x);
		else if (exp_release_all(x))
			return -1;
		if (v->sleep_before_ms)
			exp_sleep_ms(v->sleep_before_ms);
		ta = bench_now_ns();
		if (exp_back_all(x, x->nunit, x->unit))
			return -1;
		back = bench_now_ns() - ta;
		sync = 0;
		if (v->sync) {
			BENCH_CU(b, err, cuCtxSynchronize);
			sync = bench_now_ns() - ta - back;
		}
		if (v->sleep_after_ms)
			exp_sleep_ms(v->sleep_after_ms);
		BENCH_CU(b, err, cuMemGetInfo, &fr, &tot);
		k = 0;
		t0 = bench_now_ns();
		if (exp_copy(x, EXP_H2D, 0, x->total, x->unit, EXP_STREAMS, &k))
			return -1;
		tb = bench_now_ns() - t0;
		if (exp_sync(x, EXP_STREAMS))
			return -1;
		exp_put(r, rep, bench_now_ns() - t0, back, tb);
		exp_put_after(r, rep, fr, sync);
		if (exp_check(x, v->id, rep))
			return -1;
		if (v->keep_old) {
			exp_swap(x);
			if (exp_release_all(x))
				return -1;
			exp_swap(x);
		}
	}
	snprintf(r->note, sizeof(r->note), "free before the copies %s, min %s, max %s",
		 bench_fmt_bytes(b1, sizeof(b1), (uint64_t)bench_median_ns(r->free_b, r->reps)),
		 bench_fmt_bytes(b2, sizeof(b2), exp_min(r->free_b, r->reps)),
		 bench_fmt_bytes(b3, sizeof(b3), exp_max(r->free_b, r->reps)));
	exp_line(r);
	return 0;
err:
	return -1;
}

/* L: the set backed and written once (not timed), then L0-L4, then the set released. */
static int exp_run_l(struct exp *x)
{
	static const struct exp_after l[] = {
		{ .id = "L0", .what = "release all, at once back all; copies only" },
		{ .id = "L1",
		  .what = "release all, 500 ms later back all; copies only",
		  .sleep_before_ms = EXP_L_SLEEP_MS },
		{ .id = "L2",
		  .what = "release all, back all, 500 ms later copies only",
		  .sleep_after_ms = EXP_L_SLEEP_MS },
		{ .id = "L3",
		  .what = "release all, back all, cuCtxSynchronize; copies only",
		  .sync = true },
		{ .id = "L4",
		  .what = "back a new set, old one mapped; copies only",
		  .keep_old = true },
	};
	unsigned int k = 0;
	size_t i;

	snprintf(x->b.step, sizeof(x->b.step), "variant L");
	exp_stamp(x);
	if (exp_back_all(x, x->nunit, x->unit) ||
	    exp_copy(x, EXP_H2D, 0, x->total, x->unit, EXP_STREAMS, &k) || exp_sync(x, EXP_STREAMS))
		return -1;
	for (i = 0; i < sizeof(l) / sizeof(l[0]); i++)
		if (exp_run_after(x, &l[i]))
			return -1;
	return exp_release_all(x);
}

/* J: reads 4 KiB at the first, middle and last mapping (access granted everywhere?). */
static void exp_access_probe(struct exp *x, const char *id)
{
	uint64_t at[3] = { 0, x->hn / 2, x->hn - 1 };
	CUresult res;
	unsigned int j;

	for (j = 0; j < 3; j++) {
		res = x->b.drv.cuMemcpyDtoH(x->stage, x->base + at[j] * x->hsize, EXP_SAMPLE);
		if (res != CUDA_SUCCESS) {
			snprintf(x->access_check, sizeof(x->access_check),
				 "%s: cuMemcpyDtoH from mapping %" PRIu64 " after the span "
				 "cuMemSetAccess: %s (%d)",
				 id, at[j], cms_driver_error_name(&x->b.drv, res), res);
			bench_fail(&x->b, "%s", x->access_check);
			return;
		}
	}
	if (!x->access_check[0])
		snprintf(x->access_check, sizeof(x->access_check),
			 "OK: reads from the first, middle and last mapping succeeded");
}

/* Keeps a J2 call's result and its name (the first, or the latest failure) in *keep, name
 * (48 bytes) and row r. */
static void exp_result(struct exp *x, CUresult res, CUresult *keep, char *name, struct exp_row *r)
{
	*keep = res;
	snprintf(name, 48, "%s", cms_driver_error_name(&x->b.drv, res));
	r->has_result = true;
	r->result = res;
	snprintf(r->result_name, sizeof(r->result_name), "%s", name);
}

/* J2's back: create + map each, then ONE cuMemSetAccess over the whole range (per mapping
 * if the driver refuses it). */
static int exp_back_span(struct exp *x, struct exp_row *r)
{
	struct bench *b = &x->b;
	CUresult res;
	uint64_t i;

	for (i = 0; i < x->hn; i++) {
		BENCH_CU(b, err, cuMemCreate, &x->h[i], x->hsize, &x->prop, 0);
		x->st[i] = BENCH_H_CREATED;
		BENCH_CU(b, err, cuMemMap, x->base + i * x->hsize, x->hsize, 0, x->h[i], 0);
		x->st[i] = BENCH_H_MAPPED;
	}
	res = b->drv.cuMemSetAccess(x->base, x->hn * x->hsize, &x->acc, 1);
	if (!x->span_access_tried || res != CUDA_SUCCESS)
		exp_result(x, res, &x->span_access, x->span_access_name, r);
	x->span_access_tried = true;
	if (res == CUDA_SUCCESS)
		return 0;
	snprintf(r->note, sizeof(r->note),
		 "REFUSED: %s (%d); set per mapping instead, so this time is not (ii)'s",
		 cms_driver_error_name(&b->drv, res), res);
	for (i = 0; i < x->hn; i++)
		BENCH_CU(b, err, cuMemSetAccess, x->base + i * x->hsize, x->hsize, &x->acc, 1);
	return 0;
err:
	return -1;
}

/* J2's release: ONE cuMemUnmap over the whole range (per mapping if refused), then the
 * handles. */
static int exp_release_span(struct exp *x, struct exp_row *r)
{
	struct bench *b = &x->b;
	CUresult res;
	uint64_t i;

	res = b->drv.cuMemUnmap(x->base, x->hn * x->hsize);
	if (!x->span_unmap_tried || res != CUDA_SUCCESS)
		exp_result(x, res, &x->span_unmap, x->span_unmap_name, r);
	x->span_unmap_tried = true;
	if (res == CUDA_SUCCESS) {
		for (i = 0; i < x->hn; i++)
			x->st[i] = BENCH_H_CREATED;
	} else {
		snprintf(r->note, sizeof(r->note),
			 "REFUSED: %s (%d); unmapped per mapping instead, so this time is not "
			 "(ii)'s",
			 cms_driver_error_name(&b->drv, res), res);
	}
	return exp_release_all(x); /* per-mapping unmaps where still mapped, and the releases */
}

static int exp_run_j(struct exp *x)
{
	static const char *const ids[3] = { "J1", "J2", "J3" };
	struct exp_row *back[3], *rel[3];
	char what[120], id[12], b1[32];
	unsigned int m, rep;
	uint64_t t0, t1, n, size;
	int rc;

	snprintf(x->b.step, sizeof(x->b.step), "variant J");
	for (m = 0; m < 3; m++) {
		n = m == 2 ? x->nunit / 2 : x->jcount;
		size = m == 2 ? 2 * x->unit : x->jsize;
		snprintf(what, sizeof(what), "one reservation, %s",
			 m == 1 ? "ONE setaccess over all mappings" : "setaccess per mapping");
		snprintf(id, sizeof(id), "%s-back", ids[m]);
		back[m] = exp_row(x, id, EXP_VMM, n, size, what);
		snprintf(what, sizeof(what), "  %s, cuMemRelease each",
			 m == 1 ? "ONE cuMemUnmap over all" : "cuMemUnmap per mapping");
		snprintf(id, sizeof(id), "%s-rel", ids[m]);
		rel[m] = exp_row(x, id, EXP_VMM, n, size, what);
		if (!back[m] || !rel[m])
			return -1;
		for (rep = 0; rep <= EXP_REPS; rep++) {
			exp_set(x, n, size);
			t0 = bench_now_ns();
			rc = m == 1 ? exp_back_span(x, back[m]) : exp_back_all(x, n, size);
			if (rc)
				return -1;
			exp_put(back[m], rep, bench_now_ns() - t0, 0, 0);
			if (m == 1 && !rep && x->span_access == CUDA_SUCCESS)
				exp_access_probe(x, ids[m]);
			else if (m == 1 && !rep)
				snprintf(x->access_check, sizeof(x->access_check),
					 "not probed: the span call was refused");
			t1 = bench_now_ns();
			rc = m == 1 ? exp_release_span(x, rel[m]) : exp_release_all(x);
			if (rc)
				return -1;
			exp_put(rel[m], rep, bench_now_ns() - t1, 0, 0);
		}
		exp_line(back[m]);
		exp_line(rel[m]);
	}
	printf("  J: cuMemSetAccess over %" PRIu64 " adjacent mappings (%s): %s (%d); cuMemUnmap "
	       "over them: %s (%d); access after the span call: %s\n",
	       x->jcount, bench_fmt_bytes(b1, sizeof(b1), x->jcount * x->jsize),
	       x->span_access_name, x->span_access, x->span_unmap_name, x->span_unmap,
	       x->access_check);
	return 0;
}

/* ---- host buffers ------------------------------------------------------------------- */

/* The one buffer: 2 MiB aligned, MADV_HUGEPAGE, pattern written on 16 threads, registered. */
static int exp_host_setup(struct exp *x)
{
	struct bench *b = &x->b;
	uint64_t t0, thp0;
	char b1[32], b2[32];

	snprintf(b->step, sizeof(b->step), "host buffer");
	x->host_map_len = x->total + EXP_HUGE;
	x->host_map = mmap(NULL, x->host_map_len, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (x->host_map == MAP_FAILED) {
		x->host_map = NULL;
		bench_fail(b, "mmap of %s failed: %s",
			   bench_fmt_bytes(b1, sizeof(b1), x->host_map_len), strerror(errno));
		return -1;
	}
	x->host = (char *)(((uintptr_t)x->host_map + EXP_HUGE - 1) & ~(uintptr_t)(EXP_HUGE - 1));
	madvise(x->host, x->total, MADV_HUGEPAGE); /* advice only, as src/host.c */
	thp0 = exp_thp();
	t0 = bench_now_ns();
	x->touch_threads = bench_touch_pattern(x->host, x->total, EXP_THREADS, 0, 0);
	x->touch_s = (double)(bench_now_ns() - t0) / 1e9;
	x->thp_bytes = exp_thp() - thp0;
	t0 = bench_now_ns();
	BENCH_CU(b, err, cuMemHostRegister, x->host, x->total, CU_MEMHOSTREGISTER_PORTABLE);
	x->register_s = (double)(bench_now_ns() - t0) / 1e9;
	x->host_reg = true;
	printf("host buffer: %s, pattern written on %u threads in %.3f s, %s in huge pages, "
	       "cuMemHostRegister (PORTABLE) %.3f s\n",
	       bench_fmt_bytes(b1, sizeof(b1), x->total), x->touch_threads, x->touch_s,
	       bench_fmt_bytes(b2, sizeof(b2), x->thp_bytes), x->register_s);
	return 0;
err:
	return -1;
}

static void exp_sep_free(struct exp *x)
{
	uint64_t i;
	CUresult res;

	for (i = 0; x->sep && i < x->nunit; i++) {
		if (x->sep_reg[i]) {
			res = x->b.drv.cuMemHostUnregister(x->sep[i]);
			if (res != CUDA_SUCCESS)
				bench_cu_fail(&x->b, res, "cleanup, cuMemHostUnregister");
		}
		if (x->sep[i])
			munmap(x->sep[i], x->unit);
	}
	free(x->sep);
	free(x->sep_reg);
	x->sep = NULL;
	x->sep_reg = NULL;
}

/* K's host side: a buffer per unit as src/host.c makes them (plain mmap, no alignment). */
static int exp_sep_setup(struct exp *x)
{
	struct bench *b = &x->b;
	uint64_t i, t0, thp0 = exp_thp();
	char b1[32], b2[32];
	void *p;

	snprintf(b->step, sizeof(b->step), "variant K's host buffers");
	x->sep = calloc(x->nunit, sizeof(*x->sep));
	x->sep_reg = calloc(x->nunit, sizeof(*x->sep_reg));
	if (!x->sep || !x->sep_reg) {
		bench_fail(b, "out of host memory");
		return -1;
	}
	t0 = bench_now_ns();
	for (i = 0; i < x->nunit; i++) {
		p = mmap(NULL, x->unit, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			bench_fail(b, "mmap of %s failed: %s",
				   bench_fmt_bytes(b1, sizeof(b1), x->unit), strerror(errno));
			return -1;
		}
		x->sep[i] = p;
		madvise(p, x->unit, MADV_HUGEPAGE);
		bench_touch_pattern(p, x->unit, EXP_THREADS, i * x->unit, 0);
	}
	x->sep_touch_s = (double)(bench_now_ns() - t0) / 1e9;
	x->sep_thp_bytes = exp_thp() - thp0;
	t0 = bench_now_ns();
	for (i = 0; i < x->nunit; i++) {
		BENCH_CU(b, err, cuMemHostRegister, x->sep[i], x->unit,
			 CU_MEMHOSTREGISTER_PORTABLE);
		x->sep_reg[i] = true;
	}
	x->sep_register_s = (double)(bench_now_ns() - t0) / 1e9;
	printf("K's host buffers: %" PRIu64 " x %s, written in %.3f s, %s in huge pages, "
	       "registered in %.3f s\n",
	       x->nunit, bench_fmt_bytes(b1, sizeof(b1), x->unit), x->sep_touch_s,
	       bench_fmt_bytes(b2, sizeof(b2), x->sep_thp_bytes), x->sep_register_s);
	return 0;
err:
	return -1;
}

/* ---- setup, the run, cleanup --------------------------------------------------------- */

static int exp_device_setup(struct exp *x)
{
	struct bench *b = &x->b;
	unsigned int i;

	snprintf(b->step, sizeof(b->step), "device setup");
	x->hmax = x->jcount > x->nunit ? x->jcount : x->nunit;
	x->h = calloc(x->hmax, sizeof(*x->h));
	x->st = calloc(x->hmax, sizeof(*x->st));
	x->alt_h = calloc(x->hmax, sizeof(*x->alt_h));
	x->alt_st = calloc(x->hmax, sizeof(*x->alt_st));
	x->stage = malloc(EXP_SAMPLE);
	if (!x->h || !x->st || !x->alt_h || !x->alt_st || !x->stage) {
		bench_fail(b, "out of host memory");
		return -1;
	}
	bench_fill_prop(b, &x->prop, &x->acc);
	BENCH_CU(b, err, cuMemAddressReserve, &x->base, x->total, 0, 0, 0);
	BENCH_CU(b, err, cuMemAddressReserve, &x->alt_base, x->total, 0, 0, 0);
	for (i = 0; i < EXP_STREAMS; i++)
		BENCH_CU(b, err, cuStreamCreate, &x->s[i], CU_STREAM_NON_BLOCKING);
	return 0;
err:
	return -1;
}

/* Frees what exists; after a failure, waits for the device first (no copy may be running). */
static void exp_cleanup(struct exp *x)
{
	struct bench *b = &x->b;
	CUresult res;
	unsigned int i;

	if (!b->drv_open)
		return;
	snprintf(b->step, sizeof(b->step), "cleanup");
	if (b->pushed) {
		res = b->drv.cuCtxSynchronize();
		if (res != CUDA_SUCCESS)
			bench_cu_fail(b, res, "cuCtxSynchronize");
	}
	if (x->h)
		bench_vmm_undo(b, x->base, x->hsize, x->h, x->st, x->hn);
	if (x->alt_h)
		bench_vmm_undo(b, x->alt_base, x->hsize, x->alt_h, x->alt_st, x->hn);
	if (x->base) {
		res = b->drv.cuMemAddressFree(x->base, x->total);
		if (res != CUDA_SUCCESS)
			bench_cu_fail(b, res, "cuMemAddressFree");
		x->base = 0;
	}
	if (x->alt_base) {
		res = b->drv.cuMemAddressFree(x->alt_base, x->total);
		if (res != CUDA_SUCCESS)
			bench_cu_fail(b, res, "cuMemAddressFree");
		x->alt_base = 0;
	}
	for (i = 0; i < EXP_STREAMS; i++) {
		if (!x->s[i])
			continue;
		res = b->drv.cuStreamDestroy(x->s[i]);
		if (res != CUDA_SUCCESS)
			bench_cu_fail(b, res, "cuStreamDestroy");
		x->s[i] = NULL;
	}
	exp_sep_free(x);
	if (x->host_reg) {
		res = b->drv.cuMemHostUnregister(x->host);
		if (res != CUDA_SUCCESS)
			bench_cu_fail(b, res, "cuMemHostUnregister");
		x->host_reg = false;
	}
	if (x->host_map)
		munmap(x->host_map, x->host_map_len);
	x->host_map = NULL;
}

/* The byte counts at this scale: units of 1 GiB / scale, an even number of them. */
static int exp_shapes(struct exp *x)
{
	struct bench *b = &x->b;
	uint64_t n, s;

	bench_scale(b, x->gib, EXP_UNIT, &n, &s);
	n -= n % 2;
	if (n < 2) {
		bench_fail(b,
			   "--gib %u at --scale %u leaves fewer than 2 handles of %" PRIu64
			   " bytes",
			   x->gib, b->scale, s);
		return -1;
	}
	x->unit = s;
	x->nunit = n;
	x->total = n * s;
	x->piece = s / EXP_PIECES;
	x->jsize = EXP_SMALL / b->scale;
	x->jsize -= x->jsize % b->granularity;
	if (x->jsize < b->granularity)
		x->jsize = b->granularity;
	x->jcount = x->total / x->jsize;
	return 0;
}

static void exp_run(struct exp *x)
{
	static const struct exp_h2d h2d[] = {
		{ .id = "A",
		  .what = "engine-like: back a handle, then its copy (i%4)",
		  .units = 1,
		  .interleave = true,
		  .streams = 4 },
		{ .id = "B",
		  .what = "back all handles, then a copy per handle (i%4)",
		  .units = 1,
		  .streams = 4 },
		{ .id = "C",
		  .what = "back all, then quarter pieces round-robin, 4 str.",
		  .units = 1,
		  .pieces = true,
		  .streams = 4 },
		{ .id = "D",
		  .what = "as A, double handles, 2 copies each, 4 streams",
		  .units = 2,
		  .interleave = true,
		  .streams = 4 },
		{ .id = "E1", .what = "as B on 1 stream", .units = 1, .streams = 1 },
		{ .id = "E2", .what = "as B on 2 streams", .units = 1, .streams = 2 },
	};
	static const struct exp_h2d k = {
		.id = "K",
		.what = "as A, host side as src/host.c: a buffer per handle",
		.units = 1,
		.interleave = true,
		.streams = 4,
		.separate = true
	};
	struct bench *b = &x->b;
	char b1[32], b2[32], b3[32], b4[32];
	size_t i;

	if (bench_choose_driver(b))
		return;
	if (!b->scale_given)
		b->scale = b->sim ? BENCH_DEFAULT_SIM_SCALE : 1;
	printf("date %s, scale 1/%u, command: %s\n", b->date, b->scale, b->cmdline);
	if (bench_setup_device(b) || exp_shapes(x))
		return;
	printf("handles of %s (%" PRIu64 " of them, %s per variant), quarter pieces of %s, J: "
	       "%" PRIu64 " x %s; %u repetitions after a warm-up, medians\n",
	       bench_fmt_bytes(b1, sizeof(b1), x->unit), x->nunit,
	       bench_fmt_bytes(b2, sizeof(b2), x->total), bench_fmt_bytes(b3, sizeof(b3), x->piece),
	       x->jcount, bench_fmt_bytes(b4, sizeof(b4), x->jsize), EXP_REPS);
	printf("\ncms-bench's copy floor (its own buffers, chunks on one stream):\n");
	if (bench_copy_floor(b))
		return;
	/* device: the variants' handles, two sets in L4; host: the buffer and K's buffers (on
	 * the simulation, the device's bytes are host memory too) */
	if (bench_room(b, "the variants", 2 * x->total, 2 * x->total))
		return;
	printf("\n");
	if (exp_host_setup(x) || exp_device_setup(x))
		return;
	printf("\nvariants (median of %u; back = time in create + map + setaccess; enqueued = "
	       "when the last copy was enqueued):\n",
	       EXP_REPS);
	for (i = 0; i < sizeof(h2d) / sizeof(h2d[0]); i++)
		if (exp_run_h2d(x, &h2d[i]))
			return;
	if (exp_run_ceiling(x))
		return;
	/* D2H overwrites the host buffer: after every H2D check */
	if (exp_run_d2h(x, "G", false) || exp_run_d2h(x, "H", true))
		return;
	if (exp_run_recreate(x, "I0", 0) || exp_run_recreate(x, "I1", EXP_SLEEP_MS))
		return;
	if (exp_run_l(x))
		return;
	if (exp_sep_setup(x) || exp_run_h2d(x, &k))
		return;
	exp_sep_free(x);
	/* last: a span call that claims success without granting access could fault the
	 * context (the probe reads the last mapping) */
	exp_run_j(x);
}

/* ---- report ------------------------------------------------------------------------- */

static double exp_best(const struct exp *x, enum exp_dir dir, const char *a, const char *c)
{
	double best = NAN, g;
	unsigned int i;

	for (i = 0; i < x->nrows; i++) {
		const struct exp_row *r = &x->rows[i];

		if (r->dir != dir || (strcmp(r->id, a) && strcmp(r->id, c)))
			continue;
		g = exp_gbs(r);
		if (!isnan(g) && (isnan(best) || g > best))
			best = g;
	}
	return best;
}

static double exp_ratio(const struct exp *x, const struct exp_row *r)
{
	double ceil = r->dir == EXP_H2D ? exp_best(x, EXP_H2D, "F1", "F2") :
					  exp_best(x, EXP_D2H, "G-copy", "H-copy");

	return r->dir == EXP_VMM ? NAN : exp_gbs(r) / ceil;
}

static void exp_table(const struct exp *x)
{
	const struct bench_copy_floor *cf = &x->b.copy;
	double h2d = exp_best(x, EXP_H2D, "F1", "F2"),
	       d2h = exp_best(x, EXP_D2H, "G-copy", "H-copy");
	char b1[48], b2[32];
	unsigned int i;

	printf("\nratio: H2D rows against the best of F1/F2 (%.2f GB/s), D2H rows against the best "
	       "of G-copy/H-copy (%.2f GB/s)\n",
	       h2d, d2h);
	printf("%-9s %-16s %-52s %10s %10s %7s %6s %9s %9s\n", "variant", "handles", "what",
	       "median ms", "min ms", "GB/s", "ratio", "back ms", "enq. ms");
	if (cf->measured) {
		snprintf(b1, sizeof(b1), "1 x %s", bench_fmt_bytes(b2, sizeof(b2), cf->bytes));
		printf("%-9s %-16s %-52s %10.3f %10s %7.2f %6.2f\n", "floor-H2D", b1,
		       "cms-bench's copy floor: chunks on 1 stream",
		       (double)cf->bytes / cf->h2d_gbs / 1e6, "-", cf->h2d_gbs, cf->h2d_gbs / h2d);
		printf("%-9s %-16s %-52s %10.3f %10s %7.2f %6.2f\n", "floor-D2H", b1,
		       "cms-bench's copy floor: chunks on 1 stream",
		       (double)cf->bytes / cf->d2h_gbs / 1e6, "-", cf->d2h_gbs, cf->d2h_gbs / d2h);
	}
	for (i = 0; i < x->nrows; i++) {
		const struct exp_row *r = &x->rows[i];

		printf("%-9s %-16s %-52s %10.3f %10.3f", r->id, exp_shape(b1, sizeof(b1), r),
		       r->what, exp_ms(r->total_ns, r->reps), exp_min_ms(r->total_ns, r->reps));
		if (r->dir == EXP_VMM)
			printf(" %7s %6s", "-", "-");
		else
			printf(" %7.2f %6.2f", exp_gbs(r), exp_ratio(x, r));
		if (r->has_back)
			printf(" %9.3f", exp_ms(r->back_ns, r->reps));
		else
			printf(" %9s", "-");
		if (r->has_enq)
			printf(" %9.3f", exp_ms(r->enq_ns, r->reps));
		else
			printf(" %9s", "-");
		if (r->has_result)
			printf("  %s", r->result_name);
		if (r->has_free)
			printf("  free %s",
			       bench_fmt_bytes(b2, sizeof(b2),
					       (uint64_t)bench_median_ns(r->free_b, r->reps)));
		if (r->has_sync)
			printf(", sync %.3f ms", exp_ms(r->sync_ns, r->reps));
		printf("\n");
	}
	if (x->samples || x->mismatches)
		printf("content: %s (%" PRIu64
		       " samples of 4 KiB read back after A-F, K and L, %" PRIu64 " mismatched)\n",
		       x->mismatches ? "MISMATCH" : "OK", x->samples, x->mismatches);
}

static void exp_json_ms_list(FILE *f, const char *key, const uint64_t *v, unsigned int n)
{
	unsigned int i;

	fprintf(f, ", \"%s\": [", key);
	for (i = 0; i < n; i++) {
		fputs(i ? ", " : "", f);
		bench_json_num(f, (double)v[i] / 1e6);
	}
	fputs("]", f);
}

static void exp_json_row(const struct exp *x, const struct exp_row *r, FILE *f)
{
	static const char *const dirs[] = { "vmm", "h2d", "d2h" };
	unsigned int i;

	fputs("    {\"id\": ", f);
	bench_json_str(f, r->id);
	fputs(", \"what\": ", f);
	bench_json_str(f, r->what);
	fprintf(f,
		", \"direction\": \"%s\", \"bytes\": %" PRIu64 ", \"handles\": %" PRIu64
		", \"handle_bytes\": %" PRIu64 ", \"reps\": %u, \"median_ms\": ",
		dirs[r->dir], r->bytes, r->handles, r->handle_bytes, r->reps);
	bench_json_num(f, exp_ms(r->total_ns, r->reps));
	fputs(", \"min_ms\": ", f);
	bench_json_num(f, exp_min_ms(r->total_ns, r->reps));
	fputs(", \"gbs\": ", f);
	bench_json_num(f, exp_gbs(r));
	fputs(", \"ratio\": ", f);
	bench_json_num(f, exp_ratio(x, r));
	fputs(", \"back_ms\": ", f);
	bench_json_num(f, r->has_back ? exp_ms(r->back_ns, r->reps) : NAN);
	fputs(", \"enqueued_ms\": ", f);
	bench_json_num(f, r->has_enq ? exp_ms(r->enq_ns, r->reps) : NAN);
	if (r->has_result) {
		fprintf(f, ", \"result\": %d, \"result_name\": ", r->result);
		bench_json_str(f, r->result_name);
	} else {
		fputs(", \"result\": null, \"result_name\": null", f);
	}
	fputs(", \"note\": ", f);
	bench_json_str(f, r->note);
	exp_json_ms_list(f, "rep_ms", r->total_ns, r->reps);
	if (r->has_back)
		exp_json_ms_list(f, "rep_back_ms", r->back_ns, r->reps);
	if (r->has_enq)
		exp_json_ms_list(f, "rep_enqueued_ms", r->enq_ns, r->reps);
	if (r->has_free) {
		fputs(", \"rep_free_bytes\": [", f);
		for (i = 0; i < r->reps; i++)
			fprintf(f, "%s%" PRIu64, i ? ", " : "", r->free_b[i]);
		fputs("]", f);
	}
	if (r->has_sync)
		exp_json_ms_list(f, "rep_sync_ms", r->sync_ns, r->reps);
	fputs("}", f);
}

static void exp_json_result(FILE *f, const char *key, bool tried, CUresult res, const char *name)
{
	fprintf(f, "\"%s\": ", key);
	if (!tried) {
		fputs("null", f);
		return;
	}
	fprintf(f, "{\"result\": %d, \"name\": ", res);
	bench_json_str(f, name);
	fputs("}", f);
}

static int exp_json(const struct exp *x, const char *path)
{
	const struct bench *b = &x->b;
	const struct bench_copy_floor *cf = &b->copy;
	FILE *f = fopen(path, "w");
	unsigned int i;

	if (!f)
		return -1;
	bench_json_head(b, f);
	fprintf(f,
		",\n  \"granularity\": %" PRIu64 ", \"scale\": %u, \"gib\": %u, \"total_bytes\": "
		"%" PRIu64 ", \"unit_bytes\": %" PRIu64 ", \"piece_bytes\": %" PRIu64
		", \"streams\": %u, \"reps\": %u,\n",
		b->granularity, b->scale, x->gib, x->total, x->unit, x->piece, EXP_STREAMS,
		EXP_REPS);
	fprintf(f, "  \"host\": {\"touch_s\": ");
	bench_json_num(f, x->touch_s);
	fprintf(f, ", \"touch_threads\": %u, \"thp_bytes\": %" PRIu64 ", \"register_s\": ",
		x->touch_threads, x->thp_bytes);
	bench_json_num(f, x->register_s);
	fputs(", \"separate_touch_s\": ", f);
	bench_json_num(f, x->sep_touch_s);
	fprintf(f, ", \"separate_thp_bytes\": %" PRIu64 ", \"separate_register_s\": ",
		x->sep_thp_bytes);
	bench_json_num(f, x->sep_register_s);
	fputs("},\n  \"floor\": ", f);
	if (cf->measured) {
		fprintf(f,
			"{\"bytes\": %" PRIu64 ", \"chunk\": %" PRIu64 ", \"h2d_gbs\": ", cf->bytes,
			cf->chunk);
		bench_json_num(f, cf->h2d_gbs);
		fputs(", \"d2h_gbs\": ", f);
		bench_json_num(f, cf->d2h_gbs);
		fputs(", \"bidir_gbs\": ", f);
		bench_json_num(f, cf->bidir_gbs);
		fputs("}", f);
	} else {
		fputs("null", f);
	}
	fputs(",\n  \"ceiling_h2d_gbs\": ", f);
	bench_json_num(f, exp_best(x, EXP_H2D, "F1", "F2"));
	fputs(", \"ceiling_d2h_gbs\": ", f);
	bench_json_num(f, exp_best(x, EXP_D2H, "G-copy", "H-copy"));
	fputs(",\n  \"rows\": [\n", f);
	for (i = 0; i < x->nrows; i++) {
		exp_json_row(x, &x->rows[i], f);
		fputs(i + 1 < x->nrows ? ",\n" : "\n", f);
	}
	fputs("  ],\n  \"j\": {", f);
	exp_json_result(f, "span_set_access", x->span_access_tried, x->span_access,
			x->span_access_name);
	fputs(", ", f);
	exp_json_result(f, "span_unmap", x->span_unmap_tried, x->span_unmap, x->span_unmap_name);
	fputs(", \"access_check\": ", f);
	bench_json_str(f, x->access_check);
	fprintf(f,
		"},\n  \"content\": {\"samples\": %" PRIu64 ", \"mismatches\": %" PRIu64
		", \"ok\": %s},\n  \"failure\": ",
		x->samples, x->mismatches, x->samples && !x->mismatches ? "true" : "false");
	if (b->failed)
		bench_json_str(f, b->failure);
	else
		fputs("null", f);
	fputs("\n}\n", f);
	return fclose(f) ? -1 : 0;
}

/* ---- options, main ------------------------------------------------------------------ */

static void exp_usage(FILE *f)
{
	fprintf(f,
		"usage: " EXP_TOOL " [--gib N] [--scale N] [--json FILE] [--sim|--gpu]\n"
		"  -g, --gib N        bytes per variant in GiB (even, 2..%u; default %u)\n"
		"  -s, --scale N      divide every size by N (1..%u; default 1 on a GPU, %u on\n"
		"                     the host simulation); a handle never goes below one\n"
		"                     granularity\n"
		"  -j, --json FILE    also write the results as JSON to FILE\n"
		"      --sim          run on the host simulation\n"
		"      --gpu          run on the real driver (fail if there is no GPU)\n"
		"exit status: 0 when every driver call and content check passed, 1 otherwise,\n"
		"2 on bad usage\n",
		EXP_MAX_GIB, EXP_DEFAULT_GIB, BENCH_MAX_SCALE, BENCH_DEFAULT_SIM_SCALE);
}

/* Returns -1 to go on, else the exit status. */
static int exp_parse(struct exp *x, int argc, char **argv, const char **json)
{
	static const struct option longopts[] = {
		{ "gib", required_argument, NULL, 'g' },
		{ "scale", required_argument, NULL, 's' },
		{ "json", required_argument, NULL, 'j' },
		{ "sim", no_argument, NULL, 'S' },
		{ "gpu", no_argument, NULL, 'G' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct bench *b = &x->b;
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":g:s:j:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'g':
			if (bench_parse_uint(optarg, 2, EXP_MAX_GIB, &x->gib) || x->gib % 2) {
				fprintf(stderr, EXP_TOOL ": bad --gib '%s' (even, 2..%u)\n", optarg,
					EXP_MAX_GIB);
				return 2;
			}
			break;
		case 's':
		case 'S':
		case 'G':
			if (bench_parse_option(b, c, optarg))
				return 2;
			break;
		case 'j':
			*json = optarg;
			break;
		case 'h':
			exp_usage(stdout);
			return 0;
		default:
			tool_bad_option(EXP_TOOL, argv, c);
			exp_usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, EXP_TOOL ": unexpected argument '%s'\n", argv[optind]);
		exp_usage(stderr);
		return 2;
	}
	return -1;
}

int main(int argc, char **argv)
{
	const char *json = NULL;
	struct exp *x = calloc(1, sizeof(*x));
	struct bench *b;
	struct tm tm;
	time_t now = time(NULL);
	uint64_t t0;
	bool ran;
	int rc;

	if (!x) {
		fprintf(stderr, EXP_TOOL ": out of memory\n");
		return 1;
	}
	b = &x->b;
	b->tool = EXP_TOOL;
	b->cycles = EXP_REPS + 1; /* bench_copy_floor: a warm-up and EXP_REPS repetitions */
	x->gib = EXP_DEFAULT_GIB;
	snprintf(b->step, sizeof(b->step), "setup");
	rc = exp_parse(x, argc, argv, &json);
	if (rc >= 0)
		goto out_free;
	b->cmdline = bench_join_args(argc, argv);
	if (!b->cmdline) {
		fprintf(stderr, EXP_TOOL ": out of memory\n");
		rc = 1;
		goto out_free;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	gmtime_r(&now, &tm);
	strftime(b->date, sizeof(b->date), "%Y-%m-%dT%H:%M:%SZ", &tm);

	t0 = bench_now_ns();
	exp_run(x);
	ran = b->drv_open;
	exp_cleanup(x);
	bench_close_driver(b); /* on the simulation: nothing may be left alive */
	if (ran)
		exp_table(x);
	if (json && exp_json(x, json))
		bench_fail(b, "cannot write %s: %s", json, strerror(errno));
	printf("run time %.1f s\n", (double)(bench_now_ns() - t0) / 1e9);
	if (b->failed) {
		printf(EXP_TOOL ": FAIL: %s\n", b->failure);
		rc = 1;
	} else {
		printf(EXP_TOOL ": PASS\n");
		rc = 0;
	}
out_free:
	free(x->h);
	free(x->st);
	free(x->alt_h);
	free(x->alt_st);
	free(x->stage);
	free(b->cmdline);
	free(x);
	return rc;
}
