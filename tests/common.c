/* SPDX-License-Identifier: MIT */
#include "common.h"

#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static struct cms_driver drv;
static int drv_open;
static struct t_sim sim;

struct cms_driver *t_drv(void)
{
	char err[256];

	if (!drv_open) {
		int st = cms_driver_open(&drv, NULL, err, sizeof(err));

		ck_assert_msg(st == 0, "driver: %s", err);
		drv_open = 1;
	}
	return &drv;
}

int t_is_sim(void)
{
	return t_drv()->is_sim;
}

const struct t_sim *t_sim(void)
{
	void *dl = t_drv()->dl;

	ck_assert_msg(t_is_sim(), "this test needs the host simulation");
	if (!sim.get_counters) {
		sim.get_counters = (int (*)(cmssim_counters *))dlsym(dl, "cmssim_get_counters");
		sim.fail_call = (int (*)(const char *, uint64_t, int))dlsym(dl, "cmssim_fail_call");
		sim.fail_host_alloc = (int (*)(uint64_t))dlsym(dl, "cmssim_fail_host_alloc");
		sim.clear_faults = (void (*)(void))dlsym(dl, "cmssim_clear_faults");
		sim.call_count = (uint64_t(*)(void))dlsym(dl, "cmssim_call_count");
		sim.set_capacity = (int (*)(int, uint64_t))dlsym(dl, "cmssim_set_capacity");
		sim.get_capacity = (uint64_t(*)(int))dlsym(dl, "cmssim_get_capacity");
		sim.armed_faults = (int (*)(void))dlsym(dl, "cmssim_armed_faults");
		ck_assert(sim.get_counters && sim.fail_call && sim.fail_host_alloc &&
			  sim.clear_faults && sim.call_count && sim.set_capacity &&
			  sim.get_capacity && sim.armed_faults);
	}
	return &sim;
}

cmssim_counters t_counters(void)
{
	cmssim_counters c;

	memset(&c, 0, sizeof(c));
	c.struct_size = sizeof(c);
	ck_assert_int_eq(t_sim()->get_counters(&c), 0);
	return c;
}

int t_open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

cms_context *t_ctx(void)
{
	cms_context *ctx = NULL;

	ck_ok(cms_context_create(NULL, &ctx));
	return ctx;
}

uint64_t t_region_flags;

cms_region *t_region(cms_context *ctx, const char *tag, int32_t device, uint32_t policy)
{
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_region *r = NULL;

	o.device = device;
	o.policy = policy;
	o.flags = t_region_flags;
	ck_ok(cms_region_create(ctx, tag, &o, &r));
	return r;
}

static int with_ctx(int dev, int write, uint64_t dptr, void *host, size_t n)
{
	struct cms_driver *d = t_drv();
	CUcontext c, popped;
	CUdevice cu;
	int res;

	res = d->cuDeviceGet(&cu, dev);
	if (res)
		return res;
	res = d->cuDevicePrimaryCtxRetain(&c, cu);
	if (res)
		return res;
	res = d->cuCtxPushCurrent(c);
	if (!res) {
		res = write ? d->cuMemcpyHtoD(dptr, host, n) : d->cuMemcpyDtoH(host, dptr, n);
		d->cuCtxPopCurrent(&popped);
	}
	d->cuDevicePrimaryCtxRelease(cu);
	return res;
}

int t_write(int dev, uint64_t dst, const void *src, size_t n)
{
	return with_ctx(dev, 1, dst, (void *)src, n);
}

int t_read(int dev, void *dst, uint64_t src, size_t n)
{
	return with_ctx(dev, 0, src, dst, n);
}

uint32_t t_pattern(uint32_t seed, size_t i)
{
	uint32_t x = seed * 2654435761u + (uint32_t)i * 40503u + (uint32_t)(i >> 32);

	x ^= x >> 15;
	return x * 2246822519u;
}

T_UNCHECKED int t_fill(int dev, uint64_t ptr, size_t n, uint32_t seed)
{
	uint32_t *buf = malloc(n);
	size_t i;
	int res;

	ck_assert_ptr_nonnull(buf);
	for (i = 0; i < n / 4; i++)
		buf[i] = t_pattern(seed, i);
	res = t_write(dev, ptr, buf, n);
	free(buf);
	return res;
}

T_UNCHECKED long t_host_check_except(const void *host, size_t n, uint32_t seed, size_t lo,
				     size_t hi)
{
	size_t i;

	for (i = 0; i < n / 4; i++) {
		uint32_t w;

		if (4 * i >= lo && 4 * i < hi)
			continue;
		memcpy(&w, (const char *)host + 4 * i, 4);
		if (w != t_pattern(seed, i))
			return (long)i;
	}
	return -1;
}

T_UNCHECKED long t_check(int dev, uint64_t ptr, size_t n, uint32_t seed)
{
	return t_check_except(dev, ptr, n, seed, 0, 0);
}

T_UNCHECKED long t_check_except(int dev, uint64_t ptr, size_t n, uint32_t seed, size_t lo,
				size_t hi)
{
	uint32_t *buf = malloc(n);
	long bad;

	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(t_read(dev, buf, ptr, n), 0);
	bad = t_host_check_except(buf, n, seed, lo, hi);
	free(buf);
	return bad;
}

cms_region_info t_info(cms_region *r)
{
	cms_region_info i = { .struct_size = sizeof(i) };

	ck_ok(cms_region_info_get(r, &i));
	return i;
}

cms_region_stats t_stats(cms_region *r)
{
	cms_region_stats s = { .struct_size = sizeof(s) };

	ck_ok(cms_region_stats_get(r, &s));
	return s;
}

unsigned char *t_host_byte(cms_context *ctx, uint64_t ptr)
{
	cms_backup_info b = { .struct_size = sizeof(b) };

	ck_ok(cms_backup_get(ctx, ptr, &b));
	ck_assert_uint_eq(b.state, CMS_BACKUP_CURRENT);
	ck_assert_ptr_nonnull(b.host);
	return (unsigned char *)b.host + (ptr - b.base);
}

int t_wait_host_bytes(cms_region *r, uint64_t bytes, int pinned)
{
	struct timespec ts = { 0, 2000000 };
	int i;

	for (i = 0; i < 30000; i++) {
		cms_region_info in = t_info(r);

		if (in.host_bytes >= bytes && (!pinned || in.pinned_bytes == in.host_bytes))
			return 1;
		nanosleep(&ts, NULL);
	}
	return 0;
}

void t_fill_each(int dev, const uint64_t *p, const uint64_t *sizes, size_t n, uint32_t seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		ck_assert_int_eq(t_fill(dev, p[i], sizes[i] & ~3ull, seed + (uint32_t)i), 0);
}

void t_check_each(int dev, const uint64_t *p, const uint64_t *sizes, size_t n, uint32_t seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		ck_assert_msg(t_check(dev, p[i], sizes[i] & ~3ull, seed + (uint32_t)i) == -1,
			      "allocation %zu at 0x%llx: content differs", i,
			      (unsigned long long)p[i]);
}

T_UNCHECKED int t_is_zero(int dev, uint64_t ptr, size_t n)
{
	unsigned char *buf = malloc(n);
	size_t i;
	int zero = 1;

	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(t_read(dev, buf, ptr, n), 0);
	for (i = 0; i < n && zero; i++)
		zero = buf[i] == 0;
	free(buf);
	return zero;
}

/*
 * Probes the driver in a child process (CUDA must not be initialised in the
 * parent, which forks every test): 0 = none, 1 = simulation, 2 = real GPU.
 */
static int probe(void)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		struct cms_driver d;
		char err[256];
		int count = 0;

		if (cms_driver_open(&d, NULL, err, sizeof(err)))
			_exit(0);
		if (d.cuDeviceGetCount(&count) || count < 1)
			_exit(0);
		_exit(d.is_sim ? 1 : 2);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return 0;
	return WEXITSTATUS(status);
}

int t_main(Suite *(*make)(void), enum t_needs needs)
{
	SRunner *sr;
	int failed, have = needs == T_NEEDS_NOTHING ? 0 : probe();

	if ((needs == T_NEEDS_DEVICE && !have) || (needs == T_NEEDS_SIM && have != 1) ||
	    (needs == T_NEEDS_GPU && have != 2)) {
		printf("SKIP: needs %s; driver probe found %s\n",
		       needs == T_NEEDS_SIM ? "the host simulation" :
		       needs == T_NEEDS_GPU ? "a real GPU" :
					      "a driver",
		       have == 1 ? "the simulation" :
		       have == 2 ? "a GPU" :
				   "nothing");
		return 77;
	}
	sr = srunner_create(make());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

int t_probe_devices(int *is_sim)
{
	int fds[2], out[2] = { 0, 0 }, status;
	pid_t pid;

	if (pipe(fds))
		return 0;
	pid = fork();
	if (pid == 0) {
		struct cms_driver d;
		char err[256];
		int res[2] = { 0, 0 };

		close(fds[0]);
		if (!cms_driver_open(&d, NULL, err, sizeof(err)) && !d.cuDeviceGetCount(&res[0]))
			res[1] = d.is_sim;
		if (write(fds[1], res, sizeof(res)) != (ssize_t)sizeof(res))
			_exit(1);
		_exit(0);
	}
	close(fds[1]);
	if (pid < 0 || read(fds[0], out, sizeof(out)) != (ssize_t)sizeof(out))
		out[0] = 0;
	close(fds[0]);
	if (pid > 0)
		waitpid(pid, &status, 0);
	*is_sim = out[1];
	return out[0];
}

void t_nothing_left(int ndev)
{
	cmssim_counters c = t_counters();
	int d;

	ck_assert_uint_eq(c.handles, 0);
	ck_assert_uint_eq(c.mappings, 0);
	ck_assert_uint_eq(c.physical_allocations, 0);
	ck_assert_uint_eq(c.reservations, 0);
	for (d = 0; d < ndev; d++)
		ck_assert_uint_eq(c.device_used_bytes[d], 0);
}

int t_devices(void)
{
	int n = 0;

	ck_assert_int_eq(t_drv()->cuDeviceGetCount(&n), 0);
	return n;
}

int t_skip_case(const char *fn, int i, const char *why)
{
	size_t len = strlen(fn);

	if (len > 3 && !strcmp(fn + len - 3, "_fn"))
		len -= 3;
	if (i >= 0)
		printf("SKIP %.*s #%d: %s\n", (int)len, fn, i, why);
	else
		printf("SKIP %.*s: %s\n", (int)len, fn, why);
	fflush(stdout);
	return 1;
}

int t_skip_unless_devices(const char *fn, int i, int need)
{
	char why[64];
	int n = t_devices();

	if (n >= need)
		return 0;
	snprintf(why, sizeof(why), "needs %d devices, the driver has %d", need, n);
	return t_skip_case(fn, i, why);
}
