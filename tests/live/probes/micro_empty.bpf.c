/* micro_empty (tests/bench/b_probe_lines.sh): an empty exit probe. */
#include "cubpf_helpers.h"
SEC("kretprobe/*bench_vecadd*")
int p(struct cubpf_kernel_ctx *ctx) { return 0; }
char LICENSE[] SEC("license") = "Dual MIT/GPL";
