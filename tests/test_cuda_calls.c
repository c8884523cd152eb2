/* SPDX-License-Identifier: MIT */
/*
 * test_cuda_calls.c - the driver calls each public function makes, recorded through the
 * CUDA trace shim (tools/testing/cuda_trace.c) for tools/testing/check_cuda_lists.py, which
 * compares them with the CUDA line of each function's contract (abi/contracts).
 *
 * Run with CMS_DRIVER_LIBRARY = the shim, CMS_TRACE_TARGET = the real driver (or the
 * simulation) and CMS_TRACE_OUT = the record file: every public function of cumemsaver.h,
 * cumemsaver_hooks.h and cumemsaver_ipc.h is called in representative scenarios (each
 * policy; CMS_REGION_VERIFY, GUARD, PREPARE, COALESCE, CHUNKS, HOST_PAGEABLE, RELEASE_HOST;
 * an asynchronous resume; a swap; freeze; ranges and backups; the hooks; an export imported
 * by a second process, this program run as the importer; a control socket), and each call appends a
 * line "cms_x: cuA cuB ..." (the driver functions whose counters moved during the call, on any
 * thread) to the record. A function whose library threads work after it returns
 * (CMS_REGION_PREPARE) is given their end inside its window. The test's own driver calls (t_fill,
 * t_check) are made outside any window. Checks here prove the shim forwards (content survives pause
 * and resume through it) and records (cms_alloc is seen calling cuMemCreate); the lists are judged
 * by the script.
 */
#include "common.h"

#include <cumemsaver.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define TR_MAX 128
#define SZ (4 * MiB)

static struct {
	size_t (*functions)(void);
	const char *(*name)(size_t);
	uint64_t (*calls)(size_t);
	int (*loaded)(void);
} tr;
static uint64_t tr_before[TR_MAX];
static uint64_t tr_seen_last[TR_MAX];

static void tr_open(void)
{
	const char *shim = getenv("CMS_DRIVER_LIBRARY");
	void *dl = shim ? dlopen(shim, RTLD_NOW | RTLD_LOCAL) : NULL;

	ck_assert_msg(dl, "CMS_DRIVER_LIBRARY (%s) cannot be loaded", shim ? shim : "unset");
	tr.functions = (size_t(*)(void))dlsym(dl, "cmstrace_functions");
	tr.name = (const char *(*)(size_t))dlsym(dl, "cmstrace_name");
	tr.calls = (uint64_t(*)(size_t))dlsym(dl, "cmstrace_calls");
	tr.loaded = (int (*)(void))dlsym(dl, "cmstrace_target_loaded");
	ck_assert_msg(tr.functions && tr.name && tr.calls && tr.loaded,
		      "CMS_DRIVER_LIBRARY is not the trace shim (tools/testing/cuda_trace.c)");
	ck_assert_msg(tr.loaded(), "the shim cannot load CMS_TRACE_TARGET");
	ck_assert_uint_le(tr.functions(), TR_MAX);
}

static void tr_begin(void)
{
	size_t i;

	if (!tr.functions)
		tr_open();
	for (i = 0; i < tr.functions(); i++)
		tr_before[i] = tr.calls(i);
}

/* Appends "cms_x: cuA cuB" for the window that tr_begin opened; call names its function. */
static void tr_end(const char *call)
{
	const char *path = getenv("CMS_TRACE_OUT");
	char line[4096];
	size_t i, n, len;
	int fd;

	n = strcspn(call, "(");
	while (n && call[n - 1] == ' ')
		n--;
	while (n && strncmp(call, "cms_", 4)) { /* "p = cms_torch_alloc(" */
		call++;
		n--;
	}
	ck_assert_msg(n && n < 64, "no function in %s", call);
	len = (size_t)snprintf(line, sizeof(line), "%.*s:", (int)n, call);
	for (i = 0; i < tr.functions(); i++) {
		tr_seen_last[i] = tr.calls(i) - tr_before[i];
		if (tr_seen_last[i] && len + 64 < sizeof(line))
			len += (size_t)snprintf(line + len, sizeof(line) - len, " %s", tr.name(i));
	}
	line[len++] = '\n';
	ck_assert_msg(path && *path, "CMS_TRACE_OUT is not set");
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	ck_assert_msg(fd >= 0, "cannot open %s", path);
	ck_assert_int_eq(write(fd, line, len), (ssize_t)len); /* O_APPEND: one line at once */
	close(fd);
}

/* Calls of the driver function name in the last window. */
static uint64_t tr_seen(const char *name)
{
	size_t i;

	for (i = 0; i < tr.functions(); i++)
		if (!strcmp(tr.name(i), name))
			return tr_seen_last[i];
	ck_abort_msg("the shim does not count %s", name);
	return 0;
}

#define TR(call)               \
	do {                   \
		tr_begin();    \
		call;          \
		tr_end(#call); \
	} while (0)
#define TR_OK(call)                                                                 \
	do {                                                                        \
		cms_status tr_st_;                                                  \
		tr_begin();                                                         \
		tr_st_ = (call);                                                    \
		tr_end(#call);                                                      \
		ck_assert_msg(tr_st_ == CMS_OK, "%s: %s", #call, cms_last_error()); \
	} while (0)

static cms_context *ctx_new(void)
{
	cms_context_options o;
	cms_context *ctx = NULL;

	TR_OK(cms_context_options_init(&o));
	TR_OK(cms_context_create(&o, &ctx));
	return ctx;
}

static cms_region *region_new(cms_context *ctx, const char *tag, uint32_t policy, uint64_t flags)
{
	cms_region_options o;
	cms_region *r = NULL;

	TR_OK(cms_region_options_init(&o));
	o.policy = policy;
	o.flags = flags;
	TR_OK(cms_region_create(ctx, tag, &o, &r));
	if (policy == CMS_POLICY_DISK)
		TR_OK(cms_region_disk_dir_set(r, "/tmp"));
	return r;
}

/* A pause and a resume of the region, content checked where the policy keeps it. */
static void cycle(cms_context *ctx, cms_region *r, uint32_t policy, uint64_t p, int whole_ctx)
{
	cms_pause_options po;
	cms_resume_options ro;
	cms_region_info info = { .struct_size = sizeof(info) };

	ck_assert_int_eq(t_fill(0, p, SZ, 7), 0);
	TR_OK(cms_pause_options_init(&po));
	TR_OK(cms_resume_options_init(&ro));
	if (whole_ctx) {
		TR_OK(cms_pause(ctx, NULL, &po, NULL));
		TR_OK(cms_resume(ctx, NULL, &ro, NULL));
	} else {
		TR_OK(cms_region_pause(r, &po, NULL));
		TR_OK(cms_region_resume(r, &ro, NULL));
	}
	TR_OK(cms_region_info_get(r, &info));
	ck_assert_uint_eq(info.state, CMS_STATE_ACTIVE);
	if (policy == CMS_POLICY_HOST || policy == CMS_POLICY_DISK)
		ck_assert_int_eq(t_check(0, p, SZ, 7), -1); /* the shim forwards */
	else if (policy == CMS_POLICY_ZERO)
		ck_assert(t_is_zero(0, p, SZ));
}

START_TEST(basics)
{
	char buf[64];
	cms_context *ctx;
	uint64_t fb = 0, tb = 0;

	TR(cms_version());
	TR(cms_version_string());
	TR(cms_status_name(CMS_ERR_NOT_FOUND));
	TR(cms_status_string(CMS_ERR_NOT_FOUND));
	TR(cms_last_error());
	TR(cms_last_error_message(buf, sizeof(buf)));
	ctx = ctx_new();
	TR_OK(cms_device_memory_info(ctx, 0, &fb, &tb));
	ck_assert_uint_gt(tb, 0);
	TR_OK(cms_context_destroy(ctx));
}
END_TEST

static const uint32_t policies[] = { CMS_POLICY_DISCARD, CMS_POLICY_ZERO, CMS_POLICY_HOST,
				     CMS_POLICY_DISK };

START_TEST(policy)
{
	uint32_t pol = policies[_i];
	cms_context *ctx = ctx_new();
	cms_region *r = region_new(ctx, "p", pol, 0), *found = NULL;
	cms_pointer_info pi = { .struct_size = sizeof(pi) };
	uint64_t p = 0, q = 0;

	TR_OK(cms_alloc(r, SZ, &p));
	ck_assert_msg(tr_seen("cuMemCreate") && tr_seen("cuMemMap"),
		      "the shim did not record cms_alloc's cuMemCreate, cuMemMap");
	TR_OK(cms_alloc(r, SZ / 4, &q));
	TR_OK(cms_region_find(ctx, "p", 0, &found));
	TR_OK(cms_pointer_info_get(ctx, p, &pi));
	cycle(ctx, r, pol, p, 1);
	cycle(ctx, r, pol, p, 0);
	TR_OK(cms_free(ctx, q));
	TR_OK(cms_region_destroy(r));
	TR_OK(cms_context_destroy(ctx));
}
END_TEST

static const struct {
	uint32_t policy;
	uint64_t flags;
} flagsets[] = {
	{ CMS_POLICY_HOST, CMS_REGION_VERIFY },
	{ CMS_POLICY_DISK, CMS_REGION_VERIFY },
	{ CMS_POLICY_HOST, CMS_REGION_GUARD },
	{ CMS_POLICY_HOST, CMS_REGION_PREPARE },
	{ CMS_POLICY_HOST, CMS_REGION_PREPARE | CMS_REGION_HOST_PAGEABLE },
	{ CMS_POLICY_HOST, CMS_REGION_COALESCE },
	{ CMS_POLICY_HOST, CMS_REGION_COALESCE | CMS_REGION_CHUNKS },
	{ CMS_POLICY_HOST, CMS_REGION_HOST_PAGEABLE },
	{ CMS_POLICY_HOST, CMS_REGION_RELEASE_HOST },
	{ CMS_POLICY_ZERO, CMS_REGION_GUARD | CMS_REGION_COALESCE },
};

START_TEST(flags)
{
	uint32_t pol = flagsets[_i].policy;
	uint64_t fl = flagsets[_i].flags;
	cms_context *ctx = ctx_new();
	cms_region *r = region_new(ctx, "f", pol, fl);
	uint64_t p = 0, q = 0;

	if (fl & CMS_REGION_PREPARE) { /* the preparation thread's calls, in cms_alloc's window */
		tr_begin();
		ck_ok(cms_alloc(r, SZ, &p));
		ck_assert(t_wait_host_bytes(r, SZ, !(fl & CMS_REGION_HOST_PAGEABLE)));
		tr_end("cms_alloc(");
	} else {
		TR_OK(cms_alloc(r, SZ, &p));
	}
	TR_OK(cms_alloc(r, SZ / 8, &q));
	cycle(ctx, r, pol, p, 1);
	TR_OK(cms_free(ctx, q));
	cycle(ctx, r, pol, p, 0);
	TR_OK(cms_context_destroy(ctx)); /* with the region in it */
}
END_TEST

START_TEST(async_resume)
{
	cms_context *ctx = ctx_new();
	cms_region *r = region_new(ctx, "a", CMS_POLICY_HOST, 0);
	cms_resume_options ro = CMS_RESUME_OPTIONS_INIT;
	cms_region_info info = { .struct_size = sizeof(info) };
	uint64_t p = 0, q = 0;
	int i;

	TR_OK(cms_alloc(r, SZ, &p));
	TR_OK(cms_alloc(r, SZ, &q));
	ro.flags = CMS_RESUME_ASYNC;
	TR_OK(cms_pause(ctx, "a", NULL, NULL));
	TR_OK(cms_resume(ctx, "a", &ro, NULL));
	TR_OK(cms_free(ctx, q)); /* maybe with the restore in flight */
	for (i = 0; i < 100000; i++) {
		TR_OK(cms_region_info_get(r, &info));
		if (!info.restore_pending)
			break;
	}
	TR_OK(cms_region_pause(r, NULL, NULL));
	TR_OK(cms_region_resume(r, &ro, NULL));
	TR_OK(cms_region_freeze(r)); /* waits for the restore */
	TR_OK(cms_region_thaw(r));
	TR_OK(cms_region_pause(r, NULL, NULL));
	TR_OK(cms_region_resume(r, &ro, NULL));
	TR_OK(cms_region_destroy(r)); /* maybe with the restore in flight */
	TR_OK(cms_context_destroy(ctx));
}
END_TEST

/* A pause whose copies overlap its releases (batches of one granule: CMS_TUNABLES), with
 * results (the driver's free memory before and after). */
START_TEST(overlap_results)
{
	cms_context *ctx;
	cms_region *r, *r2;
	cms_pause_result pr = { .struct_size = sizeof(pr) };
	cms_resume_result rr = { .struct_size = sizeof(rr) };
	uint64_t p[6];
	int i;

	ck_assert_int_eq(setenv("CMS_TUNABLES", "overlap_batch=1g", 1), 0);
	ctx = ctx_new();
	r = region_new(ctx, "o", CMS_POLICY_HOST, 0);
	r2 = region_new(ctx, "o2", CMS_POLICY_HOST, 0);
	for (i = 0; i < 6; i++)
		TR_OK(cms_alloc(i % 2 ? r2 : r, SZ, &p[i]));
	TR_OK(cms_pause(ctx, "o", NULL, &pr));
	TR_OK(cms_resume(ctx, "o", NULL, &rr));
	TR_OK(cms_pause(ctx, "o2", NULL, &pr));
	TR_OK(cms_swap(ctx, "o", "o2", NULL, NULL, &pr, &rr));
	TR_OK(cms_swap(ctx, "o2", "o", NULL, NULL, &pr, &rr));
	TR_OK(cms_resume(ctx, "o2", NULL, &rr));
	TR_OK(cms_region_pause(r, NULL, &pr));
	TR_OK(cms_region_resume(r, NULL, &rr));
	TR_OK(cms_context_destroy(ctx));
}
END_TEST

static void progress(void *user, const char *op, uint64_t done, uint64_t total)
{
	(void)op;
	(void)done;
	(void)total;
	__atomic_fetch_add((int *)user, 1, __ATOMIC_RELAXED);
}

START_TEST(swap_and_more)
{
	cms_context *ctx = ctx_new();
	cms_region *a = region_new(ctx, "a", CMS_POLICY_HOST, 0);
	cms_region *b = region_new(ctx, "b", CMS_POLICY_HOST, CMS_REGION_VERIFY);
	cms_pause_options po = CMS_PAUSE_OPTIONS_INIT;
	cms_resume_options ro = CMS_RESUME_OPTIONS_INIT;
	cms_backup_info bi = { .struct_size = sizeof(bi) };
	cms_region_stats st = { .struct_size = sizeof(st) }, v[4];
	size_t written = 0, total = 0, i;
	uint64_t pa = 0, pb = 0;
	char byte[16];
	int calls = 0;

	TR_OK(cms_alloc(a, SZ, &pa));
	TR_OK(cms_alloc(b, SZ, &pb));
	TR_OK(cms_context_progress_set(ctx, progress, &calls));
	TR_OK(cms_range_discard(ctx, pa, SZ / 2));
	TR_OK(cms_pause(ctx, "b", NULL, NULL));
	TR_OK(cms_backup_get(ctx, pb, &bi));
	TR_OK(cms_backup_read(ctx, pb, byte, sizeof(byte)));
	TR_OK(cms_swap(ctx, "a", "b", &po, &ro, NULL, NULL));
	TR_OK(cms_swap(ctx, "b", "a", NULL, NULL, NULL, NULL));
	TR_OK(cms_range_keep(ctx, pa, SZ / 2));
	po.flags = CMS_PAUSE_NO_SYNC;
	TR_OK(cms_swap(ctx, "a", "b", &po, &ro, NULL, NULL));
	TR_OK(cms_resume(ctx, NULL, NULL, NULL));
	/* region flags between cycles, frozen content */
	TR_OK(cms_region_flags_set(b, CMS_REGION_VERIFY, 0));
	TR_OK(cms_region_flags_set(a, CMS_REGION_VERIFY, CMS_REGION_VERIFY));
	TR_OK(cms_region_flags_set(a, CMS_REGION_HOST_PAGEABLE, CMS_REGION_HOST_PAGEABLE));
	TR_OK(cms_region_flags_set(a, CMS_REGION_RELEASE_HOST, CMS_REGION_RELEASE_HOST));
	TR_OK(cms_region_freeze(a));
	TR_OK(cms_pause(ctx, NULL, NULL, NULL));
	TR_OK(cms_resume(ctx, NULL, NULL, NULL));
	TR_OK(cms_region_thaw(a));
	TR_OK(cms_region_flags_set(a, CMS_REGION_VERIFY | CMS_REGION_RELEASE_HOST, 0));
	TR_OK(cms_region_peer_devices_set(a, 0));
	TR_OK(cms_region_stats_get(a, &st));
	for (i = 0; i < 4; i++)
		v[i].struct_size = sizeof(v[i]);
	TR_OK(cms_region_list(ctx, v, 4, &written, &total));
	ck_assert_uint_eq(total, 2);
	ck_assert_int_gt(calls, 0);
	TR_OK(cms_context_destroy(ctx));
}
END_TEST

static void *hook_alloc_thread(void *arg)
{
	uint64_t *p = arg;

	/* no active region on this thread: the default region, made from the template */
	TR_OK(cms_hook_alloc(SZ, 0, p));
	return NULL;
}

START_TEST(hooks)
{
	cms_context *ctx = ctx_new();
	cms_region *r = region_new(ctx, "h", CMS_POLICY_HOST, 0);
	cms_region_options tpl = CMS_REGION_OPTIONS_INIT;
	uint64_t p = 0, q = 0;
	pthread_t th;
	void *t;

	TR_OK(cms_hook_context_set(ctx));
	TR_OK(cms_hook_region_push(r));
	TR(cms_hook_region_current());
	TR_OK(cms_hook_alloc(SZ, 0, &p));
	TR_OK(cms_hook_free((void *)(uintptr_t)p));
	TR(t = cms_torch_alloc(SZ, 0, NULL));
	ck_assert_ptr_nonnull(t);
	TR(cms_torch_free(t, SZ, 0, NULL));
	TR_OK(cms_hook_memory_margin_set(64 * MiB));
	TR_OK(cms_hook_alloc(SZ, 0, &p));
	TR_OK(cms_hook_memory_margin_set(0));
	TR_OK(cms_hook_region_pop());
	TR_OK(cms_hook_region_default_set(0, r));
	TR(cms_hook_region_default(0));
	TR_OK(cms_hook_region_default_set(0, NULL));
	TR_OK(cms_hook_region_default_template_set("tpl", &tpl, NULL));
	ck_assert_int_eq(pthread_create(&th, NULL, hook_alloc_thread, &q), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	TR_OK(cms_hook_free((void *)(uintptr_t)q));
	TR_OK(cms_pause(ctx, NULL, NULL, NULL));
	TR_OK(cms_hook_free((void *)(uintptr_t)p)); /* of a paused region */
	TR_OK(cms_resume(ctx, NULL, NULL, NULL));
	TR_OK(cms_hook_region_push(r));
	TR_OK(cms_hook_alloc(SZ, 0, &p));
	TR_OK(cms_hook_region_pop());
	TR_OK(cms_region_destroy(r));
	TR_OK(cms_hook_free((void *)(uintptr_t)p)); /* released by the destroy: a no-op */
	TR_OK(cms_hook_context_set(NULL));
	TR_OK(cms_context_destroy(ctx));
}
END_TEST

/*
 * The importer, a second process (this program run as "test_cuda_calls import PATH"): its
 * calls are its own, and its import thread's drop and remap (the exporter's pause and resume)
 * are recorded in a window of cms_import_open, whose contract names them. Talks with the
 * exporter over stdin/stdout: "ready" after the import, "go" to arm the window, "armed", then
 * it waits for the remap.
 */
static const char *import_path;
static uint64_t import_ptr;

START_TEST(importer)
{
	const char *path = import_path;
	uint64_t exporter_ptr = import_ptr;
	cms_context *ctx = NULL;
	cms_import_options io;
	cms_import_info ii = { .struct_size = sizeof(ii) };
	cms_import *imp = NULL;
	uint64_t lp = 0, lsz = 0, tp = 0;
	char line[16];
	int i;

	setvbuf(stdout, NULL, _IONBF, 0);
	ctx = ctx_new();
	TR_OK(cms_import_options_init(&io));
	TR_OK(cms_import_open(ctx, path, "x", &io, &imp));
	TR_OK(cms_import_info_get(imp, &ii));
	TR_OK(cms_import_alloc_get(imp, 0, &lp, &lsz));
	TR_OK(cms_import_translate(imp, exporter_ptr, &tp));
	ck_assert_uint_eq(tp, lp);
	printf("ready\n");
	ck_assert(fgets(line, sizeof(line), stdin) && !strncmp(line, "go", 2));
	tr_begin();
	printf("armed\n");
	for (i = 0; i < 30000; i++) { /* the exporter pauses and resumes: epoch 1, mapped */
		ck_ok(cms_import_info_get(imp, &ii));
		if (ii.epoch >= 1 && ii.state == CMS_IMPORT_MAPPED)
			break;
		usleep(1000);
	}
	tr_end("cms_import_open(");
	ck_assert_uint_ge(ii.epoch, 1);
	TR_OK(cms_import_close(imp));
	TR_OK(cms_context_destroy(ctx));
	printf("done\n");
}
END_TEST

static Suite *import_suite(void)
{
	Suite *s = suite_create("cuda_calls_importer");
	TCase *tc = tcase_create("importer");

	tcase_add_test(tc, importer);
	suite_add_tcase(s, tc);
	return s;
}

static pid_t spawn_importer(const char *path, uint64_t ptr, FILE **to, FILE **from)
{
	char arg[32];
	int in[2], out[2];
	pid_t pid;

	snprintf(arg, sizeof(arg), "%llu", (unsigned long long)ptr);
	ck_assert_int_eq(pipe(in), 0);
	ck_assert_int_eq(pipe(out), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) { /* exec at once: no CUDA in a forked child */
		dup2(in[0], 0);
		dup2(out[1], 1);
		execl("/proc/self/exe", "test_cuda_calls", "import", path, arg, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	*to = fdopen(in[1], "w");
	*from = fdopen(out[0], "r");
	ck_assert(*to && *from);
	setvbuf(*to, NULL, _IONBF, 0);
	return pid;
}

/* Waits for the importer's line want (its other output, Check's, is passed on). */
static void expect_line(FILE *from, const char *want)
{
	char line[512];

	while (fgets(line, sizeof(line), from)) {
		if (!strncmp(line, want, strlen(want)))
			return;
		printf("importer: %s", line);
	}
	ck_abort_msg("the importer ended without saying %s", want);
}

START_TEST(ipc)
{
	cms_context *ctx = ctx_new();
	cms_region *r = region_new(ctx, "x", CMS_POLICY_HOST, CMS_REGION_SHAREABLE);
	cms_exporter_options eo;
	cms_control_options co;
	cms_exporter *exp = NULL;
	cms_control *ctl = NULL;
	char epath[64], cpath[64];
	uint64_t p = 0, n = 0;
	FILE *to, *from;
	int status;
	pid_t pid;

	snprintf(epath, sizeof(epath), "/tmp/cms-cuda-calls-%d.sock", (int)getpid());
	snprintf(cpath, sizeof(cpath), "/tmp/cms-cuda-calls-%d.ctl", (int)getpid());
	TR_OK(cms_alloc(r, SZ, &p));
	TR_OK(cms_exporter_options_init(&eo));
	TR_OK(cms_exporter_create(ctx, epath, &eo, &exp));
	TR_OK(cms_exporter_publish(exp, r, CMS_ACCESS_READWRITE));
	/* the server thread's grants while the importer imports: cms_exporter_create's window */
	tr_begin();
	pid = spawn_importer(epath, p, &to, &from);
	expect_line(from, "ready");
	tr_end("cms_exporter_create(");
	TR_OK(cms_exporter_importers(exp, &n));
	ck_assert_uint_eq(n, 1);
	fprintf(to, "go\n");
	expect_line(from, "armed");
	TR_OK(cms_pause(ctx, "x", NULL, NULL)); /* the importer drops its mappings first */
	TR_OK(cms_resume(ctx, "x", NULL, NULL));
	tr_begin();
	expect_line(from, "done");
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	tr_end("cms_exporter_create(");
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "importer: status %d", status);
	fclose(to);
	fclose(from);
	TR_OK(cms_exporter_destroy(exp));
	TR_OK(cms_control_options_init(&co));
	co.flags = CMS_CONTROL_ALLOW_ALL;
	TR_OK(cms_control_create(ctx, cpath, &co, &ctl));
	TR_OK(cms_control_destroy(ctl));
	TR_OK(cms_context_destroy(ctx));
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("cuda_calls");
	TCase *tc = tcase_create("calls");

	tcase_add_test(tc, basics);
	tcase_add_loop_test(tc, policy, 0, (int)(sizeof(policies) / sizeof(policies[0])));
	tcase_add_loop_test(tc, flags, 0, (int)(sizeof(flagsets) / sizeof(flagsets[0])));
	tcase_add_test(tc, async_resume);
	tcase_add_test(tc, overlap_results);
	tcase_add_test(tc, swap_and_more);
	tcase_add_test(tc, hooks);
	tcase_add_test(tc, ipc);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "import")) {
		import_path = argv[2];
		import_ptr = strtoull(argv[3], NULL, 10);
		return t_main(import_suite, T_NEEDS_DEVICE);
	}
	return t_main(suite, T_NEEDS_DEVICE);
}
