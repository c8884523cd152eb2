/* SPDX-License-Identifier: MIT */
/*
 * test_multigpu.c - pause and resume of tags spanning devices (one worker
 * thread per device, all or nothing across devices, per-device results) and
 * peer access (cms_region_peer_devices_set), on the host simulation with
 * CMS_SIM_DEVICES=4 and =1 (the .sim1 variant) and on GPUs. The simulation-only
 * cases inject faults on one device (cmssim_fail_call_device), prove that the
 * devices' workers copy at the same time (cmssim_copy_gate) and read the access
 * each device has (cmssim_get_access). With one device (one GPU) the cases run
 * their one-device paths (a tag on one device, the call on the calling thread,
 * the device's faults, its per-device result); a case or loop index that needs
 * more devices than the driver has prints "SKIP <case>: needs N devices" and
 * returns (T_NEED_DEVICES, tests/common.h); exit 77 only without a device.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "kernels.h"

#define MAXD 4 /* devices a test uses at most */
#define NALLOC 2
/* Per region: one and three granules (the last page short); set by fleet_make. The
 * simulation runs with a 64 KiB granularity (small memfds: fast under sanitizers). */
static uint64_t sizes[NALLOC], physical;

/* ---- the simulation's multi-device controls (dlsym on the driver) -------- */

struct msim {
	int (*fail_call_device)(const char *fn, int device, uint64_t nth, int result);
	int (*set_peer_access)(int device, int peer, int can);
	int (*get_access)(uint64_t addr, int device);
	int (*copy_gate)(int threads, uint32_t timeout_ms);
	int (*copy_gate_result)(void);
};

static const struct msim *msim(void)
{
	static struct msim m;
	void *dl = t_drv()->dl;

	t_sim(); /* asserts that this is the simulation */
	if (!m.get_access) {
		m.fail_call_device = (int (*)(const char *, int, uint64_t, int))dlsym(
			dl, "cmssim_fail_call_device");
		m.set_peer_access = (int (*)(int, int, int))dlsym(dl, "cmssim_set_peer_access");
		m.get_access = (int (*)(uint64_t, int))dlsym(dl, "cmssim_get_access");
		m.copy_gate = (int (*)(int, uint32_t))dlsym(dl, "cmssim_copy_gate");
		m.copy_gate_result = (int (*)(void))dlsym(dl, "cmssim_copy_gate_result");
		ck_assert(m.fail_call_device && m.set_peer_access && m.get_access && m.copy_gate &&
			  m.copy_gate_result);
	}
	return &m;
}

static int devices(void)
{
	int n = 0;

	ck_assert_int_eq(t_drv()->cuDeviceGetCount(&n), 0);
	return n > MAXD ? MAXD : n;
}

/* ---- a tag with one region per device ------------------------------------ */

struct fleet {
	cms_context *ctx;
	const char *tag;
	int nd;
	uint32_t policy;
	cms_region *r[MAXD];
	uint64_t p[MAXD][NALLOC];
};

static cms_region_info info(cms_region *r)
{
	cms_region_info i = { .struct_size = sizeof(i) };

	ck_ok(cms_region_info_get(r, &i));
	return i;
}

static uint32_t seed(int d, int k)
{
	return (uint32_t)(100 * d + k + 1);
}

static void fleet_make(struct fleet *f, cms_context *ctx, const char *tag, int nd, uint32_t policy)
{
	int d, k;

	memset(f, 0, sizeof(*f));
	f->ctx = ctx;
	f->tag = tag;
	f->nd = nd;
	f->policy = policy;
	for (d = 0; d < nd; d++) {
		f->r[d] = t_region(ctx, tag, d, policy);
		if (!physical) {
			uint64_t g = info(f->r[d]).granularity;

			sizes[0] = g;
			sizes[1] = 3 * g - 4096;
			physical = 4 * g;
		}
		for (k = 0; k < NALLOC; k++) {
			ck_ok(cms_alloc(f->r[d], sizes[k], &f->p[d][k]));
			ck_assert_int_eq(t_fill(d, f->p[d][k], sizes[k], seed(d, k)), 0);
		}
	}
}

/* Every region in state, backed accordingly, every allocation at its address. */
static void fleet_state(const struct fleet *f, uint32_t state)
{
	cms_pointer_info pi = { .struct_size = sizeof(pi) };
	int d, k;

	for (d = 0; d < f->nd; d++) {
		cms_region_info i = info(f->r[d]);

		ck_assert_msg(i.state == state, "%s on device %d: state %u, want %u", f->tag, d,
			      i.state, state);
		ck_assert_uint_eq(i.backed_bytes, state == CMS_STATE_ACTIVE ? physical : 0);
		for (k = 0; k < NALLOC; k++) {
			ck_ok(cms_pointer_info_get(f->ctx, f->p[d][k] + 4096, &pi));
			ck_assert_uint_eq(pi.base, f->p[d][k]);
			ck_assert_int_eq(pi.device, d);
			ck_assert_uint_eq(pi.state, state);
		}
	}
}

/* HOST content as written by fleet_make. */
static void fleet_content(const struct fleet *f)
{
	int d, k;

	for (d = 0; d < f->nd; d++)
		for (k = 0; k < NALLOC; k++)
			ck_assert_msg(t_check(d, f->p[d][k], sizes[k], seed(d, k)) == -1,
				      "%s: device %d allocation %d lost its content", f->tag, d, k);
}

/* The per-device entries of a successful call over f (pause: copied = backed up). */
static void check_devices(const struct fleet *f, uint32_t ndev, int32_t failed,
			  const cms_device_result *dr, bool host_copies)
{
	int d;

	ck_assert_uint_eq(ndev, (uint32_t)f->nd);
	ck_assert_int_eq(failed, -1);
	for (d = 0; d < f->nd; d++) {
		ck_assert_int_eq(dr[d].device, d);
		ck_assert_int_eq(dr[d].status, CMS_OK);
		ck_assert_uint_eq(dr[d].regions, 1);
		ck_assert_uint_eq(dr[d].allocations, NALLOC);
		ck_assert_uint_eq(dr[d].bytes, physical);
		ck_assert_uint_eq(dr[d].bytes_copied, host_copies ? sizes[0] + sizes[1] : 0);
		ck_assert_uint_gt(dr[d].elapsed_ns, 0);
	}
	for (; d < CMS_DEVICE_RESULTS_MAX; d++)
		ck_assert_int_eq(dr[d].device, 0); /* unused entries are zero */
}

/* ---- tag-wide pause/resume over 1..4 devices ------------------------------ */

START_TEST(tag_spans_devices)
{
	int nd = 1 + _i, d, cycle;
	cms_pause_result pr = { .struct_size = sizeof(pr) };
	cms_resume_result rr = { .struct_size = sizeof(rr) };
	struct fleet f;

	T_NEED_DEVICES_LOOP(nd); /* a GPU machine with fewer devices runs the cases it can */
	fleet_make(&f, t_ctx(), "weights", nd, CMS_POLICY_HOST);
	for (cycle = 1; cycle <= 2; cycle++) {
		ck_ok(cms_pause(f.ctx, "weights", NULL, &pr));
		fleet_state(&f, CMS_STATE_PAUSED);
		ck_assert_uint_eq(pr.regions, (uint64_t)nd);
		ck_assert_uint_eq(pr.allocations, (uint64_t)nd * NALLOC);
		ck_assert_uint_eq(pr.bytes_released, (uint64_t)nd * physical);
		check_devices(&f, pr.devices, pr.failed_device, pr.device_results, true);
		if (t_is_sim())
			for (d = 0; d < nd; d++)
				ck_assert_uint_eq(t_counters().device_used_bytes[d], 0);
		ck_ok(cms_resume(f.ctx, "weights", NULL, &rr));
		fleet_state(&f, CMS_STATE_ACTIVE);
		fleet_content(&f);
		ck_assert_uint_eq(rr.bytes_backed, (uint64_t)nd * physical);
		check_devices(&f, rr.devices, rr.failed_device, rr.device_results, true);
		for (d = 0; d < nd; d++)
			ck_assert_uint_eq(info(f.r[d]).epoch, (uint64_t)cycle);
	}
	ck_ok(cms_context_destroy(f.ctx));
}
END_TEST

START_TEST(every_tag_every_device)
{
	int nd = devices(), d, k;
	cms_pause_result pr = { .struct_size = sizeof(pr) };
	cms_context *ctx = t_ctx();
	struct fleet a, z;

	fleet_make(&a, ctx, "a", nd, CMS_POLICY_HOST);
	fleet_make(&z, ctx, "z", nd, CMS_POLICY_ZERO);
	ck_ok(cms_pause(ctx, NULL, NULL, &pr));
	ck_assert_uint_eq(pr.devices, (uint32_t)nd);
	ck_assert_uint_eq(pr.regions, 2ull * (uint64_t)nd);
	for (d = 0; d < nd; d++)
		ck_assert_uint_eq(pr.device_results[d].regions, 2);
	fleet_state(&a, CMS_STATE_PAUSED);
	fleet_state(&z, CMS_STATE_PAUSED);
	ck_ok(cms_resume(ctx, NULL, NULL, NULL));
	fleet_content(&a);
	for (d = 0; d < nd; d++)
		for (k = 0; k < NALLOC; k++)
			ck_assert(t_is_zero(d, z.p[d][k], sizes[k]));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* A tag on one device: the calling thread does it all (no worker), devices = 1. */
START_TEST(one_device_stays_on_the_calling_thread)
{
	cms_pause_result pr = { .struct_size = sizeof(pr) };
	cms_context *ctx = t_ctx();
	struct fleet f;

	fleet_make(&f, ctx, "solo", 1, CMS_POLICY_HOST);
	ck_assert_int_eq(msim()->copy_gate(2, 300),
			 0); /* two copying threads at once: never, here */
	ck_ok(cms_pause(ctx, "solo", NULL, &pr));
	ck_assert_int_eq(msim()->copy_gate_result(), 0);
	ck_assert_int_eq(msim()->copy_gate(0, 0), 0);
	check_devices(&f, pr.devices, pr.failed_device, pr.device_results, true);
	ck_ok(cms_resume(ctx, "solo", NULL, NULL));
	fleet_content(&f);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* The devices' workers copy at the same time: the gate opens only for nd threads at once. */
START_TEST(devices_copy_concurrently)
{
	int nd = devices();
	cms_context *ctx;
	struct fleet f;

	T_NEED_DEVICES(2);
	ctx = t_ctx();
	fleet_make(&f, ctx, "w", nd, CMS_POLICY_HOST);
	ck_assert_int_eq(msim()->copy_gate(nd, 60000), 0);
	ck_ok(cms_pause(ctx, "w", NULL, NULL));
	ck_assert_msg(msim()->copy_gate_result() == 1,
		      "the pause's copies did not run on %d threads at once", nd);
	ck_assert_int_eq(msim()->copy_gate(nd, 60000), 0);
	ck_ok(cms_resume(ctx, "w", NULL, NULL));
	ck_assert_msg(msim()->copy_gate_result() == 1,
		      "the resume's copies did not run on %d threads at once", nd);
	fleet_content(&f);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* ---- faults on one device roll every device back --------------------------- */

static void same_counts(const cmssim_counters *a, const cmssim_counters *b, const char *when)
{
	int d;

	ck_assert_msg(a->handles == b->handles && a->mappings == b->mappings &&
			      a->physical_allocations == b->physical_allocations &&
			      a->reservations == b->reservations &&
			      a->host_buffers == b->host_buffers &&
			      a->host_registrations == b->host_registrations &&
			      a->streams == b->streams && a->events == b->events,
		      "%s: handles %llu/%llu mappings %llu/%llu host buffers %llu/%llu "
		      "registrations %llu/%llu",
		      when, (unsigned long long)a->handles, (unsigned long long)b->handles,
		      (unsigned long long)a->mappings, (unsigned long long)b->mappings,
		      (unsigned long long)a->host_buffers, (unsigned long long)b->host_buffers,
		      (unsigned long long)a->host_registrations,
		      (unsigned long long)b->host_registrations);
	for (d = 0; d < CMSSIM_MAX_DEVICES; d++)
		ck_assert_msg(a->device_used_bytes[d] == b->device_used_bytes[d],
			      "%s: device %d uses %llu bytes, %llu before", when, d,
			      (unsigned long long)a->device_used_bytes[d],
			      (unsigned long long)b->device_used_bytes[d]);
}

/* The result of a call that failed because of `bad`: per-device statuses, 1.0 fields 0. */
static void check_failed(uint32_t ndev, int32_t failed, const cms_device_result *dr, int nd,
			 int bad, cms_status st, uint64_t regions)
{
	int d;

	ck_assert_uint_eq(ndev, (uint32_t)nd);
	ck_assert_int_eq(failed, bad);
	ck_assert_uint_eq(regions, 0);
	for (d = 0; d < nd; d++) {
		ck_assert_int_eq(dr[d].device, d);
		ck_assert_int_eq(dr[d].status, d == bad ? st : CMS_OK);
		ck_assert_uint_eq(dr[d].allocations, 0);
	}
}

/*
 * For each device in turn and each call index k of the work done while that device's
 * context is current, a pause with that call failed: either it succeeded (a call whose
 * failure does not matter, such as the free-memory reading) or every device is back as it
 * was, content included, with the same live objects, and the error names the device.
 */
START_TEST(pause_fault_on_one_device_rolls_back_all)
{
	int nd = devices() < 3 ? devices() : 3, bad = _i % 3, policy_case = _i / 3;
	uint32_t policy = policy_case ? CMS_POLICY_DISCARD : CMS_POLICY_HOST;
	cms_pause_result pr = { .struct_size = sizeof(pr) };
	cmssim_counters base, now;
	unsigned points = 0, absorbed = 0;
	cms_context *ctx;
	struct fleet h, o;
	cms_status st;
	uint64_t k;

	T_NEED_DEVICES_LOOP(bad + 1); /* a fault on device bad */
	ctx = t_ctx();
	fleet_make(&h, ctx, "w", nd, CMS_POLICY_HOST);
	fleet_make(&o, ctx, "o", nd, policy);
	base = t_counters();
	for (k = 1;; k++) {
		ck_assert_int_eq(msim()->fail_call_device("any", bad, k, 999), 0);
		memset(&pr, 0xee, sizeof(pr));
		pr.struct_size = sizeof(pr);
		st = cms_pause(ctx, NULL, NULL, &pr);
		if (t_sim()->armed_faults()) { /* fewer than k calls on that device */
			t_sim()->clear_faults();
			ck_assert_int_eq(st, CMS_OK);
			break;
		}
		points++;
		if (st == CMS_OK) { /* a call that may fail harmlessly: the pause is done */
			absorbed++;
			fleet_state(&h, CMS_STATE_PAUSED);
			ck_ok(cms_resume(ctx, NULL, NULL, NULL));
			fleet_content(&h);
			base = t_counters(); /* host buffers are kept from now on */
			continue;
		}
		ck_assert_msg(st != CMS_ERR_ROLLBACK_FAILED, "call %llu on device %d: %s",
			      (unsigned long long)k, bad, cms_last_error());
		if (nd > 1) /* one device: the failure's own message, as a one-device call's */
			ck_assert_msg(strstr(cms_last_error(), "device ") == cms_last_error(),
				      "message does not name the device: %s", cms_last_error());
		ck_assert_str_ne(cms_last_error(), "");
		check_failed(pr.devices, pr.failed_device, pr.device_results, nd, bad, st,
			     pr.regions);
		fleet_state(&h, CMS_STATE_ACTIVE);
		fleet_state(&o, CMS_STATE_ACTIVE);
		fleet_content(&h);
		now = t_counters();
		same_counts(&now, &base, "after a failed pause");
	}
	ck_assert_uint_gt(points, 10);
	printf("fault sweep: multi-device pause, %d devices, fault on device %d, %s + HOST: %u "
	       "points (%u absorbed)\n",
	       nd, bad, policy == CMS_POLICY_HOST ? "HOST" : "DISCARD", points, absorbed);
	fleet_state(&h, CMS_STATE_PAUSED); /* the last try, without a fault, paused */
	ck_ok(cms_resume(ctx, NULL, NULL, NULL));
	fleet_content(&h);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

START_TEST(resume_fault_on_one_device_keeps_all_paused)
{
	int nd = devices() < 3 ? devices() : 3, bad = _i % 3;
	cms_resume_options ro = CMS_RESUME_OPTIONS_INIT;
	cms_resume_result rr = { .struct_size = sizeof(rr) };
	cmssim_counters base, now;
	unsigned points = 0, absorbed = 0;
	cms_context *ctx;
	bool async = _i >= 3;
	CUstream stream = NULL;
	CUcontext c0, popped;
	struct fleet h, z;
	cms_status st;
	uint64_t k;
	int d;

	T_NEED_DEVICES_LOOP(bad + 1); /* a fault on device bad */
	ctx = t_ctx();
	fleet_make(&h, ctx, "w", nd, CMS_POLICY_HOST);
	fleet_make(&z, ctx, "z", nd, CMS_POLICY_ZERO);
	if (async) { /* the caller's stream, on device 0 */
		ck_assert_int_eq(t_drv()->cuDevicePrimaryCtxRetain(&c0, 0), 0);
		ck_assert_int_eq(t_drv()->cuCtxPushCurrent(c0), 0);
		ck_assert_int_eq(t_drv()->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), 0);
		ck_assert_int_eq(t_drv()->cuCtxPopCurrent(&popped), 0);
		ro.flags = CMS_RESUME_ASYNC;
		ro.stream = (uint64_t)(uintptr_t)stream;
	}
	ck_ok(cms_pause(ctx, NULL, NULL, NULL));
	base = t_counters();
	for (k = 1;; k++) {
		ck_assert_int_eq(msim()->fail_call_device("any", bad, k, 999), 0);
		st = cms_resume(ctx, NULL, &ro, &rr);
		if (t_sim()->armed_faults()) {
			t_sim()->clear_faults();
			ck_assert_int_eq(st, CMS_OK);
			break;
		}
		points++;
		if (st == CMS_OK) {
			absorbed++;
			fleet_state(&h, CMS_STATE_ACTIVE);
			fleet_content(&h);
			ck_ok(cms_pause(ctx, NULL, NULL, NULL));
			base = t_counters();
			continue;
		}
		ck_assert_msg(st != CMS_ERR_ROLLBACK_FAILED, "call %llu on device %d: %s",
			      (unsigned long long)k, bad, cms_last_error());
		check_failed(rr.devices, rr.failed_device, rr.device_results, nd, bad, st,
			     rr.regions);
		fleet_state(&h, CMS_STATE_PAUSED);
		fleet_state(&z, CMS_STATE_PAUSED);
		for (d = 0; d < nd; d++) /* the backups are kept */
			ck_assert_uint_eq(info(h.r[d]).backup_bytes, sizes[0] + sizes[1]);
		now = t_counters();
		same_counts(&now, &base, "after a failed resume");
	}
	ck_assert_uint_gt(points, 10);
	printf("fault sweep: multi-device resume%s, %d devices, fault on device %d: %u points "
	       "(%u absorbed)\n",
	       async ? " (async)" : "", nd, bad, points, absorbed);
	fleet_state(&h, CMS_STATE_ACTIVE); /* the last try, without a fault, resumed */
	if (async) {
		ck_assert_int_eq(t_drv()->cuCtxPushCurrent(c0), 0);
		ck_assert_int_eq(t_drv()->cuStreamSynchronize(stream), 0);
		ck_assert_int_eq(t_drv()->cuStreamDestroy(stream), 0);
		ck_assert_int_eq(t_drv()->cuCtxPopCurrent(&popped), 0);
		ck_assert_int_eq(t_drv()->cuDevicePrimaryCtxRelease(0), 0);
	}
	fleet_content(&h);
	for (d = 0; d < nd; d++)
		ck_assert(t_is_zero(d, z.p[d][0], sizes[0]));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* Out of memory on one device: every device stays paused; the retry succeeds. */
START_TEST(resume_oom_on_one_device)
{
	int nd = devices(), bad = nd - 1;
	cms_resume_result rr = { .struct_size = sizeof(rr) };
	cms_context *ctx = t_ctx();
	uint64_t cap = t_sim()->get_capacity(bad);
	struct fleet f;
	int d;

	fleet_make(&f, ctx, "w", nd, CMS_POLICY_HOST);
	ck_ok(cms_pause(ctx, "w", NULL, NULL));
	ck_assert_int_eq(t_sim()->set_capacity(bad, physical / 2), 0);
	ck_status(cms_resume(ctx, "w", NULL, &rr), CMS_ERR_OUT_OF_DEVICE_MEMORY);
	check_failed(rr.devices, rr.failed_device, rr.device_results, nd, bad,
		     CMS_ERR_OUT_OF_DEVICE_MEMORY, rr.regions);
	fleet_state(&f, CMS_STATE_PAUSED);
	for (d = 0; d < nd; d++)
		ck_assert_uint_eq(t_counters().device_used_bytes[d], 0);
	ck_assert_int_eq(t_sim()->set_capacity(bad, cap), 0);
	ck_ok(cms_resume(ctx, "w", NULL, &rr));
	check_devices(&f, rr.devices, rr.failed_device, rr.device_results, true);
	fleet_content(&f);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* A 1.0-sized result: filled on success, untouched on failure, nothing written past it. */
START_TEST(results_of_the_1_0_size)
{
	size_t p10 = offsetof(cms_pause_result, devices),
	       r10 = offsetof(cms_resume_result, devices);
	union {
		cms_pause_result p;
		cms_resume_result r;
		unsigned char b[sizeof(cms_pause_result) + sizeof(cms_resume_result)];
	} u;
	cms_context *ctx = t_ctx();
	struct fleet f;
	size_t i;

	fleet_make(&f, ctx, "w", devices(), CMS_POLICY_HOST);
	/* the failure: on device 1, or on device 0 where it is the only one */
	memset(&u, 0x5a, sizeof(u));
	u.p.struct_size = p10;
	ck_ok(cms_pause(ctx, "w", NULL, &u.p));
	ck_assert_uint_eq(u.p.regions, (uint64_t)f.nd);
	for (i = p10; i < sizeof(u); i++)
		ck_assert_msg(u.b[i] == 0x5a, "byte %zu written past a 1.0 result", i);
	memset(&u, 0x5a, sizeof(u));
	u.r.struct_size = r10;
	ck_assert_int_eq(msim()->fail_call_device("cuMemCreate", f.nd > 1 ? 1 : 0, 1, 2), 0);
	ck_status(cms_resume(ctx, "w", NULL, &u.r), CMS_ERR_OUT_OF_DEVICE_MEMORY);
	for (i = sizeof(size_t); i < sizeof(u); i++)
		ck_assert_msg(u.b[i] == 0x5a, "byte %zu of a 1.0 result written on failure", i);
	ck_ok(cms_resume(ctx, "w", NULL, &u.r)); /* and on success, up to its size */
	ck_assert_uint_eq(u.r.regions, (uint64_t)f.nd);
	for (i = r10; i < sizeof(u); i++)
		ck_assert_msg(u.b[i] == 0x5a, "byte %zu written past a 1.0 result", i);
	fleet_content(&f);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* ---- several threads, several tags, every device (TSan) ------------------- */

struct cycler {
	struct fleet *f;
	int cycles;
	cms_status st;
};

static void *cycle_thread(void *arg)
{
	struct cycler *c = arg;
	int i;

	for (i = 0; i < c->cycles && !c->st; i++) {
		c->st = cms_pause(c->f->ctx, c->f->tag, NULL, NULL);
		if (!c->st)
			c->st = cms_resume(c->f->ctx, c->f->tag, NULL, NULL);
	}
	return NULL;
}

static void *alloc_thread(void *arg)
{
	struct cycler *c = arg;
	uint64_t p;
	int i;

	for (i = 0; i < c->cycles * 4 && !c->st; i++) {
		c->st = cms_alloc(c->f->r[i % c->f->nd], 2 * MiB, &p);
		if (!c->st)
			c->st = cms_free(c->f->ctx, p);
	}
	return NULL;
}

START_TEST(threads_on_tags_across_devices)
{
	int nd = devices(), i;
	cms_context *ctx = t_ctx();
	struct fleet f[3];
	struct cycler c[3];
	pthread_t th[3];

	fleet_make(&f[0], ctx, "a", nd, CMS_POLICY_HOST);
	fleet_make(&f[1], ctx, "b", nd, CMS_POLICY_ZERO);
	fleet_make(&f[2], ctx, "c", nd, CMS_POLICY_DISCARD);
	for (i = 0; i < 3; i++) {
		c[i].f = &f[i];
		c[i].cycles = 12;
		c[i].st = CMS_OK;
		ck_assert_int_eq(
			pthread_create(&th[i], NULL, i < 2 ? cycle_thread : alloc_thread, &c[i]),
			0);
	}
	for (i = 0; i < 3; i++) {
		pthread_join(th[i], NULL);
		ck_assert_msg(c[i].st == CMS_OK, "thread %d: %s", i, cms_status_name(c[i].st));
	}
	fleet_state(&f[0], CMS_STATE_ACTIVE);
	fleet_content(&f[0]);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* ---- peer access --------------------------------------------------------------- */

/* Masks refused on any number of devices: no region, its own device, devices it lacks. */
START_TEST(peer_mask_checked)
{
	int nd = devices();
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "w", 0, CMS_POLICY_DISCARD);
	uint64_t p;

	ck_ok(cms_alloc(r, 2 * MiB, &p));
	ck_status(cms_region_peer_devices_set(NULL, 2), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_region_peer_devices_set(r, nd > 1 ? 0x3 : 0x1),
		  CMS_ERR_INVALID_ARGUMENT); /* own device (and a peer where there is one) */
	ck_status(cms_region_peer_devices_set(r, 1ull << nd), CMS_ERR_INVALID_DEVICE);
	ck_status(cms_region_peer_devices_set(r, 1ull << 63), CMS_ERR_INVALID_DEVICE);
	ck_assert_uint_eq(info(r).peer_device_mask, 0);
	ck_assert_int_eq(msim()->get_access(p, 0), CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* A peer that cannot access the device (the last) is refused; one that can (device 1) is set. */
START_TEST(peer_mask_refused_or_set)
{
	int nd = devices();
	cms_context *ctx;
	cms_region *r;
	uint64_t p;

	T_NEED_DEVICES(3); /* device 0, peer 1, and a last one without access */
	ctx = t_ctx();
	r = t_region(ctx, "w", 0, CMS_POLICY_DISCARD);
	ck_ok(cms_alloc(r, 2 * MiB, &p));
	ck_assert_int_eq(msim()->set_peer_access(nd - 1, 0, 0), 0);
	ck_status(cms_region_peer_devices_set(r, 1ull << (nd - 1)), CMS_ERR_NOT_SUPPORTED);
	ck_assert_ptr_nonnull(strstr(cms_last_error(), "cannot access"));
	ck_assert_uint_eq(info(r).peer_device_mask, 0);
	ck_assert_int_eq(msim()->get_access(p, nd - 1), 0); /* nothing changed */
	ck_ok(cms_region_peer_devices_set(r, 0x2));
	ck_assert_uint_eq(info(r).peer_device_mask, 0x2);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* Granted at allocation, gone while paused, granted again by every resume; set and drop. */
START_TEST(peer_access_after_resume)
{
	int nd = devices(), d, cycle;
	cms_context *ctx;
	cms_region *r;
	uint32_t buf[64];
	uint64_t p, q;

	T_NEED_DEVICES(3); /* peers 1 and 2 of device 0 */
	ctx = t_ctx();
	r = t_region(ctx, "w", 0, CMS_POLICY_HOST);
	ck_ok(cms_region_peer_devices_set(r, 0x2)); /* device 1 */
	ck_ok(cms_alloc(r, 4 * MiB, &p));
	for (d = 0; d < nd; d++)
		ck_assert_int_eq(msim()->get_access(p + 2 * MiB, d),
				 d <= 1 ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : 0);
	/* device 1 writes device 0's memory; device 2 may not read it */
	ck_assert_int_eq(t_fill(1, p, 4 * MiB, 77), 0);
	ck_assert_int_eq(t_read(2, buf, p, sizeof(buf)), CUDA_ERROR_INVALID_VALUE);
	for (cycle = 0; cycle < 2; cycle++) {
		ck_ok(cms_pause(ctx, "w", NULL, NULL));
		ck_assert_int_eq(msim()->get_access(p, 1), -1); /* not mapped */
		ck_ok(cms_resume(ctx, "w", NULL, NULL));
		ck_assert_int_eq(msim()->get_access(p, 0), CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
		ck_assert_int_eq(msim()->get_access(p, 1), CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
		ck_assert_int_eq(t_check(1, p, 4 * MiB, 77), -1); /* read by the peer */
	}
	/* on an active region: new peers at once, dropped ones lose access */
	ck_ok(cms_alloc(r, 2 * MiB, &q));
	ck_ok(cms_region_peer_devices_set(r, 0x4));
	ck_assert_int_eq(msim()->get_access(p, 1), 0);
	ck_assert_int_eq(msim()->get_access(q, 1), 0);
	ck_assert_int_eq(msim()->get_access(q, 2), CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	ck_assert_int_eq(t_check(2, p, 4 * MiB, 77), -1);
	ck_assert_int_eq(t_read(1, buf, p, sizeof(buf)), CUDA_ERROR_INVALID_VALUE);
	ck_ok(cms_region_peer_devices_set(r, 0));
	ck_assert_int_eq(msim()->get_access(q, 2), 0);
	ck_assert_int_eq(msim()->get_access(q, 0), CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* A failed cuMemSetAccess: the allocations already changed get their old access back. */
START_TEST(peer_set_is_all_or_nothing)
{
	cms_context *ctx;
	cms_region *r;
	uint64_t p[3];
	int k;

	T_NEED_DEVICES(2);
	ctx = t_ctx();
	r = t_region(ctx, "w", 0, CMS_POLICY_DISCARD);
	for (k = 0; k < 3; k++)
		ck_ok(cms_alloc(r, 2 * MiB, &p[k]));
	ck_assert_int_eq(t_sim()->fail_call("cuMemSetAccess", 2, 999), 0);
	ck_status(cms_region_peer_devices_set(r, 0x2), CMS_ERR_DRIVER);
	ck_assert_uint_eq(info(r).peer_device_mask, 0);
	for (k = 0; k < 3; k++)
		ck_assert_int_eq(msim()->get_access(p[k], 1), 0);
	/* the rollback fails too: the new mask is kept for the next mapping */
	ck_assert_int_eq(t_sim()->fail_call("cuMemSetAccess", 2, 999), 0);
	ck_assert_int_eq(t_sim()->fail_call("cuMemSetAccess", 3, 999), 0);
	ck_status(cms_region_peer_devices_set(r, 0x2), CMS_ERR_ROLLBACK_FAILED);
	ck_assert_uint_eq(info(r).peer_device_mask, 0x2);
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_ok(cms_region_resume(r, NULL, NULL));
	for (k = 0; k < 3; k++)
		ck_assert_int_eq(msim()->get_access(p[k], 1), CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/*
 * A kernel on device 1 reads a HOST region of device 0 through peer access, before and
 * after a pause/resume of the tag on both devices (on the simulation, which runs no
 * kernels, a device-to-device copy in device 1's context: the simulation checks that
 * device 1 has access).
 */
START_TEST(peer_reads_after_resume)
{
	struct cms_driver *drv = t_drv();
	cms_context *ctx;
	cms_region *src, *dst;
	uint64_t n = 1 * MiB / 4, in, out, i;
	CUcontext c1, popped;
	CUdevice d0, d1;
	CUmodule mod = NULL;
	CUfunction fn = NULL;
	uint32_t *host;
	int can = 0, cycle, res;

	T_NEED_DEVICES(2);
	ctx = t_ctx();
	src = t_region(ctx, "w", 0, CMS_POLICY_HOST);
	dst = t_region(ctx, "w", 1, CMS_POLICY_DISCARD);
	ck_assert_int_eq(drv->cuDeviceGet(&d0, 0), 0);
	ck_assert_int_eq(drv->cuDeviceGet(&d1, 1), 0);
	ck_assert_int_eq(drv->cuDeviceCanAccessPeer(&can, d1, d0), 0);
	if (!can) {
		printf("peer_reads_after_resume: device 1 cannot access device 0: skipped\n");
		ck_ok(cms_context_destroy(ctx));
		return;
	}
	ck_ok(cms_region_peer_devices_set(src, 0x2));
	ck_ok(cms_alloc(src, n * 4, &in));
	ck_ok(cms_alloc(dst, n * 4, &out));
	ck_assert_int_eq(t_fill(0, in, n * 4, 5), 0);
	host = malloc(n * 4);
	ck_assert_ptr_nonnull(host);
	ck_assert_int_eq(drv->cuDevicePrimaryCtxRetain(&c1, d1), 0);
	ck_assert_int_eq(drv->cuCtxPushCurrent(c1), 0);
	res = drv->cuModuleLoadData(&mod, cms_kernels_ptx);
	if (res == CUDA_SUCCESS)
		ck_assert_int_eq(drv->cuModuleGetFunction(&fn, mod, CMS_KERNEL_AFFINE_NAME), 0);
	else
		ck_assert_int_eq(res, CUDA_ERROR_NOT_SUPPORTED); /* the simulation */
	for (cycle = 0; cycle < 3; cycle++) {
		if (cycle) {
			ck_assert_int_eq(drv->cuCtxPopCurrent(&popped), 0);
			ck_ok(cms_pause(ctx, "w", NULL, NULL));
			ck_ok(cms_resume(ctx, "w", NULL, NULL));
			ck_assert_int_eq(drv->cuCtxPushCurrent(c1), 0);
		}
		if (fn) {
			void *params[] = { &in, &out, &n };

			ck_assert_int_eq(
				drv->cuLaunchKernel(
					fn,
					(unsigned)((n + CMS_KERNEL_BLOCK - 1) / CMS_KERNEL_BLOCK),
					1, 1, CMS_KERNEL_BLOCK, 1, 1, 0, NULL, params, NULL),
				0);
		} else {
			ck_assert_int_eq(drv->cuMemcpyDtoDAsync(out, in, n * 4, NULL), 0);
		}
		ck_assert_int_eq(drv->cuCtxSynchronize(), 0);
		ck_assert_int_eq(drv->cuMemcpyDtoH(host, out, n * 4), 0);
		for (i = 0; i < n; i++) {
			uint32_t want = t_pattern(5, i);

			if (fn)
				want = want * 2 + 1;
			ck_assert_msg(host[i] == want, "cycle %d: word %llu is 0x%08x, want 0x%08x",
				      cycle, (unsigned long long)i, host[i], want);
		}
	}
	if (mod)
		drv->cuModuleUnload(mod);
	ck_assert_int_eq(drv->cuCtxPopCurrent(&popped), 0);
	ck_assert_int_eq(drv->cuDevicePrimaryCtxRelease(d1), 0);
	free(host);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* ---- suite ------------------------------------------------------------------- */

static int have_sim;

static Suite *make(void)
{
	Suite *s = suite_create("multigpu");
	TCase *tc = tcase_create("devices");

	tcase_set_timeout(tc, 600);
	tcase_add_loop_test(tc, tag_spans_devices, 0, MAXD); /* 1..MAXD devices */
	tcase_add_test(tc, every_tag_every_device);
	tcase_add_test(tc, threads_on_tags_across_devices);
	tcase_add_test(tc, peer_reads_after_resume);
	if (have_sim) {
		tcase_add_test(tc, one_device_stays_on_the_calling_thread);
		tcase_add_test(tc, devices_copy_concurrently);
		/* a fault on device 0, 1, 2 x (HOST + HOST, HOST + DISCARD); resume: device 0, 1,
		 * 2 x (sync, async); those on a device the driver lacks skip */
		tcase_add_loop_test(tc, pause_fault_on_one_device_rolls_back_all, 0, 6);
		tcase_add_loop_test(tc, resume_fault_on_one_device_keeps_all_paused, 0, 6);
		tcase_add_test(tc, resume_oom_on_one_device);
		tcase_add_test(tc, results_of_the_1_0_size);
		tcase_add_test(tc, peer_mask_checked);
		tcase_add_test(tc, peer_mask_refused_or_set);
		tcase_add_test(tc, peer_access_after_resume);
		tcase_add_test(tc, peer_set_is_all_or_nothing);
	}
	suite_add_tcase(s, tc);
	return s;
}

/* Devices of the driver CMS_DRIVER_LIBRARY selects, probed in a child (no CUDA here): without
 * one t_main skips (77); with one the cases run their one-device paths. */
int main(void)
{
	t_probe_devices(&have_sim);
	return t_main(make, T_NEEDS_DEVICE);
}
