/* Deferred counters (struct cg_accs in internal.h): the registers' declarations and their flush
 * at a thread's exit. */
#include <stdio.h>

#include "ptx-rewriter/cgint.h"

void ptx_cg_accs_decls(const struct cg_accs *t, struct ptx_buf *out)
{
	if (!t->n)
		return;
	buf_printf(out, "\t.reg .b64 %%__cb_a<%u>;\n", t->n);
	for (uint32_t i = 0; i < t->n; i++)
		buf_printf(out, "\tmov.b64 %%__cb_a%u, 0;\n", i);
}

/* %__cb_t0 = the address of counter a for the running SM. */
static void acc_address(const struct cg_acc *a, struct ptx_buf *out)
{
	buf_printf(out, "\tld.const.u64 %%__cb_t0, [" PTX_MAP_SYMBOL_FMT "];\n", a->map);
	if (a->stride)
		ptx_cg_sm_copy(out, "%__cb_t0", a->stride);
	buf_printf(out, "\tadd.s64 %%__cb_t0, %%__cb_t0, %llu;\n", (unsigned long long)a->off);
}

/* %__cb_g1 = counter i is not zero in this lane; branches to `skip` when it is zero in every
 * lane leaving, to `sum` when it is not zero in several (else one lane alone holds it). */
static void acc_lanes(uint32_t i, bool wide, const char *sum, const char *skip,
		      struct ptx_buf *out)
{
	if (wide) {
		buf_printf(out, "\tsetp.ne.u64 %%__cb_g1, %%__cb_a%u, 0;\n", i);
	} else {
		buf_printf(out, "\tcvt.u32.u64 %%__cb_w1, %%__cb_a%u;\n", i);
		ptx_buf_puts(out, "\tsetp.ne.u32 %__cb_g1, %__cb_w1, 0;\n");
	}
	ptx_buf_puts(out, "\tactivemask.b32 %__cb_w0;\n"
			  "\tvote.sync.ballot.b32 %__cb_w1, %__cb_g1, %__cb_w0;\n"
			  "\tsetp.eq.u32 %__cb_p1, %__cb_w1, 0;\n");
	buf_printf(out, "\t@%%__cb_p1 bra %s;\n", skip);
	ptx_buf_puts(out, "\tpopc.b32 %__cb_w1, %__cb_w1;\n"
			  "\tsetp.gt.u32 %__cb_p1, %__cb_w1, 1;\n");
	buf_printf(out, "\t@%%__cb_p1 bra %s;\n", sum);
}

static void acc_red(const struct cg_acc *a, const char *pred, const char *val,
		    struct ptx_buf *out)
{
	if (a->wide) {
		buf_printf(out, "\t@%s red.global.add.u64 [%%__cb_t0], %s;\n", pred, val);
	} else {
		buf_printf(out, "\tcvt.u32.u64 %%__cb_w1, %s;\n", val);
		buf_printf(out, "\t@%s red.global.add.u32 [%%__cb_t0], %%__cb_w1;\n", pred);
	}
}

/* The lanes leaving together share their SM, so each counter has one address for all of them.
 * The common cases first: the counter is zero in every lane (nothing to add), or not zero in
 * one lane (a warp leader's count), which adds it; else the lanes' sum, added by the lowest. */
void ptx_cg_accs_flush(const struct cg_accs *t, bool redux, struct ptx_buf *out)
{
	if (!t->n)
		return;
	ptx_buf_puts(out, "\t// cubpf: deferred counters\n"
			  "\tactivemask.b32 %__cb_w0;\n"
			  "\tmov.u32 %__cb_w1, %lanemask_lt;\n"
			  "\tand.b32 %__cb_w1, %__cb_w1, %__cb_w0;\n"
			  "\tsetp.eq.u32 %__cb_g0, %__cb_w1, 0;\n");
	for (uint32_t i = 0; i < t->n; i++) {
		const struct cg_acc *a = &t->a[i];
		char loop[48], sum[48], skip[48];
		snprintf(loop, sizeof(loop), "$__cubpf_acc%u_l", i);
		snprintf(sum, sizeof(sum), "$__cubpf_acc%u_s", i);
		snprintf(skip, sizeof(skip), "$__cubpf_acc%u_d", i);
		char A[24];
		snprintf(A, sizeof(A), "%%__cb_a%u", i);
		acc_lanes(i, a->wide, sum, skip, out);
		acc_address(a, out);
		acc_red(a, "%__cb_g1", A, out);
		buf_printf(out, "\tbra %s;\n%s:\n", skip, sum);
		buf_printf(out, "\tmov.b64 %%__cb_r1, %s;\n", A);
		ptx_cg_warp_sum(out, redux, loop);
		acc_address(a, out);
		acc_red(a, "%__cb_g0", "%__cb_r0", out);
		buf_printf(out, "%s:\n", skip);
	}
}
