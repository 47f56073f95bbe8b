/* tests/child.h: runs a test case's child in a forked process with its stderr captured, for
 * the test programs that load the shim in children (tests/shim/test_shim.c, tests/live/).  The
 * child sets its environment (`setup`), runs `fn` and exits through exit(), so that the shim's
 * exit report runs and lands in the captured stderr. */
#ifndef CUBPF_TESTS_CHILD_H
#define CUBPF_TESTS_CHILD_H

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs setup(arg) then fn() in a child; its stderr goes to err (NUL-terminated, cut to
 * errlen - 1).  Returns its wait status, or -1 when the child could not be made. */
static inline int child_run(void (*setup)(const void *), const void *arg, int (*fn)(void),
				 char *err, size_t errlen)
{
	char tmpl[] = "/tmp/cubpf-live-child-XXXXXX";
	int fd = mkstemp(tmpl), status = -1;
	if (fd < 0)
		return -1;
	unlink(tmpl);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		/* a crash must end the child, not land in cmocka's handler (which would go on
		 * running the remaining tests in the child) */
		static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
		for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
			signal(sigs[i], SIG_DFL);
		dup2(fd, 2);
		setup(arg);
		int rc = fn();
		fflush(NULL);
		exit(rc); /* runs the shim's exit report */
	}
	while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	ssize_t n = pread(fd, err, errlen - 1, 0);
	err[n > 0 ? n : 0] = 0;
	close(fd);
	return pid > 0 ? status : -1;
}

/* The child's exit code as a shell gives it (128 + signal when killed). */
static inline int child_code(int status)
{
	return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

/* A child's failure: "child: MESSAGE" on stdout (which the parent prints), and 1 to return. */
static inline int child_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline int child_fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("child: ");
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	return 1;
}

#endif
