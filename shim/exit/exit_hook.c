/* shim/exit/exit_hook.c: libcubpf-exit.so, which `cubpf run` preloads.
 *
 * A process that ends with _exit() runs no exit handlers: a fork()ed worker (Python
 * multiprocessing's "fork" workers, a launcher's children, most C programs' fork children)
 * would lose what the shim had not yet written of its trace and its last map snapshot.  This
 * library's _exit and _Exit call the hook the shim registered (shim_exit_hook_set, looked up
 * by the shim when it starts) and then the C library's.  The hook itself decides whether the
 * process is the one that probes (a vfork child shares the parent's memory and must change
 * nothing).  Built without sanitizers and linked against glibc only, so that any program may
 * preload it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

static void (*_Atomic hook)(void);
static void (*real_exit)(int), (*real_Exit)(int);

/* Resolved at load, not at _exit: a vfork child calling dlsym could meet a lock the suspended
 * parent's other threads hold. */
__attribute__((constructor)) static void resolve(void)
{
	real_exit = (void (*)(int))dlsym(RTLD_NEXT, "_exit");
	real_Exit = (void (*)(int))dlsym(RTLD_NEXT, "_Exit");
}

EXPORT void shim_exit_hook_set(void (*fn)(void))
{
	atomic_store(&hook, fn);
}

static _Noreturn void leave(void (*real)(int), int status)
{
	void (*fn)(void) = atomic_load(&hook);
	if (fn)
		fn();
	if (real)
		real(status);
	for (;;)
		syscall(SYS_exit_group, status);
}

EXPORT _Noreturn void _exit(int status)
{
	leave(real_exit, status);
}

EXPORT _Noreturn void _Exit(int status)
{
	leave(real_Exit ? real_Exit : real_exit, status);
}
