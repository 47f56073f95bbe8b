/* shim/dropin/dropin.h: what the drop-in libnvrtc.so.13 and libnvJitLink.so.13 share: finding
 * and loading the real library, the lazy resolution of the generated trampolines, and option
 * lists with one option added.  Each drop-in is one shared object built from dropin.c, its own
 * file (nvrtc.c, nvjitlink.c) and the trampolines shim/dropin/gen.sh generates from the real
 * library's exports.
 */
#ifndef CUBPF_SHIM_DROPIN_H
#define CUBPF_SHIM_DROPIN_H

#include <stddef.h>

struct dropin_lib {
	const char *soname;           /* "libnvrtc.so.13": the file name searched for */
	const char *env;              /* "CUBPF_REAL_LIBNVRTC": an explicit path, used alone */
	const char *const *names;     /* exported names, in slot order */
	void **slots;                 /* the trampolines' table (generated) */
	size_t count;
	void *missing;                /* what a slot holds when the name cannot be resolved */
	void *missing_string;         /* the same for the *ErrorString functions (return a text) */
	void *handle;                 /* the real library, once loaded */
	char path[4096];              /* its path, or why none was found */
};

/* Loads the real library and fills every slot (missing ones with lib->missing).  Called once,
 * under pthread_once, by the library's lazy target.  Returns 0, or -1 with lib->path saying
 * what was searched (every slot then holds lib->missing). */
int shim_dropin_load(struct dropin_lib *lib);

/* Slot i after loading. */
void *shim_dropin_slot(struct dropin_lib *lib, unsigned index);
/* Slot i, loading the real library on the first call (once per process: every drop-in is a
 * shared object of its own with one library). */
void *shim_dropin_lazy_slot(struct dropin_lib *lib, unsigned index);

/* 1 when CUBPF_DISABLE is set to anything but "" or "0": the drop-in only forwards. */
int shim_dropin_disabled(void);

/* 1 when one of opts[0..n) equals one of the NULL-terminated names. */
int shim_dropin_has_option(int n, const char *const *opts, const char *const *names);

/* A copy of opts[0..n) with extra appended, in a malloc'd array the caller frees (the strings
 * are not copied); NULL when out of memory. */
const char **shim_dropin_add_option(int n, const char *const *opts, const char *extra);

/* One log line "cubpf: ..." (level 1: warning, 2: info, 3: debug; CUBPF_LOG chooses, warn by
 * default), written to CUBPF_LOG_FD when set (cubpf run), else stderr, as the shim's are. */
void shim_dropin_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The real function for a name of the generated table (an intercepted one). */
void *shim_dropin_real(struct dropin_lib *lib, const char *name);

#endif
