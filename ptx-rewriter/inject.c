/* Probe injection: compiles the GPU programs once, then edits the selected kernels.  Edits are
 * (offset, bytes removed, text inserted) triples applied in one pass that copies everything
 * else byte for byte. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx-rewriter/cgint.h"

struct edit {
	size_t off, del;
	char *text;
	uint32_t seq; /* keeps insertion order for equal offsets */
};

struct edits {
	struct edit *v;
	size_t n;
};

static int edit_add(struct edits *e, size_t off, size_t del, struct ptx_buf *b)
{
	struct edit *nv = realloc(e->v, (e->n + 1) * sizeof(*nv));
	if (!nv || b->oom)
		return -1;
	e->v = nv;
	e->v[e->n] = (struct edit){.off = off, .del = del, .text = b->data, .seq = (uint32_t)e->n};
	e->n++;
	memset(b, 0, sizeof(*b));
	return 0;
}

static int edit_cmp(const void *a, const void *b)
{
	const struct edit *x = a, *y = b;
	if (x->off != y->off)
		return x->off < y->off ? -1 : 1;
	if ((x->del == 0) != (y->del == 0)) /* code inserted before a statement, then its edit */
		return x->del == 0 ? -1 : 1;
	return x->seq < y->seq ? -1 : 1;
}

static uint32_t type_bits_of(const char *t)
{
	if (!strcmp(t, "pred"))
		return 1;
	while (*t && (*t < '0' || *t > '9'))
		t++;
	return (uint32_t)strtoul(t, NULL, 10);
}

/* Not vm_prog_kind_name: the PTX library links without vm's (the fuzzer, conf_gen). */
static const char *kind_name(enum vm_prog_kind k)
{
	switch (k) {
	case VM_PROG_KPROBE: return "kprobe";
	case VM_PROG_KRETPROBE: return "kretprobe";
	case VM_PROG_MEMPROBE: return "memprobe";
	case VM_PROG_BLOCKPROBE: return "blockprobe";
	case VM_PROG_BLOCKRETPROBE: return "blockretprobe";
	case VM_PROG_SYNCPROBE: return "syncprobe";
	case VM_PROG_FENTRY: return "fentry";
	case VM_PROG_FEXIT: return "fexit";
	case VM_PROG_BBPROBE: return "bbprobe";
	case VM_PROG_BBRETPROBE: return "bbretprobe";
	default: return "probe";
	}
}

/* Whether the module can say .relaxed/.acquire/.release at .gpu scope (sm_70, PTX 6.0). */
static bool ordered_ops(const struct ptx_module *m)
{
	const char *sm = strstr(m->target, "sm_");
	return sm && atoi(sm + 3) >= 70 && atof(m->version) >= 6.0;
}

/* ---- kernel selection ---- */

uint32_t ptx_kernel_id(const char *mangled)
{
	uint32_t h = 2166136261u;
	for (const unsigned char *p = (const unsigned char *)mangled; *p; p++)
		h = (h ^ *p) * 16777619u;
	return h;
}

/* ---- memory accesses ---- */

static enum ptx_space space_of(const char *part)
{
	if (!strcmp(part, "global"))
		return PTX_SPACE_GLOBAL;
	if (!strncmp(part, "shared", 6))
		return PTX_SPACE_SHARED;
	if (!strcmp(part, "local"))
		return PTX_SPACE_LOCAL;
	if (!strcmp(part, "const"))
		return PTX_SPACE_CONST;
	if (!strncmp(part, "param", 5))
		return PTX_SPACE_PARAM;
	if (!strcmp(part, "tex") || !strcmp(part, "surf"))
		return PTX_SPACE_OTHER;
	return PTX_SPACE_GENERIC;
}

/* Element bytes of a type suffix, 0 if the part is not a type. */
static uint32_t elem_bytes(const char *p)
{
	static const struct { const char *n; uint32_t b; } types[] = {
		{"b8", 1}, {"u8", 1}, {"s8", 1}, {"b16", 2}, {"u16", 2}, {"s16", 2}, {"f16", 2},
		{"bf16", 2}, {"b32", 4}, {"u32", 4}, {"s32", 4}, {"f32", 4}, {"f16x2", 4},
		{"bf16x2", 4}, {"b64", 8}, {"u64", 8}, {"s64", 8}, {"f64", 8}, {"b128", 16},
		{"e4m3x2", 2}, {"e5m2x2", 2}, {"tf32", 4},
	};
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (!strcmp(p, types[i].n))
			return types[i].b;
	return 0;
}

bool ptx_insn_mem_access(const struct ptx_insn *insn, struct ptx_mem_access *acc)
{
	char op[128];
	snprintf(op, sizeof(op), "%s", insn->opcode);
	char *save = NULL, *root = strtok_r(op, ".", &save);
	if (!root)
		return false;
	uint32_t kind;
	if (!strcmp(root, "ld") || !strcmp(root, "ldu"))
		kind = CUBPF_MEM_LOAD;
	else if (!strcmp(root, "st"))
		kind = CUBPF_MEM_STORE;
	else if (!strcmp(root, "atom"))
		kind = CUBPF_MEM_ATOMIC;
	else if (!strcmp(root, "red"))
		kind = CUBPF_MEM_REDUCE;
	else
		return false;
	enum ptx_space space = PTX_SPACE_GENERIC;
	uint32_t vec = 1, elem = 0;
	for (char *p = strtok_r(NULL, ".", &save); p; p = strtok_r(NULL, ".", &save)) {
		enum ptx_space sp = space_of(p);
		if (sp != PTX_SPACE_GENERIC)
			space = sp;
		else if (p[0] == 'v' && (p[1] == '2' || p[1] == '4' || p[1] == '8') && !p[2])
			vec = (uint32_t)(p[1] - '0');
		else if (elem_bytes(p))
			elem = elem_bytes(p);
	}
	const char *addr = NULL;
	for (uint32_t i = 0; i < insn->op_cnt && !addr; i++)
		if (insn->ops[i][0] == '[')
			addr = insn->ops[i];
	if (!addr || !elem)
		return false;
	const char *close = strchr(addr, ']');
	if (!close)
		return false;
	acc->space = space;
	acc->op = kind;
	acc->size = elem * vec;
	acc->addr = addr + 1;
	acc->addr_len = (size_t)(close - addr - 1);
	return true;
}

/* ---- barriers and fences ---- */

static bool starts(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

/* The barrier number operand of bar/barrier (.sync, .arrive, .red): the first operand, the
 * second for .red (whose first is its result). */
static void sync_id(const struct ptx_insn *in, bool red, struct ptx_sync *out)
{
	uint32_t k = red ? 1 : 0;
	out->id = CUBPF_SYNC_ID_NONE;
	out->id_reg = NULL;
	if (k >= in->op_cnt)
		return;
	const char *op = in->ops[k];
	if (op[0] >= '0' && op[0] <= '9')
		out->id = (uint32_t)strtoul(op, NULL, 0);
	else if (op[0] == '%' || op[0] == '_' || ((op[0] | 0x20) >= 'a' && (op[0] | 0x20) <= 'z'))
		out->id_reg = op; /* a register: %r4, or an asm block's own R */
}

bool ptx_insn_sync(const struct ptx_insn *in, struct ptx_sync *out)
{
	char o[64];
	snprintf(o, sizeof(o), "%s", in->opcode);
	/* bar.cta.sync, barrier.cta.arrive: .cta is the default scope, spelled out */
	char *cta = strstr(o, ".cta.");
	if (cta && (cta - o == 3 || cta - o == 7) && (starts(o, "bar.") || starts(o, "barrier.")))
		memmove(cta, cta + 4, strlen(cta + 4) + 1);
	memset(out, 0, sizeof(*out));
	out->id = CUBPF_SYNC_ID_NONE;
	if (starts(o, "fence") || starts(o, "membar"))
		out->kind = CUBPF_SYNC_FENCE;
	else if (starts(o, "mbarrier.try_wait") || starts(o, "mbarrier.test_wait"))
		out->kind = CUBPF_SYNC_MBARRIER;
	else if (starts(o, "barrier.cluster."))
		out->kind = CUBPF_SYNC_CLUSTER;
	else if (starts(o, "bar.warp.sync"))
		out->kind = CUBPF_SYNC_WARP;
	else if (starts(o, "bar.red") || starts(o, "barrier.red"))
		out->kind = CUBPF_SYNC_BAR_RED;
	else if (starts(o, "bar.arrive") || starts(o, "barrier.arrive"))
		out->kind = CUBPF_SYNC_BAR_ARRIVE;
	else if (starts(o, "bar.sync") || starts(o, "barrier.sync"))
		out->kind = CUBPF_SYNC_BAR;
	else
		return false;
	if (out->kind <= CUBPF_SYNC_BAR_RED)
		sync_id(in, out->kind == CUBPF_SYNC_BAR_RED, out);
	return true;
}

/* ---- context sources ---- */

/* Registers a kernel may keep adds in (cg_ctxsrc.defer_slot): a slot per add instruction of a
 * program (not per site: the sites of one program share its slots), the first 8 of a kernel;
 * the others add at once. */
#define INJ_DEFER_SLOTS 8u

struct site {
	const struct ptx_module *m;
	const struct ptx_func *f;
	uint32_t kernel_id;
	const struct ptx_insn *insn;   /* memprobe only */
	struct ptx_mem_access acc;
	uint32_t insn_index;
	bool block_end;                /* block probes: ctx->end */
	bool block_shared;             /* blockretprobes: the block's state in shared memory
					* (layout.h), not in the context's block table */
	struct ptx_sync sync;          /* syncprobe only */
	uint32_t sync_index;           /* its place among the function's sync sites */
	bool sync_after;
	bool sync_reads_before;        /* an after-probe read before_ns: the before side saves it */
	bool func_exit;                /* fentry/fexit: ctx->exit */
	bool reads_retval;             /* an fexit read ctx->retval from a .param return: do_fprobes
					* keeps the returned value in %__cb_rv (retval_keep) */
	const struct ptx_bblock *bb;   /* bbprobe only: the block */
	uint32_t bb_id;                /* its ctx->block_id */
	bool bbexit;                   /* bbretprobe: ctx->entries is the block's count */
	struct ptx_bblock *bbx;        /* bbretprobe: the kernel's blocks (do_exit to do_bbcount) */
	uint32_t nbbx;
	bool kexit;                    /* kretprobe: ctx->insns and warp_insns are the counts */
	bool count_entries;            /* do_bbcount counts each block's entries per thread */
	bool count_elected;            /* and the entries of the lane elected among those entering */
	struct ptx_loc_cursor loc;     /* memprobe, syncprobe: the instruction's line and .loc */
	bool defer_ok;                 /* a kernel whose adds may stay in registers (do_kernel) */
	bool exit_open;                /* do_exit began the exit block: do_kernel ends it */
	uint32_t prog;                 /* the program being emitted (emit_kind) */
	struct {
		uint32_t prog, pc;
	} defer[INJ_DEFER_SLOTS];      /* the kernel's defer slots: which add each one serves */
	uint32_t ndefer;
	struct cg_accs *accs;          /* the kernel's deferred counters (NULL: none at this site) */
	const bool *looped;            /* per instruction of the kernel: on a cycle of its flow graph
					* (NULL: unknown, none deferred) */
};

static const char *const sreg_names[12] = {
	"%tid.x", "%tid.y", "%tid.z", "%ntid.x", "%ntid.y", "%ntid.z",
	"%ctaid.x", "%ctaid.y", "%ctaid.z", "%nctaid.x", "%nctaid.y", "%nctaid.z",
};

static void load_sreg(struct ptx_buf *out, const char *dst, const char *sr)
{
	buf_printf(out, "\tmov.u32 %%__cb_w5, %s;\n\tcvt.u64.u32 %s, %%__cb_w5;\n", sr, dst);
}

/* params[i]: the first 8 bytes, zero-extended. */
static void load_param(struct ptx_buf *out, const char *dst, const struct ptx_param *p)
{
	if (p->size >= 8 && p->align >= 8) {
		buf_printf(out, "\tld.param.u64 %s, [%s];\n", dst, p->name);
		return;
	}
	if ((p->size == 4 || p->size == 2 || p->size == 1) && p->align >= p->size) {
		buf_printf(out, "\tld.param.u%u %s, [%s];\n", p->size * 8, dst, p->name);
		return;
	}
	uint32_t n = p->size < 8 ? p->size : 8;
	buf_printf(out, "\tmov.b64 %s, 0;\n", dst);
	for (uint32_t k = 0; k < n; k++) {
		buf_printf(out, "\tld.param.u8 %%__cb_t3, [%s+%u];\n", p->name, k);
		buf_printf(out, "\tshl.b64 %%__cb_t3, %%__cb_t3, %u;\n", 8 * k);
		buf_printf(out, "\tor.b64 %s, %s, %%__cb_t3;\n", dst, dst);
	}
}

static uint32_t bb_slot(const struct ptx_bblock *v, uint32_t i);

/* ctx->insns and warp_insns at kernel exit: each block's instruction count times its entries
 * (do_bbcount's counters: a register per block on a loop, a bit for the others; for warp_insns
 * those of the elected lane), summed; 0 at entry. */
static int icount_load(struct site *s, struct ptx_buf *out, const char *dst, uint32_t off,
		       uint32_t size)
{
	typedef struct cubpf_kernel_ctx K;
	if (size != 8 || (off != offsetof(K, insns) && off != offsetof(K, warp_insns)))
		return 0;
	buf_printf(out, "\tmov.b64 %s, 0;\n", dst);
	if (!s->kexit)
		return 1;
	bool warp = off == offsetof(K, warp_insns);
	if (!s->bbx && ptx_basic_blocks(s->m, s->f, &s->bbx, &s->nbbx))
		return -1;
	if (warp)
		ptx_mark_uniform_loops(s->f, s->bbx, s->nbbx);
	s->count_entries |= !warp;
	s->count_elected |= warp;
	for (uint32_t i = 0; i < s->nbbx; i++) {
		uint32_t k = bb_slot(s->bbx, i), c = s->bbx[i].count;
		if (warp && s->bbx[i].uniform) { /* the elected lane's entries (bbcount_enter) */
			s->count_entries = true;
			buf_printf(out, "\tmin.u32 %%__cb_w5, %%__cb_wc%u, 1;\n"
				   "\tmul.lo.u32 %%__cb_w5, %%__cb_w5, %%__cb_bc%u;\n"
				   "\tmad.wide.u32 %s, %%__cb_w5, %u, %s;\n", k, k, dst, c, dst);
			continue;
		}
		if (s->bbx[i].in_loop) {
			buf_printf(out, "\tmad.wide.u32 %s, %s%u, %u, %s;\n", dst,
				   warp ? "%__cb_wc" : "%__cb_bc", k, c, dst);
			continue;
		}
		buf_printf(out, "\tbfe.u32 %%__cb_w5, %s%u, %u, 1;\n", warp ? "%__cb_wm" : "%__cb_bm",
			   k / 32, k % 32);
		buf_printf(out, "\tmad.wide.u32 %s, %%__cb_w5, %u, %s;\n", dst, c, dst);
	}
	return 1;
}

static int kernel_ctx_load(void *user, struct ptx_buf *out, const char *dst, uint32_t off,
			   uint32_t size, char *err, size_t errlen)
{
	const struct site *s = user;
	int ic = icount_load(user, out, dst, off, size);
	if (ic) {
		if (ic < 0)
			ptx_seterr(err, errlen, "out of memory");
		return ic < 0 ? -1 : 0;
	}
	if (off < offsetof(struct cubpf_kernel_ctx, kernel_id) && size == 4 && off % 4 == 0) {
		load_sreg(out, dst, sreg_names[off / 4]);
		return 0;
	}
	uint32_t p0 = offsetof(struct cubpf_kernel_ctx, params);
	if (off >= p0 && off < sizeof(struct cubpf_kernel_ctx) && (off - p0) % 8 == 0 &&
	    (size == 8 || size == 4)) {
		uint32_t i = (off - p0) / 8;
		if (i >= s->f->param_cnt)
			buf_printf(out, "\tmov.b64 %s, 0;\n", dst);
		else
			load_param(out, dst, &s->f->params[i]);
		if (size == 4)
			buf_printf(out, "\tand.b64 %s, %s, 0xFFFFFFFF;\n", dst, dst);
		return 0;
	}
	ptx_seterr(err, errlen, "kernel context has no %u-byte field at offset %u", size, off);
	return -1;
}

/* The register's declared width in bits (64 when unknown but named like nvcc's %rd). */
static int reg_bits(const struct ptx_func *f, const char *name, size_t len)
{
	for (uint32_t i = 0; i < f->reg_cnt; i++) {
		const struct ptx_regdecl *d = &f->regs[i];
		size_t l = strlen(d->name);
		if (d->count == 0 && l == len && !strncmp(d->name, name, len))
			return (int)type_bits_of(d->type);
		if (d->count && len > l && !strncmp(d->name, name, l)) {
			size_t k = l;
			while (k < len && name[k] >= '0' && name[k] <= '9')
				k++;
			if (k == len && (uint32_t)strtoul(name + l, NULL, 10) < d->count)
				return (int)type_bits_of(d->type);
		}
	}
	return -1;
}

/* Emits dst = the access's address (as the instruction uses it). */
static int mem_addr(const struct site *s, struct ptx_buf *out, const char *dst, char *err,
		    size_t errlen)
{
	char a[256];
	if (s->acc.addr_len >= sizeof(a)) {
		ptx_seterr(err, errlen, "address operand too long");
		return -1;
	}
	memcpy(a, s->acc.addr, s->acc.addr_len);
	a[s->acc.addr_len] = 0;
	char *plus = strchr(a + 1, '+');
	long long off = 0;
	if (plus) {
		off = strtoll(plus + 1, NULL, 0);
		*plus = 0;
	}
	char *base = a;
	while (*base == ' ')
		base++;
	for (char *e = base + strlen(base); e > base && e[-1] == ' ';)
		*--e = 0;
	if (base[0] == '%') {
		int bits = reg_bits(s->f, base, strlen(base));
		if (bits == 64)
			buf_printf(out, "\tadd.s64 %s, %s, %lld;\n", dst, base, off);
		else if (bits == 32) {
			buf_printf(out, "\tcvt.u64.u32 %s, %s;\n", dst, base);
			buf_printf(out, "\tadd.s64 %s, %s, %lld;\n", dst, dst, off);
		} else {
			ptx_seterr(err, errlen, "address register %s has no known width", base);
			return -1;
		}
	} else if ((base[0] >= '0' && base[0] <= '9') || base[0] == '-') {
		buf_printf(out, "\tmov.b64 %s, %lld;\n", dst, strtoll(base, NULL, 0) + off);
	} else {
		buf_printf(out, "\tmov.u64 %s, %s;\n", dst, base);
		buf_printf(out, "\tadd.s64 %s, %s, %lld;\n", dst, dst, off);
	}
	return 0;
}

static bool kernel_ctx_const(void *user, uint32_t off, uint32_t size, uint64_t *val)
{
	const struct site *s = user;
	if (size != 4)
		return false;
	if (off == offsetof(struct cubpf_kernel_ctx, kernel_id))
		*val = s->kernel_id;
	else if (off == offsetof(struct cubpf_kernel_ctx, nparams))
		*val = s->f->param_cnt;
	else
		return false;
	return true;
}

/* ctx->insns and warp_insns are 0 at kernel entry: a program shared with kretprobes folds. */
static bool kernel_ctx_const64(void *user, uint32_t off, uint32_t size, uint64_t *val)
{
	const struct site *s = user;
	typedef struct cubpf_kernel_ctx K;
	if (size == 8 && !s->kexit && (off == offsetof(K, insns) || off == offsetof(K, warp_insns))) {
		*val = 0;
		return true;
	}
	return kernel_ctx_const(user, off, size, val);
}

static bool mem_ctx_const(void *user, uint32_t off, uint32_t size, uint64_t *val)
{
	const struct site *s = user;
	typedef struct cubpf_mem_ctx M;
	if (size != 4)
		return false;
	if (off == offsetof(M, size))
		*val = s->acc.size;
	else if (off == offsetof(M, space))
		*val = (uint32_t)s->acc.space;
	else if (off == offsetof(M, op))
		*val = s->acc.op;
	else if (off == offsetof(M, insn_index))
		*val = s->insn_index;
	else if (off == offsetof(M, kernel_id))
		*val = s->kernel_id;
	else if (off == offsetof(M, ptx_line))
		*val = s->loc.line;
	else if (off == offsetof(M, src_file))
		*val = s->loc.file;
	else if (off == offsetof(M, src_line))
		*val = s->loc.src;
	else
		return false;
	return true;
}

static int mem_ctx_load(void *user, struct ptx_buf *out, const char *dst, uint32_t off,
			uint32_t size, char *err, size_t errlen)
{
	const struct site *s = user;
	typedef struct cubpf_mem_ctx M;
	if (off == offsetof(M, addr) && size == 8)
		return mem_addr(s, out, dst, err, errlen);
	static const uint32_t sr_off[6] = {offsetof(M, tid_x), offsetof(M, tid_y), offsetof(M, tid_z),
					   offsetof(M, ctaid_x), offsetof(M, ctaid_y),
					   offsetof(M, ctaid_z)};
	for (int i = 0; i < 6 && size == 4; i++)
		if (off == sr_off[i]) {
			load_sreg(out, dst, sreg_names[i < 3 ? i : i + 3]);
			return 0;
		}
	ptx_seterr(err, errlen, "memory context has no %u-byte field at offset %u", size, off);
	return -1;
}

/* Block probes: the grid's special registers, %smid, %globaltimer, and two constants. */
static bool block_ctx_const(void *user, uint32_t off, uint32_t size, uint64_t *val)
{
	const struct site *s = user;
	typedef struct cubpf_block_ctx B;
	if (size != 4)
		return false;
	if (off == offsetof(B, kernel_id))
		*val = s->kernel_id;
	else if (off == offsetof(B, end))
		*val = s->block_end;
	else
		return false;
	return true;
}

static int block_ctx_load(void *user, struct ptx_buf *out, const char *dst, uint32_t off,
			  uint32_t size, char *err, size_t errlen)
{
	const struct site *s = user;
	typedef struct cubpf_block_ctx B;
	/* ctaid, nctaid, ntid in the context; sreg_names holds tid, ntid, ctaid, nctaid */
	static const uint8_t sreg_of[9] = {6, 7, 8, 9, 10, 11, 3, 4, 5};
	if (size == 4 && off % 4 == 0 && off / 4 < 9) {
		load_sreg(out, dst, sreg_names[sreg_of[off / 4]]);
		return 0;
	}
	if (size == 4 && off == offsetof(B, sm_id)) {
		load_sreg(out, dst, "%smid");
		return 0;
	}
	if (size == 8 && (off == offsetof(B, time_ns) ||
			  (off == offsetof(B, begin_ns) && !s->block_end))) {
		buf_printf(out, "\tmov.u64 %s, %%globaltimer;\n", dst);
		return 0;
	}
	if (size == 8 && off == offsetof(B, begin_ns) && s->block_shared) {
		buf_printf(out, "\tld.shared.u64 %s, [" CUBPF_BLOCK_SHARED_SYMBOL "+%u];\n", dst,
			   (unsigned)offsetof(struct cubpf_block_shared, begin_ns));
		return 0;
	}
	if (size == 8 && off == offsetof(B, begin_ns)) { /* thread (0,0,0) kept it at begin */
		buf_printf(out, "\tld.%s.global.u64 %s, [%%__cb_bk3+%u];\n",
			   ordered_ops(s->m) ? "relaxed.gpu" : "volatile", dst,
			   (unsigned)offsetof(struct cubpf_block_slot, begin_ns));
		return 0;
	}
	ptx_seterr(err, errlen, "block context has no %u-byte field at offset %u", size, off);
	return -1;
}

/* Sync probes: constants of the site, the barrier number from its register, the thread's
 * special registers, %smid and %globaltimer. */
static bool sync_ctx_const(void *user, uint32_t off, uint32_t size, uint64_t *val)
{
	const struct site *s = user;
	typedef struct cubpf_sync_ctx S;
	if (size != 4)
		return false;
	if (off == offsetof(S, kind))
		*val = s->sync.kind;
	else if (off == offsetof(S, id) && !s->sync.id_reg)
		*val = s->sync.id;
	else if (off == offsetof(S, after))
		*val = s->sync_after;
	else if (off == offsetof(S, site))
		*val = s->insn_index;
	else if (off == offsetof(S, kernel_id))
		*val = s->kernel_id;
	else if (off == offsetof(S, ptx_line))
		*val = s->loc.line;
	else if (off == offsetof(S, src_file))
		*val = s->loc.file;
	else if (off == offsetof(S, src_line))
		*val = s->loc.src;
	else if (off == offsetof(S, sync_index))
		*val = s->sync_index;
	else
		return false;
	return true;
}

static int sync_ctx_load(void *user, struct ptx_buf *out, const char *dst, uint32_t off,
			 uint32_t size, char *err, size_t errlen)
{
	const struct site *s = user;
	typedef struct cubpf_sync_ctx S;
	if (size == 4 && off == offsetof(S, id)) { /* PTX's barrier operand is a .u32 (a register
						      * of an asm block's own scope, too) */
		buf_printf(out, "\tcvt.u64.u32 %s, %s;\n", dst, s->sync.id_reg);
		return 0;
	}
	static const uint32_t sr_off[6] = {offsetof(S, tid_x), offsetof(S, tid_y), offsetof(S, tid_z),
					   offsetof(S, ctaid_x), offsetof(S, ctaid_y),
					   offsetof(S, ctaid_z)};
	for (int i = 0; i < 6 && size == 4; i++)
		if (off == sr_off[i]) {
			load_sreg(out, dst, sreg_names[i < 3 ? i : i + 3]);
			return 0;
		}
	if (size == 4 && off == offsetof(S, sm_id)) {
		load_sreg(out, dst, "%smid");
		return 0;
	}
	if (size == 8 && (off == offsetof(S, time_ns) ||
			  (off == offsetof(S, before_ns) && !s->sync_after))) {
		buf_printf(out, "\tmov.u64 %s, %%globaltimer;\n", dst);
		return 0;
	}
	if (size == 8 && off == offsetof(S, before_ns)) { /* saved just before the instruction */
		((struct site *)user)->sync_reads_before = true;
		buf_printf(out, "\tmov.b64 %s, %%__cb_sb;\n", dst);
		return 0;
	}
	ptx_seterr(err, errlen, "sync context has no %u-byte field at offset %u", size, off);
	return -1;
}

/* fentry/fexit: the thread's special registers, the .func's parameters, four constants. */
static bool func_ctx_const(void *user, uint32_t off, uint32_t size, uint64_t *val)
{
	const struct site *s = user;
	typedef struct cubpf_func_ctx F;
	if (size == 8 && off == offsetof(F, retval) && (!s->func_exit || !s->f->ret_cnt)) {
		*val = 0;
		return true;
	}
	if (size != 4)
		return false;
	if (off == offsetof(F, kernel_id))
		*val = s->kernel_id;
	else if (off == offsetof(F, has_retval))
		*val = s->func_exit && s->f->ret_cnt;
	else if (off == offsetof(F, nparams))
		*val = s->f->param_cnt;
	else if (off == offsetof(F, func_id))
		*val = ptx_kernel_id(s->f->name);
	else if (off == offsetof(F, exit))
		*val = s->func_exit;
	else
		return false;
	return true;
}

/* Basic block probes: everything but the thread's special registers and %smid is a constant
 * of the site. */
static bool bb_ctx_const(void *user, uint32_t off, uint32_t size, uint64_t *val)
{
	const struct site *s = user;
	typedef struct cubpf_bb_ctx C;
	if (size != 4 || off % 4)
		return false;
	if (off == offsetof(C, block_id))
		*val = s->bb_id;
	else if (off == offsetof(C, insn_count))
		*val = s->bb->count;
	else if (off == offsetof(C, kernel_id))
		*val = s->kernel_id;
	else if (off == offsetof(C, ptx_line))
		*val = s->bb->line;
	else if (off == offsetof(C, src_file))
		*val = s->bb->src_file;
	else if (off == offsetof(C, src_line))
		*val = s->bb->src_line;
	else if (off >= offsetof(C, op_class) && off < offsetof(C, tid_x))
		*val = s->bb->classes[(off - offsetof(C, op_class)) / 4];
	else if (off == offsetof(C, entries) && !s->bbexit)
		*val = 1; /* bbprobe: this entry */
	else
		return false;
	return true;
}

/* A .func parameter as ctx->params[i]: .param ones as a kernel's, .reg ones (PTX without the
 * ABI) from the register. */
static int func_param(struct ptx_buf *out, const char *dst, const struct ptx_param *p, char *err,
		      size_t errlen)
{
	if (!p->is_reg)
		load_param(out, dst, p);
	else if (!strcmp(p->type, "pred"))
		buf_printf(out, "\tselp.u64 %s, 1, 0, %s;\n", dst, p->name);
	else if (p->size == 8)
		buf_printf(out, "\tmov.b64 %s, %s;\n", dst, p->name);
	else if (p->size == 4)
		buf_printf(out, "\tmov.b32 %%__cb_w5, %s;\n\tcvt.u64.u32 %s, %%__cb_w5;\n", p->name,
			   dst);
	else {
		ptx_seterr(err, errlen, "a .reg parameter of %u bytes is not readable (%s)", p->size,
			   p->name);
		return -1;
	}
	return 0;
}

/* ctx->retval at an fexit: a .reg return is the register itself; a .param return cannot be
 * read back by the function (ptxas refuses), so what it stored there is kept in %__cb_rv as it
 * goes (retval_keep). */
static int func_retval(struct site *s, struct ptx_buf *out, const char *dst, char *err,
		       size_t errlen)
{
	if (!s->func_exit || !s->f->ret_cnt) {
		buf_printf(out, "\tmov.b64 %s, 0;\n", dst);
		return 0;
	}
	if (s->f->rets[0].is_reg)
		return func_param(out, dst, &s->f->rets[0], err, errlen);
	s->reads_retval = true;
	buf_printf(out, "\tmov.b64 %s, %%__cb_rv;\n", dst);
	return 0;
}

static int func_ctx_load(void *user, struct ptx_buf *out, const char *dst, uint32_t off,
			 uint32_t size, char *err, size_t errlen)
{
	const struct site *s = user;
	typedef struct cubpf_func_ctx F;
	if (off == offsetof(F, retval) && size == 8)
		return func_retval(user, out, dst, err, errlen);
	if (off < offsetof(F, kernel_id) && size == 4 && off % 4 == 0) {
		load_sreg(out, dst, sreg_names[off / 4]); /* tid, ntid, ctaid, nctaid: same order */
		return 0;
	}
	uint32_t p0 = offsetof(F, params), pend = offsetof(F, retval);
	if (off >= p0 && off < pend && (off - p0) % 8 == 0 && (size == 8 || size == 4)) {
		uint32_t i = (off - p0) / 8;
		if (i >= s->f->param_cnt)
			buf_printf(out, "\tmov.b64 %s, 0;\n", dst);
		else if (func_param(out, dst, &s->f->params[i], err, errlen))
			return -1;
		if (size == 4)
			buf_printf(out, "\tand.b64 %s, %s, 0xFFFFFFFF;\n", dst, dst);
		return 0;
	}
	ptx_seterr(err, errlen, "function context has no %u-byte field at offset %u", size, off);
	return -1;
}

/* Where do_bbcount keeps the entries of block i: a counter register (%__cb_bc<k>, blocks on a
 * loop) or bit k % 32 of a mask (%__cb_bm<k / 32>, the others: entered at most once). */
static uint32_t bb_slot(const struct ptx_bblock *v, uint32_t i)
{
	uint32_t k = 0;
	for (uint32_t j = 0; j < i; j++)
		k += v[j].in_loop == v[i].in_loop;
	return k;
}

static void bb_entries_load(const struct site *s, struct ptx_buf *out, const char *dst)
{
	uint32_t i = (uint32_t)(s->bb - s->bbx), k = bb_slot(s->bbx, i);
	if (s->bb->in_loop)
		buf_printf(out, "\tcvt.u64.u32 %s, %%__cb_bc%u;\n", dst, k);
	else
		buf_printf(out, "\tbfe.u32 %%__cb_w5, %%__cb_bm%u, %u, 1;\n\tcvt.u64.u32 %s, %%__cb_w5;\n",
			   k / 32, k % 32, dst);
}

static int bb_ctx_load(void *user, struct ptx_buf *out, const char *dst, uint32_t off,
		       uint32_t size, char *err, size_t errlen)
{
	typedef struct cubpf_bb_ctx C;
	static const uint32_t sr_off[6] = {offsetof(C, tid_x), offsetof(C, tid_y), offsetof(C, tid_z),
					   offsetof(C, ctaid_x), offsetof(C, ctaid_y),
					   offsetof(C, ctaid_z)};
	for (int i = 0; i < 6 && size == 4; i++)
		if (off == sr_off[i]) {
			load_sreg(out, dst, sreg_names[i < 3 ? i : i + 3]);
			return 0;
		}
	if (size == 4 && off == offsetof(C, sm_id)) {
		load_sreg(out, dst, "%smid");
		return 0;
	}
	if (size == 4 && off == offsetof(C, entries)) { /* bbretprobe (bbprobe's is constant) */
		bb_entries_load(user, out, dst);
		return 0;
	}
	ptx_seterr(err, errlen, "basic block context has no %u-byte field at offset %u", size, off);
	return -1;
}

/* The slot of program s->prog's add at pc, allocated at its first site (defer_ok: sync, memory
 * and basic block probes of a kernel, whose exit block adds what the slots hold). */
static int site_defer_slot(void *user, uint32_t pc)
{
	struct site *s = user;
	if (!s->defer_ok)
		return -1;
	for (uint32_t i = 0; i < s->ndefer; i++)
		if (s->defer[i].prog == s->prog && s->defer[i].pc == pc)
			return (int)i;
	if (s->ndefer == INJ_DEFER_SLOTS)
		return -1;
	s->defer[s->ndefer].prog = s->prog, s->defer[s->ndefer].pc = pc;
	return (int)s->ndefer++;
}

/* ---- per kernel ---- */

/* declarations beyond the code generator's: block counts, a sync site's saved guard, its
 * saved time */
enum { DECL_BLOCKS = 1, DECL_SYNC = 2, DECL_SYNC_TIME = 4, DECL_BLOCK_TABLE = 8,
       DECL_BLOCK_SHARED = 16 };

struct inj {
	const struct ptx_inject_opts *o;
	struct cg_prog **cp;          /* compiled programs, NULL for non-GPU ones */
	const struct ptx_module *m;
	struct edits ed;
	struct cg_result need;        /* union of the needs of all sites in this module */
	uint32_t site;
	bool enable_used;             /* some site reads __cubpf_enable */
	bool blocks_used;             /* some block end reads __cubpf_blocks */
	char *err;
	size_t errlen;
	struct ptx_inject_report *rep;
	bool elect;                   /* elect.sync is there (sm_90, PTX 8.0 and later) */
	bool redux;                   /* redux.sync is there (sm_80, PTX 7.0 and later) */
	uint64_t defer_maps;          /* maps whose adds kernels may defer (struct cg_accs) */
	bool funcs_exit;              /* a .func may end the thread (funcs_exit): nothing deferred */
};

static void need_merge(struct cg_result *a, const struct cg_result *b)
{
	if (b->stack_bytes > a->stack_bytes)
		a->stack_bytes = b->stack_bytes;
	a->needs_r10 |= b->needs_r10;
	a->vprintf |= b->vprintf;
	a->maps_used |= b->maps_used;
}

/* The enable word of the site's kernel (word 0 for device functions shared by several
 * kernels; ids past CUBPF_ENABLE_WORDS wrap), loaded once per site into %__cb_en, then a skip
 * of program p when its bit is clear (layout.h, "enable words"). */
static void enable_check(struct inj *j, const struct site *s, uint32_t p, bool first,
			 const char *lbl, struct ptx_buf *out)
{
	uint32_t word = s->kernel_id == CUBPF_KERNEL_ID_SHARED ? 0
							       : s->kernel_id % CUBPF_ENABLE_WORDS;
	uint32_t bit = p < 31 ? 1u << p : 1u << 31;
	if (first) {
		buf_printf(out, "\tld.const.u64 %%__cb_t0, [" CUBPF_ENABLE_SYMBOL "];\n");
		buf_printf(out, "\tld.global.u32 %%__cb_en, [%%__cb_t0+%u];\n", 4 * word);
	}
	buf_printf(out, "\tand.b32 %%__cb_w0, %%__cb_en, %u;\n", bit);
	buf_printf(out, "\tsetp.eq.u32 %%__cb_p0, %%__cb_w0, 0;\n");
	buf_printf(out, "\t@%%__cb_p0 bra %send;\n", lbl);
	j->enable_used = true;
}

/* Kinds whose adds may stay in registers until the kernel's exit block: those that run at
 * many places while the kernel runs (not the exit block's own, nor the entry's, which run once). */
static bool defer_kind(enum vm_prog_kind kind)
{
	return kind == VM_PROG_SYNCPROBE || kind == VM_PROG_MEMPROBE || kind == VM_PROG_BBPROBE;
}

/* Whether a program of the kernel may keep adds in registers: the kernel then zeroes
 * INJ_DEFER_SLOTS slots where it starts and flushes them in its exit block. */
static bool kernel_defers(const struct inj *j, const bool *sel)
{
	if (j->funcs_exit) /* a thread ending inside a .func would take its sums with it */
		return false;
	for (uint32_t p = 0; p < j->o->prog_cnt; p++)
		if (sel[p] && j->cp[p] && defer_kind(j->o->progs[p].kind) && ptx_cg_may_defer(j->cp[p]))
			return true;
	return false;
}

/* Whether a counter at this site may be deferred (struct cg_accs): only where a thread may pass
 * again, on a cycle of the kernel's flow graph.  A counter a thread adds to once gains nothing
 * from waiting for its exit and pays the flush there (and the block sums' entry barrier): on
 * vec_add (2^26 floats, H100, 2026-11-28) memtrace went from 1.74x to 2.68x with every site
 * deferred, while the barrier-heavy reduction, whose accesses are in loops, went from 3.04x to
 * 1.24x. */
static bool site_loops(const struct site *s, enum vm_prog_kind kind)
{
	if (!s->accs)
		return false;
	if (kind == VM_PROG_BBPROBE)
		return s->bb && s->bb->in_loop;
	if (kind != VM_PROG_MEMPROBE && kind != VM_PROG_SYNCPROBE)
		return false;
	return s->looped && s->insn_index < s->f->insn_cnt && s->looped[s->insn_index];
}

/* The per-instruction map of loops of site_loops, from the kernel's basic blocks: NULL when
 * nothing may be deferred, out of memory, or the kernel is larger than LOOP_MAP_MAX_INSNS
 * (finding loops costs blocks x edges; deferral is only a saving, so a huge kernel goes
 * without rather than making its module's load slow). */
#define LOOP_MAP_MAX_INSNS 20000u
static bool *loop_map(const struct inj *j, const struct ptx_func *f)
{
	struct ptx_bblock *bbs;
	uint32_t n;
	bool *looped = j->defer_maps && f->insn_cnt <= LOOP_MAP_MAX_INSNS ?
			       calloc(f->insn_cnt + 1, 1) : NULL;
	if (!looped || ptx_basic_blocks(j->m, f, &bbs, &n)) {
		free(looped);
		return NULL;
	}
	for (uint32_t b = 0; b < n; b++)
		for (uint32_t k = 0; bbs[b].in_loop && k < bbs[b].count; k++)
			if (bbs[b].first + k < f->insn_cnt)
				looped[bbs[b].first + k] = true;
	free(bbs);
	return looped;
}

/* Emits every program of `kind` that applies to this kernel; returns how many did. */
static int emit_kind(struct inj *j, const bool *sel, enum vm_prog_kind kind, struct site *s,
		     struct ptx_buf *out, struct cg_result *fneed)
{
	int cnt = 0;
	for (uint32_t p = 0; p < j->o->prog_cnt; p++) {
		if (!sel[p] || j->o->progs[p].kind != kind)
			continue;
		char lbl[48];
		snprintf(lbl, sizeof(lbl), "$__cb%u_", j->site++);
		buf_printf(out, "\t// cubpf: %s %s\n", kind_name(kind),
			   j->o->progs[p].name ? j->o->progs[p].name : "");
		if (j->o->enable_words)
			enable_check(j, s, p, cnt == 0, lbl, out);
		struct cg_ctxsrc src = {.load = kernel_ctx_load, .constant = kernel_ctx_const64,
					.user = s};
		if (kind == VM_PROG_MEMPROBE)
			src.load = mem_ctx_load, src.constant = mem_ctx_const;
		else if (kind == VM_PROG_BLOCKPROBE || kind == VM_PROG_BLOCKRETPROBE)
			src.load = block_ctx_load, src.constant = block_ctx_const;
		else if (kind == VM_PROG_SYNCPROBE)
			src.load = sync_ctx_load, src.constant = sync_ctx_const;
		else if (kind == VM_PROG_FENTRY || kind == VM_PROG_FEXIT)
			src.load = func_ctx_load, src.constant = func_ctx_const;
		else if (kind == VM_PROG_BBPROBE || kind == VM_PROG_BBRETPROBE)
			src.load = bb_ctx_load, src.constant = bb_ctx_const;
		if (defer_kind(kind))
			src.defer_slot = site_defer_slot;
		s->prog = p;
		src.accs = site_loops(s, kind) ? s->accs : NULL;
		struct cg_result res = {0};
		if (ptx_cg_emit(j->cp[p], &src, lbl, out, &res, j->err, j->errlen))
			return -1;
		need_merge(fneed, &res);
		cnt++;
	}
	return cnt;
}

/* Where to insert code before the statement at off: the start of its line when only blanks
 * precede it there (keeps the layout), else off itself. */
static size_t insert_at(const char *text, size_t off, bool *line_start)
{
	size_t i = off;
	while (i > 0 && (text[i - 1] == ' ' || text[i - 1] == '\t'))
		i--;
	*line_start = i == 0 || text[i - 1] == '\n';
	return *line_start ? i : off;
}

/* Inserts b, the probes of one site, before the statement at `off` (at the start of its line,
 * indented as a statement).  Takes b, freed on failure too.  0, or -1 with the error set. */
static int insert_site(struct inj *j, size_t off, struct ptx_buf *b)
{
	bool ls;
	size_t at = insert_at(j->m->text, off, &ls);
	if (!ls)
		ptx_buf_puts(b, "\t");
	if (edit_add(&j->ed, at, 0, b) == 0)
		return 0;
	ptx_buf_free(b);
	ptx_seterr(j->err, j->errlen, "out of memory");
	return -1;
}

/* A site under its instruction's predicate: the probes run only when it holds, so a branch over
 * them (to $__cb<skip>_<tag>) when it does not. */
static void guard_open(struct ptx_buf *b, const struct ptx_insn *in, uint32_t skip, const char *tag)
{
	if (in->pred)
		buf_printf(b, "\t@%s%s bra $__cb%u_%s;\n", in->pred_neg ? "" : "!", in->pred, skip,
			   tag);
}

static void guard_close(struct ptx_buf *b, const struct ptx_insn *in, uint32_t skip, const char *tag)
{
	if (in->pred)
		buf_printf(b, "$__cb%u_%s:\n", skip, tag);
}

static bool is_exit(const struct ptx_insn *in)
{
	return !strcmp(in->opcode, "ret") || !strcmp(in->opcode, "ret.uni") ||
	       !strcmp(in->opcode, "exit");
}

static bool any_kind(const struct inj *j, const bool *sel, enum vm_prog_kind kind)
{
	for (uint32_t p = 0; p < j->o->prog_cnt; p++)
		if (sel[p] && j->o->progs[p].kind == kind)
			return true;
	return false;
}

/* The block's key, its start slot and the table (layout.h, "thread block table"), into
 * %__cb_bk0, %__cb_bk1 and %__cb_bk2 (%__cb_b3 and %__cb_bk3 are scratch). */
static void block_key(struct ptx_buf *b)
{
	ptx_buf_puts(b, "\tmov.u64 %__cb_bk0, %gridid;\n"
		     "\tshl.b64 %__cb_bk1, %__cb_bk0, 32;\n\tshr.u64 %__cb_bk0, %__cb_bk0, 32;\n"
		     "\tor.b64 %__cb_bk0, %__cb_bk0, %__cb_bk1;\n"
		     "\tmov.u32 %__cb_b3, %ctaid.z;\n\tcvt.u64.u32 %__cb_bk1, %__cb_b3;\n"
		     "\tmov.u32 %__cb_b3, %nctaid.y;\n\tcvt.u64.u32 %__cb_bk3, %__cb_b3;\n"
		     "\tmul.lo.u64 %__cb_bk1, %__cb_bk1, %__cb_bk3;\n"
		     "\tmov.u32 %__cb_b3, %ctaid.y;\n\tcvt.u64.u32 %__cb_bk3, %__cb_b3;\n"
		     "\tadd.s64 %__cb_bk1, %__cb_bk1, %__cb_bk3;\n"
		     "\tmov.u32 %__cb_b3, %nctaid.x;\n\tcvt.u64.u32 %__cb_bk3, %__cb_b3;\n"
		     "\tmul.lo.u64 %__cb_bk1, %__cb_bk1, %__cb_bk3;\n"
		     "\tmov.u32 %__cb_b3, %ctaid.x;\n\tcvt.u64.u32 %__cb_bk3, %__cb_b3;\n"
		     "\tadd.s64 %__cb_bk1, %__cb_bk1, %__cb_bk3;\n"
		     "\txor.b64 %__cb_bk0, %__cb_bk0, %__cb_bk1;\n"
		     "\tshl.b64 %__cb_bk0, %__cb_bk0, 1;\n\tor.b64 %__cb_bk0, %__cb_bk0, 1;\n");
	buf_printf(b, "\tmul.lo.u64 %%__cb_bk1, %%__cb_bk0, %llu;\n"
		   "\tshr.u64 %%__cb_bk1, %%__cb_bk1, %u;\n",
		   (unsigned long long)CUBPF_BLOCK_HASH_MUL, 64 - CUBPF_BLOCK_SLOT_BITS);
	ptx_buf_puts(b, "\tld.const.u64 %__cb_bk2, [" CUBPF_BLOCKS_SYMBOL "];\n"
		     "\tmov.u32 %__cb_b2, 0;\n");
}

/* One step of a scan from label `top`: %__cb_bk3 = the slot's address (top), and after `next`
 * the following slot, back to top while fewer than CUBPF_BLOCK_PROBES were tried. */
static void block_slot(struct ptx_buf *b, uint32_t lbl)
{
	buf_printf(b, "$__cb%u_bslot:\n\tshl.b64 %%__cb_bk3, %%__cb_bk1, 5;\n"
		   "\tadd.s64 %%__cb_bk3, %%__cb_bk2, %%__cb_bk3;\n", lbl);
}

static void block_next(struct ptx_buf *b, uint32_t lbl)
{
	buf_printf(b, "$__cb%u_bnext:\n\tadd.s64 %%__cb_bk1, %%__cb_bk1, 1;\n"
		   "\tand.b64 %%__cb_bk1, %%__cb_bk1, %u;\n\tadd.u32 %%__cb_b2, %%__cb_b2, 1;\n"
		   "\tsetp.lt.u32 %%__cb_bp1, %%__cb_b2, %u;\n\t@%%__cb_bp1 bra $__cb%u_bslot;\n",
		   lbl, CUBPF_BLOCK_SLOTS - 1, CUBPF_BLOCK_PROBES, lbl);
}

/* Thread (0,0,0) claims a slot for its block: a free one (EMPTY, or TOMB from modules of older
 * cubpf sharing the context's table) by a CAS straight from EMPTY, with no load first: the CAS
 * returns what the slot holds, so a free slot costs one L2 round trip, not two (a load, then
 * the CAS), and every thread of the block waits for it at the entry barrier (issue 32).  A CAS
 * that finds the slot free under the other value tries it again from that value; one that
 * finds a key moves on; each try counts against CUBPF_BLOCK_PROBES.  Acquire: the stores that
 * follow come after the previous owner's release.  Then it stores the begin time and the
 * thread count; a block that finds none is counted, not tracked.  Relaxed .gpu stores: the
 * entry barrier that follows makes them visible to the block's threads (bar.sync orders the
 * memory accesses of the threads that take part in it), before any of them looks the key up. */
static void block_insert(struct inj *j, struct ptx_buf *b)
{
	uint32_t lbl = j->site++;
	bool ord = ordered_ops(j->m);
	const char *st = ord ? "st.relaxed.gpu.global" : "st.volatile.global";
	block_key(b);
	buf_printf(b, "\tmov.u64 %%__cb_bk4, %llu;\n", CUBPF_BLOCK_EMPTY);
	block_slot(b, lbl);
	buf_printf(b, "\tatom%s.global.cas.b64 %%__cb_bk5, [%%__cb_bk3], %%__cb_bk4, %%__cb_bk0;\n"
		   "\tsetp.eq.u64 %%__cb_bp1, %%__cb_bk5, %%__cb_bk4;\n"
		   "\t@%%__cb_bp1 bra $__cb%u_bclaim;\n"
		   "\tsetp.eq.u64 %%__cb_bp1, %%__cb_bk5, %llu;\n"
		   "\tsetp.eq.or.u64 %%__cb_bp1, %%__cb_bk5, %llu, %%__cb_bp1;\n"
		   "\tselp.u64 %%__cb_bk4, %%__cb_bk5, %llu, %%__cb_bp1;\n"
		   "\t@!%%__cb_bp1 add.s64 %%__cb_bk1, %%__cb_bk1, 1;\n"
		   "\tand.b64 %%__cb_bk1, %%__cb_bk1, %u;\n\tadd.u32 %%__cb_b2, %%__cb_b2, 1;\n"
		   "\tsetp.lt.u32 %%__cb_bp1, %%__cb_b2, %u;\n\t@%%__cb_bp1 bra $__cb%u_bslot;\n",
		   ord ? ".acquire.gpu" : "", lbl, CUBPF_BLOCK_EMPTY, CUBPF_BLOCK_TOMB,
		   CUBPF_BLOCK_EMPTY, CUBPF_BLOCK_SLOTS - 1, CUBPF_BLOCK_PROBES, lbl);
	buf_printf(b, "\tred.global.add.u64 [%%__cb_bk2+%llu], 1;\n\tbra $__cb%u_bin;\n"
		   "$__cb%u_bclaim:\n%s", (unsigned long long)CUBPF_BLOCK_UNTRACKED_OFFSET, lbl, lbl,
		   ord ? "" : "\tmembar.gl;\n");
	buf_printf(b, "\tmul.lo.u64 %%__cb_bk5, %%__cb_bk0, %llu;\n\tshr.u64 %%__cb_bk5, %%__cb_bk5, %u;\n"
		   "\tsetp.eq.u64 %%__cb_bq, %%__cb_bk5, %%__cb_bk1;\n",
		   (unsigned long long)CUBPF_BLOCK_HASH_MUL, 64 - CUBPF_BLOCK_SLOT_BITS);
	buf_printf(b, "\tmov.u64 %%__cb_bk4, %%globaltimer;\n\t%s.u64 [%%__cb_bk3+%u], %%__cb_bk4;\n"
		   "\tmov.u32 %%__cb_b1, %%ntid.x;\n\tmov.u32 %%__cb_b2, %%ntid.y;\n"
		   "\tmul.lo.u32 %%__cb_b1, %%__cb_b1, %%__cb_b2;\n\tmov.u32 %%__cb_b2, %%ntid.z;\n"
		   "\tmul.lo.u32 %%__cb_b1, %%__cb_b1, %%__cb_b2;\n\t%s.u32 [%%__cb_bk3+%u], %%__cb_b1;\n"
		   "$__cb%u_bin:\n", st, (unsigned)offsetof(struct cubpf_block_slot, begin_ns), st,
		   (unsigned)offsetof(struct cubpf_block_slot, left), lbl);
	j->blocks_used = true;
}

/* Thread (0,0,0) keeps its block's state in shared memory (layout.h, "thread block state in
 * shared memory"): the begin time and the count of threads still running, the block's size.
 * Two shared stores: the entry barrier that follows waits for no L2 round trip (issue 32). */
_Static_assert(sizeof(struct cubpf_block_shared) == CUBPF_BLOCK_SHARED_BYTES,
	       "the block's state is the 16 bytes add_decls declares");
static void block_keep(struct ptx_buf *b)
{
	buf_printf(b, "\tmov.u64 %%__cb_bt, %%globaltimer;\n"
		   "\tst.shared.u64 [" CUBPF_BLOCK_SHARED_SYMBOL "+%u], %%__cb_bt;\n",
		   (unsigned)offsetof(struct cubpf_block_shared, begin_ns));
	buf_printf(b, "\tmov.u32 %%__cb_b1, %%ntid.x;\n\tmov.u32 %%__cb_b2, %%ntid.y;\n"
		   "\tmul.lo.u32 %%__cb_b1, %%__cb_b1, %%__cb_b2;\n\tmov.u32 %%__cb_b2, %%ntid.z;\n"
		   "\tmul.lo.u32 %%__cb_b1, %%__cb_b1, %%__cb_b2;\n"
		   "\tst.shared.u32 [" CUBPF_BLOCK_SHARED_SYMBOL "+%u], %%__cb_b1;\n",
		   (unsigned)offsetof(struct cubpf_block_shared, left));
}

/* Thread block begin, at the kernel's entry.  Thread (0,0,0) runs the blockprobes; with
 * blockretprobes it also keeps the block's state (the count of its threads still running and
 * its begin time, ctx->begin_ns at the end): in shared memory (block_keep) where the kernel
 * has room, else in the context's block table (block_insert).  Every thread waits for that at
 * a barrier, so that no thread can count itself out (or look its block up) before it is
 * there.  The barrier is the kernel's first instruction for every thread of the block, so it
 * cannot meet one of the kernel's own.  With the table it is a bar.red.or: it also tells every
 * thread whether thread (0,0,0) took the block's start slot (%__cb_bq, the common case: the
 * table is at most 15% full), so that at the end the lanes leaving together go straight to the
 * slot, with no load of its key first (one L2 round trip per warp instead of two). */
static int block_begin(struct inj *j, const bool *sel, struct site *s, struct ptx_buf *b,
		       struct cg_result *fneed, bool end)
{
	uint32_t skip = j->site++;
	bool table = end && !s->block_shared;
	ptx_buf_puts(b, "\t// cubpf: thread block begin (thread 0,0,0)\n"
		     "\tmov.u32 %__cb_b0, %tid.x;\n\tmov.u32 %__cb_b1, %tid.y;\n"
		     "\tor.b32 %__cb_b0, %__cb_b0, %__cb_b1;\n\tmov.u32 %__cb_b1, %tid.z;\n"
		     "\tor.b32 %__cb_b0, %__cb_b0, %__cb_b1;\n"
		     "\tsetp.ne.u32 %__cb_bp0, %__cb_b0, 0;\n");
	if (table) /* false unless thread (0,0,0) takes the start slot */
		ptx_buf_puts(b, "\tsetp.ne.u32 %__cb_bq, 0, 0;\n");
	buf_printf(b, "\t@%%__cb_bp0 bra $__cb%u_bskip;\n", skip);
	if (table)
		block_insert(j, b);
	else if (end)
		block_keep(b);
	s->block_end = false;
	int n = emit_kind(j, sel, VM_PROG_BLOCKPROBE, s, b, fneed);
	if (n < 0)
		return -1;
	buf_printf(b, "$__cb%u_bskip:\n", skip);
	if (table)
		ptx_buf_puts(b, "\tbar.red.or.pred %__cb_bq, 0, %__cb_bq;\n");
	else if (end)
		ptx_buf_puts(b, "\tbar.sync 0;\n");
	j->rep->block_sites += n > 0;
	return 0;
}

/* The lowest lane of the group of lanes leaving together goes on (%__cb_b1: how many they
 * are), the others branch to `done`. */
static void block_leader(struct ptx_buf *b, uint32_t done)
{
	ptx_buf_puts(b, "\t// cubpf: thread block end (the last group of lanes to leave)\n"
		     "\tactivemask.b32 %__cb_b0;\n\tpopc.b32 %__cb_b1, %__cb_b0;\n"
		     "\tmov.u32 %__cb_b2, %lanemask_lt;\n\tand.b32 %__cb_b2, %__cb_b2, %__cb_b0;\n"
		     "\tsetp.ne.u32 %__cb_bp0, %__cb_b2, 0;\n");
	buf_printf(b, "\t@%%__cb_bp0 bra $__cb%u_bdone;\n", done);
}

/* The group's lowest lane takes the group off the block's count of threads still running
 * (`left`: "SPACE.add.u32 %__cb_b3, [ADDRESS]", the count's atom); the group that brings it to
 * zero runs the blockretprobes, the others branch to `done`.  How many programs ran, or -1. */
static int block_last_group(struct inj *j, const bool *sel, struct site *s, struct ptx_buf *b,
			    struct cg_result *fneed, const char *left, uint32_t done)
{
	buf_printf(b, "\tneg.s32 %%__cb_b2, %%__cb_b1;\n\tatom.%s, %%__cb_b2;\n"
		   "\tsetp.ne.u32 %%__cb_bp0, %%__cb_b3, %%__cb_b1;\n"
		   "\t@%%__cb_bp0 bra $__cb%u_bdone;\n", left, done);
	s->block_end = true;
	return emit_kind(j, sel, VM_PROG_BLOCKRETPROBE, s, b, fneed);
}

/* Thread block end with the block's state in shared memory: the lowest lane of each group of
 * lanes leaving together takes the group off the count (one shared-memory atomic, on the SM);
 * the group that brings it to zero is the last to leave, and its lowest lane runs the
 * blockretprobes.  No global memory but the programs' own. */
static int block_end_shared(struct inj *j, const bool *sel, struct site *s, struct ptx_buf *b,
			    struct cg_result *fneed)
{
	uint32_t done = j->site++;
	block_leader(b, done);
	char left[64];
	snprintf(left, sizeof(left), "shared.add.u32 %%__cb_b3, [" CUBPF_BLOCK_SHARED_SYMBOL "+%u]",
		 (unsigned)offsetof(struct cubpf_block_shared, left));
	int n = block_last_group(j, sel, s, b, fneed, left, done);
	if (n < 0)
		return -1;
	buf_printf(b, "$__cb%u_bdone:\n", done);
	j->rep->block_sites += n > 0;
	return 0;
}

/* Thread block end, in the exit block: the lowest lane of each group of lanes leaving together
 * finds its block's slot (the start slot without a look when the entry barrier said thread
 * (0,0,0) took it: the key stays there until the block's last group frees it) and takes the
 * group off the count; the group that brings it to zero
 * is the last to leave: its lowest lane runs the blockretprobes, then frees the slot (EMPTY,
 * release: after the probes' reads of it; the scan for a key never stops at a free slot, so no
 * tombstone is needed, and the next insert's CAS from EMPTY takes the slot at its first try). */
static int block_end(struct inj *j, const bool *sel, struct site *s, struct ptx_buf *b,
		     struct cg_result *fneed)
{
	if (s->block_shared)
		return block_end_shared(j, sel, s, b, fneed);
	uint32_t done = j->site++, lbl = j->site++;
	bool ord = ordered_ops(j->m);
	block_leader(b, done);
	block_key(b);
	block_slot(b, lbl);
	buf_printf(b, "\t@%%__cb_bq bra $__cb%u_bfound;\n", lbl); /* the start slot: it is ours */
	buf_printf(b, "\t%s.u64 %%__cb_bk4, [%%__cb_bk3];\n"
		   "\tsetp.eq.u64 %%__cb_bp1, %%__cb_bk4, %%__cb_bk0;\n"
		   "\t@%%__cb_bp1 bra $__cb%u_bfound;\n",
		   ord ? "ld.relaxed.gpu.global" : "ld.volatile.global", lbl);
	block_next(b, lbl);
	buf_printf(b, "\tbra $__cb%u_bdone;\n$__cb%u_bfound:\n", done, lbl);
	char left[64];
	snprintf(left, sizeof(left), "global.add.u32 %%__cb_b3, [%%__cb_bk3+%u]",
		 (unsigned)offsetof(struct cubpf_block_slot, left));
	int n = block_last_group(j, sel, s, b, fneed, left, done);
	if (n < 0)
		return -1;
	buf_printf(b, "%s\t%s.u64 [%%__cb_bk3], %llu;\n$__cb%u_bdone:\n",
		   ord ? "" : "\tmembar.gl;\n", ord ? "st.release.gpu.global" : "st.volatile.global",
		   CUBPF_BLOCK_EMPTY, done);
	j->blocks_used = true;
	j->rep->block_sites += n > 0;
	return 0;
}

/* Whether text [from, to) holds nothing but blanks, `;`, comments and `.loc` lines: no label,
 * brace, directive or instruction (nothing a branch could land on or a pragma apply to). */
static bool only_trivia(const char *t, size_t from, size_t to)
{
	for (size_t i = from; i < to; i++) {
		if (t[i] && strchr(" \t\r\n;", t[i]))
			continue;
		if (!strncmp(t + i, "/*", 2)) {
			const char *e = strstr(t + i + 2, "*/");
			if (!e || (size_t)(e - t) + 2 > to)
				return false;
			i = (size_t)(e - t) + 1;
			continue;
		}
		if (strncmp(t + i, "//", 2) && strncmp(t + i, ".loc", 4))
			return false;
		const char *nl = strchr(t + i, '\n');
		if (!nl || (size_t)(nl - t) >= to)
			return true;
		i = (size_t)(nl - t);
	}
	return true;
}

/* An instruction with no effect but on its registers, that cannot fault and reads nothing a
 * probe writes: a kernel parameter load, or register arithmetic. */
static bool pure_insn(const struct ptx_insn *in)
{
	static const char *const ops[] = {
		"mov", "cvt", "cvta", "add", "sub", "mul", "mad", "mul24", "mad24", "shl", "shr",
		"and", "or", "xor", "not", "neg", "setp", "selp", "min", "max", "abs",
	};
	size_t n = strcspn(in->opcode, ".");
	if (n == 2 && !strncmp(in->opcode, "ld", 2))
		return starts(in->opcode, "ld.param.");
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (strlen(ops[i]) == n && !strncmp(in->opcode, ops[i], n))
			return true;
	return false;
}

/* Where a kernel's entry probes go: after the leading whole lines of pure instructions of its
 * first block (parameter loads, index arithmetic), before its first memory access, branch,
 * barrier or label.  Nothing can tell the difference, and the kernel's parameter loads and index
 * arithmetic no longer wait behind the probes' branch: on a memory-bound kernel of short thread
 * blocks each warp's loads start sooner (the probes' common path is a test and a branch). */
static size_t entry_point(const struct ptx_module *m, const struct ptx_func *f)
{
	bool ls;
	size_t at = f->first_insn_line, next = insert_at(m->text, at, &ls);
	for (uint32_t i = 0; i < f->insn_cnt; i++) {
		const struct ptx_insn *in = &f->insns[i];
		if (in->depth || in->line_off < next || !only_trivia(m->text, next, in->line_off))
			return at;
		at = in->line_off;
		if (!pure_insn(in))
			return at;
		const char *nl = strchr(m->text + in->off + in->len, '\n');
		if (!nl || (size_t)(nl - m->text) >= f->body_close)
			return at;
		next = (size_t)(nl - m->text) + 1;
		if (!only_trivia(m->text, in->off + in->len, next))
			return at;
		at = next;
	}
	return at;
}

/* Whether a program tests before it calls a helper: its first jump is conditional (most
 * threads of the bundled entry tools leave there: `if (ctx->tid_x | ctx->ctaid_x) return 0;`). */
static bool tests_first(const struct ptx_prog *p)
{
	for (uint32_t i = 0; i < p->insn_cnt; i++) {
		uint8_t cls = BPF_CLASS(p->insns[i].code), op = BPF_OP(p->insns[i].code);
		if (cls != BPF_JMP && cls != BPF_JMP32)
			continue;
		if (op == BPF_CALL || op == BPF_EXIT)
			return false;
		if (op != BPF_JA)
			return true;
	}
	return false;
}

/* Where the entry probes go.  After the kernel's pure prefix (entry_point) when every kprobe
 * tests first: the kernel's index arithmetic then runs beside the probes' test instead of
 * after their branch (b_ptx-style experiment, H200, vec_add 2^26: a thread-0-only probe 1.021x
 * at the top, 1.008x there).  At the top when one works on every thread first: ptxas then
 * starts its long-latency reads (%globaltimer) before the kernel's constant loads (a probe
 * hashing the thread index and the timer: 1.061x at the top, 1.080x after the prefix). */
static size_t entry_site(const struct inj *j, const struct ptx_func *f, const bool *sel)
{
	for (uint32_t p = 0; p < j->o->prog_cnt; p++)
		if (sel[p] && j->o->progs[p].kind == VM_PROG_KPROBE && !tests_first(&j->o->progs[p]))
			return f->first_insn_line;
	return entry_point(j->m, f);
}

static int do_entry(struct inj *j, const struct ptx_func *f, const bool *sel, struct site *s,
		    struct cg_result *fneed, bool *touched, bool *blocks)
{
	struct ptx_buf b = {0};
	bool ls, begin = any_kind(j, sel, VM_PROG_BLOCKPROBE);
	bool end = any_kind(j, sel, VM_PROG_BLOCKRETPROBE);
	size_t at = insert_at(j->m->text, entry_site(j, f, sel), &ls);
	if ((begin || end) && block_begin(j, sel, s, &b, fneed, end))
		goto fail;
	*blocks |= begin || end;
	int n = emit_kind(j, sel, VM_PROG_KPROBE, s, &b, fneed);
	if (n < 0)
		goto fail;
	if (n > 0)
		j->rep->entry_sites++;
	if (b.len && !ls)
		ptx_buf_puts(&b, "\t");
	if (b.len && edit_add(&j->ed, at, 0, &b))
		goto fail;
	*touched |= *blocks || n > 0;
	ptx_buf_free(&b);
	return 0;
fail:
	ptx_buf_free(&b);
	if (!j->err[0])
		ptx_seterr(j->err, j->errlen, "out of memory");
	return -1;
}

/* bbretprobes, in the exit block: the programs once per basic block of the kernel, each with
 * its block's constants and ctx->entries from where do_bbcount counts them.  Returns how many
 * blocks ran programs (the blocks stay in s->bbx for do_bbcount), or -1. */
static int bb_exit(struct inj *j, const struct ptx_func *f, const bool *sel, struct site *s,
		   struct ptx_buf *b, struct cg_result *fneed)
{
	if (!any_kind(j, sel, VM_PROG_BBRETPROBE))
		return 0;
	if (!s->bbx && ptx_basic_blocks(j->m, f, &s->bbx, &s->nbbx)) {
		ptx_seterr(j->err, j->errlen, "out of memory");
		return -1;
	}
	s->bbexit = true;
	s->count_entries = true;
	for (uint32_t i = 0; i < s->nbbx; i++) {
		s->bb = &s->bbx[i];
		s->bb_id = i;
		if (emit_kind(j, sel, VM_PROG_BBRETPROBE, s, b, fneed) < 0)
			return -1;
	}
	s->bbexit = false;
	s->bb = NULL;
	j->rep->bb_sites += s->nbbx;
	return (int)s->nbbx;
}

/* %__cb_ip = this lane is the one elected among the lanes here together (elect.sync on sm_90,
 * the lowest active lane before). */
static void bbcount_elect(const struct inj *j, struct ptx_buf *b)
{
	ptx_buf_puts(b, "\tactivemask.b32 %__cb_im0;\n");
	if (j->elect)
		ptx_buf_puts(b, "\telect.sync %__cb_im1|%__cb_ip, %__cb_im0;\n");
	else
		ptx_buf_puts(b, "\tmov.u32 %__cb_im1, %lanemask_lt;\n"
			     "\tand.b32 %__cb_im1, %__cb_im1, %__cb_im0;\n"
			     "\tsetp.eq.u32 %__cb_ip, %__cb_im1, 0;\n");
}

/* Per block entry: the thread's count (an add to its counter, blocks on a loop, or an or of
 * its bit, the others) and, for warp_insns, the elected lane's (but for warp-uniform loops:
 * bbcount_enter). */
static void bbcount_block(const struct inj *j, const struct site *s, uint32_t i,
			  struct ptx_buf *b)
{
	uint32_t k = bb_slot(s->bbx, i);
	bool loop = s->bbx[i].in_loop;
	if (s->count_entries && loop)
		buf_printf(b, "\tadd.u32 %%__cb_bc%u, %%__cb_bc%u, 1;\n", k, k);
	else if (s->count_entries)
		buf_printf(b, "\tor.b32 %%__cb_bm%u, %%__cb_bm%u, %u;\n", k / 32, k / 32,
			   1u << (k % 32));
	if (!s->count_elected || s->bbx[i].uniform)
		return;
	bbcount_elect(j, b);
	if (loop)
		buf_printf(b, "\t@%%__cb_ip add.u32 %%__cb_wc%u, %%__cb_wc%u, 1;\n", k, k);
	else
		buf_printf(b, "\t@%%__cb_ip or.b32 %%__cb_wm%u, %%__cb_wm%u, %u;\n", k / 32, k / 32,
			   1u << (k % 32));
}

/* A warp-uniform loop of one block (ptx_mark_uniform_loops): the lanes entering it together
 * run every iteration together, so the lane elected where they fall into it marks its counter
 * (once, where the loop is entered: each thread enters at most once) and icount_load takes that
 * lane's thread count of the block as the warp's; nothing per iteration but the thread count.
 * b then goes before the block's label, where only the fall-through runs it. */
static void bbcount_enter(const struct inj *j, const struct site *s, uint32_t i,
			  struct ptx_buf *b)
{
	bbcount_elect(j, b);
	buf_printf(b, "\t@%%__cb_ip mov.u32 %%__cb_wc%u, 1;\n", bb_slot(s->bbx, i));
}

/* The registers of the counts above, declared and set to 0 where the body starts. */
static void bbcount_regs(const struct site *s, struct ptx_buf *d, struct ptx_buf *z)
{
	uint32_t nc = 0, nm = 0;
	for (uint32_t i = 0; i < s->nbbx; i++)
		s->bbx[i].in_loop ? nc++ : nm++;
	nm = (nm + 31) / 32;
	ptx_buf_puts(d, "\n\t// cubpf: basic block entries\n");
	ptx_buf_puts(z, "\t// cubpf: basic block entries\n");
	for (int w = 0; w < 2; w++) {
		if (!(w ? s->count_elected : s->count_entries))
			continue;
		const char *c = w ? "wc" : "bc", *m = w ? "wm" : "bm";
		if (nc)
			buf_printf(d, "\t.reg .b32 %%__cb_%s<%u>;\n", c, nc);
		if (nm)
			buf_printf(d, "\t.reg .b32 %%__cb_%s<%u>;\n", m, nm);
		for (uint32_t k = 0; k < nc; k++)
			buf_printf(z, "\tmov.u32 %%__cb_%s%u, 0;\n", c, k);
		for (uint32_t k = 0; k < nm; k++)
			buf_printf(z, "\tmov.u32 %%__cb_%s%u, 0;\n", m, k);
	}
	if (s->count_elected)
		ptx_buf_puts(d, "\t.reg .b32 %__cb_im<2>;\n\t.reg .pred %__cb_ip;\n");
}

/* The entry counts that bbretprobes and ctx->insns / warp_insns read (do_exit decided which). */
static int do_bbcount(struct inj *j, const struct ptx_func *f, struct site *s)
{
	if (!s->bbx || (!s->count_entries && !s->count_elected))
		return 0;
	struct ptx_buf b = {0}, d = {0};
	bool ls;
	size_t at = insert_at(j->m->text, f->first_insn_line, &ls);
	bbcount_regs(s, &d, &b);
	if (!ls)
		ptx_buf_puts(&b, "\t");
	int rc = edit_add(&j->ed, f->body_open + 1, 0, &d) || edit_add(&j->ed, at, 0, &b);
	for (uint32_t i = 0; i < s->nbbx && !rc; i++) {
		at = insert_at(j->m->text, f->insns[s->bbx[i].first].off, &ls);
		bbcount_block(j, s, i, &b);
		if (!ls)
			ptx_buf_puts(&b, "\t");
		rc = edit_add(&j->ed, at, 0, &b);
		if (!rc && s->count_elected && s->bbx[i].uniform) {
			bbcount_enter(j, s, i, &b);
			rc = edit_add(&j->ed, s->bbx[i].enter_off, 0, &b);
		}
	}
	ptx_buf_free(&b);
	ptx_buf_free(&d);
	if (rc)
		ptx_seterr(j->err, j->errlen, "out of memory");
	return rc ? -1 : 0;
}

/* kretprobes, block ends and adds kept in registers: every ret/exit becomes a branch to one
 * exit block that runs them and returns (code that falls off the body's end reaches it too). */
static int do_exit(struct inj *j, const struct ptx_func *f, const bool *sel, struct site *s,
		   struct cg_result *fneed, bool *touched)
{
	struct ptx_buf b = {0};
	bool end = any_kind(j, sel, VM_PROG_BLOCKRETPROBE);
	uint32_t accs = s->accs ? s->accs->n : 0;
	ptx_buf_puts(&b, "$__cubpf_exit:\n");
	if (accs) /* first: the exit probes may read the maps */
		ptx_cg_accs_flush(s->accs, j->redux, &b);
	s->accs = NULL;
	s->kexit = true;
	int n = emit_kind(j, sel, VM_PROG_KRETPROBE, s, &b, fneed);
	s->kexit = false;
	int nb = n < 0 ? -1 : bb_exit(j, f, sel, s, &b, fneed);
	if (n < 0 || nb < 0 || (end && block_end(j, sel, s, &b, fneed)))
		goto fail;
	if (n == 0 && nb == 0 && !end && !s->ndefer && !accs) {
		ptx_buf_free(&b);
		return 0;
	}
	s->exit_open = true; /* do_exit_close ends it, after the adds kept in registers */
	if (edit_add(&j->ed, f->body_close, 0, &b))
		goto fail;
	*touched = true;
	for (uint32_t i = 0; i < f->insn_cnt; i++) {
		const struct ptx_insn *in = &f->insns[i];
		if (!is_exit(in))
			continue;
		if (in->pred)
			buf_printf(&b, "@%s%s bra $__cubpf_exit;", in->pred_neg ? "!" : "", in->pred);
		else
			ptx_buf_puts(&b, "bra $__cubpf_exit;");
		if (edit_add(&j->ed, in->off, in->len, &b))
			goto fail;
		j->rep->exit_sites += n > 0 || nb > 0 || end; /* probes there, not a flush alone */
	}
	return 0;
fail:
	ptx_buf_free(&b);
	if (!j->err[0])
		ptx_seterr(j->err, j->errlen, "out of memory");
	return -1;
}

static bool probed_space(enum ptx_space sp)
{
	return sp == PTX_SPACE_GENERIC || sp == PTX_SPACE_GLOBAL || sp == PTX_SPACE_SHARED ||
	       sp == PTX_SPACE_LOCAL;
}

static int do_mem(struct inj *j, const struct ptx_func *f, const bool *sel, struct site *s,
		  struct cg_result *fneed, bool *touched)
{
	bool any = false;
	for (uint32_t p = 0; p < j->o->prog_cnt; p++)
		any |= sel[p] && j->o->progs[p].kind == VM_PROG_MEMPROBE;
	if (!any)
		return 0;
	for (uint32_t i = 0; i < f->insn_cnt; i++) {
		const struct ptx_insn *in = &f->insns[i];
		if (!ptx_insn_mem_access(in, &s->acc) || !probed_space(s->acc.space))
			continue;
		s->insn = in;
		s->insn_index = i;
		ptx_loc_at(j->m, f, in->off, &s->loc);
		struct ptx_buf b = {0};
		uint32_t skip = j->site;
		guard_open(&b, in, skip, "skip");
		if (emit_kind(j, sel, VM_PROG_MEMPROBE, s, &b, fneed) < 0) {
			ptx_buf_free(&b);
			return -1;
		}
		guard_close(&b, in, skip, "skip");
		if (insert_site(j, in->off, &b))
			return -1;
		j->rep->mem_sites++;
		*touched = true;
	}
	return 0;
}

/* One side of a sync site: the probes under the instruction's predicate, as it was before the
 * instruction (saved in %__cb_sg: the instruction may write its own guard, as
 * mbarrier.try_wait can). */
static int sync_side(struct inj *j, const bool *sel, const struct ptx_insn *in, struct site *s,
		     bool after, struct ptx_buf *b, struct cg_result *fneed)
{
	uint32_t skip = j->site++;
	s->sync_after = after;
	if (in->pred && !after)
		buf_printf(b, "\tmov.pred %%__cb_sg, %s;\n", in->pred);
	if (in->pred)
		buf_printf(b, "\t@%s%%__cb_sg bra $__cb%u_sskip;\n", in->pred_neg ? "" : "!", skip);
	if (emit_kind(j, sel, VM_PROG_SYNCPROBE, s, b, fneed) < 0)
		return -1;
	if (in->pred)
		buf_printf(b, "$__cb%u_sskip:\n", skip);
	return 0;
}

static int do_sync(struct inj *j, const struct ptx_func *f, const bool *sel, struct site *s,
		   struct cg_result *fneed, bool *touched, unsigned *extra)
{
	if (!any_kind(j, sel, VM_PROG_SYNCPROBE))
		return 0;
	s->sync_index = 0;
	for (uint32_t i = 0; i < f->insn_cnt; i++) {
		const struct ptx_insn *in = &f->insns[i];
		if (!ptx_insn_sync(in, &s->sync))
			continue;
		s->insn_index = i;
		ptx_loc_at(j->m, f, in->off, &s->loc);
		struct ptx_buf b = {0}, a = {0};
		bool ls;
		size_t at = insert_at(j->m->text, in->off, &ls);
		/* the after side first: whether it reads before_ns decides the save */
		s->sync_reads_before = false;
		ptx_buf_puts(&a, "\n");
		if (sync_side(j, sel, in, s, true, &a, fneed) || sync_side(j, sel, in, s, false, &b, fneed))
			goto fail;
		if (s->sync_reads_before)
			ptx_buf_puts(&b, "\tmov.u64 %__cb_sb, %globaltimer;\n");
		if (!ls)
			ptx_buf_puts(&b, "\t");
		if (edit_add(&j->ed, at, 0, &b) || edit_add(&j->ed, in->off + in->len, 0, &a))
			goto fail;
		j->rep->sync_sites++;
		s->sync_index++;
		*touched = true;
		*extra |= (in->pred ? DECL_SYNC : 0) | (s->sync_reads_before ? DECL_SYNC_TIME : 0);
		continue;
fail:
		ptx_buf_free(&b);
		ptx_buf_free(&a);
		if (!j->err[0])
			ptx_seterr(j->err, j->errlen, "out of memory");
		return -1;
	}
	return 0;
}

/* Basic block entries: the bbprobes at each block's first instruction, unpredicated.  `ord`
 * is 0 in a kernel, 1 + the function's index in a .func (ctx->block_id's upper half). */
static int do_bb(struct inj *j, const struct ptx_func *f, uint32_t ord, const bool *sel,
		 struct site *s, struct cg_result *fneed, bool *touched)
{
	if (!any_kind(j, sel, VM_PROG_BBPROBE))
		return 0;
	struct ptx_bblock *bbs;
	uint32_t n;
	if (ptx_basic_blocks(j->m, f, &bbs, &n)) {
		ptx_seterr(j->err, j->errlen, "out of memory");
		return -1;
	}
	int rc = 0;
	for (uint32_t i = 0; i < n && !rc; i++) {
		struct ptx_buf b = {0};
		s->bb = &bbs[i];
		s->bb_id = ord << 16 | i;
		rc = emit_kind(j, sel, VM_PROG_BBPROBE, s, &b, fneed) < 0 ? -1 : 0;
		if (rc)
			ptx_buf_free(&b);
		else
			rc = insert_site(j, f->insns[bbs[i].first].off, &b);
		j->rep->bb_sites += !rc;
	}
	s->bb = NULL;
	*touched |= n > 0 && !rc;
	free(bbs);
	return rc;
}

static bool kernel_selected(const struct ptx_inject_opts *o, const struct ptx_func *f)
{
	return !o->kernel_glob || ptx_kernel_matches(o->kernel_glob, f->name);
}

static void select_progs(const struct inj *j, const struct ptx_func *f, bool *sel)
{
	for (uint32_t p = 0; p < j->o->prog_cnt; p++) {
		const char *g = j->o->progs[p].attach;
		sel[p] = j->cp[p] && ptx_kernel_matches(g && *g ? g : "*", f->name);
	}
}

static int add_decls(struct inj *j, const struct ptx_func *f, const struct cg_result *fneed,
		     unsigned extra, const struct cg_accs *accs)
{
	struct ptx_buf b = {0};
	ptx_buf_puts(&b, "\n\t// cubpf: probe registers and stack\n");
	ptx_cg_emit_decls(fneed, &b);
	ptx_cg_accs_decls(accs, &b); /* before every site: the kernel's first statements */
	if (extra & DECL_SYNC)
		ptx_buf_puts(&b, "\t.reg .pred %__cb_sg;\n");
	if (extra & DECL_SYNC_TIME)
		ptx_buf_puts(&b, "\t.reg .b64 %__cb_sb;\n");
	if (extra & DECL_BLOCKS)
		ptx_buf_puts(&b, "\t.reg .b32 %__cb_b<4>;\n\t.reg .pred %__cb_bp<2>;\n");
	if (extra & DECL_BLOCK_TABLE)
		ptx_buf_puts(&b, "\t.reg .b64 %__cb_bk<6>;\n\t.reg .pred %__cb_bq;\n");
	if (extra & DECL_BLOCK_SHARED)
		buf_printf(&b, "\t.shared .align 8 .b8 " CUBPF_BLOCK_SHARED_SYMBOL "[%u];\n"
			   "\t.reg .b64 %%__cb_bt;\n", CUBPF_BLOCK_SHARED_BYTES);
	if (edit_add(&j->ed, f->body_open + 1, 0, &b))
		return -1;
	need_merge(&j->need, fneed);
	return 0;
}

/* The slots of adds kept in registers, declared and zeroed where the body opens, after the
 * other declarations of cubpf's and before anything else (PTX takes instructions before the
 * kernel's own declarations): before every site, the first instruction's too, ... */
static int defer_open(struct inj *j, const struct ptx_func *f, const struct site *s)
{
	struct ptx_buf d = {0};
	if (!s->ndefer)
		return 0;
	ptx_cg_emit_defer_decls(s->ndefer, &d, &d);
	return edit_add(&j->ed, f->body_open + 1, 0, &d);
}

/* ... and added to memory at the end of the exit block, before its return. */
static int do_exit_close(struct inj *j, const struct ptx_func *f, const struct site *s)
{
	struct ptx_buf b = {0};
	if (!s->exit_open)
		return 0;
	if (s->defer_ok)
		ptx_cg_emit_defer_flush(s->ndefer, &b);
	ptx_buf_puts(&b, "\tret;\n");
	if (edit_add(&j->ed, f->body_close, 0, &b)) {
		ptx_seterr(j->err, j->errlen, "out of memory");
		return -1;
	}
	return 0;
}

/* The bytes of one .shared declaration at `line` (after its linkage directive), or UINT64_MAX
 * when it is not understood: [.align N] .type name[N]... */
static uint64_t shared_decl(const char *line)
{
	char ty[16], rest[256];
	line += strlen(".shared");
	line += strspn(line, " \t");
	if (!strncmp(line, ".align", 6))
		line += 6 + strspn(line + 6, " \t0123456789");
	if (sscanf(line, ".%15[a-z0-9]%255[^;\n]", ty, rest) != 2 || strlen(ty) < 2)
		return UINT64_MAX;
	uint64_t n = strtoull(ty + 1, NULL, 10) / 8;
	if (!n || (ty[0] != 'b' && ty[0] != 'u' && ty[0] != 's' && ty[0] != 'f'))
		return UINT64_MAX;
	for (const char *d = strchr(rest, '['); d; d = strchr(d + 1, '[')) {
		if (d[1] < '0' || d[1] > '9')
			return UINT64_MAX;
		n *= strtoull(d + 1, NULL, 10);
	}
	return n;
}

/* Whether the module's kernels can take `bytes` more of static shared memory: its .shared
 * declarations (all of them: an upper bound for one kernel) stay within 32 KB, and none is
 * dynamic (.extern: a kernel sized to the device's limit at launch would no longer fit). */
static bool shared_room(const struct ptx_module *m, uint64_t bytes)
{
	uint64_t total = bytes;
	for (const char *l = m->text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		l += strspn(l, " \t");
		const char *d = l;
		if (!strncmp(d, ".extern", 7) && strstr(d, ".shared") &&
		    strstr(d, ".shared") < strchr(d, '\n'))
			return false;
		if (!strncmp(d, ".visible ", 9) || !strncmp(d, ".weak ", 6) || !strncmp(d, ".common ", 8))
			d = strchr(d, ' ') + 1;
		if (strncmp(d, ".shared", 7) || (d[7] != ' ' && d[7] != '\t'))
			continue;
		uint64_t b = shared_decl(d);
		if (b == UINT64_MAX || (total += b) > 32768)
			return false;
	}
	return true;
}

/* Whether the kernel keeps its blocks' state in shared memory (s->block_shared, layout.h):
 * it has blockretprobes, and room (the option allows shared memory, and shared_room).
 * Returns the shared bytes that takes (0 with the table or without block ends). */
static uint64_t block_room(const struct inj *j, const bool *sel, struct site *s)
{
	s->block_shared = !j->o->no_shared && any_kind(j, sel, VM_PROG_BLOCKRETPROBE) &&
			  shared_room(j->m, CUBPF_BLOCK_SHARED_BYTES);
	return s->block_shared ? CUBPF_BLOCK_SHARED_BYTES : 0;
}

/* The sites in the kernel's body first, which may defer counters (struct cg_accs), then its
 * exit, which flushes them. */
static int do_kernel(struct inj *j, const struct ptx_func *f, const bool *sel)
{
	struct cg_accs accs = {.maps = j->defer_maps};
	/* loops matter only where counters may be deferred: memory, barrier and block sites */
	bool *looped = any_kind(j, sel, VM_PROG_MEMPROBE) || any_kind(j, sel, VM_PROG_SYNCPROBE) ||
			       any_kind(j, sel, VM_PROG_BBPROBE) ? loop_map(j, f) : NULL;
	struct site s = {.m = j->m, .f = f, .defer_ok = kernel_defers(j, sel), .accs = &accs,
			 .looped = looped};
	s.kernel_id = j->o->kernel_id ? j->o->kernel_id(j->o->user, f->name) : ptx_kernel_id(f->name);
	struct cg_result fneed = {0};
	bool touched = false, blocks = false;
	unsigned extra = 0;
	uint64_t room = block_room(j, sel, &s);
	/* sites first: which of them keep adds in registers decides the exit block */
	int rc = do_entry(j, f, sel, &s, &fneed, &touched, &blocks);
	if (!rc)
		rc = do_bb(j, f, 0, sel, &s, &fneed, &touched);
	if (!rc)
		rc = do_mem(j, f, sel, &s, &fneed, &touched);
	if (!rc)
		rc = do_sync(j, f, sel, &s, &fneed, &touched, &extra);
	accs.block = !j->o->no_shared && accs.n && shared_room(j->m, room + 8 * (accs.n + 1));
	if (!rc)
		rc = do_exit(j, f, sel, &s, &fneed, &touched);
	if (!rc)
		rc = do_bbcount(j, f, &s);
	free(s.bbx); /* when an error came first */
	free(looped);
	s.looped = NULL;
	if (!rc)
		rc = do_exit_close(j, f, &s);
	if (rc || !touched)
		return rc;
	j->rep->instrumented++;
	if (blocks)
		extra |= DECL_BLOCKS | (!any_kind(j, sel, VM_PROG_BLOCKRETPROBE) ? 0
					: s.block_shared ? DECL_BLOCK_SHARED : DECL_BLOCK_TABLE);
	if (add_decls(j, f, &fneed, extra, &accs) || defer_open(j, f, &s)) {
		if (!j->err[0])
			ptx_seterr(j->err, j->errlen, "out of memory");
		return -1;
	}
	return 0;
}

/* ---- device functions: memory probes in .funcs the selected kernels call ---- */

/* The function a call instruction names directly (NULL for indirect calls). */
static const char *callee_name(const struct ptx_insn *in)
{
	if (strncmp(in->opcode, "call", 4) || (in->opcode[4] && in->opcode[4] != '.'))
		return NULL;
	for (uint32_t k = 0; k < in->op_cnt; k++)
		if (in->ops[k][0] != '(' && in->ops[k][0] != '%')
			return in->ops[k];
	return NULL;
}

static int func_index(const struct ptx_module *m, const char *name)
{
	for (uint32_t i = 0; i < m->func_cnt; i++)
		if (m->funcs[i].has_body && !strcmp(m->funcs[i].name, name))
			return (int)i;
	return -1;
}

/* Marks every .func reachable from function `from` with the kernel's programs. */
static void reach(const struct inj *j, uint32_t from, uint32_t kernel, const bool *ksel,
		  bool *fsel, uint32_t *reached_by, bool *visited)
{
	if (visited[from])
		return;
	visited[from] = true;
	const struct ptx_func *f = &j->m->funcs[from];
	for (uint32_t i = 0; i < f->insn_cnt; i++) {
		const char *name = callee_name(&f->insns[i]);
		int t = name ? func_index(j->m, name) : -1;
		if (t < 0 || j->m->funcs[t].is_entry)
			continue;
		for (uint32_t p = 0; p < j->o->prog_cnt; p++)
			fsel[(size_t)t * j->o->prog_cnt + p] |= ksel[p];
		reached_by[t] = reached_by[t] == UINT32_MAX || reached_by[t] == kernel ? kernel
											  : UINT32_MAX - 1;
		reach(j, (uint32_t)t, kernel, ksel, fsel, reached_by, visited);
	}
}

/* ---- device functions: fentry/fexit ---- */

static bool is_fprobe(enum vm_prog_kind k)
{
	return k == VM_PROG_FENTRY || k == VM_PROG_FEXIT;
}

/* The fentry/fexit programs of sel whose glob matches the .func's name, into fs. */
static bool fprobe_select(const struct inj *j, const struct ptx_func *f, const bool *sel, bool *fs)
{
	bool any = false;
	for (uint32_t p = 0; p < j->o->prog_cnt; p++) {
		const char *g = j->o->progs[p].attach;
		fs[p] = sel[p] && is_fprobe(j->o->progs[p].kind) &&
			ptx_kernel_matches(g && *g ? g : "*", f->name);
		any |= fs[p];
	}
	return any;
}

/* fexit before one ret of the .func, under the ret's own predicate. */
static int fexit_site(struct inj *j, const struct ptx_insn *in, const bool *fs, struct site *s,
		      struct cg_result *fneed)
{
	struct ptx_buf b = {0};
	uint32_t skip = j->site++;
	guard_open(&b, in, skip, "fskip");
	s->func_exit = true;
	if (emit_kind(j, fs, VM_PROG_FEXIT, s, &b, fneed) < 0) {
		ptx_buf_free(&b);
		return -1;
	}
	guard_close(&b, in, skip, "fskip");
	if (insert_site(j, in->off, &b))
		return -1;
	j->rep->fexit_sites++;
	return 0;
}

/* The byte offset k of "[NAME]" or "[NAME+k]" when the operand names return parameter NAME;
 * -1 otherwise. */
static long retval_offset(const char *op, const char *name)
{
	size_t n = strlen(name);
	if (op[0] != '[' || strncmp(op + 1, name, n))
		return -1;
	if (op[n + 1] == ']')
		return 0;
	if (op[n + 1] != '+')
		return -1;
	char *end;
	long k = strtol(op + n + 2, &end, 10);
	return *end == ']' && k >= 0 ? k : -1;
}

/* %__cb_rv's bytes [off, off + bits / 8) (those below 8) = the value `src` (a register or an
 * immediate of the store's type). */
static void retval_merge(struct ptx_buf *b, const char *src, uint32_t bits, long off)
{
	if (off >= 8)
		return;
	uint64_t m = bits >= 64 ? ~0ull : (1ull << bits) - 1;
	if (bits == 64)
		buf_printf(b, "\tmov.b64 %%__cb_rt, %s;\n", src);
	else if (bits == 32)
		buf_printf(b, "\tmov.b32 %%__cb_rw, %s;\n\tcvt.u64.u32 %%__cb_rt, %%__cb_rw;\n", src);
	else /* 8 and 16 bits: PTX keeps both in 16-bit registers */
		buf_printf(b, "\tmov.b16 %%__cb_rh, %s;\n\tcvt.u64.u16 %%__cb_rt, %%__cb_rh;\n"
			   "\tand.b64 %%__cb_rt, %%__cb_rt, %llu;\n", src, (unsigned long long)m);
	buf_printf(b, "\tshl.b64 %%__cb_rt, %%__cb_rt, %ld;\n"
		   "\tand.b64 %%__cb_rv, %%__cb_rv, %llu;\n\tor.b64 %%__cb_rv, %%__cb_rv, %%__cb_rt;\n",
		   8 * off, (unsigned long long)~(m << (8 * off)));
}

/* After each st.param to the .func's first return parameter, the bytes of it below 8 go to
 * %__cb_rv too (under the store's own predicate), which starts at 0: what an fexit reads as
 * ctx->retval, the function's value being write-only to the function itself. */
static int retval_keep(struct inj *j, const struct ptx_func *f)
{
	const char *name = f->rets[0].name;
	struct ptx_buf d = {0};
	ptx_buf_puts(&d, "\n\t// cubpf: the value returned (ctx->retval)\n"
		     "\t.reg .b64 %__cb_rv;\n\t.reg .b64 %__cb_rt;\n\t.reg .b32 %__cb_rw;\n"
		     "\t.reg .b16 %__cb_rh;\n\tmov.u64 %__cb_rv, 0;\n");
	if (edit_add(&j->ed, f->body_open + 1, 0, &d))
		return -1;
	for (uint32_t i = 0; i < f->insn_cnt; i++) {
		const struct ptx_insn *in = &f->insns[i];
		long off;
		if (strncmp(in->opcode, "st.param.", 9) || in->op_cnt != 2 ||
		    (off = retval_offset(in->ops[0], name)) < 0)
			continue;
		const char *ty = strrchr(in->opcode, '.') + 1;
		uint32_t bits = type_bits_of(ty), lanes = strstr(in->opcode, ".v4") ? 4
							 : strstr(in->opcode, ".v2") ? 2 : 1;
		if ((bits != 8 && bits != 16 && bits != 32 && bits != 64) || off >= 8)
			continue; /* .b128 and the like, or past the first 8 bytes: not kept */
		struct ptx_buf b = {0};
		uint32_t skip = j->site++;
		ptx_buf_puts(&b, "\n");
		guard_open(&b, in, skip, "rv");
		if (lanes == 1) {
			retval_merge(&b, in->ops[1], bits, off);
		} else { /* {a, b, ...}: element e at off + e * bytes */
			char *els = strdup(in->ops[1] + 1), *save = NULL;
			if (!els) {
				ptx_buf_free(&b);
				return -1;
			}
			uint32_t e = 0;
			for (char *t = strtok_r(els, ",}", &save); t; t = strtok_r(NULL, ",}", &save), e++) {
				while (*t == ' ' || *t == '\t')
					t++;
				if (*t && strcmp(t, "_"))
					retval_merge(&b, t, bits, off + (long)(e * bits / 8));
			}
			free(els);
		}
		guard_close(&b, in, skip, "rv");
		if (edit_add(&j->ed, in->off + in->len, 0, &b))
			return -1;
	}
	return 0;
}

/* fentry before the .func's first instruction, fexit before each of its returns (`exit` ends
 * the thread, not the call: no fexit there). */
static int do_fprobes(struct inj *j, const struct ptx_func *f, const bool *sel, struct site *s,
		      struct cg_result *fneed, bool *touched)
{
	bool *fs = calloc(j->o->prog_cnt + 1, sizeof(*fs));
	if (!fs) {
		ptx_seterr(j->err, j->errlen, "out of memory");
		return -1;
	}
	int rc = 0;
	if (fprobe_select(j, f, sel, fs) && any_kind(j, fs, VM_PROG_FENTRY)) {
		struct ptx_buf b = {0};
		s->func_exit = false;
		rc = emit_kind(j, fs, VM_PROG_FENTRY, s, &b, fneed) < 0 ? -1 : 0;
		if (rc)
			ptx_buf_free(&b);
		else
			rc = insert_site(j, f->first_insn_line, &b);
		j->rep->fentry_sites += !rc;
		*touched |= !rc;
	}
	for (uint32_t i = 0; !rc && any_kind(j, fs, VM_PROG_FEXIT) && i < f->insn_cnt; i++) {
		const struct ptx_insn *in = &f->insns[i];
		if (strcmp(in->opcode, "ret") && strcmp(in->opcode, "ret.uni"))
			continue;
		rc = fexit_site(j, in, fs, s, fneed);
		*touched |= !rc;
	}
	if (!rc && s->reads_retval && retval_keep(j, f)) {
		ptx_seterr(j->err, j->errlen, "out of memory");
		rc = -1;
	}
	free(fs);
	return rc;
}

/* The fentry/fexit programs a kernel passes on to the .funcs it calls: all of them when the
 * kernel is selected (-k), whatever their globs, which name functions, not kernels. */
static void fprobe_kernel_sel(const struct inj *j, const struct ptx_func *k, bool *ksel)
{
	for (uint32_t p = 0; p < j->o->prog_cnt; p++)
		if (is_fprobe(j->o->progs[p].kind))
			ksel[p] = j->cp[p] && kernel_selected(j->o, k);
}

/* .funcs no kernel of the module calls directly (called through pointers, or from other
 * modules): without -k, fentry/fexit still apply to them, as shared by several kernels. */
static void fprobe_orphans(const struct inj *j, bool *fsel, uint32_t *reached_by)
{
	if (j->o->kernel_glob)
		return;
	for (uint32_t i = 0; i < j->m->func_cnt; i++) {
		const struct ptx_func *f = &j->m->funcs[i];
		if (f->is_entry || !f->has_body || reached_by[i] != UINT32_MAX)
			continue;
		for (uint32_t p = 0; p < j->o->prog_cnt; p++)
			if (is_fprobe(j->o->progs[p].kind))
				fsel[(size_t)i * j->o->prog_cnt + p] = j->cp[p] != NULL;
		reached_by[i] = UINT32_MAX - 1;
	}
}

static int do_funcs(struct inj *j, const bool *fsel, const uint32_t *reached_by)
{
	for (uint32_t i = 0; i < j->m->func_cnt; i++) {
		const struct ptx_func *f = &j->m->funcs[i];
		bool any = false;
		for (uint32_t p = 0; p < j->o->prog_cnt; p++)
			any |= fsel[(size_t)i * j->o->prog_cnt + p];
		if (f->is_entry || !f->has_body || reached_by[i] == UINT32_MAX || !any)
			continue;
		struct site s = {.m = j->m, .f = f, .kernel_id = CUBPF_KERNEL_ID_SHARED};
		if (reached_by[i] != UINT32_MAX - 1) {
			const char *k = j->m->funcs[reached_by[i]].name;
			s.kernel_id = j->o->kernel_id ? j->o->kernel_id(j->o->user, k) : ptx_kernel_id(k);
		}
		struct cg_result fneed = {0};
		bool touched = false;
		unsigned extra = 0;
		const bool *sel = fsel + (size_t)i * j->o->prog_cnt;
		if (do_fprobes(j, f, sel, &s, &fneed, &touched) ||
		    do_bb(j, f, i + 1, sel, &s, &fneed, &touched) ||
		    do_mem(j, f, sel, &s, &fneed, &touched) ||
		    do_sync(j, f, sel, &s, &fneed, &touched, &extra))
			return -1;
		if (touched) {
			j->rep->funcs++;
			if (add_decls(j, f, &fneed, extra, &(struct cg_accs){0}))
				return -1;
		}
	}
	return 0;
}

/* Kernels first (entry, exit and memory probes), then the .funcs they call (memory probes). */
static int do_module(struct inj *j)
{
	const struct ptx_module *m = j->m;
	size_t np = j->o->prog_cnt + 1;
	bool *ksel = calloc(np, sizeof(*ksel));
	bool *fsel = calloc((size_t)m->func_cnt * np + 1, sizeof(*fsel));
	bool *visited = calloc(m->func_cnt + 1, sizeof(*visited));
	uint32_t *reached_by = malloc(((size_t)m->func_cnt + 1) * sizeof(*reached_by));
	int rc = ksel && fsel && visited && reached_by ? 0 : -1;
	for (uint32_t i = 0; reached_by && i < m->func_cnt; i++)
		reached_by[i] = UINT32_MAX;
	for (uint32_t i = 0; !rc && i < m->func_cnt; i++) {
		const struct ptx_func *f = &m->funcs[i];
		if (!f->is_entry || !f->has_body)
			continue;
		j->rep->kernels++;
		/* unselected kernels still count as callers (for the kernel id of shared .funcs) */
		memset(ksel, 0, np * sizeof(*ksel));
		if (kernel_selected(j->o, f)) {
			select_progs(j, f, ksel);
			rc = do_kernel(j, f, ksel);
		}
		memset(visited, 0, m->func_cnt * sizeof(*visited));
		for (uint32_t p = 0; p < j->o->prog_cnt; p++)
			ksel[p] &= j->o->progs[p].kind == VM_PROG_MEMPROBE ||
				   j->o->progs[p].kind == VM_PROG_SYNCPROBE ||
				   j->o->progs[p].kind == VM_PROG_BBPROBE;
		fprobe_kernel_sel(j, f, ksel);
		reach(j, i, i, ksel, fsel, reached_by, visited);
	}
	if (!rc && reached_by)
		fprobe_orphans(j, fsel, reached_by);
	if (!rc)
		rc = do_funcs(j, fsel, reached_by);
	free(ksel);
	free(fsel);
	free(visited);
	free(reached_by);
	return rc;
}

/* ---- module ---- */

static bool has_vprintf_decl(const struct ptx_module *m)
{
	for (uint32_t i = 0; i < m->func_cnt; i++)
		if (!strcmp(m->funcs[i].name, "vprintf"))
			return true;
	return false;
}

static int module_decls(struct inj *j)
{
	struct ptx_buf b = {0};
	ptx_buf_puts(&b, "\n// cubpf: device maps (filled by the host after loading) and helpers\n");
	for (uint32_t i = 0; i < 64 && i < j->o->map_cnt; i++)
		if (j->need.maps_used & (1ull << i))
			buf_printf(&b, ".visible .const .align 8 .u64 " PTX_MAP_SYMBOL_FMT ";\n", i);
	if (j->enable_used)
		ptx_buf_puts(&b, ".visible .const .align 8 .u64 " CUBPF_ENABLE_SYMBOL ";\n");
	if (j->blocks_used)
		ptx_buf_puts(&b, ".visible .const .align 8 .u64 " CUBPF_BLOCKS_SYMBOL ";\n");
	if (j->need.vprintf && !has_vprintf_decl(j->m))
		ptx_gen_module_decls(0, true, &b);
	ptx_buf_puts(&b, "\n");
	size_t at = j->m->header_end;
	return edit_add(&j->ed, at, 0, &b);
}

static char *apply(const char *text, size_t len, struct edits *e, size_t *out_len)
{
	if (e->n)
		qsort(e->v, e->n, sizeof(*e->v), edit_cmp);
	struct ptx_buf b = {0};
	size_t pos = 0;
	for (size_t i = 0; i < e->n; i++) {
		if (e->v[i].off < pos)
			continue; /* overlapping edits cannot happen; be safe anyway */
		buf_put(&b, text + pos, e->v[i].off - pos);
		if (e->v[i].text)
			ptx_buf_puts(&b, e->v[i].text);
		pos = e->v[i].off + e->v[i].del;
	}
	buf_put(&b, text + pos, len - pos);
	if (!b.data && !b.oom)
		buf_put(&b, "", 0);
	if (b.oom) {
		ptx_buf_free(&b);
		return NULL;
	}
	*out_len = b.len;
	return b.data;
}

/* The SM number of ".target sm_90a, debug" (0 when unknown). */
static int target_sm(const char *target)
{
	const char *s = strstr(target, "sm_");
	return s ? atoi(s + 3) : 0;
}

/* Whether program p updates an array map (ARRAY, GPU_ARRAY) that the L2 should keep
 * (codegen.c, l2_hint): those are indexed by block, thread or key and spread over many lines
 * that an application's stream evicts.  Per-SM arrays are a few hot lines of their own, and
 * the policy's extra instruction costs a kernel with a probe at every memory access more than
 * it saves there (memtrace on vec_add 2^26: 1.88x -> 2.07x). */
static bool updates_arrays(const struct ptx_prog *p, const struct vm_map_def *maps, uint32_t n)
{
	for (uint32_t pc = 0; pc + 1 < p->insn_cnt; pc++) {
		const struct bpf_insn *in = &p->insns[pc];
		if (in->code != (BPF_LD | BPF_IMM | BPF_DW))
			continue;
		if ((in->src_reg == BPF_PSEUDO_MAP_FD || in->src_reg == BPF_PSEUDO_MAP_VALUE) &&
		    (uint32_t)in->imm < n && (maps[in->imm].type == CUBPF_MAP_ARRAY ||
					      maps[in->imm].type == CUBPF_MAP_GPU_ARRAY))
			return true;
		pc++; /* the second slot of lddw */
	}
	return false;
}

/* Whether a .func the module's kernels may call can end threads: one of its own that has
 * `exit`, or one defined elsewhere (relocatable device code) other than the CUDA system calls;
 * a kernel that calls it would lose the counters it defers. */
static bool funcs_exit(const struct ptx_module *m)
{
	static const char *const sys[] = {"vprintf", "malloc", "free", "__assertfail"};
	for (uint32_t i = 0; i < m->func_cnt; i++) {
		const struct ptx_func *f = &m->funcs[i];
		bool known = false;
		for (size_t k = 0; k < sizeof(sys) / sizeof(sys[0]); k++)
			known |= !strcmp(f->name, sys[k]);
		if (!f->is_entry && !f->has_body && !known)
			return true;
		for (uint32_t k = 0; !f->is_entry && k < f->insn_cnt; k++)
			if (!strcmp(f->insns[k].opcode, "exit"))
				return true;
	}
	return false;
}

/* The maps a program names (lddw of a map or of a map value), bit i for map i. */
static uint64_t maps_named(const struct ptx_prog *p)
{
	uint64_t m = 0;
	for (uint32_t pc = 0; pc + 1 < p->insn_cnt; pc++) {
		const struct bpf_insn *in = &p->insns[pc];
		if (in->code != (BPF_LD | BPF_IMM | BPF_DW))
			continue;
		if (in->src_reg == BPF_PSEUDO_MAP_FD || in->src_reg == BPF_PSEUDO_MAP_VALUE)
			m |= (uint32_t)in->imm < 64 ? 1ull << in->imm : ~0ull;
		pc++; /* the second slot of lddw */
	}
	return m;
}

/* The maps whose adds kernels may defer (struct cg_accs): those no GPU program of the module
 * reads or writes otherwise, and no host program names (it may read them while kernels run).
 * The warp-wide flush needs activemask (sm_70's .sync forms, PTX 6.2). */
static uint64_t defer_maps(const struct inj *j)
{
	uint64_t taint = 0;
	if (target_sm(j->m->target) < 70 || atof(j->m->version) < 6.2 || funcs_exit(j->m))
		return 0;
	for (uint32_t p = 0; p < j->o->prog_cnt; p++)
		taint |= j->cp[p] ? j->cp[p]->taint : maps_named(&j->o->progs[p]);
	return ~taint;
}

static int prepare(struct inj *j)
{
	j->cp = calloc(j->o->prog_cnt + 1, sizeof(*j->cp));
	if (!j->cp)
		return -1;
	for (uint32_t p = 0; p < j->o->prog_cnt; p++) {
		if (!ptx_cg_is_gpu_kind(j->o->progs[p].kind))
			continue;
		j->cp[p] = ptx_cg_prepare(&j->o->progs[p], j->o->maps, j->o->map_cnt, j->err, j->errlen);
		if (!j->cp[p])
			return -1;
		j->cp[p]->warp_aggregate = target_sm(j->m->target) >= 70 && atof(j->m->version) >= 6.0;
		j->cp[p]->l2_keep = target_sm(j->m->target) >= 80 && atof(j->m->version) >= 7.4 &&
				    updates_arrays(&j->o->progs[p], j->o->maps, j->o->map_cnt);
		j->cp[p]->fold = true;
		j->cp[p]->redux = target_sm(j->m->target) >= 80 && atof(j->m->version) >= 7.0;
		j->elect = target_sm(j->m->target) >= 90 && atof(j->m->version) >= 8.0;
	}
	j->redux = target_sm(j->m->target) >= 80 && atof(j->m->version) >= 7.0;
	j->funcs_exit = funcs_exit(j->m);
	j->defer_maps = defer_maps(j);
	return 0;
}

static void cleanup(struct inj *j)
{
	for (uint32_t p = 0; j->cp && p < j->o->prog_cnt; p++)
		ptx_cg_prog_free(j->cp[p]);
	free(j->cp);
	for (size_t i = 0; i < j->ed.n; i++)
		free(j->ed.v[i].text);
	free(j->ed.v);
}

static void report_label(const struct ptx_module *m, struct ptx_inject_report *rep)
{
	const char *first = NULL;
	uint32_t n = 0;
	for (uint32_t i = 0; i < m->func_cnt; i++)
		if (m->funcs[i].is_entry && n++ == 0)
			first = m->funcs[i].name;
	if (first)
		snprintf(rep->label, sizeof(rep->label), "%s%s", first, n > 1 ? ", ..." : "");
}

int ptx_instrument(const char *text, size_t len, const struct ptx_inject_opts *opts, char **out,
		   size_t *out_len, struct ptx_inject_report *rep, char *err, size_t errlen)
{
	struct ptx_inject_report dummy;
	if (!rep)
		rep = &dummy;
	memset(rep, 0, sizeof(*rep));
	char ebuf[PTX_ERRLEN] = "";
	if (!err)
		err = ebuf, errlen = sizeof(ebuf);
	err[0] = 0;
	struct ptx_module *m;
	if (ptx_parse(text, len, &m, err, errlen))
		return -1;
	report_label(m, rep);
	if (strstr(m->text, "%__cb_r") || strstr(m->text, "$__cubpf_exit")) {
		ptx_seterr(err, errlen, "the module is already instrumented by cubpf");
		ptx_module_free(m);
		return -1;
	}
	struct inj j = {.o = opts, .m = m, .err = err, .errlen = errlen, .rep = rep};
	int rc = prepare(&j);
	if (!rc)
		rc = do_module(&j);
	if (!rc && j.ed.n)
		rc = module_decls(&j);
	if (!rc && !j.ed.n) { /* nothing selected: the input exactly, padding included */
		*out = malloc(len + 1);
		if (*out) {
			memcpy(*out, text, len);
			(*out)[len] = 0;
			*out_len = len;
		}
		rc = *out ? 0 : -1;
	} else if (!rc) {
		*out = apply(m->text, m->len, &j.ed, out_len);
		rc = *out ? 0 : -1;
	}
	if (rc && !err[0])
		ptx_seterr(err, errlen, "out of memory");
	cleanup(&j);
	ptx_module_free(m);
	return rc;
}
