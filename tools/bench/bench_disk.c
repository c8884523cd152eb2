/* SPDX-License-Identifier: MIT */
/*
 * bench_disk.c - workload (g): an 8 GiB DISK region (8 x 1 GiB at --scale 1)
 * in --disk-dir, next to the disk's own sequential bandwidth measured in the
 * same run: a file of the same size written and fsync'ed, then read back
 * (O_DIRECT where the filesystem accepts it, else the page cache dropped with
 * posix_fadvise POSIX_FADV_DONTNEED), the best of the plain ways (transfer
 * size x threads, each thread one transfer at a time); one 64 MiB transfer
 * at a time (the library's way before the tunable disk_threads) is reported
 * beside it. Every cycle rewrites windows at the
 * start, middle and end of each allocation with a new generation before the pause and checks them,
 * and a window left at the first generation, after the resume.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "bench.h"

#define DISK_CHUNK (64ull << 20) /* the library's staging buffer size (CMS_DISK_CHUNK) */
#define DISK_ROOM_MARGIN (1ull << 30)

static struct {
	char dir[PATH_MAX];
	bool direct;
	bool measured;
	bool cache_dropped; /* O_DIRECT, or fadvise(DONTNEED) succeeded */
	const char *cache_how;
	double write_gbs, read_gbs;	  /* the floor: the best way of each direction */
	size_t write_xfer, read_xfer;	  /* its transfer size */
	unsigned write_depth, read_depth; /* its threads */
	double one_write_gbs,
		one_read_gbs; /* one 64 MiB transfer at a time (before disk_threads) */
	uint64_t bytes;
	char cannot[1000]; /* why (g) cannot run here */
} g;

void bench_disk_dir_set(const char *dir)
{
	snprintf(g.dir, sizeof(g.dir), "%s", dir);
}

const char *bench_disk_dir(void)
{
	const char *t;

	if (g.dir[0])
		return g.dir;
	t = getenv("TMPDIR");
	return t && *t ? t : "/tmp";
}

/* ---- the disk floor: the best of the plain ways (transfer size x threads) ---- */

/* The plain ways tried: every transfer size with every number of threads (each thread one
 * synchronous pread/pwrite at a time: the queue depth). */
static const size_t way_xfer[] = { 1ull << 20, 8ull << 20, DISK_CHUNK };
static const unsigned way_depth[] = { 1, 2, 4, 8 };
#define WAY_PROBE_MAX (1ull << 30) /* bytes each way is tried on before the best runs in full */

struct io_pass {
	int fd;
	bool write;
	size_t xfer;
	uint64_t total;
	_Atomic uint64_t next; /* the next transfer's offset */
	_Atomic int err;       /* the first errno */
};

static void *io_thread(void *arg)
{
	struct io_pass *p = arg;
	void *buf = NULL;
	uint64_t off;

	if (posix_memalign(&buf, 4096, p->xfer)) {
		atomic_store(&p->err, ENOMEM);
		return NULL;
	}
	memset(buf, 0x5a, p->xfer);
	while ((off = atomic_fetch_add(&p->next, p->xfer)) < p->total && !atomic_load(&p->err)) {
		size_t n = p->total - off < p->xfer ? (size_t)(p->total - off) : p->xfer;
		ssize_t got;

		n = (n + 4095) & ~(size_t)4095;
		got = p->write ? pwrite(p->fd, buf, n, (off_t)off) :
				 pread(p->fd, buf, n, (off_t)off);
		if (got != (ssize_t)n) {
			int e = got < 0 ? errno : EIO, zero = 0;

			atomic_compare_exchange_strong(&p->err, &zero, e);
		}
	}
	free(buf);
	return NULL;
}

/* One pass over [0, total) of fd: written then fsync'ed, or read (the page cache dropped
 * first unless O_DIRECT); GB/s in *gbs. 0, or -1 with the failure recorded. */
static int io_pass(struct bench *b, int fd, bool write, size_t xfer, unsigned depth, uint64_t total,
		   double *gbs)
{
	struct io_pass p = { .fd = fd, .write = write, .xfer = xfer, .total = total };
	pthread_t th[8];
	unsigned started = 0, i;
	uint64_t t0;

	if (!write && !g.direct)
		(void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	t0 = bench_now_ns();
	for (i = 1; i < depth; i++) /* the calling thread is the first */
		if (!pthread_create(&th[started], NULL, io_thread, &p))
			started++;
	io_thread(&p);
	for (i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	if (!atomic_load(&p.err) && write && fsync(fd))
		atomic_store(&p.err, errno);
	*gbs = (double)total / (double)(bench_now_ns() - t0);
	if (atomic_load(&p.err)) {
		bench_fail(b,
			   "(g) floor: %s of %" PRIu64
			   " bytes (%zu-byte transfers, %u threads): %s",
			   write ? "write" : "read", total, xfer, depth,
			   strerror(atomic_load(&p.err)));
		return -1;
	}
	if (started + 1 < depth) /* fewer threads than asked: not that way */
		*gbs = 0;
	return 0;
}

/* Tries every plain way on the first bytes of fd for one direction; the best in *best. */
static int best_way(struct bench *b, int fd, bool write, uint64_t total, int *best)
{
	uint64_t probe = total < WAY_PROBE_MAX ? total : WAY_PROBE_MAX;
	double gbs, top = -1;
	size_t x, d;

	for (x = 0; x < sizeof(way_xfer) / sizeof(way_xfer[0]); x++)
		for (d = 0; d < sizeof(way_depth) / sizeof(way_depth[0]); d++) {
			if (io_pass(b, fd, write, way_xfer[x], way_depth[d], probe, &gbs))
				return -1;
			if (gbs > top) {
				top = gbs;
				*best = (int)(x * 8 + d);
			}
		}
	return 0;
}

/*
 * The disk floor: a new file of total bytes in dir written and fsync'ed, then read back, one
 * 64 MiB transfer at a time (the first pass), then every plain
 * way tried on its first GiB and the best of each direction run over the whole file: the floor.
 */
static int disk_floor(struct bench *b, uint64_t total)
{
	char path[PATH_MAX + 64];
	int fd, rc = -1, bw = 0, br = 0;

	snprintf(path, sizeof(path), "%s/cms-bench-floor-%ld.tmp", bench_disk_dir(),
		 (long)getpid());
	g.direct = true;
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_DIRECT, 0600);
	if (fd < 0 && errno == EINVAL) {
		g.direct = false;
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	}
	if (fd < 0) {
		bench_fail(b, "(g) cannot create %s: %s", path, strerror(errno));
		return -1;
	}
	if (g.direct) {
		g.cache_dropped = true;
		g.cache_how = "O_DIRECT";
	} else {
		g.cache_dropped = !posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		g.cache_how = g.cache_dropped ? "posix_fadvise(DONTNEED)" :
						"not dropped (fadvise failed)";
	}
	if (io_pass(b, fd, true, DISK_CHUNK, 1, total, &g.one_write_gbs) ||
	    io_pass(b, fd, false, DISK_CHUNK, 1, total, &g.one_read_gbs) ||
	    best_way(b, fd, true, total, &bw) || best_way(b, fd, false, total, &br))
		goto out;
	g.write_xfer = way_xfer[bw / 8];
	g.write_depth = way_depth[bw % 8];
	g.read_xfer = way_xfer[br / 8];
	g.read_depth = way_depth[br % 8];
	if (io_pass(b, fd, true, g.write_xfer, g.write_depth, total, &g.write_gbs) ||
	    io_pass(b, fd, false, g.read_xfer, g.read_depth, total, &g.read_gbs))
		goto out;
	/* one 64 MiB transfer at a time is one of the ways: the floor is never below it */
	if (g.one_write_gbs > g.write_gbs) {
		g.write_gbs = g.one_write_gbs;
		g.write_xfer = DISK_CHUNK;
		g.write_depth = 1;
	}
	if (g.one_read_gbs > g.read_gbs) {
		g.read_gbs = g.one_read_gbs;
		g.read_xfer = DISK_CHUNK;
		g.read_depth = 1;
	}
	g.measured = true;
	g.bytes = total;
	printf("  disk floor in %s (%s I/O, page cache: %s), best of %zu plain ways: write+fsync "
	       "%.2f GB/s (%zu MiB x %u threads), read %.2f GB/s (%zu MiB x %u threads); one "
	       "64 MiB transfer at a time: %.2f / %.2f GB/s\n",
	       bench_disk_dir(), g.direct ? "O_DIRECT" : "buffered", g.cache_how,
	       sizeof(way_xfer) / sizeof(way_xfer[0]) * (sizeof(way_depth) / sizeof(way_depth[0])),
	       g.write_gbs, g.write_xfer >> 20, g.write_depth, g.read_gbs, g.read_xfer >> 20,
	       g.read_depth, g.one_write_gbs, g.one_read_gbs);
	rc = 0;
out:
	close(fd);
	unlink(path);
	return rc;
}

/* Pattern word k of allocation a, generation gen. */
static uint64_t word(uint64_t a, uint64_t gen, uint64_t k)
{
	uint64_t x = (a << 40) ^ (gen << 56) ^ k ^ 0x9e3779b97f4a7c15ull;

	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ull;
	return x ^ (x >> 29);
}

/* Writes (check false) or checks [off, off + len) of allocation a at ptr with generation gen. */
static int window(struct bench *b, uint64_t ptr, uint64_t a, uint64_t gen, uint64_t off,
		  uint64_t len, bool check)
{
	uint64_t done, k;

	for (done = 0; done < len; done += BENCH_STAGE_BYTES) {
		uint64_t n = len - done < BENCH_STAGE_BYTES ? len - done : BENCH_STAGE_BYTES;
		uint64_t first = (off + done) / 8;

		if (!check) {
			for (k = 0; k < n / 8; k++)
				b->stage[k] = word(a, gen, first + k);
			BENCH_CU(b, fail, cuMemcpyHtoD, ptr + off + done, b->stage, n);
			continue;
		}
		BENCH_CU(b, fail, cuMemcpyDtoH, b->stage, ptr + off + done, n);
		for (k = 0; k < n / 8; k++)
			if (!bench_check(b, b->stage[k] == word(a, gen, first + k),
					 "(g) allocation %" PRIu64 " word %" PRIu64
					 " holds 0x%016" PRIx64
					 " after the resume, want generation "
					 "%" PRIu64,
					 a, first + k, b->stage[k], gen))
				return -1;
	}
	return 0;
fail:
	return -1;
}

/* Windows of an allocation of size: start, middle, end (rewritten), and a quarter (kept). */
static void windows(uint64_t size, uint64_t *len, uint64_t *off)
{
	*len = size / 16 < (2ull << 20) ? (size / 16) & ~7ull : (2ull << 20);
	if (!*len)
		*len = 8;
	off[0] = 0;
	off[1] = (size / 2) & ~7ull;
	off[2] = (size - *len) & ~7ull;
	off[3] = (size / 4) & ~7ull; /* generation 0 from the fill */
}

int bench_disk_run(struct bench *b, struct bench_work *w)
{
	cms_context_options copts = CMS_CONTEXT_OPTIONS_INIT;
	cms_region_options ropts = CMS_REGION_OPTIONS_INIT;
	cms_pause_result pr = { .struct_size = sizeof(pr) };
	cms_region_info info = { .struct_size = sizeof(info) };
	cms_context *ctx = NULL;
	cms_region *region = NULL;
	uint64_t *ptr = NULL, i, need, wl, off[4], t0, room, slowest = 0;
	char b1[32], b2[32];
	struct statvfs sv;
	unsigned int c;
	size_t fr = 0, tot = 0;
	int k, rc = -1;

	bench_scale(b, w->count0, w->size0, &w->count, &w->size);
	need = w->count * w->size;
	printf("\n(g) %" PRIu64 " x %s DISK in %s, %s (%s at --scale 1%s)\n", w->count,
	       bench_fmt_bytes(b1, sizeof(b1), w->size), bench_disk_dir(),
	       bench_fmt_bytes(b2, sizeof(b2), need), w->what, bench_coalesce_note(w));
	snprintf(b->step, sizeof(b->step), "workload (g)");
	if (statvfs(bench_disk_dir(), &sv)) {
		snprintf(g.cannot, sizeof(g.cannot), "cannot statvfs %.600s: %s", bench_disk_dir(),
			 strerror(errno));
		goto skip;
	}
	room = (uint64_t)sv.f_bavail * sv.f_frsize;
	if (room < need + DISK_ROOM_MARGIN) {
		snprintf(g.cannot, sizeof(g.cannot),
			 "%.600s has %s free, needs %s + 1 GiB (--disk-dir, --scale)",
			 bench_disk_dir(), bench_fmt_bytes(b1, sizeof(b1), room),
			 bench_fmt_bytes(b2, sizeof(b2), need));
		goto skip;
	}
	w->ran = true;
	BENCH_CU(b, fail, cuMemGetInfo, &fr, &tot);
	if (need > fr) {
		bench_fail(b, "(g) needs %s of device memory, %s is free; use a larger --scale",
			   bench_fmt_bytes(b1, sizeof(b1), need),
			   bench_fmt_bytes(b2, sizeof(b2), fr));
		goto fail;
	}
	if (disk_floor(b, need))
		goto fail;
	w->pause_ns = calloc(b->cycles, sizeof(*w->pause_ns));
	w->resume_ns = calloc(b->cycles, sizeof(*w->resume_ns));
	ptr = calloc(w->count, sizeof(*ptr));
	if (!w->pause_ns || !w->resume_ns || !ptr) {
		bench_fail(b, "(g) out of host memory");
		goto fail;
	}
	w->hwm_reset = bench_reset_hwm();
	w->hwm_before = bench_proc_status("VmHWM");
	copts.driver_path = b->drv_path;
	BENCH_CMS(b, fail, cms_context_create, &copts, &ctx);
	ropts.device = BENCH_DEVICE;
	ropts.policy = CMS_POLICY_DISK;
	ropts.flags = w->flags;
	BENCH_CMS(b, fail, cms_region_create, ctx, "bench_g", &ropts, &region);
	BENCH_CMS(b, fail, cms_region_disk_dir_set, region, bench_disk_dir());
	for (i = 0; i < w->count; i++)
		BENCH_CMS(b, fail, cms_alloc, region, w->size, &ptr[i]);
	BENCH_CMS(b, fail, cms_region_info_get, region, &info);
	w->logical = info.logical_bytes;
	w->physical = info.physical_bytes;
	w->region_flags = info.flags;
	windows(w->size, &wl, off);
	w->window = wl;
	t0 = bench_now_ns();
	for (i = 0; i < w->count; i++)
		if (window(b, ptr[i], i, 0, 0, w->size & ~7ull, false))
			goto fail;
	w->fill_s = (double)(bench_now_ns() - t0) / 1e9;
	for (c = 0; c < b->cycles; c++) {
		for (i = 0; i < w->count; i++) /* new content: a stale file would show */
			for (k = 0; k < 3; k++)
				if (window(b, ptr[i], i, c + 1, off[k], wl, false))
					goto fail;
		BENCH_CU(b, fail, cuCtxSynchronize);
		t0 = bench_now_ns();
		BENCH_CMS(b, fail, cms_region_pause, region, NULL, c ? NULL : &pr);
		w->pause_ns[c] = bench_now_ns() - t0;
		if (!c) {
			w->rss_after_pause = bench_proc_status("VmRSS");
			BENCH_CMS(b, fail, cms_region_info_get, region, &info);
			w->backup_after_pause = info.backup_bytes;
			w->pinned_after_pause = info.pinned_bytes; /* 0: staging is per call */
			w->bytes_backed_up = pr.bytes_backed_up;
			if (!bench_check(b, pr.bytes_backed_up == w->logical,
					 "(g) the pause wrote %" PRIu64 " bytes, want %" PRIu64,
					 pr.bytes_backed_up, w->logical))
				goto fail;
		}
		t0 = bench_now_ns();
		BENCH_CMS(b, fail, cms_region_resume, region, NULL, NULL);
		w->resume_ns[c] = bench_now_ns() - t0;
		w->cycles_done = c + 1;
		for (i = 0; i < w->count; i++) {
			cms_pointer_info pi = { .struct_size = sizeof(pi) };

			BENCH_CMS(b, fail, cms_pointer_info_get, ctx, ptr[i], &pi);
			if (!bench_check(b, pi.base == ptr[i] && pi.state == CMS_STATE_ACTIVE,
					 "(g) allocation %" PRIu64 " moved or is not active", i))
				goto fail;
			for (k = 0; k < 4; k++)
				if (window(b, ptr[i], i, k < 3 ? c + 1 : 0, off[k], wl, true))
					goto fail;
		}
		printf("  cycle %u: pause %.3f s (%.2f GB/s), resume %.3f s (%.2f GB/s), "
		       "content checked\n",
		       c + 1, (double)w->pause_ns[c] / 1e9, (double)need / (double)w->pause_ns[c],
		       (double)w->resume_ns[c] / 1e9, (double)need / (double)w->resume_ns[c]);
		if (w->pause_ns[c] + w->resume_ns[c] > slowest)
			slowest = w->pause_ns[c] + w->resume_ns[c];
		if (c == 1 && c + 1 < b->cycles && slowest > BENCH_SLOW_CYCLE_NS) {
			w->truncated = true;
			printf("  stopped after 2 cycles: a cycle took %.1f s (> %.0f s)\n",
			       (double)slowest / 1e9, (double)BENCH_SLOW_CYCLE_NS / 1e9);
			break;
		}
	}
	w->hwm_after = bench_proc_status("VmHWM");
	rc = 0;
	goto out;
skip:
	if (b->only_given) { /* asked for by name: not running it fails the run */
		snprintf(w->note, sizeof(w->note), "not run: %s", g.cannot);
		bench_fail(b, "(g) was asked for (--only) but cannot run: %s", g.cannot);
		w->failed = true;
		return -1;
	}
	snprintf(w->note, sizeof(w->note), "skipped: %s", g.cannot);
	printf("  %s\n", w->note);
	return 0;
fail:
	w->failed = true;
out:
	if (ctx) {
		cms_status st = cms_context_destroy(ctx);

		if (st)
			bench_cms_fail(b, st, "cms_context_destroy");
	}
	free(ptr);
	if (!rc && g.measured) {
		double p = bench_work_median_ms(w, BENCH_PAUSE),
		       r = bench_work_median_ms(w, BENCH_RESUME);

		if (isnan(p))
			p = bench_work_first_ms(w, BENCH_PAUSE);
		if (isnan(r))
			r = bench_work_first_ms(w, BENCH_RESUME);
		snprintf(w->note, sizeof(w->note),
			 "disk floor (%s, cache %s): write+fsync %.2f GB/s, read %.2f GB/s; "
			 "median pause %.2f GB/s = %.0f%% of write, resume %.2f GB/s = %.0f%% of "
			 "read (target >= 90%%)%s",
			 g.direct ? "O_DIRECT" : "buffered", g.cache_how, g.write_gbs, g.read_gbs,
			 (double)need / (p * 1e6), 100.0 * (double)need / (p * 1e6) / g.write_gbs,
			 (double)need / (r * 1e6), 100.0 * (double)need / (r * 1e6) / g.read_gbs,
			 w->truncated ? "; stopped after 2 cycles (a cycle took > 10 s)" : "");
	}
	return rc;
}

void bench_disk_report(const struct bench *b, const struct bench_work *w)
{
	double ms[2][2];
	int m, p;

	(void)b;
	if (!w->selected)
		return;
	printf("\n(g) DISK policy in %s (%s)\n", bench_disk_dir(), w->what);
	if (!w->ran || !w->cycles_done || !g.measured) {
		printf("  %s\n", w->note[0] ? w->note : "no cycle completed");
		return;
	}
	for (m = 0; m < 2; m++)
		for (p = 0; p < 2; p++)
			ms[m][p] = m ? bench_work_median_ms(w, p ? BENCH_PAUSE : BENCH_RESUME) :
				       bench_work_first_ms(w, p ? BENCH_PAUSE : BENCH_RESUME);
	printf("  %-7s %-7s %10s %9s  %-22s %6s  %s\n", "cycle", "phase", "ms", "GB/s",
	       "disk floor", "ratio", "target");
	for (m = 0; m < 2; m++)
		for (p = 1; p >= 0; p--) {
			double gbs = (double)w->logical / (ms[m][p] * 1e6);
			double fl = p ? g.write_gbs : g.read_gbs;

			if (isnan(ms[m][p]))
				continue;
			printf("  %-7s %-7s %10.1f %9.2f  %-5s %6.2f GB/s      %5.0f%%  >= 90%% "
			       "%s\n",
			       m ? "median" : "first", p ? "pause" : "resume", ms[m][p], gbs,
			       p ? "write" : "read", fl, 100.0 * gbs / fl,
			       b->sim || b->scale != 1 ? "(not judged)" :
			       gbs >= 0.9 * fl	       ? "yes" :
							 "NO");
		}
	printf("  disk floor: %s I/O, page cache %s; the best plain way: write %zu MiB x %u "
	       "threads, read %zu MiB x %u threads; one 64 MiB transfer at a time (the library "
	       "before "
	       "disk_threads) %.2f / %.2f GB/s\n",
	       g.direct ? "O_DIRECT" : "buffered", g.cache_how, g.write_xfer >> 20, g.write_depth,
	       g.read_xfer >> 20, g.read_depth, g.one_write_gbs, g.one_read_gbs);
}

void bench_disk_json(const struct bench *b, const struct bench_work *w, FILE *f)
{
	double p = bench_work_median_ms(w, BENCH_PAUSE), r = bench_work_median_ms(w, BENCH_RESUME);
	double pg, rg;

	if (!g.measured) {
		fputs(", \"disk_floor\": null", f);
		return;
	}
	if (isnan(p))
		p = bench_work_first_ms(w, BENCH_PAUSE);
	if (isnan(r))
		r = bench_work_first_ms(w, BENCH_RESUME);
	pg = (double)w->logical / (p * 1e6);
	rg = (double)w->logical / (r * 1e6);
	fprintf(f, ", \"disk_floor\": {\"dir\": ");
	fputc('"', f);
	for (const char *c = bench_disk_dir(); *c; c++)
		fprintf(f,
			*c == '"' || *c == '\\'	 ? "\\%c" :
			(unsigned char)*c < 0x20 ? "?" :
						   "%c",
			*c);
	fputc('"', f);
	fprintf(f,
		", \"io\": \"%s\", \"cache\": \"%s\", \"cache_dropped\": %s, \"bytes\": %llu, "
		"\"write_gbs\": ",
		g.direct ? "O_DIRECT" : "buffered", g.cache_how, g.cache_dropped ? "true" : "false",
		(unsigned long long)g.bytes);
	bench_json_num(f, g.write_gbs);
	fputs(", \"read_gbs\": ", f);
	bench_json_num(f, g.read_gbs);
	fputs(", \"median_pause_gbs\": ", f);
	bench_json_num(f, pg);
	fputs(", \"median_resume_gbs\": ", f);
	bench_json_num(f, rg);
	fputs(", \"pause_to_write\": ", f);
	bench_json_num(f, pg / g.write_gbs);
	fputs(", \"resume_to_read\": ", f);
	bench_json_num(f, rg / g.read_gbs);
	fprintf(f,
		", \"write_way\": {\"transfer\": %zu, \"threads\": %u}, \"read_way\": "
		"{\"transfer\": %zu, \"threads\": %u}, \"one_64m_write_gbs\": ",
		g.write_xfer, g.write_depth, g.read_xfer, g.read_depth);
	bench_json_num(f, g.one_write_gbs);
	fputs(", \"one_64m_read_gbs\": ", f);
	bench_json_num(f, g.one_read_gbs);
	fprintf(f, ", \"target\": 0.9, \"judged\": %s}",
		!b->sim && b->scale == 1 ? "true" : "false");
}
