/* Deferred counters (struct cg_accs in internal.h): the registers' declarations and their flush
 * at a thread's exit.
 *
 * Per warp, the flush makes one reduction per counter to the map (the lanes leaving together
 * add up first).  The L2 still performs the reductions of a per-SM copy one after the other, and
 * one per warp costs a memory-bound kernel about 12% (tests/bench/RESULTS.md, b_probe_lines: an
 * exit probe's reduction by every warp leader to its SM's own line 1.120x, by thread 0 of each
 * block 1.034x).  So where the kernel can take a few bytes of shared memory, each group of
 * lanes leaving adds its sums to the block's (shared-memory atomics, on the SM) and counts its
 * threads out; the group that makes the count reach the block's size adds the block's sums to
 * the maps: one reduction per counter and block. */
#include <stdio.h>

#include "ptx-rewriter/cgint.h"

#define SH "__cubpf_accs" /* the block's sums (u64 each), then the threads that left (u32) */

void ptx_cg_accs_decls(const struct cg_accs *t, struct ptx_buf *out)
{
	if (!t->n)
		return;
	buf_printf(out, "\t.reg .b64 %%__cb_a<%u>;\n", t->n);
	for (uint32_t i = 0; i < t->n; i++)
		buf_printf(out, "\tmov.b64 %%__cb_a%u, 0;\n", i);
	if (!t->block)
		return;
	/* shared memory starts undefined: zeroed before any thread of the block can leave */
	buf_printf(out, "\t.shared .align 8 .b8 " SH "[%u];\n", 8 * (t->n + 1));
	ptx_buf_puts(out, "\tmov.u32 %__cb_w0, %tid.x;\n\tmov.u32 %__cb_w1, %tid.y;\n"
			  "\tor.b32 %__cb_w0, %__cb_w0, %__cb_w1;\n\tmov.u32 %__cb_w1, %tid.z;\n"
			  "\tor.b32 %__cb_w0, %__cb_w0, %__cb_w1;\n"
			  "\tsetp.eq.u32 %__cb_g0, %__cb_w0, 0;\n");
	for (uint32_t i = 0; i <= t->n; i++)
		buf_printf(out, "\t@%%__cb_g0 st.shared.u64 [" SH "+%u], 0;\n", 8 * i);
	ptx_buf_puts(out, "\tbar.sync 0;\n");
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

/* Under pred, adds val (.b64) to counter i: to the block's sum in shared memory (block), or to
 * its map (whose address acc_address leaves in %__cb_t0; a 32-bit counter takes the low half:
 * the sum's low half is the sum of the low halves). */
static void acc_add(const struct cg_acc *a, uint32_t i, bool block, const char *pred,
		    const char *val, struct ptx_buf *out)
{
	if (block) {
		buf_printf(out, "\t@%s red.shared.add.u64 [" SH "+%u], %s;\n", pred, 8 * i, val);
		return;
	}
	acc_address(a, out);
	if (a->wide) {
		buf_printf(out, "\t@%s red.global.add.u64 [%%__cb_t0], %s;\n", pred, val);
	} else {
		buf_printf(out, "\tcvt.u32.u64 %%__cb_w1, %s;\n", val);
		buf_printf(out, "\t@%s red.global.add.u32 [%%__cb_t0], %%__cb_w1;\n", pred);
	}
}

/* pred = this lane is the lowest of those in %__cb_w0 (an activemask). */
static void leader(struct ptx_buf *out, const char *pred)
{
	ptx_buf_puts(out, "\tmov.u32 %__cb_w1, %lanemask_lt;\n"
			  "\tand.b32 %__cb_w1, %__cb_w1, %__cb_w0;\n");
	buf_printf(out, "\tsetp.eq.u32 %s, %%__cb_w1, 0;\n", pred);
}

/* The lanes leaving together share their SM, so each counter has one address for all of them.
 * The common cases first: the counter is zero in every lane (nothing to add), or not zero in
 * one lane (a warp leader's count), which adds it; else the lanes' sum, added by the lowest. */
static void acc_group(const struct cg_accs *t, bool redux, struct ptx_buf *out)
{
	for (uint32_t i = 0; i < t->n; i++) {
		const struct cg_acc *a = &t->a[i];
		char loop[48], sum[48], skip[48], A[24];
		snprintf(loop, sizeof(loop), "$__cubpf_acc%u_l", i);
		snprintf(sum, sizeof(sum), "$__cubpf_acc%u_s", i);
		snprintf(skip, sizeof(skip), "$__cubpf_acc%u_d", i);
		snprintf(A, sizeof(A), "%%__cb_a%u", i);
		acc_lanes(i, a->wide, sum, skip, out);
		acc_add(a, i, t->block, "%__cb_g1", A, out);
		buf_printf(out, "\tbra %s;\n%s:\n", skip, sum);
		buf_printf(out, "\tmov.b64 %%__cb_r1, %s;\n", A);
		ptx_cg_warp_sum(out, redux, loop);
		leader(out, "%__cb_g0"); /* of the lanes the sum is over (%__cb_w0) */
		acc_add(a, i, t->block, "%__cb_g0", "%__cb_r0", out);
		buf_printf(out, "%s:\n", skip);
	}
}

/* Block mode, after the group's sums: its lowest lane counts the group's threads out, after
 * bar.warp.sync (which orders the memory accesses of the lanes taking part: a sum may come from
 * another lane) and a fence (the sums before the count); the one that brings the count to the
 * block's size reads the block's sums (after a fence: every group's sums before) and adds them
 * to the maps. */
static void acc_block_last(const struct cg_accs *t, struct ptx_buf *out)
{
	ptx_buf_puts(out, "\tactivemask.b32 %__cb_w0;\n"
			  "\tbar.warp.sync %__cb_w0;\n"
			  "\tmembar.cta;\n"
			  "\tpopc.b32 %__cb_w2, %__cb_w0;\n");
	leader(out, "%__cb_g0"); /* of the lanes counted */
	buf_printf(out, "\t@%%__cb_g0 atom.shared.add.u32 %%__cb_w3, [" SH "+%u], %%__cb_w2;\n",
		   8 * t->n);
	ptx_buf_puts(out, "\tadd.u32 %__cb_w3, %__cb_w3, %__cb_w2;\n"
			  "\tmov.u32 %__cb_w4, %ntid.x;\n\tmov.u32 %__cb_w5, %ntid.y;\n"
			  "\tmul.lo.u32 %__cb_w4, %__cb_w4, %__cb_w5;\n\tmov.u32 %__cb_w5, %ntid.z;\n"
			  "\tmul.lo.u32 %__cb_w4, %__cb_w4, %__cb_w5;\n"
			  "\tsetp.eq.u32 %__cb_g1, %__cb_w3, %__cb_w4;\n"
			  "\tand.pred %__cb_g1, %__cb_g1, %__cb_g0;\n"
			  "\t@!%__cb_g1 bra $__cubpf_accs_done;\n"
			  "\tmembar.cta;\n");
	for (uint32_t i = 0; i < t->n; i++) {
		buf_printf(out, "\tld.volatile.shared.u64 %%__cb_r0, [" SH "+%u];\n", 8 * i);
		ptx_buf_puts(out, "\tsetp.ne.u64 %__cb_g1, %__cb_r0, 0;\n");
		acc_add(&t->a[i], i, false, "%__cb_g1", "%__cb_r0", out);
	}
	ptx_buf_puts(out, "$__cubpf_accs_done:\n");
}

void ptx_cg_accs_flush(const struct cg_accs *t, bool redux, struct ptx_buf *out)
{
	if (!t->n)
		return;
	ptx_buf_puts(out, "\t// cubpf: deferred counters\n");
	acc_group(t, redux, out);
	if (t->block)
		acc_block_last(t, out);
}
