/* Every refusal of the eBPF->PTX code generator, and who says no first (issue 27, item 4): for
 * GPU kinds the verifier is the place that turns a program away, with its reason; `cubpf ptx`
 * must never refuse what `cubpf verify` accepted.
 *
 * test_every_refusal_listed reads the generator's sources (run from the repository root) and
 * collects the message of every refusal (fail, hfail, mfail, ptx_seterr with a literal): each
 * must be listed in `refusals` below, so that a new refusal comes with its verifier rule.  Each
 * entry gives a GPU program of the refused shape, which the verifier must reject with the reason
 * given, and which the generator (handed it unverified) must refuse with that message when `gen`
 * is set; or it says why no program reaches it (an error of the module, not of the program), or
 * it is a known gap (`gap`: the verifier still accepts the shape; printed, not failed).
 * test_verified_compile: shapes the generator refused although the verifier accepted them, and
 * compiles now (ctx + constant, read back: the example). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ptx-rewriter/ptx.h"

#define I(c, d, s, o, i) {.code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i)}
#define EXIT I(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)
#define MOVK(d, k) I(BPF_ALU64 | BPF_MOV | BPF_K, d, 0, 0, k)
#define MOVX(d, s) I(BPF_ALU64 | BPF_MOV | BPF_X, d, s, 0, 0)
#define ADDK(d, k) I(BPF_ALU64 | BPF_ADD | BPF_K, d, 0, 0, k)
#define LDX(sz, d, s, o) I(BPF_LDX | (sz) | BPF_MEM, d, s, o, 0)
#define STK(sz, d, o, k) I(BPF_ST | (sz) | BPF_MEM, d, 0, o, k)
#define STX(sz, d, s, o) I(BPF_STX | (sz) | BPF_MEM, d, s, o, 0)
#define CALL(h) I(BPF_JMP | BPF_CALL, 0, 0, 0, h)
#define CALL_LOCAL(o) I(BPF_JMP | BPF_CALL, 0, BPF_PSEUDO_CALL, 0, o)
#define LD_MAP(d, m) I(BPF_LD | BPF_IMM | BPF_DW, d, BPF_PSEUDO_MAP_FD, 0, m), I(0, 0, 0, 0, 0)
#define LD_MAPVAL(d, m, o) I(BPF_LD | BPF_IMM | BPF_DW, d, BPF_PSEUDO_MAP_VALUE, 0, m), \
			   I(0, 0, 0, 0, o)
#define KEY4(o) STK(BPF_W, 10, o, 0), MOVX(2, 10), ADDK(2, o)
#define RET0 MOVK(0, 0), EXIT

/* The maps of every program here (lddw's index). */
enum { M_ARRAY, M_RODATA, M_RING, M_KEY8, M_KEY80, M_COUNT };

struct refusal {
	const char *msg;              /* the generator's message (its first literal) */
	const char *verifier;         /* the verifier's reason for the shape ("": any, for what
				       * its structural pass refuses: encodings, jumps, calls) */
	const struct bpf_insn *insns; /* the shape (NULL: `why` says why there is none) */
	uint32_t n;
	enum vm_prog_kind kind;
	bool gen;                     /* the generator refuses this very program with msg */
	bool gap;                     /* not turned away by the verifier yet */
	const char *why;
	const uint32_t *subs;         /* function starts after the main one's (0-terminated) */
};

#define P(...) .insns = (const struct bpf_insn[]){__VA_ARGS__}, \
	.n = sizeof((const struct bpf_insn[]){__VA_ARGS__}) / sizeof(struct bpf_insn)
/* A shape: the generator's message, the verifier's, the kind, whether the generator is checked
 * too, the program. */
#define SHAPE(m, ver, k, g, ...) {.msg = (m), .verifier = (ver), .kind = (k), .gen = (g), \
				  P(__VA_ARGS__)}
#define GAP(m, w) {.msg = (m), .gap = true, .why = (w)}
#define KP VM_PROG_KPROBE
#define MP VM_PROG_MEMPROBE
#define NOT_A_PROGRAM(m, w) {.msg = (m), .why = (w)}

static const struct refusal refusals[] = {
	/* analyze.c: the structure, also the verifier's first pass (vm_cfg_check) */
	SHAPE("insn %u: register r%u does not exist", "", KP, true,
	      MOVK(11, 0), RET0),
	SHAPE("insn %u: lddw without its second half", "", KP, false,
	      RET0, I(BPF_LD | BPF_IMM | BPF_DW, 0, 0, 0, 0)),
	SHAPE("insn %u: call target %u outside the program", "", KP, false,
	      CALL_LOCAL(100), RET0),
	SHAPE("insn %u: jump or fall-through past the end", "", KP, true,
	      MOVK(0, 0)),
	SHAPE("stack access at r10%lld is beyond the %d-byte stack", "invalid stack access", KP, true,
	      STK(BPF_DW, 10, -520, 0), RET0),
	/* codegen.c */
	SHAPE("the context pointer is used as a value", "context pointer cannot be spilled", KP, true,
	      STX(BPF_DW, 10, 1, -8), RET0),
	SHAPE("the record size must be a constant of 1 to 4096 bytes",
	      "a constant the code generator sees", KP, true,
	      LDX(BPF_W, 3, 1, 0), I(BPF_JMP | BPF_JNE | BPF_K, 3, 0, 7, 5), STK(BPF_DW, 10, -8, 0),
	      MOVX(2, 10), ADDK(2, -8), LD_MAP(1, M_RING), MOVK(4, 0), CALL(CUBPF_FN_ringbuf_output),
	      RET0),
	SHAPE("byte swap width must be 16, 32 or 64", "", KP, true,
	      MOVK(0, 1), I(BPF_ALU | BPF_END | BPF_K, 0, 0, 0, 8), EXIT),
	SHAPE("bad movsx width", "", KP, false,
	      MOVK(0, 1), I(BPF_ALU64 | BPF_MOV | BPF_X, 0, 0, 7, 0), EXIT),
	SHAPE("bad div/mod offset", "", KP, false,
	      MOVK(0, 1), I(BPF_ALU64 | BPF_DIV | BPF_K, 0, 0, 3, 1), EXIT),
	SHAPE("unknown ALU64 operation", "", KP, false,
	      MOVK(0, 1), I(BPF_ALU64 | 0xe0 | BPF_K, 0, 0, 0, 1), EXIT),
	SHAPE("unknown ALU operation", "", KP, false,
	      MOVK(0, 1), I(BPF_ALU | 0xe0 | BPF_K, 0, 0, 0, 1), EXIT),
	SHAPE("r10 is read-only", "frame pointer is read only", KP, true,
	      MOVK(10, 0), RET0),
	SHAPE("stack access outside the frame", "invalid stack access", KP, false,
	      STK(BPF_W, 10, 0, 0), RET0),
	SHAPE("unsupported load mode", "", KP, false,
	      I(BPF_LDX | BPF_W | 0x40, 0, 10, -8, 0), EXIT),
	SHAPE("context load not supported here", "sign-extending context loads are not supported", KP, true,
	      I(BPF_LDX | BPF_W | BPF_MEMSX, 0, 1, 0, 0), EXIT),
	SHAPE("context load out of range", "invalid bpf_context access", KP, true,
	      ADDK(1, 0x10000), LDX(BPF_W, 0, 1, 0), EXIT),
	SHAPE("unsupported store mode", "", KP, false,
	      I(BPF_ST | BPF_W | 0x40, 10, 0, -8, 0), RET0),
	SHAPE("atomics are 32 or 64 bits wide", "invalid atomic operand size", KP, true,
	      STK(BPF_DW, 10, -8, 0), MOVK(1, 1), I(BPF_STX | BPF_B | BPF_ATOMIC, 10, 1, -8, BPF_ADD), RET0),
	SHAPE("unknown atomic operation", "invalid atomic operation", KP, true,
	      STK(BPF_DW, 10, -8, 0), MOVK(1, 1), I(BPF_STX | BPF_DW | BPF_ATOMIC, 10, 1, -8, 0x77), RET0),
	SHAPE("lddw refers to a map that does not exist", "", KP, true,
	      LD_MAP(1, 40), RET0),
	SHAPE("lddw pseudo source not supported on the GPU", "", KP, true,
	      I(BPF_LD | BPF_IMM | BPF_DW, 1, 3, 0, 0), I(0, 0, 0, 0, 0), RET0),
	SHAPE("unknown jump operation", "", KP, false,
	      MOVK(0, 0), I(BPF_JMP | 0xe0 | BPF_K, 0, 0, 0, 0), EXIT),
	{.msg = "bpf-to-bpf calls nested too deep", .verifier = "is too deep", .kind = KP, .gen = true, .subs = (const uint32_t[]){2, 4, 6, 8, 10, 12, 14, 16, 18, 0},
	 P(CALL_LOCAL(1), EXIT, CALL_LOCAL(1), EXIT, CALL_LOCAL(1), EXIT, CALL_LOCAL(1), EXIT, CALL_LOCAL(1), EXIT, CALL_LOCAL(1), EXIT, CALL_LOCAL(1), EXIT, CALL_LOCAL(1), EXIT, CALL_LOCAL(1), EXIT, RET0)},
	SHAPE("bad call", "", KP, false,
	      I(BPF_JMP | BPF_CALL | BPF_X, 0, 0, 0, 1), RET0),
	SHAPE("callx target is not a known helper number", "", KP, false,
	      MOVK(1, 9999), I(BPF_JMP | BPF_CALL | BPF_X, 1, 0, 0, 0), RET0),
	SHAPE("kfunc calls are not supported on the GPU", "", KP, true,
	      I(BPF_JMP | BPF_CALL, 0, 2, 0, 1), RET0),
	SHAPE("bad register", "", KP, false,
	      MOVX(0, 12), EXIT),
	SHAPE("legacy packet loads are not supported", "", KP, false,
	      I(BPF_LD | BPF_ABS | BPF_W, 0, 0, 0, 0), EXIT),
	GAP("generated code too large", "bpf-to-bpf calls inline at every call site: eight levels of functions calling the next " "several times grow past 64 MB of PTX; the verifier bounds instructions walked, not the " "inlined size"),
	NOT_A_PROGRAM("out of memory", "the machine's, not the program's"),
	NOT_A_PROGRAM("empty program", "the object loader refuses a program without instructions"),
	/* helpers.c */
	SHAPE("r1 is not a map known at compile time", "a map pointer cannot be spilled", KP, true,
	      LD_MAP(6, M_ARRAY), STX(BPF_DW, 10, 6, -16), KEY4(-4), LDX(BPF_DW, 1, 10, -16), CALL(CUBPF_FN_map_lookup_elem), RET0),
	SHAPE("map type not supported on the GPU", "cannot use ring buffer map", KP, true,
	      LD_MAP(1, M_RING), KEY4(-4), CALL(CUBPF_FN_map_lookup_elem), RET0),
	SHAPE("stack pointer argument outside the frame", "invalid stack access", KP, false,
	      LD_MAP(1, M_ARRAY), STK(BPF_H, 10, -2, 0), MOVX(2, 10), ADDK(2, -2), CALL(CUBPF_FN_map_lookup_elem), RET0),
	SHAPE("the context cannot be passed to helpers on the GPU", "the context cannot be passed", KP, true,
	      MOVX(2, 1), LD_MAP(1, M_ARRAY), CALL(CUBPF_FN_map_lookup_elem), RET0),
	SHAPE("array map keys are 4 bytes", "8-byte keys: kprobe programs take 4", KP, true,
	      STK(BPF_DW, 10, -8, 0), LD_MAP(1, M_KEY8), MOVX(2, 10), ADDK(2, -8), CALL(CUBPF_FN_map_lookup_elem), RET0),
	SHAPE("the map is read-only for programs", "is read-only", KP, true,
	      KEY4(-4), STK(BPF_DW, 10, -16, 0), MOVX(3, 10), ADDK(3, -16), LD_MAP(1, M_RODATA), MOVK(4, 0), CALL(CUBPF_FN_map_update_elem), RET0),
	SHAPE("on the GPU the string must be a NUL-terminated", "expected a constant string", KP, true,
	      STK(BPF_DW, 10, -8, 0x6968), MOVX(1, 10), ADDK(1, -8), CALL(CUBPF_FN_gpu_puts), RET0),
	GAP("the string has a % conversion", "the format grammar (issue 27 item 2, branch issue27b): the verifier does not read " "bpf_gpu_puts's string yet"),
	SHAPE("on the GPU the format must be a constant", "format of bpf_trace_printk must be a constant", KP, true,
	      STK(BPF_DW, 10, -8, 0x6968), MOVX(1, 10), ADDK(1, -8), MOVK(2, 8), MOVK(3, 0), MOVK(4, 0), MOVK(5, 0), CALL(CUBPF_FN_trace_printk), RET0),
	SHAPE("the format has no terminating NUL within", "no NUL within its size", KP, true,
	      LD_MAPVAL(1, M_RODATA, 0), MOVK(2, 3), MOVK(3, 0), MOVK(4, 0), MOVK(5, 0), CALL(CUBPF_FN_trace_printk), RET0),
	GAP("the format takes more than 3 arguments", "the format grammar (issue 27 item 2, branch issue27b): '*' widths and %n"),
	SHAPE("not available on the GPU", "is not available in kprobe programs", KP, true,
	      CALL(CUBPF_FN_get_current_pid_tgid), EXIT),
	/* inject.c: context loads; the rest concerns the module, not the program */
	SHAPE("kernel context has no %u-byte field at offset %u", "invalid bpf_context access", KP, true,
	      LDX(BPF_H, 0, 1, 0), EXIT),
	SHAPE("memory context has no %u-byte field at offset %u", "invalid bpf_context access", MP, true,
	      LDX(BPF_W, 0, 1, 4), EXIT),
	SHAPE("block context has no %u-byte field at offset %u", "invalid bpf_context access",
	      VM_PROG_BLOCKPROBE, true, LDX(BPF_W, 0, 1, 200), EXIT),
	SHAPE("sync context has no %u-byte field at offset %u", "invalid bpf_context access",
	      VM_PROG_SYNCPROBE, false, LDX(BPF_W, 0, 1, 200), EXIT), /* generated per site */
	SHAPE("function context has no %u-byte field at offset %u", "invalid bpf_context access",
	      VM_PROG_FENTRY, false, LDX(BPF_W, 0, 1, 400), EXIT), /* generated per site */
	NOT_A_PROGRAM("a .reg parameter of %u bytes is not readable (%s)",
		      "a device function's parameter declaration in the module"),
	SHAPE("basic block context has no %u-byte field at offset %u", "invalid bpf_context access",
	      VM_PROG_BBPROBE, false, LDX(BPF_DW, 0, 1, 0), EXIT), /* generated per site */
	NOT_A_PROGRAM("address operand too long", "a memory instruction of the module"),
	NOT_A_PROGRAM("address register %s has no known width", "a memory instruction of the module"),
	NOT_A_PROGRAM("the module is already instrumented by cubpf", "the module's text"),
	/* maps.c */
	SHAPE("hash map keys must be 1 to 64 bytes on the GPU", "80-byte keys", KP, false,
	      LD_MAP(1, M_KEY80), STK(BPF_DW, 10, -80, 0), STK(BPF_DW, 10, -72, 0),
	      STK(BPF_DW, 10, -64, 0), STK(BPF_DW, 10, -56, 0), STK(BPF_DW, 10, -48, 0),
	      STK(BPF_DW, 10, -40, 0), STK(BPF_DW, 10, -32, 0), STK(BPF_DW, 10, -24, 0),
	      STK(BPF_DW, 10, -16, 0), STK(BPF_DW, 10, -8, 0), MOVX(2, 10), ADDK(2, -80),
	      CALL(CUBPF_FN_map_lookup_elem), RET0),
	SHAPE("the map is not a ring buffer", "is not a ring buffer", KP, true,
	      STK(BPF_DW, 10, -8, 0), LD_MAP(1, M_ARRAY), MOVX(2, 10), ADDK(2, -8), MOVK(3, 8), MOVK(4, 0), CALL(CUBPF_FN_ringbuf_output), RET0),
	SHAPE("the record size must be a constant of 1 to 4096 bytes", "must be a constant of 1 to 4096", KP, true,
	      LDX(BPF_W, 3, 1, 0), I(BPF_ALU64 | BPF_AND | BPF_K, 3, 0, 0, 7), ADDK(3, 1), STK(BPF_DW, 10, -8, 0), LD_MAP(1, M_RING), MOVX(2, 10), ADDK(2, -8), MOVK(4, 0), CALL(CUBPF_FN_ringbuf_output), RET0),
};

#define NREFUSALS (sizeof(refusals) / sizeof(refusals[0]))

static void set_map(struct vm_map_def *m, const char *name, uint32_t type, uint32_t k, uint32_t v,
		    uint32_t n)
{
	snprintf(m->name, sizeof(m->name), "%s", name);
	m->type = type, m->key_size = k, m->value_size = v, m->max_entries = n;
}

/* A one-program object with the maps above; subs: function starts after 0, 0-terminated. */
static struct vm_object *object(const struct bpf_insn *insns, uint32_t n, enum vm_prog_kind kind,
				const uint32_t *subs)
{
	char err[256];
	struct vm_object *o = vm_object_from_insns(insns, n, kind, err, sizeof(err));
	if (!o)
		fail_msg("%s", err);
	uint32_t ns = 1;
	while (subs && subs[ns - 1])
		ns++;
	if (subs) {
		free(o->progs[0].subprogs);
		o->progs[0].subprogs = calloc(ns, sizeof(uint32_t));
		assert_non_null(o->progs[0].subprogs);
		memcpy(o->progs[0].subprogs + 1, subs, (ns - 1) * sizeof(uint32_t));
		o->progs[0].subprog_cnt = ns;
	}
	o->maps = calloc(M_COUNT, sizeof(*o->maps));
	assert_non_null(o->maps);
	o->map_cnt = M_COUNT;
	set_map(&o->maps[M_ARRAY], "a", CUBPF_MAP_ARRAY, 4, 16, 4);
	set_map(&o->maps[M_RODATA], ".rodata", CUBPF_MAP_ARRAY, 4, 16, 1);
	o->maps[M_RODATA].flags = BPF_F_RDONLY_PROG;
	o->maps[M_RODATA].origin = VM_MAP_RODATA;
	o->maps[M_RODATA].init = calloc(1, 16);
	assert_non_null(o->maps[M_RODATA].init);
	memcpy(o->maps[M_RODATA].init, "hello", 6);
	set_map(&o->maps[M_RING], "rb", CUBPF_MAP_RINGBUF, 0, 0, 4096);
	set_map(&o->maps[M_KEY8], "k8", CUBPF_MAP_ARRAY, 8, 8, 4);
	set_map(&o->maps[M_KEY80], "k80", CUBPF_MAP_HASH, 80, 8, 4);
	return o;
}

static const char kernel_ptx[] =
	".version 8.0\n.target sm_80\n.address_size 64\n\n"
	".visible .entry k(.param .u64 out)\n{\n\t.reg .b64 %rd<3>;\n\t.reg .b32 %r<2>;\n"
	"\tld.param.u64 %rd1, [out];\n\tcvta.to.global.u64 %rd2, %rd1;\n"
	"\tmov.u32 %r1, %tid.x;\n\tst.global.u32 [%rd2], %r1;\n\tret;\n}\n";

/* Instruments the kernel above with program 0 of o (verified or not): 0, or -1 and err. */
static int generate(const struct vm_object *o, char *err, size_t errlen)
{
	struct ptx_prog p;
	ptx_progs_from_object(o, &p, 1);
	struct ptx_inject_opts opts = {.progs = &p, .prog_cnt = 1, .maps = o->maps,
				       .map_cnt = o->map_cnt};
	char *out;
	size_t n;
	if (ptx_instrument(kernel_ptx, sizeof(kernel_ptx) - 1, &opts, &out, &n, NULL, err, errlen))
		return -1;
	free(out);
	return 0;
}

/* The start of the literal: up to the first conversion that the sources spell differently
 * from how a message reads (we compare with the sources' text). */
static bool listed(const char *msg)
{
	for (size_t i = 0; i < NREFUSALS; i++)
		if (!strncmp(refusals[i].msg, msg, strlen(refusals[i].msg)) ||
		    !strncmp(msg, refusals[i].msg, strlen(msg)))
			return true;
	return false;
}

/* The first string literal after each refusal call in `path`; unlisted ones fail the test. */
static unsigned check_file(const char *path, unsigned *unlisted)
{
	static const char *const calls[] = {"fail(g, pc, \"", "hfail(g, pc, ", "mfail(g, pc, ",
					    "ptx_seterr(err, errlen, \"",
					    "ptx_seterr(g->err, g->errlen, \""};
	FILE *f = fopen(path, "r");
	if (!f)
		fail_msg("%s: cannot open (run from the repository root)", path);
	static char text[1 << 20];
	size_t len = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[len] = 0;
	unsigned found = 0;
	for (size_t c = 0; c < sizeof(calls) / sizeof(calls[0]); c++)
		for (const char *p = text; (p = strstr(p, calls[c])); p++) {
			const char *q = strchr(p + strlen(calls[c]) - 1, '"');
			const char *end = q ? strchr(q + 1, '"') : NULL;
			if (!end || memchr(p, ';', (size_t)(q - p)))
				continue; /* a message built elsewhere */
			char msg[128];
			snprintf(msg, sizeof(msg), "%.*s", (int)(end - q - 1), q + 1);
			if (!strncmp(msg, "%s insn %u", 10))
				continue; /* the formats of fail/hfail/mfail themselves */
			found++;
			if (!listed(msg)) {
				print_message("%s: refusal \"%s\" is not in tests/ptx/test_ptx_refusals.c\n",
					      path, msg);
				(*unlisted)++;
			}
		}
	return found;
}

static void test_every_refusal_listed(void **state)
{
	(void)state;
	static const char *const files[] = {"ptx-rewriter/analyze.c", "ptx-rewriter/codegen.c",
					    "ptx-rewriter/helpers.c", "ptx-rewriter/maps.c",
					    "ptx-rewriter/inject.c"};
	unsigned unlisted = 0, found = 0;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		found += check_file(files[i], &unlisted);
	assert_true(found >= 50); /* the scan sees the refusals (about 60 sites) */
	assert_int_equal(unlisted, 0);
}

/* One listed shape: the verifier rejects it with its reason, the generator refuses it; false
 * (and why printed) when not. */
static bool shape_ok(const struct refusal *r)
{
	static char log[1 << 16];
	char err[512] = "", key[64];
	struct vm_object *o = object(r->insns, r->n, r->kind, r->subs);
	bool ok = false;
	if (vm_verify_sanitize(o, 0, NULL, NULL, log, sizeof(log)) == 0)
		print_message("\"%s\": the verifier accepts the shape\n", r->msg);
	else if (!strstr(log, r->verifier))
		print_message("\"%s\": rejected, but the log lacks '%s':\n%s", r->msg, r->verifier, log);
	else if (r->gen && generate(o, err, sizeof(err)) == 0)
		print_message("\"%s\": the generator compiles the shape\n", r->msg);
	else if (snprintf(key, sizeof(key), "%.*s", (int)strcspn(r->msg, "%"), r->msg) &&
		 r->gen && !strstr(err, key))
		print_message("\"%s\": the generator refuses it otherwise: %s\n", r->msg, err);
	else
		ok = true;
	vm_object_free(o);
	return ok;
}

static void test_verifier_first(void **state)
{
	(void)state;
	unsigned gaps = 0, bad = 0;
	for (size_t i = 0; i < NREFUSALS; i++) {
		const struct refusal *r = &refusals[i];
		if (r->gap) {
			print_message("gap: \"%s\": %s\n", r->msg, r->why);
			gaps++;
		} else if (r->insns && !shape_ok(r))
			bad++;
	}
	assert_int_equal(bad, 0);
	assert_true(gaps <= 3); /* inline size; puts and printk grammar (issue 27 item 2) */
}

/* Shapes the verifier accepted and the generator refused: compiled now. */
static void test_verified_compile(void **state)
{
	(void)state;
	const struct {
		const char *name;
		const struct bpf_insn *insns;
		uint32_t n;
	} shapes[] = {
		{"ctx + 8, read back at +12 (ntid_z)", P(ADDK(1, 8), LDX(BPF_W, 0, 1, 12), EXIT)},
		{"r6 = ctx; r6 += 56; read params[0]", P(MOVX(6, 1), ADDK(6, 56), LDX(BPF_DW, 0, 6, 0),
							  EXIT)},
		{"ctx + 16 - 8, read tid_z", P(ADDK(1, 16), I(BPF_ALU64 | BPF_SUB | BPF_K, 1, 0, 0, 8),
					      LDX(BPF_W, 0, 1, 0), EXIT)},
		/* code behind a branch the walk proved never taken, and a join whose other edge is
		 * such a branch: the branch hard-wired, the code dropped (vm_prog_drop_dead) */
		{"a store past the stack behind a never-taken branch",
		 P(LDX(BPF_W, 2, 1, 0), I(BPF_ALU64 | BPF_AND | BPF_K, 2, 0, 0, 1),
		   I(BPF_JMP | BPF_JGT | BPF_K, 2, 0, 1, 1), I(BPF_JMP | BPF_JA, 0, 0, 1, 0),
		   STK(BPF_DW, 10, -520, 0), RET0)},
		{"the context joined with 5 over a never-taken edge",
		 P(LDX(BPF_W, 2, 1, 0), I(BPF_ALU64 | BPF_AND | BPF_K, 2, 0, 0, 1), MOVK(6, 5),
		   I(BPF_JMP | BPF_JGT | BPF_K, 2, 0, 2, 1), MOVX(6, 1), MOVK(0, 0),
		   LDX(BPF_W, 0, 6, 0), EXIT)},
		{"ctx + r2 (r2 = 8 by a move)", P(MOVK(2, 8), I(BPF_ALU64 | BPF_ADD | BPF_X, 1, 2, 0, 0),
						 LDX(BPF_W, 0, 1, 0), EXIT)},
	};
	static char log[1 << 16];
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		struct vm_object *o = object(shapes[i].insns, shapes[i].n, KP, NULL);
		bool verified = vm_verify_sanitize(o, 0, NULL, NULL, log, sizeof(log)) == 0;
		char err[512];
		int rc = generate(o, err, sizeof(err));
		if (!verified && i < 5)
			fail_msg("%s: rejected:\n%s", shapes[i].name, log);
		if (verified && rc)
			fail_msg("%s: verified, then refused: %s", shapes[i].name, err);
		vm_object_free(o);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_refusal_listed),
		cmocka_unit_test(test_verifier_first),
		cmocka_unit_test(test_verified_compile),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
