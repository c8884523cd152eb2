/* SPDX-License-Identifier: MIT */
/*
 * test_gpu_oom.c - out of memory on resume under real memory pressure (GPU
 * only). Process A pauses a large HOST region; process B (this binary run
 * with --hog) takes almost all free device memory; A's resume fails part-way
 * with CMS_ERR_OUT_OF_DEVICE_MEMORY, the region stays fully paused with its
 * backup, the driver's free memory is where it was before the call; B exits;
 * A's resume then succeeds with the content intact.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#define GiB (1024ull * MiB)
#define NALLOC 16

/* --hog LEAVE: take device memory until only LEAVE bytes are free, then wait for EOF on stdin. */
static int hog(uint64_t leave)
{
	cms_context *ctx;
	cms_region *r;
	uint64_t free_bytes, p;
	char c;

	if (cms_context_create(NULL, &ctx) || cms_region_create(ctx, "hog", NULL, &r))
		return 2;
	for (;;) {
		if (cms_device_memory_info(ctx, 0, &free_bytes, NULL))
			return 3;
		if (free_bytes <= leave + 2 * MiB)
			break;
		if (cms_alloc(r, free_bytes - leave > GiB ? GiB : free_bytes - leave - 2 * MiB, &p))
			break;
	}
	printf("ready %llu\n", (unsigned long long)free_bytes);
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
	cms_context_destroy(ctx);
	return 0;
}

static pid_t start_hog(uint64_t leave, int *to_child, uint64_t *free_left)
{
	int in[2], out[2];
	char arg[32], line[64];
	FILE *f;
	pid_t pid;

	ck_assert_int_eq(pipe(in), 0);
	ck_assert_int_eq(pipe(out), 0);
	snprintf(arg, sizeof(arg), "%llu", (unsigned long long)leave);
	pid = fork();
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		execl("/proc/self/exe", "test_gpu_oom", "--hog", arg, (char *)NULL);
		_exit(127);
	}
	ck_assert_int_gt(pid, 0);
	close(in[0]);
	close(out[1]);
	f = fdopen(out[0], "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_msg(fgets(line, sizeof(line), f) != NULL, "hog did not start");
	ck_assert_int_eq(sscanf(line, "ready %llu", (unsigned long long *)free_left), 1);
	fclose(f);
	*to_child = in[1];
	return pid;
}

START_TEST(resume_fails_under_pressure_then_succeeds)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "weights", 0, CMS_POLICY_HOST);
	cms_region_info ri = { .struct_size = sizeof(ri) };
	cms_pause_result pr = { .struct_size = sizeof(pr) };
	uint64_t p[NALLOC], before, after, left;
	int i, to_hog, status;
	pid_t hog_pid;

	for (i = 0; i < NALLOC; i++) {
		ck_ok(cms_alloc(r, GiB, &p[i]));
		ck_assert_int_eq(t_fill(0, p[i], GiB, (uint32_t)i), 0);
	}
	ck_ok(cms_region_pause(r, NULL, &pr));
	/* B leaves 4 GiB: the resume gets a few allocations in and then runs out. */
	hog_pid = start_hog(4 * GiB, &to_hog, &left);
	ck_ok(cms_device_memory_info(ctx, 0, &before, NULL));
	ck_status(cms_region_resume(r, NULL, NULL), CMS_ERR_OUT_OF_DEVICE_MEMORY);
	printf("gpu oom: hog left %llu MiB free; resume failed as expected: %s\n",
	       (unsigned long long)(left / MiB), cms_last_error());
	ck_ok(cms_device_memory_info(ctx, 0, &after, NULL));
	ck_ok(cms_region_info_get(r, &ri));
	ck_assert_uint_eq(ri.state, CMS_STATE_PAUSED);
	ck_assert_uint_eq(ri.backed_bytes, 0);
	ck_assert_uint_eq(ri.backup_bytes, NALLOC * GiB);
	ck_assert_msg(after + 8 * MiB >= before && after <= before + 8 * MiB,
		      "free memory %llu MiB before the failed resume, %llu MiB after",
		      (unsigned long long)(before / MiB), (unsigned long long)(after / MiB));
	printf("gpu oom: driver free memory %llu MiB before the failed resume, %llu MiB after\n",
	       (unsigned long long)(before / MiB), (unsigned long long)(after / MiB));
	/* B exits: the memory comes back and the retry succeeds with the content. */
	close(to_hog);
	ck_assert_int_eq(waitpid(hog_pid, &status, 0), hog_pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_ok(cms_region_resume(r, NULL, NULL));
	for (i = 0; i < NALLOC; i++)
		ck_assert_int_eq(t_check(0, p[i], GiB, (uint32_t)i), -1);
	ck_ok(cms_region_info_get(r, &ri));
	ck_assert_uint_eq(ri.backed_bytes, NALLOC * GiB);
	ck_assert_uint_eq(ri.epoch, 1);
	printf("gpu oom: retry after the other process exited: resumed, 16 GiB content intact\n");
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("gpu_oom");
	TCase *tc = tcase_create("gpu_oom");

	tcase_set_timeout(tc, 400);
	tcase_add_test(tc, resume_fails_under_pressure_then_succeeds);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--hog"))
		return hog(strtoull(argv[2], NULL, 10));
	return t_main(suite, T_NEEDS_GPU);
}
