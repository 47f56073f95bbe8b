/* Device code of the map kinds beyond plain arrays (issue 6): per-SM arrays, per-thread arrays,
 * lock-free hash maps, and ring buffer output.  The memory layouts are the contract of
 * ptx-rewriter/layout.h ("GPU map layouts", "GPU ring buffers"); the shim allocates and
 * reads the maps with the same macros.
 *
 * Registers: %__cb_m0..9 (.b64), %__cb_x0..7 (.b32), %__cb_q0..1 (.pred) belong to this file,
 * so that the shared temporaries (%__cb_t*, %__cb_u*, used by ptx_cg_ld and the argument loads)
 * may be clobbered while a map operation keeps its addresses; %__cb_h0..7 hold key words. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "ptx-rewriter/cgint.h"

#define OUT(...) buf_printf(g->out, "\t" __VA_ARGS__)

#define E2BIG 7
#define ENOENT 2
#define EEXIST 17
#define EINVAL 22
#define EAGAIN 11

static int mfail(struct cg *g, uint32_t pc, uint32_t id, const char *what)
{
	ptx_seterr(g->err, g->errlen, "%s insn %u: helper %u: %s",
		   g->p->prog.name ? g->p->prog.name : "program", pc, id, what);
	return -1;
}

bool ptx_cg_map_kind_supported(uint32_t type)
{
	return type == CUBPF_MAP_ARRAY || type == CUBPF_MAP_GPU_ARRAY ||
	       type == CUBPF_MAP_PERCPU_ARRAY || type == CUBPF_MAP_PERTHREAD_ARRAY ||
	       type == CUBPF_MAP_HASH;
}

/* T (.b64) = 8-byte word i of the `size` bytes argument r points to, zero-padded past size:
 * read in the chunks the analysis recorded (ptx_cg_chunk_at), which never straddle a word. */
static int arg_word(struct cg *g, uint32_t pc, uint32_t depth, int r, uint32_t size, uint32_t i,
		    const char *T)
{
	const struct av *a = &g->p->st[pc].r[r];
	bool st = a->kind == AV_STACK;
	uint32_t chunk = ptx_cg_value_chunk(size, 0);
	uint32_t end = 8 * i + 8 < size ? 8 * i + 8 : size;
	OUT("mov.b64 %s, 0;\n", T);
	for (uint32_t o = 8 * i; o < end; o += chunk) {
		if (st) /* as the analysis recorded the reads */
			chunk = ptx_cg_chunk_at(g->p, a->v, a->v + o, a->v + size);
		if (ptx_cg_arg_load(g, pc, depth, r, o, chunk, "%__cb_t3"))
			return -1;
		if (o % 8)
			OUT("shl.b64 %%__cb_t3, %%__cb_t3, %u;\n", (o % 8) * 8);
		OUT("or.b64 %s, %s, %%__cb_t3;\n", T, T);
	}
	return 0;
}

/* %__cb_x0 = the u32 key [r2]; %__cb_q0 = key < max_entries; %__cb_m0 = the map's storage. */
static int array_key(struct cg *g, uint32_t pc, uint32_t depth, uint32_t idx,
		     const struct vm_map_def *d)
{
	if (d->key_size != 4)
		return mfail(g, pc, 0, "array map keys are 4 bytes");
	if (ptx_cg_arg_load(g, pc, depth, 2, 0, 4, "%__cb_m1"))
		return -1;
	OUT("cvt.u32.u64 %%__cb_x0, %%__cb_m1;\n");
	OUT("setp.lt.u32 %%__cb_q0, %%__cb_x0, %u;\n", d->max_entries);
	ptx_cg_map_ptr(g, "%__cb_m0", idx);
	return 0;
}

void ptx_cg_sm_copy(struct ptx_buf *out, const char *dst, uint32_t stride)
{
	buf_printf(out, "\tmov.u32 %%__cb_w0, %%smid;\n");
	buf_printf(out, "\tand.b32 %%__cb_w0, %%__cb_w0, %u;\n", CUBPF_PERCPU_SLOTS - 1);
	buf_printf(out, "\tmad.wide.u32 %s, %%__cb_w0, %u, %s;\n", dst, stride, dst);
}

/* %__cb_m0 = this SM's copy of key %__cb_x0 (CUBPF_PERCPU_OFFSET). */
static void percpu_address(struct cg *g, const struct vm_map_def *d)
{
	uint64_t stride = CUBPF_VALUE_STRIDE(d->value_size);
	OUT("mov.u32 %%__cb_x1, %%smid;\n");
	OUT("and.b32 %%__cb_x1, %%__cb_x1, %u;\n", CUBPF_PERCPU_SLOTS - 1);
	OUT("mul.wide.u32 %%__cb_m1, %%__cb_x0, %u;\n", CUBPF_PERCPU_SLOTS);
	OUT("cvt.u64.u32 %%__cb_m2, %%__cb_x1;\n");
	OUT("add.s64 %%__cb_m1, %%__cb_m1, %%__cb_m2;\n");
	OUT("mad.lo.u64 %%__cb_m0, %%__cb_m1, %llu, %%__cb_m0;\n", (unsigned long long)stride);
}

/* %__cb_m0 = the calling thread's copy of key %__cb_x0 (CUBPF_PERTHREAD_OFFSET); %__cb_q0 is
 * cleared when the thread has no copy (its linear id is past the header's `threads`). */
static void perthread_address(struct cg *g, const struct vm_map_def *d)
{
	uint64_t stride = CUBPF_VALUE_STRIDE(d->value_size);
	/* block linear id, then threads per block: 64-bit, grids exceed 2^32 threads */
	OUT("mov.u32 %%__cb_x1, %%ctaid.z;\n");
	OUT("mov.u32 %%__cb_x2, %%nctaid.y;\n");
	OUT("mov.u32 %%__cb_x3, %%ctaid.y;\n");
	OUT("mad.lo.u32 %%__cb_x1, %%__cb_x1, %%__cb_x2, %%__cb_x3;\n");
	OUT("mov.u32 %%__cb_x2, %%nctaid.x;\n");
	OUT("mov.u32 %%__cb_x3, %%ctaid.x;\n");
	OUT("mul.wide.u32 %%__cb_m1, %%__cb_x1, %%__cb_x2;\n");
	OUT("cvt.u64.u32 %%__cb_m2, %%__cb_x3;\n");
	OUT("add.s64 %%__cb_m1, %%__cb_m1, %%__cb_m2;\n");
	OUT("mov.u32 %%__cb_x1, %%ntid.x;\n");
	OUT("mov.u32 %%__cb_x2, %%ntid.y;\n");
	OUT("mul.lo.u32 %%__cb_x2, %%__cb_x1, %%__cb_x2;\n");
	OUT("mov.u32 %%__cb_x3, %%ntid.z;\n");
	OUT("mul.lo.u32 %%__cb_x2, %%__cb_x2, %%__cb_x3;\n");
	OUT("cvt.u64.u32 %%__cb_m2, %%__cb_x2;\n");
	OUT("mul.lo.u64 %%__cb_m1, %%__cb_m1, %%__cb_m2;\n");
	/* + (tid.z * ntid.y + tid.y) * ntid.x + tid.x (< 1024: 32 bits suffice) */
	OUT("mov.u32 %%__cb_x2, %%tid.z;\n");
	OUT("mov.u32 %%__cb_x3, %%ntid.y;\n");
	OUT("mov.u32 %%__cb_x1, %%tid.y;\n");
	OUT("mad.lo.u32 %%__cb_x2, %%__cb_x2, %%__cb_x3, %%__cb_x1;\n");
	OUT("mov.u32 %%__cb_x3, %%ntid.x;\n");
	OUT("mov.u32 %%__cb_x1, %%tid.x;\n");
	OUT("mad.lo.u32 %%__cb_x2, %%__cb_x2, %%__cb_x3, %%__cb_x1;\n");
	OUT("cvt.u64.u32 %%__cb_m2, %%__cb_x2;\n");
	OUT("add.s64 %%__cb_m1, %%__cb_m1, %%__cb_m2;\n");
	OUT("ld.global.u64 %%__cb_m2, [%%__cb_m0];\n"); /* header: threads */
	OUT("setp.lt.u64 %%__cb_q1, %%__cb_m1, %%__cb_m2;\n");
	OUT("and.pred %%__cb_q0, %%__cb_q0, %%__cb_q1;\n");
	OUT("cvt.u64.u32 %%__cb_m3, %%__cb_x0;\n");
	OUT("mad.lo.u64 %%__cb_m1, %%__cb_m3, %%__cb_m2, %%__cb_m1;\n");
	OUT("mad.lo.u64 %%__cb_m0, %%__cb_m1, %llu, %%__cb_m0;\n", (unsigned long long)stride);
	OUT("add.s64 %%__cb_m0, %%__cb_m0, %u;\n", (unsigned)sizeof(struct cubpf_perthread_header));
}

/* Array-like kinds: lookup, update, delete. */
static int slotted(struct cg *g, uint32_t pc, uint32_t id, uint32_t depth, const char *ip,
		   uint32_t idx, const struct vm_map_def *d)
{
	if (id == CUBPF_FN_map_delete_elem) {
		OUT("mov.b64 %%__cb_r0, -%d;\n", EINVAL); /* array elements cannot be deleted */
		return 0;
	}
	if (array_key(g, pc, depth, idx, d))
		return -1;
	if (d->type == CUBPF_MAP_PERCPU_ARRAY)
		percpu_address(g, d);
	else
		perthread_address(g, d);
	if (id == CUBPF_FN_map_lookup_elem) {
		OUT("selp.b64 %%__cb_r0, %%__cb_m0, 0, %%__cb_q0;\n");
		return 0;
	}
	if (!vm_map_prog_writable(d))
		return mfail(g, pc, id, "the map is read-only for programs");
	uint32_t inst = g->next_inst++;
	OUT("mov.b64 %%__cb_r0, -%d;\n", E2BIG);
	OUT("@!%%__cb_q0 bra %sm%u;\n", ip, inst);
	OUT("mov.b64 %%__cb_r0, -%d;\n", EEXIST); /* BPF_NOEXIST: array elements always exist */
	OUT("setp.eq.u64 %%__cb_q1, %%__cb_r4, %d;\n", BPF_NOEXIST);
	OUT("@%%__cb_q1 bra %sm%u;\n", ip, inst);
	if (ptx_cg_copy_value(g, pc, depth, d, "%__cb_m0"))
		return -1;
	OUT("mov.b64 %%__cb_r0, 0;\n");
	buf_printf(g->out, "%sm%u:\n", ip, inst);
	return 0;
}

/* ---- hash ---- */

/* %__cb_h<i> = the key words of [r2]; %__cb_x1 = the first slot to probe; %__cb_m1 = map. */
static int hash_start(struct cg *g, uint32_t pc, uint32_t depth, uint32_t idx,
		      const struct vm_map_def *d)
{
	uint32_t nw = CUBPF_HASH_KEY_WORDS(d->key_size), cap = cubpf_hash_capacity(d->max_entries);
	if (d->key_size == 0 || d->key_size > CUBPF_HASH_MAX_KEY)
		return mfail(g, pc, 0, "hash map keys must be 1 to 64 bytes on the GPU");
	OUT("mov.b64 %%__cb_m2, %llu;\n", 0xcbf29ce484222325ull);
	for (uint32_t i = 0; i < nw; i++) {
		char H[16];
		snprintf(H, sizeof(H), "%%__cb_h%u", i);
		if (arg_word(g, pc, depth, 2, d->key_size, i, H))
			return -1;
		OUT("xor.b64 %%__cb_m2, %%__cb_m2, %s;\n", H);
		OUT("mul.lo.u64 %%__cb_m2, %%__cb_m2, %llu;\n", 0x100000001b3ull);
	}
	OUT("shr.u64 %%__cb_m3, %%__cb_m2, 32;\n");
	OUT("xor.b64 %%__cb_m2, %%__cb_m2, %%__cb_m3;\n");
	OUT("cvt.u32.u64 %%__cb_x1, %%__cb_m2;\n");
	OUT("and.b32 %%__cb_x1, %%__cb_x1, %u;\n", cap - 1);
	OUT("mov.u32 %%__cb_x2, 0;\n");
	ptx_cg_map_ptr(g, "%__cb_m1", idx);
	return 0;
}

/* The probe loop's head at label L: %__cb_m0 = slot %__cb_x1, %__cb_x3 = its state. */
static void hash_slot(struct cg *g, const struct vm_map_def *d, const char *L)
{
	buf_printf(g->out, "%s:\n", L);
	OUT("mad.wide.u32 %%__cb_m0, %%__cb_x1, %llu, %%__cb_m1;\n",
	    (unsigned long long)CUBPF_HASH_SLOT_BYTES(d->key_size, d->value_size));
	OUT("ld.volatile.global.u32 %%__cb_x3, [%%__cb_m0];\n");
}

/* Branches to `ne` unless the key words of slot %__cb_m0 equal %__cb_h<i>; the fence orders
 * the reads after the state word that said FULL (the inserter fenced before publishing). */
static void hash_cmp(struct cg *g, const struct vm_map_def *d, const char *ne)
{
	OUT("membar.gl;\n");
	for (uint32_t i = 0; i < CUBPF_HASH_KEY_WORDS(d->key_size); i++) {
		OUT("ld.volatile.global.u64 %%__cb_m2, [%%__cb_m0+%u];\n", 8 + 8 * i);
		OUT("setp.ne.u64 %%__cb_q1, %%__cb_m2, %%__cb_h%u;\n", i);
		OUT("@%%__cb_q1 bra %s;\n", ne);
	}
}

/* The loop's tail at label N: next slot, or fall through when all were probed. */
static void hash_next(struct cg *g, const struct vm_map_def *d, const char *N, const char *L)
{
	uint32_t cap = cubpf_hash_capacity(d->max_entries);
	buf_printf(g->out, "%s:\n", N);
	OUT("add.u32 %%__cb_x1, %%__cb_x1, 1;\n");
	OUT("and.b32 %%__cb_x1, %%__cb_x1, %u;\n", cap - 1);
	OUT("add.u32 %%__cb_x2, %%__cb_x2, 1;\n");
	OUT("setp.lt.u32 %%__cb_q1, %%__cb_x2, %u;\n", cap);
	OUT("@%%__cb_q1 bra %s;\n", L);
}

static int hash_op(struct cg *g, uint32_t pc, uint32_t id, uint32_t depth, const char *ip,
		   uint32_t idx, const struct vm_map_def *d)
{
	uint32_t inst = g->next_inst++;
	uint64_t voff = 8 + 8ull * CUBPF_HASH_KEY_WORDS(d->key_size);
	char L[96], N[96], D[96], C[96];
	snprintf(L, sizeof(L), "%sm%u_l", ip, inst);
	snprintf(N, sizeof(N), "%sm%u_n", ip, inst);
	snprintf(D, sizeof(D), "%sm%u_d", ip, inst);
	snprintf(C, sizeof(C), "%sm%u_c", ip, inst);
	bool upd = id == CUBPF_FN_map_update_elem;
	if (upd && !vm_map_prog_writable(d))
		return mfail(g, pc, id, "the map is read-only for programs");
	if (hash_start(g, pc, depth, idx, d))
		return -1;
	hash_slot(g, d, L);
	OUT("setp.eq.u32 %%__cb_q0, %%__cb_x3, %u;\n", CUBPF_HASH_EMPTY);
	OUT("@%%__cb_q0 bra %s;\n", C); /* absent (update: claim this slot) */
	if (upd) { /* an insert in progress may be this key: wait for it */
		OUT("setp.eq.u32 %%__cb_q0, %%__cb_x3, %u;\n", CUBPF_HASH_BUSY);
		OUT("@%%__cb_q0 bra %s;\n", L);
	}
	OUT("setp.ne.u32 %%__cb_q0, %%__cb_x3, %u;\n", CUBPF_HASH_FULL);
	OUT("@%%__cb_q0 bra %s;\n", N);
	hash_cmp(g, d, N);
	/* found at %__cb_m0 */
	if (id == CUBPF_FN_map_lookup_elem) {
		OUT("add.s64 %%__cb_r0, %%__cb_m0, %llu;\n", (unsigned long long)voff);
	} else if (id == CUBPF_FN_map_delete_elem) {
		OUT("atom.global.cas.b32 %%__cb_x3, [%%__cb_m0], %u, %u;\n", CUBPF_HASH_FULL,
		    CUBPF_HASH_TOMB);
		OUT("setp.eq.u32 %%__cb_q0, %%__cb_x3, %u;\n", CUBPF_HASH_FULL);
		OUT("selp.b64 %%__cb_r0, 0, -%d, %%__cb_q0;\n", ENOENT);
	} else {
		OUT("mov.b64 %%__cb_r0, -%d;\n", EEXIST);
		OUT("setp.eq.u64 %%__cb_q0, %%__cb_r4, %d;\n", BPF_NOEXIST);
		OUT("@%%__cb_q0 bra %s;\n", D);
		OUT("add.s64 %%__cb_m0, %%__cb_m0, %llu;\n", (unsigned long long)voff);
		if (ptx_cg_copy_value(g, pc, depth, d, "%__cb_m0"))
			return -1;
		OUT("mov.b64 %%__cb_r0, 0;\n");
	}
	OUT("bra %s;\n", D);
	hash_next(g, d, N, L);
	/* every slot probed: absent, or no room */
	OUT("mov.b64 %%__cb_r0, %d;\n", upd ? -E2BIG : id == CUBPF_FN_map_delete_elem ? -ENOENT : 0);
	OUT("bra %s;\n", D);
	buf_printf(g->out, "%s:\n", C);
	if (!upd) {
		OUT("mov.b64 %%__cb_r0, %d;\n", id == CUBPF_FN_map_delete_elem ? -ENOENT : 0);
		buf_printf(g->out, "%s:\n", D);
		return 0;
	}
	OUT("mov.b64 %%__cb_r0, -%d;\n", ENOENT); /* BPF_EXIST on an absent key */
	OUT("setp.eq.u64 %%__cb_q0, %%__cb_r4, %d;\n", BPF_EXIST);
	OUT("@%%__cb_q0 bra %s;\n", D);
	OUT("atom.global.cas.b32 %%__cb_x3, [%%__cb_m0], %u, %u;\n", CUBPF_HASH_EMPTY,
	    CUBPF_HASH_BUSY);
	OUT("setp.ne.u32 %%__cb_q0, %%__cb_x3, %u;\n", CUBPF_HASH_EMPTY);
	OUT("@%%__cb_q0 bra %s;\n", L); /* taken meanwhile: look at this slot again */
	for (uint32_t i = 0; i < CUBPF_HASH_KEY_WORDS(d->key_size); i++)
		OUT("st.global.u64 [%%__cb_m0+%u], %%__cb_h%u;\n", 8 + 8 * i, i);
	OUT("add.s64 %%__cb_m0, %%__cb_m0, %llu;\n", (unsigned long long)voff);
	if (ptx_cg_copy_value(g, pc, depth, d, "%__cb_m0"))
		return -1;
	OUT("membar.gl;\n"); /* key and value before the state that publishes them */
	OUT("st.volatile.global.u32 [%%__cb_m0+-%llu], %u;\n", (unsigned long long)voff,
	    CUBPF_HASH_FULL);
	OUT("mov.b64 %%__cb_r0, 0;\n");
	buf_printf(g->out, "%s:\n", D);
	return 0;
}

int ptx_cg_map_op(struct cg *g, uint32_t pc, uint32_t id, uint32_t depth, const char *ip,
	      uint32_t idx, const struct vm_map_def *d)
{
	if (d->type == CUBPF_MAP_HASH)
		return hash_op(g, pc, id, depth, ip, idx, d);
	return slotted(g, pc, id, depth, ip, idx, d);
}

/* ---- ring buffers ---- */

/* reg = the address of this lane's word in the state's array at header offset `field` (heads,
 * tails or drops: u64 per lane).  Needs %__cb_m2 (the header) and %__cb_x6 (the lane). */
static void rb_lane_word(struct cg *g, const char *reg, size_t field)
{
	OUT("ld.global.nc.u64 %s, [%%__cb_m2+%u];\n", reg, (unsigned)field);
	OUT("mad.wide.u32 %s, %%__cb_x6, 8, %s;\n", reg, reg);
}

/* The lane of this warp slot (layout.h): %__cb_x6 = the lane, %__cb_m0 = the address of its
 * head, %__cb_m1 = lane_bytes, %__cb_m2 = the producers' part (its header).  The host fills the
 * header before launching: cacheable loads, from device memory. */
static void rb_lane(struct cg *g, uint32_t map)
{
	ptx_cg_map_ptr(g, "%__cb_m2", map);
	OUT("ld.global.nc.v2.u32 {%%__cb_x0, %%__cb_x1}, [%%__cb_m2];\n"); /* lanes, warps */
	OUT("ld.global.nc.u64 %%__cb_m1, [%%__cb_m2+%u];\n",
	    (unsigned)offsetof(struct cubpf_rb_state, lane_bytes));
	OUT("mov.u32 %%__cb_x6, %%smid;\n");
	OUT("mov.u32 %%__cb_x3, %%warpid;\n");
	OUT("mad.lo.u32 %%__cb_x6, %%__cb_x6, %%__cb_x1, %%__cb_x3;\n");
	OUT("rem.u32 %%__cb_x6, %%__cb_x6, %%__cb_x0;\n"); /* %warpid may exceed the slots: modulo */
	rb_lane_word(g, "%__cb_m0", offsetof(struct cubpf_rb_state, heads));
}

/* The warp's callers (activemask): %__cb_x2 = their mask, %__cb_x3 = this one's rank, %__cb_x4 =
 * k, their number, %__cb_x5 = the leader (the lowest), %__cb_m5 = the batch's bytes
 * (CUBPF_RB_BATCH_BYTES with `wb` = 8 x words per record). */
static void rb_callers(struct cg *g, uint32_t wb)
{
	OUT("activemask.b32 %%__cb_x2;\n");
	OUT("mov.u32 %%__cb_x3, %%lanemask_lt;\n");
	OUT("and.b32 %%__cb_x3, %%__cb_x3, %%__cb_x2;\n");
	OUT("popc.b32 %%__cb_x3, %%__cb_x3;\n");
	OUT("popc.b32 %%__cb_x4, %%__cb_x2;\n");
	OUT("brev.b32 %%__cb_x5, %%__cb_x2;\n");
	OUT("clz.b32 %%__cb_x5, %%__cb_x5;\n");
	OUT("mul.wide.u32 %%__cb_m5, %%__cb_x4, %u;\n", wb);
	OUT("add.s64 %%__cb_m5, %%__cb_m5, %u;\n", CUBPF_RB_BATCH_HDR + 15);
	OUT("and.b64 %%__cb_m5, %%__cb_m5, -16;\n");
}

/* Step 1 of the protocol, by the leader: one reservation for the whole batch, a CAS on the
 * lane's head, checked against the device's copy of the lane's tail (both in device memory:
 * nothing crosses PCIe, kept or dropped).  The fit test is signed: a head read before the tail
 * passed it is stale, and the CAS then fails and retries.  Leaves, shuffled to every caller,
 * %__cb_m3 = the batch's position and %__cb_x7 = 1 when reserved (0: dropped); the leader also
 * keeps %__cb_m4 = the padding before the batch. */
static void rb_reserve(struct cg *g, const char *L, const char *J)
{
	OUT("mov.u32 %%__cb_x7, 0;\n");
	OUT("setp.ne.u32 %%__cb_q1, %%__cb_x3, 0;\n");
	OUT("@%%__cb_q1 bra %s;\n", J);
	rb_lane_word(g, "%__cb_m8", offsetof(struct cubpf_rb_state, tails));
	OUT("ld.volatile.global.u64 %%__cb_m3, [%%__cb_m0];\n");
	buf_printf(g->out, "%s:\n", L);
	OUT("rem.u64 %%__cb_m4, %%__cb_m3, %%__cb_m1;\n");
	OUT("sub.s64 %%__cb_m4, %%__cb_m1, %%__cb_m4;\n"); /* room before the lane's end */
	OUT("setp.lt.u64 %%__cb_q0, %%__cb_m4, %%__cb_m5;\n");
	OUT("selp.b64 %%__cb_m4, %%__cb_m4, 0, %%__cb_q0;\n"); /* padding */
	OUT("add.s64 %%__cb_m6, %%__cb_m3, %%__cb_m4;\n");
	OUT("add.s64 %%__cb_m6, %%__cb_m6, %%__cb_m5;\n"); /* the new head */
	OUT("ld.volatile.global.u64 %%__cb_m7, [%%__cb_m8];\n");
	OUT("sub.s64 %%__cb_m7, %%__cb_m6, %%__cb_m7;\n");
	OUT("setp.le.s64 %%__cb_q0, %%__cb_m7, %%__cb_m1;\n");
	OUT("@!%%__cb_q0 bra %s;\n", J); /* full: dropped */
	OUT("atom.global.cas.b64 %%__cb_m7, [%%__cb_m0], %%__cb_m3, %%__cb_m6;\n");
	OUT("setp.ne.u64 %%__cb_q0, %%__cb_m7, %%__cb_m3;\n");
	OUT("mov.b64 %%__cb_m3, %%__cb_m7;\n");
	OUT("@%%__cb_q0 bra %s;\n", L);
	OUT("add.s64 %%__cb_m3, %%__cb_m3, %%__cb_m4;\n");
	OUT("mov.u32 %%__cb_x7, 1;\n");
	buf_printf(g->out, "%s:\n", J);
	OUT("mov.b64 {%%__cb_x0, %%__cb_x1}, %%__cb_m3;\n");
	OUT("shfl.sync.idx.b32 %%__cb_x0, %%__cb_x0, %%__cb_x5, 31, %%__cb_x2;\n");
	OUT("shfl.sync.idx.b32 %%__cb_x1, %%__cb_x1, %%__cb_x5, 31, %%__cb_x2;\n");
	OUT("shfl.sync.idx.b32 %%__cb_x7, %%__cb_x7, %%__cb_x5, 31, %%__cb_x2;\n");
	OUT("mov.b64 %%__cb_m3, {%%__cb_x0, %%__cb_x1};\n");
}

/* A dropped batch: the leader adds k to the lane's drops (device memory; the host copies them
 * out). */
static void rb_drop(struct cg *g)
{
	OUT("setp.eq.u32 %%__cb_q0, %%__cb_x3, 0;\n");
	rb_lane_word(g, "%__cb_m7", offsetof(struct cubpf_rb_state, drops));
	OUT("cvt.u64.u32 %%__cb_m6, %%__cb_x4;\n");
	OUT("@%%__cb_q0 red.global.add.u64 [%%__cb_m7], %%__cb_m6;\n");
	OUT("mov.b64 %%__cb_r0, -%d;\n", EAGAIN);
}

/* Steps 2 and 3: %__cb_m6 = the batch, %__cb_m7 = the lane's data; each caller stores its words
 * field-major (word i of rank r at +16 + (i k + r) 8: one warp-wide store writes k consecutive
 * words), then the leader, after bar.warp.sync and one fence, the commit words. */
static int rb_store(struct cg *g, uint32_t pc, uint32_t depth, uint32_t size)
{
	OUT("ld.global.nc.u64 %%__cb_m7, [%%__cb_m2+%u];\n",
	    (unsigned)offsetof(struct cubpf_rb_state, data));
	OUT("cvt.u64.u32 %%__cb_m6, %%__cb_x6;\n");
	OUT("mad.lo.u64 %%__cb_m7, %%__cb_m6, %%__cb_m1, %%__cb_m7;\n");
	OUT("rem.u64 %%__cb_m6, %%__cb_m3, %%__cb_m1;\n");
	OUT("add.s64 %%__cb_m6, %%__cb_m7, %%__cb_m6;\n");
	OUT("mul.wide.u32 %%__cb_m5, %%__cb_x3, 8;\n");
	OUT("add.s64 %%__cb_m5, %%__cb_m5, %%__cb_m6;\n");
	OUT("mul.wide.u32 %%__cb_m9, %%__cb_x4, 8;\n"); /* a field's row: k words */
	for (uint32_t i = 0; i < (size + 7) / 8; i++) {
		if (arg_word(g, pc, depth, 2, size, i, "%__cb_m8"))
			return -1;
		if (i)
			OUT("add.s64 %%__cb_m5, %%__cb_m5, %%__cb_m9;\n");
		OUT("st.global.u64 [%%__cb_m5+%u], %%__cb_m8;\n", CUBPF_RB_BATCH_HDR);
	}
	OUT("bar.warp.sync %%__cb_x2;\n"); /* every caller's words before the leader's fence */
	OUT("setp.eq.u32 %%__cb_q0, %%__cb_x3, 0;\n");
	OUT("setp.ne.u64 %%__cb_q1, %%__cb_m4, 0;\n");
	OUT("and.pred %%__cb_q1, %%__cb_q1, %%__cb_q0;\n"); /* the leader, after padding */
	OUT("@%%__cb_q0 st.volatile.global.v2.u32 [%%__cb_m6], {%%__cb_x4, %u};\n", size);
	OUT("sub.s64 %%__cb_m5, %%__cb_m1, %%__cb_m4;\n");
	OUT("add.s64 %%__cb_m5, %%__cb_m7, %%__cb_m5;\n"); /* the padding, up to the lane's end */
	OUT("@%%__cb_q1 st.volatile.global.v2.u32 [%%__cb_m5], {0, 0};\n");
	OUT("@%%__cb_q0 membar.sys;\n"); /* the batch before the commit words */
	OUT("sub.s64 %%__cb_m8, %%__cb_m3, %%__cb_m4;\n");
	OUT("add.s64 %%__cb_m8, %%__cb_m8, 1;\n"); /* CUBPF_RB_TAG(head) */
	OUT("@%%__cb_q1 st.volatile.global.u64 [%%__cb_m5+8], %%__cb_m8;\n");
	OUT("add.s64 %%__cb_m8, %%__cb_m3, 1;\n"); /* CUBPF_RB_TAG(position) */
	OUT("@%%__cb_q0 st.volatile.global.u64 [%%__cb_m6+8], %%__cb_m8;\n");
	OUT("mov.b64 %%__cb_r0, 0;\n");
	return 0;
}

/* bpf_ringbuf_output(map, data, size, flags): the warp's callers write one batch to the lane of
 * their warp slot, following the producer protocol of layout.h; a batch that does not fit is
 * counted in the lane's drops and the helper returns -EAGAIN, as Linux does when a ring buffer
 * is full. */
int ptx_cg_ringbuf_output(struct cg *g, uint32_t pc, uint32_t depth, const char *ip)
{
	const uint32_t id = CUBPF_FN_ringbuf_output;
	const struct av *m = &g->p->st[pc].r[1], *sz = &g->p->st[pc].r[3];
	if (m->kind != AV_MAP || m->map >= g->p->map_cnt || m->map >= 64)
		return mfail(g, pc, id, "r1 is not a map known at compile time");
	const struct vm_map_def *d = &g->p->maps[m->map];
	if (d->type != CUBPF_MAP_RINGBUF && d->type != CUBPF_MAP_GPU_RINGBUF)
		return mfail(g, pc, id, "the map is not a ring buffer");
	if (sz->kind != AV_CONST || sz->v <= 0 || sz->v > CUBPF_RB_MAX_RECORD)
		return mfail(g, pc, id, "the record size must be a constant of 1 to 4096 bytes");
	if (g->p->st[pc].r[2].kind == AV_CTX || g->p->st[pc].r[2].kind == AV_CONFLICT)
		return mfail(g, pc, id, "the context cannot be passed to helpers on the GPU");
	g->res->maps_used |= 1ull << m->map;
	uint32_t size = (uint32_t)sz->v, inst = g->next_inst++;
	char L[96], J[96], X[96], D[96];
	snprintf(L, sizeof(L), "%sm%u_l", ip, inst);
	snprintf(J, sizeof(J), "%sm%u_j", ip, inst);
	snprintf(X, sizeof(X), "%sm%u_x", ip, inst);
	snprintf(D, sizeof(D), "%sm%u_d", ip, inst);
	rb_lane(g, m->map);
	rb_callers(g, 8 * ((size + 7) / 8));
	rb_reserve(g, L, J);
	OUT("setp.eq.u32 %%__cb_q0, %%__cb_x7, 0;\n");
	OUT("@%%__cb_q0 bra %s;\n", X);
	if (rb_store(g, pc, depth, size))
		return -1;
	OUT("bra %s;\n", D);
	buf_printf(g->out, "%s:\n", X);
	rb_drop(g);
	buf_printf(g->out, "%s:\n", D);
	return 0;
}
