/* shim/dropin/nvrtc.c: cubpf's libnvrtc.so.13.  Every NVRTC function is forwarded to the real
 * library (a generated one-jump trampoline); nvrtcCompileProgram gets `-lineinfo` added when
 * the program asked for neither it nor -G, so that the cubin NVRTC makes carries the PTX it was
 * assembled from (.nv_debug_ptx_txt), which cubpf reads at module load to instrument it.  Line
 * info changes no machine code (tests/shim/test_dropin.c compares the SASS with and without)
 * and the program's own options are passed unchanged.  CUBPF_DISABLE=1: pure forwarding.
 */
#include <stdlib.h>

#include "shim/dropin/dropin.h"

/* nvrtcResult and nvrtcProgram as nvrtc.h has them (its header is not needed to build). */
typedef int nvrtc_result;
enum { NVRTC_INTERNAL_ERROR = 11 };

enum {
#define DROPIN_EXPORT(i, name, ic) SLOT_##name = i,
#include "exports.def"
#undef DROPIN_EXPORT
	NSLOTS
};

static const char *const names[] = {
#define DROPIN_EXPORT(i, name, ic) #name,
#include "exports.def"
#undef DROPIN_EXPORT
};

extern void *shim_nvrtc_slots[];

static nvrtc_result missing(void)
{
	return NVRTC_INTERNAL_ERROR;
}

static const char *missing_string(void)
{
	return "NVRTC_ERROR_INTERNAL_ERROR (cubpf: the real libnvrtc.so.13 was not found)";
}

static struct dropin_lib lib = {
	.soname = "libnvrtc.so.13",
	.env = "CUBPF_REAL_LIBNVRTC",
	.names = names,
	.slots = shim_nvrtc_slots,
	.count = NSLOTS,
	.missing = (void *)missing,
	.missing_string = (void *)missing_string,
};

__attribute__((visibility("hidden"))) void *shim_nvrtc_lazy_target(unsigned index)
{
	return shim_dropin_lazy_slot(&lib, index);
}

typedef nvrtc_result (*compile_fn)(void *prog, int n, const char *const *opts);

/* Options that already give line info (-G implies it; -lineinfo beside -G is refused by
 * nothing but adds nothing). */
static const char *const with_lines[] = {
	"-lineinfo", "--generate-line-info", "-G", "--device-debug", NULL,
};

__attribute__((visibility("default")))
nvrtc_result nvrtcCompileProgram(void *prog, int n, const char *const *opts)
{
	compile_fn real = (compile_fn)shim_nvrtc_lazy_target(SLOT_nvrtcCompileProgram);
	if (shim_dropin_disabled() || n < 0 || shim_dropin_has_option(n, opts, with_lines))
		return real(prog, n, opts);
	const char **more = shim_dropin_add_option(n, opts, "-lineinfo");
	if (!more)
		return real(prog, n, opts);
	shim_dropin_log(3, "nvrtcCompileProgram: -lineinfo added to the program's %d options", n);
	nvrtc_result rc = real(prog, n + 1, more);
	free(more);
	return rc;
}
