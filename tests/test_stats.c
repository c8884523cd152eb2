/* SPDX-License-Identifier: MIT */
/*
 * test_stats.c - observability (since 1.2): the cumulative counters of
 * regions (cms_region_stats_get) after known sequences of pause, resume and
 * swap, checked against exact byte totals and the calls' own results;
 * failures counted by status under injected faults (simulation); and
 * cms_region_list, also while other threads create and destroy regions
 * (built with ThreadSanitizer by CI's sanitizer job); the CMS_LOG line format.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define NA 3 /* allocations per region */
static const uint64_t sizes[NA] = { 1 * MiB + 4096, 3 * MiB, 100 * 1024 };

static cms_region_stats stats(cms_region *r)
{
	cms_region_stats s;

	memset(&s, 0xa5, sizeof(s));
	s.struct_size = sizeof(s);
	ck_ok(cms_region_stats_get(r, &s));
	return s;
}

static cms_region_info info(cms_region *r)
{
	cms_region_info i = { .struct_size = sizeof(i) };

	ck_ok(cms_region_info_get(r, &i));
	return i;
}

static void alloc_all(cms_region *r, uint64_t *p)
{
	size_t i;

	for (i = 0; i < NA; i++)
		ck_ok(cms_alloc(r, sizes[i], &p[i]));
}

static uint64_t logical(void)
{
	return sizes[0] + sizes[1] + sizes[2];
}

/* Every counter of s is zero (identity fields aside). */
static void ck_counters_zero(const cms_region_stats *s)
{
	size_t k;

	ck_assert_uint_eq(s->pauses + s->resumes + s->swaps + s->failures, 0);
	ck_assert_uint_eq(s->bytes_released + s->bytes_backed, 0);
	ck_assert_uint_eq(s->bytes_to_store + s->bytes_from_store, 0);
	ck_assert_uint_eq(s->pause_ns + s->resume_ns, 0);
	for (k = 0; k < CMS_STATS_STATUS_SLOTS; k++)
		ck_assert_uint_eq(s->failures_by_status[k], 0);
}

/* A deterministic sequence: counts and byte totals exact, equal to the calls' results. */
START_TEST(counters_sequence)
{
	cms_context *ctx = t_ctx();
	cms_region *h = t_region(ctx, "h", 0, CMS_POLICY_HOST);
	cms_region *d = t_region(ctx, "d", 0, CMS_POLICY_DISCARD);
	cms_pause_result pr = { .struct_size = sizeof(pr) };
	cms_resume_result rr = { .struct_size = sizeof(rr) };
	uint64_t ph[NA], pd[NA], phys_h, phys_d, released = 0, copied = 0, backed = 0, back = 0;
	cms_region_stats sh, sd;
	int cycle;

	alloc_all(h, ph);
	alloc_all(d, pd);
	sh = stats(h);
	ck_assert_str_eq(sh.tag, "h");
	ck_assert_int_eq(sh.device, 0);
	ck_assert_uint_eq(sh.policy, CMS_POLICY_HOST);
	ck_assert_uint_eq(sh.state, CMS_STATE_ACTIVE);
	ck_assert_uint_lt(sh.region_id, stats(d).region_id);
	ck_counters_zero(&sh);
	phys_h = info(h).physical_bytes;
	phys_d = info(d).physical_bytes;
	ck_assert_uint_ge(phys_h, logical());

	for (cycle = 0; cycle < 3; cycle++) { /* both regions, by tag NULL */
		ck_assert_int_eq(t_fill(0, ph[1], sizes[1], 7 + cycle), 0);
		ck_ok(cms_pause(ctx, NULL, NULL, &pr));
		released += pr.bytes_released;
		copied += pr.bytes_backed_up;
		ck_ok(cms_resume(ctx, NULL, NULL, &rr));
		backed += rr.bytes_backed;
		back += rr.bytes_restored;
		ck_assert_int_eq(t_check(0, ph[1], sizes[1], 7 + cycle), -1);
	}
	ck_assert_int_eq(cms_pause(ctx, "h", NULL, NULL), CMS_OK);	    /* one more, h only */
	ck_status(cms_pause(ctx, "h", NULL, NULL), CMS_ERR_ALREADY_PAUSED); /* not counted */

	sh = stats(h);
	sd = stats(d);
	ck_assert_uint_eq(sh.pauses, 4);
	ck_assert_uint_eq(sh.resumes, 3);
	ck_assert_uint_eq(sd.pauses, 3);
	ck_assert_uint_eq(sd.resumes, 3);
	ck_assert_uint_eq(sh.swaps + sd.swaps + sh.failures + sd.failures, 0);
	ck_assert_uint_eq(sh.state, CMS_STATE_PAUSED);
	ck_assert_uint_eq(sh.bytes_released, 4 * phys_h);
	ck_assert_uint_eq(sd.bytes_released, 3 * phys_d);
	ck_assert_uint_eq(sh.bytes_backed, 3 * phys_h);
	ck_assert_uint_eq(sd.bytes_backed, 3 * phys_d);
	ck_assert_uint_eq(sh.bytes_to_store, 4 * logical()); /* HOST copies the logical bytes */
	ck_assert_uint_eq(sh.bytes_from_store, 3 * logical());
	ck_assert_uint_eq(sd.bytes_to_store + sd.bytes_from_store, 0); /* DISCARD keeps nothing */
	/* The per-region counters add up to what the calls reported (the last pause aside). */
	ck_assert_uint_eq(sh.bytes_released - phys_h + sd.bytes_released, released);
	ck_assert_uint_eq(sh.bytes_to_store - logical(), copied);
	ck_assert_uint_eq(sh.bytes_backed + sd.bytes_backed, backed);
	ck_assert_uint_eq(sh.bytes_from_store, back);
	ck_assert_uint_gt(sh.pause_ns, 0);
	ck_assert_uint_gt(sh.resume_ns, 0);

	/* A swap counts on both sides. */
	ck_ok(cms_swap(ctx, "d", "h", NULL, NULL, NULL, NULL));
	sh = stats(h);
	sd = stats(d);
	ck_assert_uint_eq(sh.resumes, 4);
	ck_assert_uint_eq(sh.swaps, 1);
	ck_assert_uint_eq(sd.pauses, 4);
	ck_assert_uint_eq(sd.swaps, 1);
	ck_assert_uint_eq(sh.bytes_from_store, 4 * logical());
	ck_assert_uint_eq(sd.bytes_released, 4 * phys_d);
	ck_assert_uint_eq(sh.bytes_backed, 4 * phys_h);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* DISK: content bytes written to and read back from the region's file, as the results say. */
START_TEST(counters_disk)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "disk", 0, CMS_POLICY_DISK);
	cms_pause_result pr = { .struct_size = sizeof(pr) };
	cms_resume_result rr = { .struct_size = sizeof(rr) };
	char dir[] = "/tmp/cms-stats-XXXXXX";
	uint64_t p[NA];
	cms_region_stats s;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_ok(cms_region_disk_dir_set(r, dir));
	alloc_all(r, p);
	ck_ok(cms_region_pause(r, NULL, &pr));
	ck_ok(cms_region_resume(r, NULL, &rr));
	s = stats(r);
	ck_assert_uint_eq(s.bytes_to_store, logical());
	ck_assert_uint_eq(s.bytes_to_store, pr.bytes_backed_up);
	ck_assert_uint_eq(s.bytes_from_store, logical());
	ck_assert_uint_eq(s.bytes_from_store, rr.bytes_restored);
	ck_assert_uint_eq(s.bytes_released, pr.bytes_released);
	ck_ok(cms_context_destroy(ctx));
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* Failures by status under injected driver faults: nothing else counted, rollback intact. */
START_TEST(counters_failures)
{
	const struct t_sim *sim;
	cms_context *ctx;
	cms_region *h, *d;
	uint64_t ph[NA], pd[NA];
	cms_region_stats sh, sd;

	if (!t_is_sim()) /* a GPU: nothing to inject faults with */
		return;
	sim = t_sim();
	ctx = t_ctx();
	h = t_region(ctx, "h", 0, CMS_POLICY_HOST);
	d = t_region(ctx, "d", 0, CMS_POLICY_ZERO);
	alloc_all(h, ph);
	alloc_all(d, pd);
	ck_assert_int_eq(t_fill(0, ph[0], sizes[0], 3), 0);
	ck_ok(cms_pause(ctx, NULL, NULL, NULL));
	/* The resume's second cuMemCreate finds no memory: both regions count the failure. */
	ck_assert_int_eq(sim->fail_call("cuMemCreate", 2, CUDA_ERROR_OUT_OF_MEMORY), 0);
	ck_status(cms_resume(ctx, NULL, NULL, NULL), CMS_ERR_OUT_OF_DEVICE_MEMORY);
	/* A driver failure on the next region pause. */
	ck_ok(cms_region_resume(h, NULL, NULL));
	ck_assert_int_eq(sim->fail_call("cuMemUnmap", 1, CUDA_ERROR_UNKNOWN), 0);
	ck_status(cms_region_pause(h, NULL, NULL), CMS_ERR_DRIVER);
	ck_assert_int_eq(t_check(0, ph[0], sizes[0], 3), -1); /* rolled back with its content */
	sim->clear_faults();

	sh = stats(h);
	sd = stats(d);
	ck_assert_uint_eq(sh.failures, 2);
	ck_assert_uint_eq(sh.failures_by_status[-CMS_ERR_OUT_OF_DEVICE_MEMORY], 1);
	ck_assert_uint_eq(sh.failures_by_status[-CMS_ERR_DRIVER], 1);
	ck_assert_uint_eq(sd.failures, 1);
	ck_assert_uint_eq(sd.failures_by_status[-CMS_ERR_OUT_OF_DEVICE_MEMORY], 1);
	ck_assert_uint_eq(sd.failures_by_status[-CMS_ERR_DRIVER], 0);
	ck_assert_uint_eq(sh.pauses, 1); /* the first pause; the failed one is not a pause */
	ck_assert_uint_eq(sh.resumes, 1);
	ck_assert_uint_eq(sd.resumes, 0);
	ck_assert_uint_eq(sh.bytes_released, info(h).physical_bytes);
	ck_assert_uint_eq(sh.bytes_backed, info(h).physical_bytes);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

START_TEST(stats_arguments)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "a", 0, CMS_POLICY_HOST);
	cms_region_stats s = { .struct_size = sizeof(s) }, v[2];
	size_t w = 9, n = 9;
	unsigned char big[sizeof(cms_region_stats) + 16];

	ck_status(cms_region_stats_get(NULL, &s), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_region_stats_get(r, NULL), CMS_ERR_INVALID_ARGUMENT);
	/* Below the 1.2 size (its last field resume_ns): fields appended later do not move it. */
	s.struct_size = offsetof(cms_region_stats, resume_ns);
	ck_status(cms_region_stats_get(r, &s), CMS_ERR_STRUCT_SIZE);
	/* A larger struct: written up to ours, the rest zeroed, struct_size kept. */
	memset(big, 0xee, sizeof(big));
	*(size_t *)(void *)big = sizeof(big);
	ck_ok(cms_region_stats_get(r, (cms_region_stats *)(void *)big));
	ck_assert_uint_eq(*(size_t *)(void *)big, sizeof(big));
	ck_assert_uint_eq(big[sizeof(big) - 1], 0);
	ck_assert_str_eq(((cms_region_stats *)(void *)big)->tag, "a");

	ck_status(cms_region_list(NULL, v, 2, &w, &n), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_region_list(ctx, NULL, 2, &w, &n), CMS_ERR_INVALID_ARGUMENT);
	v[0].struct_size = sizeof(v[0]);
	v[1].struct_size = sizeof(v[0]) + 8; /* entries must agree */
	ck_status(cms_region_list(ctx, v, 2, &w, &n), CMS_ERR_STRUCT_SIZE);
	ck_assert_uint_eq(w, 9); /* nothing written */
	ck_ok(cms_region_list(ctx, NULL, 0, &w, &n));
	ck_assert_uint_eq(w, 0);
	ck_assert_uint_eq(n, 1);
	ck_ok(cms_region_list(ctx, NULL, 0, NULL, NULL));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* Enumeration: creation order, a short buffer, destroyed regions left out. */
START_TEST(list_regions)
{
	cms_context *ctx = t_ctx();
	cms_region *r[4];
	cms_region_stats v[4];
	char tag[8];
	size_t i, w, n;

	for (i = 0; i < 4; i++) {
		snprintf(tag, sizeof(tag), "t%zu", i);
		r[i] = t_region(ctx, tag, 0, (uint32_t)(i % 3));
	}
	ck_ok(cms_region_pause(r[2], NULL, NULL));
	for (i = 0; i < 4; i++)
		v[i].struct_size = sizeof(v[i]);
	ck_ok(cms_region_list(ctx, v, 4, &w, &n));
	ck_assert_uint_eq(w, 4);
	ck_assert_uint_eq(n, 4);
	for (i = 0; i < 4; i++) {
		snprintf(tag, sizeof(tag), "t%zu", i);
		ck_assert_str_eq(v[i].tag, tag);
		ck_assert_uint_eq(v[i].policy, i % 3);
		ck_assert_uint_eq(v[i].pauses, i == 2);
		ck_assert_uint_eq(v[i].state, i == 2 ? CMS_STATE_PAUSED : CMS_STATE_ACTIVE);
	}
	ck_ok(cms_region_list(ctx, v, 2, &w, &n)); /* short: the first two, total 4 */
	ck_assert_uint_eq(w, 2);
	ck_assert_uint_eq(n, 4);
	ck_ok(cms_region_destroy(r[1]));
	ck_ok(cms_region_list(ctx, v, 4, &w, &n));
	ck_assert_uint_eq(w, 3);
	ck_assert_uint_eq(n, 3);
	ck_assert_str_eq(v[1].tag, "t2");
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* Listing while other threads create and destroy regions (run under ThreadSanitizer). */
struct churn {
	cms_context *ctx;
	int id;
	int rounds;
};

static void *churn_main(void *arg)
{
	struct churn *c = arg;
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	char tag[16];
	int i;

	for (i = 0; i < c->rounds; i++) {
		cms_region *r = NULL;
		uint64_t p;

		snprintf(tag, sizeof(tag), "c%d-%d", c->id, i % 4);
		if (cms_region_create(c->ctx, tag, &o, &r))
			return (void *)1;
		if (cms_alloc(r, 4096, &p) || (i % 2 && cms_region_pause(r, NULL, NULL)) ||
		    cms_region_destroy(r))
			return (void *)1;
	}
	return NULL;
}

START_TEST(list_concurrent_destroy)
{
	cms_context *ctx = t_ctx();
	struct churn c[2];
	pthread_t th[2];
	cms_region_stats v[8];
	size_t i, w, n, seen = 0;
	int k;
	void *ret;

	t_region(ctx, "stay", 0, CMS_POLICY_DISCARD);
	for (k = 0; k < 2; k++) {
		c[k] = (struct churn){ ctx, k, 200 };
		ck_assert_int_eq(pthread_create(&th[k], NULL, churn_main, &c[k]), 0);
	}
	for (k = 0; k < 300; k++) {
		for (i = 0; i < 8; i++)
			v[i].struct_size = sizeof(v[i]);
		ck_ok(cms_region_list(ctx, v, 8, &w, &n));
		ck_assert_uint_ge(w, 1);
		ck_assert_uint_le(w, 3); /* "stay" and at most one per thread */
		ck_assert_uint_le(w, n);
		ck_assert_str_eq(v[0].tag, "stay");
		for (i = 1; i < w; i++)
			ck_assert_int_eq(v[i].tag[0], 'c');
		seen += w;
	}
	for (k = 0; k < 2; k++) {
		ck_assert_int_eq(pthread_join(th[k], &ret), 0);
		ck_assert_ptr_null(ret);
	}
	ck_assert_uint_ge(seen, 300);
	ck_ok(cms_region_list(ctx, v, 8, &w, &n));
	ck_assert_uint_eq(w, 1);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* CMS_LOG lines on stderr: "YYYY-MM-DDTHH:MM:SS.uuuuuuZ cumemsaver[PID:TID] level: text". */
START_TEST(log_line_format)
{
	char path[] = "/tmp/cms-log-XXXXXX", buf[4096], level[16], *line;
	int fd = mkstemp(path), saved = dup(2), y, mo, d, h, mi, sec, us, pid, tid, n = 0;
	struct tm tm = { 0 };
	cms_context *ctx;
	cms_region *r;
	uint64_t p;
	ssize_t len;
	time_t when;
	struct timespec before, after; /* the log's clock: time(NULL) lags it by up to a tick */

	ck_assert_int_ge(fd, 0);
	ck_assert_int_ge(saved, 0);
	setenv("CMS_LOG", "2", 1); /* read at the first line of this (forked) process */
	ck_assert_int_eq(dup2(fd, 2), 2);
	ctx = t_ctx();
	r = t_region(ctx, "logged", 0, CMS_POLICY_DISCARD);
	ck_ok(cms_alloc(r, MiB, &p));
	ck_assert_int_eq(clock_gettime(CLOCK_REALTIME, &before), 0);
	ck_ok(cms_pause(ctx, NULL, NULL, NULL)); /* an info line: "paused 1 regions, ..." */
	ck_assert_int_eq(clock_gettime(CLOCK_REALTIME, &after), 0);
	ck_ok(cms_context_destroy(ctx));
	fflush(stderr);
	ck_assert_int_eq(dup2(saved, 2), 2);
	len = pread(fd, buf, sizeof(buf) - 1, 0);
	close(fd);
	unlink(path);
	ck_assert_int_gt(len, 0);
	buf[len] = '\0';
	line = strstr(buf, "info: paused ");
	ck_assert_msg(line, "no pause line in %s", buf);
	while (line > buf && line[-1] != '\n')
		line--;
	ck_assert_int_eq(sscanf(line, "%4d-%2d-%2dT%2d:%2d:%2d.%6dZ cumemsaver[%d:%d] %15[a-z]: %n",
				&y, &mo, &d, &h, &mi, &sec, &us, &pid, &tid, level, &n),
			 10);
	ck_assert_msg(n > 0 && line[4] == '-' && line[10] == 'T' && line[26] == 'Z', "%s", line);
	ck_assert_str_eq(level, "info");
	ck_assert_int_eq(pid, getpid());
	ck_assert_int_eq(tid, gettid()); /* the calling thread, which ran the pause */
	ck_assert_int_lt(us, 1000000);
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	when = timegm(&tm);
	ck_assert_msg(when >= before.tv_sec && when <= after.tv_sec,
		      "UTC time of %s not in [%lld, %lld]", line, (long long)before.tv_sec,
		      (long long)after.tv_sec);
	ck_assert_int_eq(strncmp(line + n, "paused 1 regions", 16), 0);
}
END_TEST

static Suite *make(void)
{
	Suite *s = suite_create("stats");
	TCase *tc = tcase_create("stats");

	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, counters_sequence);
	tcase_add_test(tc, counters_disk);
	tcase_add_test(tc, counters_failures); /* simulation only */
	tcase_add_test(tc, stats_arguments);
	tcase_add_test(tc, list_regions);
	tcase_add_test(tc, list_concurrent_destroy);
	tcase_add_test(tc, log_line_format);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return t_main(make, T_NEEDS_DEVICE);
}
