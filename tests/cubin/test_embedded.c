/* PTX embedded in cubins (cubin_embedded_ptx), on cubins this machine's toolkit makes at test
 * time (tests/cubin/module.mk): nvcc -cubin -lineinfo, ptxas on PTX with .loc lines (-O 2
 * -fmad false), NVRTC with -lineinfo and with -arch=sm_90 only, nvJitLink of one and of two
 * PTX inputs.  For each cubin that carries its PTX: the recovered text is the cubin's code
 * (same kernels and parameters), ptxas with the recorded options gives the same machine code
 * (every .text.* section byte for byte), and instrumented with the bundled kcount and memtrace
 * probes (cubpf ptx) it assembles for sm_90 and sm_80.  Needs $PTXAS and $CUBPF_BUILD (make
 * test sets them); without ptxas the assembling tests are skipped, and say so. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ptx-rewriter/ptx.h"
#include "tests/cubin/fixtures.h"

static const char *ptxas(void)
{
	const char *p = getenv("PTXAS");
	if (!p || !*p || access(p, X_OK)) {
		fprintf(stderr, "SKIP: ptxas not found (PTXAS=%s): the cubins are not re-assembled\n",
			p ? p : "unset");
		return NULL;
	}
	return p;
}

static void write_or_fail(const char *path, const void *data, size_t size)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, size, f), size);
	assert_int_equal(fclose(f), 0);
}

static void run_or_fail(const char *cmd)
{
	int rc = system(cmd);
	if (rc != 0)
		fail_msg("command failed (status %d): %s", rc, cmd);
}

static void read_ptx(const char *name, uint8_t **buf, size_t *size, struct cubin_embedded_ptx *e)
{
	char err[256];
	*buf = fixture(name, size);
	int rc = cubin_embedded_ptx(*buf, *size, e, err, sizeof(err));
	if (rc < 0)
		fail_msg("%s: %s", name, err);
}

/* Every .text.* section of `b` exists in `a` with the same bytes, and as many of them. */
static void same_text(const char *name, const uint8_t *a, size_t asize, const uint8_t *b,
		      size_t bsize)
{
	struct cubin_elf ea, eb;
	struct cubin_elf_section s, t;
	size_t n = 0;
	assert_int_equal(cubin_elf_open(&ea, a, asize), 0);
	assert_int_equal(cubin_elf_open(&eb, b, bsize), 0);
	for (size_t i = 1; i < ea.shnum; i++) {
		assert_int_equal(cubin_elf_section(&ea, i, &s), 0);
		if (strncmp(s.name, ".text.", 6))
			continue;
		n++;
		if (cubin_elf_section_by_name(&eb, s.name, &t) != 0)
			fail_msg("%s: %s is missing from the re-assembled cubin", name, s.name);
		if (s.size != t.size || memcmp(s.data, t.data, s.size))
			fail_msg("%s: %s differs after re-assembly (%llu vs %llu bytes)", name, s.name,
				 (unsigned long long)s.size, (unsigned long long)t.size);
	}
	assert_true(n > 0);
	size_t m = 0;
	for (size_t i = 1; i < eb.shnum; i++) {
		assert_int_equal(cubin_elf_section(&eb, i, &t), 0);
		m += !strncmp(t.name, ".text.", 6);
	}
	assert_int_equal(m, n);
}

static char *tmp_path(char *buf, size_t n, const char *name, const char *ext)
{
	snprintf(buf, n, "%s/cubpf-embedded-%d-%s%s", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
		 (int)getpid(), name, ext);
	return buf;
}

/* The PTX with its .target lowered to sm_80 (the fixtures' kernels use nothing newer). */
static void retarget_sm80(const char *in, const char *out)
{
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), "sed 's/^\\.target sm_90[af]*/.target sm_80/' %s > %s", in, out);
	run_or_fail(cmd);
}

/* Instruments `ptx` with a bundled probe and assembles it for sm_90 and sm_80. */
static void instrument_and_assemble(const char *as, const char *name, const char *ptx,
				    const char *probe)
{
	const char *build = getenv("CUBPF_BUILD") ? getenv("CUBPF_BUILD") : "build";
	char out[512], out80[512], cub[512], cmd[2048];
	tmp_path(out, sizeof(out), name, probe);
	strcat(out, ".ptx");
	tmp_path(out80, sizeof(out80), name, probe);
	strcat(out80, ".sm80.ptx");
	tmp_path(cub, sizeof(cub), name, ".inst.cubin");
	snprintf(cmd, sizeof(cmd), "%s/bin/cubpf ptx -p %s/probes/%s.bpf.o %s -o %s", build, build,
		 probe, ptx, out);
	run_or_fail(cmd);
	size_t size;
	uint8_t *text = read_file_or_fail(out, &size);
	text = realloc(text, size + 1);
	assert_non_null(text);
	text[size] = 0;
	if (!strstr((char *)text, "__cubpf"))
		fail_msg("%s: %s instrumented nothing in %s", name, probe, ptx);
	free(text);
	snprintf(cmd, sizeof(cmd), "%s -arch sm_90 %s -o %s", as, out, cub);
	run_or_fail(cmd);
	retarget_sm80(out, out80);
	snprintf(cmd, sizeof(cmd), "%s -arch sm_80 %s -o %s", as, out80, cub);
	run_or_fail(cmd);
	unlink(out);
	unlink(out80);
	unlink(cub);
}

/* The whole check for a cubin that carries one module's PTX. */
static void check_recovery(const char *name, const char *expect_opts)
{
	uint8_t *buf;
	size_t size;
	struct cubin_embedded_ptx e;
	char why[256], ptx[512], re[512], cmd[2048];
	read_ptx(name, &buf, &size, &e);
	if (!e.text)
		fail_msg("%s: no embedded PTX (%u sections)", name, e.sections);
	assert_int_equal(e.sections, 1);
	assert_true(e.has_options);
	assert_string_equal(e.opts.tool, "ptxas");
	if (!strstr(e.opts.raw, expect_opts))
		fail_msg("%s: recorded options \"%s\" lack \"%s\"", name, e.opts.raw, expect_opts);
	assert_string_equal(e.opts.unsupported, "");
	assert_int_equal(e.opts.sm, 90);
	assert_int_equal(e.sm, 90);
	assert_null(strstr(e.text, ".loc\t")); /* debug directives are not kept */
	int rc = cubin_embedded_ptx_matches(buf, size, e.text, e.len, why, sizeof(why));
	if (rc != 0)
		fail_msg("%s: the embedded PTX is not the cubin's code: %s", name, why);
	const char *as = ptxas();
	if (!as) {
		cubin_embedded_ptx_free(&e);
		free(buf);
		skip();
	}
	write_or_fail(tmp_path(ptx, sizeof(ptx), name, ".ptx"), e.text, e.len);
	tmp_path(re, sizeof(re), name, ".re.cubin");
	char opts[256];
	assert_int_equal(cubin_asm_options_ptxas(&e.opts, opts, sizeof(opts)), 0);
	snprintf(cmd, sizeof(cmd), "%s %s %s -o %s", as, opts, ptx, re);
	run_or_fail(cmd);
	size_t resize;
	uint8_t *again = read_file_or_fail(re, &resize);
	same_text(name, buf, size, again, resize);
	instrument_and_assemble(as, name, ptx, "kcount");
	instrument_and_assemble(as, name, ptx, "memtrace");
	unlink(ptx);
	unlink(re);
	free(again);
	cubin_embedded_ptx_free(&e);
	free(buf);
}

static void nvcc_lineinfo(void **state)
{
	(void)state;
	check_recovery("lineinfo.cubin", "-lineinfo");
}

static void ptxas_loc(void **state)
{
	(void)state;
	check_recovery("ptxas_loc.cubin", "-fmad false");
	uint8_t *buf;
	size_t size;
	struct cubin_embedded_ptx e;
	read_ptx("ptxas_loc.cubin", &buf, &size, &e);
	assert_int_equal(e.opts.opt_level, 2);
	assert_int_equal(e.opts.fmad, 0);
	assert_int_equal(e.opts.lineinfo, 0); /* the .loc lines alone made ptxas keep the PTX */
	cubin_embedded_ptx_free(&e);
	free(buf);
}

/* -fmad false without the option (nofma.ptx, float multiplies and adds without rounding
 * modifiers, assembled with -fmad=false): the recovered PTX with .rn on every float add, sub and
 * mul (ptx_no_contraction, what the shim does since the JIT has no -fmad for PTX), assembled
 * with fmad on, gives the cubin's machine code; the same text without .rn gives other code. */
static void fmad_false_in_the_ptx(void **state)
{
	(void)state;
	uint8_t *buf;
	size_t size, rsize, olen;
	struct cubin_embedded_ptx e;
	char ptx[512], re[512], cmd[2048], opts[256];
	char *rn;
	read_ptx("nofma.cubin", &buf, &size, &e);
	assert_non_null(e.text);
	assert_int_equal(e.opts.fmad, 0);
	assert_int_equal(ptx_no_contraction(e.text, e.len, &rn, &olen), 6);
	assert_non_null(strstr(rn, "\nmul.rn.f32 "));
	assert_non_null(strstr(rn, "\nsub.rn.f32 "));
	assert_non_null(strstr(rn, "\n@!%p1 mul.rn.f64 "));
	assert_non_null(strstr(rn, "\nmul.wide.s32 ")); /* integers untouched */
	const char *as = ptxas();
	if (!as) {
		free(rn);
		cubin_embedded_ptx_free(&e);
		free(buf);
		skip();
	}
	e.opts.fmad = 1; /* ptxas's default: the PTX says it now */
	assert_int_equal(cubin_asm_options_ptxas(&e.opts, opts, sizeof(opts)), 0);
	assert_non_null(strstr(opts, "-fmad=true"));
	write_or_fail(tmp_path(ptx, sizeof(ptx), "fmad", ".ptx"), rn, olen);
	tmp_path(re, sizeof(re), "fmad", ".cubin");
	snprintf(cmd, sizeof(cmd), "%s %s %s -o %s", as, opts, ptx, re);
	run_or_fail(cmd);
	uint8_t *again = read_file_or_fail(re, &rsize);
	same_text("nofma.cubin (.rn)", buf, size, again, rsize);
	free(again);
	/* the check can fail: without .rn, fmad on fuses the multiplies and the adds */
	write_or_fail(ptx, e.text, e.len);
	run_or_fail(cmd);
	again = read_file_or_fail(re, &rsize);
	struct cubin_elf a, b;
	struct cubin_elf_section sa, sb;
	assert_int_equal(cubin_elf_open(&a, buf, size), 0);
	assert_int_equal(cubin_elf_open(&b, again, rsize), 0);
	assert_int_equal(cubin_elf_section_by_name(&a, ".text.nofma_k", &sa), 0);
	assert_int_equal(cubin_elf_section_by_name(&b, ".text.nofma_k", &sb), 0);
	assert_true(sa.size != sb.size || memcmp(sa.data, sb.data, sa.size) != 0);
	unlink(ptx);
	unlink(re);
	free(again);
	free(rn);
	cubin_embedded_ptx_free(&e);
	free(buf);
}

static void nvrtc_lineinfo(void **state)
{
	(void)state;
	check_recovery("nvrtc_lineinfo.cubin", "-lineinfo");
}

static void nvjitlink_one(void **state)
{
	(void)state;
	check_recovery("nvjitlink.cubin", "-arch sm_90");
}

/* NVRTC without -lineinfo: no PTX in the cubin, but the note says why (no -lineinfo). */
static void nvrtc_no_lineinfo(void **state)
{
	(void)state;
	uint8_t *buf;
	size_t size;
	struct cubin_embedded_ptx e;
	read_ptx("nvrtc_arch.cubin", &buf, &size, &e);
	assert_int_equal(e.sections, 0);
	assert_null(e.text);
	assert_true(e.has_options);
	assert_int_equal(e.opts.lineinfo, 0);
	assert_int_equal(e.opts.sm, 90);
	/* the PTX NVRTC offered beside it is that cubin's code */
	size_t plen;
	uint8_t *ptx = fixture("nvrtc_arch.ptx", &plen);
	char why[256];
	int rc = cubin_embedded_ptx_matches(buf, size, (const char *)ptx, plen, why, sizeof(why));
	if (rc != 0)
		fail_msg("nvrtc_arch.ptx is not nvrtc_arch.cubin's code: %s", why);
	free(ptx);
	free(buf);
}

/* Two PTX inputs linked: one section each, no single module text. */
static void nvjitlink_two(void **state)
{
	(void)state;
	uint8_t *buf;
	size_t size;
	struct cubin_embedded_ptx e;
	read_ptx("nvjitlink2.cubin", &buf, &size, &e);
	assert_int_equal(e.sections, 2);
	assert_null(e.text);
	assert_true(e.has_options);
	assert_false(e.opts.disagree);
	assert_int_equal(e.opts.relocatable, 1);
	/* each input's PTX: one has rtc_k1, the other rtc_k2, each a whole module */
	assert_non_null(e.parts);
	assert_non_null(strstr(e.parts[0], ".version"));
	assert_non_null(strstr(e.parts[1], ".version"));
	assert_true((strstr(e.parts[0], ".entry rtc_k1") && strstr(e.parts[1], ".entry rtc_k2")) ||
		    (strstr(e.parts[0], ".entry rtc_k2") && strstr(e.parts[1], ".entry rtc_k1")));
	cubin_embedded_ptx_free(&e);
	free(buf);
}

/* A cubin without line info from nvcc (kernels.cubin) carries neither. */
static void plain_cubin(void **state)
{
	(void)state;
	uint8_t *buf;
	size_t size;
	struct cubin_embedded_ptx e;
	read_ptx("kernels.cubin", &buf, &size, &e);
	assert_int_equal(e.sections, 0);
	assert_null(e.text);
	free(buf);
}

/* PTX that is not the cubin's: another module's text is refused, with the reason. */
static void mismatch(void **state)
{
	(void)state;
	uint8_t *buf;
	size_t size, plen;
	char why[256];
	buf = fixture("lineinfo.cubin", &size);
	uint8_t *ptx = fixture("nvrtc_arch.ptx", &plen);
	assert_int_equal(cubin_embedded_ptx_matches(buf, size, (const char *)ptx, plen, why,
						    sizeof(why)), 1);
	assert_non_null(strstr(why, "kernel"));
	free(ptx);
	free(buf);
}

/* A parameter of another size: the refusal names it, with both sizes and offsets. */
static void mismatch_names_the_parameter(void **state)
{
	(void)state;
	uint8_t *buf;
	size_t size;
	char why[256];
	struct cubin_embedded_ptx e;
	read_ptx("lineinfo.cubin", &buf, &size, &e);
	assert_non_null(e.text);
	char *u64 = strstr(e.text, ".param .u64 ");
	assert_non_null(u64);
	memcpy(u64, ".param .u32 ", 12); /* cubin_axpy(float a, const float *x, ...): x, 8 bytes -> 4 */
	assert_int_equal(cubin_embedded_ptx_matches(buf, size, e.text, e.len, why, sizeof(why)), 1);
	if (!strstr(why, "has other parameters in the PTX (parameter 1: 8 bytes at 8 in the cubin, "
			 "4 at 4 in the PTX)"))
		fail_msg("unexpected reason: %s", why);
	cubin_embedded_ptx_free(&e);
	free(buf);
}

/* Options as ptxas spells them, and the ones cubpf does not know. */
static void options(void **state)
{
	(void)state;
	static const uint8_t note_hdr[] = {12, 0, 0, 0, 0, 0, 0, 0, 0xd0, 7, 0, 0};
	uint8_t desc[160] = {2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 7, 0, 0, 0, 7, 0, 0, 0, 8, 0, 0, 0};
	const char *strs = "\0ptxas\0\0-O 1 --fmad=false -maxrregcount 32 -v -ewp";
	memcpy(desc + 24, strs, 8 + strlen(strs + 8) + 1);
	uint32_t dsz = 24 + 8 + (uint32_t)strlen(strs + 8) + 1;
	/* A minimal ELF: header, the note section, the name table. */
	static const char names[] = "\0.note.nv.tkinfo\0.shstrtab";
	uint8_t img[1024] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
	size_t note_at = 64, note_len = sizeof(note_hdr) + 12 + ((dsz + 3) & ~3u);
	size_t names_at = note_at + note_len, sh_at = (names_at + sizeof(names) + 7) & ~7u;
	memcpy(img + note_at, note_hdr, sizeof(note_hdr));
	img[note_at + 4] = (uint8_t)dsz;
	memcpy(img + note_at + 12, "NVIDIA Corp", 12);
	memcpy(img + note_at + 24, desc, dsz);
	memcpy(img + names_at, names, sizeof(names));
	img[18] = 190;                                  /* EM_CUDA */
	img[40] = (uint8_t)sh_at;                       /* e_shoff */
	img[58] = 64, img[60] = 3, img[62] = 2;         /* shentsize, shnum, shstrndx */
	uint8_t *sh = img + sh_at + 64;
	sh[0] = 1, sh[4] = 7;                           /* .note.nv.tkinfo, SHT_NOTE */
	sh[24] = (uint8_t)note_at, sh[32] = (uint8_t)note_len;
	sh += 64;
	sh[0] = 17, sh[4] = 3;                          /* .shstrtab, SHT_STRTAB */
	sh[24] = (uint8_t)names_at, sh[32] = sizeof(names);
	struct cubin_embedded_ptx e;
	char err[256];
	assert_int_equal(cubin_embedded_ptx(img, sh_at + 3 * 64, &e, err, sizeof(err)), 0);
	assert_true(e.has_options);
	assert_int_equal(e.opts.opt_level, 1);
	assert_int_equal(e.opts.fmad, 0);
	assert_int_equal(e.opts.maxrregcount, 32);
	assert_string_equal(e.opts.unsupported, "-ewp"); /* -v is a diagnostic: known */
	/* damaged notes: a descriptor past the section, string offsets past the descriptor */
	img[note_at + 5] = 0x10;
	assert_int_equal(cubin_embedded_ptx(img, sh_at + 3 * 64, &e, err, sizeof(err)), 0);
	assert_false(e.has_options);
	img[note_at + 5] = 0;
	img[note_at + 24 + 8] = 0xf0; /* the tool name's offset */
	assert_int_equal(cubin_embedded_ptx(img, sh_at + 3 * 64, &e, err, sizeof(err)), 0);
	assert_false(e.has_options);
}

/* nvlink beside ptxas (the toolkit's bin folder). */
static const char *nvlink(const char *as, char *buf, size_t n)
{
	const char *slash = strrchr(as, '/');
	snprintf(buf, n, "%.*snvlink", slash ? (int)(slash - as + 1) : 0, as);
	if (access(buf, X_OK)) {
		fprintf(stderr, "SKIP: nvlink not found beside ptxas (%s)\n", buf);
		return NULL;
	}
	return buf;
}

/* One object of the -rdc fixture: its PTX written to dir/objI.ptx, ptxas's options. */
static void rdc_object(struct cubin_image *img, size_t f, const char *base, size_t i,
		       char *opts, size_t optlen)
{
	const struct cubin_fatbin *fb = &img->fatbins[f];
	const uint8_t *data;
	size_t size;
	char path[600], err[256];
	int have_ptx = 0, have_opts = 0;
	for (size_t e = fb->first_entry; e < fb->first_entry + fb->entry_count; e++) {
		assert_int_equal(cubin_entry_data(img, e, &data, &size), 0);
		if (img->entries[e].kind == CUBIN_ENTRY_PTX) {
			snprintf(path, sizeof(path), "%s%zu.ptx", base, i);
			write_or_fail(path, data, strnlen((const char *)data, size));
			have_ptx = 1;
		} else if (img->entries[e].kind == CUBIN_ENTRY_ELF) {
			struct cubin_embedded_ptx emb;
			assert_true(cubin_embedded_ptx(data, size, &emb, err, sizeof(err)) >= 0);
			assert_true(emb.has_options);
			assert_int_equal(cubin_asm_options_ptxas(&emb.opts, opts, optlen), 0);
			have_opts = 1;
		}
	}
	assert_true(have_ptx && have_opts);
}

/* An -rdc program of two objects calling each other's device functions (rdc2_app): the
 * objects' PTX, assembled with ptxas's recorded options and linked by nvlink, gives the
 * device-linked SASS the program registers; instrumented (the maps .extern, defined by one
 * module of their own, as the shim does), the objects assemble and link for sm_90 and sm_80. */
static void rdc_objects(void **state)
{
	(void)state;
	uint8_t *buf;
	size_t size, nobj = 0;
	char base[512], cmd[4096], opts[256], nl[512], objs[2048] = "", linked[600];
	struct cubin_image *img = open_fixture("rdc2_app", &buf, &size);
	const char *as = ptxas(), *link = as ? nvlink(as, nl, sizeof(nl)) : NULL;
	if (!link) {
		cubin_image_free(img);
		free(buf);
		skip();
	}
	tmp_path(base, sizeof(base), "rdc", "-obj");
	const uint8_t *lsass = NULL;
	size_t lsize = 0;
	for (size_t f = 0; f < img->fatbin_count; f++) {
		if (!strcmp(img->fatbins[f].section, ".nv_fatbin")) {
			assert_int_equal(cubin_entry_data(img, img->fatbins[f].first_entry, &lsass,
							  &lsize), 0);
			continue;
		}
		rdc_object(img, f, base, nobj, opts, sizeof(opts));
		snprintf(cmd, sizeof(cmd), "%s %s %s%zu.ptx -o %s%zu.o", as, opts, base, nobj, base,
			 nobj);
		run_or_fail(cmd);
		snprintf(objs + strlen(objs), sizeof(objs) - strlen(objs), " %s%zu.o", base, nobj);
		nobj++;
	}
	assert_int_equal(nobj, 3); /* rdc_part, rdc_lib, rdc_host */
	assert_non_null(lsass);
	snprintf(linked, sizeof(linked), "%s-linked.cubin", base);
	snprintf(cmd, sizeof(cmd), "%s -arch=sm_90 %s -o %s", link, objs, linked);
	run_or_fail(cmd);
	size_t rsize;
	uint8_t *relinked = read_file_or_fail(linked, &rsize);
	same_text("rdc2_app", lsass, lsize, relinked, rsize);
	free(relinked);
	/* instrumented: every object with the maps .extern, one module defining them */
	for (int sm = 90; sm >= 80; sm -= 10) {
		snprintf(cmd, sizeof(cmd),
			 "set -e; cd $(dirname %s); b=$(basename %s); o=''; "
			 "printf '.version 7.0\\n.target sm_50\\n.address_size 64\\n"
			 ".visible .const .align 8 .u64 __cubpf_map_0;\\n' > $b-defs.ptx; "
			 "%s -c -arch sm_%d $b-defs.ptx -o $b-defs.o; "
			 "for i in 0 1 2; do %s/bin/cubpf ptx -p %s/probes/kcount.bpf.o $b$i.ptx "
			 "-o $b$i.i.ptx 2>/dev/null || cp $b$i.ptx $b$i.i.ptx; "
			 "sed -i -e 's/^\\.visible \\.const \\(\\.align 8 \\.u64 __cubpf_\\)/"
			 ".extern  .const \\1/' -e 's/^\\.target sm_90/.target sm_%d/' $b$i.i.ptx; "
			 "%s -c -arch sm_%d $b$i.i.ptx -o $b$i.i.o; o=\"$o $b$i.i.o\"; done; "
			 "grep -q '^.extern  .const .align 8 .u64 __cubpf_map_0;' ${b}0.i.ptx; "
			 "%s -arch=sm_%d $b-defs.o $o -o $b-inst.cubin",
			 base, base, as, sm,
			 getenv("CUBPF_BUILD") ? getenv("CUBPF_BUILD") : "build",
			 getenv("CUBPF_BUILD") ? getenv("CUBPF_BUILD") : "build", sm, as, sm, link, sm);
		run_or_fail(cmd);
	}
	snprintf(cmd, sizeof(cmd), "rm -f %s*", base);
	run_or_fail(cmd);
	cubin_image_free(img);
	free(buf);
}

/* PTX as LLVM writes it (Triton, XLA): `.ptr .global .align 1` parameters keep their natural
 * alignment (the .align is the pointee's), and sm_90a PTX in a cubin whose ELF header says
 * sm_90 is that cubin's code.  Both were refused as "other parameters" and "targets sm_90a". */
static void llvm_style(void **state)
{
	(void)state;
	uint8_t *buf;
	size_t size;
	struct cubin_embedded_ptx e;
	char why[256] = "", err[256];
	read_ptx("llvm_style.cubin", &buf, &size, &e);
	if (!e.text)
		fail_msg("llvm_style.cubin: no embedded PTX");
	struct cubin_kernels k;
	assert_int_equal(cubin_ptx_kernels(e.text, e.len, &k, err, sizeof(err)), 0);
	assert_int_equal(k.count, 1);
	const uint32_t offsets[] = { 0, 8, 16, 24, 32, 40 };
	assert_int_equal(k.kernels[0].param_count, 6);
	for (unsigned i = 0; i < 6; i++)
		assert_int_equal(k.kernels[0].params[i].offset, offsets[i]);
	assert_true(k.kernels[0].params[0].is_pointer);
	cubin_kernels_free(&k);
	if (cubin_embedded_ptx_matches(buf, size, e.text, e.len, why, sizeof(why)))
		fail_msg("llvm_style.cubin: %s", why);
	cubin_embedded_ptx_free(&e);
	free(buf);
}

/* Issue 30: an XLA fusion whose first parameter is a TMA descriptor aligned to 64: ptxas puts it
 * at offset 48 of the parameters (their bank starts at 0x210, the descriptor at 0x240), which
 * offsets counted from 0 in the PTX do not show.  The kept PTX is the cubin's code all the same,
 * the verdict takes it, and instrumented it assembles for sm_90a. */
static void xla_tma_parameters(void **state)
{
	(void)state;
	uint8_t *buf;
	size_t size;
	struct cubin_embedded_ptx e;
	struct cubin_kernels k;
	char why[256] = "", err[256];
	read_ptx("xla_tma.cubin", &buf, &size, &e);
	assert_non_null(e.text);
	assert_int_equal(cubin_elf_kernels(buf, size, &k, err, sizeof(err)), 0);
	assert_int_equal(k.kernels[0].params[0].offset, 48);
	assert_int_equal(k.kernels[0].params[1].offset, 176);
	cubin_kernels_free(&k);
	if (cubin_embedded_ptx_matches(buf, size, e.text, e.len, why, sizeof(why)))
		fail_msg("xla_tma.cubin: %s", why);
	assert_int_equal(ptx_embedded_verdict(buf, size, &e, why, sizeof(why)), 1);
	const char *as = ptxas();
	if (as) {
		char ptx[512], out[512], cub[512], cmd[8192];
		const char *build = getenv("CUBPF_BUILD") ? getenv("CUBPF_BUILD") : "build";
		write_or_fail(tmp_path(ptx, sizeof(ptx), "xla_tma", ".ptx"), e.text, e.len);
		tmp_path(out, sizeof(out), "xla_tma", ".kcount.ptx");
		tmp_path(cub, sizeof(cub), "xla_tma", ".cubin");
		snprintf(cmd, sizeof(cmd), "%s/bin/cubpf ptx -p %s/probes/kcount.bpf.o %s -o %s && "
			 "%s -arch sm_90a %s -o %s", build, build, ptx, out, as, out, cub);
		run_or_fail(cmd);
		unlink(ptx);
		unlink(out);
		unlink(cub);
	}
	cubin_embedded_ptx_free(&e);
	free(buf);
	if (!as)
		skip();
}

/* ---- ptx_fusable_adds against ptxas (issue 30) ---------------------------------------------
 * Each body computes %f10 from %f1..%f3 (floats loaded from global memory) in one of the ways a
 * product can reach an add.  The analysis is sound when ptxas -fmad=true and -fmad=false give
 * the same machine code for every text it counts no pair in: every case is assembled both ways
 * and "the code differs" must imply "counted".  The expected counts pin the analysis down. */
struct fusable_case {
	const char *name;
	int want;           /* ptx_fusable_adds */
	const char *body;
};

static const struct fusable_case fusable_cases[] = {
	{ "add_only", 0, "add.f32 %f4, %f1, %f2;\n add.f32 %f10, %f4, %f3;\n" },
	{ "mul_add", 1, "mul.f32 %f4, %f1, %f2;\n add.f32 %f10, %f4, %f3;\n" },
	{ "mul_sub_both", 2, "mul.f32 %f4, %f1, %f2;\n sub.f32 %f5, %f3, %f4;\n"
			     " sub.ftz.f32 %f10, %f4, %f5;\n" },
	{ "mul_rn_add", 0, "mul.rn.f32 %f4, %f1, %f2;\n add.f32 %f10, %f4, %f3;\n" },
	{ "mul_add_rn", 0, "mul.f32 %f4, %f1, %f2;\n add.rn.f32 %f10, %f4, %f3;\n" },
	{ "mul_mul", 0, "mul.f32 %f4, %f1, %f2;\n mul.f32 %f10, %f4, %f3;\n" },
	{ "fma_only", 0, "fma.rn.f32 %f10, %f1, %f2, %f3;\n" },
	/* conservative: the product is stored, and a load (the adds' operands) may see it */
	{ "add_then_mul", 1, "add.f32 %f4, %f1, %f2;\n mul.f32 %f10, %f4, %f3;\n" },
	{ "via_mov", 1, "mul.f32 %f4, %f1, %f2;\n mov.f32 %f5, %f4;\n add.f32 %f10, %f5, %f3;\n" },
	{ "via_bits", 1, "mul.f32 %f4, %f1, %f2;\n mov.b32 %r2, %f4;\n mov.b32 %f5, %r2;\n"
			 " sub.f32 %f10, %f3, %f5;\n" },
	{ "via_vector", 1, "mul.f32 %f4, %f1, %f2;\n mov.b64 %rd8, {%f4, %f3};\n"
			   " mov.b64 {%f5, %f6}, %rd8;\n add.f32 %f10, %f5, %f6;\n" },
	{ "via_neg", 1, "mul.f32 %f4, %f1, %f2;\n neg.f32 %f5, %f4;\n add.f32 %f10, %f5, %f3;\n" },
	{ "via_selp", 1, "setp.gt.f32 %p1, %f1, 0f00000000;\n mul.f32 %f4, %f1, %f2;\n"
			 " selp.f32 %f5, %f4, %f3, %p1;\n add.f32 %f10, %f5, %f2;\n" },
	{ "via_local", 1, "mul.f32 %f4, %f1, %f2;\n st.local.f32 [loc], %f4;\n"
			  " ld.local.f32 %f5, [loc];\n add.f32 %f10, %f5, %f3;\n" },
	{ "via_global", 1, "mul.f32 %f4, %f1, %f2;\n st.global.f32 [%rd7], %f4;\n"
			   " ld.global.f32 %f5, [%rd7];\n add.f32 %f10, %f5, %f3;\n" },
	{ "predicated", 1, "setp.gt.f32 %p1, %f1, 0f00000000;\n mov.f32 %f10, %f3;\n"
			   " mul.f32 %f4, %f1, %f2;\n @%p1 add.f32 %f10, %f4, %f3;\n" },
	{ "loop", 1, "mov.f32 %f4, %f3;\n mov.f32 %f10, %f3;\n$L__loop:\n"
		     " add.f32 %f10, %f4, %f2;\n mul.f32 %f4, %f10, %f1;\n"
		     " setp.lt.f32 %p1, %f10, 0f42C80000;\n @%p1 bra $L__loop;\n" },
	{ "f16x2", 1, "mov.b32 %r2, %f1;\n mov.b32 %r3, %f2;\n mul.f16x2 %r4, %r2, %r3;\n"
		      " add.f16x2 %r5, %r4, %r3;\n mov.b32 %f10, %r5;\n" },
	{ "f64", 1, "cvt.f64.f32 %fd1, %f1;\n cvt.f64.f32 %fd2, %f2;\n mul.f64 %fd3, %fd1, %fd2;\n"
		    " add.f64 %fd4, %fd3, %fd1;\n cvt.rn.f32.f64 %f10, %fd4;\n" },
	{ "comments", 0, "// mul.f32 %f4, %f1, %f2;\n /* mul.f32 %f4, %f1, %f2; */"
			 " add.f32 %f4, %f1, %f2;\n add.f32 %f10, %f4, %f3;\n" },
	{ "triton_add", 0, "ld.global.v2.b32 {%r6, %r7}, [%rd6];\n mov.b32 %f4, %r6;\n"
			   " mov.b32 %f5, %r7;\n add.f32 %f6, %f4, %f5;\n add.f32 %f10, %f6, %f1;\n" },
};

static char *fusable_kernel(const char *body)
{
	static const char head[] =
		".version 8.0\n.target sm_90\n.address_size 64\n\n"
		".visible .entry fusable_k(\n\t.param .u64 fusable_k_p0,\n\t.param .u64 fusable_k_p1\n)\n"
		"{\n\t.local .align 4 .b8 loc[16];\n\t.reg .f32 %f<16>;\n\t.reg .b32 %r<16>;\n"
		"\t.reg .f64 %fd<8>;\n\t.reg .b64 %rd<16>;\n\t.reg .pred %p<4>;\n"
		" ld.param.u64 %rd1, [fusable_k_p0];\n ld.param.u64 %rd2, [fusable_k_p1];\n"
		" cvta.to.global.u64 %rd3, %rd1;\n cvta.to.global.u64 %rd4, %rd2;\n"
		" mov.u32 %r1, %tid.x;\n mul.wide.u32 %rd5, %r1, 16;\n add.s64 %rd6, %rd3, %rd5;\n"
		" add.s64 %rd7, %rd4, %rd5;\n ld.global.f32 %f1, [%rd6];\n"
		" ld.global.f32 %f2, [%rd6+4];\n ld.global.f32 %f3, [%rd6+8];\n";
	static const char tail[] = " st.global.f32 [%rd7+8], %f10;\n ret;\n}\n";
	size_t n = strlen(head) + strlen(body) + strlen(tail) + 1;
	char *t = malloc(n);
	assert_non_null(t);
	snprintf(t, n, "%s %s%s", head, body, tail);
	return t;
}

/* The kernel's machine code assembled with -fmad=`fmad` (malloc'ed), its size in *size. */
static uint8_t *fusable_text(const char *as, const char *ptx, const char *fmad, size_t *size)
{
	char cub[512], cmd[2048];
	tmp_path(cub, sizeof(cub), "fusable", fmad);
	snprintf(cmd, sizeof(cmd), "%s -arch sm_90 -fmad=%s %s -o %s", as, fmad, ptx, cub);
	run_or_fail(cmd);
	size_t n;
	uint8_t *buf = read_file_or_fail(cub, &n);
	unlink(cub);
	struct cubin_elf e;
	struct cubin_elf_section sec;
	assert_int_equal(cubin_elf_open(&e, buf, n), 0);
	assert_int_equal(cubin_elf_section_by_name(&e, ".text.fusable_k", &sec), 0);
	uint8_t *text = malloc(sec.size);
	assert_non_null(text);
	memcpy(text, sec.data, sec.size);
	*size = sec.size;
	free(buf);
	return text;
}

static void fusable_adds_are_what_fmad_changes(void **state)
{
	(void)state;
	const char *as = ptxas();
	unsigned differ = 0, same = 0;
	char ptx[512];
	tmp_path(ptx, sizeof(ptx), "fusable", ".ptx");
	for (size_t i = 0; i < sizeof(fusable_cases) / sizeof(fusable_cases[0]); i++) {
		const struct fusable_case *c = &fusable_cases[i];
		char *text = fusable_kernel(c->body);
		int got = ptx_fusable_adds(text, strlen(text));
		if (got != c->want)
			fail_msg("%s: %d fusable adds, want %d", c->name, got, c->want);
		if (!as) {
			free(text);
			continue;
		}
		write_or_fail(ptx, text, strlen(text));
		size_t on_size, off_size;
		uint8_t *on = fusable_text(as, ptx, "true", &on_size);
		uint8_t *off = fusable_text(as, ptx, "false", &off_size);
		bool changed = on_size != off_size || memcmp(on, off, on_size) != 0;
		if (changed && got == 0)
			fail_msg("%s: -fmad changes the machine code, but no fusable add was counted",
				 c->name);
		differ += changed;
		same += !changed;
		free(on);
		free(off);
		free(text);
	}
	unlink(ptx);
	if (!as)
		skip();
	print_message("fusable adds: %u cases where -fmad changed the code (all counted), %u where "
		      "it did not\n", differ, same);
	assert_true(differ >= 5); /* the check can fail: ptxas does fuse what is counted */
}

size_t embedded_tests(struct CMUnitTest *out)
{
	const struct CMUnitTest t[] = {
		cmocka_unit_test(nvcc_lineinfo),  cmocka_unit_test(ptxas_loc),
		cmocka_unit_test(nvrtc_lineinfo), cmocka_unit_test(nvjitlink_one),
		cmocka_unit_test(nvrtc_no_lineinfo), cmocka_unit_test(nvjitlink_two),
		cmocka_unit_test(plain_cubin),    cmocka_unit_test(mismatch), cmocka_unit_test(mismatch_names_the_parameter),
		cmocka_unit_test(options),        cmocka_unit_test(rdc_objects),
		cmocka_unit_test(fmad_false_in_the_ptx), cmocka_unit_test(llvm_style),
		cmocka_unit_test(fusable_adds_are_what_fmad_changes),
		cmocka_unit_test(xla_tma_parameters),
	};
	memcpy(out, t, sizeof(t));
	return sizeof(t) / sizeof(t[0]);
}
