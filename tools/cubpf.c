/* cubpf: the command-line front end.  Dispatches to one function per subcommand. */
#include <stdio.h>
#include <string.h>

#include "tools/commands.h"

struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *usage;
	const char *summary;
};

static const struct command commands[] = {
	{"run", cmd_run, "run [-t TOOL | -p PROG.bpf.o ...] [-k KERNEL_GLOB] [-o TRACE] -- CMD ARGS...",
	 "run a program with probes in its CUDA kernels"},
	{"inspect", cmd_inspect, "inspect [--json] FILE...",
	 "list fatbins, cubins, PTX and kernels in executables, libraries, fatbins, cubins, PTX"},
	{"verify", cmd_verify, "verify PROG.bpf.o", "run the verifier on a probe object and print its log"},
	{"disasm", cmd_disasm, "disasm PROG.bpf.o", "disassemble the programs of a probe object"},
	{"ptx", cmd_ptx, "ptx -p PROG.bpf.o IN.ptx -o OUT.ptx", "instrument a PTX file offline"},
	{"trace", cmd_trace, "trace info|dump|stats|export|replay FILE...|DIR",
	 "read recorded trace files (one, or every process's of a run)"},
	{"cache", cmd_cache, "cache ls|stats|clear", "look at or clear the instrumented-module cache"},
	{"cdi", cmd_cdi, "cdi [--container-path DIR] [--env] [--probe TOOL|OBJ] [--trace DIR]",
	 "print a CDI spec that puts cubpf into containers"},
	{"cdi-hook", cmd_cdi_hook, "cdi-hook --preload LIB... < STATE",
	 "the OCI hook of that spec (adds LIBs to the container's /etc/ld.so.preload)"},
};

static void usage(FILE *out)
{
	fprintf(out, "usage: cubpf COMMAND [ARGS...]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
	fprintf(out, "\n'cubpf COMMAND --help' describes one command.  Usage lines:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(out, "  cubpf %s\n", commands[i].usage);
}

int cmd_not_available(const char *name, const char *issue)
{
	fprintf(stderr, "cubpf: '%s' is not in this build yet (tracked in issue %s)\n", name, issue);
	return 2;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		printf("cubpf %s\n", CUBPF_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "cubpf: unknown command '%s' (see 'cubpf --help')\n", argv[1]);
	return 2;
}
