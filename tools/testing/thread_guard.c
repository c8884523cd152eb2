/* SPDX-License-Identifier: MIT */
/*
 * thread_guard.c - LD_PRELOAD module for the ctest suites labelled
 * `nothreads` (tests/CMakeLists.txt): those skip the ThreadSanitizer stage
 * of tools/scripts/test.sh because neither the test nor the library starts a
 * thread in them. In the plain build they run with this module preloaded:
 * any pthread_create aborts the test with a message, so the label cannot
 * silently become untrue when a suite or the library changes.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	static const char msg[] =
		"thread_guard: this suite is labelled 'nothreads' (no ThreadSanitizer run) but "
		"started a thread: remove the label in tests/CMakeLists.txt\n";

	(void)thread;
	(void)attr;
	(void)fn;
	(void)arg;
	if (write(STDERR_FILENO, msg, strlen(msg)) < 0)
		abort();
	abort();
}
