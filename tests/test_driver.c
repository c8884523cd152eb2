/* SPDX-License-Identifier: MIT */
/*
 * test_driver.c - the driver path "sim" (CMS_DRIVER_LIBRARY=sim or
 * cms_context_options.driver_path): the host simulation installed with the
 * library is found next to libcumemsaver.so.1 (build tree, installed layout),
 * a missing one is a clear CMS_ERR_NO_DRIVER, and a driver that cannot be
 * loaded names the switch. The ctest environment sets CMS_DRIVER_LIBRARY to the
 * simulation's path; each test sets the variable it needs.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

/* The simulation this build made (the ctest environment names it). */
static char sim_file[PATH_MAX];

static cms_status create_with(const char *driver_path, cms_context **ctx)
{
	cms_context_options o = CMS_CONTEXT_OPTIONS_INIT;

	o.driver_path = driver_path;
	return cms_context_create(&o, ctx);
}

/* A region allocation proves the driver loaded; on the simulation the pointer is host memory. */
static void alloc_and_touch(cms_context *ctx)
{
	cms_region_options ro = CMS_REGION_OPTIONS_INIT;
	cms_region *r = NULL;
	uint64_t p = 0;

	ck_assert_int_eq(cms_region_create(ctx, "sim", &ro, &r), CMS_OK);
	ck_assert_int_eq(cms_alloc(r, 2 * MiB, &p), CMS_OK);
	memset((void *)(uintptr_t)p, 0x5a, 2 * MiB);
	ck_assert_int_eq(((unsigned char *)(uintptr_t)p)[2 * MiB - 1], 0x5a);
}

/* Whether a library mapped in this process has the file name path. */
static int mapped(const char *path)
{
	char line[PATH_MAX + 256];
	size_t n = strlen(path);
	FILE *f = fopen("/proc/self/maps", "r");
	int found = 0;

	ck_assert_ptr_nonnull(f);
	while (!found && fgets(line, sizeof(line), f)) {
		char *end = line + strcspn(line, "\n");

		*end = '\0';
		found = (size_t)(end - line) >= n && !strcmp(end - n, path);
	}
	fclose(f);
	return found;
}

START_TEST(env_sim_loads_build_tree_simulation)
{
	char real[PATH_MAX];
	cms_context *ctx = NULL;

	ck_assert_int_eq(setenv("CMS_DRIVER_LIBRARY", "sim", 1), 0);
	ck_assert_int_eq(create_with(NULL, &ctx), CMS_OK);
	alloc_and_touch(ctx);
	ck_assert_ptr_nonnull(realpath(sim_file, real));
	ck_assert_msg(mapped(real), "%s is not the simulation loaded", real);
	ck_assert_int_eq(cms_context_destroy(ctx), CMS_OK);
}
END_TEST

START_TEST(option_sim_loads_simulation)
{
	cms_context *ctx = NULL;

	ck_assert_int_eq(unsetenv("CMS_DRIVER_LIBRARY"), 0);
	ck_assert_int_eq(create_with("sim", &ctx), CMS_OK);
	alloc_and_touch(ctx);
	ck_assert_int_eq(cms_context_destroy(ctx), CMS_OK);
}
END_TEST

/* A program that compiles the loader in (the tools) finds it beside the library it links. */
START_TEST(program_loader_finds_simulation)
{
	struct cms_driver d;
	char err[512];

	ck_assert_int_eq(cms_driver_open(&d, "sim", err, sizeof(err)), 0);
	ck_assert_int_eq(d.is_sim, 1);
	cms_driver_close(&d);
}
END_TEST

START_TEST(no_driver_names_the_switch)
{
	cms_region_options ro = CMS_REGION_OPTIONS_INIT;
	cms_context *ctx = NULL;
	cms_region *r = NULL;

	ck_assert_int_eq(create_with("/nonexistent/libcuda.so.1", &ctx), CMS_OK);
	ck_assert_int_eq(cms_region_create(ctx, "x", &ro, &r), CMS_ERR_NO_DRIVER);
	ck_assert_msg(strstr(cms_last_error(), "CMS_DRIVER_LIBRARY=sim"), "%s", cms_last_error());
	ck_assert_msg(strstr(cms_last_error(), "/nonexistent/libcuda.so.1"), "%s",
		      cms_last_error());
	ck_assert_int_eq(cms_context_destroy(ctx), CMS_OK);
}
END_TEST

static void copy_file(const char *from, const char *to)
{
	char buf[1 << 16];
	int in = open(from, O_RDONLY | O_CLOEXEC);
	int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	ssize_t n;

	ck_assert_int_ge(in, 0);
	ck_assert_int_ge(out, 0);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		ck_assert_int_eq(write(out, buf, (size_t)n), n);
	ck_assert_int_eq(n, 0);
	close(in);
	ck_assert_int_eq(close(out), 0);
}

/* The functions of a second copy of the library, loaded from another directory. */
struct lib_copy {
	void *dl;
	cms_status (*create)(const cms_context_options *, cms_context **);
	cms_status (*destroy)(cms_context *);
	cms_status (*meminfo)(cms_context *, int32_t, uint64_t *, uint64_t *);
	const char *(*last_error)(void);
};

static void load_copy(struct lib_copy *c, const char *path)
{
	c->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	ck_assert_msg(c->dl != NULL, "%s", dlerror());
	c->create = (cms_status(*)(const cms_context_options *, cms_context **))dlsym(
		c->dl, "cms_context_create");
	c->destroy = (cms_status(*)(cms_context *))dlsym(c->dl, "cms_context_destroy");
	c->meminfo = (cms_status(*)(cms_context *, int32_t, uint64_t *, uint64_t *))dlsym(
		c->dl, "cms_device_memory_info");
	c->last_error = (const char *(*)(void))dlsym(c->dl, "cms_last_error");
	ck_assert(c->create && c->destroy && c->meminfo && c->last_error);
}

/*
 * The installed layout (<libdir>/libcumemsaver.so.1, <libdir>/cumemsaver/libcumemsaver-sim.so)
 * in a fresh directory, with a copy of the library: without the simulation there the copy
 * fails with a message naming where it looked (it does not take the build tree's); with it,
 * that one is loaded.
 */
START_TEST(installed_layout_and_missing_simulation)
{
	char dir[] = "/tmp/cms-test-driver-XXXXXX", lib[PATH_MAX], sub[PATH_MAX], sim[PATH_MAX];
	cms_context_options o = CMS_CONTEXT_OPTIONS_INIT;
	uint64_t free_b = 0, total = 0;
	struct lib_copy c;
	cms_context *ctx = NULL;
	Dl_info info;

	ck_assert_int_eq(unsetenv("CMS_DRIVER_LIBRARY"), 0);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert(dladdr((void *)cms_context_create, &info) && info.dli_fname);
	snprintf(lib, sizeof(lib), "%s/libcumemsaver.so.1", dir);
	snprintf(sub, sizeof(sub), "%s/cumemsaver", dir);
	snprintf(sim, sizeof(sim), "%s/cumemsaver/libcumemsaver-sim.so", dir);
	copy_file(info.dli_fname, lib);
	load_copy(&c, lib);
	o.driver_path = "sim";
	ck_assert_int_eq(c.create(&o, &ctx), CMS_OK);
	ck_assert_int_eq(c.meminfo(ctx, 0, &free_b, &total), CMS_ERR_NO_DRIVER);
	ck_assert_msg(strstr(c.last_error(), "no libcumemsaver-sim.so in /tmp/cms-test-driver-"),
		      "%s", c.last_error());
	ck_assert_msg(strstr(c.last_error(), "cumemsaver/"), "%s", c.last_error());

	ck_assert_int_eq(mkdir(sub, 0755), 0);
	copy_file(sim_file, sim);
	ck_assert_int_eq(c.meminfo(ctx, 0, &free_b, &total), CMS_OK);
	ck_assert_uint_gt(total, 0);
	ck_assert_msg(mapped(sim), "%s is not the simulation loaded", sim);
	ck_assert_int_eq(c.destroy(ctx), CMS_OK);
	dlclose(c.dl);
	ck_assert_int_eq(unlink(sim), 0);
	ck_assert_int_eq(rmdir(sub), 0);
	ck_assert_int_eq(unlink(lib), 0);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("driver");
	TCase *tc = tcase_create("sim_shorthand");

	tcase_add_test(tc, env_sim_loads_build_tree_simulation);
	tcase_add_test(tc, option_sim_loads_simulation);
	tcase_add_test(tc, program_loader_finds_simulation);
	tcase_add_test(tc, no_driver_names_the_switch);
	tcase_add_test(tc, installed_layout_and_missing_simulation);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	const char *env = getenv("CMS_DRIVER_LIBRARY");

	if (!env || !env[0] || snprintf(sim_file, sizeof(sim_file), "%s", env) >= PATH_MAX) {
		printf("skip: CMS_DRIVER_LIBRARY names no simulation\n");
		return 77;
	}
	return t_main(suite, T_NEEDS_SIM);
}
