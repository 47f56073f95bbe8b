/* cubpf probe ABI, as probe authors include it: `#include "cubpf_abi.h"` (or cubpf_helpers.h,
 * which includes it) with -I tools/include.
 *
 * The ABI itself lives with the module that defines the program model and verifies it,
 * vm/include/cubpf_abi.h, so that no module below tools/ includes a header of tools/.  This file
 * only forwards to it in the source tree; `make install` and `make dist` install
 * vm/include/cubpf_abi.h in its place (PROBE_HEADERS, tools/module.mk), so an installed
 * include/cubpf/ folder holds the whole ABI under the same name.
 */
#include "../../vm/include/cubpf_abi.h"
