/* SPDX-License-Identifier: MIT */
/*
 * nvtx_inject.c - an NVTX tool for test_nvtx: loaded by the NVTX code in the
 * library through NVTX_INJECTION64_PATH (as Nsight Systems is), it records
 * each thread's range pushes and pops ("+name" / "-") in one list that the
 * test reads back with cms_nvtx_events().
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <nvtx3/nvToolsExt.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char events[16384];
static size_t used;

static void note(const char *sign, const char *name)
{
	pthread_mutex_lock(&lock);
	used += (size_t)snprintf(events + used, used < sizeof(events) ? sizeof(events) - used : 0,
				 "%s%s\n", sign, name);
	if (used > sizeof(events))
		used = sizeof(events);
	pthread_mutex_unlock(&lock);
}

static int push(const char *message)
{
	note("+", message);
	return 0;
}

static int pop(void)
{
	note("-", "");
	return 0;
}

/* The events so far, one a line; "" before any. */
__attribute__((visibility("default"))) const char *cms_nvtx_events(void);
const char *cms_nvtx_events(void)
{
	return events;
}

__attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get);
int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get)
{
	const NvtxExportTableCallbacks *cb = get(NVTX_ETID_CALLBACKS);
	NvtxFunctionTable table = NULL;
	unsigned int size = 0;

	if (!cb || !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) ||
	    size <= NVTX_CBID_CORE_RangePop)
		return 0;
	*table[NVTX_CBID_CORE_RangePushA] = (NvtxFunctionPointer)push;
	*table[NVTX_CBID_CORE_RangePop] = (NvtxFunctionPointer)pop;
	return 1;
}
