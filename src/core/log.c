/* SPDX-License-Identifier: MIT */
/*
 * log.c - the logging path. Lines go to the context's callback; without one,
 * to stderr only when the environment variable CMS_LOG is set (0-3). This is
 * the only place in the library that may write to stderr. The library's own
 * worker threads (one per device of a pause or resume) queue their lines
 * instead: the calling thread emits them (cms_log_flush), so the callback
 * only ever runs on threads that called into the library.
 *
 * A stderr line reads "2026-12-01T23:11:05.123456Z cumemsaver[PID:TID] warn: text": the
 * UTC time (CLOCK_REALTIME, microseconds), the process and the kernel thread id of the
 * thread that logged it (a worker's queued line keeps its own time and thread).
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core_internal.h"

#define LOGQ_MAX 64 /* lines one worker thread may queue per call */

static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static int env_max = -1;
static _Thread_local struct cms_logq *tls_logq; /* set on the library's worker threads */

static void read_env(void)
{
	const char *v = secure_getenv("CMS_LOG");

	if (!v || !v[0])
		env_max = -1;
	else if (v[0] >= '0' && v[0] <= '3')
		env_max = v[0] - '0';
	else
		env_max = CMS_LOG_WARN;
}

/* CMS_LOG, read once per process. */
static int env_level(void)
{
	pthread_once(&env_once, read_env);
	return env_max;
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* "2026-12-01T23:11:05.123456Z" (UTC) into buf (at least 28 bytes). */
static void iso8601(char *buf, size_t len, uint64_t ns)
{
	time_t sec = (time_t)(ns / 1000000000ull);
	struct tm tm;
	size_t n;

	if (!gmtime_r(&sec, &tm) || !(n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm))) {
		snprintf(buf, len, "@%llu", (unsigned long long)sec);
		return;
	}
	snprintf(buf + n, len - n, ".%06uZ", (unsigned)(ns % 1000000000ull / 1000));
}

/* One line to the context's callback, or to stderr with its time, pid and thread. */
static void emit(const cms_context *ctx, int32_t level, const char *line, uint64_t when, int tid)
{
	static const char *names[] = { "error", "warn", "info", "debug" };
	const char *name = names[level & 3];
	int pid = (int)getpid();
	char s[40];

	if (ctx && ctx->log_fn) {
		ctx->log_fn(ctx->log_user, level, line);
		return;
	}
	iso8601(s, sizeof(s), when);
	fprintf(stderr, "%s cumemsaver[%d:%d] %s: %s\n", s, pid, tid, name, line); /* allow-print */
}

/* Whether a line of level goes anywhere. */
static bool wanted(const cms_context *ctx, int32_t level)
{
	int max = ctx && ctx->log_fn ? ctx->log_level : env_level();

	return level >= 0 && level <= max;
}

void cms_log(const cms_context *ctx, int32_t level, const char *fmt, ...)
{
	char raw[512], line[512];
	va_list ap;

	if (!wanted(ctx, level))
		return;
	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	cms_text_escape(line, sizeof(line), raw); /* a path or a peer's text cannot forge lines */
	if (tls_logq) { /* a worker thread: the calling thread emits it (cms_log_flush) */
		struct cms_logq *q = tls_logq;

		if (q->n == q->cap) {
			size_t cap = q->cap ? 2 * q->cap : 4;
			struct cms_logline *v =
				cap <= LOGQ_MAX ? realloc(q->v, cap * sizeof(*v)) : NULL;

			if (!v) {
				q->dropped++;
				return;
			}
			q->v = v;
			q->cap = cap;
		}
		q->v[q->n].level = level;
		q->v[q->n].realtime_ns = realtime_ns();
		q->v[q->n].tid = (int32_t)gettid();
		memcpy(q->v[q->n++].text, line, sizeof(line));
		return;
	}
	emit(ctx, level, line, realtime_ns(), (int32_t)gettid());
}

void cms_log_defer(struct cms_logq *q)
{
	tls_logq = q;
}

void cms_log_flush(const cms_context *ctx, struct cms_logq *q)
{
	size_t i;

	for (i = 0; i < q->n; i++)
		if (wanted(ctx, q->v[i].level))
			emit(ctx, q->v[i].level, q->v[i].text, q->v[i].realtime_ns, q->v[i].tid);
	if (q->dropped)
		cms_log(ctx, CMS_LOG_WARN, "%zu log lines of a device worker were dropped",
			q->dropped);
	free(q->v);
	q->v = NULL;
	q->n = q->cap = q->dropped = 0;
}
