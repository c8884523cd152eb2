// SPDX-License-Identifier: MIT

package cumemsaver

// The C side of the callbacks: trampolines that adapt the library's callback types to the
// Go functions exported in callbacks.go and log.go, and setters that store a cgo.Handle as
// the callbacks' user pointer (a file with //export may only declare in its preamble, so
// the definitions live here).

/*
#include <cumemsaver.h>
#include <stdint.h>

extern void cmsGoLog(void *user, int32_t level, char *message);
extern void cmsGoProgress(void *user, char *op, uint64_t done, uint64_t total);
extern cms_status cmsGoQuiesce(void *user, uint64_t epoch);
extern void cmsGoImportEvent(void *user, uint32_t event, uint64_t epoch);
extern cms_status cmsGoControl(void *user, cms_control_request *req);

static void cms_go_log_trampoline(void *user, int32_t level, const char *message)
{
	cmsGoLog(user, level, (char *)message);
}

void cms_go_set_log(cms_context_options *o, uintptr_t handle)
{
	o->log_fn = cms_go_log_trampoline;
	o->log_user = (void *)handle;
}

static void cms_go_progress_trampoline(void *user, const char *op, uint64_t done, uint64_t total)
{
	cmsGoProgress(user, (char *)op, done, total);
}

cms_status cms_go_progress_set(cms_context *ctx, uintptr_t handle)
{
	if (!handle)
		return cms_context_progress_set(ctx, NULL, NULL);
	return cms_context_progress_set(ctx, cms_go_progress_trampoline, (void *)handle);
}

static cms_status cms_go_quiesce_trampoline(void *user, cms_import *imp, uint64_t epoch)
{
	(void)imp;
	return cmsGoQuiesce(user, epoch);
}

static void cms_go_event_trampoline(void *user, cms_import *imp, uint32_t event, uint64_t epoch)
{
	(void)imp;
	cmsGoImportEvent(user, event, epoch);
}

void cms_go_set_import_callbacks(cms_import_options *o, uintptr_t handle, int quiesce, int event)
{
	o->quiesce_fn = quiesce ? cms_go_quiesce_trampoline : NULL;
	o->event_fn = event ? cms_go_event_trampoline : NULL;
	o->user = (void *)handle;
}

static cms_status cms_go_control_trampoline(void *user, const cms_control_request *req)
{
	return cmsGoControl(user, (cms_control_request *)req);
}

void cms_go_set_control(cms_control_options *o, uintptr_t handle)
{
	o->fn = cms_go_control_trampoline;
	o->user = (void *)handle;
}
*/
import "C"
