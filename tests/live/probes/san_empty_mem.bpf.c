/* san_empty_mem (tests/bench/b_sass.sh): an empty memory probe on every kernel: the per-access
 * patch's floor on the Sanitizer backend (the study measured ~28x on vec_add). */
#include "cubpf_helpers.h"
SEC("memprobe/*")
int p(struct cubpf_mem_ctx *ctx) { return 0; }
char LICENSE[] SEC("license") = "Dual MIT/GPL";
