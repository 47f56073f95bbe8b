/* san_empty_exit (tests/bench/b_sass.sh): an empty exit probe on every kernel: the cost of the
 * Sanitizer backend's BLOCK_EXIT patch site alone (the patch reads the launch record's program
 * bits and returns), beside san_empty_entry's BLOCK_ENTER. */
#include "cubpf_helpers.h"
SEC("kretprobe/*")
int p(struct cubpf_kernel_ctx *ctx) { return 0; }
char LICENSE[] SEC("license") = "Dual MIT/GPL";
