/* SPDX-License-Identifier: MIT */
/*
 * ipc_peer.c - the other process of the two-process IPC tests (test_ipc.c
 * starts it with posix_spawn, so it is a fresh process, never a fork of one
 * that touched CUDA). It is an importer or an exporter driven by one-line
 * commands on stdin; every command answers one line on stdout starting with
 * "ok" or "err".
 *
 *   ipc_peer import SOCKET TAG [ro]   then: info | ptr I | check I SEED | fill I SEED |
 *                                     translate XPTR | events | wait STATE | stall |
 *                                     unstall | refuse | counters | close | crash | quit
 *   ipc_peer export SOCKET TAG N BYTES SEED
 *                                     then: pause | resume | crash | quit
 */
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dlfcn.h>

#include "cumemsaver.h"
#include "cumemsaver_sim.h"
#include "driver.h"

/* Not tests/common.c: its helpers use Check's assertions, which need a test runner. */
static struct cms_driver drv;
static cms_context *ctx;

static uint32_t pattern(uint32_t seed, size_t i)
{
	uint32_t x = seed * 2654435761u + (uint32_t)i * 40503u + (uint32_t)(i >> 32);

	x ^= x >> 15;
	return x * 2246822519u; /* = t_pattern (tests/common.c) */
}

/* A copy between host and device 0 in its primary context. Returns the CUresult. */
static int copy(int to_device, uint64_t dptr, void *host, size_t n)
{
	CUcontext c, popped;
	CUdevice cu;
	int res = drv.cuDeviceGet(&cu, 0);

	if (!res)
		res = drv.cuDevicePrimaryCtxRetain(&c, cu);
	if (res)
		return res;
	res = drv.cuCtxPushCurrent(c);
	if (!res) {
		res = to_device ? drv.cuMemcpyHtoD(dptr, host, n) : drv.cuMemcpyDtoH(host, dptr, n);
		drv.cuCtxPopCurrent(&popped);
	}
	drv.cuDevicePrimaryCtxRelease(cu);
	return res;
}

static int fill(uint64_t dptr, size_t n, uint32_t seed)
{
	uint32_t *buf = malloc(n);
	size_t i;
	int res;

	if (!buf)
		return -1;
	for (i = 0; i < n / 4; i++)
		buf[i] = pattern(seed, i);
	res = copy(1, dptr, buf, n);
	free(buf);
	return res;
}
static cms_import *imp;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int stalled, refuse, quiesced;
static int events[6];

static cms_status quiesce(void *user, cms_import *i, uint64_t epoch)
{
	(void)user;
	(void)i;
	(void)epoch;
	pthread_mutex_lock(&mu);
	quiesced++;
	while (stalled)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	return refuse ? CMS_ERR_REFUSED : CMS_OK;
}

static void on_event(void *user, cms_import *i, uint32_t event, uint64_t epoch)
{
	(void)user;
	(void)i;
	(void)epoch;
	pthread_mutex_lock(&mu);
	if (event < 6)
		events[event]++;
	pthread_mutex_unlock(&mu);
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static void fail_st(const char *what, cms_status st)
{
	say("err %s %s: %s", cms_status_name(st), what, cms_last_error());
}

/* Answers "ok", or the failure of what. */
static void answer(const char *what, cms_status st)
{
	if (st)
		fail_st(what, st);
	else
		say("ok");
}

/* The commands both roles know: crash, quit (returns 1: leave the loop), anything else. */
static int common_cmd(const char *cmd)
{
	if (!strcmp(cmd, "crash"))
		raise(SIGKILL);
	else if (!strcmp(cmd, "quit"))
		return 1;
	else
		say("err unknown command %s", cmd);
	return 0;
}

static int import_main(const char *path, const char *tag, int ro)
{
	cms_import_options o = CMS_IMPORT_OPTIONS_INIT;
	char line[256];
	cms_status st;

	o.flags = ro ? CMS_IMPORT_READ_ONLY : 0;
	o.quiesce_fn = quiesce;
	o.event_fn = on_event;
	o.name = "ipc_peer";
	o.timeout_ms = 20000;
	st = cms_import_open(ctx, path, tag, &o, &imp);
	if (st) {
		fail_st("open", st);
		return 0;
	}
	say("ok opened");
	while (fgets(line, sizeof(line), stdin)) {
		cms_import_info info = { .struct_size = sizeof(info) };
		unsigned long long a = 0, b = 0;
		uint64_t ptr, size;
		char cmd[32] = "";

		sscanf(line, "%31s %llx %llu", cmd, &a, &b);
		if (!strcmp(cmd, "info")) {
			cms_import_info_get(imp, &info);
			say("ok state=%u epoch=%llu n=%llu access=%u error=%d base=0x%llx "
			    "bytes=%llu",
			    info.state, (unsigned long long)info.epoch,
			    (unsigned long long)info.allocations, info.access, info.error,
			    (unsigned long long)info.base, (unsigned long long)info.bytes);
		} else if (!strcmp(cmd, "ptr")) {
			st = cms_import_alloc_get(imp, a, &ptr, &size);
			if (st)
				fail_st("ptr", st);
			else
				say("ok 0x%llx %llu", (unsigned long long)ptr,
				    (unsigned long long)size);
		} else if (!strcmp(cmd, "translate")) {
			st = cms_import_translate(imp, a, &ptr);
			if (st)
				fail_st("translate", st);
			else
				say("ok 0x%llx", (unsigned long long)ptr);
		} else if (!strcmp(cmd, "check") || !strcmp(cmd, "fill")) {
			st = cms_import_alloc_get(imp, a, &ptr, &size);
			if (st) {
				fail_st(cmd, st);
				continue;
			}
			size &= ~3ull;
			if (cmd[0] == 'f') {
				int res = fill(ptr, size, (uint32_t)b);

				if (res)
					say("err write CUresult %d", res);
				else
					say("ok");
			} else {
				uint32_t *buf = malloc(size);
				size_t k;
				int res = buf ? copy(0, ptr, buf, size) : -1;

				for (k = 0; !res && k < size / 4; k++)
					if (buf[k] != pattern((uint32_t)b, k))
						break;
				if (res)
					say("err read CUresult %d", res);
				else if (k < size / 4)
					say("err mismatch at word %zu", k);
				else
					say("ok");
				free(buf);
			}
		} else if (!strcmp(cmd, "events")) {
			pthread_mutex_lock(&mu);
			say("ok revoked=%d remapped=%d layout=%d disconnected=%d failed=%d "
			    "quiesced=%d",
			    events[CMS_IMPORT_EVENT_REVOKED], events[CMS_IMPORT_EVENT_REMAPPED],
			    events[CMS_IMPORT_EVENT_LAYOUT_CHANGED],
			    events[CMS_IMPORT_EVENT_DISCONNECTED], events[CMS_IMPORT_EVENT_FAILED],
			    quiesced);
			pthread_mutex_unlock(&mu);
		} else if (!strcmp(cmd, "wait")) { /* a state, up to 20 s */
			int k;

			for (k = 0; k < 2000; k++) {
				cms_import_info_get(imp, &info);
				if (info.state == a)
					break;
				usleep(10000);
			}
			if (info.state == a)
				say("ok");
			else
				say("err state %u", info.state);
		} else if (!strcmp(cmd, "stall") || !strcmp(cmd, "unstall") ||
			   !strcmp(cmd, "refuse")) {
			pthread_mutex_lock(&mu);
			if (cmd[0] == 'r')
				refuse = 1;
			else
				stalled = cmd[0] == 's';
			pthread_cond_broadcast(&cv);
			pthread_mutex_unlock(&mu);
			say("ok");
		} else if (!strcmp(cmd, "counters")) {
			cmssim_counters c = CMSSIM_COUNTERS_INIT;
			int (*get)(cmssim_counters *) =
				(int (*)(cmssim_counters *))dlsym(drv.dl, "cmssim_get_counters");

			if (!get || get(&c)) {
				say("err no simulation counters");
				continue;
			}

			say("ok handles=%llu mappings=%llu physical=%llu",
			    (unsigned long long)c.handles, (unsigned long long)c.mappings,
			    (unsigned long long)c.physical_allocations);
		} else if (!strcmp(cmd, "close")) {
			st = cms_import_close(imp);
			imp = NULL;
			answer("close", st);
		} else if (common_cmd(cmd)) {
			break;
		}
	}
	cms_import_close(imp);
	return 0;
}

static int export_main(const char *path, const char *tag, int n, uint64_t bytes, uint32_t seed)
{
	cms_exporter *exp = NULL;
	cms_region_options ro = CMS_REGION_OPTIONS_INIT;
	cms_region *r = NULL;
	char line[256];
	cms_status st;
	int i;

	ro.policy = CMS_POLICY_HOST;
	ro.flags = CMS_REGION_SHAREABLE;
	st = cms_region_create(ctx, tag, &ro, &r);
	for (i = 0; !st && i < n; i++) {
		uint64_t p;

		st = cms_alloc(r, bytes, &p);
		if (!st && fill(p, bytes & ~3ull, seed + (uint32_t)i))
			st = CMS_ERR_DRIVER;
	}
	if (!st)
		st = cms_exporter_create(ctx, path, NULL, &exp);
	if (!st)
		st = cms_exporter_publish(exp, r, CMS_ACCESS_READWRITE);
	if (st) {
		fail_st("export", st);
		return 0;
	}
	say("ok ready");
	while (fgets(line, sizeof(line), stdin)) {
		char cmd[32] = "";

		sscanf(line, "%31s", cmd);
		if (!strcmp(cmd, "pause") || !strcmp(cmd, "resume")) {
			st = cmd[0] == 'p' ? cms_pause(ctx, tag, NULL, NULL) :
					     cms_resume(ctx, tag, NULL, NULL);
			answer(cmd, st);
		} else if (common_cmd(cmd)) {
			break;
		}
	}
	cms_exporter_destroy(exp);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: ipc_peer import|export SOCKET TAG ...\n");
		return 2;
	}
	char err[256];

	if (cms_driver_open(&drv, NULL, err, sizeof(err))) {
		say("err driver: %s", err);
		return 1;
	}
	if (cms_context_create(NULL, &ctx)) {
		say("err context: %s", cms_last_error());
		return 1;
	}
	if (!strcmp(argv[1], "import"))
		import_main(argv[2], argv[3], argc > 4 && !strcmp(argv[4], "ro"));
	else if (!strcmp(argv[1], "export") && argc >= 7)
		export_main(argv[2], argv[3], atoi(argv[4]), strtoull(argv[5], NULL, 0),
			    (uint32_t)strtoul(argv[6], NULL, 0));
	else
		return 2;
	cms_context_destroy(ctx);
	return 0;
}
