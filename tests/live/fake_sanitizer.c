/* A fake Compute Sanitizer library for the CPU tests of shim/live/sanitizer.c.
 *
 * It exports the functions cubpf uses (shim/live/sanitizer.h), appends one line per call to the
 * file FAKE_SAN_LOG ("loaded" when the library is opened, "subscribe", "enable D", "addpatches
 * PATH", "patchinsn ID NAME", "patchmodule M", "setlaunch F UD", "memcpy N"), and fires
 * SANITIZER_CBID_LAUNCH_BEGIN at every launch of the fake driver (tests/shim/fake_driver.c,
 * through its launch observer).  Its "device memory" is host memory, as the fake driver's.
 * FAKE_SAN_FAIL=patchmodule|addpatches|subscribe makes that call fail (error 7).
 * sanitizerPatchModule called from inside a launch's callback logs "patchmodule inside a launch"
 * and fails (error 8): the real library deadlocks there on a launch to a created stream.
 * FAKE_SAN_SLOW_OWN_MS=N: a launch of cubpf's clock kernel from a thread other than the main
 * one logs "own launch elsewhere" and waits N ms before its callback, so that a test can make
 * the application prepare a context meanwhile (the lock-order case of test_san's t_own_launch). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shim/live/sanitizer.h"

#define EXPORT __attribute__((visibility("default")))

static shim_san_callback callback;
static void *callback_user;
static int launches_enabled;
static __thread int in_launch;

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...)
{
	const char *path = getenv("FAKE_SAN_LOG");
	FILE *f = path && *path ? fopen(path, "a") : NULL;
	if (!f)
		return;
	va_list ap;
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
	fclose(f);
}

static int fails(const char *what)
{
	const char *e = getenv("FAKE_SAN_FAIL");
	return e && !strcmp(e, what);
}

__attribute__((constructor)) static void loaded(void)
{
	logf_("loaded");
}

/* The fake driver's launch observer: one LAUNCH_BEGIN, inside the launch call. */
static void fire(void *ctx, void *module, void *f, const char *name, void *stream)
{
	if (!callback || !launches_enabled)
		return;
	static uintptr_t grid;
	struct shim_san_launch_data ld = {
		.context = ctx, .stream = stream, .hStream = (shim_san_stream)stream,
		.module = module, .function = f, .functionName = name,
		.gridDim_x = 1, .gridDim_y = 1, .gridDim_z = 1,
		.blockDim_x = 32, .blockDim_y = 1, .blockDim_z = 1,
		.gridId = ++grid, .hLaunch = (shim_san_launch)(0x1a000 + grid),
	};
	logf_("launch_begin %s", name);
	const char *slow = getenv("FAKE_SAN_SLOW_OWN_MS");
	if (slow && !strcmp(name, "cubpf_clock") && gettid() != getpid()) {
		logf_("own launch elsewhere");
		usleep((useconds_t)atoi(slow) * 1000);
	}
	in_launch = 1;
	callback(callback_user, SHIM_SAN_DOMAIN_LAUNCH, SHIM_SAN_CBID_LAUNCH_BEGIN, &ld);
	in_launch = 0;
}

EXPORT shim_san_result sanitizerSubscribe(shim_san_subscriber *sub, shim_san_callback cb,
					  void *user)
{
	logf_("subscribe");
	if (fails("subscribe"))
		return 7;
	const char *drv = getenv("CUBPF_REAL_LIBCUDA");
	void *h = drv ? dlopen(drv, RTLD_NOW | RTLD_NOLOAD) : NULL;
	void (*set)(void *) = h ? (void (*)(void *))dlsym(h, "fake_set_launch_observer") : NULL;
	if (set)
		set((void *)fire);
	callback = cb;
	callback_user = user;
	*sub = (shim_san_subscriber)0x5ab;
	return 0;
}

EXPORT shim_san_result sanitizerUnsubscribe(shim_san_subscriber sub)
{
	(void)sub;
	logf_("unsubscribe");
	callback = NULL;
	return 0;
}

EXPORT shim_san_result sanitizerEnableDomain(uint32_t enable, shim_san_subscriber sub, int domain)
{
	(void)sub;
	logf_("enable %d", domain);
	if (domain == SHIM_SAN_DOMAIN_LAUNCH)
		launches_enabled = enable != 0;
	return 0;
}

EXPORT shim_san_result sanitizerAddPatchesFromFile(const char *path, void *ctx)
{
	(void)ctx;
	/* the file must be a cubin (ELF) */
	FILE *f = fopen(path, "rb");
	char magic[4] = {0};
	size_t n = f ? fread(magic, 1, 4, f) : 0;
	if (f)
		fclose(f);
	logf_("addpatches %s %s", n == 4 && !memcmp(magic, "\177ELF", 4) ? "elf" : "not-elf", path);
	return fails("addpatches") || n != 4 ? 7 : 0;
}

EXPORT shim_san_result sanitizerPatchInstructions(int id, void *module, const char *name)
{
	logf_("patchinsn %d %p %s", id, module, name);
	return 0;
}

EXPORT shim_san_result sanitizerPatchModule(void *module)
{
	if (in_launch) {
		logf_("patchmodule inside a launch");
		return 8;
	}
	logf_("patchmodule %p", module);
	return fails("patchmodule") ? 7 : 0;
}

EXPORT shim_san_result sanitizerSetLaunchCallbackData(shim_san_launch launch, void *f,
						      shim_san_stream stream, const void *ud)
{
	(void)launch, (void)stream;
	logf_("setlaunch %p %p", f, ud);
	return 0;
}

EXPORT shim_san_result sanitizerAlloc(void *ctx, void **dev, size_t size)
{
	(void)ctx;
	*dev = calloc(1, size);
	return *dev ? 0 : 2;
}

EXPORT shim_san_result sanitizerMemcpyHostToDeviceAsync(void *dst, void *src, size_t n,
							shim_san_stream stream)
{
	(void)stream;
	memcpy(dst, src, n);
	logf_("memcpy %zu", n);
	return 0;
}

EXPORT shim_san_result sanitizerGetResultString(shim_san_result r, const char **s)
{
	*s = r == 7 ? "SANITIZER_ERROR_FAKE" : "other";
	return 0;
}
