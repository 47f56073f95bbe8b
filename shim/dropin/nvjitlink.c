/* shim/dropin/nvjitlink.c: cubpf's libnvJitLink.so.13.  Every nvJitLink function is forwarded
 * to the real library (a generated one-jump trampoline); nvJitLinkCreate (and the versioned
 * __nvJitLinkCreate_13_0 that nvJitLink.h calls it through) gets `-lineinfo` added when the
 * program asked for neither it nor -g, so that the linked cubin carries the PTX it was
 * assembled from (.nv_debug_ptx_txt.<hash>), which cubpf reads at module load.  Line info
 * changes no machine code (tests/shim/test_dropin.c) and the program's own options are passed
 * unchanged.  CUBPF_DISABLE=1: pure forwarding.
 */
#include <stdint.h>
#include <stdlib.h>

#include "shim/dropin/dropin.h"

/* nvJitLinkResult as nvJitLink.h has it (its header makes nvJitLinkCreate an inline function,
 * so it cannot be included here). */
typedef int jitlink_result;
enum { NVJITLINK_INTERNAL_ERROR = 6 };

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

extern void *shim_jitlink_slots[];

static jitlink_result missing(void)
{
	return NVJITLINK_INTERNAL_ERROR;
}

static struct dropin_lib lib = {
	.soname = "libnvJitLink.so.13",
	.env = "CUBPF_REAL_LIBNVJITLINK",
	.names = names,
	.slots = shim_jitlink_slots,
	.count = NSLOTS,
	.missing = (void *)missing,
	.missing_string = (void *)missing,
};

__attribute__((visibility("hidden"))) void *shim_jitlink_lazy_target(unsigned index)
{
	return shim_dropin_lazy_slot(&lib, index);
}

typedef jitlink_result (*create_fn)(void *handle, uint32_t n, const char **opts);

static const char *const with_lines[] = { "-lineinfo", "-g", NULL };

static jitlink_result create(unsigned slot, void *handle, uint32_t n, const char **opts)
{
	create_fn real = (create_fn)shim_jitlink_lazy_target(slot);
	if (shim_dropin_disabled() || n > 4096 || shim_dropin_has_option((int)n, opts, with_lines))
		return real(handle, n, opts);
	const char **more = shim_dropin_add_option((int)n, opts, "-lineinfo");
	if (!more)
		return real(handle, n, opts);
	shim_dropin_log(3, "nvJitLinkCreate: -lineinfo added to the program's %u options", n);
	jitlink_result rc = real(handle, n + 1, more);
	free(more);
	return rc;
}

__attribute__((visibility("default")))
jitlink_result nvJitLinkCreate(void *handle, uint32_t n, const char **opts)
{
	return create(SLOT_nvJitLinkCreate, handle, n, opts);
}

__attribute__((visibility("default")))
jitlink_result __nvJitLinkCreate_13_0(void *handle, uint32_t n, const char **opts)
{
	return create(SLOT___nvJitLinkCreate_13_0, handle, n, opts);
}
