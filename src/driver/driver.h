/* SPDX-License-Identifier: MIT */
/*
 * driver.h - run-time loading of the CUDA driver (or of a library with the
 * same entry points, such as the host simulation). Self-contained: used by
 * the library and, compiled in again, by the project's tools and tests.
 */
#ifndef CMS_DRIVER_H
#define CMS_DRIVER_H

#include <stddef.h>

#include "cuda_api.h"

struct cms_driver {
	void *dl;
#define CMS_X_FIELD(name, ret, args) ret(*name) args;
	CMS_CUDA_FUNCTIONS(CMS_X_FIELD)
#undef CMS_X_FIELD
	/* Present only in the host simulation: lets it fail host allocations. */
	int (*host_alloc_hook)(size_t bytes);
	void (*host_free_hook)(size_t bytes);
	/* Present only in the host simulation: lets it fail file I/O (an errno, or 0). */
	int (*io_hook)(int op);
	int is_sim;
	/* Present only in the host simulation: its tunables (engine/tunables.c, "key=value,...").
	 */
	const char *(*tunables)(void);
	int version; /* cuDriverGetVersion */
};

/* Default library name and environment variable that overrides it. */
#define CMS_DRIVER_DEFAULT "libcuda.so.1"
#define CMS_DRIVER_ENV "CMS_DRIVER_LIBRARY"

/*
 * cms_driver_open - dlopens path (NULL: $CMS_DRIVER_LIBRARY via secure_getenv,
 * else libcuda.so.1), resolves every entry point with cuGetProcAddress at
 * CMS_CUDA_API_VERSION and calls cuInit(0). Returns 0 or a negative
 * cms_status (CMS_ERR_NO_DRIVER, CMS_ERR_NO_DEVICE, CMS_ERR_DRIVER) with a
 * message in err. On failure nothing stays loaded.
 */
int cms_driver_open(struct cms_driver *d, const char *path, char *err, size_t errlen);
void cms_driver_close(struct cms_driver *d);
/* "CUDA_ERROR_OUT_OF_MEMORY" (never NULL) */
const char *cms_driver_error_name(const struct cms_driver *d, CUresult res);

#endif /* CMS_DRIVER_H */
