/* A CUDA "application" for cubpf run on the CPU: loads a PTX module through libcuda.so.1 (the
 * shim, over the fake driver of tests/shim), launches its kernel 3 times (5 x 32 threads) and
 * exits with the status given as argv[1], so that the report is checked on a failing app too.
 * With a second argument it is a program of several processes (issue 17), started before it
 * makes any driver call, as launchers and worker pools are:
 *   fork     a fork()ed child makes the same calls
 *   exec     a child started by fork() + exec() of this program
 *   spawn    a child started by posix_spawn() of this program
 *   nocuda   a fork()ed child that never touches CUDA (must write no trace)
 * The parent waits for its child, then makes its own calls.  FAKE_APP_LINGER_S=N: N seconds
 * more before the exit. */
#include <dlfcn.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

typedef int (*load_fn)(void **, const void *);
typedef int (*getfn_fn)(void **, void *, const char *);
typedef int (*launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			 unsigned, void *, void **, void **);

static const char ptx[] =
	".version 8.0\n.target sm_90\n.address_size 64\n\n"
	".visible .entry tools_k(\n\t.param .u64 tools_k_param_0\n)\n{\n\tret;\n}\n";

static int use_cuda(const char *who)
{
	void *cu = dlopen("libcuda.so.1", RTLD_NOW);
	void *mod = NULL, *f = NULL;
	if (!cu) {
		fprintf(stderr, "fake_app: %s\n", dlerror());
		return 100;
	}
	if (((load_fn)dlsym(cu, "cuModuleLoadData"))(&mod, ptx) != 0 ||
	    ((getfn_fn)dlsym(cu, "cuModuleGetFunction"))(&f, mod, "tools_k") != 0) {
		fprintf(stderr, "fake_app: module load failed\n");
		return 101;
	}
	for (int i = 0; i < 3; i++)
		if (((launch_fn)dlsym(cu, "cuLaunchKernel"))(f, 5, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL))
			return 102;
	printf("fake_app: %sdone\n", who);
	fflush(stdout);
	return 0;
}

static int wait_child(pid_t pid)
{
	int st;
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return 103;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 104;
}

/* The child of mode, waited for; its exit status. */
static int child(const char *mode, const char *self)
{
	char *argv[] = {(char *)self, "0", NULL};
	pid_t pid;
	if (!strcmp(mode, "spawn"))
		return posix_spawn(&pid, self, NULL, NULL, argv, environ) ? 105 : wait_child(pid);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		if (!strcmp(mode, "exec")) {
			execv(self, argv);
			_exit(106);
		}
		_exit(!strcmp(mode, "nocuda") ? 0 : use_cuda("child "));
	}
	return wait_child(pid);
}

int main(int argc, char **argv)
{
	if (argc > 2) {
		int rc = child(argv[2], argv[0]);
		if (rc)
			return rc;
	}
	int rc = use_cuda("");
	if (rc)
		return rc;
	fprintf(stderr, "fake_app: a line of the app's own stderr\n");
	if (getenv("FAKE_APP_LINGER_S")) /* a process that lives on (its CUBPF_METRICS scraped) */
		sleep((unsigned)atoi(getenv("FAKE_APP_LINGER_S")));
	return argc > 1 ? atoi(argv[1]) : 0;
}
