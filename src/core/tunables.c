/* SPDX-License-Identifier: MIT */
/*
 * tunables.c - the sizes and switches of one context (struct cms_tunables), set
 * once when its driver is loaded: the defaults suit the CUDA driver; the host
 * simulation gives its own (cmssim_tunables, small sizes so that small tests run
 * every pipeline), and CMS_TUNABLES (lab runs) changes either. Product code reads
 * ctx->tune and never asks which driver it runs on (docs/internals.md).
 */
#include <stdlib.h>
#include <string.h>

#include "core.h"

static const struct cms_tunables defaults = {
	.overlap_batch = { .bytes = 1ull << 30 },
	.host_group = { .bytes = 1ull << 30 },
	.host_stage = { .bytes = 16ull << 20 },
	.disk_stage = { .bytes = 64ull << 20 },
	.run_chunk = { .bytes = 64ull << 20 },
	.prep_slice = 32ull << 20,
};

uint64_t cms_tune_bytes(const struct cms_tune_size *s, size_t granularity)
{
	if (s->bytes || !s->div)
		return s->bytes;
	return (uint64_t)s->granules * granularity / s->div;
}

/* "N" bytes (suffix K, M or G), "Ng" N granules, "g/N" a granule's N-th part. */
static bool parse_size(const char *v, struct cms_tune_size *out)
{
	unsigned long long n;
	char *end;

	if (!strncmp(v, "g/", 2)) {
		n = strtoull(v + 2, &end, 10);
		if (*end || !n || n > UINT32_MAX)
			return false;
		*out = (struct cms_tune_size){ .granules = 1, .div = (uint32_t)n };
		return true;
	}
	n = strtoull(v, &end, 10);
	if (end == v)
		return false;
	if (!strcmp(end, "g")) {
		if (n > UINT32_MAX)
			return false;
		*out = (struct cms_tune_size){ .granules = (uint32_t)n, .div = 1 };
		return true;
	}
	if (*end && end[1])
		return false;
	switch (*end) {
	case 'G':
		n <<= 10; /* fallthrough */
	case 'M':
		n <<= 10; /* fallthrough */
	case 'K':
		n <<= 10; /* fallthrough */
	case '\0':
		break;
	default:
		return false;
	}
	*out = (struct cms_tune_size){ .bytes = n };
	return true;
}

static const struct {
	const char *key;
	size_t off;
} sizes[] = {
	{ "overlap_batch", offsetof(struct cms_tunables, overlap_batch) },
	{ "host_group", offsetof(struct cms_tunables, host_group) },
	{ "host_stage", offsetof(struct cms_tunables, host_stage) },
	{ "disk_stage", offsetof(struct cms_tunables, disk_stage) },
	{ "run_chunk", offsetof(struct cms_tunables, run_chunk) },
};

/* One token: a size ("key=value") or one of host.c's switches for making new buffers. */
static void apply(struct cms_tunables *t, const char *tok)
{
	const char *eq = strchr(tok, '=');
	unsigned long v;
	char *end;

	for (size_t i = 0; eq && i < sizeof(sizes) / sizeof(sizes[0]); i++)
		if (strlen(sizes[i].key) == (size_t)(eq - tok) &&
		    !strncmp(tok, sizes[i].key, (size_t)(eq - tok)))
			parse_size(eq + 1,
				   (struct cms_tune_size *)(void *)((char *)t + sizes[i].off));
	t->prep_hugetlb |= !strcmp(tok, "hugetlb");
	t->prep_nothp |= !strcmp(tok, "nothp");
	t->prep_noprefault |= !strcmp(tok, "noprefault");
	t->prep_lazyfree |= !strcmp(tok, "lazyfree");
	if (!strncmp(tok, "threads:", 8)) {
		v = strtoul(tok + 8, &end, 10);
		if (!*end && v >= 1 && v <= CMS_PREP_THREADS_MAX)
			t->prep_threads = (unsigned)v;
	}
	if (!strncmp(tok, "slice:", 6)) {
		v = strtoul(tok + 6, &end, 10);
		if (!*end && v >= 1 && v <= 1024)
			t->prep_slice = (size_t)v << 20;
	}
}

/* Applies the comma-separated tokens of text; unknown or malformed ones change nothing. */
static void apply_all(struct cms_tunables *t, const char *text)
{
	char buf[512], *tok, *save = NULL;

	if (!text || strlen(text) >= sizeof(buf))
		return;
	strcpy(buf, text);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		apply(t, tok);
}

void cms_tunables_load(struct cms_tunables *t, const struct cms_driver *drv)
{
	*t = defaults;
	if (drv->tunables)
		apply_all(t, drv->tunables());
	apply_all(t, secure_getenv("CMS_TUNABLES"));
}
