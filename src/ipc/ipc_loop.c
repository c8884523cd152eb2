/* SPDX-License-Identifier: MIT */
/*
 * ipc_loop.c - what the exporter, the importer and the control socket share
 * around their sockets (see ipc.h): argument checks of their constructors,
 * uid allow-lists, and the thread with its wake-up pipe that serves them.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ipc_internal.h"

cms_status cms_ipc_check_args(cms_context *ctx, const char *path, const void *out)
{
	if (!ctx || !path || !out)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "%s is NULL",
				     !ctx  ? "ctx" :
				     !path ? "path" :
					     "out");
	return cms_check_fork(ctx);
}

cms_status cms_ipc_options_init(void *opts, const void *init, size_t size)
{
	if (!opts)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "opts is NULL");
	memcpy(opts, init, size);
	return CMS_OK;
}

cms_status cms_ipc_check_path(const char *path)
{
	if (!path[0] || strlen(path) > CMS_IPC_PATH_MAX)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT,
				     "socket path is empty or longer than %d bytes",
				     CMS_IPC_PATH_MAX);
	return CMS_OK;
}

cms_status cms_ipc_copy_uids(const uint32_t *uids, uint32_t n, uint32_t **out)
{
	*out = NULL;
	if (!n)
		return CMS_OK;
	if (!uids)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "allowed_uids is NULL, count %u", n);
	*out = malloc(n * sizeof(**out));
	if (!*out)
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot copy the uid list");
	memcpy(*out, uids, n * sizeof(**out));
	return CMS_OK;
}

void cms_ipc_wake(int fd)
{
	char c = 1;
	ssize_t n = write(fd, &c, 1);

	(void)n; /* a full pipe already wakes the loop */
}

cms_status cms_ipc_loop_init(struct cms_ipc_loop *l)
{
	atomic_init(&l->stop, false);
	if (pipe2(l->wake, O_CLOEXEC | O_NONBLOCK)) {
		l->wake[0] = l->wake[1] = -1;
		return cms_set_error(CMS_ERR_IO, "pipe: %s", strerror(errno));
	}
	return CMS_OK;
}

cms_status cms_ipc_loop_start(struct cms_ipc_loop *l, void *(*fn)(void *), void *arg,
			      const char *what)
{
	if (cms_thread_start(&l->thread, fn, arg))
		return cms_set_error(CMS_ERR_IO, "cannot start the %s's thread", what);
	return CMS_OK;
}

int cms_ipc_loop_wait(struct cms_ipc_loop *l, int fd)
{
	struct pollfd pf[2] = { { fd, POLLIN, 0 }, { l->wake[0], POLLIN, 0 } };

	if (poll(pf, 2, -1) < 0)
		return 0;
	if (cms_ipc_loop_stopping(l))
		return -1;
	return pf[0].revents ? 1 : 0;
}

bool cms_ipc_loop_stopping(struct cms_ipc_loop *l)
{
	return atomic_load(&l->stop);
}

void cms_ipc_loop_stop(struct cms_ipc_loop *l)
{
	atomic_store(&l->stop, true);
	cms_ipc_wake(l->wake[1]);
	pthread_join(l->thread, NULL);
}

void cms_ipc_loop_fini(struct cms_ipc_loop *l)
{
	if (l->wake[0] >= 0) {
		close(l->wake[0]);
		close(l->wake[1]);
	}
	l->wake[0] = l->wake[1] = -1;
}

void cms_ipc_loop_drain(struct cms_ipc_loop *l)
{
	char drain[64];

	while (read(l->wake[0], drain, sizeof(drain)) > 0)
		;
}

void cms_ipc_timeout_until(int *timeout_ms, int64_t now, int64_t at)
{
	int64_t left = at > now ? at - now : 0;

	if (left < *timeout_ms)
		*timeout_ms = (int)left;
}
