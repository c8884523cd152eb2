/* Compiled against src/driver/cuda_api.h. */
#include <string.h>
#include "cuda_api.h"
#include "cuda_api_probe.h"

void facts_ours(struct cuda_api_facts *f)
{
	memset(f, 0, sizeof(*f));
	f->prop_size = sizeof(CUmemAllocationProp);
	f->prop_location = offsetof(CUmemAllocationProp, location);
	f->prop_alloc_flags = offsetof(CUmemAllocationProp, allocFlags);
	f->prop_gdr = offsetof(CUmemAllocationProp, allocFlags.gpuDirectRDMACapable);
	f->access_size = sizeof(CUmemAccessDesc);
	f->access_flags = offsetof(CUmemAccessDesc, flags);
	f->values[0] = CU_MEM_ALLOCATION_TYPE_PINNED;
	f->values[1] = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	f->values[2] = CU_MEM_LOCATION_TYPE_DEVICE;
	f->values[3] = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	f->values[4] = CU_MEM_ALLOC_GRANULARITY_MINIMUM;
	f->values[5] = CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED;
	f->values[6] = CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED;
	f->values[7] = CU_STREAM_NON_BLOCKING;
	f->values[8] = CU_EVENT_DISABLE_TIMING;
	f->values[9] = CU_STREAM_CAPTURE_MODE_RELAXED;
	f->values[10] = CUDA_ERROR_OUT_OF_MEMORY;
	f->values[11] = CUDA_ERROR_NOT_SUPPORTED;
	f->values[12] = CUDA_ERROR_STUB_LIBRARY;
	f->values[13] = CU_MEM_HANDLE_TYPE_FABRIC;
	f->values[14] = CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED;
	f->values[15] = CUDA_ERROR_INVALID_CONTEXT;
	f->values[16] = CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED;
	f->values[17] = CU_MEM_ACCESS_FLAGS_PROT_READ;
	f->values[18] = CU_POINTER_ATTRIBUTE_RANGE_START_ADDR;
}
