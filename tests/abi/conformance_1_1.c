/* SPDX-License-Identifier: MIT */
/*
 * conformance_1_1.c - a program written against the release 1.1 headers
 * (abi/1.1/cumemsaver*.h, compiled with -I abi/1.1 and never include/),
 * linked as a 1.1 binary was (every reference bound to its CMS_1.0 or
 * CMS_1.1 node), and run against the current library: the functions and
 * structs 1.1 added (DISK, swap, progress, peer devices, coalescing, hooks,
 * IPC option structs, the per-device results and info fields) with valid and
 * invalid arguments get their documented statuses, and structs of the 1.1
 * size are accepted and never written past. The 1.0 functions are covered by
 * conformance_1_0.c; this is what a binary built in the 1.1 days sees when
 * the .so under it is upgraded.
 *
 * Needs a device: the host simulation (ctest conformance_1_1.sim, two
 * simulated devices) or a GPU; exits 77 when CMS_DRIVER_LIBRARY is unset.
 * Content checks read device memory directly, so they run on the simulation
 * only (its device pointers are host addresses).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cumemsaver.h>

#if CMS_VERSION_MAJOR != 1 || CMS_VERSION_MINOR != 1
#error "conformance_1_1.c must be compiled against the 1.1 headers (-I abi/1.1)"
#endif

#include "conformance.h"

/* A 1.1-size struct at the start of a STRUCT_MAX buffer: room for tails and canaries. */
union big {
	cms_region_info rinfo;
	cms_pause_result presult;
	cms_resume_result rresult;
	cms_exporter_options eopts;
	cms_import_options iopts;
	cms_control_options copts;
	unsigned char bytes[STRUCT_MAX];
};

START_TEST(versions_and_statuses)
{
	static const char *const names_1_1[] = {
		"CMS_ERR_PROTOCOL",	"CMS_ERR_PERMISSION",	  "CMS_ERR_TIMEOUT",
		"CMS_ERR_DISCONNECTED", "CMS_ERR_LAYOUT_CHANGED", "CMS_ERR_REFUSED",
		"CMS_ERR_IO",
	};
	cms_status s;

	ck_assert_uint_ge(cms_version(), CMS_VERSION_NUMBER);
	ck_assert_int_eq(CMS_STATUS_MIN, -25);
	for (s = CMS_ERR_PROTOCOL; s >= CMS_STATUS_MIN; s--) {
		ck_assert_str_eq(cms_status_name(s), names_1_1[CMS_ERR_PROTOCOL - s]);
		ck_assert(cms_status_string(s)[0] != '\0');
	}
}
END_TEST

START_TEST(option_structs_of_the_1_1_size)
{
	union big b;

	canary(&b, sizeof(cms_exporter_options));
	ck_ok(cms_exporter_options_init(&b.eopts));
	ck_assert_uint_eq(b.eopts.struct_size, sizeof(cms_exporter_options));
	ck_assert(tail_is(&b, sizeof(cms_exporter_options), CANARY));
	canary(&b, sizeof(cms_import_options));
	ck_ok(cms_import_options_init(&b.iopts));
	ck_assert_uint_eq(b.iopts.struct_size, sizeof(cms_import_options));
	ck_assert(tail_is(&b, sizeof(cms_import_options), CANARY));
	canary(&b, sizeof(cms_control_options));
	ck_ok(cms_control_options_init(&b.copts));
	ck_assert_uint_eq(b.copts.struct_size, sizeof(cms_control_options));
	ck_assert(tail_is(&b, sizeof(cms_control_options), CANARY));
	ck_status(cms_exporter_options_init(NULL), CMS_ERR_INVALID_ARGUMENT);
}
END_TEST

static uint64_t progress_last_done, progress_last_total, progress_calls;

static void on_progress(void *user, const char *op, uint64_t done, uint64_t total)
{
	(void)user;
	(void)op;
	progress_last_done = done;
	progress_last_total = total;
	progress_calls++;
}

/* Region info and results of the 1.1 size, coalescing, progress, swap. */
START_TEST(results_info_swap_progress)
{
	cms_context *ctx = new_ctx();
	cms_region *w = new_region(ctx, "w", CMS_POLICY_HOST, CMS_REGION_COALESCE);
	cms_region *kv = new_region(ctx, "kv", CMS_POLICY_DISCARD, 0);
	uint64_t a, b, k;
	union big res, res2, info;

	ck_ok(cms_alloc(w, 2 * MiB, &a));
	ck_ok(cms_alloc(w, 3 * MiB, &b));
	ck_ok(cms_alloc(kv, 4 * MiB, &k));
	if (on_sim()) {
		fill(a, 2 * MiB, 1);
		fill(b, 3 * MiB, 2);
	}
	ck_ok(cms_context_progress_set(ctx, on_progress, NULL));
	canary(&res, sizeof(cms_pause_result));
	ck_ok(cms_pause(ctx, "w", NULL, &res.presult));
	ck_assert(tail_is(&res, sizeof(cms_pause_result), CANARY));
	ck_assert_uint_eq(res.presult.devices, 1);
	ck_assert_int_eq(res.presult.failed_device, -1);
	ck_assert_int_eq(res.presult.device_results[0].device, 0);
	ck_assert_int_eq(res.presult.device_results[0].status, CMS_OK);
	ck_assert_uint_eq(res.presult.device_results[0].allocations, 2);
	ck_assert_uint_gt(progress_calls, 0);
	ck_assert_uint_eq(progress_last_done, progress_last_total);
	ck_assert_uint_eq(progress_last_total, 5 * MiB);

	/* Swap: w back, kv out, one call. */
	canary(&res, sizeof(cms_pause_result));
	canary(&res2, sizeof(cms_resume_result));
	ck_status(cms_swap(ctx, "kv", "kv", NULL, NULL, NULL, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_ok(cms_swap(ctx, "kv", "w", NULL, NULL, &res.presult, &res2.rresult));
	ck_assert(tail_is(&res, sizeof(cms_pause_result), CANARY));
	ck_assert(tail_is(&res2, sizeof(cms_resume_result), CANARY));
	ck_assert_uint_eq(res.presult.regions, 1);
	ck_assert_uint_eq(res2.rresult.regions, 1);
	ck_assert_uint_eq(res2.rresult.devices, 1);
	if (on_sim()) {
		ck_assert(holds(a, 2 * MiB, 1));
		ck_assert(holds(b, 3 * MiB, 2));
	}
	canary(&info, sizeof(cms_region_info));
	ck_ok(cms_region_info_get(w, &info.rinfo));
	ck_assert(tail_is(&info, sizeof(cms_region_info), CANARY));
	ck_assert_uint_eq(info.rinfo.state, CMS_STATE_ACTIVE);
	ck_assert_uint_eq(info.rinfo.flags, CMS_REGION_COALESCE);
	ck_assert_uint_eq(info.rinfo.handle_types, 0);
	ck_assert_uint_eq(info.rinfo.peer_device_mask, 0);
	ck_assert_uint_ge(info.rinfo.host_bytes, info.rinfo.pinned_bytes);
	/* A coalesced free keeps its bytes in the shared handle until the next pause. */
	ck_ok(cms_free(ctx, a));
	ck_ok(cms_region_info_get(w, &info.rinfo));
	ck_assert_uint_eq(info.rinfo.retained_bytes, 2 * MiB);
	ck_ok(cms_region_pause(w, NULL, NULL));
	ck_ok(cms_region_info_get(w, &info.rinfo));
	ck_assert_uint_eq(info.rinfo.retained_bytes, 0);
	ck_ok(cms_context_progress_set(ctx, NULL, NULL));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

START_TEST(disk_policy)
{
	char dir[] = "/tmp/cms-conf11-XXXXXX";
	cms_context *ctx = new_ctx();
	cms_region *d = new_region(ctx, "d", CMS_POLICY_DISK, 0);
	cms_region *h = new_region(ctx, "h", CMS_POLICY_HOST, 0);
	uint64_t p;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_ok(cms_alloc(d, 3 * MiB, &p));
	if (on_sim())
		fill(p, 3 * MiB, 9);
	ck_status(cms_region_pause(d, NULL, NULL), CMS_ERR_INVALID_ARGUMENT); /* no directory */
	ck_status(cms_region_disk_dir_set(h, dir), CMS_ERR_INVALID_ARGUMENT); /* not DISK */
	ck_status(cms_region_disk_dir_set(d, "/nonexistent/cms"), CMS_ERR_NOT_FOUND);
	ck_ok(cms_region_disk_dir_set(d, dir));
	ck_ok(cms_region_pause(d, NULL, NULL));
	ck_status(cms_region_disk_dir_set(d, dir), CMS_ERR_PAUSED);
	ck_ok(cms_region_resume(d, NULL, NULL));
	if (on_sim())
		ck_assert(holds(p, 3 * MiB, 9));
	ck_ok(cms_context_destroy(ctx));
	ck_assert_int_eq(rmdir(dir), 0); /* the library leaves no name behind */
}
END_TEST

START_TEST(peer_devices)
{
	cms_context *ctx = new_ctx();
	cms_region *r = new_region(ctx, "p", CMS_POLICY_DISCARD, 0);
	union big info;

	ck_status(cms_region_peer_devices_set(NULL, 0), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_region_peer_devices_set(r, 1), CMS_ERR_INVALID_ARGUMENT); /* its own */
	ck_status(cms_region_peer_devices_set(r, 1ull << 63), CMS_ERR_INVALID_DEVICE);
	ck_ok(cms_region_peer_devices_set(r, 0));
	canary(&info, sizeof(cms_region_info));
	ck_ok(cms_region_info_get(r, &info.rinfo));
	ck_assert_uint_eq(info.rinfo.peer_device_mask, 0);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

START_TEST(hooks)
{
	cms_context *ctx = new_ctx();
	cms_region *r = new_region(ctx, "hooked", CMS_POLICY_DISCARD, 0);
	cms_pointer_info pi = { .struct_size = sizeof(pi) };
	uint64_t p = 1;
	void *t;

	ck_status(cms_hook_alloc(MiB, 0, &p), CMS_ERR_NOT_FOUND); /* no region on this thread */
	ck_assert_uint_eq(p, 0);
	ck_status(cms_hook_region_push(r), CMS_ERR_INVALID_ARGUMENT); /* no hook context */
	ck_ok(cms_hook_context_set(ctx));
	ck_ok(cms_hook_region_push(r));
	ck_assert_ptr_eq(cms_hook_region_current(), r);
	ck_status(cms_hook_alloc(MiB, 1, &p), CMS_ERR_INVALID_DEVICE);
	ck_ok(cms_hook_alloc(MiB, 0, &p));
	ck_ok(cms_pointer_info_get(ctx, p, &pi));
	ck_assert_ptr_eq(pi.region, r);
	ck_status(cms_hook_free((void *)(uintptr_t)(p + 4096)), CMS_ERR_NOT_BASE);
	ck_ok(cms_hook_free((void *)(uintptr_t)p));
	t = cms_torch_alloc((ssize_t)MiB, 0, NULL);
	ck_assert_ptr_nonnull(t);
	cms_torch_free(t, (ssize_t)MiB, 0, NULL);
	ck_ok(cms_hook_region_pop());
	ck_status(cms_hook_region_pop(), CMS_ERR_NOT_FOUND);
	ck_assert_ptr_null(cms_torch_alloc((ssize_t)MiB, 0, NULL)); /* no region: not ours */
	ck_ok(cms_hook_context_set(NULL));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("conformance_1_1");
	TCase *tc = tcase_create("1.1 headers, current library");

	tcase_add_test(tc, versions_and_statuses);
	tcase_add_test(tc, option_structs_of_the_1_1_size);
	tcase_add_test(tc, results_info_swap_progress);
	tcase_add_test(tc, disk_policy);
	tcase_add_test(tc, peer_devices);
	tcase_add_test(tc, hooks);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return conformance_main("conformance_1_1", suite);
}
