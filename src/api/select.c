/* SPDX-License-Identifier: MIT */
/*
 * select.c - the regions of a call by tag, referenced and locked in creation
 * order (the context's list order): two calls over overlapping sets of
 * regions always take their locks in the same order.
 */
#include <stdlib.h>
#include <string.h>

#include "api.h"

static bool wanted(const struct cms_region *r, const char *tag1, const char *tag2)
{
	return (!tag1 && !tag2) || (tag1 && !strcmp(r->tag, tag1)) ||
	       (tag2 && !strcmp(r->tag, tag2));
}

cms_status cms_select_lock(cms_context *ctx, const char *tag1, const char *tag2,
			   struct cms_selection *s)
{
	struct cms_region *r;
	size_t i;

	memset(s, 0, sizeof(*s));
	s->ctx = ctx;
	pthread_mutex_lock(&ctx->lock);
	for (r = ctx->regions; r; r = r->next) {
		s->n += wanted(r, tag1, tag2);
		s->n1 += tag1 && !strcmp(r->tag, tag1);
	}
	if (s->n) {
		/* Twice the room: the callers pick their working sets into the second half. */
		s->v = malloc(2 * s->n * sizeof(*s->v));
		if (!s->v) {
			pthread_mutex_unlock(&ctx->lock);
			s->n = 0;
			return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY,
					     "cannot allocate a region list");
		}
		s->n = 0;
		for (r = ctx->regions; r; r = r->next)
			if (wanted(r, tag1, tag2)) {
				r->refs++;
				s->v[s->n++] = r;
			}
	}
	pthread_mutex_unlock(&ctx->lock);
	for (i = 0; i < s->n; i++)
		pthread_mutex_lock(&s->v[i]->lock);
	return CMS_OK;
}

void cms_select_unlock(struct cms_selection *s)
{
	size_t i;

	for (i = s->n; i-- > 0;)
		pthread_mutex_unlock(&s->v[i]->lock);
	if (s->n) {
		pthread_mutex_lock(&s->ctx->lock);
		for (i = 0; i < s->n; i++)
			cms_region_unref_locked(s->v[i]);
		pthread_mutex_unlock(&s->ctx->lock);
	}
	free(s->v);
	s->v = NULL;
	s->n = 0;
}

void cms_result_out(void *theirs, const void *ours, size_t ours_size, size_t ver0, uint32_t devices,
		    cms_status st)
{
	size_t tsize;

	memcpy(&tsize, theirs, sizeof(tsize));
	if (!st || (devices && tsize > ver0))
		cms_copy_out(theirs, ours, ours_size);
}
