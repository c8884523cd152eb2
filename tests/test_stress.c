/* SPDX-License-Identifier: MIT */
/*
 * test_stress.c - many threads doing random alloc/free/pause/resume/info on
 * several tags for a fixed number of operations; invariants checked at the
 * end (bytes accounted, states consistent, nothing leaked). Run under TSan in
 * CI.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define THREADS 8
#define OPS 400
#define MAX_OWN 16
#define NTAGS 3

static const char *tags[NTAGS] = { "weights", "kv_cache", "graphs" };
static const uint32_t policies[NTAGS] = { CMS_POLICY_HOST, CMS_POLICY_DISCARD, CMS_POLICY_ZERO };

struct worker {
	cms_context *ctx;
	cms_region *regions[NTAGS];
	unsigned seed;
	uint64_t own[MAX_OWN];
	uint64_t own_size[MAX_OWN];
	int own_tag[MAX_OWN];
	int nown;
	unsigned ops[6];
	unsigned unexpected;
	char first_unexpected[256];
};

static void note(struct worker *w, const char *what, cms_status st)
{
	if (!w->unexpected++)
		snprintf(w->first_unexpected, sizeof(w->first_unexpected), "%s: %s: %s", what,
			 cms_status_name(st), cms_last_error());
}

static void *work(void *arg)
{
	struct worker *w = arg;
	int i;

	for (i = 0; i < OPS; i++) {
		int op = rand_r(&w->seed) % 6, t = rand_r(&w->seed) % NTAGS;
		cms_status st;

		w->ops[op]++;
		switch (op) {
		case 0: { /* alloc */
			uint64_t size = 1 + (uint64_t)(rand_r(&w->seed) % (3 * MiB)), p;

			if (w->nown == MAX_OWN)
				break;
			st = cms_alloc(w->regions[t], size, &p);
			if (st == CMS_OK) {
				w->own[w->nown] = p;
				w->own_size[w->nown] = size;
				w->own_tag[w->nown++] = t;
			} else if (st != CMS_ERR_PAUSED) {
				note(w, "alloc", st);
			}
			break;
		}
		case 1: /* free, in whatever state */
			if (w->nown) {
				int k = rand_r(&w->seed) % w->nown;

				st = cms_free(w->ctx, w->own[k]);
				if (st)
					note(w, "free", st);
				w->own[k] = w->own[--w->nown];
				w->own_size[k] = w->own_size[w->nown];
				w->own_tag[k] = w->own_tag[w->nown];
			}
			break;
		case 2:
			st = cms_pause(w->ctx, tags[t], NULL, NULL);
			if (st && st != CMS_ERR_ALREADY_PAUSED)
				note(w, "pause", st);
			break;
		case 3:
			st = cms_resume(w->ctx, tags[t], NULL, NULL);
			if (st && st != CMS_ERR_NOT_PAUSED)
				note(w, "resume", st);
			break;
		case 4: {
			cms_region_info ri = { .struct_size = sizeof(ri) };

			st = cms_region_info_get(w->regions[t], &ri);
			if (st || ri.state > CMS_STATE_PAUSED ||
			    (ri.state == CMS_STATE_ACTIVE &&
			     ri.backed_bytes != ri.physical_bytes) ||
			    (ri.state == CMS_STATE_PAUSED && ri.backed_bytes != 0))
				note(w, "info", st ? st : CMS_ERR_INTERNAL);
			break;
		}
		case 5:
			if (w->nown) {
				cms_pointer_info pi = { .struct_size = sizeof(pi) };
				int k = rand_r(&w->seed) % w->nown;

				st = cms_pointer_info_get(w->ctx, w->own[k] + w->own_size[k] - 1,
							  &pi);
				if (st || pi.base != w->own[k] || pi.size != w->own_size[k] ||
				    pi.region != w->regions[w->own_tag[k]])
					note(w, "pointer info", st ? st : CMS_ERR_INTERNAL);
			}
			break;
		}
	}
	return NULL;
}

START_TEST(threads_alloc_free_pause_resume)
{
	static struct worker w[THREADS];
	cms_context *ctx = t_ctx();
	cms_region *regions[NTAGS];
	pthread_t th[THREADS];
	uint64_t live[NTAGS] = { 0 }, bytes[NTAGS] = { 0 };
	unsigned total[6] = { 0 };
	int i, k, j;

	for (k = 0; k < NTAGS; k++)
		regions[k] = t_region(ctx, tags[k], 0, policies[k]);
	for (i = 0; i < THREADS; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].ctx = ctx;
		memcpy(w[i].regions, regions, sizeof(regions));
		w[i].seed = 1234u + (unsigned)i;
		ck_assert_int_eq(pthread_create(&th[i], NULL, work, &w[i]), 0);
	}
	for (i = 0; i < THREADS; i++)
		ck_assert_int_eq(pthread_join(th[i], NULL), 0);
	for (i = 0; i < THREADS; i++) {
		ck_assert_msg(w[i].unexpected == 0, "thread %d: %u unexpected, first: %s", i,
			      w[i].unexpected, w[i].first_unexpected);
		for (j = 0; j < w[i].nown; j++) {
			live[w[i].own_tag[j]]++;
			bytes[w[i].own_tag[j]] += w[i].own_size[j];
		}
		for (j = 0; j < 6; j++)
			total[j] += w[i].ops[j];
	}
	/* Bytes and counts accounted. */
	for (k = 0; k < NTAGS; k++) {
		cms_region_info ri = { .struct_size = sizeof(ri) };

		ck_ok(cms_region_info_get(regions[k], &ri));
		ck_assert_uint_eq(ri.allocations, live[k]);
		ck_assert_uint_eq(ri.logical_bytes, bytes[k]);
		if (ri.state == CMS_STATE_PAUSED)
			ck_ok(cms_region_resume(regions[k], NULL, NULL));
		ck_ok(cms_region_info_get(regions[k], &ri));
		ck_assert_uint_eq(ri.backed_bytes, ri.physical_bytes);
		ck_assert_uint_eq(ri.backup_bytes, 0);
	}
	for (i = 0; i < THREADS; i++)
		for (j = 0; j < w[i].nown; j++)
			ck_ok(cms_free(ctx, w[i].own[j]));
	for (k = 0; k < NTAGS; k++) {
		cms_region_info ri = { .struct_size = sizeof(ri) };

		ck_ok(cms_region_info_get(regions[k], &ri));
		ck_assert_uint_eq(ri.allocations, 0);
		ck_assert_uint_eq(ri.physical_bytes, 0);
	}
	if (t_is_sim()) {
		cmssim_counters c = t_counters();

		ck_assert_uint_eq(c.reservations, 0);
		ck_assert_uint_eq(c.handles, 0);
		ck_assert_uint_eq(c.mappings, 0);
		ck_assert_uint_eq(c.host_buffers, 0);
	}
	ck_ok(cms_context_destroy(ctx));
	printf("stress: %d threads x %d ops: alloc %u free %u pause %u resume %u info %u ptr %u\n",
	       THREADS, OPS, total[0], total[1], total[2], total[3], total[4], total[5]);
}
END_TEST

/* ---- cms_free racing cms_region_destroy (issue 15, finding 1) ---- */

#define RACE_ROUNDS 30
#define RACE_ALLOCS 32

struct racer {
	cms_context *ctx;
	uint64_t p[RACE_ALLOCS];
	pthread_barrier_t *go;
	unsigned unexpected;
	char first[256];
};

/* Frees every allocation while the main thread destroys their region: each free either
 * finishes first (CMS_OK) or finds the allocation gone with its region (CMS_ERR_NOT_FOUND). */
static void *race_free(void *arg)
{
	struct racer *r = arg;
	int i;

	pthread_barrier_wait(r->go);
	for (i = 0; i < RACE_ALLOCS; i++) {
		cms_status st = cms_free(r->ctx, r->p[i]);

		if (st != CMS_OK && st != CMS_ERR_NOT_FOUND && !r->unexpected++)
			snprintf(r->first, sizeof(r->first), "free: %s: %s", cms_status_name(st),
				 cms_last_error());
	}
	return NULL;
}

/* The header promises that calls by pointer are safe against a destroy: a free in flight
 * must finish before the destroy frees the region's address space (ASan saw a
 * heap-use-after-free in cms_arena_give) and must not leak what the allocation held. */
/* Runs RACE_ROUNDS rounds of: a context with one HOST region of RACE_ALLOCS allocations
 * (paused and resumed first in odd rounds when cycle_odd, so host buffers are held too),
 * racer started on another thread, the region destroyed under it. Asserts the racer saw
 * only what it expects and, on the simulation, that nothing was left behind. */
static void race_region_destroy(void *(*racer)(void *), bool cycle_odd)
{
	pthread_barrier_t go;
	struct racer r;
	pthread_t th;
	int round, i;

	ck_assert_int_eq(pthread_barrier_init(&go, NULL, 2), 0);
	for (round = 0; round < RACE_ROUNDS; round++) {
		cms_context *ctx = t_ctx();
		cms_region *reg = t_region(ctx, "race", 0, CMS_POLICY_HOST);

		memset(&r, 0, sizeof(r));
		r.ctx = ctx;
		r.go = &go;
		for (i = 0; i < RACE_ALLOCS; i++)
			ck_ok(cms_alloc(reg, 64 * 1024 + (uint64_t)i, &r.p[i]));
		if (cycle_odd && round % 2) { /* host buffers held too */
			ck_ok(cms_region_pause(reg, NULL, NULL));
			ck_ok(cms_region_resume(reg, NULL, NULL));
		}
		ck_assert_int_eq(pthread_create(&th, NULL, racer, &r), 0);
		pthread_barrier_wait(&go);
		ck_ok(cms_region_destroy(reg));
		ck_assert_int_eq(pthread_join(th, NULL), 0);
		ck_assert_msg(r.unexpected == 0, "round %d: %s", round, r.first);
		if (t_is_sim()) {
			cmssim_counters c = t_counters();

			ck_assert_msg(c.reservations == 0 && c.handles == 0 && c.mappings == 0 &&
					      c.host_buffers == 0,
				      "round %d: left %llu reservations, %llu handles, %llu "
				      "mappings, %llu host buffers",
				      round, (unsigned long long)c.reservations,
				      (unsigned long long)c.handles, (unsigned long long)c.mappings,
				      (unsigned long long)c.host_buffers);
		}
		ck_ok(cms_context_destroy(ctx));
	}
	pthread_barrier_destroy(&go);
}

START_TEST(free_races_region_destroy)
{
	race_region_destroy(race_free, true);
}
END_TEST

/* ---- calls that read what another thread changes (issue 34, item 7) ---- */

/* Frees every allocation at base + 1 while the main thread destroys their region: each call
 * names the allocation's base (CMS_ERR_NOT_BASE) until the destroy took it out of the
 * context, then finds nothing (CMS_ERR_NOT_FOUND); the loop ends when every one is gone. */
static void *race_free_not_base(void *arg)
{
	struct racer *r = arg;
	bool gone[RACE_ALLOCS] = { false };
	int i, left = RACE_ALLOCS;
	char want[64];

	pthread_barrier_wait(r->go);
	while (left)
		for (i = 0; i < RACE_ALLOCS; i++) {
			cms_status st;

			if (gone[i])
				continue;
			st = cms_free(r->ctx, r->p[i] + 1);
			snprintf(want, sizeof(want), "into the allocation at 0x%llx",
				 (unsigned long long)r->p[i]);
			if (st == CMS_ERR_NOT_FOUND) {
				gone[i] = true;
				left--;
			} else if ((st != CMS_ERR_NOT_BASE || !strstr(cms_last_error(), want)) &&
				   !r->unexpected++) {
				snprintf(r->first, sizeof(r->first), "free of 0x%llx: %s: %s",
					 (unsigned long long)(r->p[i] + 1), cms_status_name(st),
					 cms_last_error());
			}
		}
	return NULL;
}

/* cms_free's CMS_ERR_NOT_BASE message named the allocation's base read after the context
 * lock was released, while a region destroy could free the allocation (ThreadSanitizer:
 * a data race with free()). The message is made from what was read under the lock. */
START_TEST(not_base_free_races_region_destroy)
{
	race_region_destroy(race_free_not_base, false);
}
END_TEST

/* Several mappings: each freeze and thaw holds the region lock a while, so that flags_set
 * often waits for it and takes it between a thaw and the next freeze. */
#define FREEZE_ROUNDS 500
#define FREEZE_ALLOCS 8

struct freezer {
	cms_region *r;
	pthread_barrier_t *go;
	unsigned unexpected;
	char first[256];
};

static void freezer_note(struct freezer *f, const char *what, cms_status st)
{
	if (!f->unexpected++)
		snprintf(f->first, sizeof(f->first), "%s: %s: %s", what, cms_status_name(st),
			 cms_last_error());
}

static void *race_freeze(void *arg)
{
	struct freezer *f = arg;
	cms_status st;
	int i;

	pthread_barrier_wait(f->go);
	for (i = 0; i < FREEZE_ROUNDS; i++) {
		st = cms_region_freeze(f->r);
		if (st)
			freezer_note(f, "freeze", st);
		st = cms_region_thaw(f->r);
		if (st)
			freezer_note(f, "thaw", st);
	}
	return NULL;
}

/* cms_region_freeze read the region's flags (is it shareable?) without the region lock while
 * cms_region_flags_set wrote them under it (ThreadSanitizer: a data race). Every call
 * succeeds; at the end the region is thawed, with the flags the last flags_set gave it. */
START_TEST(freeze_races_flags_set)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "frozen", 0, CMS_POLICY_HOST);
	pthread_barrier_t go;
	struct freezer f = { .r = r, .go = &go };
	uint64_t p[FREEZE_ALLOCS];
	pthread_t th;
	int i;

	for (i = 0; i < FREEZE_ALLOCS; i++)
		ck_ok(cms_alloc(r, 64 * 1024, &p[i]));
	ck_assert_int_eq(pthread_barrier_init(&go, NULL, 2), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, race_freeze, &f), 0);
	pthread_barrier_wait(&go);
	for (i = 0; i < FREEZE_ROUNDS; i++)
		ck_ok(cms_region_flags_set(r, CMS_REGION_RELEASE_HOST,
					   i % 2 ? 0 : CMS_REGION_RELEASE_HOST));
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	pthread_barrier_destroy(&go);
	ck_assert_msg(f.unexpected == 0, "%u unexpected, first: %s", f.unexpected, f.first);
	ck_assert_uint_eq(t_info(r).frozen, 0);
	ck_assert_uint_eq(t_info(r).flags, 0); /* the last call (odd i) cleared the flag */
	for (i = 0; i < FREEZE_ALLOCS; i++)
		ck_ok(cms_free(ctx, p[i]));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("stress");
	TCase *tc = tcase_create("stress");
	TCase *tr = tcase_create("races"); /* calls reading what another thread changes */

	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, threads_alloc_free_pause_resume);
	tcase_add_test(tc, free_races_region_destroy);
	suite_add_tcase(s, tc);
	tcase_set_timeout(tr, 600);
	tcase_add_test(tr, not_base_free_races_region_destroy);
	tcase_add_test(tr, freeze_races_flags_set);
	suite_add_tcase(s, tr);
	return s;
}

int main(void)
{
	return t_main(suite, T_NEEDS_DEVICE);
}
