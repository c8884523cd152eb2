/* SPDX-License-Identifier: MIT */
/*
 * faultbench.c - host-only orientation for issue 17 item 3 (no GPU, no library): how fast the
 * kernel hands out fresh anonymous memory, the cost a non-retaining HOST pause pays before
 * cuMemHostRegister. For N threads (each a contiguous share of one buffer) it times:
 *   populate  madvise(MADV_POPULATE_WRITE) of fresh pages (what host.c's workers do)
 *   touch     one write per 4 KiB page (kernels before 5.14)
 *   copyin    memcpy from a source buffer into fresh pages (the pageable/staging path:
 *             fault + zero + copy)
 *   refault   populate again after MADV_FREE of populated pages (CMS_HOST_PREP=lazyfree with
 *             no memory pressure: the pages are still there), then after MADV_DONTNEED
 * each with and without MADV_HUGEPAGE, and with MAP_HUGETLB where the kernel has reserved
 * huge pages. Prints GB/s (1e9 bytes/s) and VmRSS after each step.
 * Usage: cms-faultbench [GiB (default 2)] [threads... (default 1 2 4 8 16)]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

enum step { POPULATE, TOUCH, COPYIN };

struct job {
	char *p;
	const char *src;
	size_t len;
	enum step step;
	pthread_t t;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long rss_mib(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmRSS:", 6))
			kb = strtol(line + 6, NULL, 10);
	if (f)
		fclose(f);
	return kb / 1024;
}

static void *run(void *arg)
{
	struct job *j = arg;
	size_t i;

	switch (j->step) {
	case POPULATE:
		if (madvise(j->p, j->len, MADV_POPULATE_WRITE))
			for (i = 0; i < j->len; i += 4096) /* before 5.14 */
				j->p[i] = 1;
		break;
	case TOUCH:
		for (i = 0; i < j->len; i += 4096)
			j->p[i] = 1;
		break;
	case COPYIN:
		memcpy(j->p, j->src, j->len);
		break;
	}
	return NULL;
}

/* Runs step over [p, p + len) on n threads; GB/s. */
static double par(char *p, const char *src, size_t len, int n, enum step step)
{
	struct job *j = calloc((size_t)n, sizeof(*j));
	size_t share = (len / (size_t)n) & ~(size_t)4095, off = 0;
	double t0 = now(), t;
	int i;

	for (i = 0; i < n; i++) {
		j[i].p = p + off;
		j[i].src = src ? src + off : NULL;
		j[i].len = i == n - 1 ? len - off : share;
		j[i].step = step;
		off += j[i].len;
		pthread_create(&j[i].t, NULL, run, &j[i]);
	}
	for (i = 0; i < n; i++)
		pthread_join(j[i].t, NULL);
	t = now() - t0;
	free(j);
	return (double)len / t / 1e9;
}

static char *fresh(size_t len, int kind) /* 0 plain, 1 MADV_HUGEPAGE, 2 MAP_HUGETLB */
{
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | (kind == 2 ? MAP_HUGETLB : 0), -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	if (kind == 1)
		madvise(p, len, MADV_HUGEPAGE);
	return p;
}

int main(int argc, char **argv)
{
	static const char *const kinds[] = { "4k (no advice)", "MADV_HUGEPAGE", "MAP_HUGETLB" };
	size_t len = (size_t)((argc > 1 ? atof(argv[1]) : 2.0) * (double)(1ull << 30));
	int def[] = { 1, 2, 4, 8, 16 }, nt = argc > 2 ? argc - 2 : 5, k, i;
	char *src = fresh(len, 1), *p;

	if (!src)
		return 1;
	par(src, NULL, len, 4, POPULATE);
	memset(src, 7, len);
	printf("buffer %.2f GiB; VmRSS %ld MiB with the copy source\n",
	       (double)len / (double)(1ull << 30), rss_mib());
	for (k = 0; k < 3; k++) {
		for (i = 0; i < nt; i++) {
			int n = argc > 2 ? atoi(argv[i + 2]) : def[i];
			double pop, touch, copy, lazy, dontneed;

			if (!(p = fresh(len, k))) {
				printf("%-16s: mmap failed (no reserved huge pages?)\n", kinds[k]);
				break;
			}
			pop = par(p, NULL, len, n, POPULATE);
			madvise(p, len, MADV_FREE);
			lazy = par(p, NULL, len, n, POPULATE);
			madvise(p, len, MADV_DONTNEED);
			dontneed = par(p, NULL, len, n, POPULATE);
			munmap(p, len);
			p = fresh(len, k);
			touch = par(p, NULL, len, n, TOUCH);
			munmap(p, len);
			p = fresh(len, k);
			copy = par(p, src, len, n, COPYIN);
			printf("%-16s %2d threads: populate %6.2f  touch %6.2f  copyin %6.2f  "
			       "after MADV_FREE %7.2f  after MADV_DONTNEED %6.2f GB/s (VmRSS %ld "
			       "MiB)\n",
			       kinds[k], n, pop, touch, copy, lazy, dontneed, rss_mib());
			munmap(p, len);
		}
	}
	return 0;
}
