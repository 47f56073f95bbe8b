/* micro_mp_empty (tests/bench/b_probe_lines.sh): an empty memory probe before every access of
 * vecadd: what placing a probe costs. */
#include "cubpf_helpers.h"
SEC("memprobe/*bench_vecadd*")
int p(struct cubpf_mem_ctx *ctx)
{
	return 0;
}
char LICENSE[] SEC("license") = "Dual MIT/GPL";
