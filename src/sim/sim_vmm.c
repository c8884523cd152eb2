// SPDX-License-Identifier: MIT
/*
 * sim_vmm.c - the virtual memory management API over host memory.
 *
 * A reservation is a PROT_NONE anonymous mapping. A physical allocation is a
 * memfd; mapping it replaces part of a reservation with a MAP_SHARED|MAP_FIXED
 * mapping of the memfd (PROT_NONE until cuMemSetAccess), and unmapping puts a
 * PROT_NONE anonymous mapping back so the reservation stays whole.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim_internal.h"

#define SIM_MEMFD_PREFIX "cmssim:dev"

static int is_aligned(uint64_t v)
{
	return (v & (sim.gran - 1)) == 0;
}

static int valid_device(int dev)
{
	return dev >= 0 && dev < sim.ndev;
}

static CUresult check_prop(const CUmemAllocationProp *prop)
{
	if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
	    prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
	    !valid_device(prop->location.id) ||
	    (prop->requestedHandleTypes & ~CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

/* Drops one reference (handle or mapping); frees the memory with the last one. Write lock. */
static void phys_put(struct sim_phys *phys)
{
	struct sim_phys **pp;

	if (--phys->refs)
		return;
	for (pp = &sim.phys_list; *pp != phys; pp = &(*pp)->next)
		;
	*pp = phys->next;
	sim.nphys--;
	sim.used[phys->device] -= phys->counted;
	close(phys->fd);
	free(phys);
}

/* Does [addr, addr + bytes) overlap a reservation? Read lock. */
int sim_in_reservation(uint64_t addr, uint64_t bytes)
{
	ssize_t i;

	if (!bytes)
		return 0;
	if (addr + bytes < addr)
		return 1;
	i = sim_set_floor(&sim.reservations, addr + bytes - 1);
	if (i < 0)
		return 0;
	return sim.reservations.v[i]->base + sim.reservations.v[i]->size > addr;
}

/*
 * Is every byte of [addr, addr + bytes) mapped with read (and write) access
 * for device dev (dev < 0: for any device)? Read lock.
 */
CUresult sim_check_access(uint64_t addr, uint64_t bytes, int need_write, int dev)
{
	unsigned char need =
		need_write ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_READ;
	uint64_t end = addr + bytes, cur = addr;
	struct sim_mapping *m;
	ssize_t i;

	if (!bytes)
		return CUDA_SUCCESS;
	if (end < addr)
		return CUDA_ERROR_INVALID_VALUE;
	m = (struct sim_mapping *)sim_set_containing(&sim.mappings, addr, &i);
	if (!m)
		return CUDA_ERROR_INVALID_VALUE;
	for (;;) {
		uint64_t mend = m->r.base + m->r.size;
		uint64_t stop = end < mend ? end : mend;
		uint64_t g, g_last = (stop - 1 - m->r.base) / sim.gran;

		for (g = (cur - m->r.base) / sim.gran; g <= g_last; g++) {
			unsigned char have =
				dev < 0 ? m->prot[g] : m->dev_prot[g * CMSSIM_MAX_DEVICES + dev];

			if ((have & need) != need)
				return CUDA_ERROR_INVALID_VALUE;
		}
		cur = stop;
		if (cur == end)
			return CUDA_SUCCESS;
		if ((size_t)++i >= sim.mappings.n || sim.mappings.v[i]->base != cur)
			return CUDA_ERROR_INVALID_VALUE;
		m = (struct sim_mapping *)sim.mappings.v[i];
	}
}

SIM_EXPORT CUresult cuMemGetAllocationGranularity(size_t *granularity,
						  const CUmemAllocationProp *prop, int option)
{
	CUresult rc;

	SIM_ENTER("cuMemGetAllocationGranularity");
	if (!granularity || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
			     option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
		return CUDA_ERROR_INVALID_VALUE;
	rc = check_prop(prop);
	if (rc != CUDA_SUCCESS)
		return rc;
	*granularity = (size_t)sim.gran;
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
					CUdeviceptr addr, unsigned long long flags)
{
	struct sim_reservation *res;
	uint64_t align, total, base;
	void *p = MAP_FAILED;
	CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;

	SIM_ENTER("cuMemAddressReserve");
	if (!ptr || !size || !is_aligned(size) || (alignment & (alignment - 1)) || flags)
		return CUDA_ERROR_INVALID_VALUE;
	align = alignment > sim.gran ? alignment : sim.gran;
	total = size + align;
	if (total < size)
		return CUDA_ERROR_OUT_OF_MEMORY;
	res = calloc(1, sizeof(*res));
	if (!res)
		return CUDA_ERROR_OUT_OF_MEMORY;

	/* honour an aligned address hint when that range is free */
	if (addr && !(addr & (align - 1))) {
		p = mmap((void *)(uintptr_t)addr, size, PROT_NONE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
		if (p != MAP_FAILED && (uintptr_t)p != addr) {
			munmap(p, size);
			p = MAP_FAILED;
		}
	}
	if (p != MAP_FAILED) {
		base = (uintptr_t)p;
	} else {
		p = mmap(NULL, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
			 0);
		if (p == MAP_FAILED)
			goto err_free;
		base = ((uintptr_t)p + align - 1) & ~(align - 1);
		if (base > (uintptr_t)p)
			munmap(p, base - (uintptr_t)p);
		if ((uintptr_t)p + total > base + size)
			munmap((void *)(uintptr_t)(base + size),
			       (uintptr_t)p + total - base - size);
	}
	res->r.base = base;
	res->r.size = size;
	sim_wrlock();
	if (sim_set_insert(&sim.reservations, &res->r)) {
		sim_unlock();
		goto err_unmap;
	}
	sim_unlock();
	*ptr = base;
	return CUDA_SUCCESS;

err_unmap:
	munmap((void *)(uintptr_t)base, size);
err_free:
	free(res);
	return rc;
}

SIM_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	struct sim_range *res;
	ssize_t i;

	SIM_ENTER("cuMemAddressFree");
	if (!size)
		return CUDA_ERROR_INVALID_VALUE;
	sim_wrlock();
	res = sim_set_find(&sim.reservations, ptr);
	if (!res || res->size != size)
		goto err_unlock;
	i = sim_set_floor(&sim.mappings, ptr + size - 1);
	if (i >= 0 && sim.mappings.v[i]->base + sim.mappings.v[i]->size > ptr)
		goto err_unlock; /* still mapped */
	sim_set_remove(&sim.reservations, ptr);
	munmap((void *)(uintptr_t)ptr, size);
	sim_unlock();
	free(res);
	return CUDA_SUCCESS;

err_unlock:
	sim_unlock();
	return CUDA_ERROR_INVALID_VALUE;
}

/* A memfd of @size bytes filled with the poison byte. Returns the fd or -1. No lock. */
static int new_backing(int device, uint64_t size)
{
	char name[32];
	void *p;
	int fd;

	snprintf(name, sizeof(name), SIM_MEMFD_PREFIX "%d", device);
	fd = memfd_create(name, MFD_CLOEXEC);
	if (fd < 0)
		return -1;
	if (ftruncate(fd, (off_t)size))
		goto err_close;
	if (sim.poison < 0)
		return fd;
	/* allocate first so that filling cannot SIGBUS */
	if (fallocate(fd, 0, 0, (off_t)size))
		goto err_close;
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		goto err_close;
	sim_device_set(p, sim.poison, size);
	munmap(p, size);
	return fd;

err_close:
	close(fd);
	return -1;
}

SIM_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
				const CUmemAllocationProp *prop, unsigned long long flags)
{
	struct sim_handle *h = NULL;
	struct sim_phys *phys = NULL;
	struct stat st;
	CUresult rc;
	int dev, fd;

	SIM_ENTER("cuMemCreate");
	if (!handle || !size || !is_aligned(size) || flags)
		return CUDA_ERROR_INVALID_VALUE;
	rc = check_prop(prop);
	if (rc != CUDA_SUCCESS)
		return rc;
	if (prop->allocFlags.gpuDirectRDMACapable && !sim.gdr)
		return CUDA_ERROR_INVALID_VALUE;
	dev = prop->location.id;

	/* charge the capacity first, fill the memory without the lock */
	sim_wrlock();
	if (sim.used[dev] + size > sim.capacity[dev] || sim.used[dev] + size < size) {
		sim_unlock();
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	sim.used[dev] += size;
	sim_unlock();

	rc = CUDA_ERROR_OUT_OF_MEMORY;
	h = calloc(1, sizeof(*h));
	phys = calloc(1, sizeof(*phys));
	if (!h || !phys)
		goto err_uncharge;
	fd = new_backing(dev, size);
	if (fd < 0)
		goto err_uncharge;
	if (fstat(fd, &st))
		goto err_close;
	phys->fd = fd;
	phys->device = dev;
	phys->size = size;
	phys->counted = size;
	phys->refs = 1;
	phys->st_dev = st.st_dev;
	phys->st_ino = st.st_ino;
	h->phys = phys;
	h->handle_types = prop->requestedHandleTypes;
	h->refs = 1;
	h->r.size = 1;

	sim_wrlock();
	h->r.base = sim.next_handle++;
	if (sim_set_insert(&sim.handles, &h->r)) {
		sim_unlock();
		goto err_close;
	}
	phys->next = sim.phys_list;
	sim.phys_list = phys;
	sim.nphys++;
	sim_unlock();
	*handle = h->r.base;
	return CUDA_SUCCESS;

err_close:
	close(fd);
err_uncharge:
	sim_wrlock();
	sim.used[dev] -= size;
	sim_unlock();
	free(phys);
	free(h);
	return rc;
}

SIM_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
	struct sim_handle *h;

	SIM_ENTER("cuMemRelease");
	sim_wrlock();
	h = (struct sim_handle *)sim_set_find(&sim.handles, handle);
	if (!h) {
		sim_unlock();
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (--h->refs) { /* retained (cuMemRetainAllocationHandle): one reference less */
		sim_unlock();
		return CUDA_SUCCESS;
	}
	sim_set_remove(&sim.handles, handle);
	phys_put(h->phys); /* memory stays while mapped */
	sim_unlock();
	free(h);
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
			     CUmemGenericAllocationHandle handle, unsigned long long flags)
{
	struct sim_mapping *m;
	struct sim_handle *h;
	struct sim_range *res;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;
	ssize_t i;
	void *p;

	SIM_ENTER("cuMemMap");
	if (!size || !is_aligned(ptr) || !is_aligned(size) || flags || ptr + size < ptr)
		return CUDA_ERROR_INVALID_VALUE;
	m = calloc(1, sizeof(*m));
	if (!m)
		return CUDA_ERROR_OUT_OF_MEMORY;
	m->prot = calloc(size / sim.gran, 1);
	m->dev_prot = calloc(size / sim.gran, CMSSIM_MAX_DEVICES);
	if (!m->prot || !m->dev_prot) {
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto err_free;
	}
	m->r.base = ptr;
	m->r.size = size;

	sim_wrlock();
	h = (struct sim_handle *)sim_set_find(&sim.handles, handle);
	if (!h)
		goto err_unlock;
	if (offset) {
		/* the H200 driver refuses any offset into a physical allocation */
		rc = CUDA_ERROR_NOT_SUPPORTED;
		goto err_unlock;
	}
	if (size > h->phys->size)
		goto err_unlock;
	res = sim_set_containing(&sim.reservations, ptr, NULL);
	if (!res || ptr + size > res->base + res->size)
		goto err_unlock;
	i = sim_set_floor(&sim.mappings, ptr + size - 1);
	if (i >= 0 && sim.mappings.v[i]->base + sim.mappings.v[i]->size > ptr)
		goto err_unlock; /* overlaps a mapping */
	if (size < h->phys->size) {
		/* nor a mapping shorter than the handle (H200, driver 580: guard pieces,
		 * 2026-12-01) */
		rc = CUDA_ERROR_NOT_SUPPORTED;
		goto err_unlock;
	}
	rc = CUDA_ERROR_OUT_OF_MEMORY;
	if (sim_set_insert(&sim.mappings, &m->r))
		goto err_unlock;
	p = mmap((void *)(uintptr_t)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, h->phys->fd, 0);
	if (p == MAP_FAILED)
		goto err_remove;
	m->phys = h->phys;
	m->phys->refs++;
	m->handle = handle;
	m->handle_types = h->handle_types;
	sim_unlock();
	return CUDA_SUCCESS;

err_remove:
	sim_set_remove(&sim.mappings, ptr);
err_unlock:
	sim_unlock();
err_free:
	free(m->dev_prot);
	free(m->prot);
	free(m);
	return rc;
}

/* The handle that mapped the mapping containing addr, one reference more: the same handle while
 * it lives, else made again with that value over the mapped memory (released while mapped). */
SIM_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
	struct sim_handle *h, *made;
	struct sim_mapping *m;

	SIM_ENTER("cuMemRetainAllocationHandle");
	if (!handle)
		return CUDA_ERROR_INVALID_VALUE;
	made = calloc(1, sizeof(*made));
	if (!made)
		return CUDA_ERROR_OUT_OF_MEMORY;
	sim_wrlock();
	m = (struct sim_mapping *)sim_set_containing(&sim.mappings, (uint64_t)(uintptr_t)addr,
						     NULL);
	if (!m) {
		sim_unlock();
		free(made);
		return CUDA_ERROR_INVALID_VALUE;
	}
	h = (struct sim_handle *)sim_set_find(&sim.handles, m->handle);
	if (h) {
		h->refs++;
	} else {
		made->r.base = m->handle;
		made->r.size = 1;
		made->phys = m->phys;
		made->handle_types = m->handle_types;
		made->refs = 1;
		if (sim_set_insert(&sim.handles, &made->r)) {
			sim_unlock();
			free(made);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		m->phys->refs++;
		made = NULL;
	}
	*handle = m->handle;
	sim_unlock();
	free(made);
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	struct sim_mapping *m;
	uint64_t end = ptr + size, cur;
	ssize_t first;
	size_t j, n;
	void *p;

	SIM_ENTER("cuMemUnmap");
	if (!size || !is_aligned(ptr) || !is_aligned(size) || end < ptr)
		return CUDA_ERROR_INVALID_VALUE;
	sim_wrlock();
	m = (struct sim_mapping *)sim_set_containing(&sim.mappings, ptr, &first);
	if (!m || m->r.base != ptr)
		goto err_unlock;
	/* whole adjacent mappings only: the H200 driver refuses a partial unmap */
	for (cur = ptr, j = (size_t)first; cur < end; j++) {
		if (j >= sim.mappings.n || sim.mappings.v[j]->base != cur)
			goto err_unlock;
		cur += sim.mappings.v[j]->size;
	}
	if (cur != end)
		goto err_unlock;
	p = mmap((void *)(uintptr_t)ptr, size, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
	if (p == MAP_FAILED) {
		sim_unlock();
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	n = j - (size_t)first;
	for (j = 0; j < n; j++) {
		m = (struct sim_mapping *)sim.mappings.v[(size_t)first + j];
		phys_put(m->phys);
		free(m->dev_prot);
		free(m->prot);
		free(m);
	}
	sim_set_remove_at(&sim.mappings, (size_t)first, n);
	sim_unlock();
	return CUDA_SUCCESS;

err_unlock:
	sim_unlock();
	return CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
				   size_t count)
{
	struct sim_mapping *m;
	uint64_t end = ptr + size, cur, g, run;
	int d, run_prot;
	ssize_t i;
	size_t k;

	SIM_ENTER("cuMemSetAccess");
	if (!size || !is_aligned(ptr) || !is_aligned(size) || end < ptr || !desc || !count)
		return CUDA_ERROR_INVALID_VALUE;
	for (k = 0; k < count; k++) {
		if (desc[k].location.type != CU_MEM_LOCATION_TYPE_DEVICE)
			return CUDA_ERROR_INVALID_VALUE;
		if (!valid_device(desc[k].location.id))
			return CUDA_ERROR_INVALID_DEVICE;
		if (desc[k].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
		    desc[k].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
		    desc[k].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
			return CUDA_ERROR_INVALID_VALUE;
	}

	sim_wrlock();
	/* the whole range must be mapped */
	m = (struct sim_mapping *)sim_set_containing(&sim.mappings, ptr, &i);
	if (!m)
		goto err_unlock;
	for (cur = m->r.base + m->r.size; cur < end; cur += sim.mappings.v[i]->size)
		if ((size_t)++i >= sim.mappings.n || sim.mappings.v[i]->base != cur)
			goto err_unlock;
	/* a device that is not the memory's own needs peer access to it */
	for (cur = ptr; cur < end; cur = m->r.base + m->r.size) {
		m = (struct sim_mapping *)sim_set_containing(&sim.mappings, cur, NULL);
		for (k = 0; k < count; k++)
			if (desc[k].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
			    desc[k].location.id != m->phys->device &&
			    !sim.peer[desc[k].location.id][m->phys->device]) {
				sim_unlock();
				return CUDA_ERROR_INVALID_DEVICE;
			}
	}
	/* one address space: the host sees the widest access any device has (runs of granules) */
	for (cur = ptr, run = ptr, run_prot = -1; cur <= end; cur += sim.gran) {
		unsigned char *dp, widest = CU_MEM_ACCESS_FLAGS_PROT_NONE;
		int prot = -1;

		if (cur < end) {
			m = (struct sim_mapping *)sim_set_containing(&sim.mappings, cur, NULL);
			g = (cur - m->r.base) / sim.gran;
			dp = &m->dev_prot[g * CMSSIM_MAX_DEVICES];
			for (k = 0; k < count; k++) /* devices not named keep their access */
				dp[desc[k].location.id] = (unsigned char)desc[k].flags;
			for (d = 0; d < CMSSIM_MAX_DEVICES; d++)
				widest |= dp[d];
			m->prot[g] = widest;
			prot = widest == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ?
				       PROT_READ | PROT_WRITE :
			       widest == CU_MEM_ACCESS_FLAGS_PROT_READ ? PROT_READ :
									 PROT_NONE;
		}
		if (prot == run_prot)
			continue;
		if (cur > run && mprotect((void *)(uintptr_t)run, cur - run, run_prot)) {
			sim_unlock();
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		run = cur;
		run_prot = prot;
	}
	sim_unlock();
	return CUDA_SUCCESS;

err_unlock:
	sim_unlock();
	return CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT int cmssim_get_access(uint64_t addr, int device)
{
	struct sim_mapping *m;
	int flags = -1;

	sim_setup();
	if (device < 0 || device >= sim.ndev)
		return -1;
	sim_rdlock();
	m = (struct sim_mapping *)sim_set_containing(&sim.mappings, addr, NULL);
	if (m)
		flags = m->dev_prot[(addr - m->r.base) / sim.gran * CMSSIM_MAX_DEVICES +
				    (uint64_t)device];
	sim_unlock();
	return flags;
}

SIM_EXPORT CUresult cuMemExportToShareableHandle(void *shareable,
						 CUmemGenericAllocationHandle handle,
						 int handle_type, unsigned long long flags)
{
	struct sim_handle *h;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;
	int fd;

	SIM_ENTER("cuMemExportToShareableHandle");
	if (!shareable || flags || handle_type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_INVALID_VALUE;
	sim_rdlock();
	h = (struct sim_handle *)sim_set_find(&sim.handles, handle);
	if (!h || !(h->handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
		goto out_unlock;
	fd = fcntl(h->phys->fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0) {
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto out_unlock;
	}
	*(int *)shareable = fd;
	rc = CUDA_SUCCESS;
out_unlock:
	sim_unlock();
	return rc;
}

/* Device encoded in a simulation memfd's name, or -1 if @fd is not one. */
static int backing_device(int fd)
{
	char path[64], target[128];
	ssize_t n;
	long dev;
	char *end;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, target, sizeof(target) - 1);
	if (n < 0)
		return 0; /* no /proc: cannot tell, assume device 0 */
	target[n] = '\0';
	if (strncmp(target, "/memfd:" SIM_MEMFD_PREFIX, strlen("/memfd:" SIM_MEMFD_PREFIX)))
		return -1;
	dev = strtol(target + strlen("/memfd:" SIM_MEMFD_PREFIX), &end, 10);
	if (end == target + strlen("/memfd:" SIM_MEMFD_PREFIX) || dev < 0 || dev >= sim.ndev)
		return -1;
	return (int)dev;
}

SIM_EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle,
						   void *os_handle, int handle_type)
{
	struct sim_phys *phys = NULL, *p;
	struct sim_handle *h;
	int fd = (int)(intptr_t)os_handle, nfd, dev;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;
	struct stat st;

	SIM_ENTER("cuMemImportFromShareableHandle");
	if (!handle || handle_type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || fd < 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
	    !is_aligned((uint64_t)st.st_size))
		return CUDA_ERROR_INVALID_VALUE;
	dev = backing_device(fd);
	if (dev < 0)
		return CUDA_ERROR_INVALID_VALUE;
	h = calloc(1, sizeof(*h));
	phys = calloc(1, sizeof(*phys));
	if (!h || !phys) {
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto err_free;
	}
	nfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (nfd < 0)
		goto err_free;
	phys->fd = nfd;
	phys->device = dev;
	phys->size = (uint64_t)st.st_size;
	phys->counted = 0; /* imported memory is charged where it was created */
	phys->refs = 1;
	phys->st_dev = st.st_dev;
	phys->st_ino = st.st_ino;
	h->handle_types = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	h->refs = 1;
	h->r.size = 1;

	sim_wrlock();
	h->r.base = sim.next_handle++;
	if (sim_set_insert(&sim.handles, &h->r)) {
		sim_unlock();
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto err_close;
	}
	/* memory of this process: share its physical allocation */
	for (p = sim.phys_list; p; p = p->next)
		if (p->st_dev == st.st_dev && p->st_ino == st.st_ino)
			break;
	if (p) {
		p->refs++;
		h->phys = p;
	} else {
		phys->next = sim.phys_list;
		sim.phys_list = phys;
		sim.nphys++;
		h->phys = phys;
		phys = NULL;
	}
	sim_unlock();
	if (phys) {
		close(nfd);
		free(phys);
	}
	*handle = h->r.base;
	return CUDA_SUCCESS;

err_close:
	close(nfd);
err_free:
	free(phys);
	free(h);
	return rc;
}

/* Only CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, of mapped device memory (other attributes:
 * CUDA_ERROR_NOT_SUPPORTED); an address in no mapping: CUDA_ERROR_INVALID_VALUE, as the driver
 * answers for an address it does not know. */
SIM_EXPORT CUresult cuPointerGetAttribute(void *data, int attribute, CUdeviceptr ptr)
{
	CUresult rc = CUDA_ERROR_INVALID_VALUE;
	ssize_t i;

	SIM_ENTER("cuPointerGetAttribute");
	if (!data)
		return CUDA_ERROR_INVALID_VALUE;
	if (attribute != CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)
		return CUDA_ERROR_NOT_SUPPORTED;
	sim_rdlock();
	i = sim_set_floor(&sim.mappings, ptr);
	if (i >= 0 && ptr - sim.mappings.v[i]->base < sim.mappings.v[i]->size) {
		*(CUdeviceptr *)data = sim.mappings.v[i]->base;
		rc = CUDA_SUCCESS;
	}
	sim_unlock();
	return rc;
}
