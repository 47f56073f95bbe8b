/* The verifier's soundness fuzzer (issue 14): generates programs (sound_gen.c), verifies each,
 * and runs every accepted one on the checked interpreter over random contexts and map contents.
 *
 * Oracle: a verified program must not fault (the checked interpreter bounds every access to the
 * stack, the context and the maps' storage, helper arguments included), a verified GPU program
 * must compile to PTX (issue 27: the verifier, not the code generator, says no), and nothing it outputs may depend on where its
 * memory lies.  Each run is made twice, over the same context bytes and map contents but at
 * other addresses (another runtime, another context buffer, the stack shifted): the return
 * value, every map, the ring buffer records and the printk lines must come out the same.  A
 * pointer, or any bits of one (a partial spill, a comparison, a difference of two), reaching
 * an output makes them differ.  Outputs are also scanned for whole pointer values (the
 * context, the stack, the maps).  What the interpreter cannot see: reads of unwritten stack
 * (the checked interpreter zeroes the stack) and accesses inside a map's storage but outside
 * the element the program was given.
 *
 *   sound [-s SEED] [-n PROGRAMS] [-t SECONDS] [-r RUNS] [-o FOUND_DIR] [-D DUMP_DIR] [-q] [-v]
 *   sound --replay FILE...     re-verify and run saved programs (reproducers)
 *   sound --ptxdiff N [-s SEED] [-n MAX_PROGRAMS] [-o FOUND_DIR] [-W GPU_DIR] [--replay FILE...]
 *
 * --ptxdiff N: the differential check (tests/ptx/ptxdiff.h) besides: programs are generated in
 * the check's scope (sound_set_ptx_scope: GPU kinds, array maps, deterministic helpers), and
 * every accepted one is also run on the interpreter and on the CPU PTX simulator
 * (tests/ptx/ptxsim.py, from the repository root) over random inputs, until N programs have
 * been compared; a difference or an error (the generator refusing a verified program) is a
 * failure: its disassembly and first difference go to stderr, the program to
 * FOUND_DIR/ptxdiff-HASH.txt, which `sound --ptxdiff 1 --replay` reads (with the module and
 * its inputs beside it, .ptx and .cases, for tests/ptx/ptxdiff.py and the GPU's diff_run).
 * -W GPU_DIR writes every compared program's module and cases there (p-HASH.ptx, p-HASH.cases)
 * for the GPU: tests/ptx/gpu/diff_run.c GPU_DIR p-HASH... runs them against the interpreter.
 *
 * -v prints each program's verdict (the verifier's reason).
 * Prints the figures (programs generated, accepted, executions, violations); exits 1 on any
 * violation, after writing each violating program to FOUND_DIR (when given) as a text file
 * --replay reads; a crash (ASan) leaves the program it ran in FOUND_DIR/sound-crash.txt.  -D writes every accepted program there, in the same format,
 * for other engines (the differential check against the PTX simulator, tests/ptx).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tests/fuzz/sound.h"
#include "ptx-rewriter/ptx.h"
#include "tests/ptx/ptxdiff.h"
#include "vm/internal.h"

struct opts {
	uint64_t seed, programs;
	double seconds;
	uint32_t runs;
	uint64_t ptxdiff;          /* programs to compare with the PTX simulator (0: none) */
	const char *found_dir, *dump_dir, *gpu_dir;
	bool quiet, verbose;
};

struct figures {
	uint64_t generated, accepted, executions, violations, faults, leaks, saved;
	uint64_t refused;          /* GPU programs the code generator refused (violations too) */
	uint64_t in_scope, same, differ, errors;   /* --ptxdiff */
};

/* ---- objects ---------------------------------------------------------------------------------- */

static struct vm_object *make_object(const struct sound_prog *p, char *err, size_t errlen)
{
	struct vm_object *o = vm_object_from_insns(p->insns, p->n, p->kind, err, errlen);
	if (!o)
		return NULL;
	uint32_t *subs = malloc(sizeof(uint32_t) * p->nsubprogs);
	o->maps = calloc(SOUND_MAPS, sizeof(*o->maps));
	if (!subs || !o->maps) {
		free(subs);
		vm_object_free(o);
		return NULL;
	}
	memcpy(subs, p->subprogs, sizeof(uint32_t) * p->nsubprogs);
	free(o->progs[0].subprogs);
	o->progs[0].subprogs = subs;
	o->progs[0].subprog_cnt = p->nsubprogs;
	o->map_cnt = SOUND_MAPS;
	for (uint32_t i = 0; i < SOUND_MAPS; i++) {
		const struct sound_map_info *mi = sound_map(i);
		struct vm_map_def *d = &o->maps[i];
		snprintf(d->name, sizeof(d->name), "%s", mi->name);
		d->type = mi->type, d->key_size = mi->key_size, d->value_size = mi->value_size;
		d->max_entries = mi->max_entries;
	}
	o->maps[SOUND_MAP_RODATA].origin = VM_MAP_RODATA;
	o->maps[SOUND_MAP_RODATA].flags = BPF_F_RDONLY_PROG;
	o->maps[SOUND_MAP_RODATA].init = malloc(sizeof(p->rodata));
	if (o->maps[SOUND_MAP_RODATA].init)
		memcpy(o->maps[SOUND_MAP_RODATA].init, p->rodata, sizeof(p->rodata));
	o->maps[SOUND_MAP_BSS].origin = VM_MAP_BSS;
	o->maps[SOUND_MAP_RO].flags = BPF_F_RDONLY_PROG;
	return o;
}

/* ---- saving and reading programs ---------------------------------------------------------------
 * Text, one instruction a line: "HEX16 ; disassembly", after "kind N" and "subprogs A B ...". */

static void write_prog(FILE *f, const struct sound_prog *p, const struct vm_object *o,
		       const char *why)
{
	fprintf(f, "# cubpf soundness fuzzer program (tests/fuzz/sound.c; sound --replay FILE)\n");
	if (sound_map(SOUND_MAP_HASH)->type == CUBPF_MAP_ARRAY)
		fprintf(f, "# every map an array: sound --ptxdiff 1 --replay FILE\n");
	if (why)
		fprintf(f, "# %s\n", why);
	fprintf(f, "kind %d %s\nsubprogs", p->kind, vm_prog_kind_name(p->kind));
	for (uint32_t i = 0; i < p->nsubprogs; i++)
		fprintf(f, " %u", p->subprogs[i]);
	fprintf(f, "\n");
	for (int i = 0; i < SOUND_FMT_SLOTS; i++) { /* the printk formats, as hex bytes */
		fprintf(f, "rodata %d ", i);
		for (int k = 0; k < SOUND_FMT_LEN; k++)
			fprintf(f, "%02x", (unsigned char)p->rodata[i * SOUND_FMT_LEN + k]);
		fprintf(f, "\n");
	}
	for (uint32_t pc = 0; pc < p->n; pc++) {
		uint64_t raw;
		char text[160] = "";
		memcpy(&raw, &p->insns[pc], 8);
		if (pc == 0 || p->insns[pc - 1].code != (BPF_LD | BPF_DW | BPF_IMM))
			vm_disasm_insn_at(&p->insns[pc], p->n - pc, pc, o, text, sizeof(text));
		fprintf(f, "%016" PRIx64 " ; %u: %s\n", raw, pc, text);
	}
}

static int save_prog(const struct sound_prog *p, const struct vm_object *o, const char *path,
		     const char *why)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	write_prog(f, p, o, why);
	return fclose(f);
}

static int read_prog(const char *path, struct sound_prog *p)
{
	FILE *f = fopen(path, "r");
	char line[512];
	if (!f)
		return -1;
	memset(p, 0, sizeof(*p));
	sound_rodata_default(p); /* files saved before the formats: slot 0 only */
	while (fgets(line, sizeof(line), f)) {
		int kind, slot, at;
		uint64_t raw;
		if (line[0] == '#')
			continue;
		if (sscanf(line, "rodata %d %n", &slot, &at) == 1 && slot >= 0 &&
		    slot < SOUND_FMT_SLOTS) {
			for (int k = 0; k < SOUND_FMT_LEN; k++) {
				unsigned b = 0;
				if (sscanf(line + at + 2 * k, "%2x", &b) != 1)
					break;
				p->rodata[slot * SOUND_FMT_LEN + k] = (char)b;
			}
		} else if (sscanf(line, "kind %d", &kind) == 1)
			p->kind = (enum vm_prog_kind)kind;
		else if (!strncmp(line, "subprogs", 8)) {
			char *s = line + 8, *end;
			for (unsigned long v; p->nsubprogs <= SOUND_MAX_SUBS &&
					      (v = strtoul(s, &end, 10), end != s); s = end)
				p->subprogs[p->nsubprogs++] = (uint32_t)v;
		} else if (sscanf(line, "%" SCNx64, &raw) == 1 && p->n < SOUND_MAX_INSNS)
			memcpy(&p->insns[p->n++], &raw, 8);
	}
	fclose(f);
	return p->n && p->nsubprogs ? 0 : -1;
}

/* ---- one run, twice -------------------------------------------------------------------------- */

struct side {
	struct vm_runtime *rt;
	struct vm_exec *ex;
	uint8_t *ctx_mem, *ctx;
	char printk[8192];
	size_t printk_len;
	uint64_t r0;
	int rc;
	char err[256];
	uintptr_t stack_hint;      /* an address near the interpreter's stack */
};

static void capture(void *user, const char *line)
{
	struct side *s = user;
	int n = snprintf(s->printk + s->printk_len, sizeof(s->printk) - s->printk_len, "%s\n", line);
	if (n > 0)
		s->printk_len = s->printk_len + (size_t)n < sizeof(s->printk) ? s->printk_len + (size_t)n
									: sizeof(s->printk) - 1;
}

/* Helpers whose results vary from call to call (clocks, CPU, thread) answer constants here, so
 * that the two sides of a run see the same inputs. */
static uint64_t fixed_helper(void *env, uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e)
{
	(void)env, (void)a, (void)b, (void)c, (void)d, (void)e;
	return 0x1234;
}

/* bpf_probe_read from any address the program names: what a probe may read is the GPU helpers'
 * business (issue 14, class 6) and the host's contents differ from run to run, so here it reads
 * nothing: it zeroes the destination (writing it all, so that a destination the verifier got
 * wrong still shows) and fails, as Linux does on a fault. */
static uint64_t probe_read_nothing(void *env, uint64_t dst, uint64_t size, uint64_t src,
				   uint64_t d, uint64_t e)
{
	(void)env, (void)src, (void)d, (void)e;
	if (size) /* (a NULL destination goes with size 0) */
		memset((void *)(uintptr_t)dst, 0, (size_t)size);
	return (uint64_t)-14; /* -EFAULT */
}

static void fill_maps(struct vm_runtime *rt, uint64_t seed)
{
	uint8_t val[64];
	for (uint32_t m = 0; m < SOUND_MAPS; m++) {
		const struct sound_map_info *mi = sound_map(m);
		if (m == SOUND_MAP_RING || m == SOUND_MAP_RODATA)
			continue;
		for (uint32_t k = 0; k < (mi->type == CUBPF_MAP_HASH ? 8u : mi->max_entries); k++) {
			for (uint32_t i = 0; i < mi->value_size; i++)
				val[i] = (uint8_t)sound_rand(&seed);
			if (mi->type != CUBPF_MAP_HASH || (sound_rand(&seed) & 1))
				vm_map_update(rt, m, &k, val, 0);
		}
	}
}

static int side_open(struct side *s, const struct vm_object *o, const uint8_t *ctx, size_t ctx_size,
		     size_t ctx_shift, uint64_t map_seed)
{
	memset(s, 0, sizeof(*s));
	static const uint32_t varying[] = {CUBPF_FN_ktime_get_ns, CUBPF_FN_get_smp_processor_id,
					   CUBPF_FN_get_current_pid_tgid, CUBPF_FN_get_globaltimer,
					   CUBPF_FN_get_clock};
	if (!(s->rt = vm_runtime_new(o, s->err, sizeof(s->err))))
		return -1;
	struct vm_output out = {.printk = capture, .user = s};
	vm_runtime_set_output(s->rt, &out);
	fill_maps(s->rt, map_seed);
	if (!(s->ex = vm_exec_new(s->rt, 0, s->err, sizeof(s->err))))
		return -1;
	vm_exec_set_checked(s->ex, true);
	for (size_t i = 0; i < sizeof(varying) / sizeof(varying[0]); i++)
		vm_exec_set_helper(s->ex, varying[i], fixed_helper);
	vm_exec_set_helper(s->ex, CUBPF_FN_probe_read, probe_read_nothing);
	vm_exec_set_helper(s->ex, CUBPF_FN_probe_read_user, probe_read_nothing);
	if (!(s->ctx_mem = malloc(ctx_size + ctx_shift)))
		return -1;
	s->ctx = s->ctx_mem + ctx_shift;
	memcpy(s->ctx, ctx, ctx_size);
	return 0;
}

static void side_close(struct side *s)
{
	vm_exec_free(s->ex);
	vm_runtime_free(s->rt);
	free(s->ctx_mem);
}

/* Runs with the interpreter's stack `shift` bytes deeper than a plain call would put it. */
static __attribute__((noinline)) void side_run(struct side *s, size_t ctx_size, size_t shift)
{
	volatile char pad[shift + 1];
	pad[0] = 0;
	s->stack_hint = (uintptr_t)pad;
	s->rc = vm_exec_run(s->ex, s->ctx, ctx_size, &s->r0, s->err, sizeof(s->err));
	__asm__ volatile("" ::"r"(pad) : "memory");
}

/* Is v the address of something the program was given (one side's layout)? */
static bool pointer_like(const struct side *s, size_t ctx_size, uint64_t v)
{
	if (v - (s->stack_hint - 65536) < 131072 || v - (uintptr_t)s->ctx < ctx_size)
		return true;
	for (uint32_t i = 0; i < s->rt->map_cnt; i++) {
		const struct vm_map *m = &s->rt->maps[i];
		if (v - (uintptr_t)m->data < m->data_size + 8 || v - (uintptr_t)m < sizeof(*m))
			return true;
	}
	return false;
}

static bool scan(const struct side *s, size_t ctx_size, const uint8_t *buf, size_t len)
{
	for (size_t i = 0; i + 8 <= len; i += 4) {
		uint64_t v;
		memcpy(&v, buf + i, 8);
		if (pointer_like(s, ctx_size, v))
			return true;
	}
	return false;
}

/* Compares every map of both sides; scans side a's values for pointers.  Returns a reason or
 * NULL. */
static const char *compare_maps(struct side *a, struct side *b, size_t ctx_size)
{
	uint8_t va[SOUND_RODATA_SIZE], vb[SOUND_RODATA_SIZE], rec_a[4096], rec_b[4096]; /* .rodata: the largest value */
	for (uint32_t m = 0; m < SOUND_MAPS; m++) {
		const struct sound_map_info *mi = sound_map(m);
		if (m == SOUND_MAP_RING) {
			size_t na, nb;
			do {
				na = vm_ringbuf_consume(a->rt, m, rec_a, sizeof(rec_a));
				nb = vm_ringbuf_consume(b->rt, m, rec_b, sizeof(rec_b));
				if (na != nb || memcmp(rec_a, rec_b, na))
					return "ring buffer records differ between address layouts";
				if (scan(a, ctx_size, rec_a, na))
					return "a pointer in a ring buffer record";
			} while (na);
			continue;
		}
		uint32_t key = 0, next;
		const void *kp = NULL;
		while (vm_map_next_key(a->rt, m, kp, &next) == 0) {
			int ra = vm_map_lookup(a->rt, m, &next, va), rb = vm_map_lookup(b->rt, m, &next, vb);
			if (ra != rb || (ra == 0 && memcmp(va, vb, mi->value_size)))
				return "map values differ between address layouts";
			if (ra == 0 && scan(a, ctx_size, va, mi->value_size))
				return "a pointer in a map value";
			key = next, kp = &key;
		}
		kp = NULL;
		while (vm_map_next_key(b->rt, m, kp, &next) == 0) {
			if (vm_map_lookup(a->rt, m, &next, va) != 0)
				return "map keys differ between address layouts";
			key = next, kp = &key;
		}
	}
	return NULL;
}

/* One run: both sides over the same inputs.  Returns a violation's reason or NULL. */
static const char *run_twice(const struct vm_object *o, enum vm_prog_kind kind, uint64_t *rng,
			     char *why, size_t whylen)
{
	size_t ctx_size = sound_ctx_size(kind);
	uint8_t ctx[512];
	for (size_t i = 0; i < ctx_size; i++)
		ctx[i] = (uint8_t)sound_rand(rng);
	if (sound_rand(rng) & 1) /* small values too: indices and sizes programs test */
		for (size_t i = 0; i < ctx_size; i += 4)
			ctx[i + 1] = ctx[i + 2] = ctx[i + 3] = 0;
	uint64_t map_seed = sound_rand(rng) | 1;
	struct side a, b;
	const char *v = NULL;
	if (side_open(&a, o, ctx, ctx_size, 0, map_seed) || side_open(&b, o, ctx, ctx_size, 72, map_seed)) {
		snprintf(why, whylen, "set-up failed: %s%s", a.err, b.err);
		v = "";
	} else {
		side_run(&a, ctx_size, 16);
		side_run(&b, ctx_size, 16 + 8 * (1 + sound_rand(rng) % 200));
		if (a.rc || b.rc)
			snprintf(why, whylen, "fault: %s", a.rc ? a.err : b.err), v = why;
		else if (a.r0 != b.r0)
			v = "the return value differs between address layouts";
		else if (pointer_like(&a, ctx_size, a.r0))
			v = "a pointer in the return value";
		else if (a.printk_len != b.printk_len || memcmp(a.printk, b.printk, a.printk_len))
			v = "printk output differs between address layouts";
		else
			v = compare_maps(&a, &b, ctx_size);
		if (v && v != why)
			snprintf(why, whylen, "%s", v), v = why;
	}
	side_close(&a);
	side_close(&b);
	return v;
}

/* ---- the loop -------------------------------------------------------------------------------- */

static struct sound_prog current;     /* the program running now (the crash report names it) */
static const char *crash_dir = ".";

void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

static void on_death(void)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/sound-crash.txt", crash_dir);
	if (save_prog(&current, NULL, path, "crashed the fuzzer (verifier or interpreter)") == 0)
		fprintf(stderr, "sound: the program that crashed is in %s\n", path);
}

static uint64_t hash_prog(const struct sound_prog *p)
{
	uint64_t h = 1469598103934665603ull;
	const uint8_t *b = (const uint8_t *)p->insns;
	for (size_t i = 0; i < p->n * sizeof(struct bpf_insn); i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

/* Saves a failing program as FOUND_DIR/PREFIX-HASH.txt (when -o) and says so. */
static void report(const struct opts *op, struct figures *f, const struct sound_prog *p,
		   const struct vm_object *o, const char *why, const char *prefix)
{
	char path[4096] = "not saved: no -o";
	if (op->found_dir) {
		snprintf(path, sizeof(path), "%s/%s-%016" PRIx64 ".txt", op->found_dir, prefix,
			 hash_prog(p));
		if (save_prog(p, o, path, why) == 0)
			f->saved++;
	}
	fprintf(stderr, "sound: VIOLATION (%s): %s\n", why, path);
}

/* The differential check of an accepted program (tests/ptx/ptxdiff.h): the interpreter against
 * the CPU PTX simulator, the code compiled folded (as probes are) for every other program.
 * Returns -1 on a difference or an error (printed and saved), else 0. */
static int ptx_compare(const struct opts *op, struct figures *f, const struct sound_prog *p,
		       const struct vm_object *o, char *reason, size_t reasonlen)
{
	char err[1024], why[1200];
	struct ptxdiff_opts po = {.runs = 8, .seed = hash_prog(p) | 1, .fold = f->in_scope & 1};
	int rc = ptxdiff_check(o, 0, &po, err, sizeof(err));
	if (rc == 1) {
		snprintf(reason, reasonlen, "accepted; out of the PTX check's scope: %s", err);
		return 0;
	}
	f->in_scope++;
	if (rc == 0) {
		f->same++;
		snprintf(reason, reasonlen, "accepted; same on the PTX simulator");
		if (op->gpu_dir) {
			char ptx[4200], cases[4200];
			snprintf(ptx, sizeof(ptx), "%s/p-%016" PRIx64 ".ptx", op->gpu_dir, hash_prog(p));
			snprintf(cases, sizeof(cases), "%s/p-%016" PRIx64 ".cases", op->gpu_dir,
				 hash_prog(p));
			if (ptxdiff_prepare(o, 0, &po, ptx, cases, err, sizeof(err))) {
				f->errors++;
				snprintf(reason, reasonlen, "cannot write for the GPU: %s", err);
				fprintf(stderr, "sound: %s\n", reason);
				return -1;
			}
		}
		return 0;
	}
	if (rc == 2)
		f->differ++;
	else
		f->errors++;
	snprintf(why, sizeof(why), "PTX %s (%s): %s", rc == 2 ? "DIFFERENCE" : "ERROR",
		 po.fold ? "folded" : "as written", err);
	fprintf(stderr, "sound: %s\n", why);
	write_prog(stderr, p, o, why);
	report(op, f, p, o, why, "ptxdiff");
	if (op->found_dir) { /* the module and inputs too: tests/ptx/ptxdiff.py PTX CASES reruns */
		char ptx[4200], cases[4200];
		snprintf(ptx, sizeof(ptx), "%s/ptxdiff-%016" PRIx64 ".ptx", op->found_dir, hash_prog(p));
		snprintf(cases, sizeof(cases), "%s/ptxdiff-%016" PRIx64 ".cases", op->found_dir,
			 hash_prog(p));
		ptxdiff_prepare(o, 0, &po, ptx, cases, err, sizeof(err));
	}
	snprintf(reason, reasonlen, "%s", why);
	return -1;
}

/* GPU kinds (issue 27): what the verifier accepts, the code generator compiles; a refusal is
 * a violation.  The program goes into a kernel with a store, so that memprobes have a site. */
static bool gen_refuses(const struct vm_object *o, char *why, size_t whylen)
{
	static const char kernel[] =
		".version 8.0\n.target sm_80\n.address_size 64\n\n"
		".visible .entry k(.param .u64 out)\n{\n\t.reg .b64 %rd<3>;\n\t.reg .b32 %r<2>;\n"
		"\tld.param.u64 %rd1, [out];\n\tcvta.to.global.u64 %rd2, %rd1;\n"
		"\tmov.u32 %r1, %tid.x;\n\tst.global.u32 [%rd2], %r1;\n\tret;\n}\n";
	if (!vm_kind_is_gpu(o->progs[0].kind))
		return false;
	struct ptx_prog p;
	ptx_progs_from_object(o, &p, 1);
	struct ptx_inject_opts po = {.progs = &p, .prog_cnt = 1, .maps = o->maps,
				     .map_cnt = o->map_cnt};
	char *out, err[200];
	size_t len;
	if (ptx_instrument(kernel, sizeof(kernel) - 1, &po, &out, &len, NULL, err, sizeof(err))) {
		snprintf(why, whylen, "the code generator refuses a verified program: %s", err);
		return true;
	}
	free(out);
	return false;
}

/* Verifies and runs one program.  Returns 1 accepted, 0 rejected, -1 violation. */
static int check_one(const struct opts *op, struct figures *f, const struct sound_prog *p,
		     uint64_t *rng, char *reason, size_t reasonlen)
{
	char err[256], log[512];
	struct vm_object *o = make_object(p, err, sizeof(err));
	if (!o)
		return 0;
	struct vm_verify_opts vo = {.max_processed = 200000};
	struct vm_verify_info info;
	int rc = 0;
	if (vm_verify_sanitize(o, 0, &vo, &info, log, sizeof(log)) != 0) {
		snprintf(reason, reasonlen, "rejected: %s", info.reason);
	} else {
		rc = 1;
		f->accepted++;
		snprintf(reason, reasonlen, "accepted");
		if (op->dump_dir) {
			char path[4096];
			snprintf(path, sizeof(path), "%s/prog-%016" PRIx64 ".txt", op->dump_dir, hash_prog(p));
			save_prog(p, o, path, NULL);
		}
		for (uint32_t r = 0; r < op->runs; r++) {
			char why[300];
			f->executions++;
			if (run_twice(o, p->kind, rng, why, sizeof(why))) {
				if (!strncmp(why, "fault", 5))
					f->faults++;
				else
					f->leaks++;
				f->violations++;
				report(op, f, p, o, why, "sound");
				snprintf(reason, reasonlen, "VIOLATION: %s", why);
				rc = -1;
				break;
			}
		}
		char why[300];
		if (rc == 1 && gen_refuses(o, why, sizeof(why))) {
			f->refused++;
			f->violations++;
			report(op, f, p, o, why, "sound");
			snprintf(reason, reasonlen, "VIOLATION: %s", why);
			rc = -1;
		}
		if (rc == 1 && op->ptxdiff && ptx_compare(op, f, p, o, reason, reasonlen))
			rc = -1;
	}
	vm_object_free(o);
	return rc;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void ptx_figures(const struct opts *op, const struct figures *f, double secs)
{
	printf("sound ptxdiff: seed %" PRIu64 ": %" PRIu64 " programs generated, %" PRIu64
	       " accepted, %" PRIu64 " in the PTX check's scope, %" PRIu64 " compared, %" PRIu64
	       " same, %" PRIu64 " differ, %" PRIu64 " errors, %" PRIu64 " violations in %.1f s\n",
	       op->seed, f->generated, f->accepted, f->in_scope, f->same + f->differ, f->same,
	       f->differ, f->errors, f->violations, secs);
}

static int replay(const struct opts *op, int argc, char **argv)
{
	struct figures f = {0};
	int bad = 0;
	uint64_t rng = op->seed | 1;
	for (int i = 0; i < argc; i++) {
		char reason[400];
		if (read_prog(argv[i], &current) != 0) {
			fprintf(stderr, "sound: %s: not a program file\n", argv[i]);
			bad = 1;
			continue;
		}
		f.generated++;
		int rc = check_one(op, &f, &current, &rng, reason, sizeof(reason));
		printf("%s: %s\n", argv[i], reason);
		bad |= rc < 0;
	}
	fflush(stdout);
	printf("sound replay: %" PRIu64 " programs, %" PRIu64 " accepted, %" PRIu64
	       " executions, %" PRIu64 " violations\n", f.generated, f.accepted, f.executions,
	       f.violations);
	if (op->ptxdiff)
		ptx_figures(op, &f, 0);
	return bad;
}

static int fuzz(const struct opts *op)
{
	struct figures f = {0};
	uint64_t rng = op->seed * 0x9E3779B97F4A7C15ull + 1;
	double t0 = now_s();
	for (uint64_t i = 0; (!op->programs || i < op->programs) &&
			     (op->seconds <= 0 || now_s() - t0 < op->seconds) &&
			     (!op->ptxdiff || f.in_scope < op->ptxdiff); i++) {
		char reason[400];
		if (!sound_generate(&rng, &current))
			continue;
		f.generated++;
		check_one(op, &f, &current, &rng, reason, sizeof(reason));
		if (op->verbose)
			fprintf(stderr, "%s\n", reason);
		if (!op->quiet && f.generated % 100000 == 0)
			fprintf(stderr, "sound: %" PRIu64 " generated, %" PRIu64 " accepted, %" PRIu64
				" violations, %.0f s\n", f.generated, f.accepted, f.violations, now_s() - t0);
	}
	if (op->ptxdiff) {
		ptx_figures(op, &f, now_s() - t0);
		return f.violations || f.differ || f.errors || f.in_scope < op->ptxdiff;
	}
	printf("sound: seed %" PRIu64 ": %" PRIu64 " programs generated, %" PRIu64 " accepted, %" PRIu64
	       " executions, %" PRIu64 " violations (%" PRIu64 " faults, %" PRIu64
	       " address leaks, %" PRIu64 " refused by the code generator) in %.1f s\n", op->seed,
	       f.generated, f.accepted, f.executions, f.violations, f.faults, f.leaks, f.refused,
	       now_s() - t0);
	return f.violations != 0;
}

int main(int argc, char **argv)
{
	struct opts op = {.seed = 1, .runs = 4};
	int i = 1;
	bool do_replay = false;
	for (; i < argc && argv[i][0] == '-'; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--replay"))
			do_replay = true;
		else if (!strcmp(a, "-q"))
			op.quiet = true;
		else if (!strcmp(a, "-v"))
			op.verbose = true;
		else if (v && !strcmp(a, "-s"))
			op.seed = strtoull(v, NULL, 0), i++;
		else if (v && !strcmp(a, "-n"))
			op.programs = strtoull(v, NULL, 0), i++;
		else if (v && !strcmp(a, "-t"))
			op.seconds = atof(v), i++;
		else if (v && !strcmp(a, "-r"))
			op.runs = (uint32_t)strtoul(v, NULL, 0), i++;
		else if (v && !strcmp(a, "-o"))
			op.found_dir = v, i++;
		else if (v && !strcmp(a, "--ptxdiff"))
			op.ptxdiff = strtoull(v, NULL, 0), i++;
		else if (v && !strcmp(a, "-W"))
			op.gpu_dir = v, i++;
		else if (v && !strcmp(a, "-D"))
			op.dump_dir = v, i++;
		else {
			fprintf(stderr, "usage: %s [-s SEED] [-n PROGRAMS] [-t SECONDS] [-r RUNS] "
				"[-o FOUND_DIR] [-D DUMP_DIR] [--ptxdiff N [-W GPU_DIR]] [-q] [-v] | "
				"--replay FILE...\n", argv[0]);
			return 2;
		}
	}
	if (!op.programs && op.seconds <= 0)
		op.programs = op.ptxdiff ? 100 * op.ptxdiff : 1000;
	sound_set_ptx_scope(op.ptxdiff != 0);
	crash_dir = op.found_dir ? op.found_dir : ".";
	if (op.found_dir)
		mkdir(op.found_dir, 0777);
	if (op.dump_dir)
		mkdir(op.dump_dir, 0777);
	if (op.gpu_dir)
		mkdir(op.gpu_dir, 0777);
	if (__sanitizer_set_death_callback)
		__sanitizer_set_death_callback(on_death);
	return do_replay ? replay(&op, argc - i, argv + i) : fuzz(&op);
}
