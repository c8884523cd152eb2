// SPDX-License-Identifier: MIT
/*
 * sim_ctx.c - initialisation, devices, primary contexts, the thread-local
 * context stack, cuMemGetInfo, modules and cuGetProcAddress.
 */
#include <string.h>

#include "checksum.h"
#include "sim_internal.h"

#define SIM_DRIVER_VERSION 13000
#define SIM_CTX_STACK_DEPTH 64

static _Thread_local struct CUctx_st *ctx_stack[SIM_CTX_STACK_DEPTH];
static _Thread_local int ctx_depth;

static int valid_device(CUdevice dev)
{
	return dev >= 0 && dev < sim.ndev;
}

/* Device of the calling thread's current context; the context must be retained. */
CUresult sim_current_device(int *device)
{
	struct CUctx_st *ctx;

	if (!ctx_depth)
		return CUDA_ERROR_INVALID_CONTEXT;
	ctx = ctx_stack[ctx_depth - 1];
	if (!__atomic_load_n(&sim.ctx_refs[ctx->device], __ATOMIC_ACQUIRE))
		return CUDA_ERROR_INVALID_CONTEXT;
	*device = ctx->device;
	return CUDA_SUCCESS;
}

int sim_thread_device(void)
{
	return ctx_depth ? ctx_stack[ctx_depth - 1]->device : -1;
}

SIM_EXPORT CUresult cuInit(unsigned int flags)
{
	CUresult rc = sim_enter("cuInit", 0);

	if (rc != CUDA_SUCCESS)
		return rc;
	if (flags || sim_config_error())
		return CUDA_ERROR_INVALID_VALUE;
	if (!sim.ndev)
		return CUDA_ERROR_NO_DEVICE;
	__atomic_store_n(&sim.initialized, 1, __ATOMIC_RELEASE);
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDriverGetVersion(int *version)
{
	if (!version)
		return CUDA_ERROR_INVALID_VALUE;
	*version = SIM_DRIVER_VERSION;
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGetErrorName(CUresult error, const char **str)
{
	if (!str)
		return CUDA_ERROR_INVALID_VALUE;
	if (sim_error_lookup(error, str, NULL)) {
		*str = NULL;
		return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGetErrorString(CUresult error, const char **str)
{
	if (!str)
		return CUDA_ERROR_INVALID_VALUE;
	if (sim_error_lookup(error, NULL, str)) {
		*str = NULL;
		return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetCount(int *count)
{
	SIM_ENTER("cuDeviceGetCount");
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	*count = sim.ndev;
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
	SIM_ENTER("cuDeviceGet");
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	if (!valid_device(ordinal))
		return CUDA_ERROR_INVALID_DEVICE;
	*device = ordinal;
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetAttribute(int *value, int attrib, CUdevice dev)
{
	SIM_ENTER("cuDeviceGetAttribute");
	if (!value)
		return CUDA_ERROR_INVALID_VALUE;
	if (!valid_device(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	switch (attrib) {
	case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
		*value = 1;
		break;
	case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED:
		*value = sim.gdr;
		break;
	default:
		*value = 0;
		break;
	}
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceCanAccessPeer(int *can_access, CUdevice dev, CUdevice peer)
{
	SIM_ENTER("cuDeviceCanAccessPeer");
	if (!can_access)
		return CUDA_ERROR_INVALID_VALUE;
	if (!valid_device(dev) || !valid_device(peer))
		return CUDA_ERROR_INVALID_DEVICE;
	sim_rdlock();
	*can_access = sim.peer[dev][peer]; /* 0 for dev == peer, as the driver */
	sim_unlock();
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
	SIM_ENTER("cuDevicePrimaryCtxRetain");
	if (!ctx)
		return CUDA_ERROR_INVALID_VALUE;
	if (!valid_device(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	sim_wrlock();
	__atomic_store_n(&sim.ctx_refs[dev], sim.ctx_refs[dev] + 1, __ATOMIC_RELEASE);
	sim_unlock();
	*ctx = &sim.ctx[dev];
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
	CUresult rc = CUDA_SUCCESS;

	SIM_ENTER("cuDevicePrimaryCtxRelease");
	if (!valid_device(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	sim_wrlock();
	if (!sim.ctx_refs[dev])
		rc = CUDA_ERROR_INVALID_CONTEXT;
	else
		__atomic_store_n(&sim.ctx_refs[dev], sim.ctx_refs[dev] - 1, __ATOMIC_RELEASE);
	sim_unlock();
	return rc;
}

static int ctx_to_device(CUcontext ctx)
{
	int i;

	for (i = 0; i < sim.ndev; i++)
		if (ctx == &sim.ctx[i])
			return i;
	return -1;
}

SIM_EXPORT CUresult cuCtxPushCurrent(CUcontext ctx)
{
	int dev;

	SIM_ENTER("cuCtxPushCurrent");
	dev = ctx_to_device(ctx);
	/* a primary context that is not retained is not active: pushing it is a bug */
	if (dev < 0 || !__atomic_load_n(&sim.ctx_refs[dev], __ATOMIC_ACQUIRE))
		return CUDA_ERROR_INVALID_CONTEXT;
	if (ctx_depth == SIM_CTX_STACK_DEPTH)
		return CUDA_ERROR_OUT_OF_MEMORY;
	ctx_stack[ctx_depth++] = ctx;
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxPopCurrent(CUcontext *ctx)
{
	SIM_ENTER("cuCtxPopCurrent");
	if (!ctx_depth)
		return CUDA_ERROR_INVALID_CONTEXT;
	ctx_depth--;
	if (ctx)
		*ctx = ctx_stack[ctx_depth];
	ctx_stack[ctx_depth] = NULL;
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxSynchronize(void)
{
	int dev;

	SIM_ENTER("cuCtxSynchronize");
	return sim_current_device(&dev);
}

SIM_EXPORT CUresult cuMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
	CUresult rc;
	int dev;

	SIM_ENTER("cuMemGetInfo");
	rc = sim_current_device(&dev);
	if (rc != CUDA_SUCCESS)
		return rc;
	if (!free_bytes || !total_bytes)
		return CUDA_ERROR_INVALID_VALUE;
	sim_rdlock();
	*total_bytes = (size_t)sim.capacity[dev];
	*free_bytes = sim.used[dev] >= sim.capacity[dev] ?
			      0 :
			      (size_t)(sim.capacity[dev] - sim.used[dev]);
	sim_unlock();
	return CUDA_SUCCESS;
}

/* ---- modules: the simulation runs one kernel, the library's checksum --------- */

/*
 * An image holding the entry of the library's checksum kernel (CMS_REGION_VERIFY) loads as
 * the one module the simulation knows, whose one function runs the kernel's C definition
 * (sim_checksum_launch); any other image is CUDA_ERROR_NOT_SUPPORTED, as without a GPU.
 */
struct CUmod_st {
	int unused;
};
struct CUfunc_st {
	int unused;
};
static struct CUmod_st checksum_module;
static struct CUfunc_st checksum_function;

static int is_checksum_image(const char *image)
{
	return strstr(image, ".entry " CMS_CHECKSUM_ENTRY "(") != NULL;
}

SIM_EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
	CUresult rc;
	int dev;

	SIM_ENTER("cuModuleLoadData");
	rc = sim_current_device(&dev);
	if (rc != CUDA_SUCCESS)
		return rc;
	if (!module || !image)
		return CUDA_ERROR_INVALID_VALUE;
	*module = NULL;
	if (!is_checksum_image(image))
		return CUDA_ERROR_NOT_SUPPORTED;
	sim_wrlock();
	sim.modules++;
	sim_unlock();
	*module = &checksum_module;
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuModuleUnload(CUmodule module)
{
	CUresult rc = CUDA_ERROR_INVALID_HANDLE;

	SIM_ENTER("cuModuleUnload");
	sim_wrlock();
	if (module == &checksum_module && sim.modules) {
		sim.modules--;
		rc = CUDA_SUCCESS;
	}
	sim_unlock();
	return rc;
}

SIM_EXPORT CUresult cuModuleGetFunction(CUfunction *fn, CUmodule module, const char *name)
{
	CUresult rc;
	int dev;

	SIM_ENTER("cuModuleGetFunction");
	rc = sim_current_device(&dev);
	if (rc != CUDA_SUCCESS)
		return rc;
	if (!fn || !name)
		return CUDA_ERROR_INVALID_VALUE;
	if (module != &checksum_module)
		return CUDA_ERROR_INVALID_HANDLE;
	if (strcmp(name, CMS_CHECKSUM_ENTRY) != 0)
		return CUDA_ERROR_NOT_FOUND;
	*fn = &checksum_function;
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuLaunchKernel(CUfunction fn, unsigned int gx, unsigned int gy, unsigned int gz,
				   unsigned int bx, unsigned int by, unsigned int bz,
				   unsigned int shared_bytes, CUstream stream, void **params,
				   void **extra)
{
	CUresult rc;
	int dev;

	SIM_ENTER("cuLaunchKernel");
	rc = sim_current_device(&dev);
	if (rc != CUDA_SUCCESS)
		return rc;
	if (fn != &checksum_function)
		return CUDA_ERROR_INVALID_HANDLE;
	/* The shape the kernel is written for (checksum_kernel.c), its three parameters. */
	if (!gx || gy != 1 || gz != 1 || bx != CMS_CHECKSUM_BLOCK || by != 1 || bz != 1 ||
	    shared_bytes || extra || !params || !params[0] || !params[1] || !params[2])
		return CUDA_ERROR_INVALID_VALUE;
	return sim_checksum_launch(*(const uint64_t *)params[0], *(const uint64_t *)params[1],
				   *(const uint64_t *)params[2], stream);
}

/* ---- cuGetProcAddress ----------------------------------------------------- */

struct sim_proc {
	const char *name;
	void *fn;
};

#define SIM_PROC_ENTRY(name, ret, params) { #name, (void *)name },
static const struct sim_proc sim_procs[] = { CMS_CUDA_FUNCTIONS(SIM_PROC_ENTRY) };
#undef SIM_PROC_ENTRY

static void *proc_lookup(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(sim_procs) / sizeof(sim_procs[0]); i++)
		if (!strcmp(sim_procs[i].name, name))
			return sim_procs[i].fn;
	if (!strcmp(name, "cuGetProcAddress"))
		return (void *)cuGetProcAddress_v2;
	return NULL;
}

/* Counted driver entry points (all but the uncounted ones) for fault names. */
int sim_known_function(const char *fn)
{
	static const char *const uncounted[] = { "cuGetProcAddress", "cuGetErrorName",
						 "cuGetErrorString", "cuDriverGetVersion" };
	size_t i;

	for (i = 0; i < sizeof(uncounted) / sizeof(uncounted[0]); i++)
		if (!strcmp(fn, uncounted[i]))
			return 0;
	return proc_lookup(fn) != NULL;
}

SIM_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
					unsigned long long flags, int *status)
{
	void *fn;

	sim_setup();
	if (status)
		*status = SIM_PROC_SYMBOL_NOT_FOUND;
	if (!symbol || !pfn || flags > 2)
		return CUDA_ERROR_INVALID_VALUE;
	*pfn = NULL;
	fn = proc_lookup(symbol);
	if (!fn)
		return CUDA_ERROR_NOT_FOUND;
	/* the signatures simulated are those of CUDA 12.0: refuse older ABIs */
	if (version < CMS_CUDA_API_VERSION) {
		if (status)
			*status = SIM_PROC_VERSION_NOT_SUFFICIENT;
		return CUDA_ERROR_NOT_FOUND;
	}
	*pfn = fn;
	if (status)
		*status = CU_GET_PROC_ADDRESS_SUCCESS;
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version,
				     unsigned long long flags)
{
	return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}
