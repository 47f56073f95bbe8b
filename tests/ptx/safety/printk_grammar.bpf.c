/* Issue 27: the printk grammar (vm/printk.c) on the GPU: widths, flags, precisions and length
 * modifiers on scalars print what the host formatter prints for them (tests/vm's
 * test_printk_grammar holds the same shapes); tests/gpu/t_ptx_safety.sh compares the lines:
 *   "cubpf-printk:             1234|0x2a|-5   |"
 *   "cubpf-printk: +007|00000003|Z|"
 */
#include "cubpf_helpers.h"

SEC("kprobe/*vec_add*")
int printk_grammar(struct cubpf_kernel_ctx *ctx)
{
	if (ctx->tid_x != 0 || ctx->ctaid_x != 0)
		return 0;
	__u64 a = 0x1234, n = 7;
	__u32 b = 42, c = 65539;
	__s32 d = -5;
	asm volatile("" : "+r"(a), "+r"(b), "+r"(d), "+r"(n), "+r"(c));
	bpf_printk("cubpf-printk: %16lx|%#x|%-5hd|\n", a, b, d);
	bpf_printk("cubpf-printk: %+.3lld|%08hu|%c|\n", n, c, 'Z');
	return 0;
}
