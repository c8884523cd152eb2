/* SPDX-License-Identifier: MIT */
/*
 * core_internal.h - declarations shared by the files of src/core/ only
 * (tests/check_layers.py fails any file above core that opens it). core.h
 * declares what the layers above use.
 */
#ifndef CMS_CORE_INTERNAL_H
#define CMS_CORE_INTERNAL_H

#include "core.h"

/* A log line queued by a worker thread (cms_log_defer). */
struct cms_logline {
	int32_t level;
	uint64_t realtime_ns; /* when it was logged (CLOCK_REALTIME) */
	int32_t tid;	      /* the thread that logged it */
	char text[512];
};

/* The registered hook table (hookops.c), or NULL. */
const struct cms_hook_ops *cms_hook_ops(void);

#endif /* CMS_CORE_INTERNAL_H */
