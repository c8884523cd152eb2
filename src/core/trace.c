/* SPDX-License-Identifier: MIT */
/*
 * trace.c - NVTX ranges around pause, resume and swap (Nsight Systems shows
 * them on the timeline of each thread). Built with NVTX when the CMake option
 * CMS_NVTX found nvtx3/nvToolsExt.h (header-only, NVTX 3: it loads a tool
 * only when one is attached through NVTX_INJECTION64_PATH, and is a few
 * instructions otherwise); without it these functions do nothing.
 */
#include <stdarg.h>
#include <stdio.h>

#include "core_internal.h"

#ifdef CMS_HAVE_NVTX
#include <pthread.h>

#include <nvtx3/nvToolsExt.h>

static pthread_once_t trace_once = PTHREAD_ONCE_INIT;

static void trace_init(void)
{
	nvtxInitialize(NULL);
}

/* NVTX initializes itself at its first call, and two threads' first calls race on its
 * function pointers (plain stores and loads): initialized once here instead, under
 * pthread_once, every later call ordered after it. */
static void trace_ready(void)
{
	(void)pthread_once(&trace_once, trace_init);
}

void cms_trace_init(void)
{
	trace_ready();
}

void cms_trace_push(const char *fmt, ...)
{
	char name[96];
	va_list ap;

	trace_ready();
	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	nvtxRangePushA(name);
}

void cms_trace_pop(void)
{
	trace_ready();
	nvtxRangePop();
}
#else
void cms_trace_init(void)
{
}

void cms_trace_push(const char *fmt, ...)
{
	(void)fmt;
}

void cms_trace_pop(void)
{
}
#endif
