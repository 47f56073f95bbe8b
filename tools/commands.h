/* The cubpf subcommands: each lives in its own tools/cmd_NAME.c.  Private to tools/. */
#ifndef CUBPF_TOOLS_COMMANDS_H
#define CUBPF_TOOLS_COMMANDS_H

#define CUBPF_VERSION "0.1.0"

/* Every command gets argv with argv[0] = its own name and returns the exit status. */
int cmd_run(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_disasm(int argc, char **argv);
int cmd_ptx(int argc, char **argv);
int cmd_trace(int argc, char **argv);
int cmd_cache(int argc, char **argv);
int cmd_cdi(int argc, char **argv);
int cmd_cdi_hook(int argc, char **argv);

/* cubpf trace export --format sqlite (tools/cmd_export_sqlite.c): the n traces into one SQLite
 * database at out, written whole or not at all.  Returns the exit status. */
#include <stddef.h>
int cmd_export_sqlite(const char *out, const char *const *traces, size_t n);

/* For commands whose module has not landed yet: says so plainly, exit status 2. */
int cmd_not_available(const char *name, const char *issue);

#endif
