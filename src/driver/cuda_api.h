/* SPDX-License-Identifier: MIT */
/*
 * cuda_api.h - the subset of the CUDA driver API that cumemsaver uses.
 *
 * The project never includes the CUDA toolkit's cuda.h and never links
 * libcuda: every entry point is resolved at run time (src/driver.c). The
 * types and constants below mirror the driver ABI of CUDA 12.0+ exactly
 * (values checked against cuda.h of CUDA 13.0, see tests/cuda_api_probe.c);
 * function pointer types are the ABI of the version pinned in
 * CMS_CUDA_API_VERSION.
 */
#ifndef CMS_CUDA_API_H
#define CMS_CUDA_API_H

#include <stddef.h>
#include <stdint.h>

#define CMS_CUDA_API_VERSION 12000

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;

enum {
	CUDA_SUCCESS = 0,
	CUDA_ERROR_INVALID_VALUE = 1,
	CUDA_ERROR_OUT_OF_MEMORY = 2,
	CUDA_ERROR_NOT_INITIALIZED = 3,
	CUDA_ERROR_DEINITIALIZED = 4,
	CUDA_ERROR_STUB_LIBRARY = 34,
	CUDA_ERROR_NO_DEVICE = 100,
	CUDA_ERROR_INVALID_DEVICE = 101,
	CUDA_ERROR_INVALID_IMAGE = 200,
	CUDA_ERROR_INVALID_CONTEXT = 201,
	CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
	CUDA_ERROR_INVALID_PTX = 218,
	CUDA_ERROR_INVALID_HANDLE = 400,
	CUDA_ERROR_NOT_FOUND = 500,
	CUDA_ERROR_NOT_READY = 600,
	CUDA_ERROR_ILLEGAL_ADDRESS = 700,
	CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
	CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713,
	CUDA_ERROR_NOT_PERMITTED = 800,
	CUDA_ERROR_NOT_SUPPORTED = 801,
	CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
	CUDA_ERROR_UNKNOWN = 999,
};

/* CUmemAllocationType */
#define CU_MEM_ALLOCATION_TYPE_PINNED 0x1
/* CUmemAllocationHandleType (bit flags) */
#define CU_MEM_HANDLE_TYPE_NONE 0x0
#define CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR 0x1
#define CU_MEM_HANDLE_TYPE_FABRIC 0x8
/* CUmemLocationType */
#define CU_MEM_LOCATION_TYPE_DEVICE 0x1
/* CUmemAccess_flags */
#define CU_MEM_ACCESS_FLAGS_PROT_NONE 0x0
#define CU_MEM_ACCESS_FLAGS_PROT_READ 0x1
#define CU_POINTER_ATTRIBUTE_RANGE_START_ADDR 11 /* CUpointer_attribute */
#define CU_MEM_ACCESS_FLAGS_PROT_READWRITE 0x3
/* CUmemAllocationGranularity_flags */
#define CU_MEM_ALLOC_GRANULARITY_MINIMUM 0x0
#define CU_MEM_ALLOC_GRANULARITY_RECOMMENDED 0x1
/* CUdevice_attribute */
#define CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED 102
#define CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED 103
#define CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED 110
#define CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED 128
/* stream / event / capture flags */
#define CU_STREAM_DEFAULT 0x0
#define CU_STREAM_NON_BLOCKING 0x1
#define CU_EVENT_DEFAULT 0x0
#define CU_EVENT_DISABLE_TIMING 0x2
#define CU_STREAM_CAPTURE_MODE_GLOBAL 0
#define CU_STREAM_CAPTURE_MODE_THREAD_LOCAL 1
#define CU_STREAM_CAPTURE_MODE_RELAXED 2
/* cuMemHostRegister flags */
#define CU_MEMHOSTREGISTER_PORTABLE 0x01
/* cuGetProcAddress */
#define CU_GET_PROC_ADDRESS_DEFAULT 0
#define CU_GET_PROC_ADDRESS_SUCCESS 0

typedef struct CUmemLocation_st {
	int type; /* CUmemLocationType */
	int id;
} CUmemLocation;

typedef struct CUmemAllocationProp_st {
	int type;		  /* CUmemAllocationType */
	int requestedHandleTypes; /* CUmemAllocationHandleType */
	CUmemLocation location;
	void *win32HandleMetaData;
	struct {
		unsigned char compressionType;
		unsigned char gpuDirectRDMACapable;
		unsigned short usage;
		unsigned char reserved[4];
	} allocFlags;
} CUmemAllocationProp;

typedef struct CUmemAccessDesc_st {
	CUmemLocation location;
	int flags; /* CUmemAccess_flags */
} CUmemAccessDesc;

/*
 * X-macro list of every driver entry point the project resolves:
 * X(name, return, (parameters)). The name is the base name given to
 * cuGetProcAddress together with CMS_CUDA_API_VERSION; the driver returns the
 * variant (_v2, ...) of that version, whose signature is the one given here.
 */
#define CMS_CUDA_FUNCTIONS(X)                                                                   \
	X(cuInit, CUresult, (unsigned int flags))                                               \
	X(cuDriverGetVersion, CUresult, (int *version))                                         \
	X(cuGetErrorName, CUresult, (CUresult error, const char **str))                         \
	X(cuGetErrorString, CUresult, (CUresult error, const char **str))                       \
	X(cuDeviceGetCount, CUresult, (int *count))                                             \
	X(cuDeviceGet, CUresult, (CUdevice * device, int ordinal))                              \
	X(cuDeviceGetAttribute, CUresult, (int *value, int attrib, CUdevice dev))               \
	X(cuDeviceCanAccessPeer, CUresult, (int *can_access, CUdevice dev, CUdevice peer))      \
	X(cuDevicePrimaryCtxRetain, CUresult, (CUcontext * ctx, CUdevice dev))                  \
	X(cuDevicePrimaryCtxRelease, CUresult, (CUdevice dev))                                  \
	X(cuCtxPushCurrent, CUresult, (CUcontext ctx))                                          \
	X(cuCtxPopCurrent, CUresult, (CUcontext * ctx))                                         \
	X(cuCtxSynchronize, CUresult, (void))                                                   \
	X(cuMemGetInfo, CUresult, (size_t * free_bytes, size_t * total_bytes))                  \
	X(cuPointerGetAttribute, CUresult, (void *data, int attribute, CUdeviceptr ptr))        \
	X(cuMemGetAllocationGranularity, CUresult,                                              \
	  (size_t * granularity, const CUmemAllocationProp *prop, int option))                  \
	X(cuMemAddressReserve, CUresult,                                                        \
	  (CUdeviceptr * ptr, size_t size, size_t alignment, CUdeviceptr addr,                  \
	   unsigned long long flags))                                                           \
	X(cuMemAddressFree, CUresult, (CUdeviceptr ptr, size_t size))                           \
	X(cuMemCreate, CUresult,                                                                \
	  (CUmemGenericAllocationHandle * handle, size_t size, const CUmemAllocationProp *prop, \
	   unsigned long long flags))                                                           \
	X(cuMemRelease, CUresult, (CUmemGenericAllocationHandle handle))                        \
	X(cuMemMap, CUresult,                                                                   \
	  (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,    \
	   unsigned long long flags))                                                           \
	X(cuMemUnmap, CUresult, (CUdeviceptr ptr, size_t size))                                 \
	X(cuMemRetainAllocationHandle, CUresult,                                                \
	  (CUmemGenericAllocationHandle * handle, void *addr))                                  \
	X(cuMemSetAccess, CUresult,                                                             \
	  (CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count))            \
	X(cuMemExportToShareableHandle, CUresult,                                               \
	  (void *shareable, CUmemGenericAllocationHandle handle, int handle_type,               \
	   unsigned long long flags))                                                           \
	X(cuMemImportFromShareableHandle, CUresult,                                             \
	  (CUmemGenericAllocationHandle * handle, void *os_handle, int handle_type))            \
	X(cuMemHostRegister, CUresult, (void *p, size_t bytes, unsigned int flags))             \
	X(cuMemHostUnregister, CUresult, (void *p))                                             \
	X(cuMemcpyDtoH, CUresult, (void *dst, CUdeviceptr src, size_t bytes))                   \
	X(cuMemcpyHtoD, CUresult, (CUdeviceptr dst, const void *src, size_t bytes))             \
	X(cuMemcpyDtoHAsync, CUresult,                                                          \
	  (void *dst, CUdeviceptr src, size_t bytes, CUstream stream))                          \
	X(cuMemcpyHtoDAsync, CUresult,                                                          \
	  (CUdeviceptr dst, const void *src, size_t bytes, CUstream stream))                    \
	X(cuMemcpyDtoDAsync, CUresult,                                                          \
	  (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream))                    \
	X(cuMemsetD8Async, CUresult,                                                            \
	  (CUdeviceptr dst, unsigned char value, size_t count, CUstream stream))                \
	X(cuMemsetD32Async, CUresult,                                                           \
	  (CUdeviceptr dst, unsigned int value, size_t count, CUstream stream))                 \
	X(cuStreamCreate, CUresult, (CUstream * stream, unsigned int flags))                    \
	X(cuStreamDestroy, CUresult, (CUstream stream))                                         \
	X(cuStreamSynchronize, CUresult, (CUstream stream))                                     \
	X(cuStreamWaitEvent, CUresult, (CUstream stream, CUevent event, unsigned int flags))    \
	X(cuEventCreate, CUresult, (CUevent * event, unsigned int flags))                       \
	X(cuEventRecord, CUresult, (CUevent event, CUstream stream))                            \
	X(cuEventSynchronize, CUresult, (CUevent event))                                        \
	X(cuEventQuery, CUresult, (CUevent event))                                              \
	X(cuEventDestroy, CUresult, (CUevent event))                                            \
	X(cuStreamBeginCapture, CUresult, (CUstream stream, int mode))                          \
	X(cuStreamEndCapture, CUresult, (CUstream stream, CUgraph * graph))                     \
	X(cuGraphInstantiateWithFlags, CUresult,                                                \
	  (CUgraphExec * exec, CUgraph graph, unsigned long long flags))                        \
	X(cuGraphLaunch, CUresult, (CUgraphExec exec, CUstream stream))                         \
	X(cuGraphExecDestroy, CUresult, (CUgraphExec exec))                                     \
	X(cuGraphDestroy, CUresult, (CUgraph graph))                                            \
	X(cuModuleLoadData, CUresult, (CUmodule * module, const void *image))                   \
	X(cuModuleUnload, CUresult, (CUmodule module))                                          \
	X(cuModuleGetFunction, CUresult, (CUfunction * fn, CUmodule module, const char *name))  \
	X(cuLaunchKernel, CUresult,                                                             \
	  (CUfunction fn, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,   \
	   unsigned int by, unsigned int bz, unsigned int shared_bytes, CUstream stream,        \
	   void **params, void **extra))

/* cuGetProcAddress as exported by the driver (CUDA 12.0+: cuGetProcAddress_v2). */
typedef CUresult (*cms_cuGetProcAddress_v2_fn)(const char *symbol, void **pfn, int version,
					       unsigned long long flags, int *status);
typedef CUresult (*cms_cuGetProcAddress_v1_fn)(const char *symbol, void **pfn, int version,
					       unsigned long long flags);

#endif /* CMS_CUDA_API_H */
