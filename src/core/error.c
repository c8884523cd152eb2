/* SPDX-License-Identifier: MIT */
/* error.c - status names, thread-local error messages, version. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core_internal.h"

static _Thread_local char tls_message[512];

struct status_desc {
	cms_status status;
	const char *name;
	const char *text;
};

static const struct status_desc statuses[] = {
	{ CMS_OK, "CMS_OK", "success" },
	{ CMS_ERR_INVALID_ARGUMENT, "CMS_ERR_INVALID_ARGUMENT", "invalid argument" },
	{ CMS_ERR_NO_DRIVER, "CMS_ERR_NO_DRIVER", "CUDA driver not available" },
	{ CMS_ERR_DRIVER, "CMS_ERR_DRIVER", "CUDA driver call failed" },
	{ CMS_ERR_OUT_OF_DEVICE_MEMORY, "CMS_ERR_OUT_OF_DEVICE_MEMORY", "out of device memory" },
	{ CMS_ERR_OUT_OF_HOST_MEMORY, "CMS_ERR_OUT_OF_HOST_MEMORY", "out of host memory" },
	{ CMS_ERR_NOT_FOUND, "CMS_ERR_NOT_FOUND", "no such tag, region or allocation" },
	{ CMS_ERR_EXISTS, "CMS_ERR_EXISTS", "a region with this tag exists on this device" },
	{ CMS_ERR_ALREADY_PAUSED, "CMS_ERR_ALREADY_PAUSED", "already paused" },
	{ CMS_ERR_NOT_PAUSED, "CMS_ERR_NOT_PAUSED", "not paused" },
	{ CMS_ERR_PAUSED, "CMS_ERR_PAUSED", "region is paused" },
	{ CMS_ERR_INVALID_DEVICE, "CMS_ERR_INVALID_DEVICE", "invalid device ordinal" },
	{ CMS_ERR_NOT_SUPPORTED, "CMS_ERR_NOT_SUPPORTED", "not supported by the device or driver" },
	{ CMS_ERR_STRUCT_SIZE, "CMS_ERR_STRUCT_SIZE",
	  "bad struct_size or unknown non-zero fields" },
	{ CMS_ERR_NOT_BASE, "CMS_ERR_NOT_BASE", "pointer is inside an allocation, not its base" },
	{ CMS_ERR_ROLLBACK_FAILED, "CMS_ERR_ROLLBACK_FAILED", "rollback after a failure failed" },
	{ CMS_ERR_NO_DEVICE, "CMS_ERR_NO_DEVICE", "no CUDA device" },
	{ CMS_ERR_INTERNAL, "CMS_ERR_INTERNAL", "internal error" },
	{ CMS_ERR_FORKED, "CMS_ERR_FORKED",
	  "context belongs to the parent of this forked process" },
	{ CMS_ERR_PROTOCOL, "CMS_ERR_PROTOCOL", "malformed or unsupported IPC message" },
	{ CMS_ERR_PERMISSION, "CMS_ERR_PERMISSION", "peer not allowed" },
	{ CMS_ERR_TIMEOUT, "CMS_ERR_TIMEOUT", "peer did not answer in time" },
	{ CMS_ERR_DISCONNECTED, "CMS_ERR_DISCONNECTED", "peer disconnected" },
	{ CMS_ERR_LAYOUT_CHANGED, "CMS_ERR_LAYOUT_CHANGED", "exported layout changed" },
	{ CMS_ERR_REFUSED, "CMS_ERR_REFUSED", "request refused" },
	{ CMS_ERR_IO, "CMS_ERR_IO", "system call failed" },
	{ CMS_ERR_FROZEN, "CMS_ERR_FROZEN", "region is frozen (read-only)" },
	{ CMS_ERR_VERIFY_FAILED, "CMS_ERR_VERIFY_FAILED",
	  "content restored differs from the content paused" },
};

static const struct status_desc *find_status(cms_status st)
{
	size_t i;

	for (i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++)
		if (statuses[i].status == st)
			return &statuses[i];
	return NULL;
}

CMS_API const char *cms_status_name(cms_status status)
{
	const struct status_desc *d = find_status(status);

	return d ? d->name : "CMS_ERR_UNKNOWN_STATUS";
}

CMS_API const char *cms_status_string(cms_status status)
{
	const struct status_desc *d = find_status(status);

	return d ? d->text : "unknown status code";
}

CMS_API const char *cms_last_error(void)
{
	return tls_message;
}

CMS_API size_t cms_last_error_message(char *buf, size_t len)
{
	size_t n = strlen(tls_message);

	if (buf && len) {
		size_t c = n < len - 1 ? n : len - 1;

		memcpy(buf, tls_message, c);
		buf[c] = '\0';
	}
	return n;
}

cms_status cms_set_error(cms_status st, const char *fmt, ...)
{
	char raw[sizeof(tls_message)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	cms_text_escape(tls_message, sizeof(tls_message), raw);
	return st;
}

cms_status cms_rollback_status(const cms_context *ctx, cms_status st, const char *saved,
			       cms_status rb, const char *what)
{
	char why[512];

	if (!rb)
		return cms_set_error(st, "%s", saved);
	cms_last_error_message(why, sizeof(why));
	cms_log(ctx, CMS_LOG_ERROR, "%s rollback incomplete: %s", what, why);
	return cms_set_error(CMS_ERR_ROLLBACK_FAILED, "%s; rollback failed too: %s", saved, why);
}

cms_status cms_cu_error(const struct cms_driver *drv, CUresult res, const char *call)
{
	const char *desc = NULL;
	size_t name_len = strcspn(call, "(");
	cms_status st;

	switch (res) {
	case CUDA_ERROR_OUT_OF_MEMORY:
		st = CMS_ERR_OUT_OF_DEVICE_MEMORY;
		break;
	case CUDA_ERROR_INVALID_DEVICE:
		st = CMS_ERR_INVALID_DEVICE;
		break;
	case CUDA_ERROR_NOT_SUPPORTED:
		st = CMS_ERR_NOT_SUPPORTED;
		break;
	case CUDA_ERROR_NO_DEVICE:
		st = CMS_ERR_NO_DEVICE;
		break;
	case CUDA_ERROR_NOT_INITIALIZED:
	case CUDA_ERROR_DEINITIALIZED:
	case CUDA_ERROR_STUB_LIBRARY:
		st = CMS_ERR_NO_DRIVER;
		break;
	default:
		st = CMS_ERR_DRIVER;
		break;
	}
	if (drv->cuGetErrorString)
		drv->cuGetErrorString(res, &desc);
	return cms_set_error(st, "%.*s failed: %s (%s)", (int)name_len, call,
			     cms_driver_error_name(drv, res), desc ? desc : "no description");
}

CMS_API uint32_t cms_version(void)
{
	return CMS_VERSION_NUMBER;
}

#define CMS_STR2(x) #x
#define CMS_STR(x) CMS_STR2(x)
CMS_API const char *cms_version_string(void)
{
	return CMS_STR(CMS_VERSION_MAJOR) "." CMS_STR(CMS_VERSION_MINOR) "." CMS_STR(
		CMS_VERSION_PATCH);
}
