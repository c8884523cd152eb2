/* SPDX-License-Identifier: MIT */
/*
 * log.c - the logging path. Lines go to the context's callback; without one,
 * to stderr only when the environment variable CMS_LOG is set (0-3). This is
 * the only place in the library that may write to stderr.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static int env_max = -1;

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
	char line[512];
	va_list ap;
	int max;

	if (ctx && ctx->log_fn)
		max = ctx->log_level;
	else
		max = env_level();
	if (level > max || level < 0)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (ctx && ctx->log_fn)
		ctx->log_fn(ctx->log_user, level, line);
	else
		fprintf(stderr, "cumemsaver %s: %s\n", names[level & 3], line); /* allow-print */
}
