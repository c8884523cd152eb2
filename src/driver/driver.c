/* SPDX-License-Identifier: MIT */
/* driver.c - dlopen the CUDA driver and resolve entry points with cuGetProcAddress. */
#include "driver.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumemsaver.h"

static const char *driver_path(const char *path)
{
	const char *env;

	if (path && path[0])
		return path;
	env = secure_getenv(CMS_DRIVER_ENV);
	if (env && env[0])
		return env;
	return CMS_DRIVER_DEFAULT;
}

static int resolve(struct cms_driver *d, char *err, size_t errlen)
{
	cms_cuGetProcAddress_v2_fn gpa2;
	cms_cuGetProcAddress_v1_fn gpa1 = NULL;
	CUresult res;
	int qstatus;
	void *fn;

	gpa2 = (cms_cuGetProcAddress_v2_fn)dlsym(d->dl, "cuGetProcAddress_v2");
	if (!gpa2)
		gpa1 = (cms_cuGetProcAddress_v1_fn)dlsym(d->dl, "cuGetProcAddress");
	if (!gpa2 && !gpa1) {
		snprintf(err, errlen,
			 "driver library has no cuGetProcAddress (driver older than CUDA 11.3?)");
		return CMS_ERR_NO_DRIVER;
	}
#define CMS_X_RESOLVE(name, ret, args)                                                           \
	fn = NULL;                                                                               \
	qstatus = CU_GET_PROC_ADDRESS_SUCCESS;                                                   \
	res = gpa2 ? gpa2(#name, &fn, CMS_CUDA_API_VERSION, CU_GET_PROC_ADDRESS_DEFAULT,         \
			  &qstatus) :                                                            \
		     gpa1(#name, &fn, CMS_CUDA_API_VERSION, CU_GET_PROC_ADDRESS_DEFAULT);        \
	if (res != CUDA_SUCCESS || qstatus != CU_GET_PROC_ADDRESS_SUCCESS || !fn) {              \
		snprintf(err, errlen,                                                            \
			 "driver has no %s at API version %d (cuGetProcAddress: %d, status %d)", \
			 #name, CMS_CUDA_API_VERSION, res, qstatus);                             \
		return CMS_ERR_NO_DRIVER;                                                        \
	}                                                                                        \
	d->name = (ret(*) args)fn;
	CMS_CUDA_FUNCTIONS(CMS_X_RESOLVE)
#undef CMS_X_RESOLVE
	return 0;
}

int cms_driver_open(struct cms_driver *d, const char *path, char *err, size_t errlen)
{
	const char *p = driver_path(path);
	const char *name;
	CUresult res;
	int st;

	memset(d, 0, sizeof(*d));
	d->dl = dlopen(p, RTLD_NOW | RTLD_LOCAL);
	if (!d->dl) {
		const char *why = dlerror();

		snprintf(err, errlen, "cannot load CUDA driver %s: %s", p,
			 why ? why : "unknown error");
		return CMS_ERR_NO_DRIVER;
	}
	st = resolve(d, err, errlen);
	if (st)
		goto err_close;
	d->host_alloc_hook = (int (*)(size_t))dlsym(d->dl, "cmssim_host_alloc_hook");
	d->host_free_hook = (void (*)(size_t))dlsym(d->dl, "cmssim_host_free_hook");
	d->io_hook = (int (*)(int))dlsym(d->dl, "cmssim_io_hook");
	d->is_sim = dlsym(d->dl, "cmssim_get_counters") != NULL;
	d->tunables = (const char *(*)(void))dlsym(d->dl, "cmssim_tunables");
	res = d->cuInit(0);
	if (res != CUDA_SUCCESS) {
		name = cms_driver_error_name(d, res);
		st = (res == CUDA_ERROR_NO_DEVICE) ? CMS_ERR_NO_DEVICE : CMS_ERR_NO_DRIVER;
		snprintf(err, errlen, "cuInit failed for %s: %s", p, name);
		goto err_close;
	}
	if (d->cuDriverGetVersion(&d->version) != CUDA_SUCCESS)
		d->version = 0;
	return 0;

err_close:
	dlclose(d->dl);
	memset(d, 0, sizeof(*d));
	return st;
}

void cms_driver_close(struct cms_driver *d)
{
	if (d->dl)
		dlclose(d->dl);
	memset(d, 0, sizeof(*d));
}

const char *cms_driver_error_name(const struct cms_driver *d, CUresult res)
{
	const char *name = NULL;

	if (d->cuGetErrorName && d->cuGetErrorName(res, &name) == CUDA_SUCCESS && name)
		return name;
	return "CUDA_ERROR_(unknown)";
}
