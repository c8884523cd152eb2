/* SPDX-License-Identifier: MIT */
/* thread.c - starting the library's own threads. */
#include <signal.h>

#include "core_internal.h"

int cms_thread_start(pthread_t *thread, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int err;

	sigfillset(&all); /* inherited: the application's handlers stay on its own threads */
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(thread, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return err;
}
