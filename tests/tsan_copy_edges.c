// SPDX-License-Identifier: MIT
/*
 * tsan_copy_edges.c - ThreadSanitizer still sees a race on the bytes a simulated copy moves.
 *
 * The simulation reports only the first and last SIM_TSAN_EDGE bytes of each side of a device
 * transfer to ThreadSanitizer (src/sim/sim_copy.c). This program checks that the cut keeps
 * what matters: another thread's unsynchronised write to a buffer that is then copied to the
 * device is reported, and the same write followed by pthread_join is not. Built and run in the
 * ThreadSanitizer build only (tests/CMakeLists.txt). Usage: tsan_copy_edges head|tail|join
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define BYTES (1 * MiB)

static unsigned char *buf;
static size_t at;

/* cuMemcpyHtoD of @n bytes through the driver (the simulation) on device 0's primary context;
 * the tests' t_write cannot be used outside a Check test. */
static int copy_to_device(uint64_t dst, const void *src, size_t n)
{
	struct cms_driver d;
	char err[256];
	CUcontext c, popped;
	CUdevice cu;
	int res;

	if (cms_driver_open(&d, NULL, err, sizeof(err))) {
		fprintf(stderr, "setup: %s\n", err);
		return -1;
	}
	res = d.cuDeviceGet(&cu, 0);
	if (!res)
		res = d.cuDevicePrimaryCtxRetain(&c, cu);
	if (res)
		return res;
	res = d.cuCtxPushCurrent(c);
	if (!res) {
		res = d.cuMemcpyHtoD(dst, src, n);
		d.cuCtxPopCurrent(&popped);
	}
	d.cuDevicePrimaryCtxRelease(cu);
	cms_driver_close(&d);
	return res;
}

static void *writer(void *arg)
{
	(void)arg;
	buf[at] = 0x5a;
	return NULL;
}

int main(int argc, char **argv)
{
	cms_context *ctx = NULL;
	cms_region *r = NULL;
	pthread_t t;
	uint64_t p = 0;
	int join, rc;

	if (argc != 2 ||
	    (strcmp(argv[1], "head") && strcmp(argv[1], "tail") && strcmp(argv[1], "join"))) {
		fprintf(stderr, "usage: tsan_copy_edges head|tail|join\n");
		return 2;
	}
	join = !strcmp(argv[1], "join");
	at = strcmp(argv[1], "tail") ? 0 : BYTES - 1;
	buf = calloc(1, BYTES);
	if (!buf || cms_context_create(NULL, &ctx) || cms_region_create(ctx, "edges", NULL, &r) ||
	    cms_alloc(r, BYTES, &p)) {
		fprintf(stderr, "setup: %s\n", cms_last_error());
		return 1;
	}
	if (pthread_create(&t, NULL, writer, NULL))
		return 1;
	if (join)
		pthread_join(t, NULL);
	else
		usleep(100 * 1000); /* the write happens first; nothing orders it before the copy */
	rc = copy_to_device(p, buf, BYTES);
	if (!join)
		pthread_join(t, NULL);
	printf("copy of %zu bytes after a write to byte %zu (%s): %d\n", (size_t)BYTES, at,
	       join ? "joined" : "not synchronised", rc);
	if (rc || cms_free(ctx, p) || cms_context_destroy(ctx))
		return 1;
	free(buf);
	return 0;
}
