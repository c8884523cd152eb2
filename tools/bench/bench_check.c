/* SPDX-License-Identifier: MIT */
/*
 * bench_check.c - the checks the workloads of cms-bench run after every cycle
 * (bench_work.c, bench_swap.c): the HOST content pattern (64-bit words per
 * allocation and generation, written in full once, then checked and rewritten
 * in three sample windows per allocation, or checked in full with
 * --verify-full), and every allocation at its address in the expected state.
 */
#include <inttypes.h>
#include <stdio.h>

#include "bench.h"

#define MIB (1ull << 20)

/* ---- the pattern: 64-bit words, per allocation and generation ------------------ */

static uint64_t bench_seed(uint64_t alloc, uint64_t gen)
{
	uint64_t z = alloc * 0x9E3779B97F4A7C15ull + (gen + 1) * 0xD1B54A32D192ED03ull;

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static inline uint64_t bench_word(uint64_t seed, uint64_t byte_off)
{
	return seed ^ ((byte_off >> 3) * 0x9E3779B97F4A7C15ull);
}

/* The three sample windows of an allocation: start, middle, end. */
static void bench_windows(const struct bench_work *w, uint64_t off[3])
{
	off[0] = 0;
	off[1] = (w->size / 2 - w->window / 2) & ~7ull;
	off[2] = w->size - w->window;
}

/* Generation of the word at byte offset o: gen inside a window, 0 elsewhere. */
static uint64_t bench_gen_at(const struct bench_work *w, const uint64_t win[3], uint64_t o,
			     uint64_t gen)
{
	for (int k = 0; k < 3; k++)
		if (o >= win[k] && o < win[k] + w->window)
			return gen;
	return 0;
}

void bench_choose_window(const struct bench *b, struct bench_work *w)
{
	uint64_t budget = BENCH_SAMPLE_BUDGET / b->scale, win, small;

	if (budget < 4 * MIB)
		budget = 4 * MIB;
	win = w->size / 4 < BENCH_SAMPLE_MAX_WINDOW ? w->size / 4 : BENCH_SAMPLE_MAX_WINDOW;
	if (w->count * 3 * win > budget)
		win = budget / (3 * w->count);
	win &= ~(BENCH_SAMPLE_MIN_WINDOW - 1);
	small = w->size / 4 < BENCH_SAMPLE_MIN_WINDOW ? w->size / 4 : BENCH_SAMPLE_MIN_WINDOW;
	if (win < small)
		win = small;
	w->window = win & ~7ull;
	if (!w->window)
		w->window = 8;
}

/* Writes generation gen into [off, off + len) of allocation i (len a multiple of 8). */
static int bench_write(struct bench *b, uint64_t ptr, uint64_t i, uint64_t off, uint64_t len,
		       uint64_t gen)
{
	uint64_t seed = bench_seed(i, gen), done, n, k;

	for (done = 0; done < len; done += n) {
		n = len - done < BENCH_STAGE_BYTES ? len - done : BENCH_STAGE_BYTES;
		for (k = 0; k < n / 8; k++)
			b->stage[k] = bench_word(seed, off + done + k * 8);
		BENCH_CU(b, err, cuMemcpyHtoD, ptr + off + done, b->stage, n);
	}
	return 0;
err:
	return -1;
}

/* Checks [off, off + len) of allocation i against the pattern (windows at gen). */
static int bench_compare(struct bench *b, const struct bench_work *w, uint64_t ptr, uint64_t i,
			 uint64_t off, uint64_t len, uint64_t gen, unsigned int cycle)
{
	uint64_t seed0 = bench_seed(i, 0), seedg = bench_seed(i, gen), win[3], done, n, k;

	bench_windows(w, win);
	for (done = 0; done < len; done += n) {
		n = len - done < BENCH_STAGE_BYTES ? len - done : BENCH_STAGE_BYTES;
		BENCH_CU(b, err, cuMemcpyDtoH, b->stage, ptr + off + done, n);
		for (k = 0; k < n / 8; k++) {
			uint64_t o = off + done + k * 8;
			uint64_t g = bench_gen_at(w, win, o, gen);
			uint64_t want = bench_word(g ? seedg : seed0, o);

			if (b->stage[k] != want) {
				bench_fail(b,
					   "(%c) cycle %u: allocation %" PRIu64 " at 0x%" PRIx64
					   ": byte offset %" PRIu64 " reads 0x%016" PRIx64
					   ", expected 0x%016" PRIx64 " (generation %" PRIu64
					   "): content lost",
					   w->id, cycle + 1, i, ptr, o, b->stage[k], want, g);
				return -1;
			}
		}
	}
	return 0;
err:
	return -1;
}

int bench_host_fill(struct bench *b, const struct bench_work *w, const uint64_t *ptr,
		    uint64_t first)
{
	for (uint64_t i = 0; i < w->count; i++)
		if (bench_write(b, ptr[i], first + i, 0, w->size, 0))
			return -1;
	return 0;
}

/* Checks generation gen of allocation i (its sample windows, or all with --verify-full). */
static int bench_check_one(struct bench *b, const struct bench_work *w, uint64_t ptr, uint64_t i,
			   uint64_t gen, unsigned int cycle)
{
	uint64_t win[3];
	int k;

	if (b->verify_full)
		return bench_compare(b, w, ptr, i, 0, w->size, gen, cycle);
	bench_windows(w, win);
	for (k = 0; k < 3; k++)
		if (bench_compare(b, w, ptr, i, win[k], w->window, gen, cycle))
			return -1;
	return 0;
}

int bench_host_verify(struct bench *b, const struct bench_work *w, const uint64_t *ptr,
		      uint64_t first, uint64_t gen, unsigned int cycle)
{
	uint64_t win[3], i;
	int k;

	bench_windows(w, win);
	for (i = 0; i < w->count; i++) {
		if (bench_check_one(b, w, ptr[i], first + i, gen, cycle))
			return -1;
		for (k = 0; k < 3; k++)
			if (bench_write(b, ptr[i], first + i, win[k], w->window, gen + 1))
				return -1;
	}
	b->checks++;
	return 0;
}

int bench_host_check(struct bench *b, const struct bench_work *w, const uint64_t *ptr,
		     uint64_t first, uint64_t gen, unsigned int cycle)
{
	uint64_t i;

	for (i = 0; i < w->count; i++)
		if (bench_check_one(b, w, ptr[i], first + i, gen, cycle))
			return -1;
	b->checks++;
	return 0;
}

uint64_t bench_host_seed(uint64_t alloc, uint64_t gen)
{
	return bench_seed(alloc, gen);
}

uint64_t bench_host_expected(const struct bench_work *w, uint64_t alloc, uint64_t off, uint64_t gen)
{
	uint64_t win[3], g;

	bench_windows(w, win);
	g = bench_gen_at(w, win, off, gen);
	return bench_word(bench_seed(alloc, g ? gen : 0), off);
}

/* Every allocation at its address, with its size, in state. */
int bench_check_addresses(struct bench *b, struct bench_work *w, cms_context *ctx,
			  cms_region *region, const uint64_t *ptr, uint32_t state, const char *when,
			  unsigned int cycle)
{
	cms_pointer_info pi = { .struct_size = sizeof(pi) };
	cms_status st;
	uint64_t i;

	for (i = 0; i < w->count; i++) {
		st = cms_pointer_info_get(ctx, ptr[i], &pi);
		if (st)
			return bench_cms_fail(b, st, "cms_pointer_info_get");
		if (!bench_check(b,
				 pi.base == ptr[i] && pi.size == w->size && pi.offset == 0 &&
					 pi.region == region && pi.state == state,
				 "(%c) cycle %u, %s: allocation %" PRIu64 " at 0x%" PRIx64
				 " is now base 0x%" PRIx64 ", %" PRIu64 " bytes, state %u",
				 w->id, cycle + 1, when, i, ptr[i], pi.base, pi.size, pi.state))
			return -1;
	}
	return 0;
}
