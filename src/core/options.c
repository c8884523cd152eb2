/* SPDX-License-Identifier: MIT */
/* options.c - sized option structs (struct_size first) and tag validation. */
#include <string.h>

#include "core_internal.h"
#include "cumemsaver_ipc.h"

/* No option or info struct of ours will ever be this large: a guard against garbage sizes. */
#define CMS_STRUCT_SIZE_MAX 4096u

/* The end of field in type, as libbpf's and the kernel's offsetofend. */
#define CMS_OFFSETOFEND(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))
/* The size of type when last was its last field: that end rounded up to type's alignment. */
#define CMS_SIZE_THROUGH(type, last) \
	((CMS_OFFSETOFEND(type, last) + _Alignof(type) - 1) / _Alignof(type) * _Alignof(type))

#define CMS_SIZED_DEFINE(type, last, lp64) \
	const struct cms_sized cms_sized_##type = { #type, CMS_SIZE_THROUGH(type, last) };
CMS_SIZED_STRUCTS(CMS_SIZED_DEFINE)

#if UINTPTR_MAX == \
	UINT64_MAX /* LP64: the sizes the headers of each struct's first release declared */
#define CMS_SIZED_LP64(type, last, lp64) \
	_Static_assert(CMS_SIZE_THROUGH(type, last) == (lp64), #type ": first-release size");
CMS_SIZED_STRUCTS(CMS_SIZED_LP64)
#endif

static cms_status check_size(size_t theirs, const struct cms_sized *s)
{
	if (theirs < s->ver0 || theirs > CMS_STRUCT_SIZE_MAX)
		return cms_set_error(CMS_ERR_STRUCT_SIZE,
				     "%s: struct_size %zu is out of range (%zu..%u)", s->name,
				     theirs, s->ver0, CMS_STRUCT_SIZE_MAX);
	return CMS_OK;
}

cms_status cms_copy_in(void *ours, size_t ours_size, const void *theirs, const struct cms_sized *s)
{
	const unsigned char *t = theirs;
	size_t tsize, i;
	cms_status st;

	memcpy(&tsize, theirs, sizeof(tsize));
	st = check_size(tsize, s);
	if (st)
		return st;
	for (i = ours_size; i < tsize; i++)
		if (t[i])
			return cms_set_error(CMS_ERR_STRUCT_SIZE,
					     "%s: byte %zu is non-zero but unknown to this version "
					     "(struct_size %zu, ours %zu)",
					     s->name, i, tsize, ours_size);
	memset(ours, 0, ours_size);
	memcpy(ours, theirs, tsize < ours_size ? tsize : ours_size);
	memcpy(ours, &ours_size, sizeof(size_t));
	return CMS_OK;
}

cms_status cms_check_out(const void *theirs, const struct cms_sized *s)
{
	size_t tsize;

	memcpy(&tsize, theirs, sizeof(tsize));
	return check_size(tsize, s);
}

void cms_copy_out(void *theirs, const void *ours, size_t ours_size)
{
	unsigned char *t = theirs;
	size_t tsize;

	memcpy(&tsize, theirs, sizeof(tsize));
	if (tsize > ours_size)
		memset(t + ours_size, 0, tsize - ours_size);
	memcpy(t + sizeof(size_t), (const unsigned char *)ours + sizeof(size_t),
	       (tsize < ours_size ? tsize : ours_size) - sizeof(size_t));
}

cms_status cms_check_tag(const char *tag)
{
	size_t n, i;

	if (!tag)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "tag is NULL");
	n = strnlen(tag, CMS_TAG_MAX + 1);
	if (n == 0)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "tag is empty");
	if (n > CMS_TAG_MAX)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT,
				     "tag is longer than %d bytes (or not NUL-terminated)",
				     CMS_TAG_MAX);
	for (i = 0; i < n; i++)
		if ((unsigned char)tag[i] < 0x20 || tag[i] == 0x7f)
			return cms_set_error(CMS_ERR_INVALID_ARGUMENT,
					     "tag has a control character at byte %zu", i);
	return CMS_OK;
}

CMS_API cms_status cms_context_options_init(cms_context_options *opts)
{
	static const cms_context_options init = CMS_CONTEXT_OPTIONS_INIT;

	if (!opts)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "opts is NULL");
	*opts = init;
	return CMS_OK;
}

CMS_API cms_status cms_region_options_init(cms_region_options *opts)
{
	static const cms_region_options init = CMS_REGION_OPTIONS_INIT;

	if (!opts)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "opts is NULL");
	*opts = init;
	return CMS_OK;
}

CMS_API cms_status cms_pause_options_init(cms_pause_options *opts)
{
	static const cms_pause_options init = CMS_PAUSE_OPTIONS_INIT;

	if (!opts)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "opts is NULL");
	*opts = init;
	return CMS_OK;
}

CMS_API cms_status cms_resume_options_init(cms_resume_options *opts)
{
	static const cms_resume_options init = CMS_RESUME_OPTIONS_INIT;

	if (!opts)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "opts is NULL");
	*opts = init;
	return CMS_OK;
}
