/* SPDX-License-Identifier: MIT */
/*
 * log.c - the logging path. Lines go to the context's callback; without one,
 * to stderr only when the environment variable CMS_LOG is set (0-3). This is
 * the only place in the library that may write to stderr. The library's own
 * worker threads (one per device of a pause or resume) queue their lines
 * instead: the calling thread emits them (cms_log_flush), so the callback
 * only ever runs on threads that called into the library.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

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

void cms_log(const cms_context *ctx, int32_t level, const char *fmt, ...)
{
	static const char *names[] = { "error", "warn", "info", "debug" };
	char raw[512], line[512];
	va_list ap;
	int max;

	if (ctx && ctx->log_fn)
		max = ctx->log_level;
	else
		max = env_level();
	if (level > max || level < 0)
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
		memcpy(q->v[q->n++].text, line, sizeof(line));
		return;
	}
	if (ctx && ctx->log_fn)
		ctx->log_fn(ctx->log_user, level, line);
	else
		fprintf(stderr, "cumemsaver %s: %s\n", names[level & 3], line); /* allow-print */
}

void cms_log_defer(struct cms_logq *q)
{
	tls_logq = q;
}

void cms_log_flush(const cms_context *ctx, struct cms_logq *q)
{
	size_t i;

	for (i = 0; i < q->n; i++)
		cms_log(ctx, q->v[i].level, "%s", q->v[i].text);
	if (q->dropped)
		cms_log(ctx, CMS_LOG_WARN, "%zu log lines of a device worker were dropped",
			q->dropped);
	free(q->v);
	q->v = NULL;
	q->n = q->cap = q->dropped = 0;
}
