/* SPDX-License-Identifier: MIT */
/*
 * checksum_kernel.c - the GPU kernel of CMS_REGION_VERIFY, in C for the NVPTX
 * target (not built with the library: gen_checksum_ptx.sh compiles it to the
 * PTX of checksum_ptx.h, which the library JITs with cuModuleLoadData).
 *
 * cms_checksum_tasks(tasks, ntasks, sums): block b takes tasks b, b + grid,
 * ...; its CMS_CHECKSUM_BLOCK threads sum the terms of the task's words
 * (checksum.h), four independent loads in flight per thread, reduce the sums
 * in shared memory and thread 0 adds the block's sum to sums[task.slot] with
 * one 64-bit atomic add. A task whose ptr is not 8-byte aligned is read byte
 * by byte (cms_range_discard declarations may cut spans anywhere).
 */
#include "checksum.h"

#define SHARED __attribute__((address_space(3)))

static SHARED uint64_t cms_checksum_part[CMS_CHECKSUM_BLOCK];

#define GLOBAL __attribute__((address_space(1)))

/* The sum of the terms of words tid, tid + BLOCK, ... of the task: 8-byte loads from global
 * memory, four in flight. */
static uint64_t part_aligned(const struct cms_checksum_task *t, uint64_t nwords, unsigned tid)
{
	const GLOBAL uint64_t *w = (const GLOBAL uint64_t *)(uintptr_t)t->ptr;
	uint64_t i, s0 = 0, s1 = 0, s2 = 0, s3 = 0;

	for (i = tid; i + 3 * CMS_CHECKSUM_BLOCK < nwords; i += 4 * CMS_CHECKSUM_BLOCK) {
		uint64_t w0 = w[i], w1 = w[i + CMS_CHECKSUM_BLOCK];
		uint64_t w2 = w[i + 2 * CMS_CHECKSUM_BLOCK], w3 = w[i + 3 * CMS_CHECKSUM_BLOCK];

		s0 += cms_checksum_word(w0, t->off + 8 * i);
		s1 += cms_checksum_word(w1, t->off + 8 * (i + CMS_CHECKSUM_BLOCK));
		s2 += cms_checksum_word(w2, t->off + 8 * (i + 2 * CMS_CHECKSUM_BLOCK));
		s3 += cms_checksum_word(w3, t->off + 8 * (i + 3 * CMS_CHECKSUM_BLOCK));
	}
	for (; i < nwords; i += CMS_CHECKSUM_BLOCK)
		s0 += cms_checksum_word(w[i], t->off + 8 * i);
	return s0 + s1 + s2 + s3;
}

/* The same for a task whose ptr is not 8-byte aligned: byte loads. */
static uint64_t part_bytes(const struct cms_checksum_task *t, uint64_t nwords, unsigned tid)
{
	const unsigned char *p = (const unsigned char *)(uintptr_t)t->ptr;
	uint64_t i, s = 0;

	for (i = tid; i < nwords; i += CMS_CHECKSUM_BLOCK)
		s += cms_checksum_word(cms_checksum_load(p + 8 * i, 8), t->off + 8 * i);
	return s;
}

static uint64_t task_part(const struct cms_checksum_task *t, unsigned tid)
{
	uint64_t nwords = t->len / 8;
	uint64_t s = (t->ptr & 7) ? part_bytes(t, nwords, tid) : part_aligned(t, nwords, tid);

	if (tid == 0 && (t->len & 7)) /* the zero-padded last word */
		s += cms_checksum_word(
			cms_checksum_load((const unsigned char *)(uintptr_t)t->ptr + 8 * nwords,
					  (unsigned)(t->len & 7)),
			t->off + 8 * nwords);
	return s;
}

void cms_checksum_tasks(const struct cms_checksum_task *tasks, uint64_t ntasks, uint64_t *sums)
{
	unsigned tid = __nvvm_read_ptx_sreg_tid_x();
	uint64_t b;
	unsigned k;

	for (b = __nvvm_read_ptx_sreg_ctaid_x(); b < ntasks; b += __nvvm_read_ptx_sreg_nctaid_x()) {
		struct cms_checksum_task t = tasks[b];

		cms_checksum_part[tid] = task_part(&t, tid);
		__syncthreads();
		for (k = CMS_CHECKSUM_BLOCK / 2; k; k /= 2) {
			if (tid < k)
				cms_checksum_part[tid] += cms_checksum_part[tid + k];
			__syncthreads();
		}
		if (tid == 0)
			__nvvm_atom_add_gen_ll((long long *)&sums[t.slot],
					       (long long)cms_checksum_part[0]);
		__syncthreads(); /* the part array is free for the next task */
	}
}
