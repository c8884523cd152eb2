/* SPDX-License-Identifier: MIT */
/*
 * sim_io.c - file I/O faults for the library's DISK policy: the library asks
 * cmssim_io_hook() before each file write, read or sync it makes (only when the
 * loaded driver exports the hook, i.e. only with the simulation), and an
 * armed fault makes that call fail with the errno the test chose.
 */
#include <pthread.h>
#include <stdint.h>

#include "sim_internal.h"

static pthread_mutex_t io_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t io_left[4]; /* per op: calls until the fault fires; 0: disarmed */
static int io_errno[4];

SIM_EXPORT int cmssim_fail_io(int op, uint64_t nth, int err)
{
	if (op < CMSSIM_IO_WRITE || op > CMSSIM_IO_SYNC)
		return -1;
	if ((nth == 0) != (err == 0))
		return -1;
	pthread_mutex_lock(&io_lock);
	io_left[op] = nth;
	io_errno[op] = err;
	pthread_mutex_unlock(&io_lock);
	return 0;
}

void sim_io_fork_prepare(void)
{
	pthread_mutex_lock(&io_lock);
}

void sim_io_fork_parent(void)
{
	pthread_mutex_unlock(&io_lock);
}

void sim_io_fork_child(void)
{
	pthread_mutex_unlock(&io_lock); /* held by the forking thread, whose copy runs here */
}

SIM_EXPORT int cmssim_io_hook(int op)
{
	int err = 0;

	if (op < CMSSIM_IO_WRITE || op > CMSSIM_IO_SYNC)
		return 0;
	pthread_mutex_lock(&io_lock);
	if (io_left[op] && !--io_left[op]) {
		err = io_errno[op];
		io_errno[op] = 0;
	}
	pthread_mutex_unlock(&io_lock);
	return err;
}
