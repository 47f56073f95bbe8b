/* shim/thread.c: the threads cubpf starts inside the application's process.
 *
 * A thread created with default attributes reserves RLIMIT_STACK of address space for its
 * stack (8 MiB on most systems): cubpf's handful of threads then cost an application tens of
 * MiB of its RLIMIT_AS (`ulimit -v`), and its own pthread_create failed where it succeeded
 * without cubpf.  cubpf's threads run short call chains (driver calls, formatting, zstd's
 * compression, a few KiB of locals), so they get SHIM_THREAD_STACK.  They also block every
 * signal: the application's signals are for the application's threads. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>

#include "shim/shim.h"

int shim_thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	sigset_t all, old;
	int rc = pthread_attr_init(&attr);
	if (rc)
		return rc;
	pthread_attr_setstacksize(&attr, SHIM_THREAD_STACK);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(t, &attr, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	return rc;
}
