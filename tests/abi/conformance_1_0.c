/* SPDX-License-Identifier: MIT */
/*
 * conformance_1_0.c - a program written against the release 1.0 header
 * (abi/1.0/cumemsaver.h, compiled with -I abi/1.0 and never include/) and
 * run against the current library: every 1.0 function with valid and invalid
 * arguments gets its documented status, option and result structs of the 1.0
 * size are accepted and never written past, and a struct with an unknown
 * non-zero tail is refused with CMS_ERR_STRUCT_SIZE. This is what a binary
 * built in the 1.0 days sees when the .so under it is upgraded.
 *
 * Needs a device: the host simulation (ctest conformance_1_0.sim) or a GPU;
 * exits 77 when CMS_DRIVER_LIBRARY is unset. Content checks read device memory
 * directly, so they run on the simulation only (its device pointers are host
 * addresses).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cumemsaver.h>

#if CMS_VERSION_MAJOR != 1 || CMS_VERSION_MINOR != 0
#error "conformance_1_0.c must be compiled against the 1.0 header (-I abi/1.0)"
#endif

#include "conformance.h"

/* A 1.0-size struct at the start of a STRUCT_MAX buffer: room for tails and canaries. */
union big {
	cms_context_options ctx;
	cms_region_options region;
	cms_pause_options pause;
	cms_resume_options resume;
	cms_region_info rinfo;
	cms_pointer_info pinfo;
	cms_pause_result presult;
	cms_resume_result rresult;
	unsigned char bytes[STRUCT_MAX];
};

/*
 * The 1.0 struct already in b (size bytes) made the largest accepted size, with a zero
 * tail except one non-zero byte at its very end: no release knows that byte.
 */
static void unknown_tail(union big *b, size_t size)
{
	size_t max = STRUCT_MAX;

	memset(b->bytes + size, 0, STRUCT_MAX - size);
	memcpy(b->bytes, &max, sizeof(max));
	b->bytes[STRUCT_MAX - 1] = 1;
}

/* ---- versions, statuses, errors ---------------------------------------- */

START_TEST(versions)
{
	const char *s = cms_version_string();

	ck_assert_uint_eq(cms_version() >> 16, CMS_VERSION_MAJOR);
	ck_assert_uint_ge(cms_version(), CMS_VERSION_NUMBER); /* at least as new as the header */
	ck_assert_ptr_nonnull(s);
	ck_assert_msg(strncmp(s, "1.", 2) == 0, "version string %s", s);
	ck_assert_uint_eq(strtoul(s + 2, NULL, 10), (cms_version() >> 8) & 0xff);
}
END_TEST

static const struct {
	cms_status value;
	const char *name;
} statuses_1_0[] = {
#define S(x)          \
	{             \
		x, #x \
	}
	S(CMS_OK),
	S(CMS_ERR_INVALID_ARGUMENT),
	S(CMS_ERR_NO_DRIVER),
	S(CMS_ERR_DRIVER),
	S(CMS_ERR_OUT_OF_DEVICE_MEMORY),
	S(CMS_ERR_OUT_OF_HOST_MEMORY),
	S(CMS_ERR_NOT_FOUND),
	S(CMS_ERR_EXISTS),
	S(CMS_ERR_ALREADY_PAUSED),
	S(CMS_ERR_NOT_PAUSED),
	S(CMS_ERR_PAUSED),
	S(CMS_ERR_INVALID_DEVICE),
	S(CMS_ERR_NOT_SUPPORTED),
	S(CMS_ERR_STRUCT_SIZE),
	S(CMS_ERR_NOT_BASE),
	S(CMS_ERR_ROLLBACK_FAILED),
	S(CMS_ERR_NO_DEVICE),
	S(CMS_ERR_INTERNAL),
	S(CMS_ERR_FORKED),
#undef S
};

START_TEST(status_numbers_unchanged)
{
	size_t i, n = sizeof(statuses_1_0) / sizeof(statuses_1_0[0]);

	ck_assert_uint_eq(n, 1 - CMS_STATUS_MIN); /* the table lists every 1.0 status */
	for (i = 0; i < n; i++) {
		const char *str = cms_status_string(statuses_1_0[i].value);

		ck_assert_str_eq(cms_status_name(statuses_1_0[i].value), statuses_1_0[i].name);
		ck_assert_ptr_nonnull(str);
		ck_assert_msg(str[0] != '\0', "%s has no description", statuses_1_0[i].name);
	}
	ck_assert_str_eq(cms_status_name(1), "CMS_ERR_UNKNOWN_STATUS");
	ck_assert_str_eq(cms_status_name(-1000), "CMS_ERR_UNKNOWN_STATUS");
	ck_assert_ptr_nonnull(cms_status_string(-1000));
}
END_TEST

START_TEST(last_error)
{
	char buf[8];
	size_t n;

	ck_assert_ptr_nonnull(cms_last_error());
	ck_assert_str_eq(cms_last_error(), "");
	ck_assert_uint_eq(cms_last_error_message(NULL, 0), 0);
	ck_status(cms_context_create(NULL, NULL), CMS_ERR_INVALID_ARGUMENT);
	n = strlen(cms_last_error());
	ck_assert_uint_gt(n, 0);
	memset(buf, 'z', sizeof(buf));
	ck_assert_uint_eq(cms_last_error_message(buf, sizeof(buf)), n);
	ck_assert_uint_eq(strlen(buf), n < sizeof(buf) ? n : sizeof(buf) - 1);
	ck_assert_int_eq(strncmp(buf, cms_last_error(), strlen(buf)), 0);
	ck_assert_uint_eq(cms_last_error_message(NULL, 0), n);
	ck_ok(cms_context_destroy(NULL)); /* success leaves the message */
	ck_assert_uint_eq(strlen(cms_last_error()), n);
}
END_TEST

/* ---- option structs of the 1.0 size ------------------------------------ */

START_TEST(options_init_writes_1_0_size)
{
	static const cms_context_options c0 = CMS_CONTEXT_OPTIONS_INIT;
	static const cms_region_options r0 = CMS_REGION_OPTIONS_INIT;
	static const cms_pause_options p0 = CMS_PAUSE_OPTIONS_INIT;
	static const cms_resume_options q0 = CMS_RESUME_OPTIONS_INIT;
	union big b;

	/* An init function must not write past the struct of the header the caller was built
	 * with: a 1.0 binary has only sizeof(1.0 struct) bytes there. */
	canary(&b, sizeof(c0));
	ck_ok(cms_context_options_init(&b.ctx));
	ck_assert_msg(tail_is(&b, sizeof(c0), CANARY), "wrote past a 1.0 cms_context_options");
	ck_assert_msg(memcmp(&b.ctx, &c0, sizeof(c0)) == 0,
		      "not the 1.0 cms_context_options defaults (struct_size %zu, 1.0 size %zu)",
		      b.ctx.struct_size, sizeof(c0));
	canary(&b, sizeof(r0));
	ck_ok(cms_region_options_init(&b.region));
	ck_assert_msg(tail_is(&b, sizeof(r0), CANARY), "wrote past a 1.0 cms_region_options");
	ck_assert_msg(memcmp(&b.region, &r0, sizeof(r0)) == 0,
		      "not the 1.0 cms_region_options defaults (struct_size %zu, 1.0 size %zu)",
		      b.region.struct_size, sizeof(r0));
	canary(&b, sizeof(p0));
	ck_ok(cms_pause_options_init(&b.pause));
	ck_assert_msg(tail_is(&b, sizeof(p0), CANARY), "wrote past a 1.0 cms_pause_options");
	ck_assert_msg(memcmp(&b.pause, &p0, sizeof(p0)) == 0,
		      "not the 1.0 cms_pause_options defaults (struct_size %zu, 1.0 size %zu)",
		      b.pause.struct_size, sizeof(p0));
	canary(&b, sizeof(q0));
	ck_ok(cms_resume_options_init(&b.resume));
	ck_assert_msg(tail_is(&b, sizeof(q0), CANARY), "wrote past a 1.0 cms_resume_options");
	ck_assert_msg(memcmp(&b.resume, &q0, sizeof(q0)) == 0,
		      "not the 1.0 cms_resume_options defaults (struct_size %zu, 1.0 size %zu)",
		      b.resume.struct_size, sizeof(q0));

	ck_status(cms_context_options_init(NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_region_options_init(NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_pause_options_init(NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_resume_options_init(NULL), CMS_ERR_INVALID_ARGUMENT);
}
END_TEST

static int log_lines, log_bad;

static void on_log(void *user, int32_t level, const char *message)
{
	if (user != &log_lines || level < CMS_LOG_ERROR || level > CMS_LOG_INFO || !message ||
	    !message[0] || strchr(message, '\n'))
		log_bad++;
	log_lines++;
}

START_TEST(context_options)
{
	cms_context_options o = CMS_CONTEXT_OPTIONS_INIT;
	cms_context *ctx = NULL;
	cms_region *r = NULL;
	union big b;

	ck_status(cms_context_create(NULL, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_context_create(&o, NULL), CMS_ERR_INVALID_ARGUMENT);
	o.flags = 1; /* reserved */
	ck_status(cms_context_create(&o, &ctx), CMS_ERR_INVALID_ARGUMENT);
	ck_assert_ptr_null(ctx);
	o.flags = 0;
	o.struct_size = 0;
	ck_status(cms_context_create(&o, &ctx), CMS_ERR_STRUCT_SIZE);
	o.struct_size = STRUCT_MAX + 1;
	ck_status(cms_context_create(&o, &ctx), CMS_ERR_STRUCT_SIZE);
	ck_assert_ptr_null(ctx);

	/* Unknown non-zero tail: refused. */
	canary(&b, sizeof(o));
	b.ctx = (cms_context_options)CMS_CONTEXT_OPTIONS_INIT;
	unknown_tail(&b, sizeof(o));
	ck_status(cms_context_create(&b.ctx, &ctx), CMS_ERR_STRUCT_SIZE);
	ck_assert_ptr_null(ctx);
	/* The same struct with a zero tail: accepted, as from a newer header. */
	b.bytes[STRUCT_MAX - 1] = 0;
	ck_ok(cms_context_create(&b.ctx, &ctx));
	ck_ok(cms_context_destroy(ctx));
	ctx = NULL;

	/* The 1.0 size, with a log callback (a 1.0 field): it gets the driver's lines. */
	o = (cms_context_options)CMS_CONTEXT_OPTIONS_INIT;
	o.log_fn = on_log;
	o.log_user = &log_lines;
	o.log_level = CMS_LOG_INFO;
	ck_ok(cms_context_create(&o, &ctx));
	r = new_region(ctx, "logged", CMS_POLICY_DISCARD, 0);
	ck_assert_int_gt(log_lines, 0);
	ck_assert_int_eq(log_bad, 0);
	ck_ok(cms_region_destroy(r));
	ck_ok(cms_context_destroy(ctx));
	ck_ok(cms_context_destroy(NULL));
}
END_TEST

START_TEST(missing_driver)
{
	cms_context_options o = CMS_CONTEXT_OPTIONS_INIT;
	cms_context *ctx = NULL;
	cms_region *r = NULL;

	o.driver_path = "/nonexistent/libcuda.so.1";
	ck_ok(cms_context_create(&o, &ctx));
	ck_status(cms_region_create(ctx, "t", NULL, &r), CMS_ERR_NO_DRIVER);
	ck_assert_ptr_null(r);
	ck_status(cms_device_memory_info(ctx, 0, NULL, NULL), CMS_ERR_NO_DRIVER);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

START_TEST(device_memory_info)
{
	cms_context *ctx = new_ctx();
	uint64_t free_b = 0, total_b = 0;

	ck_status(cms_device_memory_info(NULL, 0, &free_b, &total_b), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_device_memory_info(ctx, 99, &free_b, &total_b), CMS_ERR_INVALID_DEVICE);
	ck_status(cms_device_memory_info(ctx, -1, &free_b, &total_b), CMS_ERR_INVALID_DEVICE);
	ck_ok(cms_device_memory_info(ctx, 0, &free_b, &total_b));
	ck_assert_uint_gt(total_b, 0);
	ck_assert_uint_le(free_b, total_b);
	ck_ok(cms_device_memory_info(ctx, 0, NULL, NULL));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* ---- regions ------------------------------------------------------------ */

START_TEST(regions)
{
	cms_context *ctx = new_ctx();
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_region *r = NULL, *found = NULL, *tmp = NULL;
	char long_tag[CMS_TAG_MAX + 2];
	union big b;

	memset(long_tag, 'x', sizeof(long_tag) - 1);
	long_tag[sizeof(long_tag) - 1] = '\0';
	o.policy = CMS_POLICY_HOST;
	ck_status(cms_region_create(NULL, "w", &o, &r), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_region_create(ctx, NULL, &o, &r), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_region_create(ctx, "w", &o, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_region_create(ctx, "", &o, &r), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_region_create(ctx, long_tag, &o, &r), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_region_create(ctx, "bad\ntag", &o, &r), CMS_ERR_INVALID_ARGUMENT);
	o.policy = 77;
	ck_status(cms_region_create(ctx, "w", &o, &r), CMS_ERR_INVALID_ARGUMENT);
	o.policy = CMS_POLICY_HOST;
	o.flags = 1ull << 40;
	ck_status(cms_region_create(ctx, "w", &o, &r), CMS_ERR_INVALID_ARGUMENT);
	o.flags = 0;
	o.device = 63;
	ck_status(cms_region_create(ctx, "w", &o, &r), CMS_ERR_INVALID_DEVICE);
	o.device = 0;
	o.struct_size = 4;
	ck_status(cms_region_create(ctx, "w", &o, &r), CMS_ERR_STRUCT_SIZE);
	o.struct_size = sizeof(o);
	canary(&b, sizeof(o));
	b.region = o;
	unknown_tail(&b, sizeof(o));
	ck_status(cms_region_create(ctx, "w", &b.region, &r), CMS_ERR_STRUCT_SIZE);
	ck_assert_ptr_null(r);

	ck_ok(cms_region_create(ctx, "w", &o, &r)); /* 1.0 size */
	ck_status(cms_region_create(ctx, "w", &o, &tmp), CMS_ERR_EXISTS);
	ck_ok(cms_region_create(ctx, "d", NULL, &tmp)); /* NULL options: device 0, DISCARD */

	ck_ok(cms_region_find(ctx, "w", 0, &found));
	ck_assert_ptr_eq(found, r);
	ck_status(cms_region_find(ctx, "w", 1, &found), CMS_ERR_NOT_FOUND);
	ck_status(cms_region_find(ctx, "nope", 0, &found), CMS_ERR_NOT_FOUND);
	ck_status(cms_region_find(ctx, "w", 0, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_region_find(NULL, "w", 0, &found), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_region_find(ctx, NULL, 0, &found), CMS_ERR_INVALID_ARGUMENT);

	/* A 1.0 cms_region_info: filled up to its size, nothing written past it. */
	canary(&b, sizeof(cms_region_info));
	ck_ok(cms_region_info_get(r, &b.rinfo));
	ck_assert_msg(tail_is(&b, sizeof(cms_region_info), CANARY), "wrote past a 1.0 info");
	ck_assert_uint_eq(b.rinfo.struct_size, sizeof(cms_region_info));
	ck_assert_str_eq(b.rinfo.tag, "w");
	ck_assert_int_eq(b.rinfo.device, 0);
	ck_assert_uint_eq(b.rinfo.policy, CMS_POLICY_HOST);
	ck_assert_uint_eq(b.rinfo.state, CMS_STATE_ACTIVE);
	ck_assert_uint_eq(b.rinfo.allocations, 0);
	ck_assert_uint_eq(b.rinfo.epoch, 0);
	ck_assert_uint_gt(b.rinfo.granularity, 0);
	ck_assert_uint_eq(b.rinfo.reserved, 0);
	ck_assert_uint_eq(b.rinfo.restore_pending, 0);
	/* A larger one (newer header): the bytes this library does not know are zeroed. */
	memset(b.bytes, 0xff, sizeof(b.bytes));
	b.rinfo.struct_size = STRUCT_MAX;
	ck_ok(cms_region_info_get(r, &b.rinfo));
	ck_assert_str_eq(b.rinfo.tag, "w");
	ck_assert_msg(b.bytes[STRUCT_MAX - 1] == 0, "unknown tail of an output struct not zeroed");
	b.rinfo.struct_size = 3;
	ck_status(cms_region_info_get(r, &b.rinfo), CMS_ERR_STRUCT_SIZE);
	b.rinfo.struct_size = STRUCT_MAX + 1;
	ck_status(cms_region_info_get(r, &b.rinfo), CMS_ERR_STRUCT_SIZE);
	ck_status(cms_region_info_get(r, NULL), CMS_ERR_INVALID_ARGUMENT);
	b.rinfo.struct_size = sizeof(cms_region_info);
	ck_status(cms_region_info_get(NULL, &b.rinfo), CMS_ERR_INVALID_ARGUMENT);

	ck_ok(cms_region_destroy(r));
	ck_status(cms_region_find(ctx, "w", 0, &found), CMS_ERR_NOT_FOUND);
	ck_ok(cms_region_destroy(NULL));
	ck_ok(cms_context_destroy(ctx)); /* destroys "d" */
}
END_TEST

/* ---- allocations -------------------------------------------------------- */

START_TEST(allocations)
{
	cms_context *ctx = new_ctx();
	cms_region *r = new_region(ctx, "a", CMS_POLICY_DISCARD, 0);
	cms_region_info ri = { .struct_size = sizeof(ri) };
	uint64_t p = 0, q = 0, gran;
	union big b;

	ck_ok(cms_region_info_get(r, &ri));
	gran = ri.granularity;
	ck_status(cms_alloc(NULL, 4096, &p), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_alloc(r, 4096, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_alloc(r, 0, &p), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_alloc(r, UINT64_MAX - 1, &p), CMS_ERR_INVALID_ARGUMENT);
	ck_ok(cms_alloc(r, 3 * MiB, &p));
	ck_assert_uint_ne(p, 0);
	ck_assert_uint_eq(p % gran, 0);
	ck_ok(cms_alloc(r, 1, &q));

	canary(&b, sizeof(cms_pointer_info));
	ck_ok(cms_pointer_info_get(ctx, p + 5, &b.pinfo));
	ck_assert_msg(tail_is(&b, sizeof(cms_pointer_info), CANARY), "wrote past a 1.0 info");
	ck_assert_ptr_eq(b.pinfo.region, r);
	ck_assert_uint_eq(b.pinfo.base, p);
	ck_assert_uint_eq(b.pinfo.size, 3 * MiB);
	ck_assert_uint_eq(b.pinfo.offset, 5);
	ck_assert_uint_eq(b.pinfo.physical_size, (3 * MiB + gran - 1) / gran * gran);
	ck_assert_int_eq(b.pinfo.device, 0);
	ck_assert_uint_eq(b.pinfo.state, CMS_STATE_ACTIVE);
	ck_status(cms_pointer_info_get(ctx, 0x10, &b.pinfo), CMS_ERR_NOT_FOUND);
	ck_status(cms_pointer_info_get(NULL, p, &b.pinfo), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_pointer_info_get(ctx, p, NULL), CMS_ERR_INVALID_ARGUMENT);
	b.pinfo.struct_size = 0;
	ck_status(cms_pointer_info_get(ctx, p, &b.pinfo), CMS_ERR_STRUCT_SIZE);

	ri.struct_size = sizeof(ri);
	ck_ok(cms_region_info_get(r, &ri));
	ck_assert_uint_eq(ri.allocations, 2);
	ck_assert_uint_eq(ri.logical_bytes, 3 * MiB + 1);

	ck_status(cms_free(NULL, p), CMS_ERR_INVALID_ARGUMENT);
	ck_ok(cms_free(ctx, 0)); /* since 1.3 a no-op, as free(NULL) (1.0-1.2: INVALID_ARGUMENT) */
	ck_status(cms_free(ctx, p + 1), CMS_ERR_NOT_BASE);
	ck_status(cms_free(ctx, 0x10), CMS_ERR_NOT_FOUND);
	ck_ok(cms_free(ctx, p));
	ck_status(cms_free(ctx, p), CMS_ERR_NOT_FOUND);
	b.pinfo.struct_size = sizeof(cms_pointer_info);
	ck_status(cms_pointer_info_get(ctx, p, &b.pinfo), CMS_ERR_NOT_FOUND);
	ck_ok(cms_context_destroy(ctx)); /* frees q with its region */
}
END_TEST

/* ---- pause and resume ---------------------------------------------------- */

START_TEST(pause_resume)
{
	cms_context *ctx = new_ctx();
	cms_region *w = new_region(ctx, "weights", CMS_POLICY_HOST, 0);
	cms_region *z = new_region(ctx, "zeroed", CMS_POLICY_ZERO, 0);
	cms_region *kv = new_region(ctx, "kv", CMS_POLICY_DISCARD, 0);
	cms_pause_options po;
	cms_resume_options ro;
	cms_region_info ri;
	uint64_t pw, pz, pk, tmp;
	union big b, res;

	ck_ok(cms_alloc(w, 3 * MiB, &pw));
	ck_ok(cms_alloc(z, 2 * MiB, &pz));
	ck_ok(cms_alloc(kv, 4 * MiB, &pk));
	if (on_sim()) {
		fill(pw, 3 * MiB, 11);
		fill(pz, 2 * MiB, 12);
	}
	ck_ok(cms_pause_options_init(&po));
	ck_ok(cms_resume_options_init(&ro));

	/* Invalid pauses change nothing. */
	ck_status(cms_pause(NULL, "weights", &po, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_pause(ctx, "nope", &po, NULL), CMS_ERR_NOT_FOUND);
	ck_status(cms_pause(ctx, "", &po, NULL), CMS_ERR_INVALID_ARGUMENT);
	po.flags = 0x100;
	ck_status(cms_pause(ctx, "weights", &po, NULL), CMS_ERR_INVALID_ARGUMENT);
	po.flags = 0;
	po.struct_size = 100000;
	ck_status(cms_pause(ctx, "weights", &po, NULL), CMS_ERR_STRUCT_SIZE);
	po.struct_size = sizeof(po);
	canary(&b, sizeof(po));
	b.pause = po;
	unknown_tail(&b, sizeof(po));
	ck_status(cms_pause(ctx, "weights", &b.pause, NULL), CMS_ERR_STRUCT_SIZE);
	canary(&res, sizeof(cms_pause_result));
	res.presult.struct_size = 1;
	ck_status(cms_pause(ctx, "weights", &po, &res.presult), CMS_ERR_STRUCT_SIZE);
	ri = (cms_region_info){ .struct_size = sizeof(ri) };
	ck_ok(cms_region_info_get(w, &ri));
	ck_assert_uint_eq(ri.state, CMS_STATE_ACTIVE);

	/* Pause one tag with 1.0-size options and result. */
	canary(&res, sizeof(cms_pause_result));
	ck_ok(cms_pause(ctx, "weights", &po, &res.presult));
	ck_assert_msg(tail_is(&res, sizeof(cms_pause_result), CANARY), "wrote past a 1.0 result");
	ck_assert_uint_eq(res.presult.regions, 1);
	ck_assert_uint_eq(res.presult.allocations, 1);
	ck_assert_uint_ge(res.presult.bytes_released, 3 * MiB);
	ck_assert_uint_ge(res.presult.bytes_backed_up, 3 * MiB);
	ck_status(cms_pause(ctx, "weights", NULL, NULL), CMS_ERR_ALREADY_PAUSED);
	ck_status(cms_region_pause(w, NULL, NULL), CMS_ERR_ALREADY_PAUSED);
	ck_status(cms_alloc(w, 4096, &tmp), CMS_ERR_PAUSED);
	ri = (cms_region_info){ .struct_size = sizeof(ri) };
	ck_ok(cms_region_info_get(w, &ri));
	ck_assert_uint_eq(ri.state, CMS_STATE_PAUSED);
	ck_assert_uint_eq(ri.backed_bytes, 0);
	ck_assert_uint_ge(ri.backup_bytes, 3 * MiB);

	/* Invalid resumes change nothing. */
	ck_status(cms_resume(NULL, "weights", &ro, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_resume(ctx, "nope", &ro, NULL), CMS_ERR_NOT_FOUND);
	ck_status(cms_resume(ctx, "kv", &ro, NULL), CMS_ERR_NOT_PAUSED);
	ro.flags = 0x100;
	ck_status(cms_resume(ctx, "weights", &ro, NULL), CMS_ERR_INVALID_ARGUMENT);
	ro.flags = 0;
	canary(&b, sizeof(ro));
	b.resume = ro;
	unknown_tail(&b, sizeof(ro));
	ck_status(cms_resume(ctx, "weights", &b.resume, NULL), CMS_ERR_STRUCT_SIZE);
	canary(&res, sizeof(cms_resume_result));
	res.rresult.struct_size = 5000;
	ck_status(cms_resume(ctx, "weights", &ro, &res.rresult), CMS_ERR_STRUCT_SIZE);

	canary(&res, sizeof(cms_resume_result));
	ck_ok(cms_resume(ctx, "weights", &ro, &res.rresult));
	ck_assert_msg(tail_is(&res, sizeof(cms_resume_result), CANARY), "wrote past a 1.0 result");
	ck_assert_uint_eq(res.rresult.regions, 1);
	ck_assert_uint_eq(res.rresult.allocations, 1);
	ck_assert_uint_ge(res.rresult.bytes_restored, 3 * MiB);
	ck_status(cms_resume(ctx, "weights", NULL, NULL), CMS_ERR_NOT_PAUSED);
	ri = (cms_region_info){ .struct_size = sizeof(ri) };
	ck_ok(cms_region_info_get(w, &ri));
	ck_assert_uint_eq(ri.state, CMS_STATE_ACTIVE);
	ck_assert_uint_eq(ri.epoch, 1);
	if (on_sim())
		ck_assert_msg(holds(pw, 3 * MiB, 11), "HOST content lost");

	/* One region, through its handle; NO_SYNC (nothing runs on the device). */
	po.flags = CMS_PAUSE_NO_SYNC;
	ck_status(cms_region_pause(NULL, &po, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_ok(cms_region_pause(z, &po, NULL));
	ck_status(cms_region_resume(NULL, NULL, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_region_resume(kv, NULL, NULL), CMS_ERR_NOT_PAUSED);
	canary(&res, sizeof(cms_resume_result));
	ck_ok(cms_region_resume(z, &ro, &res.rresult));
	ck_assert_msg(tail_is(&res, sizeof(cms_resume_result), CANARY), "wrote past a 1.0 result");
	if (on_sim())
		ck_assert_msg(all_zero(pz, 2 * MiB), "ZERO region not zeroed");

	/* Every tag at once, then an asynchronous resume (1.0 flag) ordered before stream 0. */
	ck_ok(cms_pause(ctx, NULL, NULL, NULL));
	ck_status(cms_pause(ctx, NULL, NULL, NULL), CMS_ERR_ALREADY_PAUSED);
	ro.flags = CMS_RESUME_ASYNC;
	ro.stream = 0;
	ck_ok(cms_resume(ctx, NULL, &ro, NULL));
	ck_status(cms_resume(ctx, NULL, NULL, NULL), CMS_ERR_NOT_PAUSED);
	ck_ok(cms_pointer_info_get(ctx, pk,
				   &(cms_pointer_info){ .struct_size = sizeof(cms_pointer_info) }));
	ck_ok(cms_free(ctx, pk));
	ck_ok(cms_region_destroy(kv));
	ck_ok(cms_context_destroy(ctx)); /* with live allocations in two regions */
}
END_TEST

START_TEST(resume_async_refuses_release_host)
{
	cms_context *ctx = new_ctx();
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_resume_options ro = CMS_RESUME_OPTIONS_INIT;
	cms_region *r = NULL;
	uint64_t p;

	o.policy = CMS_POLICY_HOST;
	o.flags = CMS_REGION_RELEASE_HOST;
	ck_ok(cms_region_create(ctx, "h", &o, &r));
	ck_ok(cms_alloc(r, MiB, &p));
	ck_ok(cms_region_pause(r, NULL, NULL));
	ro.flags = CMS_RESUME_ASYNC;
	ck_status(cms_region_resume(r, &ro, NULL), CMS_ERR_INVALID_ARGUMENT);
	ro.flags = 0;
	ck_ok(cms_region_resume(r, &ro, NULL));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* ---- fork --------------------------------------------------------------- */

START_TEST(forked_child)
{
	cms_context *ctx = new_ctx();
	cms_region *r = new_region(ctx, "f", CMS_POLICY_DISCARD, 0);
	uint64_t p;
	pid_t pid;
	int wstatus = 0;

	ck_ok(cms_alloc(r, MiB, &p));
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		cms_region_info ri = { .struct_size = sizeof(ri) };
		cms_pointer_info pi = { .struct_size = sizeof(pi) };
		cms_region *found;
		uint64_t q;
		int bad = 0;

		bad |= cms_alloc(r, MiB, &q) != CMS_ERR_FORKED;
		bad |= cms_free(ctx, p) != CMS_ERR_FORKED;
		bad |= cms_region_find(ctx, "f", 0, &found) != CMS_ERR_FORKED;
		bad |= cms_region_info_get(r, &ri) != CMS_ERR_FORKED;
		bad |= cms_pointer_info_get(ctx, p, &pi) != CMS_ERR_FORKED;
		bad |= cms_pause(ctx, NULL, NULL, NULL) != CMS_ERR_FORKED;
		bad |= cms_region_resume(r, NULL, NULL) != CMS_ERR_FORKED;
		bad |= cms_region_destroy(r) != CMS_ERR_FORKED;
		bad |= cms_context_destroy(ctx) != CMS_ERR_FORKED;
		_exit(bad ? 1 : 0);
	}
	ck_assert_int_eq(waitpid(pid, &wstatus, 0), pid);
	ck_assert_msg(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0,
		      "a call in the forked child did not return CMS_ERR_FORKED");
	ck_ok(cms_free(ctx, p)); /* the parent is unaffected */
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("conformance_1_0");
	TCase *tc = tcase_create("1.0 header, current library");

	tcase_add_test(tc, versions);
	tcase_add_test(tc, status_numbers_unchanged);
	tcase_add_test(tc, last_error);
	tcase_add_test(tc, options_init_writes_1_0_size);
	tcase_add_test(tc, context_options);
	tcase_add_test(tc, missing_driver);
	tcase_add_test(tc, device_memory_info);
	tcase_add_test(tc, regions);
	tcase_add_test(tc, allocations);
	tcase_add_test(tc, pause_resume);
	tcase_add_test(tc, resume_async_refuses_release_host);
	tcase_add_test(tc, forked_child);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return conformance_main("conformance_1_0", suite);
}
