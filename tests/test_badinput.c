/* SPDX-License-Identifier: MIT */
/*
 * test_badinput.c - table of bad inputs for every public function: each gets
 * its documented status and changes nothing (region infos and simulation
 * object counts compared before and after).
 */
#include <stdio.h>
#include <string.h>

#include "common.h"

struct fx {
	cms_context *ctx;
	cms_region *active, *paused;
	uint64_t p, q; /* allocations in active and paused */
};

typedef cms_status (*bad_fn)(struct fx *f);

/* BAD(name, documented status, { body }): the status is repeated in the table below. */
#define BAD(name, want, ...)                 \
	static cms_status name(struct fx *f) \
	{                                    \
		(void)f;                     \
		__VA_ARGS__                  \
	}

static char long_tag[CMS_TAG_MAX + 2];
static char unterminated[CMS_TAG_MAX + 8];

BAD(ctx_create_null_out, CMS_ERR_INVALID_ARGUMENT, { return cms_context_create(NULL, NULL); })
BAD(ctx_create_size0, CMS_ERR_STRUCT_SIZE, {
	cms_context_options o = CMS_CONTEXT_OPTIONS_INIT;
	cms_context *c = NULL;
	o.struct_size = 0;
	return cms_context_create(&o, &c);
})
BAD(ctx_create_flags, CMS_ERR_INVALID_ARGUMENT, {
	cms_context_options o = CMS_CONTEXT_OPTIONS_INIT;
	cms_context *c = NULL;
	o.flags = 1;
	return cms_context_create(&o, &c);
})
BAD(meminfo_null, CMS_ERR_INVALID_ARGUMENT, { return cms_device_memory_info(NULL, 0, NULL, NULL); })
BAD(meminfo_bad_device, CMS_ERR_INVALID_DEVICE,
    { return cms_device_memory_info(f->ctx, 99, NULL, NULL); })
BAD(meminfo_negative_device, CMS_ERR_INVALID_DEVICE,
    { return cms_device_memory_info(f->ctx, -3, NULL, NULL); })
BAD(region_create_null_ctx, CMS_ERR_INVALID_ARGUMENT, {
	cms_region *r;
	return cms_region_create(NULL, "x", NULL, &r);
})
BAD(region_create_null_out, CMS_ERR_INVALID_ARGUMENT,
    { return cms_region_create(f->ctx, "x", NULL, NULL); })
BAD(region_create_null_tag, CMS_ERR_INVALID_ARGUMENT, {
	cms_region *r;
	return cms_region_create(f->ctx, NULL, NULL, &r);
})
BAD(region_create_long_tag, CMS_ERR_INVALID_ARGUMENT, {
	cms_region *r;
	return cms_region_create(f->ctx, long_tag, NULL, &r);
})
BAD(region_create_unterminated_tag, CMS_ERR_INVALID_ARGUMENT, {
	cms_region *r;
	return cms_region_create(f->ctx, unterminated, NULL, &r);
})
BAD(region_create_exists, CMS_ERR_EXISTS, {
	cms_region *r;
	return cms_region_create(f->ctx, "active", NULL, &r);
})
BAD(region_create_policy, CMS_ERR_INVALID_ARGUMENT, {
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_region *r;
	o.policy = 77;
	return cms_region_create(f->ctx, "x", &o, &r);
})
BAD(region_create_flags, CMS_ERR_INVALID_ARGUMENT, {
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_region *r;
	o.flags = 1ull << 40;
	return cms_region_create(f->ctx, "x", &o, &r);
})
BAD(region_create_device, CMS_ERR_INVALID_DEVICE, {
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_region *r;
	o.device = 63;
	return cms_region_create(f->ctx, "x", &o, &r);
})
BAD(region_create_future_struct, CMS_ERR_STRUCT_SIZE, {
	struct {
		cms_region_options o;
		uint32_t future;
	} big = { CMS_REGION_OPTIONS_INIT, 5 };
	cms_region *r;
	big.o.struct_size = sizeof(big);
	return cms_region_create(f->ctx, "x", &big.o, &r);
})
BAD(region_find_null, CMS_ERR_INVALID_ARGUMENT,
    { return cms_region_find(f->ctx, "active", 0, NULL); })
BAD(region_find_unknown, CMS_ERR_NOT_FOUND, {
	cms_region *r;
	return cms_region_find(f->ctx, "nope", 0, &r);
})
BAD(region_find_wrong_device, CMS_ERR_NOT_FOUND, {
	cms_region *r;
	return cms_region_find(f->ctx, "active", 1, &r);
})
BAD(region_info_null, CMS_ERR_INVALID_ARGUMENT, { return cms_region_info_get(f->active, NULL); })
BAD(region_info_size, CMS_ERR_STRUCT_SIZE, {
	cms_region_info i = { .struct_size = 3 };
	return cms_region_info_get(f->active, &i);
})
BAD(alloc_null_region, CMS_ERR_INVALID_ARGUMENT, {
	uint64_t p;
	return cms_alloc(NULL, 10, &p);
})
BAD(alloc_null_out, CMS_ERR_INVALID_ARGUMENT, { return cms_alloc(f->active, 10, NULL); })
BAD(alloc_zero, CMS_ERR_INVALID_ARGUMENT, {
	uint64_t p;
	return cms_alloc(f->active, 0, &p);
})
BAD(alloc_overflow, CMS_ERR_INVALID_ARGUMENT, {
	uint64_t p;
	return cms_alloc(f->active, UINT64_MAX - 1, &p);
})
BAD(alloc_paused, CMS_ERR_PAUSED, {
	uint64_t p;
	return cms_alloc(f->paused, 10, &p);
})
BAD(free_null_ctx, CMS_ERR_INVALID_ARGUMENT, { return cms_free(NULL, f->p); })
BAD(free_foreign, CMS_ERR_NOT_FOUND, {
	static int x;
	return cms_free(f->ctx, (uint64_t)(uintptr_t)&x);
})
BAD(free_inner, CMS_ERR_NOT_BASE, { return cms_free(f->ctx, f->p + 1); })
BAD(free_inner_paused, CMS_ERR_NOT_BASE, { return cms_free(f->ctx, f->q + 4096); })
BAD(free_padding, CMS_ERR_NOT_FOUND, { return cms_free(f->ctx, f->p + 8192); })
BAD(ptrinfo_null, CMS_ERR_INVALID_ARGUMENT, { return cms_pointer_info_get(f->ctx, f->p, NULL); })
BAD(ptrinfo_size, CMS_ERR_STRUCT_SIZE, {
	cms_pointer_info i = { .struct_size = 0 };
	return cms_pointer_info_get(f->ctx, f->p, &i);
})
BAD(ptrinfo_foreign, CMS_ERR_NOT_FOUND, {
	cms_pointer_info i = { .struct_size = sizeof(i) };
	return cms_pointer_info_get(f->ctx, 0x10, &i);
})
BAD(pause_null_ctx, CMS_ERR_INVALID_ARGUMENT, { return cms_pause(NULL, "active", NULL, NULL); })
BAD(pause_unknown_tag, CMS_ERR_NOT_FOUND, { return cms_pause(f->ctx, "nope", NULL, NULL); })
BAD(pause_bad_tag, CMS_ERR_INVALID_ARGUMENT, { return cms_pause(f->ctx, long_tag, NULL, NULL); })
BAD(pause_paused, CMS_ERR_ALREADY_PAUSED, { return cms_pause(f->ctx, "paused", NULL, NULL); })
BAD(pause_flags, CMS_ERR_INVALID_ARGUMENT, {
	cms_pause_options o = CMS_PAUSE_OPTIONS_INIT;
	o.flags = 0x100;
	return cms_pause(f->ctx, "active", &o, NULL);
})
BAD(pause_opts_size, CMS_ERR_STRUCT_SIZE, {
	cms_pause_options o = CMS_PAUSE_OPTIONS_INIT;
	o.struct_size = 100000;
	return cms_pause(f->ctx, "active", &o, NULL);
})
BAD(pause_result_size, CMS_ERR_STRUCT_SIZE, {
	cms_pause_result r = { .struct_size = 1 };
	return cms_pause(f->ctx, "active", NULL, &r);
})
BAD(resume_active, CMS_ERR_NOT_PAUSED, { return cms_resume(f->ctx, "active", NULL, NULL); })
BAD(resume_flags, CMS_ERR_INVALID_ARGUMENT, {
	cms_resume_options o = CMS_RESUME_OPTIONS_INIT;
	o.flags = 0x100; /* not a CMS_RESUME_* flag */
	return cms_resume(f->ctx, "paused", &o, NULL);
})
BAD(resume_unknown, CMS_ERR_NOT_FOUND, { return cms_resume(f->ctx, "nope", NULL, NULL); })
BAD(region_pause_null, CMS_ERR_INVALID_ARGUMENT, { return cms_region_pause(NULL, NULL, NULL); })
BAD(region_pause_paused, CMS_ERR_ALREADY_PAUSED,
    { return cms_region_pause(f->paused, NULL, NULL); })
BAD(region_resume_active, CMS_ERR_NOT_PAUSED, { return cms_region_resume(f->active, NULL, NULL); })
BAD(region_resume_result_size, CMS_ERR_STRUCT_SIZE, {
	cms_resume_result r = { .struct_size = 5000 };
	return cms_region_resume(f->paused, NULL, &r);
})
BAD(options_init_null, CMS_ERR_INVALID_ARGUMENT, { return cms_region_options_init(NULL); })

struct bad_case {
	const char *name;
	bad_fn fn;
	cms_status want;
};

#define CASE(fn, want)        \
	{                     \
#fn, fn, want \
	}
static const struct bad_case cases[] = {
	CASE(ctx_create_null_out, CMS_ERR_INVALID_ARGUMENT),
	CASE(ctx_create_size0, CMS_ERR_STRUCT_SIZE),
	CASE(ctx_create_flags, CMS_ERR_INVALID_ARGUMENT),
	CASE(meminfo_null, CMS_ERR_INVALID_ARGUMENT),
	CASE(meminfo_bad_device, CMS_ERR_INVALID_DEVICE),
	CASE(meminfo_negative_device, CMS_ERR_INVALID_DEVICE),
	CASE(region_create_null_ctx, CMS_ERR_INVALID_ARGUMENT),
	CASE(region_create_null_out, CMS_ERR_INVALID_ARGUMENT),
	CASE(region_create_null_tag, CMS_ERR_INVALID_ARGUMENT),
	CASE(region_create_long_tag, CMS_ERR_INVALID_ARGUMENT),
	CASE(region_create_unterminated_tag, CMS_ERR_INVALID_ARGUMENT),
	CASE(region_create_exists, CMS_ERR_EXISTS),
	CASE(region_create_policy, CMS_ERR_INVALID_ARGUMENT),
	CASE(region_create_flags, CMS_ERR_INVALID_ARGUMENT),
	CASE(region_create_device, CMS_ERR_INVALID_DEVICE),
	CASE(region_create_future_struct, CMS_ERR_STRUCT_SIZE),
	CASE(region_find_null, CMS_ERR_INVALID_ARGUMENT),
	CASE(region_find_unknown, CMS_ERR_NOT_FOUND),
	CASE(region_find_wrong_device, CMS_ERR_NOT_FOUND),
	CASE(region_info_null, CMS_ERR_INVALID_ARGUMENT),
	CASE(region_info_size, CMS_ERR_STRUCT_SIZE),
	CASE(alloc_null_region, CMS_ERR_INVALID_ARGUMENT),
	CASE(alloc_null_out, CMS_ERR_INVALID_ARGUMENT),
	CASE(alloc_zero, CMS_ERR_INVALID_ARGUMENT),
	CASE(alloc_overflow, CMS_ERR_INVALID_ARGUMENT),
	CASE(alloc_paused, CMS_ERR_PAUSED),
	CASE(free_null_ctx, CMS_ERR_INVALID_ARGUMENT),
	CASE(free_foreign, CMS_ERR_NOT_FOUND),
	CASE(free_inner, CMS_ERR_NOT_BASE),
	CASE(free_inner_paused, CMS_ERR_NOT_BASE),
	CASE(free_padding, CMS_ERR_NOT_FOUND),
	CASE(ptrinfo_null, CMS_ERR_INVALID_ARGUMENT),
	CASE(ptrinfo_size, CMS_ERR_STRUCT_SIZE),
	CASE(ptrinfo_foreign, CMS_ERR_NOT_FOUND),
	CASE(pause_null_ctx, CMS_ERR_INVALID_ARGUMENT),
	CASE(pause_unknown_tag, CMS_ERR_NOT_FOUND),
	CASE(pause_bad_tag, CMS_ERR_INVALID_ARGUMENT),
	CASE(pause_paused, CMS_ERR_ALREADY_PAUSED),
	CASE(pause_flags, CMS_ERR_INVALID_ARGUMENT),
	CASE(pause_opts_size, CMS_ERR_STRUCT_SIZE),
	CASE(pause_result_size, CMS_ERR_STRUCT_SIZE),
	CASE(resume_active, CMS_ERR_NOT_PAUSED),
	CASE(resume_flags, CMS_ERR_INVALID_ARGUMENT),
	CASE(resume_unknown, CMS_ERR_NOT_FOUND),
	CASE(region_pause_null, CMS_ERR_INVALID_ARGUMENT),
	CASE(region_pause_paused, CMS_ERR_ALREADY_PAUSED),
	CASE(region_resume_active, CMS_ERR_NOT_PAUSED),
	CASE(region_resume_result_size, CMS_ERR_STRUCT_SIZE),
	CASE(options_init_null, CMS_ERR_INVALID_ARGUMENT),
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

struct snapshot {
	cms_region_info a, b;
	cmssim_counters c;
	unsigned char content[64];
};

static void snap(struct fx *f, struct snapshot *s)
{
	memset(s, 0, sizeof(*s));
	s->a.struct_size = sizeof(s->a);
	s->b.struct_size = sizeof(s->b);
	ck_ok(cms_region_info_get(f->active, &s->a));
	ck_ok(cms_region_info_get(f->paused, &s->b));
	s->c = t_counters();
	s->c.calls = 0;
	ck_assert_int_eq(t_read(0, s->content, f->p, sizeof(s->content)), 0);
}

START_TEST(bad_input_table)
{
	const struct bad_case *c = &cases[_i];
	struct snapshot s0, s1;
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	struct fx f;
	cms_status st;

	memset(long_tag, 'x', sizeof(long_tag) - 1);
	memset(unterminated, 'y', sizeof(unterminated));
	f.ctx = t_ctx();
	o.policy = CMS_POLICY_HOST;
	ck_ok(cms_region_create(f.ctx, "active", &o, &f.active));
	ck_ok(cms_region_create(f.ctx, "paused", &o, &f.paused));
	ck_ok(cms_alloc(f.active, 4096, &f.p));
	ck_ok(cms_alloc(f.paused, 3 * MiB, &f.q));
	ck_assert_int_eq(t_fill(0, f.p, 4096, 9), 0);
	ck_ok(cms_region_pause(f.paused, NULL, NULL));
	snap(&f, &s0);
	st = c->fn(&f);
	ck_assert_msg(st == c->want, "%s: got %s (%s), want %s", c->name, cms_status_name(st),
		      cms_last_error(), cms_status_name(c->want));
	ck_assert_msg(cms_last_error()[0] != '\0', "%s: no message", c->name);
	snap(&f, &s1);
	ck_assert_msg(!memcmp(&s0, &s1, sizeof(s0)), "%s changed state", c->name);
	ck_ok(cms_context_destroy(f.ctx));
	if (_i == (int)NCASES - 1)
		printf("bad input: %zu cases over %d public functions\n", NCASES, 20);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("badinput");
	TCase *tc = tcase_create("badinput");

	tcase_add_loop_test(tc, bad_input_table, 0, (int)NCASES);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return t_main(suite, T_NEEDS_SIM);
}
