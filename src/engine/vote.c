/* SPDX-License-Identifier: MIT */
/*
 * vote.c - the agreement of the devices of one call. Each device's schedule
 * votes at fixed points (the pause after unmapping and after releasing, the
 * resume and the swap before committing); a device that failed leaves, and
 * counts as having voted "no" at every point it did not reach. Every device
 * learns at each point whether any failed, and rolls back if one did: the
 * call is all or nothing across devices.
 */
#include <string.h>

#include "engine_internal.h"

cms_status cms_xdev_init(struct cms_xdev *x, size_t n)
{
	memset(x, 0, sizeof(*x));
	x->n = n;
	if (pthread_mutex_init(&x->lock, NULL))
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot initialise a mutex");
	if (pthread_cond_init(&x->cond, NULL)) {
		pthread_mutex_destroy(&x->lock);
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot initialise a condition");
	}
	return CMS_OK;
}

void cms_xdev_fini(struct cms_xdev *x)
{
	pthread_cond_destroy(&x->cond);
	pthread_mutex_destroy(&x->lock);
}

cms_status cms_xdev_vote(struct cms_xvote *xv)
{
	struct cms_xdev *x;
	uint64_t t0;
	bool failed;
	unsigned p;

	if (!xv)
		return CMS_OK;
	x = xv->x;
	p = xv->voted++;
	if (p >= CMS_XDEV_POINTS) /* a schedule voting more often than the others could */
		return cms_set_error(CMS_ERR_INTERNAL, "agreement point %u of %d", p + 1,
				     CMS_XDEV_POINTS);
	t0 = cms_now_ns();
	pthread_mutex_lock(&x->lock);
	if (++x->arrived[p] == x->n)
		pthread_cond_broadcast(&x->cond);
	while (x->arrived[p] < x->n)
		pthread_cond_wait(&x->cond, &x->lock);
	/* A failure seen here may be a later one (after this point): rolling back is right then
	 * too. A device commits only after its last point, which every failure precedes. */
	failed = x->failed;
	pthread_mutex_unlock(&x->lock);
	xv->waited_ns += cms_now_ns() - t0;
	if (!failed)
		return CMS_OK;
	xv->aborted = true;
	return cms_set_error(CMS_XDEV_ABORTED, "rolled back: another device failed");
}

void cms_xdev_leave(struct cms_xvote *xv, bool failed)
{
	struct cms_xdev *x = xv->x;

	pthread_mutex_lock(&x->lock);
	if (failed)
		x->failed = true;
	for (; xv->voted < CMS_XDEV_POINTS; xv->voted++)
		x->arrived[xv->voted]++;
	pthread_cond_broadcast(&x->cond);
	pthread_mutex_unlock(&x->lock);
}

cms_status cms_xdev_check(struct cms_xvote *xv)
{
	bool failed;

	if (!xv)
		return CMS_OK;
	pthread_mutex_lock(&xv->x->lock);
	failed = xv->x->failed;
	if (failed) /* under the lock: both threads of a swap may see it */
		xv->aborted = true;
	pthread_mutex_unlock(&xv->x->lock);
	if (!failed)
		return CMS_OK;
	return cms_set_error(CMS_XDEV_ABORTED, "rolled back: another device failed");
}
