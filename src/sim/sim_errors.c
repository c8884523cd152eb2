// SPDX-License-Identifier: MIT
/*
 * sim_errors.c - cuGetErrorName / cuGetErrorString tables, worded like the
 * real driver's.
 */
#include "sim_internal.h"

struct sim_error {
	CUresult code;
	const char *name;
	const char *string;
};

#define E(code, string)             \
	{                           \
		code, #code, string \
	}
static const struct sim_error sim_errors[] = {
	E(CUDA_SUCCESS, "no error"),
	E(CUDA_ERROR_INVALID_VALUE, "invalid argument"),
	E(CUDA_ERROR_OUT_OF_MEMORY, "out of memory"),
	E(CUDA_ERROR_NOT_INITIALIZED, "initialization error"),
	E(CUDA_ERROR_DEINITIALIZED, "driver shutting down"),
	E(CUDA_ERROR_STUB_LIBRARY, "CUDA driver is a stub library"),
	E(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected"),
	E(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal"),
	E(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid"),
	E(CUDA_ERROR_INVALID_CONTEXT, "invalid device context"),
	E(CUDA_ERROR_NO_BINARY_FOR_GPU, "no kernel image is available for execution on the device"),
	E(CUDA_ERROR_INVALID_PTX, "a PTX JIT compilation failed"),
	E(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle"),
	{ SIM_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE",
	  "the operation cannot be performed in the present state" },
	E(CUDA_ERROR_NOT_FOUND, "named symbol not found"),
	E(CUDA_ERROR_NOT_READY, "device not ready"),
	E(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered"),
	E(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
	  "part or all of the requested memory range is already mapped"),
	E(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
	  "pointer does not correspond to a registered memory region"),
	E(CUDA_ERROR_NOT_PERMITTED, "operation not permitted"),
	E(CUDA_ERROR_NOT_SUPPORTED, "operation not supported"),
	E(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
	  "operation not permitted when stream is capturing"),
	{ SIM_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
	  "operation failed due to a previous error during capture" },
	E(CUDA_ERROR_UNKNOWN, "unknown error"),
};
#undef E

/* Returns 0 and fills the wanted pointers, or -1 for an unknown code. */
int sim_error_lookup(CUresult error, const char **name, const char **string)
{
	size_t i;

	for (i = 0; i < sizeof(sim_errors) / sizeof(sim_errors[0]); i++) {
		if (sim_errors[i].code != error)
			continue;
		if (name)
			*name = sim_errors[i].name;
		if (string)
			*string = sim_errors[i].string;
		return 0;
	}
	return -1;
}
