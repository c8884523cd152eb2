// SPDX-License-Identifier: MIT
/*
 * test_sim.c - unit tests of libcumemsaver-sim, the host simulation of the
 * CUDA driver. The simulation is loaded like the library loads a driver:
 * dlopen(CMS_DRIVER_LIBRARY), then cuGetProcAddress_v2 for every entry point.
 *
 * Check forks each test, so every test starts with a freshly loaded
 * simulation; main() never touches it.
 */
#include <check.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_api.h"
#include "cumemsaver_sim.h"

struct sim_driver {
	void *lib;
	cms_cuGetProcAddress_v2_fn get_proc;
#define X(name, ret, params) ret(*name) params;
	CMS_CUDA_FUNCTIONS(X)
#undef X
	const char *(*version)(void);
	int (*set_capacity)(int, uint64_t);
	uint64_t (*call_count)(void);
	int (*fail_call)(const char *, uint64_t, int);
	int (*fail_host_alloc)(uint64_t);
	void (*clear_faults)(void);
	int (*armed_faults)(void);
	int (*host_alloc_hook)(size_t);
	void (*host_free_hook)(size_t);
	int (*get_counters)(cmssim_counters *);
	int (*device_count)(void);
};

static struct sim_driver d;
static size_t gran;
static CUcontext ctx0;

#define CK(call) ck_assert_int_eq((call), CUDA_SUCCESS)

static void *sym(const char *name)
{
	void *p = dlsym(d.lib, name);

	ck_assert_msg(p != NULL, "missing export %s", name);
	return p;
}

/* Loads the simulation and resolves everything; does not call cuInit. */
static void load(void)
{
	const char *path = getenv("CMS_DRIVER_LIBRARY");
	int status = -1;

	ck_assert_msg(path != NULL, "CMS_DRIVER_LIBRARY must name libcumemsaver-sim.so");
	d.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	ck_assert_msg(d.lib != NULL, "dlopen: %s", dlerror());
	d.get_proc = (cms_cuGetProcAddress_v2_fn)sym("cuGetProcAddress_v2");
#define X(name, ret, params)                                                                    \
	status = -1;                                                                            \
	ck_assert_int_eq(d.get_proc(#name, (void **)&d.name, CMS_CUDA_API_VERSION, 0, &status), \
			 CUDA_SUCCESS);                                                         \
	ck_assert_int_eq(status, CU_GET_PROC_ADDRESS_SUCCESS);                                  \
	ck_assert_ptr_nonnull(d.name);                                                          \
	ck_assert_ptr_eq(sym(#name), (void *)d.name);
	CMS_CUDA_FUNCTIONS(X)
#undef X
	d.version = (const char *(*)(void))sym("cmssim_version");
	d.set_capacity = (int (*)(int, uint64_t))sym("cmssim_set_capacity");
	d.call_count = (uint64_t(*)(void))sym("cmssim_call_count");
	d.fail_call = (int (*)(const char *, uint64_t, int))sym("cmssim_fail_call");
	d.fail_host_alloc = (int (*)(uint64_t))sym("cmssim_fail_host_alloc");
	d.clear_faults = (void (*)(void))sym("cmssim_clear_faults");
	d.armed_faults = (int (*)(void))sym("cmssim_armed_faults");
	d.host_alloc_hook = (int (*)(size_t))sym("cmssim_host_alloc_hook");
	d.host_free_hook = (void (*)(size_t))sym("cmssim_host_free_hook");
	d.get_counters = (int (*)(cmssim_counters *))sym("cmssim_get_counters");
	d.device_count = (int (*)(void))sym("cmssim_device_count");
}

static CUmemAllocationProp prop_for(int dev, int handle_types)
{
	CUmemAllocationProp p;

	memset(&p, 0, sizeof(p));
	p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.location.id = dev;
	p.requestedHandleTypes = handle_types;
	return p;
}

/* Fixture: loaded, initialised, device 0's primary context current. */
static void setup(void)
{
	CUmemAllocationProp p = prop_for(0, 0);
	CUdevice dev;

	load();
	CK(d.cuInit(0));
	CK(d.cuDeviceGet(&dev, 0));
	CK(d.cuDevicePrimaryCtxRetain(&ctx0, dev));
	CK(d.cuCtxPushCurrent(ctx0));
	CK(d.cuMemGetAllocationGranularity(&gran, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
}

static void teardown(void)
{
	CUcontext c;

	if (d.cuCtxPopCurrent)
		d.cuCtxPopCurrent(&c);
	if (d.cuDevicePrimaryCtxRelease)
		d.cuDevicePrimaryCtxRelease(0);
}

static void set_access(CUdeviceptr p, size_t size, int flags)
{
	CUmemAccessDesc a = { .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, .flags = flags };

	CK(d.cuMemSetAccess(p, size, &a, 1));
}

/* Reserve @res_size, create @size with @types, map at the start, read-write. */
static CUdeviceptr make(size_t res_size, size_t size, int types, CUmemGenericAllocationHandle *h)
{
	CUmemAllocationProp p = prop_for(0, types);
	CUdeviceptr ptr;

	CK(d.cuMemAddressReserve(&ptr, res_size, 0, 0, 0));
	CK(d.cuMemCreate(h, size, &p, 0));
	CK(d.cuMemMap(ptr, size, 0, *h, 0));
	set_access(ptr, size, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	return ptr;
}

static void destroy(CUdeviceptr ptr, size_t res_size, size_t size, CUmemGenericAllocationHandle h)
{
	CK(d.cuMemUnmap(ptr, size));
	CK(d.cuMemRelease(h));
	CK(d.cuMemAddressFree(ptr, res_size));
}

static cmssim_counters counters(void)
{
	cmssim_counters c = CMSSIM_COUNTERS_INIT;

	ck_assert_int_eq(d.get_counters(&c), 0);
	return c;
}

static void assert_all_freed(void)
{
	cmssim_counters c = counters();
	int i;

	ck_assert_uint_eq(c.reservations, 0);
	ck_assert_uint_eq(c.handles, 0);
	ck_assert_uint_eq(c.physical_allocations, 0);
	ck_assert_uint_eq(c.mappings, 0);
	for (i = 0; i < CMSSIM_MAX_DEVICES; i++)
		ck_assert_uint_eq(c.device_used_bytes[i], 0);
	ck_assert_uint_eq(c.streams, 0);
	ck_assert_uint_eq(c.events, 0);
	ck_assert_uint_eq(c.graphs, 0);
	ck_assert_uint_eq(c.graph_execs, 0);
	ck_assert_uint_eq(c.host_buffers, 0);
	ck_assert_uint_eq(c.host_buffer_bytes, 0);
}

/* ---- tests ----------------------------------------------------------------- */

START_TEST(test_before_init)
{
	CUmemGenericAllocationHandle h;
	CUmemAllocationProp p = prop_for(0, 0);
	cms_cuGetProcAddress_v1_fn v1;
	const char *s = NULL;
	void *fn = NULL;
	int v = 0, status = 0;

	load();
	ck_assert_str_eq(d.version(), CMSSIM_VERSION_STRING);
	CK(d.cuDriverGetVersion(&v));
	ck_assert_int_ge(v, 12080);
	CK(d.cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s));
	ck_assert_str_eq(s, "CUDA_ERROR_OUT_OF_MEMORY");
	ck_assert_int_eq(d.cuMemCreate(&h, 2 << 20, &p, 0), CUDA_ERROR_NOT_INITIALIZED);
	ck_assert_int_eq(d.cuDeviceGetCount(&v), CUDA_ERROR_NOT_INITIALIZED);
	ck_assert_int_eq(d.get_proc("cuNoSuchThing", &fn, 12000, 0, &status), CUDA_ERROR_NOT_FOUND);
	ck_assert_int_eq(status, 1);
	ck_assert_ptr_null(fn);
	ck_assert_int_eq(d.get_proc("cuMemGetInfo_v2", &fn, 12000, 0, &status),
			 CUDA_ERROR_NOT_FOUND);
	ck_assert_int_eq(d.get_proc("cuMemCreate", &fn, 11000, 0, &status), CUDA_ERROR_NOT_FOUND);
	ck_assert_int_eq(status, 2);
	v1 = (cms_cuGetProcAddress_v1_fn)sym("cuGetProcAddress");
	CK(v1("cuMemCreate", &fn, 12000, 0));
	ck_assert_ptr_eq(fn, (void *)d.cuMemCreate);
	CK(d.get_proc("cuGetProcAddress", &fn, 12000, 0, &status));
	ck_assert_ptr_eq(fn, (void *)d.get_proc);
	ck_assert_int_eq(d.cuInit(1), CUDA_ERROR_INVALID_VALUE);
	CK(d.cuInit(0));
	CK(d.cuDeviceGetCount(&v));
	ck_assert_int_eq(v, 1);
	ck_assert_int_eq(d.device_count(), 1);
}
END_TEST

START_TEST(test_error_names)
{
	static const struct {
		CUresult code;
		const char *name;
	} codes[] = {
#define C(x) { x, #x }
		C(CUDA_SUCCESS),
		C(CUDA_ERROR_INVALID_VALUE),
		C(CUDA_ERROR_OUT_OF_MEMORY),
		C(CUDA_ERROR_NOT_INITIALIZED),
		C(CUDA_ERROR_DEINITIALIZED),
		C(CUDA_ERROR_STUB_LIBRARY),
		C(CUDA_ERROR_NO_DEVICE),
		C(CUDA_ERROR_INVALID_DEVICE),
		C(CUDA_ERROR_INVALID_IMAGE),
		C(CUDA_ERROR_INVALID_CONTEXT),
		C(CUDA_ERROR_NO_BINARY_FOR_GPU),
		C(CUDA_ERROR_INVALID_PTX),
		C(CUDA_ERROR_INVALID_HANDLE),
		C(CUDA_ERROR_NOT_FOUND),
		C(CUDA_ERROR_NOT_READY),
		C(CUDA_ERROR_ILLEGAL_ADDRESS),
		C(CUDA_ERROR_NOT_PERMITTED),
		C(CUDA_ERROR_NOT_SUPPORTED),
		C(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED),
		C(CUDA_ERROR_UNKNOWN),
#undef C
	};
	const char *s;
	size_t i;

	load();
	for (i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		s = NULL;
		CK(d.cuGetErrorName(codes[i].code, &s));
		ck_assert_str_eq(s, codes[i].name);
		s = NULL;
		CK(d.cuGetErrorString(codes[i].code, &s));
		ck_assert_ptr_nonnull(s);
	}
	CK(d.cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s));
	ck_assert_str_eq(s, "out of memory");
	s = "x";
	ck_assert_int_eq(d.cuGetErrorName(12345, &s), CUDA_ERROR_INVALID_VALUE);
	ck_assert_ptr_null(s);
	s = "x";
	ck_assert_int_eq(d.cuGetErrorString(-1, &s), CUDA_ERROR_INVALID_VALUE);
	ck_assert_ptr_null(s);
}
END_TEST

START_TEST(test_roundtrip)
{
	CUmemGenericAllocationHandle h;
	size_t size = 2 * gran, i;
	unsigned char *in = malloc(size), *out = malloc(size);
	CUdeviceptr ptr;
	cmssim_counters c;

	ck_assert_uint_eq(gran, 2u << 20);
	for (i = 0; i < size; i++)
		in[i] = (unsigned char)(i * 7 + 3);
	ptr = make(4 * gran, size, 0, &h);
	ck_assert_uint_eq(ptr % gran, 0);
	c = counters();
	ck_assert_uint_eq(c.reservations, 1);
	ck_assert_uint_eq(c.handles, 1);
	ck_assert_uint_eq(c.physical_allocations, 1);
	ck_assert_uint_eq(c.mappings, 1);
	ck_assert_uint_eq(c.device_used_bytes[0], size);
	CK(d.cuMemcpyHtoD(ptr, in, size));
	/* the simulated device memory is host memory at the same address */
	ck_assert_int_eq(memcmp((void *)(uintptr_t)ptr, in, size), 0);
	memset(out, 0, size);
	CK(d.cuMemcpyDtoH(out, ptr, size));
	ck_assert_int_eq(memcmp(in, out, size), 0);
	CK(d.cuMemcpyDtoHAsync(out, ptr + 5, 100, NULL));
	ck_assert_int_eq(memcmp(in + 5, out, 100), 0);
	CK(d.cuMemsetD8Async(ptr + 1, 0x11, 3, NULL));
	CK(d.cuMemsetD32Async(ptr + 8, 0xdeadbeef, 2, NULL));
	CK(d.cuMemcpyDtoDAsync(ptr + gran, ptr, 16, NULL));
	CK(d.cuMemcpyDtoH(out, ptr + gran, 16));
	ck_assert_uint_eq(out[0], in[0]);
	ck_assert_uint_eq(out[1], 0x11);
	ck_assert_uint_eq(out[3], 0x11);
	ck_assert_uint_eq(out[4], in[4]);
	ck_assert_uint_eq(*(uint32_t *)(out + 8), 0xdeadbeef);
	ck_assert_uint_eq(*(uint32_t *)(out + 12), 0xdeadbeef);
	ck_assert_int_eq(d.cuMemsetD32Async(ptr + 2, 0, 1, NULL), CUDA_ERROR_INVALID_VALUE);
	CK(d.cuCtxSynchronize());
	destroy(ptr, 4 * gran, size, h);
	assert_all_freed();
	free(in);
	free(out);
}
END_TEST

START_TEST(test_poison)
{
	CUmemGenericAllocationHandle h;
	unsigned char buf[64];
	CUdeviceptr ptr = make(gran, gran, 0, &h);
	size_t i;

	CK(d.cuMemcpyDtoH(buf, ptr + gran - sizeof(buf), sizeof(buf)));
	for (i = 0; i < sizeof(buf); i++)
		ck_assert_uint_eq(buf[i], CMSSIM_DEFAULT_POISON);
	/* content dies with the physical memory: a new handle is poisoned again */
	CK(d.cuMemsetD8Async(ptr, 0, gran, NULL));
	destroy(ptr, gran, gran, h);
	ptr = make(gran, gran, 0, &h);
	CK(d.cuMemcpyDtoH(buf, ptr, sizeof(buf)));
	ck_assert_uint_eq(buf[0], CMSSIM_DEFAULT_POISON);
	destroy(ptr, gran, gran, h);
}
END_TEST

START_TEST(test_poison_env)
{
	CUmemGenericAllocationHandle h;
	unsigned char b = 1;
	CUdeviceptr ptr;

	setenv("CMS_SIM_POISON", "0", 1);
	setup();
	ptr = make(gran, gran, 0, &h);
	CK(d.cuMemcpyDtoH(&b, ptr + 17, 1));
	ck_assert_uint_eq(b, 0);
	destroy(ptr, gran, gran, h);
	teardown();
}
END_TEST

START_TEST(test_map_rules)
{
	CUmemAllocationProp p = prop_for(0, 0);
	CUmemGenericAllocationHandle h, h2;
	CUdeviceptr ptr, other;

	CK(d.cuMemAddressReserve(&ptr, 4 * gran, 0, 0, 0));
	CK(d.cuMemAddressReserve(&other, gran, 0, 0, 0));
	CK(d.cuMemCreate(&h, 2 * gran, &p, 0));
	/* the H200 driver refuses a non-zero offset */
	ck_assert_int_eq(d.cuMemMap(ptr, gran, gran, h, 0), CUDA_ERROR_NOT_SUPPORTED);
	ck_assert_int_eq(d.cuMemMap(ptr + 1, gran, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(d.cuMemMap(ptr, gran + 1, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(d.cuMemMap(ptr, 4 * gran, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(d.cuMemMap(ptr + 3 * gran, 2 * gran, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(d.cuMemMap(ptr, gran, 0, h + 12345, 0), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(d.cuMemMap(ptr - gran, gran, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
	CK(d.cuMemMap(ptr, 2 * gran, 0, h, 0));
	ck_assert_int_eq(d.cuMemMap(ptr + gran, gran, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
	/* the same handle may be mapped twice, but only whole, as on the H200 */
	CK(d.cuMemCreate(&h2, gran, &p, 0));
	ck_assert_int_eq(d.cuMemMap(other, gran, 0, h, 0), CUDA_ERROR_NOT_SUPPORTED);
	CK(d.cuMemMap(other, gran, 0, h2, 0));
	CK(d.cuMemMap(ptr + 2 * gran, gran, 0, h2, 0));
	/* partial unmap is refused, as on the H200 */
	ck_assert_int_eq(d.cuMemUnmap(ptr, gran), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(d.cuMemUnmap(ptr + gran, 2 * gran), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(d.cuMemUnmap(ptr, 4 * gran), CUDA_ERROR_INVALID_VALUE);
	/* set access over two adjacent mappings, and on a part of one */
	set_access(ptr, 3 * gran, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	set_access(ptr + gran, gran, CU_MEM_ACCESS_FLAGS_PROT_READ);
	{
		CUmemAccessDesc a = { { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, 3 };

		ck_assert_int_eq(d.cuMemSetAccess(ptr, 4 * gran, &a, 1), CUDA_ERROR_INVALID_VALUE);
		ck_assert_int_eq(d.cuMemSetAccess(ptr, gran, &a, 0), CUDA_ERROR_INVALID_VALUE);
		a.location.id = 5;
		ck_assert_int_eq(d.cuMemSetAccess(ptr, gran, &a, 1), CUDA_ERROR_INVALID_DEVICE);
	}
	/* address free with mappings inside fails */
	ck_assert_int_eq(d.cuMemAddressFree(ptr, 4 * gran), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(d.cuMemAddressFree(ptr, 2 * gran), CUDA_ERROR_INVALID_VALUE);
	/* whole adjacent mappings at once */
	CK(d.cuMemUnmap(ptr, 3 * gran));
	ck_assert_int_eq(d.cuMemUnmap(ptr, 2 * gran), CUDA_ERROR_INVALID_VALUE);
	CK(d.cuMemUnmap(other, gran));
	CK(d.cuMemRelease(h));
	ck_assert_int_eq(d.cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
	CK(d.cuMemRelease(h2));
	CK(d.cuMemAddressFree(ptr, 4 * gran));
	ck_assert_int_eq(d.cuMemAddressFree(ptr, 4 * gran), CUDA_ERROR_INVALID_VALUE);
	CK(d.cuMemAddressFree(other, gran));
	assert_all_freed();
}
END_TEST

START_TEST(test_reserve_rules)
{
	CUdeviceptr ptr, hint;

	ck_assert_int_eq(d.cuMemAddressReserve(&ptr, 0, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(d.cuMemAddressReserve(&ptr, gran + 4096, 0, 0, 0),
			 CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(d.cuMemAddressReserve(&ptr, gran, 3 * gran, 0, 0),
			 CUDA_ERROR_INVALID_VALUE);
	CK(d.cuMemAddressReserve(&ptr, gran, 64 * gran, 0, 0));
	ck_assert_uint_eq(ptr % (64 * gran), 0);
	CK(d.cuMemAddressFree(ptr, gran));
	/* an address hint is honoured when free */
	hint = ptr;
	CK(d.cuMemAddressReserve(&ptr, gran, 0, hint, 0));
	ck_assert_uint_eq(ptr, hint);
	CK(d.cuMemAddressFree(ptr, gran));
	assert_all_freed();
}
END_TEST

START_TEST(test_prop_validation)
{
	CUmemGenericAllocationHandle h;
	CUmemAllocationProp p;
	size_t g;
	int v = -1;

	p = prop_for(0, 0);
	p.type = 2;
	ck_assert_int_eq(d.cuMemGetAllocationGranularity(&g, &p, 0), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(d.cuMemCreate(&h, gran, &p, 0), CUDA_ERROR_INVALID_VALUE);
	p = prop_for(1, 0);
	ck_assert_int_eq(d.cuMemGetAllocationGranularity(&g, &p, 0), CUDA_ERROR_INVALID_VALUE);
	p = prop_for(0, CU_MEM_HANDLE_TYPE_FABRIC);
	ck_assert_int_eq(d.cuMemGetAllocationGranularity(&g, &p, 0), CUDA_ERROR_INVALID_VALUE);
	p = prop_for(0, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	CK(d.cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
	ck_assert_int_eq(d.cuMemGetAllocationGranularity(&g, &p, 7), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(d.cuMemGetAllocationGranularity(&g, NULL, 0), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(d.cuMemCreate(&h, gran / 2, &p, 0), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(d.cuMemCreate(&h, 0, &p, 0), CUDA_ERROR_INVALID_VALUE);
	p.allocFlags.gpuDirectRDMACapable = 1;
	ck_assert_int_eq(d.cuMemCreate(&h, gran, &p, 0), CUDA_ERROR_INVALID_VALUE);
	CK(d.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED,
				  0));
	ck_assert_int_eq(v, 0);
	CK(d.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
	ck_assert_int_eq(v, 1);
	CK(d.cuDeviceGetAttribute(
		&v, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 0));
	ck_assert_int_eq(v, 1);
	CK(d.cuDeviceGetAttribute(&v, 1, 0));
	ck_assert_int_eq(v, 0);
	ck_assert_int_eq(d.cuDeviceGetAttribute(&v, 1, 1), CUDA_ERROR_INVALID_DEVICE);
	assert_all_freed();
}
END_TEST

START_TEST(test_gdr_env)
{
	CUmemAllocationProp p = prop_for(0, 0);
	CUmemGenericAllocationHandle h;
	int v = 0;

	setenv("CMS_SIM_GDR", "1", 1);
	setup();
	CK(d.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED,
				  0));
	ck_assert_int_eq(v, 1);
	p.allocFlags.gpuDirectRDMACapable = 1;
	CK(d.cuMemCreate(&h, gran, &p, 0));
	CK(d.cuMemRelease(h));
	teardown();
}
END_TEST

START_TEST(test_capacity)
{
	CUmemAllocationProp p = prop_for(0, 0);
	CUmemGenericAllocationHandle h1, h2, h3;
	size_t free_b, total_b;
	CUdeviceptr ptr;

	CK(d.cuMemGetInfo(&free_b, &total_b));
	ck_assert_uint_eq(total_b, 8ULL << 30);
	ck_assert_uint_eq(free_b, 8ULL << 30);
	ck_assert_int_eq(d.set_capacity(0, 2 * gran), 0);
	ck_assert_int_eq(d.set_capacity(1, gran), -1);
	CK(d.cuMemCreate(&h1, gran, &p, 0));
	ck_assert_int_eq(d.cuMemCreate(&h2, 2 * gran, &p, 0), CUDA_ERROR_OUT_OF_MEMORY);
	CK(d.cuMemCreate(&h2, gran, &p, 0));
	CK(d.cuMemGetInfo(&free_b, &total_b));
	ck_assert_uint_eq(free_b, 0);
	ck_assert_uint_eq(total_b, 2 * gran);
	ck_assert_int_eq(d.cuMemCreate(&h3, gran, &p, 0), CUDA_ERROR_OUT_OF_MEMORY);
	/* released but still mapped memory still counts */
	CK(d.cuMemAddressReserve(&ptr, gran, 0, 0, 0));
	CK(d.cuMemMap(ptr, gran, 0, h1, 0));
	CK(d.cuMemRelease(h1));
	ck_assert_uint_eq(counters().physical_allocations, 2);
	ck_assert_uint_eq(counters().handles, 1);
	ck_assert_int_eq(d.cuMemCreate(&h3, gran, &p, 0), CUDA_ERROR_OUT_OF_MEMORY);
	CK(d.cuMemUnmap(ptr, gran));
	CK(d.cuMemCreate(&h3, gran, &p, 0));
	/* capacity below use: no free memory, no new allocation */
	ck_assert_int_eq(d.set_capacity(0, gran), 0);
	CK(d.cuMemGetInfo(&free_b, &total_b));
	ck_assert_uint_eq(free_b, 0);
	CK(d.cuMemRelease(h2));
	CK(d.cuMemRelease(h3));
	CK(d.cuMemAddressFree(ptr, gran));
	assert_all_freed();
}
END_TEST

START_TEST(test_capacity_env)
{
	CUmemAllocationProp p = prop_for(0, 0);
	CUmemGenericAllocationHandle h;
	size_t free_b, total_b;

	setenv("CMS_SIM_CAPACITY", "4M", 1);
	setenv("CMS_SIM_GRANULARITY", "1M", 1);
	setup();
	ck_assert_uint_eq(gran, 1u << 20);
	CK(d.cuMemGetInfo(&free_b, &total_b));
	ck_assert_uint_eq(total_b, 4u << 20);
	ck_assert_int_eq(d.cuMemCreate(&h, 5u << 20, &p, 0), CUDA_ERROR_OUT_OF_MEMORY);
	CK(d.cuMemCreate(&h, 3u << 20, &p, 0));
	CK(d.cuMemRelease(h));
	teardown();
}
END_TEST

START_TEST(test_bad_env)
{
	setenv("CMS_SIM_CAPACITY", "lots", 1);
	load();
	ck_assert_int_eq(d.cuInit(0), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

START_TEST(test_fault_nth)
{
	CUmemAllocationProp p = prop_for(0, 0);
	CUmemGenericAllocationHandle h1, h2, h3;
	uint64_t before;
	size_t f, t;

	ck_assert_int_eq(d.fail_call("cuNoSuchCall", 1, CUDA_ERROR_UNKNOWN), -1);
	ck_assert_int_eq(d.fail_call("cuMemCreate", 0, CUDA_ERROR_UNKNOWN), -1);
	ck_assert_int_eq(d.fail_call("cuMemCreate", 2, CUDA_ERROR_OUT_OF_MEMORY), 0);
	ck_assert_int_eq(d.armed_faults(), 1);
	before = d.call_count();
	CK(d.cuMemCreate(&h1, gran, &p, 0));
	ck_assert_int_eq(d.cuMemCreate(&h2, gran, &p, 0), CUDA_ERROR_OUT_OF_MEMORY);
	ck_assert_uint_eq(counters().handles, 1); /* the failed call did nothing */
	CK(d.cuMemCreate(&h2, gran, &p, 0));
	ck_assert_uint_eq(d.call_count(), before + 3);
	ck_assert_int_eq(d.armed_faults(), 0);

	/* any call */
	ck_assert_int_eq(d.fail_call(NULL, 3, CUDA_ERROR_UNKNOWN), 0);
	ck_assert_int_eq(d.fail_call("cuMemGetInfo", 1, CUDA_ERROR_NOT_READY), 0);
	ck_assert_int_eq(d.cuMemGetInfo(&f, &t), CUDA_ERROR_NOT_READY);
	CK(d.cuCtxSynchronize());
	ck_assert_int_eq(d.cuMemCreate(&h3, gran, &p, 0), CUDA_ERROR_UNKNOWN);
	CK(d.cuMemRelease(h1));

	/* clear */
	ck_assert_int_eq(d.fail_call("cuMemRelease", 1, CUDA_ERROR_UNKNOWN), 0);
	d.clear_faults();
	ck_assert_int_eq(d.armed_faults(), 0);
	CK(d.cuMemRelease(h2));
	/* uncounted */
	before = d.call_count();
	{
		const char *s;
		int v;
		void *fn;

		d.cuGetErrorName(0, &s);
		d.cuDriverGetVersion(&v);
		d.get_proc("cuInit", &fn, 12000, 0, NULL);
	}
	ck_assert_uint_eq(d.call_count(), before);
	ck_assert_uint_eq(counters().calls, before);
	assert_all_freed();
}
END_TEST

START_TEST(test_fault_env)
{
	CUmemAllocationProp p = prop_for(0, 0);
	CUmemGenericAllocationHandle h;
	int i, fails = 0;

	setenv("CMS_SIM_FAIL", "cuMemCreate:3:2, host:2", 1);
	setup();
	ck_assert_int_eq(d.armed_faults(), 2);
	for (i = 0; i < 4; i++) {
		CUresult rc = d.cuMemCreate(&h, gran, &p, 0);

		if (i == 2) {
			ck_assert_int_eq(rc, CUDA_ERROR_OUT_OF_MEMORY);
			fails++;
			continue;
		}
		CK(rc);
		CK(d.cuMemRelease(h));
	}
	ck_assert_int_eq(fails, 1);
	ck_assert_int_eq(d.host_alloc_hook(10), 0);
	ck_assert_int_ne(d.host_alloc_hook(10), 0);
	d.host_free_hook(10);
	teardown();
	assert_all_freed();
}
END_TEST

START_TEST(test_host_hook)
{
	cmssim_counters c;

	ck_assert_int_eq(d.host_alloc_hook(100), 0);
	ck_assert_int_eq(d.fail_host_alloc(2), 0);
	ck_assert_int_eq(d.host_alloc_hook(50), 0);
	ck_assert_int_ne(d.host_alloc_hook(70), 0);
	c = counters();
	ck_assert_uint_eq(c.host_buffers, 2);
	ck_assert_uint_eq(c.host_buffer_bytes, 150);
	d.host_free_hook(100);
	d.host_free_hook(50);
	assert_all_freed();
}
END_TEST

START_TEST(test_counters_abi)
{
	cmssim_counters c;
	uint64_t small[2] = { 2 * sizeof(uint64_t), 77 };

	memset(&c, 0xff, sizeof(c));
	c.struct_size = sizeof(c);
	ck_assert_int_eq(d.get_counters(&c), 0);
	ck_assert_uint_eq(c.struct_size, sizeof(c));
	ck_assert_uint_eq(c.primary_ctx_refs, 1);
	ck_assert_uint_gt(c.calls, 0);
	/* an older, smaller struct gets only its own fields */
	ck_assert_int_eq(d.get_counters((cmssim_counters *)small), 0);
	ck_assert_uint_eq(small[1], 0);
	ck_assert_int_eq(d.get_counters(NULL), -1);
}
END_TEST

/* cuMemRetainAllocationHandle: the handle mapped at an address, one reference more (released
 * with cuMemRelease); after the handle was released while mapped, the same value again over the
 * same memory, exportable as the original; nothing mapped: INVALID_VALUE; fault-injectable. */
START_TEST(test_retain_handle)
{
	CUmemGenericAllocationHandle h, got = 0, again = 0;
	uint32_t v = 0x5eed, r = 0;
	CUdeviceptr a;
	cmssim_counters c;
	int fd = -1;

	a = make(2 * gran, gran, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, &h);
	CK(d.cuMemcpyHtoD(a + 8, &v, sizeof(v)));
	ck_assert_int_eq(d.cuMemRetainAllocationHandle(NULL, (void *)(uintptr_t)a),
			 CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(d.cuMemRetainAllocationHandle(&got, (void *)(uintptr_t)(a + gran)),
			 CUDA_ERROR_INVALID_VALUE); /* reserved, not mapped */
	CK(d.cuMemRetainAllocationHandle(&got, (void *)(uintptr_t)(a + 64)));
	ck_assert_uint_eq(got, h);
	CK(d.cuMemRelease(got)); /* the retained reference */
	ck_assert_uint_eq(counters().handles, 1);
	CK(d.cuMemRelease(h)); /* the last: released while mapped, the memory stays */
	c = counters();
	ck_assert_uint_eq(c.handles, 0);
	ck_assert_uint_eq(c.physical_allocations, 1);
	ck_assert_int_eq(d.fail_call("cuMemRetainAllocationHandle", 1, CUDA_ERROR_UNKNOWN), 0);
	ck_assert_int_eq(d.cuMemRetainAllocationHandle(&again, (void *)(uintptr_t)a),
			 CUDA_ERROR_UNKNOWN);
	CK(d.cuMemRetainAllocationHandle(&again, (void *)(uintptr_t)a));
	ck_assert_uint_eq(again, h);
	c = counters();
	ck_assert_uint_eq(c.handles, 1);
	ck_assert_uint_eq(c.physical_allocations, 1);
	ck_assert_uint_eq(c.device_used_bytes[0], gran);
	CK(d.cuMemExportToShareableHandle(&fd, again, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
	close(fd);
	CK(d.cuMemUnmap(a, gran)); /* the handle keeps the memory */
	ck_assert_uint_eq(counters().physical_allocations, 1);
	CK(d.cuMemMap(a, gran, 0, again, 0));
	set_access(a, gran, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	CK(d.cuMemcpyDtoH(&r, a + 8, sizeof(r)));
	ck_assert_uint_eq(r, v);
	destroy(a, 2 * gran, gran, again);
	assert_all_freed();
}
END_TEST

START_TEST(test_export_import)
{
	CUmemGenericAllocationHandle h, h2, h3, plain;
	CUmemAllocationProp p = prop_for(0, 0);
	CUdeviceptr a, b;
	uint32_t v = 0x12345678, r = 0;
	cmssim_counters c;
	int fd = -1, fd2 = -1;

	a = make(gran, gran, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, &h);
	CK(d.cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
	ck_assert_int_ge(fd, 0);
	CK(d.cuMemImportFromShareableHandle(&h2, (void *)(intptr_t)fd,
					    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
	ck_assert_uint_ne(h2, h);
	close(fd); /* the import keeps its own reference */
	CK(d.cuMemAddressReserve(&b, gran, 0, 0, 0));
	CK(d.cuMemMap(b, gran, 0, h2, 0));
	set_access(b, gran, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	CK(d.cuMemcpyHtoD(a + 64, &v, sizeof(v)));
	CK(d.cuMemcpyDtoH(&r, b + 64, sizeof(r)));
	ck_assert_uint_eq(r, v);
	c = counters();
	ck_assert_uint_eq(c.handles, 2);
	ck_assert_uint_eq(c.physical_allocations, 1);
	ck_assert_uint_eq(c.device_used_bytes[0], gran); /* not counted twice */

	/* a handle created without the POSIX fd type cannot be exported */
	CK(d.cuMemCreate(&plain, gran, &p, 0));
	ck_assert_int_eq(d.cuMemExportToShareableHandle(
				 &fd2, plain, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
			 CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(d.cuMemExportToShareableHandle(&fd2, h, CU_MEM_HANDLE_TYPE_FABRIC, 0),
			 CUDA_ERROR_INVALID_VALUE);
	CK(d.cuMemRelease(plain));
	/* a file that is not simulated device memory cannot be imported */
	fd2 = dup(0);
	ck_assert_int_eq(d.cuMemImportFromShareableHandle(&h3, (void *)(intptr_t)fd2,
							  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
			 CUDA_ERROR_INVALID_VALUE);
	close(fd2);

	/* importing again after the exporter released: the memory lives on */
	CK(d.cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
	destroy(a, gran, gran, h);
	CK(d.cuMemImportFromShareableHandle(&h3, (void *)(intptr_t)fd,
					    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
	close(fd);
	r = 0;
	CK(d.cuMemcpyDtoH(&r, b + 64, sizeof(r)));
	ck_assert_uint_eq(r, v);
	CK(d.cuMemRelease(h3));
	destroy(b, gran, gran, h2);
	assert_all_freed();
}
END_TEST

START_TEST(test_export_cross_process)
{
	CUmemGenericAllocationHandle h;
	CUdeviceptr a;
	uint32_t v = 0xcafef00d, r = 0;
	int fd, status;
	pid_t pid;

	a = make(gran, gran, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, &h);
	CK(d.cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		/* the importer maps at its own address, as another process would */
		CUmemGenericAllocationHandle h2;
		CUdeviceptr b;

		if (d.cuMemImportFromShareableHandle(&h2, (void *)(intptr_t)fd,
						     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) ||
		    d.cuMemAddressReserve(&b, gran, 0, 0, 0) || d.cuMemMap(b, gran, 0, h2, 0))
			_exit(1);
		set_access(b, gran, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
		if (d.cuMemcpyHtoD(b + 8, &v, sizeof(v)))
			_exit(2);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_int_eq(status, 0);
	CK(d.cuMemcpyDtoH(&r, a + 8, sizeof(r)));
	ck_assert_uint_eq(r, v);
	close(fd);
	destroy(a, gran, gran, h);
}
END_TEST

START_TEST(test_copy_validation)
{
	CUmemGenericAllocationHandle h1, h2;
	CUmemAllocationProp p = prop_for(0, 0);
	unsigned char buf[256];
	CUdeviceptr ptr;

	memset(buf, 1, sizeof(buf));
	CK(d.cuMemAddressReserve(&ptr, 4 * gran, 0, 0, 0));
	/* unmapped */
	ck_assert_int_eq(d.cuMemcpyHtoD(ptr, buf, 16), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(d.cuMemcpyDtoH(buf, ptr, 16), CUDA_ERROR_INVALID_VALUE);
	CK(d.cuMemCreate(&h1, gran, &p, 0));
	CK(d.cuMemCreate(&h2, gran, &p, 0));
	CK(d.cuMemMap(ptr, gran, 0, h1, 0));
	/* mapped but no access yet */
	ck_assert_int_eq(d.cuMemcpyHtoD(ptr, buf, 16), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(d.cuMemsetD8Async(ptr, 0, 16, NULL), CUDA_ERROR_INVALID_VALUE);
	set_access(ptr, gran, CU_MEM_ACCESS_FLAGS_PROT_READ);
	CK(d.cuMemcpyDtoH(buf, ptr, 16));
	ck_assert_int_eq(d.cuMemcpyHtoD(ptr, buf, 16), CUDA_ERROR_INVALID_VALUE);
	set_access(ptr, gran, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	CK(d.cuMemcpyHtoD(ptr, buf, 16));
	/* past the end of the mapping */
	ck_assert_int_eq(d.cuMemcpyHtoD(ptr + gran - 8, buf, 16), CUDA_ERROR_INVALID_VALUE);
	/* across two adjacent mappings */
	CK(d.cuMemMap(ptr + gran, gran, 0, h2, 0));
	set_access(ptr + gran, gran, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	CK(d.cuMemcpyHtoD(ptr + gran - 8, buf, 16));
	CK(d.cuMemcpyDtoDAsync(ptr + gran - 100, ptr, 200, NULL));
	/* host pointers must not be simulated device memory, and not NULL */
	ck_assert_int_eq(d.cuMemcpyHtoD(ptr, (void *)(uintptr_t)(ptr + gran), 16),
			 CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(d.cuMemcpyDtoH(NULL, ptr, 16), CUDA_ERROR_INVALID_VALUE);
	/* invalid stream */
	ck_assert_int_eq(d.cuMemcpyDtoHAsync(buf, ptr, 16, (CUstream)buf),
			 CUDA_ERROR_INVALID_HANDLE);
	/* after unmap */
	CK(d.cuMemUnmap(ptr, 2 * gran));
	ck_assert_int_eq(d.cuMemcpyHtoD(ptr, buf, 16), CUDA_ERROR_INVALID_VALUE);
	CK(d.cuMemRelease(h1));
	CK(d.cuMemRelease(h2));
	CK(d.cuMemAddressFree(ptr, 4 * gran));
	assert_all_freed();
}
END_TEST

START_TEST(test_streams_events)
{
	CUstream s;
	CUevent e;
	cmssim_counters c;

	ck_assert_int_eq(d.cuStreamCreate(&s, 0x4), CUDA_ERROR_INVALID_VALUE);
	CK(d.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CK(d.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
	c = counters();
	ck_assert_uint_eq(c.streams, 1);
	ck_assert_uint_eq(c.events, 1);
	CK(d.cuEventRecord(e, s));
	CK(d.cuEventRecord(e, NULL));
	CK(d.cuStreamWaitEvent(s, e, 0));
	CK(d.cuStreamWaitEvent(NULL, e, 0));
	CK(d.cuEventSynchronize(e));
	CK(d.cuStreamSynchronize(s));
	CK(d.cuStreamSynchronize(NULL));
	CK(d.cuEventDestroy(e));
	ck_assert_int_eq(d.cuEventDestroy(e), CUDA_ERROR_INVALID_HANDLE);
	ck_assert_int_eq(d.cuEventSynchronize(e), CUDA_ERROR_INVALID_HANDLE);
	ck_assert_int_eq(d.cuStreamWaitEvent(s, e, 0), CUDA_ERROR_INVALID_HANDLE);
	CK(d.cuStreamDestroy(s));
	ck_assert_int_eq(d.cuStreamDestroy(s), CUDA_ERROR_INVALID_HANDLE);
	ck_assert_int_eq(d.cuStreamSynchronize(s), CUDA_ERROR_INVALID_HANDLE);
	assert_all_freed();
}
END_TEST

START_TEST(test_capture_graph)
{
	CUmemGenericAllocationHandle h;
	CUdeviceptr ptr = make(gran, gran, 0, &h);
	uint32_t in[4] = { 1, 2, 3, 4 }, out[8], probe = 0;
	CUgraphExec ex, ex2;
	CUstream s;
	CUgraph g;
	cmssim_counters c;
	int i;

	ck_assert_int_eq(d.cuStreamBeginCapture(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL),
			 CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	CK(d.cuStreamCreate(&s, 0));
	CK(d.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
	ck_assert_int_ne(d.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
	CK(d.cuMemcpyHtoDAsync(ptr, in, sizeof(in), s));
	CK(d.cuMemsetD32Async(ptr + 16, 0xabcdabcd, 4, s));
	CK(d.cuMemcpyDtoDAsync(ptr + 64, ptr, 32, s));
	CK(d.cuMemsetD8Async(ptr + 64, 9, 1, s));
	memset(out, 0, sizeof(out));
	CK(d.cuMemcpyDtoHAsync(out, ptr + 64, sizeof(out), s));
	ck_assert_int_eq(d.cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	/* nothing ran yet: the memory still holds the poison */
	CK(d.cuMemcpyDtoH(&probe, ptr, sizeof(probe)));
	ck_assert_uint_eq(probe, 0xa5a5a5a5);
	ck_assert_uint_eq(out[0], 0);
	CK(d.cuStreamEndCapture(s, &g));
	ck_assert_int_ne(d.cuStreamEndCapture(s, &g), CUDA_SUCCESS);
	CK(d.cuGraphInstantiateWithFlags(&ex, g, 0));
	CK(d.cuGraphInstantiateWithFlags(&ex2, g, 0));
	c = counters();
	ck_assert_uint_eq(c.graphs, 1);
	ck_assert_uint_eq(c.graph_execs, 2);
	CK(d.cuGraphDestroy(g)); /* execs are independent copies */
	CK(d.cuGraphLaunch(ex, s));
	CK(d.cuStreamSynchronize(s));
	ck_assert_uint_eq(out[0], (1u & ~0xffu) | 9);
	for (i = 1; i < 4; i++)
		ck_assert_uint_eq(out[i], in[i]);
	for (i = 4; i < 8; i++)
		ck_assert_uint_eq(out[i], 0xabcdabcd);
	/* replay reads the host source at launch time */
	in[1] = 42;
	CK(d.cuGraphLaunch(ex2, NULL));
	ck_assert_uint_eq(out[1], 42);
	/* launch after the memory went away fails validation and runs nothing */
	destroy(ptr, gran, gran, h);
	out[2] = 7;
	ck_assert_int_eq(d.cuGraphLaunch(ex, s), CUDA_ERROR_INVALID_VALUE);
	ck_assert_uint_eq(out[2], 7);
	CK(d.cuGraphExecDestroy(ex));
	CK(d.cuGraphExecDestroy(ex2));
	ck_assert_int_eq(d.cuGraphExecDestroy(ex), CUDA_ERROR_INVALID_HANDLE);
	ck_assert_int_eq(d.cuGraphLaunch(ex, s), CUDA_ERROR_INVALID_HANDLE);
	/* a stream destroyed while capturing frees its partial graph */
	CK(d.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
	CK(d.cuStreamDestroy(s));
	assert_all_freed();
}
END_TEST

START_TEST(test_contexts)
{
	CUcontext c0, c1, popped = NULL;
	CUmemGenericAllocationHandle h;
	CUmemAllocationProp p = prop_for(1, 0);
	size_t f, t;
	CUstream s;
	CUdevice dev;
	int n;

	setenv("CMS_SIM_DEVICES", "2", 1);
	load();
	CK(d.cuInit(0));
	CK(d.cuDeviceGetCount(&n));
	ck_assert_int_eq(n, 2);
	ck_assert_int_eq(d.cuDeviceGet(&dev, 2), CUDA_ERROR_INVALID_DEVICE);
	ck_assert_int_eq(d.cuDeviceGet(&dev, -1), CUDA_ERROR_INVALID_DEVICE);
	/* no context: context functions fail, VMM functions work */
	ck_assert_int_eq(d.cuMemGetInfo(&f, &t), CUDA_ERROR_INVALID_CONTEXT);
	ck_assert_int_eq(d.cuStreamCreate(&s, 0), CUDA_ERROR_INVALID_CONTEXT);
	ck_assert_int_eq(d.cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
	ck_assert_int_eq(d.cuCtxPopCurrent(&popped), CUDA_ERROR_INVALID_CONTEXT);
	CK(d.cuMemGetAllocationGranularity(&gran, &p, 0));
	CK(d.cuMemCreate(&h, gran, &p, 0));
	ck_assert_uint_eq(counters().device_used_bytes[1], gran);
	CK(d.cuDevicePrimaryCtxRetain(&c0, 0));
	CK(d.cuDevicePrimaryCtxRetain(&c1, 1));
	ck_assert_ptr_ne(c0, c1);
	CK(d.cuDevicePrimaryCtxRetain(&c1, 1));
	ck_assert_uint_eq(counters().primary_ctx_refs, 3);
	CK(d.cuCtxPushCurrent(c1));
	CK(d.cuMemGetInfo(&f, &t));
	ck_assert_uint_eq(t - f, gran);
	CK(d.cuCtxPushCurrent(c0));
	CK(d.cuMemGetInfo(&f, &t));
	ck_assert_uint_eq(t, f);
	CK(d.cuCtxPopCurrent(&popped));
	ck_assert_ptr_eq(popped, c0);
	CK(d.cuDevicePrimaryCtxRelease(0));
	/* an inactive primary context cannot be pushed */
	ck_assert_int_eq(d.cuCtxPushCurrent(c0), CUDA_ERROR_INVALID_CONTEXT);
	ck_assert_int_eq(d.cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
	CK(d.cuDevicePrimaryCtxRelease(1));
	CK(d.cuMemGetInfo(&f, &t)); /* still one reference */
	CK(d.cuDevicePrimaryCtxRelease(1));
	/* the current context is no longer active */
	ck_assert_int_eq(d.cuMemGetInfo(&f, &t), CUDA_ERROR_INVALID_CONTEXT);
	CK(d.cuCtxPopCurrent(NULL));
	CK(d.cuMemRelease(h));
	ck_assert_uint_eq(counters().primary_ctx_refs, 0);
	assert_all_freed();
}
END_TEST

START_TEST(test_modules)
{
	CUmodule m = NULL;
	CUfunction fn = NULL;
	char image[16] = "x";

	ck_assert_int_eq(d.cuModuleLoadData(&m, image), CUDA_ERROR_NOT_SUPPORTED);
	ck_assert_int_ne(d.cuModuleGetFunction(&fn, m, "k"), CUDA_SUCCESS);
	ck_assert_int_ne(d.cuModuleUnload(m), CUDA_SUCCESS);
	ck_assert_int_ne(d.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), CUDA_SUCCESS);
}
END_TEST

struct worker_arg {
	int id;
	int failures;
};

static void *worker(void *p)
{
	struct worker_arg *arg = p;
	CUmemAllocationProp prop = prop_for(0, 0);
	CUmemAccessDesc a = { { CU_MEM_LOCATION_TYPE_DEVICE, 0 },
			      CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
	uint64_t v = (uint64_t)arg->id, r;
	int i;

	if (d.cuCtxPushCurrent(ctx0)) {
		arg->failures++;
		return NULL;
	}
	for (i = 0; i < 50; i++) {
		CUmemGenericAllocationHandle h;
		CUdeviceptr ptr;

		if (d.cuMemAddressReserve(&ptr, gran, 0, 0, 0) ||
		    d.cuMemCreate(&h, gran, &prop, 0) || d.cuMemMap(ptr, gran, 0, h, 0) ||
		    d.cuMemSetAccess(ptr, gran, &a, 1) ||
		    d.cuMemcpyHtoD(ptr + 8 * (uint64_t)i, &v, 8) ||
		    d.cuMemcpyDtoH(&r, ptr + 8 * (uint64_t)i, 8) || r != v ||
		    d.cuMemUnmap(ptr, gran) || d.cuMemRelease(h) || d.cuMemAddressFree(ptr, gran))
			arg->failures++;
	}
	d.cuCtxPopCurrent(NULL);
	return NULL;
}

START_TEST(test_threads)
{
	struct worker_arg args[4];
	pthread_t th[4];
	int i;

	for (i = 0; i < 4; i++) {
		args[i].id = i + 1;
		args[i].failures = 0;
		ck_assert_int_eq(pthread_create(&th[i], NULL, worker, &args[i]), 0);
	}
	for (i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(args[i].failures, 0);
	}
	assert_all_freed();
}
END_TEST

START_TEST(test_host_register)
{
	CUmemGenericAllocationHandle h;
	cmssim_counters c;
	CUdeviceptr ptr;
	char *buf = malloc(3 * 4096);

	ck_assert_ptr_nonnull(buf);
	ptr = make(gran, gran, 0, &h);
	CK(d.cuMemHostRegister(buf, 4096, 0));
	CK(d.cuMemHostRegister(buf + 4096, 4096, 0));
	c = counters();
	ck_assert_uint_eq(c.host_registrations, 2);
	ck_assert_uint_eq(c.host_registered_bytes, 2 * 4096);
	/* overlapping registrations and bad bases are refused as by the driver */
	ck_assert_int_eq(d.cuMemHostRegister(buf + 100, 4096, 0),
			 CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
	ck_assert_int_eq(d.cuMemHostUnregister(buf + 8), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
	ck_assert_int_eq(d.cuMemHostRegister((void *)(uintptr_t)ptr, 4096, 0),
			 CUDA_ERROR_INVALID_VALUE);
	/* one copy inside one registration is fine; across two (or into one) it is refused */
	CK(d.cuMemcpyDtoHAsync(buf + 16, ptr, 4000, NULL));
	ck_assert_int_eq(d.cuMemcpyDtoHAsync(buf + 4000, ptr, 200, NULL), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(d.cuMemcpyHtoDAsync(ptr, buf + 8000, 400, NULL), CUDA_ERROR_INVALID_VALUE);
	CK(d.cuMemcpyHtoDAsync(ptr, buf + 2 * 4096, 400, NULL)); /* unregistered memory */
	CK(d.cuMemHostUnregister(buf));
	CK(d.cuMemHostUnregister(buf + 4096));
	c = counters();
	ck_assert_uint_eq(c.host_registrations, 0);
	ck_assert_uint_eq(c.host_registered_bytes, 0);
	destroy(ptr, gran, gran, h);
	free(buf);
	assert_all_freed();
}
END_TEST

static Suite *sim_suite(void)
{
	Suite *s = suite_create("sim");
	TCase *raw = tcase_create("raw");
	TCase *tc = tcase_create("driver");

	/* tests that load the simulation themselves (environment first) */
	tcase_add_test(raw, test_before_init);
	tcase_add_test(raw, test_error_names);
	tcase_add_test(raw, test_poison_env);
	tcase_add_test(raw, test_gdr_env);
	tcase_add_test(raw, test_capacity_env);
	tcase_add_test(raw, test_bad_env);
	tcase_add_test(raw, test_fault_env);
	tcase_add_test(raw, test_contexts);
	suite_add_tcase(s, raw);

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_roundtrip);
	tcase_add_test(tc, test_host_register);
	tcase_add_test(tc, test_poison);
	tcase_add_test(tc, test_map_rules);
	tcase_add_test(tc, test_reserve_rules);
	tcase_add_test(tc, test_prop_validation);
	tcase_add_test(tc, test_capacity);
	tcase_add_test(tc, test_fault_nth);
	tcase_add_test(tc, test_host_hook);
	tcase_add_test(tc, test_counters_abi);
	tcase_add_test(tc, test_retain_handle);
	tcase_add_test(tc, test_export_import);
	tcase_add_test(tc, test_export_cross_process);
	tcase_add_test(tc, test_copy_validation);
	tcase_add_test(tc, test_streams_events);
	tcase_add_test(tc, test_capture_graph);
	tcase_add_test(tc, test_modules);
	tcase_add_test(tc, test_threads);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(sim_suite());
	int failed;

	/* every test needs a freshly loaded simulation: always fork */
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
