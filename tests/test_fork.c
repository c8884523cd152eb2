/* SPDX-License-Identifier: MIT */
/*
 * test_fork.c - a child created by fork() after the library was used gets
 * CMS_ERR_FORKED from every call on the parent's context, even while another
 * parent thread held a lock at the moment of the fork (no hang), and the
 * parent goes on unharmed.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <search.h>
#include <stdbool.h>
#include <stdio.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "cumemsaver_hooks.h"

struct parent {
	cms_context *ctx;
	cms_region *r;
	uint64_t p;
};

static int ck_forked(int line, cms_status st)
{
	if (st == CMS_ERR_FORKED)
		return 0;
	fprintf(stderr, "child: line %d: %s\n", line, cms_status_name(st));
	return 1;
}

/* Every call on the parent's objects; returns how many did not answer CMS_ERR_FORKED. */
static int child_calls(struct parent *s)
{
	cms_region_info ri = { .struct_size = sizeof(ri) };
	cms_pointer_info pi = { .struct_size = sizeof(pi) };
	cms_region *r;
	uint64_t p, f;
	int bad = 0;

	bad += ck_forked(__LINE__, cms_alloc(s->r, 4096, &p));
	bad += ck_forked(__LINE__, cms_free(s->ctx, s->p));
	bad += ck_forked(__LINE__, cms_pause(s->ctx, NULL, NULL, NULL));
	bad += ck_forked(__LINE__, cms_resume(s->ctx, NULL, NULL, NULL));
	bad += ck_forked(__LINE__, cms_region_pause(s->r, NULL, NULL));
	bad += ck_forked(__LINE__, cms_region_resume(s->r, NULL, NULL));
	bad += ck_forked(__LINE__, cms_region_info_get(s->r, &ri));
	bad += ck_forked(__LINE__, cms_pointer_info_get(s->ctx, s->p, &pi));
	bad += ck_forked(__LINE__, cms_region_find(s->ctx, "w", 0, &r));
	bad += ck_forked(__LINE__, cms_region_create(s->ctx, "new", NULL, &r));
	bad += ck_forked(__LINE__, cms_device_memory_info(s->ctx, 0, &f, NULL));
	bad += ck_forked(__LINE__, cms_region_destroy(s->r));
	bad += ck_forked(__LINE__, cms_context_destroy(s->ctx));
	bad += strstr(cms_last_error(), "forked") == NULL;
	return bad;
}

static int fork_and_check(struct parent *s)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		alarm(10); /* a hang fails the test with SIGALRM */
		_exit(child_calls(s));
	}
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status), "child died with signal %d",
		      WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	return WEXITSTATUS(status);
}

START_TEST(child_gets_forked_status)
{
	struct parent s;

	s.ctx = t_ctx();
	s.r = t_region(s.ctx, "w", 0, CMS_POLICY_HOST);
	ck_ok(cms_alloc(s.r, 2 * MiB, &s.p));
	ck_assert_int_eq(t_fill(0, s.p, 2 * MiB, 3), 0);
	ck_assert_int_eq(fork_and_check(&s), 0);
	/* The parent is unaffected. */
	ck_ok(cms_region_pause(s.r, NULL, NULL));
	ck_ok(cms_region_resume(s.r, NULL, NULL));
	ck_assert_int_eq(t_check(0, s.p, 2 * MiB, 3), -1);
	ck_ok(cms_context_destroy(s.ctx));
}
END_TEST

/* In a child, hooked allocations of the parent's hook context answer CMS_ERR_FORKED (the
 * header's status; before, NOT_FOUND when the thread had no active region in the child), with a
 * default region, a template, or neither. */
START_TEST(child_hook_alloc_gets_forked_status)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "w", 0, CMS_POLICY_HOST);
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	int status, step;

	ck_ok(cms_hook_context_set(ctx));
	ck_ok(cms_hook_region_push(r)); /* the child's thread has no active region */
	for (step = 0; step < 3; step++) {
		pid_t pid;

		if (step == 1)
			ck_ok(cms_hook_region_default_set(0, r));
		if (step == 2) {
			ck_ok(cms_hook_region_default_set(0, NULL));
			ck_ok(cms_hook_region_default_template_set("t", &o, NULL));
		}
		pid = fork();
		if (pid == 0) {
			uint64_t p = 1;
			cms_status st = cms_hook_alloc(4096, 0, &p);

			if (st != CMS_ERR_FORKED || p)
				fprintf(stderr, "child %d: %s (0x%llx)\n", step,
					cms_status_name(st), (unsigned long long)p);
			_exit(st != CMS_ERR_FORKED || p);
		}
		ck_assert_int_gt(pid, 0);
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d", step);
	}
	ck_ok(cms_hook_region_pop());
	ck_ok(cms_hook_context_set(NULL));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

static atomic_int stop;

static void *cycle(void *arg)
{
	struct parent *s = arg;

	while (!atomic_load(&stop)) {
		cms_region_pause(s->r, NULL, NULL);
		cms_region_resume(s->r, NULL, NULL);
	}
	return NULL;
}

START_TEST(fork_while_locks_are_held)
{
	struct parent s;
	pthread_t t;
	int i;

	s.ctx = t_ctx();
	s.r = t_region(s.ctx, "w", 0, CMS_POLICY_HOST);
	ck_ok(cms_alloc(s.r, 2 * MiB, &s.p));
	atomic_store(&stop, 0);
	ck_assert_int_eq(pthread_create(&t, NULL, cycle, &s), 0);
	for (i = 0; i < 20; i++)
		ck_assert_int_eq(fork_and_check(&s), 0);
	atomic_store(&stop, 1);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_ok(cms_context_destroy(s.ctx));
}
END_TEST

START_TEST(child_may_create_its_own_context)
{
	cms_context *ctx = t_ctx();
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		cms_context *c = NULL;

		/* No driver is touched by creating a context: it works in the child. */
		_exit(cms_context_create(NULL, &c) != CMS_OK || cms_context_destroy(c) != CMS_OK);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* Waits for forked child i and fails the test unless it exited 0. */
static void check_child(pid_t pid, int i)
{
	int status;

	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d: exit %d, signal %d",
		      i, WIFEXITED(status) ? WEXITSTATUS(status) : -1,
		      WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* Uses a context of its own in a forked child: a region, an allocation, a pause and a resume
 * (driver calls). Returns 0 when all succeeded. */
static int child_own_context(void)
{
	cms_context *c = NULL;
	cms_region *r = NULL;
	uint64_t p = 0;

	if (cms_context_create(NULL, &c) || cms_region_create(c, "child", NULL, &r) ||
	    cms_alloc(r, 2 * MiB, &p) || cms_region_pause(r, NULL, NULL) ||
	    cms_region_resume(r, NULL, NULL) || cms_free(c, p) || cms_context_destroy(c)) {
		fprintf(stderr, "child: %s\n", cms_last_error());
		return 1;
	}
	return 0;
}

/* The simulation's locks are taken around fork() (pthread_atfork): a child forked while another
 * thread was inside a simulated driver call can use the simulation with a context of its own
 * (the real driver does not support that: the header's fork contract).
 * Not under ThreadSanitizer: its runtime (GCC 12's libtsan) does not hold its allocator's locks
 * across fork(), so a child forked while the cycling thread was inside malloc waits forever in
 * its own first calloc (4 of 48 runs on 2 busy cores; gdb: __tsan::user_calloc ->
 * SizeClassAllocator64::GetFromAllocator). The plain and ASan stages run it. */
#if !defined(__SANITIZE_THREAD__)
START_TEST(child_uses_sim_forked_during_driver_calls)
{
	struct parent s;
	pthread_t t;
	int i;

	if (!t_is_sim())
		return;
	s.ctx = t_ctx();
	s.r = t_region(s.ctx, "w", 0, CMS_POLICY_HOST);
	ck_ok(cms_alloc(s.r, 2 * MiB, &s.p));
	atomic_store(&stop, 0);
	ck_assert_int_eq(pthread_create(&t, NULL, cycle, &s), 0);
	for (i = 0; i < 20; i++) {
		pid_t pid = fork();

		if (pid == 0) {
			signal(SIGALRM, SIG_DFL); /* not Check's handler, which kills the test */
			alarm(60); /* a hang fails the test with SIGALRM (a liveness bound: a child
				    * took over 10 s once under ThreadSanitizer on 2 busy cores) */
			_exit(child_own_context());
		}
		ck_assert_int_gt(pid, 0);
		check_child(pid, i);
	}
	atomic_store(&stop, 1);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_ok(cms_context_destroy(s.ctx));
}
END_TEST
#endif

/* In a child: the simulation holds no host registration of the parent, and page-locks a new
 * buffer of len bytes at host (where the parent had registered memory). Returns 0 when so. */
static int child_registers_anew(void *host, size_t len)
{
	cmssim_counters c = { .struct_size = sizeof(c) };
	struct cms_driver *d = t_drv();
	CUcontext pc = NULL, popped;
	CUdevice cu = 0;
	void *m;
	int rc;

	if (t_sim()->get_counters(&c) || c.host_registrations || c.host_registered_bytes) {
		fprintf(stderr, "child: %llu registrations of %llu bytes of the parent's\n",
			(unsigned long long)c.host_registrations,
			(unsigned long long)c.host_registered_bytes);
		return 1;
	}
	m = mmap(host, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (m == MAP_FAILED)
		return 2;
	if (d->cuDeviceGet(&cu, 0) || d->cuDevicePrimaryCtxRetain(&pc, cu) ||
	    d->cuCtxPushCurrent(pc))
		return 3;
	rc = d->cuMemHostRegister(m, len, 0);
	if (rc) {
		fprintf(stderr, "child: cuMemHostRegister of a new buffer: %d\n", rc);
		return 4;
	}
	rc = d->cuMemHostUnregister(m) || d->cuCtxPopCurrent(&popped) ||
	     d->cuDevicePrimaryCtxRelease(cu);
	return rc ? 5 : child_own_context();
}

/* A forked child starts with none of the parent's host registrations in the simulation (its
 * own context, as docs/simulation.md promises): before, it kept them, so that a new buffer of
 * the child at an address where the parent had page-locked memory (a paused HOST region's
 * backup here; the child does not have it: MADV_DONTFORK) could not be registered, and the
 * child's pause failed. */
START_TEST(child_sim_has_no_parent_host_registrations)
{
	cms_context *ctx;
	cms_region *r;
	uint64_t p;
	long page = sysconf(_SC_PAGESIZE);
	uintptr_t host;
	pid_t pid;

	if (!t_is_sim())
		return;
	ctx = t_ctx();
	r = t_region(ctx, "w", 0, CMS_POLICY_HOST);
	ck_ok(cms_alloc(r, 2 * MiB, &p));
	ck_assert_int_eq(t_fill(0, p, 2 * MiB, 4), 0);
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_assert_uint_ge(t_counters().host_registrations, 1);
	host = (uintptr_t)t_host_byte(ctx, p) & ~(uintptr_t)(page - 1);
	pid = fork();
	if (pid == 0) {
		signal(SIGALRM, SIG_DFL);
		alarm(60); /* a hang fails the test with SIGALRM (a liveness bound) */
		_exit(child_registers_anew((void *)host, (size_t)page));
	}
	ck_assert_int_gt(pid, 0);
	check_child(pid, 0);
	ck_assert_uint_ge(t_counters().host_registrations, 1); /* the parent's stay */
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_assert_int_eq(t_check(0, p, 2 * MiB, 4), -1);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/*
 * The test's tfind, which the library's calls reach (it interposes the C library's, and calls
 * it): the ledger of retired pointers (adapters/hookctx.c) calls it with its lock held. Armed, it
 * stops the holder thread's next call there until the main thread forked, so that the fork
 * happens while the ledger's lock is held (or until 200 ms passed, for a fork that waits for
 * the lock).
 */
static atomic_int hold_armed, hold_in, hold_forked;
static _Thread_local bool is_holder;

void *tfind(const void *key, void *const *root, __compar_fn_t cmp)
{
	void *(*real)(const void *, void *const *, __compar_fn_t);
	int ms;

	if (is_holder && atomic_exchange(&hold_armed, 0)) {
		atomic_store(&hold_in, 1);
		for (ms = 0; ms < 200 && !atomic_load(&hold_forked); ms++)
			usleep(1000);
	}
	*(void **)&real = dlsym(RTLD_NEXT, "tfind");
	return real(key, root, cmp);
}

/* Frees a pointer that was never ours through the hooks with no hook context, over and over:
 * each call asks the ledger of retired pointers. */
static void *hook_free_loop(void *arg)
{
	(void)arg;
	is_holder = true;
	while (!atomic_load(&stop))
		cms_hook_free((void *)(uintptr_t)0x7f0000001000ull);
	return NULL;
}

/* In a child: frees a pointer through the hooks with no hook context (the ledger is asked),
 * then uses a context of its own (an allocation asks the ledger too). */
static int child_hook_free(void)
{
	cms_status st = cms_hook_free((void *)(uintptr_t)0x7f0000002000ull);

	if (st != CMS_ERR_INVALID_ARGUMENT) {
		fprintf(stderr, "child: cms_hook_free: %s\n", cms_status_name(st));
		return 1;
	}
	return child_own_context();
}

/* Every lock of the library is usable in a child forked while another thread held it: here the
 * lock of the ledger of retired pointers, taken by every hooked free and by allocations. */
START_TEST(fork_while_retired_ledger_is_locked)
{
	cms_context *ctx;
	cms_region *r;
	pthread_t t;
	uint64_t p;
	int i;

	if (!t_is_sim())
		return;
	ctx = t_ctx();
	ck_ok(cms_hook_context_set(ctx));
	ck_ok(cms_region_create(ctx, "retired", NULL, &r));
	ck_ok(cms_alloc(r, 4096, &p));
	ck_ok(cms_region_destroy(r)); /* p is retired: the ledger is not empty */
	ck_ok(cms_hook_context_set(NULL));
	atomic_store(&stop, 0);
	ck_assert_int_eq(pthread_create(&t, NULL, hook_free_loop, NULL), 0);
	for (i = 0; i < 3; i++) {
		pid_t pid;

		atomic_store(&hold_forked, 0);
		atomic_store(&hold_in, 0);
		atomic_store(&hold_armed, 1);
		while (!atomic_load(&hold_in))
			usleep(100);
		pid = fork();
		if (pid == 0) {
			signal(SIGALRM, SIG_DFL);
			alarm(30); /* a hang fails the test with SIGALRM (a liveness bound) */
			_exit(child_hook_free());
		}
		atomic_store(&hold_forked, 1);
		ck_assert_int_gt(pid, 0);
		check_child(pid, i);
	}
	atomic_store(&stop, 1);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_int_eq(cms_hook_free((void *)(uintptr_t)p), CMS_OK); /* still retired */
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("fork");
	TCase *tc = tcase_create("fork");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, child_gets_forked_status);
	tcase_add_test(tc, child_hook_alloc_gets_forked_status);
	tcase_add_test(tc, fork_while_locks_are_held);
	tcase_add_test(tc, child_may_create_its_own_context);
#if !defined(__SANITIZE_THREAD__)
	tcase_add_test(tc, child_uses_sim_forked_during_driver_calls);
#endif
	tcase_add_test(tc, fork_while_retired_ledger_is_locked);
	tcase_add_test(tc, child_sim_has_no_parent_host_registrations);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return t_main(suite, T_NEEDS_DEVICE);
}
