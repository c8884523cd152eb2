/* SPDX-License-Identifier: MIT */
/*
 * test_features.c - the rules of the region feature table (src/engine/feature.c),
 * one case per rule of each CMS_REGION_* flag, through the calls that check
 * them: cms_region_create (unknown bits, requires, policies, excludes),
 * cms_region_flags_set (changeable, mask, policies, paused), a resume with
 * CMS_RESUME_ASYNC (flags that need a synchronous resume) and
 * cms_region_freeze (flags that cannot be frozen). Each case gives the
 * status the public header documents and a message naming the flag.
 */
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "common.h"

#define INVALID CMS_ERR_INVALID_ARGUMENT
#define HOST CMS_POLICY_HOST
#define DISK CMS_POLICY_DISK
#define ZERO CMS_POLICY_ZERO
#define DISCARD CMS_POLICY_DISCARD

/* The message of the last call holds each word of words (NULL-terminated, at most 3). */
static void ck_words(const char *name, const char *const *words)
{
	size_t i;

	for (i = 0; i < 3 && words[i]; i++)
		ck_assert_msg(strstr(cms_last_error(), words[i]) != NULL,
			      "%s: message '%s' lacks '%s'", name, cms_last_error(), words[i]);
}

/* ---- cms_region_create ---- */

struct create_case {
	const char *name;
	uint64_t flags;
	uint32_t policy;
	cms_status want;
	const char *words[3];
};

static const struct create_case creates[] = {
	{ "unknown bit", 1ull << 40, HOST, INVALID, { "unknown region flags" } },
	{ "RELEASE_HOST", CMS_REGION_RELEASE_HOST, DISCARD, CMS_OK, { NULL } },
	{ "SHAREABLE", CMS_REGION_SHAREABLE, HOST, CMS_OK, { NULL } },
	{ "COALESCE", CMS_REGION_COALESCE, ZERO, CMS_OK, { NULL } },
	{ "CHUNKS alone",
	  CMS_REGION_CHUNKS,
	  DISCARD,
	  INVALID,
	  { "CMS_REGION_CHUNKS needs CMS_REGION_COALESCE" } },
	{ "CHUNKS with COALESCE", CMS_REGION_CHUNKS | CMS_REGION_COALESCE, DISCARD, CMS_OK, { 0 } },
	{ "GUARD", CMS_REGION_GUARD, DISCARD, CMS_OK, { NULL } },
	{ "HOST_PAGEABLE, DISCARD",
	  CMS_REGION_HOST_PAGEABLE,
	  DISCARD,
	  INVALID,
	  { "CMS_REGION_HOST_PAGEABLE needs CMS_POLICY_HOST", "policy 0" } },
	{ "HOST_PAGEABLE, ZERO",
	  CMS_REGION_HOST_PAGEABLE,
	  ZERO,
	  INVALID,
	  { "CMS_REGION_HOST_PAGEABLE needs CMS_POLICY_HOST" } },
	{ "HOST_PAGEABLE, DISK",
	  CMS_REGION_HOST_PAGEABLE,
	  DISK,
	  INVALID,
	  { "CMS_REGION_HOST_PAGEABLE needs CMS_POLICY_HOST" } },
	{ "HOST_PAGEABLE, HOST", CMS_REGION_HOST_PAGEABLE, HOST, CMS_OK, { NULL } },
	{ "PREPARE, DISK",
	  CMS_REGION_PREPARE,
	  DISK,
	  INVALID,
	  { "CMS_REGION_PREPARE needs CMS_POLICY_HOST" } },
	{ "PREPARE, ZERO",
	  CMS_REGION_PREPARE,
	  ZERO,
	  INVALID,
	  { "CMS_REGION_PREPARE needs CMS_POLICY_HOST" } },
	{ "PREPARE with RELEASE_HOST",
	  CMS_REGION_PREPARE | CMS_REGION_RELEASE_HOST,
	  HOST,
	  INVALID,
	  { "CMS_REGION_PREPARE with CMS_REGION_RELEASE_HOST" } },
	{ "PREPARE, HOST", CMS_REGION_PREPARE, HOST, CMS_OK, { NULL } },
	{ "VERIFY, DISCARD",
	  CMS_REGION_VERIFY,
	  DISCARD,
	  INVALID,
	  { "CMS_REGION_VERIFY needs CMS_POLICY_HOST or CMS_POLICY_DISK" } },
	{ "VERIFY, ZERO",
	  CMS_REGION_VERIFY,
	  ZERO,
	  INVALID,
	  { "CMS_REGION_VERIFY needs CMS_POLICY_HOST or CMS_POLICY_DISK", "policy 1" } },
	{ "VERIFY, HOST", CMS_REGION_VERIFY, HOST, CMS_OK, { NULL } },
	{ "VERIFY, DISK", CMS_REGION_VERIFY, DISK, CMS_OK, { NULL } },
};
#define NCREATES ((int)(sizeof(creates) / sizeof(creates[0])))

START_TEST(create_rules)
{
	const struct create_case *c = &creates[_i];
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_context *ctx = t_ctx();
	cms_region *r = NULL;

	o.flags = c->flags;
	o.policy = c->policy;
	ck_status(cms_region_create(ctx, "r", &o, &r), c->want);
	if (c->want) {
		ck_assert_ptr_null(r);
		ck_words(c->name, c->words);
	} else {
		ck_assert_uint_eq(t_info(r).flags, c->flags);
	}
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* CMS_REGION_SHAREABLE_FABRIC needs the device's fabric handles (the simulation has none);
 * where it has them, the region cannot be frozen (its row's freeze rule). */
START_TEST(fabric)
{
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_context *ctx = t_ctx();
	cms_region *r = NULL;
	cms_status st;

	o.flags = CMS_REGION_SHAREABLE_FABRIC;
	st = cms_region_create(ctx, "f", &o, &r);
	if (t_is_sim())
		ck_assert_int_eq(st, CMS_ERR_NOT_SUPPORTED);
	if (!st) {
		ck_status(cms_region_freeze(r), CMS_ERR_NOT_SUPPORTED);
		ck_words("fabric", (const char *const[]){ "region \"f\"", "shareable", NULL });
	}
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* ---- cms_region_flags_set ---- */

struct change_case {
	const char *name;
	uint64_t created; /* the region's flags */
	uint32_t policy;
	bool paused;
	uint64_t mask, flags;
	cms_status want;
	const char *words[3];
};

static const struct change_case changes[] = {
	{ "RELEASE_HOST, active",
	  0,
	  DISCARD,
	  false,
	  CMS_REGION_RELEASE_HOST,
	  CMS_REGION_RELEASE_HOST,
	  CMS_OK,
	  { NULL } },
	{ "RELEASE_HOST, paused",
	  0,
	  HOST,
	  true,
	  CMS_REGION_RELEASE_HOST,
	  CMS_REGION_RELEASE_HOST,
	  CMS_OK,
	  { NULL } },
	{ "RELEASE_HOST on a PREPARE region (stops its preparation)",
	  CMS_REGION_PREPARE,
	  HOST,
	  false,
	  CMS_REGION_RELEASE_HOST,
	  CMS_REGION_RELEASE_HOST,
	  CMS_OK,
	  { NULL } },
	{ "SHAREABLE",
	  0,
	  HOST,
	  false,
	  CMS_REGION_SHAREABLE,
	  0,
	  INVALID,
	  { "region flags 0x2 cannot be changed" } },
	{ "SHAREABLE_FABRIC",
	  0,
	  HOST,
	  false,
	  CMS_REGION_SHAREABLE_FABRIC,
	  0,
	  INVALID,
	  { "region flags 0x4 cannot be changed" } },
	{ "COALESCE",
	  0,
	  HOST,
	  false,
	  CMS_REGION_COALESCE,
	  CMS_REGION_COALESCE,
	  INVALID,
	  { "region flags 0x8 cannot be changed" } },
	{ "CHUNKS",
	  0,
	  HOST,
	  false,
	  CMS_REGION_CHUNKS,
	  0,
	  INVALID,
	  { "region flags 0x40 cannot be changed" } },
	{ "GUARD",
	  0,
	  HOST,
	  false,
	  CMS_REGION_GUARD,
	  CMS_REGION_GUARD,
	  INVALID,
	  { "region flags 0x10 cannot be changed" } },
	{ "PREPARE",
	  0,
	  HOST,
	  false,
	  CMS_REGION_PREPARE,
	  CMS_REGION_PREPARE,
	  INVALID,
	  { "region flags 0x100 cannot be changed", "only 0xa1 can" } },
	{ "flags outside the mask",
	  0,
	  HOST,
	  false,
	  CMS_REGION_RELEASE_HOST,
	  CMS_REGION_VERIFY,
	  INVALID,
	  { "outside the mask" } },
	{ "HOST_PAGEABLE, active",
	  0,
	  HOST,
	  false,
	  CMS_REGION_HOST_PAGEABLE,
	  CMS_REGION_HOST_PAGEABLE,
	  CMS_OK,
	  { NULL } },
	{ "HOST_PAGEABLE, paused",
	  0,
	  HOST,
	  true,
	  CMS_REGION_HOST_PAGEABLE,
	  CMS_REGION_HOST_PAGEABLE,
	  CMS_ERR_PAUSED,
	  { "region \"r\" is paused" } },
	{ "HOST_PAGEABLE, DISK",
	  0,
	  DISK,
	  false,
	  CMS_REGION_HOST_PAGEABLE,
	  CMS_REGION_HOST_PAGEABLE,
	  INVALID,
	  { "CMS_REGION_HOST_PAGEABLE needs CMS_POLICY_HOST", "region \"r\"" } },
	{ "VERIFY, active",
	  0,
	  HOST,
	  false,
	  CMS_REGION_VERIFY,
	  CMS_REGION_VERIFY,
	  CMS_OK,
	  { NULL } },
	{ "VERIFY, paused", 0, DISK, true, CMS_REGION_VERIFY, CMS_REGION_VERIFY, CMS_OK, { 0 } },
	{ "VERIFY, ZERO",
	  0,
	  ZERO,
	  false,
	  CMS_REGION_VERIFY,
	  CMS_REGION_VERIFY,
	  INVALID,
	  { "CMS_REGION_VERIFY needs CMS_POLICY_HOST or CMS_POLICY_DISK", "region \"r\"" } },
	{ "VERIFY cleared, ZERO", 0, ZERO, false, CMS_REGION_VERIFY, 0, CMS_OK, { NULL } },
};
#define NCHANGES ((int)(sizeof(changes) / sizeof(changes[0])))

START_TEST(change_rules)
{
	const struct change_case *c = &changes[_i];
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_context *ctx = t_ctx();
	cms_region *r;
	uint64_t p;

	o.flags = c->created;
	o.policy = c->policy;
	ck_ok(cms_region_create(ctx, "r", &o, &r));
	if (c->policy == DISK)
		ck_ok(cms_region_disk_dir_set(r, "/tmp"));
	ck_ok(cms_alloc(r, MiB, &p));
	if (c->paused)
		ck_ok(cms_region_pause(r, NULL, NULL));
	ck_status(cms_region_flags_set(r, c->mask, c->flags), c->want);
	if (c->want) {
		ck_words(c->name, c->words);
		ck_assert_uint_eq(t_info(r).flags, c->created); /* nothing changed */
	} else {
		ck_assert_uint_eq(t_info(r).flags, (c->created & ~c->mask) | c->flags);
	}
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* ---- a resume with CMS_RESUME_ASYNC, and cms_region_freeze ---- */

struct state_case {
	const char *name;
	uint64_t flags;
	uint32_t policy;
	cms_status async; /* a resume with CMS_RESUME_ASYNC */
	cms_status freeze;
	const char *words[3]; /* of the refusal */
};

static const struct state_case states[] = {
	{ "RELEASE_HOST",
	  CMS_REGION_RELEASE_HOST,
	  HOST,
	  INVALID,
	  CMS_OK,
	  { "region \"r\" gives host memory back", "CMS_RESUME_ASYNC" } },
	{ "SHAREABLE",
	  CMS_REGION_SHAREABLE,
	  HOST,
	  CMS_OK,
	  CMS_ERR_NOT_SUPPORTED,
	  { "region \"r\" is shareable", "cannot be frozen" } },
	{ "COALESCE", CMS_REGION_COALESCE, HOST, CMS_OK, CMS_OK, { NULL } },
	{ "CHUNKS", CMS_REGION_CHUNKS | CMS_REGION_COALESCE, HOST, CMS_OK, CMS_OK, { NULL } },
	{ "GUARD", CMS_REGION_GUARD, HOST, CMS_OK, CMS_OK, { NULL } },
	{ "HOST_PAGEABLE",
	  CMS_REGION_HOST_PAGEABLE,
	  HOST,
	  INVALID,
	  CMS_OK,
	  { "region \"r\" keeps pageable host backups", "CMS_RESUME_ASYNC" } },
	{ "PREPARE", CMS_REGION_PREPARE, HOST, CMS_OK, CMS_OK, { NULL } },
	{ "VERIFY",
	  CMS_REGION_VERIFY,
	  HOST,
	  INVALID,
	  CMS_OK,
	  { "region \"r\" verifies its content", "CMS_RESUME_ASYNC" } },
};
#define NSTATES ((int)(sizeof(states) / sizeof(states[0])))

START_TEST(state_rules)
{
	const struct state_case c = states[_i];
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_resume_options ro = CMS_RESUME_OPTIONS_INIT;
	cms_context *ctx = t_ctx();
	cms_region *r;
	uint64_t p;

	o.flags = c.flags;
	o.policy = c.policy;
	ck_ok(cms_region_create(ctx, "r", &o, &r));
	ck_ok(cms_alloc(r, MiB, &p));
	ck_ok(cms_region_pause(r, NULL, NULL));
	ro.flags = CMS_RESUME_ASYNC;
	ck_status(cms_region_resume(r, &ro, NULL), c.async);
	if (c.async) {
		ck_words(c.name, c.words);
		ck_assert_uint_eq(t_info(r).state, CMS_STATE_PAUSED);
		/* by tag too: the same check for every region of the call */
		ck_status(cms_resume(ctx, "r", &ro, NULL), c.async);
		ck_words(c.name, c.words);
		ck_ok(cms_region_resume(r, NULL, NULL)); /* synchronous: fine */
	}
	ck_status(cms_region_freeze(r), c.freeze);
	if (c.freeze)
		ck_words(c.name, c.words);
	ck_assert_int_eq(t_info(r).frozen, c.freeze == CMS_OK);
	ck_ok(cms_region_thaw(r)); /* thawing is always fine */
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* Two rules broken at once by an asynchronous resume: one status, the table's first row named
 * (since 1.4 the pageable backups; before the table the verification). */
START_TEST(async_two_rules)
{
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_resume_options ro = CMS_RESUME_OPTIONS_INIT;
	cms_context *ctx = t_ctx();
	cms_region *r;
	uint64_t p;

	o.flags = CMS_REGION_HOST_PAGEABLE | CMS_REGION_VERIFY;
	o.policy = HOST;
	ck_ok(cms_region_create(ctx, "r", &o, &r));
	ck_ok(cms_alloc(r, MiB, &p));
	ck_ok(cms_region_pause(r, NULL, NULL));
	ro.flags = CMS_RESUME_ASYNC;
	ck_status(cms_region_resume(r, &ro, NULL), INVALID);
	ck_words("two rules", (const char *const[]){ "keeps pageable host backups", NULL });
	ck_assert_uint_eq(t_info(r).state, CMS_STATE_PAUSED);
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

struct toggler {
	cms_region *r;
	pthread_barrier_t *go;
	int failed;
};

static void *toggle(void *arg)
{
	struct toggler *t = arg;
	int i;

	pthread_barrier_wait(t->go);
	for (i = 0; i < 500; i++)
		if (cms_region_flags_set(t->r, CMS_REGION_RELEASE_HOST | CMS_REGION_VERIFY,
					 (i & 1) ? CMS_REGION_RELEASE_HOST : CMS_REGION_VERIFY))
			t->failed++;
	return NULL;
}

/* cms_region_flags_set from two threads on one region (thread-safe by its contract): every
 * call succeeds and the rules read the region's flags under its lock (ThreadSanitizer found
 * them read without it, 2026-12-07). */
START_TEST(change_concurrent)
{
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_context *ctx = t_ctx();
	struct toggler t[2];
	pthread_barrier_t go;
	pthread_t th[2];
	cms_region *r;
	uint64_t p, f;
	int i;

	o.policy = HOST;
	ck_ok(cms_region_create(ctx, "r", &o, &r));
	ck_ok(cms_alloc(r, MiB, &p));
	ck_assert_int_eq(pthread_barrier_init(&go, NULL, 2), 0);
	for (i = 0; i < 2; i++) {
		t[i] = (struct toggler){ r, &go, 0 };
		ck_assert_int_eq(pthread_create(&th[i], NULL, toggle, &t[i]), 0);
	}
	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(pthread_join(th[i], NULL), 0);
		ck_assert_int_eq(t[i].failed, 0);
	}
	pthread_barrier_destroy(&go);
	f = t_info(r).flags & (CMS_REGION_RELEASE_HOST | CMS_REGION_VERIFY);
	ck_assert(f == CMS_REGION_RELEASE_HOST || f == CMS_REGION_VERIFY);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

static Suite *make(void)
{
	Suite *s = suite_create("features");
	TCase *tc = tcase_create("features");

	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, create_rules, 0, NCREATES);
	tcase_add_test(tc, fabric);
	tcase_add_loop_test(tc, change_rules, 0, NCHANGES);
	tcase_add_loop_test(tc, state_rules, 0, NSTATES);
	tcase_add_test(tc, async_two_rules);
	tcase_add_test(tc, change_concurrent);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return t_main(make, T_NEEDS_DEVICE);
}
