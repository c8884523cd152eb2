/* SPDX-License-Identifier: MIT */
/*
 * conformance.h - what the conformance programs of every release share
 * (conformance_1_0.c, conformance_1_1.c, ...). conformance.c is compiled into
 * each program against that program's release header (-I abi/<release>), so it
 * uses only what release 1.0 declares.
 */
#ifndef CMS_CONFORMANCE_H
#define CMS_CONFORMANCE_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include <cumemsaver.h>

#define MiB (1024ull * 1024ull)
/* The library's guard against garbage sizes: no struct of any release reaches it. */
#define STRUCT_MAX 4096
#define CANARY 0xA5

#define ck_status(expr, want)                                                                 \
	do {                                                                                  \
		cms_status st_ = (expr);                                                      \
		ck_assert_msg(st_ == (want), "%s -> %s (%s), want %s", #expr,                 \
			      cms_status_name(st_), cms_last_error(), cms_status_name(want)); \
	} while (0)
#define ck_ok(expr) ck_status(expr, CMS_OK)

/* Whether CMS_DRIVER_LIBRARY is the host simulation (device pointers are host addresses). */
int on_sim(void);
/* Writes (reads back) the pattern of seed over n bytes at a device pointer (simulation). */
void fill(uint64_t ptr, size_t n, unsigned char seed);
int holds(uint64_t ptr, size_t n, unsigned char seed);
int all_zero(uint64_t ptr, size_t n);
/* Bytes [from, STRUCT_MAX) of a STRUCT_MAX-byte buffer all equal v. */
int tail_is(const void *buf, size_t from, unsigned char v);
/* A zeroed struct of size bytes (struct_size set) at the start of a STRUCT_MAX-byte buffer,
 * followed by canary bytes the library must not touch. */
void canary(void *buf, size_t size);
cms_context *new_ctx(void);
cms_region *new_region(cms_context *ctx, const char *tag, uint32_t policy, uint64_t flags);
/* Runs make_suite()'s suite in forked tests and returns main's exit status: 77 (skipped) when no
 * device answers behind CMS_DRIVER_LIBRARY, 1 when a test failed. */
int conformance_main(const char *name, Suite *(*make_suite)(void));

#endif /* CMS_CONFORMANCE_H */
