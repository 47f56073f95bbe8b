/* san_empty_entry (tests/bench/b_sass.sh): an empty entry probe on every kernel: the block-enter
 * patch's floor on the Sanitizer backend, the empty function call on the PTX path. */
#include "cubpf_helpers.h"
SEC("kprobe/*")
int p(struct cubpf_kernel_ctx *ctx) { return 0; }
char LICENSE[] SEC("license") = "Dual MIT/GPL";
