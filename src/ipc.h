/* SPDX-License-Identifier: MIT */
/* ipc.h - private declarations shared by ipc_export.c, ipc_import.c and control.c. */
#ifndef CMS_IPC_H
#define CMS_IPC_H

#include "internal.h"
#include "ipc_proto.h"
#include "ipc_sock.h"

/* Deadline of one message's I/O once it has started (a stuck peer costs at most this). */
#define CMS_IPC_IO_MS 5000
#define CMS_IPC_DEFAULT_TIMEOUT_MS 10000
/* Deadline of a whole grant (layout + every descriptor) after its first message. */
#define CMS_IPC_GRANT_MS 60000

/* One region published by one exporter. */
struct cms_ipc_pub {
	cms_exporter *exp;
	struct cms_region *region; /* holds a reference (refs) */
	uint32_t access;	   /* CMS_IPC_ACCESS_* */
	bool waiting;		   /* a revocation waits for its importers; exp->lock */
	struct cms_ipc_pub *next;  /* in exp->pubs; exp->lock */
	struct cms_ipc_pub *rnext; /* in region->ipc; region lock */
};

/* Copies a uid allow-list (n may be 0); *out NULL when n is 0. */
cms_status cms_ipc_copy_uids(const uint32_t *uids, uint32_t n, uint32_t **out);

/* Importers connected to the region through any exporter (region lock held). */
uint32_t cms_ipc_importers(struct cms_region *r);

/* Starts a thread with every signal blocked (the application's handlers stay its own). */
int cms_ipc_thread(pthread_t *t, void *(*fn)(void *), void *arg);

/* Wakes a poll loop through its pipe. */
void cms_ipc_wake(int fd);

#endif /* CMS_IPC_H */
