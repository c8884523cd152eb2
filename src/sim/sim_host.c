// SPDX-License-Identifier: MIT
/*
 * sim_host.c - page-locked host memory: cuMemHostRegister / cuMemHostUnregister.
 *
 * The simulation does not lock pages; it records the ranges so that it can
 * refuse what the H200 driver refuses: registering memory that overlaps a
 * registration, unregistering anything but a registered base, and an async
 * copy whose host range spans two registrations (or a registration and
 * unregistered memory).
 *
 * A child created by fork() starts with none (sim_host_fork_child): the parent's
 * page-locked memory is not locked in the child, and most of it (staging buffers,
 * host backups: MADV_DONTFORK) is not even there, so a buffer the child maps at such
 * an address must register as any new one (docs/simulation.md, fork()).
 */
#include <stdlib.h>

#include "sim_internal.h"

CUresult sim_check_host_registration(uint64_t host, uint64_t bytes)
{
	struct sim_range *r;
	ssize_t i;

	r = sim_set_containing(&sim.host_regs, host, NULL);
	if (r)
		return host + bytes <= r->base + r->size ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
	/* Starts outside every registration: it must not run into one. */
	i = sim_set_floor(&sim.host_regs, host + bytes - 1);
	if (i >= 0 && sim.host_regs.v[i]->base >= host)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemHostRegister(void *p, size_t bytes, unsigned int flags)
{
	uint64_t base = (uint64_t)(uintptr_t)p;
	struct sim_range *r;
	CUresult rc = CUDA_SUCCESS;
	int device;
	ssize_t i;

	SIM_ENTER("cuMemHostRegister");
	rc = sim_current_device(&device);
	if (rc != CUDA_SUCCESS)
		return rc;
	if (!p || !bytes || base + bytes < base || (flags & ~0x0fu))
		return CUDA_ERROR_INVALID_VALUE;
	r = malloc(sizeof(*r));
	if (!r)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r->base = base;
	r->size = bytes;
	sim_wrlock();
	i = sim_set_floor(&sim.host_regs, base + bytes - 1);
	if (sim_in_reservation(base, bytes)) { /* simulated device memory is not host memory */
		rc = CUDA_ERROR_INVALID_VALUE;
	} else if (i >= 0 && sim.host_regs.v[i]->base + sim.host_regs.v[i]->size > base) {
		rc = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
	} else if (sim_set_insert(&sim.host_regs, r)) {
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	} else {
		sim.host_reg_bytes += bytes;
		r = NULL;
	}
	sim_unlock();
	free(r);
	return rc;
}

SIM_EXPORT CUresult cuMemHostUnregister(void *p)
{
	uint64_t base = (uint64_t)(uintptr_t)p;
	struct sim_range *r;
	int device;
	CUresult rc;

	SIM_ENTER("cuMemHostUnregister");
	rc = sim_current_device(&device);
	if (rc != CUDA_SUCCESS)
		return rc;
	sim_wrlock();
	r = sim_set_find(&sim.host_regs, base);
	if (r) {
		sim_set_remove(&sim.host_regs, base);
		sim.host_reg_bytes -= r->size;
	}
	sim_unlock();
	if (!r)
		return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
	free(r);
	return CUDA_SUCCESS;
}

void sim_host_fork_child(void)
{
	size_t i;

	for (i = 0; i < sim.host_regs.n; i++)
		free(sim.host_regs.v[i]);
	if (sim.host_regs.n)
		sim_set_remove_at(&sim.host_regs, 0, sim.host_regs.n);
	sim.host_reg_bytes = 0;
}
