/* tests/gpu/segv_trace.c: an LD_PRELOAD'able crash reporter for the GPU machine (no gdb there):
 * on SIGSEGV/SIGBUS/SIGABRT it writes the thread's backtrace (addresses with the objects they
 * lie in; resolve them on the build machine with addr2line on the same binary) and the loaded
 * objects' base addresses to stderr, then lets the signal kill the process as it would have.
 * SIGUSR2 (sent to one thread with tgkill) writes that thread's backtrace and lets it go on: a
 * hung process's threads, one by one (tests/gpu/stacks.sh). */
#define _GNU_SOURCE
#include <execinfo.h>
#include <link.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int phdr(struct dl_phdr_info *i, size_t size, void *data)
{
	(void)size, (void)data;
	char line[512];
	int n = snprintf(line, sizeof(line), "segv_trace: object %s base %#lx\n",
			 i->dlpi_name[0] ? i->dlpi_name : "(main)", (unsigned long)i->dlpi_addr);
	if (n > 0 && write(2, line, (size_t)n) < 0)
		return 1;
	return 0;
}

static void handler(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	void *frames[64];
	char line[128];
	int n = snprintf(line, sizeof(line), "segv_trace: signal %d at address %p, thread %d\n", sig,
			 si->si_addr, (int)gettid());
	if (write(2, line, (size_t)n) < 0)
		_exit(128 + sig);
	int k = backtrace(frames, 64);
	backtrace_symbols_fd(frames, k, 2);
	dl_iterate_phdr(phdr, NULL);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void stack_of_thread(int sig)
{
	static volatile int objects_listed;
	void *frames[64];
	char line[128];
	int n = snprintf(line, sizeof(line), "segv_trace: stack of thread %d (signal %d)\n",
			 (int)gettid(), sig);
	if (write(2, line, (size_t)n) < 0)
		return;
	int k = backtrace(frames, 64);
	backtrace_symbols_fd(frames, k, 2);
	if (!__atomic_exchange_n(&objects_listed, 1, __ATOMIC_SEQ_CST))
		dl_iterate_phdr(phdr, NULL);
}

__attribute__((constructor)) static void install(void)
{
	signal(SIGUSR2, stack_of_thread);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = handler;
	sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
	sigaction(SIGABRT, &sa, NULL);
}
