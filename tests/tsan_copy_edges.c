// SPDX-License-Identifier: MIT
/*
 * tsan_copy_edges.c - ThreadSanitizer still sees a race on the bytes a simulated copy moves.
 *
 * The simulation reports only the first and last SIM_TSAN_EDGE bytes of each side of a device
 * transfer to ThreadSanitizer, and one byte every SIM_TSAN_STRIDE (64 KiB) between them
 * (src/sim/sim_copy.c). This program checks that the cut keeps what matters:
 *   head, tail  another thread writes the buffer's first (last) byte, then the main thread copies
 *               the buffer to the device with nothing in between: a race is reported
 *   middle      another thread copies the device into the whole buffer, then the main thread
 *               copies it into the buffer's middle half, ordered only by relaxed atomics: two
 *               transfers over the same bytes, neither at an edge of the other, are reported
 *   join        as head, after pthread_join: nothing is reported
 * Built and run in the ThreadSanitizer build only (tests/CMakeLists.txt).
 * Usage: tsan_copy_edges head|tail|middle|join
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define BYTES (1 * MiB)

static struct cms_driver drv;
static CUcontext cu_ctx;
static unsigned char *buf;
static uint64_t dev_ptr;
static size_t at;
static bool middle;
static atomic_int writer_done, main_done; /* relaxed: no ordering that ThreadSanitizer sees */

static void wait_relaxed(atomic_int *flag)
{
	while (!atomic_load_explicit(flag, memory_order_relaxed))
		usleep(1000);
}

static void *writer(void *arg)
{
	CUcontext popped;

	(void)arg;
	if (!middle) {
		buf[at] = 0x5a;
		return NULL;
	}
	if (drv.cuCtxPushCurrent(cu_ctx) || drv.cuMemcpyDtoH(buf, dev_ptr, BYTES))
		fprintf(stderr, "writer: a driver call failed\n");
	atomic_store_explicit(&writer_done, 1, memory_order_relaxed);
	wait_relaxed(&main_done); /* no driver call (a simulation lock) between the two copies */
	drv.cuCtxPopCurrent(&popped);
	return NULL;
}

int main(int argc, char **argv)
{
	cms_context *ctx = NULL;
	cms_region *r = NULL;
	CUcontext popped;
	CUdevice cu;
	char err[256];
	pthread_t t;
	int join, rc;

	if (argc != 2 || (strcmp(argv[1], "head") && strcmp(argv[1], "tail") &&
			  strcmp(argv[1], "middle") && strcmp(argv[1], "join"))) {
		fprintf(stderr, "usage: tsan_copy_edges head|tail|middle|join\n");
		return 2;
	}
	join = !strcmp(argv[1], "join");
	middle = !strcmp(argv[1], "middle");
	at = strcmp(argv[1], "tail") ? 0 : BYTES - 1;
	buf = calloc(1, BYTES);
	if (!buf || cms_context_create(NULL, &ctx) || cms_region_create(ctx, "edges", NULL, &r) ||
	    cms_alloc(r, BYTES, &dev_ptr)) {
		fprintf(stderr, "setup: %s\n", cms_last_error());
		return 1;
	}
	/* the tests' t_write cannot be used outside a Check test: the driver (the simulation) and
	 * device 0's primary context, directly */
	if (cms_driver_open(&drv, NULL, err, sizeof(err)) || drv.cuDeviceGet(&cu, 0) ||
	    drv.cuDevicePrimaryCtxRetain(&cu_ctx, cu) || drv.cuCtxPushCurrent(cu_ctx)) {
		fprintf(stderr, "setup: the driver: %s\n", err);
		return 1;
	}
	if (pthread_create(&t, NULL, writer, NULL))
		return 1;
	if (join)
		pthread_join(t, NULL);
	else if (middle)
		wait_relaxed(&writer_done);
	else
		usleep(100 * 1000); /* the write happens first; nothing orders it before the copy */
	if (middle)		    /* its edges are inside the writer's copy's unchecked middle */
		rc = drv.cuMemcpyDtoH(buf + BYTES / 4, dev_ptr + BYTES / 4, BYTES / 2);
	else
		rc = drv.cuMemcpyHtoD(dev_ptr, buf, BYTES);
	atomic_store_explicit(&main_done, 1, memory_order_relaxed);
	if (!join)
		pthread_join(t, NULL);
	printf("%s: a copy after another thread's %s (%s): %d\n", argv[1],
	       middle ? "copy into the same buffer" : "write", join ? "joined" : "not synchronised",
	       rc);
	drv.cuCtxPopCurrent(&popped);
	drv.cuDevicePrimaryCtxRelease(cu);
	cms_driver_close(&drv);
	if (rc || cms_free(ctx, dev_ptr) || cms_context_destroy(ctx))
		return 1;
	free(buf);
	return 0;
}
