// SPDX-License-Identifier: MIT
/*
 * sim_kernel.c - the one kernel the simulation runs: the library's checksum
 * (CMS_REGION_VERIFY; its module in sim_ctx.c), by its C definition
 * (kernels/checksum.h) over the simulated device memory. Like the copies
 * (sim_copy.c) it runs when it is enqueued, in stream order, every range
 * checked first; a capturing stream cannot record it.
 */
#include "checksum.h"
#include "sim_internal.h"

/* Read lock held: the task table, each task's bytes and its sum slot, on device dev. */
static CUresult validate(const struct cms_checksum_task *t, uint64_t n, uint64_t sums, int dev)
{
	CUresult rc;
	uint64_t i;

	for (i = 0; i < n; i++) {
		if (t[i].slot > (UINT64_MAX - sums) / 8 - 1)
			return CUDA_ERROR_INVALID_VALUE;
		rc = t[i].len ? sim_check_access(t[i].ptr, t[i].len, 0, dev) : CUDA_SUCCESS;
		if (rc == CUDA_SUCCESS)
			rc = sim_check_access(sums + 8 * t[i].slot, 8, 1, dev);
		if (rc != CUDA_SUCCESS)
			return rc;
	}
	return CUDA_SUCCESS;
}

CUresult sim_checksum_launch(uint64_t tasks, uint64_t ntasks, uint64_t sums, CUstream stream)
{
	const struct cms_checksum_task *t = (const struct cms_checksum_task *)(uintptr_t)tasks;
	struct CUstream_st *s = NULL;
	CUresult rc;
	uint64_t i;
	int dev;

	rc = sim_current_device(&dev);
	if (rc != CUDA_SUCCESS)
		return rc;
	if (!ntasks || ntasks > UINT64_MAX / sizeof(*t) || (tasks & 7) || (sums & 7))
		return CUDA_ERROR_INVALID_VALUE;
	sim_rdlock();
	if (stream) {
		s = (struct CUstream_st *)sim_set_find(&sim.streams, (uint64_t)(uintptr_t)stream);
		rc = !s		? CUDA_ERROR_INVALID_HANDLE :
		     s->capture ? CUDA_ERROR_NOT_SUPPORTED :
				  CUDA_SUCCESS;
	}
	if (rc == CUDA_SUCCESS)
		rc = sim_check_access(tasks, ntasks * sizeof(*t), 0, dev);
	if (rc == CUDA_SUCCESS)
		rc = validate(t, ntasks, sums, dev);
	for (i = 0; rc == CUDA_SUCCESS && i < ntasks; i++)
		((uint64_t *)(uintptr_t)sums)[t[i].slot] +=
			cms_checksum_span((const void *)(uintptr_t)t[i].ptr, t[i].len, t[i].off);
	sim_unlock();
	return rc;
}
