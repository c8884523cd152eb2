/* SPDX-License-Identifier: MIT */
/*
 * tunables.c - the sizes and switches of one context, set once when its driver
 * is loaded: the defaults suit the CUDA driver; the host simulation gives its
 * own (cmssim_tunables, small sizes so that small tests run every pipeline),
 * and CMS_TUNABLES (lab runs) changes either. Each layer's are in its part of
 * the context (vmm.h, store.h, engine.h: cms_ctx_*(ctx)->tune), loaded here,
 * the one table of their names and limits; product code reads them and never
 * asks which driver it runs on (docs/internals.md).
 *
 * Every size has a range and, where its buffers need it, an alignment (limits[]):
 * a token that is malformed, overflows, or falls outside them changes nothing and
 * is logged as a warning. A size relative to the granularity ("Ng", "g/N") is
 * known in bytes only on a device: cms_tune_bytes (vmm/tune.c) keeps it in range there. The
 * chunk size is whole granules there, at least two (else 0, no chunks): a size
 * that is not is rounded down when used, logged once per device as a warning.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

#define KiB (1ull << 10)
#define GiB (1ull << 30)
#define TiB (1ull << 40)
#define GRAN_MIN 4096u /* the smallest granularity: a page (the simulation's floor) */
#define TOKEN_MAX 128  /* bytes of the longest token read */

/* The sizes, each in the part of the layer that reads it. */
enum tune_key { OVERLAP_BATCH, HOST_GROUP, HOST_STAGE, DISK_STAGE, RUN_CHUNK, TUNE_SIZES };

static const struct cms_tune_limits limits[TUNE_SIZES] = {
	[OVERLAP_BATCH] = { "overlap_batch", 1, TiB, 1, false },
	[HOST_GROUP] = { "host_group", 4 * KiB, TiB, 1, false },
	[HOST_STAGE] = { "host_stage", CMS_TUNE_STAGE_ALIGN, GiB, CMS_TUNE_STAGE_ALIGN, false },
	[DISK_STAGE] = { "disk_stage", CMS_TUNE_STAGE_ALIGN, GiB, CMS_TUNE_STAGE_ALIGN, false },
	/* 0: no chunks; a chunk's bookkeeping has one slot per granule, and a chunk of one
	 * granule has no tail (vmm/run.c) */
	[RUN_CHUNK] = { "run_chunk", 0, 16 * GiB, GRAN_MIN, true },
};

static const uint64_t defaults[TUNE_SIZES] = {
	[OVERLAP_BATCH] = GiB,	    [HOST_GROUP] = GiB,	       [HOST_STAGE] = 16ull << 20,
	[DISK_STAGE] = 64ull << 20, [RUN_CHUNK] = 64ull << 20,
};

/* Size k of ctx, in the part of its layer. */
static struct cms_tune_size *size_of(cms_context *ctx, enum tune_key k)
{
	switch (k) {
	case OVERLAP_BATCH:
		return &cms_ctx_engine(ctx)->tune.overlap_batch;
	case HOST_GROUP:
		return &cms_ctx_store(ctx)->tune.host_group;
	case HOST_STAGE:
		return &cms_ctx_store(ctx)->tune.host_stage;
	case DISK_STAGE:
		return &cms_ctx_store(ctx)->tune.disk_stage;
	default:
		return &cms_ctx_vmm(ctx)->tune.run_chunk;
	}
}

void cms_tunables_check_device(cms_context *ctx, int32_t dev, size_t granularity)
{
	uint64_t given, used;
	int k;

	for (k = 0; k < TUNE_SIZES; k++) {
		given = cms_tune_given(size_of(ctx, (enum tune_key)k), granularity);
		used = cms_tune_bytes(size_of(ctx, (enum tune_key)k), granularity);
		if (given != used)
			cms_log(ctx, CMS_LOG_WARN,
				"device %d: %s of %llu bytes taken as %llu (whole granules of %zu "
				"bytes, at least two; 0: none)",
				dev, limits[k].key, (unsigned long long)given,
				(unsigned long long)used, granularity);
	}
}

/* A decimal number of digits only (no sign, no space) into *n; NULL when malformed or over
 * 64 bits, else the first byte after it. */
static const char *parse_u64(const char *v, uint64_t *n)
{
	*n = 0;
	if (*v < '0' || *v > '9')
		return NULL;
	for (; *v >= '0' && *v <= '9'; v++) {
		unsigned d = (unsigned)(*v - '0');

		if (*n > (UINT64_MAX - d) / 10)
			return NULL;
		*n = *n * 10 + d;
	}
	return v;
}

/* Bytes of suffix K, M or G (or none): the shift, or -1. */
static int suffix_shift(const char *end)
{
	if (!*end)
		return 0;
	if (end[1])
		return -1;
	switch (*end) {
	case 'K':
		return 10;
	case 'M':
		return 20;
	case 'G':
		return 30;
	default:
		return -1;
	}
}

/*
 * "N" bytes (suffix K, M or G), "Ng" N granules, "g/N" a granule's N-th part, into *out
 * when it is in key k's range. Returns NULL, or why not (why: at least 96 bytes).
 */
static const char *parse_size(enum tune_key k, const char *v, struct cms_tune_size *out, char *why,
			      size_t len)
{
	uint64_t n, min = limits[k].min, max = limits[k].max;
	const char *end;
	int shift;

	if (!strncmp(v, "g/", 2)) {
		end = parse_u64(v + 2, &n);
		if (!end || *end || !n || n > UINT32_MAX)
			return "not g/N with N of 1 to 4294967295";
		*out = (struct cms_tune_size){ .granules = 1,
					       .div = (uint32_t)n,
					       .lim = &limits[k] };
		return NULL;
	}
	end = parse_u64(v, &n);
	if (!end && *v == '-')
		return "negative";
	if (!end)
		return *v >= '0' && *v <= '9' ? "over 64 bits" : "not a size";
	if (!strcmp(end, "g")) {
		if (n > UINT32_MAX || n * GRAN_MIN > max) /* no granularity is below a page */
			snprintf(why, len, "above the maximum of %llu bytes",
				 (unsigned long long)max);
		else if (!n && min)
			snprintf(why, len, "below the minimum of %llu bytes",
				 (unsigned long long)min);
		else {
			*out = (struct cms_tune_size){ .granules = (uint32_t)n,
						       .div = 1,
						       .lim = &limits[k] };
			return NULL;
		}
		return why;
	}
	shift = suffix_shift(end);
	if (shift < 0)
		return "not a size (suffix K, M, G, or g for granules)";
	if (n > UINT64_MAX >> shift)
		return "over 64 bits";
	n <<= shift;
	if (n < min || n > max)
		snprintf(why, len, "outside %llu..%llu bytes", (unsigned long long)min,
			 (unsigned long long)max);
	else if (n % limits[k].align)
		snprintf(why, len, "not a multiple of %u bytes", limits[k].align);
	else {
		*out = (struct cms_tune_size){ .bytes = n, .lim = &limits[k] };
		return NULL;
	}
	return why;
}

/* The counts ("name:N"): the store's, each with its range (and shift: slice is in MiB). */
static const struct count {
	const char *name; /* with its colon */
	uint64_t max;
	unsigned shift;
	size_t at; /* offsetof(struct cms_store_tunables, ...) */
	bool wide; /* a size_t (else unsigned) */
} counts[] = {
	{ "threads:", CMS_PREP_THREADS_MAX, 0, offsetof(struct cms_store_tunables, prep_threads) },
	{ "slice:", 1024, 20, offsetof(struct cms_store_tunables, prep_slice), true },
	{ "disk_threads:", CMS_DISK_THREADS_MAX, 0,
	  offsetof(struct cms_store_tunables, disk_threads) },
};

/* Count c's value (1..max, in units of 1 << shift) from tok into t (why: at least 96 bytes). */
static const char *parse_count(struct cms_store_tunables *t, const char *tok, const struct count *c,
			       char *why, size_t len)
{
	const char *end;
	uint64_t v;

	end = parse_u64(tok + strlen(c->name), &v);
	if (!end || *end)
		return "not a number";
	if (v < 1 || v > c->max) {
		snprintf(why, len, "outside 1..%llu%s", (unsigned long long)c->max,
			 c->shift ? " (MiB)" : "");
		return why;
	}
	if (c->wide)
		*(size_t *)(void *)((char *)t + c->at) = (size_t)v << c->shift;
	else
		*(unsigned *)(void *)((char *)t + c->at) = (unsigned)v;
	return NULL;
}

/* One token: a size ("key=value") or one of the HOST policy's switches for making new buffers.
 * Returns NULL once applied, or why it changed nothing (why: at least 96 bytes). */
static const char *apply(cms_context *ctx, const char *tok, char *why, size_t len)
{
	struct cms_store_tunables *t = &cms_ctx_store(ctx)->tune;
	const char *eq = strchr(tok, '=');
	int k;

	for (k = 0; eq && k < TUNE_SIZES; k++)
		if (strlen(limits[k].key) == (size_t)(eq - tok) &&
		    !strncmp(tok, limits[k].key, (size_t)(eq - tok)))
			return parse_size((enum tune_key)k, eq + 1, size_of(ctx, (enum tune_key)k),
					  why, len);
	if (!strcmp(tok, "hugetlb"))
		t->prep_hugetlb = true;
	else if (!strcmp(tok, "nothp"))
		t->prep_nothp = true;
	else if (!strcmp(tok, "noprefault"))
		t->prep_noprefault = true;
	else if (!strcmp(tok, "lazyfree"))
		t->prep_lazyfree = true;
	else {
		for (k = 0; k < (int)(sizeof(counts) / sizeof(counts[0])); k++)
			if (!strncmp(tok, counts[k].name, strlen(counts[k].name)))
				return parse_count(t, tok, &counts[k], why, len);
		return "not a known size or switch";
	}
	return NULL;
}

/* Applies the comma-separated tokens of text (from src); a token that is unknown, malformed
 * or out of range changes nothing and is logged. */
static void apply_all(cms_context *ctx, const char *src, const char *text)
{
	char tok[TOKEN_MAX], why[96];
	const char *p, *msg;
	size_t n;

	for (p = text; p && *p; p += n + (p[n] == ',')) {
		n = strcspn(p, ",");
		if (!n)
			continue;
		if (n >= sizeof(tok)) {
			cms_log(ctx, CMS_LOG_WARN, "%s: a token of %zu bytes ignored (at most %zu)",
				src, n, sizeof(tok) - 1);
			continue;
		}
		memcpy(tok, p, n);
		tok[n] = 0;
		msg = apply(ctx, tok, why, sizeof(why));
		if (msg)
			cms_log(ctx, CMS_LOG_WARN, "%s: \"%s\" ignored: %s", src, tok, msg);
	}
}

void cms_tunables_load(cms_context *ctx)
{
	int k;

	memset(&cms_ctx_vmm(ctx)->tune, 0, sizeof(cms_ctx_vmm(ctx)->tune));
	memset(&cms_ctx_store(ctx)->tune, 0, sizeof(cms_ctx_store(ctx)->tune));
	memset(&cms_ctx_engine(ctx)->tune, 0, sizeof(cms_ctx_engine(ctx)->tune));
	for (k = 0; k < TUNE_SIZES; k++)
		*size_of(ctx, (enum tune_key)k) =
			(struct cms_tune_size){ .bytes = defaults[k], .lim = &limits[k] };
	cms_ctx_store(ctx)->tune.prep_slice = 32ull << 20;
	cms_ctx_store(ctx)->tune.disk_threads = 4;
	if (ctx->drv.tunables)
		apply_all(ctx, "the driver's tunables", ctx->drv.tunables());
	apply_all(ctx, "CMS_TUNABLES", secure_getenv("CMS_TUNABLES"));
}
