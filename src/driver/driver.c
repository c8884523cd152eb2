/* SPDX-License-Identifier: MIT */
/* driver.c - dlopen the CUDA driver and resolve entry points with cuGetProcAddress. */
#include "driver.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cumemsaver.h"

/*
 * The driver path "sim" (CMS_DRIVER_LIBRARY=sim, or cms_context_options.driver_path) names
 * the host simulation installed with the library: CMS_SIM_FILE in the directory of
 * libcumemsaver.so.1, looked for in sim_dirs in turn (beside it: the Python package's
 * _native/; <libdir>/cumemsaver/: cmake --install; src/sim/: the build tree).
 */
#define CMS_DRIVER_SIM "sim"
#define CMS_SIM_FILE "libcumemsaver-sim.so"
#define CMS_LIBRARY_SONAME "libcumemsaver.so.1"
#define CMS_SIM_HINT "; CMS_DRIVER_LIBRARY=sim runs on the host simulation"

static const char *const sim_dirs[] = { "", "cumemsaver/", "src/sim/" };

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

/*
 * The file of the libcumemsaver.so.1 this loader belongs to, into buf: the object holding
 * this code, or, in a program that compiles the loader in (the tools, the tests), the
 * library the program links. Returns 0, or -1 when there is none (static library).
 */
static int library_file(char *buf, size_t len)
{
	struct link_map *map = NULL;
	const char *file = NULL, *base;
	void *lib = NULL;
	Dl_info info;
	int n;

	if (dladdr(sim_dirs, &info) && info.dli_fname) {
		base = strrchr(info.dli_fname, '/');
		base = base ? base + 1 : info.dli_fname;
		if (!strncmp(base, "libcumemsaver", strlen("libcumemsaver")))
			file = info.dli_fname;
	}
	if (!file) {
		lib = dlopen(CMS_LIBRARY_SONAME, RTLD_LAZY | RTLD_NOLOAD);
		if (lib && !dlinfo(lib, RTLD_DI_LINKMAP, &map) && map && map->l_name[0])
			file = map->l_name;
	}
	n = file ? snprintf(buf, len, "%s", file) : -1;
	if (lib)
		dlclose(lib);
	return (n >= 0 && (size_t)n < len) ? 0 : -1;
}

/* The host simulation installed with the library, into buf (CMS_DRIVER_SIM). */
static int sim_path(char *buf, size_t len, char *err, size_t errlen)
{
	char dir[PATH_MAX];
	char *slash;
	size_t i;
	int n;

	if (library_file(dir, sizeof(dir))) {
		snprintf(err, errlen,
			 "driver \"" CMS_DRIVER_SIM "\": no " CMS_LIBRARY_SONAME
			 " in this process to find " CMS_SIM_FILE " beside; name the simulation by "
			 "its path");
		return CMS_ERR_NO_DRIVER;
	}
	slash = strrchr(dir, '/');
	if (slash)
		slash[1] = '\0';
	else
		dir[0] = '\0';
	for (i = 0; i < sizeof(sim_dirs) / sizeof(sim_dirs[0]); i++) {
		n = snprintf(buf, len, "%s%s" CMS_SIM_FILE, dir, sim_dirs[i]);
		if (n >= 0 && (size_t)n < len && !access(buf, R_OK))
			return 0;
	}
	snprintf(err, errlen,
		 "driver \"" CMS_DRIVER_SIM "\": no " CMS_SIM_FILE " in %s, %scumemsaver/ or "
		 "%ssrc/sim/ (the directory of " CMS_LIBRARY_SONAME "); name it by its path",
		 dir, dir, dir);
	return CMS_ERR_NO_DRIVER;
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
	char sim[PATH_MAX];
	const char *name;
	CUresult res;
	int is_sim;
	int st;

	memset(d, 0, sizeof(*d));
	is_sim = !strcmp(p, CMS_DRIVER_SIM);
	if (is_sim) {
		st = sim_path(sim, sizeof(sim), err, errlen);
		if (st)
			return st;
		p = sim;
	}
	d->dl = dlopen(p, RTLD_NOW | RTLD_LOCAL);
	if (!d->dl) {
		const char *why = dlerror();

		snprintf(err, errlen, "cannot load CUDA driver %s: %s%s", p,
			 why ? why : "unknown error", is_sim ? "" : CMS_SIM_HINT);
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
