/* PTX embedded in a cubin, and the options it was assembled with (see cubin.h).
 *
 * ptxas keeps the PTX it assembled in sections named .nv_debug_ptx_txt (nvJitLink:
 * .nv_debug_ptx_txt.<hash>, one per PTX input) when it writes line information: the module's
 * lines as NUL-terminated strings, comments and debug directives (.loc, .file, .section
 * .debug_*) dropped.  Joined with newlines they are PTX that ptxas accepts; assembled with the
 * options recorded in the .note.nv.tkinfo note they give the cubin's machine code again (checked
 * byte for byte by tests/cubin/test_embedded.c for nvcc, ptxas, NVRTC and nvJitLink cubins).
 *
 * The note (type 2000, owner "NVIDIA Corp") is one per tool that made the cubin: a header of six
 * 32-bit words (format version 2, 0, then the offsets of the tool's name, version, build and
 * options in the string area that follows).  The ptxas notes hold the options we need. */
#include <elf.h>
#include <stdlib.h>

#include "cubin/cubin.h"
#include "cubin/internal.h"

#define PTX_SECTION ".nv_debug_ptx_txt"
#define TKINFO_SECTION ".note.nv.tkinfo"
#define TKINFO_TYPE 2000u
#define TKINFO_OWNER "NVIDIA Corp"
#define TKINFO_HEADER 24u

/* ---- the PTX text ------------------------------------------------------------------------ */

static int is_ptx_section(const char *name)
{
	size_t n = sizeof(PTX_SECTION) - 1;
	return !strncmp(name, PTX_SECTION, n) && (name[n] == 0 || name[n] == '.');
}

/* The section's strings joined by newlines (empty strings dropped: ptxas pads the start with
 * them).  Returns a malloc'ed NUL-terminated text, or NULL when out of memory. */
static char *join_lines(const uint8_t *p, uint64_t size, size_t *len)
{
	char *text = malloc(size + 2);
	size_t n = 0;
	if (!text)
		return NULL;
	for (uint64_t at = 0; at < size;) {
		const uint8_t *nul = memchr(p + at, 0, size - at);
		uint64_t end = nul ? (uint64_t)(nul - p) : size;
		if (end > at) {
			memcpy(text + n, p + at, end - at);
			n += end - at;
			text[n++] = '\n';
		}
		at = end + 1;
	}
	text[n] = 0;
	*len = n;
	return text;
}

/* ---- the assembler's options ----------------------------------------------------------------- */

static void note_unsupported(struct cubin_asm_options *o, const char *opt, const char *val)
{
	if (!o->unsupported[0])
		snprintf(o->unsupported, sizeof(o->unsupported), "%s%s%s", opt, val ? " " : "",
			 val ? val : "");
}

/* Options that take a value, spelled either "-opt value" or "--long=value". */
static int takes_value(const char *opt)
{
	static const char *const with[] = {"-O", "--opt-level", "-arch", "--gpu-name", "-m",
					   "--machine", "-fmad", "--fmad", "-maxrregcount",
					   "--maxrregcount"};
	for (size_t i = 0; i < sizeof(with) / sizeof(with[0]); i++)
		if (!strcmp(opt, with[i]))
			return 1;
	return 0;
}

/* Options that change no machine code: diagnostics (Triton runs ptxas with -v). */
static int diagnostic_only(const char *opt)
{
	static const char *const diag[] = {
		"-v", "--verbose", "-w", "--disable-warnings", "-Werror", "--warning-as-error",
		"-warn-spills", "--warn-on-spills", "-warn-lmem-usage",
		"--warn-on-local-memory-usage", "-warn-double-usage", "--warn-on-double-precision-use",
		"-suppress-stack-size-warning", "--suppress-stack-size-warning",
		"-suppress-double-demote-warning", "--suppress-double-demote-warning",
		"-suppress-async-bulk-multicast-advisory-warning",
		"--suppress-async-bulk-multicast-advisory-warning"};
	for (size_t i = 0; i < sizeof(diag) / sizeof(diag[0]); i++)
		if (!strcmp(opt, diag[i]))
			return 1;
	return 0;
}

static void apply_option(struct cubin_asm_options *o, const char *opt, const char *val)
{
	if (diagnostic_only(opt) && !val)
		return;
	if (!strcmp(opt, "-lineinfo") || !strcmp(opt, "--generate-line-info"))
		o->lineinfo = 1;
	else if (!strcmp(opt, "-g") || !strcmp(opt, "--device-debug"))
		o->debug = 1;
	else if (!strcmp(opt, "-c") || !strcmp(opt, "--compile-only"))
		o->relocatable = 1;
	else if (!val)
		note_unsupported(o, opt, NULL);
	else if (!strcmp(opt, "-O") || !strcmp(opt, "--opt-level"))
		o->opt_level = val[0] >= '0' && val[0] <= '4' && !val[1] ? val[0] - '0' : -1;
	else if (!strcmp(opt, "-fmad") || !strcmp(opt, "--fmad"))
		o->fmad = strcmp(val, "false") != 0;
	else if (!strcmp(opt, "-maxrregcount") || !strcmp(opt, "--maxrregcount"))
		o->maxrregcount = (uint32_t)strtoul(val, NULL, 10);
	else if (!strcmp(opt, "-m") || !strcmp(opt, "--machine")) {
		if (strcmp(val, "64"))
			note_unsupported(o, opt, val);
	} else if (!strncmp(val, "sm_", 3)) { /* -arch sm_90a */
		char *end;
		o->sm = (uint32_t)strtoul(val + 3, &end, 10);
		o->suffix = *end == 'a' || *end == 'f' ? *end : 0;
	} else {
		note_unsupported(o, opt, val);
	}
	if (o->opt_level < 0)
		note_unsupported(o, opt, val), o->opt_level = 3;
}

/* Reads one options string ("-lineinfo  -arch sm_90 -m 64 ") into o. */
static void parse_options(struct cubin_asm_options *o, const char *s)
{
	char buf[sizeof(o->raw)], *save = NULL;
	snprintf(buf, sizeof(buf), "%s", s);
	for (char *t = strtok_r(buf, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
		char *eq = t[0] == '-' ? strchr(t, '=') : NULL, *val = NULL;
		if (eq) {
			*eq = 0;
			val = eq + 1;
		} else if (takes_value(t)) {
			val = strtok_r(NULL, " \t", &save);
		}
		apply_option(o, t, val);
	}
}

/* A string of the note's string area, or NULL when the offset is outside it. */
static const char *note_string(const uint8_t *area, uint32_t size, uint32_t off)
{
	if (off >= size || !memchr(area + off, 0, size - off))
		return NULL;
	return (const char *)area + off;
}

/* One note's descriptor: ptxas's options go into o. */
static void read_tkinfo(struct cubin_asm_options *o, const uint8_t *d, uint32_t size)
{
	if (size < TKINFO_HEADER)
		return;
	const uint8_t *area = d + TKINFO_HEADER;
	uint32_t asize = size - TKINFO_HEADER;
	const char *tool = note_string(area, asize, cubin_rd32(d + 8));
	const char *opts = note_string(area, asize, cubin_rd32(d + 20));
	if (!tool || !opts || strcmp(tool, "ptxas"))
		return;
	if (o->notes++ == 0) {
		snprintf(o->tool, sizeof(o->tool), "%s", tool);
		snprintf(o->raw, sizeof(o->raw), "%s", opts);
		parse_options(o, opts);
	} else if (strcmp(o->raw, opts)) {
		o->disagree = 1;
	}
}

static void read_notes(struct cubin_asm_options *o, const struct cubin_elf_section *s)
{
	for (uint64_t at = 0; s->data && s->size - at >= 12 && at < s->size;) {
		const uint8_t *n = s->data + at;
		uint32_t namesz = cubin_rd32(n), descsz = cubin_rd32(n + 4), type = cubin_rd32(n + 8);
		uint64_t name_pad = ((uint64_t)namesz + 3) & ~3ull, desc_pad = ((uint64_t)descsz + 3) & ~3ull;
		if (!cubin_in_bounds(at + 12, name_pad + desc_pad, s->size))
			return; /* a damaged note: what was read so far stands */
		const char *name = (const char *)n + 12;
		if (type == TKINFO_TYPE && namesz == sizeof(TKINFO_OWNER) &&
		    !memcmp(name, TKINFO_OWNER, namesz))
			read_tkinfo(o, n + 12 + name_pad, descsz);
		at += 12 + name_pad + desc_pad;
	}
}

/* ptxas's own spelling of the options (the note writes "-O 2", which ptxas does not read). */
int cubin_asm_options_ptxas(const struct cubin_asm_options *o, char *buf, size_t n)
{
	char arch[32] = "";
	if (o->sm)
		snprintf(arch, sizeof(arch), "-arch sm_%u%.1s ", o->sm, o->suffix ? &o->suffix : "");
	char regs[32] = "";
	if (o->maxrregcount)
		snprintf(regs, sizeof(regs), " -maxrregcount=%u", o->maxrregcount);
	int len = snprintf(buf, n, "%s-O%d -fmad=%s%s%s%s%s", arch, o->opt_level,
			   o->fmad ? "true" : "false", o->lineinfo ? " -lineinfo" : "",
			   o->debug ? " -g" : "", o->relocatable ? " -c" : "", regs);
	return len >= 0 && (size_t)len < n ? 0 : -1;
}

/* ---- the public reader -------------------------------------------------------------------- */

static void options_init(struct cubin_asm_options *o)
{
	memset(o, 0, sizeof(*o));
	o->opt_level = 3; /* ptxas's default */
	o->fmad = 1;
}

#define MAX_PARTS 64

/* Every PTX section's text, in section order (a link's inputs). */
static int read_parts(struct cubin_elf *elf, struct cubin_embedded_ptx *out, char *err,
		      size_t errlen)
{
	struct cubin_elf_section s;
	if (out->sections > MAX_PARTS)
		return 1; /* listed, not read */
	out->parts = calloc(out->sections, sizeof(*out->parts));
	out->part_lens = calloc(out->sections, sizeof(*out->part_lens));
	if (!out->parts || !out->part_lens)
		return cubin_fail(err, errlen, "out of memory");
	size_t n = 0;
	for (size_t i = 1; i < elf->shnum && n < out->sections; i++) {
		if (cubin_elf_section(elf, i, &s))
			return cubin_fail(err, errlen, "%s", elf->error);
		if (!is_ptx_section(s.name) || !s.data)
			continue;
		if (!(out->parts[n] = join_lines(s.data, s.size, &out->part_lens[n])))
			return cubin_fail(err, errlen, "out of memory");
		n++;
	}
	return 1;
}

int cubin_embedded_ptx(const void *data, size_t size, struct cubin_embedded_ptx *out, char *err,
		       size_t errlen)
{
	struct cubin_elf elf;
	struct cubin_elf_section s;
	memset(out, 0, sizeof(*out));
	options_init(&out->opts);
	if (cubin_elf_open(&elf, data, size))
		return cubin_fail(err, errlen, "%s", elf.error);
	out->sm = cubin_elf_sm(&elf);
	const struct cubin_elf_section *first = NULL;
	struct cubin_elf_section keep;
	for (size_t i = 1; i < elf.shnum; i++) {
		if (cubin_elf_section(&elf, i, &s))
			return cubin_fail(err, errlen, "%s", elf.error);
		if (is_ptx_section(s.name) && s.data) {
			if (out->sections++ == 0)
				keep = s, first = &keep;
			out->bytes += s.size;
		} else if (s.type == SHT_NOTE && !strcmp(s.name, TKINFO_SECTION)) {
			read_notes(&out->opts, &s);
		}
	}
	out->has_options = out->opts.notes > 0;
	if (out->sections == 0)
		return 0;
	if (out->sections > 1) /* one per input of a link: each its own module */
		return read_parts(&elf, out, err, errlen);
	if (!(out->text = join_lines(first->data, first->size, &out->len)))
		return cubin_fail(err, errlen, "out of memory");
	return 1;
}

void cubin_embedded_ptx_free(struct cubin_embedded_ptx *p)
{
	if (!p)
		return;
	free(p->text);
	p->text = NULL;
	p->len = 0;
	for (unsigned i = 0; p->parts && i < p->sections; i++)
		free(p->parts[i]);
	free(p->parts);
	free(p->part_lens);
	p->parts = NULL;
	p->part_lens = NULL;
}

/* ---- is it the cubin's code? -------------------------------------------------------------- */

static const struct cubin_kernel *find_kernel(const struct cubin_kernels *l, const char *name)
{
	for (size_t i = 0; i < l->count; i++)
		if (!strcmp(l->kernels[i].name, name))
			return &l->kernels[i];
	return NULL;
}

/* Same parameter list: count, and each parameter's size at the same offset.  Returns -1 when
 * they are the same, else the index of the first that differs (the count when one list is a
 * prefix of the other). */
static long first_other_param(const struct cubin_kernel *a, const struct cubin_kernel *b)
{
	uint32_t n = a->param_count < b->param_count ? a->param_count : b->param_count;
	for (uint32_t i = 0; i < n; i++)
		if (a->params[i].size != b->params[i].size || a->params[i].offset != b->params[i].offset)
			return i;
	return a->param_count == b->param_count ? -1 : (long)n;
}

/* ptxas places a kernel's parameters in constant bank 0 from a fixed address, 0x210 on sm_70 and
 * newer, and aligns each parameter's address there, not its offset: a parameter aligned to 64
 * bytes (a TMA descriptor, as XLA's and Triton's kernels pass) is preceded by 48 bytes of padding
 * in the cubin (0x210 + 48 = 0x240) that offsets counted from 0 do not show.  The first parameter
 * of p whose offset laid out that way differs from k's, or -1 when none does. */
#define PARAM_BANK_BASE 0x210u

static long first_other_param_in_bank(const struct cubin_kernel *k, const struct cubin_kernel *p)
{
	uint64_t end = PARAM_BANK_BASE;
	if (k->param_count != p->param_count)
		return k->param_count < p->param_count ? k->param_count : p->param_count;
	for (uint32_t i = 0; i < p->param_count; i++) {
		uint32_t a = p->params[i].align ? p->params[i].align : 1;
		uint64_t at = (end + a - 1) / a * a;
		if (k->params[i].size != p->params[i].size ||
		    k->params[i].offset != at - PARAM_BANK_BASE)
			return i;
		end = at + p->params[i].size;
	}
	return -1;
}

/* "parameter 3: 8 bytes at 24 in the cubin, 16 at 32 in the PTX" (what a refusal names). */
static void param_difference(const struct cubin_kernel *k, const struct cubin_kernel *p, long i,
			     char *buf, size_t len)
{
	if ((uint32_t)i >= k->param_count || (uint32_t)i >= p->param_count) {
		snprintf(buf, len, "%u parameters in the cubin, %u in the PTX", k->param_count,
			 p->param_count);
		return;
	}
	snprintf(buf, len, "parameter %ld: %u bytes at %u in the cubin, %u at %u in the PTX", i,
		 k->params[i].size, k->params[i].offset, p->params[i].size, p->params[i].offset);
}

static int compare_lists(const struct cubin_kernels *elf, const struct cubin_kernels *ptx,
			 char *why, size_t whylen)
{
	if (elf->count != ptx->count)
		return cubin_fail(why, whylen, "the cubin has %zu kernels, its PTX %zu", elf->count,
				  ptx->count), 1;
	for (size_t i = 0; i < elf->count; i++) {
		const struct cubin_kernel *k = &elf->kernels[i], *p = find_kernel(ptx, k->name);
		if (!p)
			return cubin_fail(why, whylen, "kernel %s is not in the PTX", k->name), 1;
		long i = first_other_param(k, p);
		if (i >= 0 && first_other_param_in_bank(k, p) < 0)
			i = -1; /* the same parameters, padded to their alignment in the bank */
		if (i >= 0) {
			char diff[128];
			param_difference(k, p, i, diff, sizeof(diff));
			return cubin_fail(why, whylen, "kernel %s has other parameters in the PTX (%s)",
					  k->name, diff), 1;
		}
	}
	return 0;
}

int cubin_embedded_ptx_matches(const void *cubin, size_t size, const char *ptx, size_t len,
			       char *why, size_t whylen)
{
	struct cubin_kernels ke, kp;
	char err[CUBIN_ERRLEN];
	if (cubin_elf_kernels(cubin, size, &ke, err, sizeof(err)))
		return cubin_fail(why, whylen, "the cubin: %s", err);
	if (cubin_ptx_kernels(ptx, len, &kp, err, sizeof(err))) {
		cubin_kernels_free(&ke);
		return cubin_fail(why, whylen, "the embedded PTX: %s", err);
	}
	int rc = compare_lists(&ke, &kp, why, whylen);
	/* The PTX may target a lower arch than the cubin (ptxas -arch sm_90 on .target sm_80
	 * PTX), never a higher one, nor an 'a'/'f' one of another arch.  A cubin's ELF header
	 * often does not say 'a' (ptxas -arch sm_90a writes the flags of sm_90, as Triton's and
	 * XLA's sm_90a cubins show), so an unmarked cubin takes its own arch's 'a'/'f' PTX. */
	int other_variant = kp.suffix && (kp.sm != ke.sm || (ke.suffix && kp.suffix != ke.suffix));
	if (rc == 0 && (kp.sm > ke.sm || other_variant))
		rc = 1, snprintf(why, whylen, "the PTX targets %s, the cubin sm_%u%.1s", kp.target,
				 ke.sm, ke.suffix ? &ke.suffix : "");
	cubin_kernels_free(&ke);
	cubin_kernels_free(&kp);
	return rc;
}

/* ---- the same machine code? ---------------------------------------------------------------- */

static size_t count_text(struct cubin_elf *elf)
{
	struct cubin_elf_section s;
	size_t n = 0;
	for (size_t i = 1; i < elf->shnum; i++)
		n += cubin_elf_section(elf, i, &s) == 0 && !strncmp(s.name, ".text.", 6);
	return n;
}

int cubin_same_code(const void *a, size_t asize, const void *b, size_t bsize, char *why,
		    size_t whylen)
{
	struct cubin_elf ea, eb;
	struct cubin_elf_section s, t;
	if (cubin_elf_open(&ea, a, asize) || cubin_elf_open(&eb, b, bsize))
		return cubin_fail(why, whylen, "not two cubins");
	size_t na = count_text(&ea), nb = count_text(&eb);
	if (na != nb)
		return cubin_fail(why, whylen, "%zu code sections against %zu", na, nb), 1;
	for (size_t i = 1; i < ea.shnum; i++) {
		if (cubin_elf_section(&ea, i, &s))
			return cubin_fail(why, whylen, "%s", ea.error);
		if (strncmp(s.name, ".text.", 6))
			continue;
		int rc = cubin_elf_section_by_name(&eb, s.name, &t);
		if (rc < 0)
			return cubin_fail(why, whylen, "%s", eb.error);
		if (rc || s.size != t.size || !s.data || !t.data || memcmp(s.data, t.data, s.size))
			return cubin_fail(why, whylen, "%s differs", s.name), 1;
	}
	return 0;
}
