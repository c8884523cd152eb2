/* SPDX-License-Identifier: MIT */
/*
 * test_hooks.c - the allocator hooks (since 1.1): hook context, per-thread
 * region stack, and PyTorch's pluggable-allocator entry points, called the
 * way PyTorch calls them (allocation on the region's thread, frees from any
 * thread), and the default regions of devices (since 1.2).
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

START_TEST(push_pop_and_current)
{
	cms_context *ctx = t_ctx(), *other = t_ctx();
	cms_region *a = t_region(ctx, "weights", 0, CMS_POLICY_HOST);
	cms_region *b = t_region(ctx, "kv", 0, CMS_POLICY_DISCARD);
	cms_region *foreign = t_region(other, "weights", 0, CMS_POLICY_HOST);
	int i;

	ck_assert_ptr_null(cms_hook_region_current());
	ck_status(cms_hook_region_push(a), CMS_ERR_INVALID_ARGUMENT); /* no hook context */
	ck_ok(cms_hook_context_set(ctx));
	ck_status(cms_hook_region_push(NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_hook_region_push(foreign), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_hook_region_pop(), CMS_ERR_NOT_FOUND);
	ck_ok(cms_hook_region_push(a));
	ck_ok(cms_hook_region_push(b));
	ck_assert_ptr_eq(cms_hook_region_current(), b);
	ck_ok(cms_hook_region_pop());
	ck_assert_ptr_eq(cms_hook_region_current(), a);
	ck_ok(cms_hook_region_pop());
	ck_assert_ptr_null(cms_hook_region_current());
	for (i = 0; i < CMS_HOOK_DEPTH_MAX; i++)
		ck_ok(cms_hook_region_push(a));
	ck_status(cms_hook_region_push(a), CMS_ERR_INVALID_ARGUMENT);
	for (i = 0; i < CMS_HOOK_DEPTH_MAX; i++)
		ck_ok(cms_hook_region_pop());
	ck_status(cms_hook_region_pop(), CMS_ERR_NOT_FOUND);
	ck_ok(cms_context_destroy(other));
	ck_ok(cms_context_destroy(ctx));
	/* Destroying the hook context clears it. */
	ck_status(cms_hook_free((void *)0x1000), CMS_ERR_INVALID_ARGUMENT);
}
END_TEST

static void *thread_sees_no_region(void *arg)
{
	(void)arg;
	return cms_hook_region_current();
}

static void *thread_frees(void *arg)
{
	cms_torch_free(arg, 0, 0, NULL);
	return NULL;
}

START_TEST(torch_alloc_goes_to_the_threads_region)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "weights", 0, CMS_POLICY_HOST);
	cms_pointer_info info = { .struct_size = sizeof(info) };
	cms_region_info ri = { .struct_size = sizeof(ri) };
	pthread_t th;
	void *p, *seen;

	ck_ok(cms_hook_context_set(ctx));
	cms_last_error_message(NULL, 0);
	ck_assert_ptr_null(cms_torch_alloc(4 * MiB, 0, NULL)); /* no region active */
	ck_assert_msg(strstr(cms_last_error(), "no region") != NULL, "%s", cms_last_error());
	ck_ok(cms_hook_region_push(r));
	ck_assert_ptr_null(cms_torch_alloc(0, 0, NULL));
	ck_assert_ptr_null(cms_torch_alloc(-5, 0, NULL));
	ck_assert_ptr_null(cms_torch_alloc(4 * MiB, 1, NULL)); /* not the region's device */
	ck_assert_msg(strstr(cms_last_error(), "device") != NULL, "%s", cms_last_error());
	p = cms_torch_alloc(3 * MiB + 5, 0, (void *)0x1234);
	ck_assert_msg(p != NULL, "%s", cms_last_error());
	ck_ok(pthread_create(&th, NULL, thread_sees_no_region, NULL) ? CMS_ERR_INTERNAL : CMS_OK);
	pthread_join(th, &seen);
	ck_assert_ptr_null(seen);
	ck_ok(cms_pointer_info_get(ctx, (uint64_t)(uintptr_t)p, &info));
	ck_assert_ptr_eq(info.region, r);
	ck_assert_uint_eq(info.size, 3 * MiB + 5);
	ck_assert_int_eq(t_fill(0, (uint64_t)(uintptr_t)p, 3 * MiB, 7), 0);
	ck_ok(cms_hook_region_pop());
	/* The content survives a cycle (HOST policy) at the same address. */
	ck_ok(cms_pause(ctx, "weights", NULL, NULL));
	ck_ok(cms_resume(ctx, "weights", NULL, NULL));
	ck_assert_int_eq(t_check(0, (uint64_t)(uintptr_t)p, 3 * MiB, 7), -1);
	/* Freed from another thread with no region active (the garbage collector). */
	ck_ok(pthread_create(&th, NULL, thread_frees, p) ? CMS_ERR_INTERNAL : CMS_OK);
	pthread_join(th, NULL);
	ck_status(cms_pointer_info_get(ctx, (uint64_t)(uintptr_t)p, &info), CMS_ERR_NOT_FOUND);
	ck_ok(cms_region_info_get(r, &ri));
	ck_assert_uint_eq(ri.allocations, 0);
	/* Unknown and NULL pointers are ignored, not fatal. */
	cms_torch_free(NULL, 0, 0, NULL);
	cms_torch_free((void *)0x10, 0, 0, NULL);
	ck_status(cms_hook_free((void *)0x10), CMS_ERR_NOT_FOUND);
	ck_status(cms_hook_free(NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_ok(cms_hook_context_set(NULL));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

START_TEST(paused_region_refuses_and_free_while_paused_works)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "kv", 0, CMS_POLICY_DISCARD);
	cms_region_info ri = { .struct_size = sizeof(ri) };
	void *p;

	ck_ok(cms_hook_context_set(ctx));
	ck_ok(cms_hook_region_push(r));
	p = cms_torch_alloc(2 * MiB, 0, NULL);
	ck_assert_ptr_nonnull(p);
	ck_ok(cms_pause(ctx, "kv", NULL, NULL));
	ck_assert_ptr_null(cms_torch_alloc(2 * MiB, 0, NULL));
	ck_assert_msg(strstr(cms_last_error(), "paused") != NULL, "%s", cms_last_error());
	cms_torch_free(p, 2 * MiB, 0, NULL); /* empty_cache while paused */
	ck_ok(cms_region_info_get(r, &ri));
	ck_assert_uint_eq(ri.allocations, 0);
	ck_ok(cms_hook_region_pop());
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* A region destroyed while on the thread's stack is refused, never touched (ASan). */
START_TEST(destroyed_region_on_stack_is_refused)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "kv", 0, CMS_POLICY_DISCARD);
	uint64_t p = 1;

	ck_ok(cms_hook_context_set(ctx));
	ck_ok(cms_hook_region_push(r));
	ck_ok(cms_region_destroy(r));
	ck_assert_ptr_null(cms_torch_alloc(2 * MiB, 0, NULL));
	ck_status(cms_hook_alloc(2 * MiB, 0, &p), CMS_ERR_INVALID_ARGUMENT);
	ck_assert_uint_eq(p, 0);
	ck_ok(cms_hook_region_pop());
	ck_status(cms_hook_alloc(2 * MiB, 0, &p), CMS_ERR_NOT_FOUND); /* not ours to serve */
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* PyTorch frees its pools' segments late: after the region or the whole context was
 * destroyed, such a free succeeds as a no-op (once), instead of being an unknown pointer. */
START_TEST(free_after_destroy_is_a_no_op)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "kv", 0, CMS_POLICY_DISCARD);
	cms_region *w = t_region(ctx, "w", 0, CMS_POLICY_HOST);
	uint64_t a = 0, b = 0, c = 0;

	ck_ok(cms_hook_context_set(ctx));
	ck_ok(cms_hook_region_push(r));
	ck_ok(cms_hook_alloc(2 * MiB, 0, &a));
	ck_ok(cms_hook_region_pop());
	ck_ok(cms_hook_region_push(w));
	ck_ok(cms_hook_alloc(2 * MiB, -1, &b));
	ck_status(cms_hook_alloc(2 * MiB, 1, &c), CMS_ERR_INVALID_DEVICE);
	ck_ok(cms_hook_region_pop());
	ck_ok(cms_region_destroy(r));
	ck_ok(cms_hook_free((void *)(uintptr_t)a)); /* region gone: retired */
	ck_status(cms_hook_free((void *)(uintptr_t)a), CMS_ERR_NOT_FOUND); /* only once */
	ck_ok(cms_context_destroy(ctx)); /* clears the hook context */
	ck_ok(cms_hook_free((void *)(uintptr_t)b));
	ck_status(cms_hook_free((void *)(uintptr_t)b), CMS_ERR_INVALID_ARGUMENT);
}
END_TEST

/* A failed cms_context_destroy leaves the context usable, and still the hook context. */
/* A DISCARD region "kv" made the hook context's, and one hooked allocation of 2 MiB in it. */
static uint64_t hooked_kv_alloc(cms_context *ctx)
{
	cms_region *r = t_region(ctx, "kv", 0, CMS_POLICY_DISCARD);
	uint64_t p = 0;

	ck_ok(cms_hook_context_set(ctx));
	ck_ok(cms_hook_region_push(r));
	ck_ok(cms_hook_alloc(2 * MiB, 0, &p));
	ck_ok(cms_hook_region_pop());
	return p;
}

START_TEST(failed_destroy_keeps_hook_context)
{
	cms_context *ctx;
	uint64_t p;

	if (!t_is_sim())
		return;
	ctx = t_ctx();
	p = hooked_kv_alloc(ctx);
	t_sim()->fail_call("cuMemUnmap", 1, 999);
	ck_assert_int_ne(cms_context_destroy(ctx), CMS_OK);
	t_sim()->clear_faults();
	ck_ok(cms_hook_free((void *)(uintptr_t)p));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* A hooked free waits for the allocation's device first, as cudaFree does: a failed wait (a
 * fault of an earlier kernel) frees nothing, and the next free completes. The simulation
 * runs kernels synchronously, so the wait is seen through a fault armed on it. */
START_TEST(hook_free_waits_for_the_device)
{
	cms_context *ctx;
	uint64_t p;

	if (!t_is_sim())
		return;
	ctx = t_ctx();
	p = hooked_kv_alloc(ctx);
	ck_assert_int_eq(t_fill(0, p, 2 * MiB, 5), 0);
	ck_assert_int_eq(t_sim()->fail_call("cuCtxSynchronize", 1, 700), 0); /* illegal address */
	ck_assert_int_ne(cms_hook_free((void *)(uintptr_t)p), CMS_OK);
	t_sim()->clear_faults();
	ck_assert_int_eq(t_check(0, p, 2 * MiB, 5), -1); /* still mapped, content kept */
	cms_torch_free((void *)(uintptr_t)p, 2 * MiB, 0, NULL);
	ck_status(cms_hook_free((void *)(uintptr_t)p), CMS_ERR_NOT_FOUND); /* freed by the above */
	ck_ok(cms_hook_context_set(NULL));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* A forked child's free of a pointer of the parent's hook context answers CMS_ERR_FORKED
 * without touching the driver or the context's locks (as cms_free does): the interposer hands
 * it to the runtime. The wait armed to fail in the parent fails in the child too, so a free
 * that waited for the device before checking the fork returns the wait's status. */
START_TEST(forked_child_free_of_ours_is_forked_without_waiting)
{
	cms_context *ctx;
	int status = 0;
	uint64_t p;
	pid_t pid;

	if (!t_is_sim())
		return;
	ctx = t_ctx();
	p = hooked_kv_alloc(ctx);
	ck_assert_int_eq(t_sim()->fail_call("cuCtxSynchronize", 1, 700), 0);
	pid = fork();
	if (pid == 0) {
		alarm(10); /* a hang fails the test with SIGALRM */
		_exit(cms_hook_free((void *)(uintptr_t)p) != CMS_ERR_FORKED);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	t_sim()->clear_faults();
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: exit %d, signal %d",
		      WIFEXITED(status) ? WEXITSTATUS(status) : -1,
		      WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	ck_ok(cms_hook_free((void *)(uintptr_t)p)); /* the parent's is still there */
	ck_ok(cms_hook_context_set(NULL));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* A forked child starts with an empty stack: its allocations are not ours. */
START_TEST(forked_child_has_an_empty_stack)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "kv", 0, CMS_POLICY_DISCARD);
	int status = 0;
	pid_t pid;

	ck_ok(cms_hook_context_set(ctx));
	ck_ok(cms_hook_region_push(r));
	pid = fork();
	if (pid == 0) {
		uint64_t p;
		int bad = 0;

		if (cms_hook_region_current() != NULL)
			bad |= 1;
		if (cms_hook_region_pop() != CMS_ERR_NOT_FOUND)
			bad |= 2;
		if (cms_hook_alloc(MiB, 0, &p) != CMS_ERR_FORKED)
			bad |= 4; /* the header's status; the interposer hands it to the runtime */
		if (cms_hook_free((void *)0x1000) != CMS_ERR_FORKED)
			bad |= 8; /* the interposer hands such frees to the runtime */
		_exit(bad);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d",
		      WEXITSTATUS(status));
	ck_assert_ptr_eq(cms_hook_region_current(), r); /* the parent's stack is intact */
	ck_ok(cms_hook_region_pop());
	ck_ok(cms_hook_context_set(NULL));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

static atomic_int stop_freeing;

static void *free_loop(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop_freeing))
		cms_torch_free((void *)0x1000, 0, 0, NULL); /* the garbage collector */
	return NULL;
}

/* Clearing the hook context waits for frees in flight, so destroying the context right after
 * never races one (ASan/TSan find the use after free this used to be). */
START_TEST(clear_then_destroy_with_frees_in_flight)
{
	int i;

	for (i = 0; i < 200; i++) {
		cms_context *ctx = t_ctx();
		pthread_t th;

		ck_ok(cms_hook_context_set(ctx));
		atomic_store(&stop_freeing, 0);
		ck_assert_int_eq(pthread_create(&th, NULL, free_loop, NULL), 0);
		ck_ok(cms_hook_context_set(NULL));
		ck_ok(cms_context_destroy(ctx));
		atomic_store(&stop_freeing, 1);
		pthread_join(th, NULL);
	}
}
END_TEST

struct alloc_race {
	cms_region *region;
	atomic_int pushed;
};

/* Allocates and frees in the thread's active region until the region is refused. */
static void *hook_alloc_loop(void *arg)
{
	struct alloc_race *ar = arg;
	uint64_t p = 0;

	if (cms_hook_region_push(ar->region)) {
		atomic_store(&ar->pushed, -1);
		return NULL;
	}
	atomic_store(&ar->pushed, 1);
	while (cms_hook_alloc(2 * MiB, 0, &p) == CMS_OK)
		cms_hook_free((void *)(uintptr_t)p); /* ours, or retired by the destroy */
	cms_hook_region_pop();
	return NULL;
}

/* A region destroyed while a hooked allocation in it is in flight: the allocation holds a
 * reference, so the destroy never frees the region under it (ASan: heap-use-after-free), and
 * an allocation that comes after the destroy is refused instead of landing in a dead region. */
START_TEST(region_destroy_races_hooked_alloc)
{
	cms_context *ctx = t_ctx();
	cmssim_counters c;
	int i;

	ck_ok(cms_hook_context_set(ctx));
	for (i = 0; i < 200; i++) {
		struct alloc_race ar = { .region = t_region(ctx, "kv", 0, CMS_POLICY_DISCARD) };
		pthread_t th;

		ck_assert_int_eq(pthread_create(&th, NULL, hook_alloc_loop, &ar), 0);
		while (!atomic_load(&ar.pushed))
			sched_yield();
		ck_assert_int_eq(atomic_load(&ar.pushed), 1);
		ck_ok(cms_region_destroy(ar.region));
		pthread_join(th, NULL);
	}
	ck_ok(cms_hook_context_set(NULL));
	ck_ok(cms_context_destroy(ctx));
	if (t_is_sim()) { /* nothing allocated into a destroyed region is left behind */
		c = t_counters();
		ck_assert_uint_eq(c.mappings, 0);
		ck_assert_uint_eq(c.handles, 0);
		ck_assert_uint_eq(c.reservations, 0);
	}
}
END_TEST

#define STEADY_THREADS 8

static atomic_int stop_traffic;

/* Steady hooked traffic: allocates and frees in the thread's region until told to stop. */
static void *steady_traffic(void *arg)
{
	uint64_t p = 0;

	if (cms_hook_region_push(arg))
		return NULL;
	while (!atomic_load(&stop_traffic))
		if (cms_hook_alloc(2 * MiB, 0, &p) == CMS_OK)
			cms_hook_free((void *)(uintptr_t)p);
	cms_hook_region_pop();
	return NULL;
}

struct set_call {
	cms_context *ctx;
	pthread_mutex_t lock;
	pthread_cond_t done_cond;
	int done;
	cms_status st;
};

static void *set_hook_context(void *arg)
{
	struct set_call *c = arg;
	cms_status st = cms_hook_context_set(c->ctx);

	pthread_mutex_lock(&c->lock);
	c->st = st;
	c->done = 1;
	pthread_cond_signal(&c->done_cond);
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* Whether cms_hook_context_set(ctx) returns within 10 s (a liveness bound, not a timing). */
static int set_returns(cms_context *ctx, cms_status *st)
{
	struct set_call c = { .ctx = ctx };
	struct timespec deadline;
	pthread_t th;
	int done;

	pthread_mutex_init(&c.lock, NULL);
	pthread_cond_init(&c.done_cond, NULL);
	ck_assert_int_eq(pthread_create(&th, NULL, set_hook_context, &c), 0);
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 10;
	pthread_mutex_lock(&c.lock);
	while (!c.done && pthread_cond_timedwait(&c.done_cond, &c.lock, &deadline) == 0)
		;
	done = c.done;
	pthread_mutex_unlock(&c.lock);
	if (!done)
		atomic_store(&stop_traffic, 1); /* lets the set return, so the thread can end */
	pthread_join(th, NULL);
	*st = c.st;
	pthread_cond_destroy(&c.done_cond);
	pthread_mutex_destroy(&c.lock);
	return done;
}

/* Switching the hook context waits only for the hooked calls that loaded the previous one, not
 * for a moment with no hooked call in flight, which steady traffic never leaves. */
START_TEST(context_set_returns_under_steady_traffic)
{
	cms_context *ctx = t_ctx();
	cms_region *r[STEADY_THREADS];
	pthread_t th[STEADY_THREADS];
	char tag[16];
	cms_status st = CMS_OK;
	int i, k;

	ck_ok(cms_hook_context_set(ctx));
	for (i = 0; i < STEADY_THREADS; i++) {
		snprintf(tag, sizeof(tag), "t%d", i);
		r[i] = t_region(ctx, tag, 0, CMS_POLICY_DISCARD);
	}
	atomic_store(&stop_traffic, 0);
	for (i = 0; i < STEADY_THREADS; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, steady_traffic, r[i]), 0);
	for (k = 0; k < 5; k++) {
		ck_assert_msg(set_returns(ctx, &st), "cms_hook_context_set did not return in 10 s "
						     "under steady hooked traffic");
		ck_ok(st);
	}
	ck_assert_msg(set_returns(NULL, &st), "clearing the hook context did not return");
	ck_ok(st);
	atomic_store(&stop_traffic, 1);
	for (i = 0; i < STEADY_THREADS; i++)
		pthread_join(th[i], NULL);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* A child forked while hooked calls were in flight on other threads can clear the hook context:
 * those calls are not in flight in the child. */
START_TEST(child_clears_hook_context_forked_under_traffic)
{
	cms_context *ctx = t_ctx();
	cms_region *r[STEADY_THREADS];
	pthread_t th[STEADY_THREADS];
	char tag[16];
	int i, k, status;

	ck_ok(cms_hook_context_set(ctx));
	for (i = 0; i < STEADY_THREADS; i++) {
		snprintf(tag, sizeof(tag), "t%d", i);
		r[i] = t_region(ctx, tag, 0, CMS_POLICY_DISCARD);
	}
	atomic_store(&stop_traffic, 0);
	for (i = 0; i < STEADY_THREADS; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, steady_traffic, r[i]), 0);
	for (k = 0; k < 10; k++) {
		pid_t pid = fork();

		if (pid == 0) {
			alarm(10); /* a hang fails the test with SIGALRM */
			_exit(cms_hook_context_set(NULL) != CMS_OK);
		}
		ck_assert_int_gt(pid, 0);
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			      "child: exit %d, signal %d",
			      WIFEXITED(status) ? WEXITSTATUS(status) : -1,
			      WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	}
	atomic_store(&stop_traffic, 1);
	for (i = 0; i < STEADY_THREADS; i++)
		pthread_join(th[i], NULL);
	ck_ok(cms_hook_context_set(NULL));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* Maps memory that is not ours at addr (as the CUDA runtime may, once a destroy freed the
 * address): returns its handle, or 0 when the driver put the reservation elsewhere. */
static CUmemGenericAllocationHandle map_foreign(uint64_t addr, size_t size)
{
	struct cms_driver *d = t_drv();
	CUmemAllocationProp prop;
	CUmemGenericAllocationHandle h = 0;
	CUdeviceptr base = 0;

	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 0;
	ck_assert_int_eq(d->cuMemAddressReserve(&base, size, 0, addr, 0), CUDA_SUCCESS);
	if (base != addr) {
		ck_assert_int_eq(d->cuMemAddressFree(base, size), CUDA_SUCCESS);
		return 0;
	}
	ck_assert_int_eq(d->cuMemCreate(&h, size, &prop, 0), CUDA_SUCCESS);
	ck_assert_int_eq(d->cuMemMap(addr, size, 0, h, 0), CUDA_SUCCESS);
	return h;
}

static void unmap_foreign(uint64_t addr, size_t size, CUmemGenericAllocationHandle h)
{
	struct cms_driver *d = t_drv();

	ck_assert_int_eq(d->cuMemUnmap(addr, size), CUDA_SUCCESS);
	ck_assert_int_eq(d->cuMemRelease(h), CUDA_SUCCESS);
	ck_assert_int_eq(d->cuMemAddressFree(addr, size), CUDA_SUCCESS);
}

/* A retired pointer whose address now holds memory that is not ours (the runtime handed it out
 * again) is not swallowed: its free is not ours, so the interposer gives it to the runtime. */
START_TEST(retired_address_reused_by_others_is_not_ours)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "kv", 0, CMS_POLICY_DISCARD);
	struct cms_driver *d = t_drv();
	CUmemGenericAllocationHandle h;
	CUcontext c, popped;
	CUdevice cu;
	uint64_t a = 0;

	ck_ok(cms_hook_context_set(ctx));
	ck_ok(cms_hook_region_push(r));
	ck_ok(cms_hook_alloc(2 * MiB, 0, &a));
	ck_ok(cms_hook_region_pop());
	ck_ok(cms_region_destroy(r)); /* a is retired; its reservation is freed */
	ck_assert_int_eq(d->cuDeviceGet(&cu, 0), CUDA_SUCCESS);
	ck_assert_int_eq(d->cuDevicePrimaryCtxRetain(&c, cu), CUDA_SUCCESS);
	ck_assert_int_eq(d->cuCtxPushCurrent(c), CUDA_SUCCESS);
	h = map_foreign(a, 2 * MiB);
	if (h) { /* the driver honoured the address hint (the simulation always does) */
		ck_status(cms_hook_free((void *)(uintptr_t)a), CMS_ERR_NOT_FOUND);
		unmap_foreign(a, 2 * MiB, h);
		ck_status(cms_hook_free((void *)(uintptr_t)a), CMS_ERR_NOT_FOUND); /* forgotten */
	}
	d->cuCtxPopCurrent(&popped);
	d->cuDevicePrimaryCtxRelease(cu);
	ck_ok(cms_hook_context_set(NULL));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* ---- default regions (since 1.2) ---- */

static cms_region *region_of(cms_context *ctx, uint64_t p)
{
	cms_pointer_info pi = { .struct_size = sizeof(pi) };

	ck_ok(cms_pointer_info_get(ctx, p, &pi));
	return pi.region;
}

/* A thread with no active region allocates in its device's default region; a pushed region
 * comes first; another device, or none given, is not served. */
START_TEST(default_region_serves_threads_without_one)
{
	cms_context *ctx = t_ctx(), *other = t_ctx();
	cms_region *r = t_region(ctx, "all", 0, CMS_POLICY_DISCARD);
	cms_region *top = t_region(ctx, "top", 0, CMS_POLICY_DISCARD);
	cms_region *foreign = t_region(other, "x", 0, CMS_POLICY_DISCARD);
	uint64_t p = 1;
	void *tp;

	/* No hook context: nothing to set; clearing is fine. */
	ck_status(cms_hook_region_default_set(0, r), CMS_ERR_INVALID_ARGUMENT);
	ck_ok(cms_hook_region_default_set(0, NULL));
	ck_assert_ptr_null(cms_hook_region_default(0));
	ck_ok(cms_hook_context_set(ctx));
	ck_status(cms_hook_alloc(MiB, 0, &p), CMS_ERR_NOT_FOUND); /* no default yet */
	ck_assert_uint_eq(p, 0);
	ck_status(cms_hook_region_default_set(-1, r), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_hook_region_default_set(64, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_hook_region_default_set(1, r), CMS_ERR_INVALID_ARGUMENT); /* on device 0 */
	ck_status(cms_hook_region_default_set(0, foreign), CMS_ERR_INVALID_ARGUMENT);
	ck_assert_ptr_null(cms_hook_region_default(0));
	ck_assert_ptr_null(cms_hook_region_default(-1));
	ck_assert_ptr_null(cms_hook_region_default(64));

	ck_ok(cms_hook_region_default_set(0, r));
	ck_assert_ptr_eq(cms_hook_region_default(0), r);
	ck_assert_ptr_null(cms_hook_region_default(1));
	ck_ok(cms_hook_alloc(MiB, 0, &p));
	ck_assert_ptr_eq(region_of(ctx, p), r);
	ck_ok(cms_hook_free((void *)(uintptr_t)p));
	tp = cms_torch_alloc((ssize_t)MiB, 0, NULL);
	ck_assert_ptr_nonnull(tp);
	ck_assert_ptr_eq(region_of(ctx, (uint64_t)(uintptr_t)tp), r);
	cms_torch_free(tp, (ssize_t)MiB, 0, NULL);
	ck_status(cms_hook_alloc(MiB, 1, &p), CMS_ERR_NOT_FOUND);  /* device 1 has none */
	ck_status(cms_hook_alloc(MiB, -1, &p), CMS_ERR_NOT_FOUND); /* no device: none */
	ck_status(cms_hook_alloc(0, 0, &p), CMS_ERR_INVALID_ARGUMENT);

	/* The thread's own region first. */
	ck_ok(cms_hook_region_push(top));
	ck_ok(cms_hook_alloc(MiB, 0, &p));
	ck_assert_ptr_eq(region_of(ctx, p), top);
	ck_ok(cms_hook_free((void *)(uintptr_t)p));
	ck_ok(cms_hook_region_pop());

	/* A paused default refuses, as cms_alloc does. */
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_status(cms_hook_alloc(MiB, 0, &p), CMS_ERR_PAUSED);
	ck_ok(cms_region_resume(r, NULL, NULL));

	ck_ok(cms_hook_region_default_set(0, NULL));
	ck_assert_ptr_null(cms_hook_region_default(0));
	ck_status(cms_hook_alloc(MiB, 0, &p), CMS_ERR_NOT_FOUND);
	ck_ok(cms_hook_context_set(NULL));
	ck_ok(cms_context_destroy(other));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* Default regions made on demand from a template: only on the devices that allocate; an
 * explicit default comes first; a destroy makes it again; cms_hook_context_set clears it. */
START_TEST(default_template_makes_regions_on_demand)
{
	cms_context *ctx = t_ctx();
	cms_region_options o = CMS_REGION_OPTIONS_INIT, bad = CMS_REGION_OPTIONS_INIT;
	cms_region *r0 = NULL, *r1 = NULL, *mine;
	cms_region_info info = { .struct_size = sizeof(info) };
	uint64_t p = 0, q = 0;
	int ndev = 0, d;

	/* d: the device that allocates; with two, the other one must stay untouched */
	ck_assert_int_eq(t_drv()->cuDeviceGetCount(&ndev), 0);
	d = ndev > 1 ? 1 : 0;
	o.policy = CMS_POLICY_HOST;
	o.device = 7; /* ignored */
	/* No hook context: nothing to set; clearing is fine. */
	ck_status(cms_hook_region_default_template_set("dflt", &o, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_ok(cms_hook_region_default_template_set(NULL, NULL, NULL));
	ck_ok(cms_hook_context_set(ctx));
	ck_status(cms_hook_region_default_template_set("", &o, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_hook_region_default_template_set("a\nb", &o, NULL), CMS_ERR_INVALID_ARGUMENT);
	bad.policy = 99;
	ck_status(cms_hook_region_default_template_set("dflt", &bad, NULL),
		  CMS_ERR_INVALID_ARGUMENT);
	bad.policy = CMS_POLICY_DISCARD;
	bad.flags = CMS_REGION_HOST_PAGEABLE;
	ck_status(cms_hook_region_default_template_set("dflt", &bad, NULL),
		  CMS_ERR_INVALID_ARGUMENT);
	bad.flags = 1ull << 40;
	ck_status(cms_hook_region_default_template_set("dflt", &bad, NULL),
		  CMS_ERR_INVALID_ARGUMENT);
	bad.flags = 0;
	bad.struct_size = 3;
	ck_status(cms_hook_region_default_template_set("dflt", &bad, NULL), CMS_ERR_STRUCT_SIZE);
	ck_status(cms_hook_alloc(MiB, d, &p), CMS_ERR_NOT_FOUND); /* nothing was set */

	ck_ok(cms_hook_region_default_template_set("dflt", &o, NULL));
	/* a region that cannot be made fails the allocation with why, and size 0 makes none */
	ck_status(cms_hook_alloc(MiB, 63, &p), CMS_ERR_INVALID_DEVICE);
	ck_status(cms_hook_alloc(0, d, &p), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_region_find(ctx, "dflt", d, &r1), CMS_ERR_NOT_FOUND);
	ck_ok(cms_hook_alloc(MiB, d, &p));
	ck_ok(cms_region_find(ctx, "dflt", d, &r1));
	ck_assert_ptr_eq(region_of(ctx, p), r1);
	ck_assert_ptr_eq(cms_hook_region_default(d), r1);
	ck_ok(cms_region_info_get(r1, &info));
	ck_assert_uint_eq(info.policy, CMS_POLICY_HOST);
	ck_assert_int_eq(info.device, d);
	if (ndev > 1) { /* device 0 allocated nothing: it has no region */
		ck_status(cms_region_find(ctx, "dflt", 0, &r0), CMS_ERR_NOT_FOUND);
		ck_assert_ptr_null(cms_hook_region_default(0));
	}
	ck_ok(cms_hook_alloc(MiB, d, &q)); /* the same region, not a second one */
	ck_assert_ptr_eq(region_of(ctx, q), r1);
	ck_ok(cms_hook_free((void *)(uintptr_t)q));

	if (ndev > 1) { /* an existing region of the tag is found, not duplicated */
		mine = t_region(ctx, "dflt", 0, CMS_POLICY_DISCARD);
		ck_ok(cms_hook_alloc(MiB, 0, &q));
		ck_assert_ptr_eq(region_of(ctx, q), mine);
		ck_ok(cms_hook_free((void *)(uintptr_t)q));
	}

	/* An explicit default comes first. */
	r0 = t_region(ctx, "explicit", d, CMS_POLICY_DISCARD);
	ck_ok(cms_hook_region_default_set(d, r0));
	ck_ok(cms_hook_alloc(MiB, d, &q));
	ck_assert_ptr_eq(region_of(ctx, q), r0);
	ck_ok(cms_hook_free((void *)(uintptr_t)q));
	ck_ok(cms_hook_region_default_set(d, NULL));

	/* A destroyed one is made again at the next allocation. */
	ck_ok(cms_hook_free((void *)(uintptr_t)p));
	ck_ok(cms_region_destroy(r1));
	ck_ok(cms_hook_alloc(MiB, d, &q));
	ck_ok(cms_region_find(ctx, "dflt", d, &r1));
	ck_assert_ptr_eq(region_of(ctx, q), r1);
	ck_ok(cms_hook_free((void *)(uintptr_t)q));

	/* Cleared by cms_hook_context_set (also of the same context), and by NULL. */
	ck_ok(cms_hook_context_set(ctx));
	ck_status(cms_hook_alloc(MiB, d, &q), CMS_ERR_NOT_FOUND);
	ck_ok(cms_hook_region_default_template_set("dflt", &o, NULL));
	ck_ok(cms_hook_region_default_template_set(NULL, NULL, NULL));
	ck_status(cms_hook_alloc(MiB, 0, &q), CMS_ERR_NOT_FOUND);
	ck_ok(cms_hook_context_set(NULL));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* A DISK template with a directory: the regions it makes can pause from their first
 * allocation on (before, they refused: no directory); a bad directory is refused when the
 * template is set, one gone by the time a region is made fails the allocation and leaves no
 * region behind. */
START_TEST(default_template_disk_dir)
{
	cms_context *ctx = t_ctx();
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	char dir[256], file[300], cwd[4096];
	const char *t = getenv("TMPDIR");
	cms_region *r = NULL;
	uint64_t p = 0;
	FILE *f;

	snprintf(dir, sizeof(dir), "%s/cms-tpl-XXXXXX", t && *t ? t : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(file, sizeof(file), "%s/a-file", dir);
	ck_assert_ptr_nonnull(f = fopen(file, "w"));
	fclose(f);
	ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
	ck_ok(cms_hook_context_set(ctx));

	/* refused: another policy, empty, missing, not a directory */
	o.policy = CMS_POLICY_HOST;
	ck_status(cms_hook_region_default_template_set("d", &o, dir), CMS_ERR_INVALID_ARGUMENT);
	o.policy = CMS_POLICY_DISK;
	ck_status(cms_hook_region_default_template_set("d", &o, ""), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_hook_region_default_template_set("d", &o, "/nonexistent/cms"),
		  CMS_ERR_NOT_FOUND);
	ck_status(cms_hook_region_default_template_set("d", &o, file), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_hook_alloc(MiB, 0, &p), CMS_ERR_NOT_FOUND); /* no template was set */

	/* relative to the directory current now, not at the allocation */
	ck_assert_int_eq(chdir(dir), 0);
	ck_ok(cms_hook_region_default_template_set("d", &o, "."));
	ck_assert_int_eq(chdir(cwd), 0);
	ck_ok(cms_hook_alloc(3 * MiB, 0, &p));
	ck_ok(cms_region_find(ctx, "d", 0, &r));
	ck_assert_int_eq(t_fill(0, p, 3 * MiB, 11), 0);
	ck_ok(cms_pause(ctx, "d", NULL, NULL));
	ck_ok(cms_resume(ctx, "d", NULL, NULL));
	ck_assert_int_eq(t_check(0, p, 3 * MiB, 11), -1);
	ck_ok(cms_hook_free((void *)(uintptr_t)p));
	ck_ok(cms_region_destroy(r));

	/* the directory is gone when the next region is made: the allocation fails, no region */
	ck_assert_int_eq(unlink(file), 0);
	ck_assert_int_eq(rmdir(dir), 0);
	ck_status(cms_hook_alloc(MiB, 0, &p), CMS_ERR_NOT_FOUND);
	ck_assert_uint_eq(p, 0);
	ck_status(cms_region_find(ctx, "d", 0, &r), CMS_ERR_NOT_FOUND);
	ck_assert_ptr_null(cms_hook_region_default(0));

	/* without a directory (NULL) the region is made and refuses to pause, as before */
	ck_ok(cms_hook_region_default_template_set("d", &o, NULL));
	ck_ok(cms_hook_alloc(MiB, 0, &p));
	ck_status(cms_pause(ctx, "d", NULL, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_ok(cms_hook_free((void *)(uintptr_t)p));
	ck_ok(cms_hook_context_set(NULL));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* Makes directories one below the other from the current one, entering each, until the current
 * directory's absolute path is len bytes long; returns how many were made. */
static int deep_dir_enter(size_t len)
{
	char comp[202], *cwd;
	size_t cur, k;
	int n = 0;

	for (;;) {
		ck_assert_ptr_nonnull(cwd = getcwd(NULL, 0));
		cur = strlen(cwd);
		free(cwd);
		ck_assert_uint_le(cur, len);
		if (cur == len)
			return n;
		k = len - cur - 1; /* one "/name" to reach len, if short enough */
		if (k > 200)
			k = k < 202 ? 100 : 200; /* leaves at least 2 bytes for the next */
		memset(comp, 'd', k);
		comp[k] = '\0';
		ck_assert_int_eq(mkdir(comp, 0700), 0);
		ck_assert_int_eq(chdir(comp), 0);
		n++;
	}
}

/* Removes the n directories deep_dir_enter made, from the current one up. */
static void deep_dir_leave(int n)
{
	char *cwd;

	while (n-- > 0) {
		ck_assert_ptr_nonnull(cwd = getcwd(NULL, 0));
		ck_assert_int_eq(chdir(".."), 0);
		ck_assert_int_eq(rmdir(strrchr(cwd, '/') + 1), 0);
		free(cwd);
	}
}

/* A template's disk directory has one length limit (4000 bytes), checked on its absolute path
 * when the template is set: "." under a deep current directory is refused then if its path is
 * too long (before, it was accepted and every allocation failed "too long"; a path over 4095
 * bytes was cut), and one that is accepted keeps working. */
START_TEST(default_template_disk_dir_length)
{
	cms_context *ctx = t_ctx();
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	char base[256], cwd[4096];
	const char *t = getenv("TMPDIR");
	cms_region *r = NULL;
	int n[3];
	uint64_t p = 0;

	snprintf(base, sizeof(base), "%s/cms-len-XXXXXX", t && *t ? t : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(base));
	ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
	ck_assert_int_eq(chdir(base), 0);
	ck_ok(cms_hook_context_set(ctx));
	o.policy = CMS_POLICY_DISK;

	/* 4000 bytes: accepted, and the region made from it pauses and resumes */
	n[0] = deep_dir_enter(4000);
	ck_ok(cms_hook_region_default_template_set("d", &o, "."));
	ck_ok(cms_hook_alloc(MiB, 0, &p));
	ck_ok(cms_region_find(ctx, "d", 0, &r));
	ck_assert_int_eq(t_fill(0, p, MiB, 5), 0);
	ck_ok(cms_pause(ctx, "d", NULL, NULL));
	ck_ok(cms_resume(ctx, "d", NULL, NULL));
	ck_assert_int_eq(t_check(0, p, MiB, 5), -1);
	ck_ok(cms_hook_free((void *)(uintptr_t)p));
	ck_ok(cms_region_destroy(r));

	/* 4040 and 4200 bytes: refused when set, the previous template stays */
	n[1] = deep_dir_enter(4040);
	ck_status(cms_hook_region_default_template_set("d2", &o, "."), CMS_ERR_INVALID_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(cms_last_error(), "too long"));
	n[2] = deep_dir_enter(4200);
	ck_status(cms_hook_region_default_template_set("d2", &o, "."), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_region_disk_dir_set(t_region(ctx, "own", 0, CMS_POLICY_DISK), "."),
		  CMS_ERR_INVALID_ARGUMENT);
	ck_ok(cms_hook_alloc(MiB, 0, &p));
	ck_ok(cms_region_find(ctx, "d", 0, &r));
	ck_assert_ptr_eq(region_of(ctx, p), r);
	ck_ok(cms_pause(ctx, "d", NULL, NULL));
	ck_ok(cms_resume(ctx, "d", NULL, NULL));
	ck_ok(cms_hook_free((void *)(uintptr_t)p));
	ck_status(cms_region_find(ctx, "d2", 0, &r), CMS_ERR_NOT_FOUND);

	deep_dir_leave(n[2]);
	deep_dir_leave(n[1]);
	deep_dir_leave(n[0]);
	ck_assert_int_eq(chdir(cwd), 0);
	ck_assert_int_eq(rmdir(base), 0);
	ck_ok(cms_hook_context_set(NULL));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

static cms_status race_st[2];
static uint64_t race_ptr[2];
static pthread_barrier_t race_go;

static void *race_alloc(void *arg)
{
	int i = (int)(intptr_t)arg;

	pthread_barrier_wait(&race_go);
	race_st[i] = cms_hook_alloc(MiB, 0, &race_ptr[i]);
	return NULL;
}

/* Two threads' cms_hook_alloc at once (race_st, race_ptr). */
static void race_round(void)
{
	pthread_t th[2];
	int k;

	ck_assert_int_eq(pthread_barrier_init(&race_go, NULL, 2), 0);
	for (k = 0; k < 2; k++)
		ck_assert_int_eq(pthread_create(&th[k], NULL, race_alloc, (void *)(intptr_t)k), 0);
	for (k = 0; k < 2; k++)
		pthread_join(th[k], NULL);
	pthread_barrier_destroy(&race_go);
}

/* Two threads make a DISK template's region at once while its directory is gone: neither
 * allocation may succeed (the region never joins the context without its directory; before,
 * the second thread found the region, allocated in it, and the first one's failure
 * destroyed it under that allocation) and no region is left. An existing region of the tag
 * is taken as it is. */
START_TEST(default_template_disk_dir_race)
{
	cms_context *ctx = t_ctx();
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	const char *t = getenv("TMPDIR");
	cms_region *r = NULL;
	char dir[256];
	uint64_t p = 0;
	int round, k, fds;

	snprintf(dir, sizeof(dir), "%s/cms-tpl-XXXXXX", t && *t ? t : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_ok(cms_hook_context_set(ctx));
	o.policy = CMS_POLICY_DISK;
	ck_ok(cms_hook_region_default_template_set("d", &o, dir));
	ck_assert_int_eq(rmdir(dir), 0);
	for (round = 0; round < 3000; round++) {
		race_round();
		for (k = 0; k < 2; k++)
			ck_assert_msg(race_st[k] == CMS_ERR_NOT_FOUND && !race_ptr[k],
				      "round %d: %s (0x%llx)", round, cms_status_name(race_st[k]),
				      (unsigned long long)race_ptr[k]);
		ck_status(cms_region_find(ctx, "d", 0, &r), CMS_ERR_NOT_FOUND);
	}

	/* with the directory there, the thread that finds the region made meanwhile closes the
	 * file it had made: both allocations end in one region, no descriptor left open */
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	fds = t_open_fds();
	for (round = 0; round < 300; round++) {
		race_round();
		ck_ok(race_st[0]);
		ck_ok(race_st[1]);
		ck_assert_ptr_eq(region_of(ctx, race_ptr[0]), region_of(ctx, race_ptr[1]));
		ck_ok(cms_region_find(ctx, "d", 0, &r));
		for (k = 0; k < 2; k++)
			ck_ok(cms_hook_free((void *)(uintptr_t)race_ptr[k]));
		ck_ok(cms_region_destroy(r));
	}
	ck_assert_int_eq(t_open_fds(), fds);
	ck_assert_int_eq(rmdir(dir), 0);

	/* the application's region of the tag: taken as it is, without a directory */
	r = t_region(ctx, "d", 0, CMS_POLICY_DISK);
	ck_ok(cms_hook_alloc(MiB, 0, &p));
	ck_assert_ptr_eq(region_of(ctx, p), r);
	ck_status(cms_pause(ctx, "d", NULL, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_ok(cms_hook_free((void *)(uintptr_t)p));
	ck_ok(cms_hook_context_set(NULL));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* cms_hook_memory_margin_set: a hooked allocation that would leave less than the margin free
 * fails before creating anything, in a pushed region and in a default one. */
START_TEST(memory_margin_refuses_allocations)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "m", 0, CMS_POLICY_DISCARD);
	cms_region_info info = { .struct_size = sizeof(info) };
	uint64_t p = 0, free_bytes = 0, total = 0;

	ck_ok(cms_hook_context_set(ctx));
	ck_ok(cms_device_memory_info(ctx, 0, &free_bytes, &total));
	ck_ok(cms_hook_region_push(r));
	ck_ok(cms_hook_memory_margin_set(free_bytes)); /* no room left for anything */
	ck_status(cms_hook_alloc(MiB, 0, &p), CMS_ERR_OUT_OF_DEVICE_MEMORY);
	ck_assert_uint_eq(p, 0);
	ck_assert_ptr_null(cms_torch_alloc((ssize_t)MiB, 0, NULL));
	ck_ok(cms_region_info_get(r, &info));
	ck_assert_uint_eq(info.allocations, 0);
	ck_ok(cms_hook_memory_margin_set(free_bytes / 2)); /* room for a small one */
	ck_ok(cms_hook_alloc(MiB, 0, &p));
	ck_ok(cms_hook_free((void *)(uintptr_t)p));
	ck_ok(cms_hook_region_pop());
	ck_ok(cms_hook_region_default_set(0, r));
	ck_ok(cms_hook_memory_margin_set(UINT64_MAX));
	ck_status(cms_hook_alloc(MiB, 0, &p), CMS_ERR_OUT_OF_DEVICE_MEMORY);
	ck_ok(cms_hook_memory_margin_set(0));
	ck_ok(cms_hook_alloc(MiB, 0, &p));
	ck_ok(cms_hook_free((void *)(uintptr_t)p));
	ck_ok(cms_hook_context_set(NULL));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

static void *thread_allocates_in_default(void *arg)
{
	uint64_t p = 0;

	if (cms_hook_alloc(MiB, 0, &p) || region_of(arg, p) != cms_hook_region_default(0))
		return (void *)1;
	return (void *)(uintptr_t)p;
}

/* Every thread without a region uses the default; a destroy and cms_hook_context_set clear
 * it. */
START_TEST(default_region_cleared_by_destroy_and_context_set)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "all", 0, CMS_POLICY_DISCARD);
	uint64_t p = 0;
	pthread_t th;
	void *ret;

	ck_ok(cms_hook_context_set(ctx));
	ck_ok(cms_hook_region_default_set(0, r));
	ck_assert_int_eq(pthread_create(&th, NULL, thread_allocates_in_default, ctx), 0);
	ck_assert_int_eq(pthread_join(th, &ret), 0);
	ck_assert_ptr_ne(ret, (void *)1);
	ck_ok(cms_free(ctx, (uint64_t)(uintptr_t)ret));

	ck_ok(cms_region_destroy(r));
	ck_assert_ptr_null(cms_hook_region_default(0));
	ck_status(cms_hook_alloc(MiB, 0, &p), CMS_ERR_NOT_FOUND);
	ck_status(cms_hook_region_default_set(0, r = t_region(ctx, "all", 0, CMS_POLICY_DISCARD)),
		  CMS_OK);
	ck_assert_ptr_eq(cms_hook_region_default(0), r);
	ck_ok(cms_hook_context_set(ctx)); /* the same context again: cleared all the same */
	ck_assert_ptr_null(cms_hook_region_default(0));
	ck_status(cms_hook_alloc(MiB, 0, &p), CMS_ERR_NOT_FOUND);
	ck_ok(cms_hook_region_default_set(0, r));
	ck_ok(cms_hook_context_set(NULL));
	ck_assert_ptr_null(cms_hook_region_default(0));
	ck_ok(cms_hook_context_set(ctx));
	ck_assert_ptr_null(cms_hook_region_default(0)); /* not back with its context */
	ck_ok(cms_hook_context_set(NULL));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

struct default_race {
	cms_region *region;
	atomic_int go, stop, bad;
};

/* Allocates and frees through the default region until told to stop. */
static void *default_alloc_loop(void *arg)
{
	struct default_race *dr = arg;
	uint64_t p = 0;

	while (!atomic_load(&dr->stop)) {
		cms_status st = cms_hook_alloc(256 * 1024, 0, &p);

		if (!st)
			cms_hook_free((void *)(uintptr_t)p); /* ours, or retired by the destroy */
		else if (st != CMS_ERR_NOT_FOUND && st != CMS_ERR_INVALID_ARGUMENT)
			atomic_store(&dr->bad, st);
		atomic_store(&dr->go, 1);
	}
	return NULL;
}

/* Sets the region as the default until told to stop: OK while it lives, refused after. */
static void *default_set_loop(void *arg)
{
	struct default_race *dr = arg;

	while (!atomic_load(&dr->stop)) {
		cms_status st = cms_hook_region_default_set(0, dr->region);

		if (st && st != CMS_ERR_INVALID_ARGUMENT)
			atomic_store(&dr->bad, st);
		atomic_store(&dr->go, 1);
		if (st)
			break; /* destroyed: the handle must not be used any more */
	}
	return NULL;
}

/* A default region destroyed while hooked allocations use it and another thread sets it
 * again: no allocation lands in a dead region, none touches a freed one (ASan, TSan), and no
 * default is left naming it. */
START_TEST(default_region_destroy_races)
{
	cms_context *ctx = t_ctx();
	int i;

	ck_ok(cms_hook_context_set(ctx));
	for (i = 0; i < 100; i++) {
		struct default_race dr = { .region = t_region(ctx, "all", 0, CMS_POLICY_DISCARD) };
		pthread_t a, s;

		ck_ok(cms_hook_region_default_set(0, dr.region));
		ck_assert_int_eq(pthread_create(&a, NULL, default_alloc_loop, &dr), 0);
		ck_assert_int_eq(pthread_create(&s, NULL, default_set_loop, &dr), 0);
		while (!atomic_load(&dr.go))
			sched_yield();
		ck_ok(cms_region_destroy(dr.region));
		ck_assert_int_eq(pthread_join(s, NULL), 0); /* it stops once refused */
		ck_assert_ptr_null(cms_hook_region_default(0));
		atomic_store(&dr.stop, 1);
		ck_assert_int_eq(pthread_join(a, NULL), 0);
		ck_assert_int_eq(atomic_load(&dr.bad), 0);
	}
	ck_ok(cms_hook_context_set(NULL));
	ck_ok(cms_context_destroy(ctx));
	if (t_is_sim()) { /* nothing allocated into a destroyed region is left behind */
		cmssim_counters c = t_counters();

		ck_assert_uint_eq(c.mappings, 0);
		ck_assert_uint_eq(c.handles, 0);
		ck_assert_uint_eq(c.reservations, 0);
	}
}
END_TEST

/* cms_hook_context_set racing a default_set of a call that entered before it: the default
 * it writes is stale at once (never seen under the new context). */
static void *default_set_forever(void *arg)
{
	struct default_race *dr = arg;

	while (!atomic_load(&dr->stop)) {
		cms_status st = cms_hook_region_default_set(0, dr->region);

		if (st && st != CMS_ERR_INVALID_ARGUMENT) /* no hook context for a moment */
			atomic_store(&dr->bad, st);
		atomic_store(&dr->go, 1);
	}
	return NULL;
}

START_TEST(default_region_context_set_races)
{
	cms_context *ctx = t_ctx();
	struct default_race dr = { .region = t_region(ctx, "all", 0, CMS_POLICY_DISCARD) };
	pthread_t s;
	int i;

	ck_ok(cms_hook_context_set(ctx));
	ck_assert_int_eq(pthread_create(&s, NULL, default_set_forever, &dr), 0);
	while (!atomic_load(&dr.go))
		sched_yield();
	for (i = 0; i < 2000; i++)
		ck_ok(cms_hook_context_set(i % 2 ? ctx : NULL));
	atomic_store(&dr.stop, 1);
	ck_assert_int_eq(pthread_join(s, NULL), 0);
	ck_assert_int_eq(atomic_load(&dr.bad), 0);
	ck_ok(cms_hook_context_set(ctx));
	ck_assert_ptr_null(cms_hook_region_default(0)); /* whatever the thread set is gone */
	ck_ok(cms_hook_context_set(NULL));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("hooks");
	TCase *tc = tcase_create("hooks");

	tcase_add_test(tc, push_pop_and_current);
	tcase_add_test(tc, torch_alloc_goes_to_the_threads_region);
	tcase_add_test(tc, paused_region_refuses_and_free_while_paused_works);
	tcase_add_test(tc, destroyed_region_on_stack_is_refused);
	tcase_add_test(tc, free_after_destroy_is_a_no_op);
	tcase_add_test(tc, failed_destroy_keeps_hook_context);
	tcase_add_test(tc, hook_free_waits_for_the_device);
	tcase_add_test(tc, forked_child_has_an_empty_stack);
	tcase_add_test(tc, forked_child_free_of_ours_is_forked_without_waiting);
	tcase_add_test(tc, clear_then_destroy_with_frees_in_flight);
	tcase_add_test(tc, region_destroy_races_hooked_alloc);
	tcase_add_test(tc, context_set_returns_under_steady_traffic);
	tcase_add_test(tc, child_clears_hook_context_forked_under_traffic);
	tcase_add_test(tc, retired_address_reused_by_others_is_not_ours);
	tcase_add_test(tc, default_region_serves_threads_without_one);
	tcase_add_test(tc, default_region_cleared_by_destroy_and_context_set);
	tcase_add_test(tc, default_region_destroy_races);
	tcase_add_test(tc, default_region_context_set_races);
	tcase_add_test(tc, default_template_makes_regions_on_demand);
	tcase_add_test(tc, default_template_disk_dir);
	tcase_add_test(tc, default_template_disk_dir_race);
	tcase_add_test(tc, default_template_disk_dir_length);
	tcase_add_test(tc, memory_margin_refuses_allocations);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return t_main(suite, T_NEEDS_DEVICE);
}
