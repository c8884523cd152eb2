/* SPDX-License-Identifier: MIT */
/*
 * checksum.h - the content checksum of CMS_REGION_VERIFY, defined once for
 * the GPU kernel (checksum_kernel.c, compiled to PTX), the library's host
 * code and the host simulation (its stand-in for the kernel), so that all
 * three compute the same number. No includes but stdint.h: it also compiles
 * for the NVPTX target, freestanding.
 *
 * The checksum of a span of len bytes that starts at byte offset off of an
 * allocation is the sum, modulo 2^64, over its 8-byte words w_i (little
 * endian; the last one zero-padded when len is not a multiple of 8) of
 *
 *     cms_checksum_word(w_i, off + 8 * i)
 *
 * a bijective 64-bit mix of the word and its offset: equal words at
 * different offsets count differently, so moved or swapped content is seen,
 * and the checksum of an allocation is the sum of those of its spans in any
 * order or grouping whose cuts fall on offsets that are multiples of 8 from
 * each span's start (the kernel splits spans into tasks at such cuts).
 */
#ifndef CMS_KERNELS_CHECKSUM_H
#define CMS_KERNELS_CHECKSUM_H

#include <stdint.h>

/* Odd constant (2^64 / golden ratio) spreading offsets over all 64 bits. */
#define CMS_CHECKSUM_OFFSET_MUL 0x9e3779b97f4a7c15ull

/* The kernel's entry point and launch shape (checksum_kernel.c). */
#define CMS_CHECKSUM_ENTRY "cms_checksum_tasks"
#define CMS_CHECKSUM_BLOCK 256u		   /* threads per block */
#define CMS_CHECKSUM_TASK_BYTES (1u << 20) /* the most bytes of one task (a multiple of 8) */

/*
 * One task of a launch: len bytes at device address ptr, which are bytes
 * [off, off + len) of an allocation; their checksum is added to sums[slot].
 * 32 bytes, the same layout on the host and on the device.
 */
struct cms_checksum_task {
	uint64_t ptr;
	uint64_t len;
	uint64_t off;
	uint64_t slot;
};

/* The finalizer of SplitMix64 (Steele, Lea, Flood 2014): a bijection of 64-bit words. */
static inline uint64_t cms_checksum_mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

/* The term of the word w whose first byte is at byte offset off of its allocation. */
static inline uint64_t cms_checksum_word(uint64_t w, uint64_t off)
{
	return cms_checksum_mix(w ^ (off * CMS_CHECKSUM_OFFSET_MUL));
}

/* The little-endian word of the n (1..8) bytes at p, zero-padded. */
static inline uint64_t cms_checksum_load(const unsigned char *p, unsigned n)
{
	uint64_t w = 0;
	unsigned k;

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	if (n == 8) { /* one unaligned load (a host's byte loop is ten times slower) */
		__builtin_memcpy(&w, p, 8);
		return w;
	}
#endif
	for (k = 0; k < n; k++)
		w |= (uint64_t)p[k] << (8 * k);
	return w;
}

/* The checksum of the len bytes at p, bytes [off, off + len) of their allocation (host). */
static inline uint64_t cms_checksum_span(const void *p, uint64_t len, uint64_t off)
{
	const unsigned char *b = (const unsigned char *)p;
	uint64_t sum = 0, i;

	for (i = 0; i + 8 <= len; i += 8)
		sum += cms_checksum_word(cms_checksum_load(b + i, 8), off + i);
	if (i < len)
		sum += cms_checksum_word(cms_checksum_load(b + i, (unsigned)(len - i)), off + i);
	return sum;
}

#endif /* CMS_KERNELS_CHECKSUM_H */
