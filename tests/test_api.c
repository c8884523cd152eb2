/* SPDX-License-Identifier: MIT */
/* test_api.c - unit tests that need no driver: versions, statuses, errors, option structs, tags. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

START_TEST(version_matches_header)
{
	ck_assert_uint_eq(cms_version(), CMS_VERSION_NUMBER);
	ck_assert_uint_eq(cms_version() >> 16, CMS_VERSION_MAJOR);
	ck_assert_str_eq(cms_version_string(), "1.3.0");
}
END_TEST

START_TEST(status_names_distinct)
{
	cms_status a, b;

	ck_assert_str_eq(cms_status_name(CMS_OK), "CMS_OK");
	for (a = CMS_STATUS_MIN; a <= 0; a++) {
		ck_assert_msg(strncmp(cms_status_name(a), "CMS_", 4) == 0, "%d", a);
		ck_assert_str_ne(cms_status_name(a), "CMS_ERR_UNKNOWN_STATUS");
		ck_assert_ptr_nonnull(cms_status_string(a));
		for (b = CMS_STATUS_MIN; b < a; b++)
			ck_assert_str_ne(cms_status_name(a), cms_status_name(b));
	}
	ck_assert_str_eq(cms_status_name(CMS_STATUS_MIN - 1), "CMS_ERR_UNKNOWN_STATUS");
	ck_assert_str_eq(cms_status_name(1), "CMS_ERR_UNKNOWN_STATUS");
	ck_assert_str_eq(cms_status_string(-1000), "unknown status code");
	ck_assert_str_eq(cms_status_name(CMS_ERR_NO_DRIVER), "CMS_ERR_NO_DRIVER");
}
END_TEST

static void *thread_error(void *arg)
{
	(void)arg;
	return (void *)(uintptr_t)(cms_last_error()[0] == '\0');
}

START_TEST(last_error_thread_local_and_copy_out)
{
	char buf[8];
	size_t n;
	pthread_t t;
	void *clean;

	ck_assert_ptr_nonnull(cms_last_error());
	ck_status(cms_context_create(NULL, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_assert_str_eq(cms_last_error(), "out is NULL");
	/* Another thread has its own message. */
	ck_assert_int_eq(pthread_create(&t, NULL, thread_error, NULL), 0);
	ck_assert_int_eq(pthread_join(t, &clean), 0);
	ck_assert_ptr_eq(clean, (void *)1);
	n = cms_last_error_message(buf, sizeof(buf));
	ck_assert_uint_eq(n, strlen("out is NULL"));
	ck_assert_str_eq(buf, "out is ");
	ck_assert_uint_eq(cms_last_error_message(NULL, 0), n);
	/* A successful call leaves the message. */
	ck_ok(cms_context_destroy(NULL));
	ck_assert_str_eq(cms_last_error(), "out is NULL");
}
END_TEST

START_TEST(options_init)
{
	cms_context_options c;
	cms_region_options r;
	cms_pause_options p;
	cms_resume_options q;

	memset(&c, 0xff, sizeof(c));
	ck_ok(cms_context_options_init(&c));
	ck_assert_uint_eq(c.struct_size, sizeof(c));
	ck_assert_ptr_null(c.driver_path);
	ck_ok(cms_region_options_init(&r));
	ck_assert_uint_eq(r.struct_size, sizeof(r));
	ck_assert_uint_eq(r.policy, CMS_POLICY_DISCARD);
	ck_ok(cms_pause_options_init(&p));
	ck_assert_uint_eq(p.struct_size, sizeof(p));
	ck_ok(cms_resume_options_init(&q));
	ck_assert_uint_eq(q.struct_size, sizeof(q));
	ck_status(cms_context_options_init(NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_region_options_init(NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_pause_options_init(NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_resume_options_init(NULL), CMS_ERR_INVALID_ARGUMENT);
}
END_TEST

/* A future, larger struct: ours followed by fields this library does not know. */
struct future_context_options {
	cms_context_options base;
	uint64_t new_field;
};

START_TEST(struct_size_rules)
{
	struct future_context_options f;
	cms_context_options o = CMS_CONTEXT_OPTIONS_INIT;
	cms_context *ctx = NULL;

	o.struct_size = 0;
	ck_status(cms_context_create(&o, &ctx), CMS_ERR_STRUCT_SIZE);
	ck_assert_ptr_null(ctx);
	o.struct_size = 1u << 20;
	ck_status(cms_context_create(&o, &ctx), CMS_ERR_STRUCT_SIZE);
	/* Smaller than the struct was in its first release (1.0): refused, since a field would
	 * be cut. (Structs grown in later releases accept their 1.0 size.) */
	o.struct_size = offsetof(cms_context_options, log_fn);
	ck_status(cms_context_create(&o, &ctx), CMS_ERR_STRUCT_SIZE);
	o.struct_size = sizeof(o) - 1;
	ck_status(cms_context_create(&o, &ctx), CMS_ERR_STRUCT_SIZE);
	o.struct_size = sizeof(o);
	ck_ok(cms_context_create(&o, &ctx));
	ck_ok(cms_context_destroy(ctx));
	/* Newer struct with a zero tail: accepted; with a non-zero tail: refused. */
	memset(&f, 0, sizeof(f));
	f.base = (cms_context_options)CMS_CONTEXT_OPTIONS_INIT;
	f.base.struct_size = sizeof(f);
	ck_ok(cms_context_create(&f.base, &ctx));
	ck_ok(cms_context_destroy(ctx));
	f.new_field = 1;
	ctx = NULL;
	ck_status(cms_context_create(&f.base, &ctx), CMS_ERR_STRUCT_SIZE);
	ck_assert_ptr_null(ctx);
	/* Reserved flags and bad levels. */
	o = (cms_context_options)CMS_CONTEXT_OPTIONS_INIT;
	o.flags = 4;
	ck_status(cms_context_create(&o, &ctx), CMS_ERR_INVALID_ARGUMENT);
	o.flags = 0;
	o.log_level = 9;
	ck_status(cms_context_create(&o, &ctx), CMS_ERR_INVALID_ARGUMENT);
}
END_TEST

static cms_context *no_driver_ctx(void)
{
	cms_context_options o = CMS_CONTEXT_OPTIONS_INIT;
	cms_context *ctx = NULL;

	o.driver_path = "/nonexistent/libcuda-missing.so.1";
	ck_ok(cms_context_create(&o, &ctx));
	return ctx;
}

START_TEST(missing_driver_is_a_status)
{
	cms_context *ctx = no_driver_ctx();
	cms_region *r = NULL;
	uint64_t f = 7;

	ck_status(cms_region_create(ctx, "weights", NULL, &r), CMS_ERR_NO_DRIVER);
	ck_assert_ptr_null(r);
	ck_assert_ptr_nonnull(strstr(cms_last_error(), "libcuda-missing"));
	ck_status(cms_device_memory_info(ctx, 0, &f, NULL), CMS_ERR_NO_DRIVER);
	ck_assert_uint_eq(f, 7);
	/* Calls that need no driver still work. */
	ck_status(cms_pause(ctx, NULL, NULL, NULL), CMS_ERR_ALREADY_PAUSED);
	ck_status(cms_resume(ctx, "weights", NULL, NULL), CMS_ERR_NOT_FOUND);
	ck_status(cms_free(ctx, 0x1000), CMS_ERR_NOT_FOUND);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

START_TEST(tags_are_validated_first)
{
	static const char *bad[] = { "", "has\nnewline", "tab\there", "\x7f" };
	cms_context *ctx = no_driver_ctx();
	char longtag[CMS_TAG_MAX + 2];
	cms_region *r = NULL;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_status(cms_region_create(ctx, bad[i], NULL, &r), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_region_create(ctx, NULL, NULL, &r), CMS_ERR_INVALID_ARGUMENT);
	memset(longtag, 'a', sizeof(longtag) - 1);
	longtag[sizeof(longtag) - 1] = '\0';
	ck_status(cms_region_create(ctx, longtag, NULL, &r), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_pause(ctx, longtag, NULL, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_region_find(ctx, "", 0, &r), CMS_ERR_INVALID_ARGUMENT);
	/* Exactly CMS_TAG_MAX bytes is fine (fails later, on the driver). */
	longtag[CMS_TAG_MAX] = '\0';
	ck_status(cms_region_create(ctx, longtag, NULL, &r), CMS_ERR_NO_DRIVER);
	ck_assert_ptr_null(r);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

START_TEST(null_handles)
{
	cms_region_info ri = { .struct_size = sizeof(ri) };
	cms_pointer_info pi = { .struct_size = sizeof(pi) };
	uint64_t p;
	cms_region *r;

	ck_status(cms_region_create(NULL, "t", NULL, &r), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_region_find(NULL, "t", 0, &r), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_region_info_get(NULL, &ri), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_alloc(NULL, 4096, &p), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_free(NULL, 0x1000), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_pointer_info_get(NULL, 0x1000, &pi), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_pause(NULL, NULL, NULL, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_resume(NULL, NULL, NULL, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_region_pause(NULL, NULL, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_region_resume(NULL, NULL, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_device_memory_info(NULL, 0, NULL, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_ok(cms_region_destroy(NULL));
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("api");
	TCase *tc = tcase_create("api");

	tcase_add_test(tc, version_matches_header);
	tcase_add_test(tc, status_names_distinct);
	tcase_add_test(tc, last_error_thread_local_and_copy_out);
	tcase_add_test(tc, options_init);
	tcase_add_test(tc, struct_size_rules);
	tcase_add_test(tc, missing_driver_is_a_status);
	tcase_add_test(tc, tags_are_validated_first);
	tcase_add_test(tc, null_handles);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return t_main(suite, T_NEEDS_NOTHING);
}
