/* Loading eBPF ELF objects the way libbpf does: programs by section name, BTF-defined maps
 * (.maps) and legacy ones (maps), global variables as array maps, map relocations and
 * bpf-to-bpf calls (called functions appended to each program).  The ELF is read with cubin/'s
 * bounds-checked reader; every damaged input ends in an error message. */
#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cubin/cubin.h"
#include "vm/btf.h"

#ifndef EM_BPF
#define EM_BPF 247
#endif

struct map_src {
	size_t shndx;         /* the section the map lives in */
	uint64_t off;         /* offset of its definition there (0 for globals) */
	bool global;          /* .rodata/.data/.bss: the section itself is the map */
};

struct piece {                /* a function copied into the program being built */
	size_t shndx;
	uint32_t sec_start, cnt;  /* in instructions, within its section */
	uint32_t out_start;       /* where it starts in the program */
};

struct loader {
	struct cubin_elf elf;
	struct cubin_elf_section symtab;
	size_t nsyms;
	struct vm_btf btf;
	bool has_btf;
	struct vm_object *obj;
	struct map_src *msrc;
	char *err;
	size_t errlen;
	/* the program being built */
	struct bpf_insn *out;
	uint32_t out_cnt, out_cap;
	struct piece *pieces;
	uint32_t npieces;
};

#define FAIL(ld, ...) (vm_errf((ld)->err, (ld)->errlen, __VA_ARGS__), -1)

static int elf_fail(struct loader *ld)
{
	return FAIL(ld, "damaged ELF: %s", ld->elf.error);
}

/* ---- maps ------------------------------------------------------------------------------------ */

static struct vm_map_def *add_map(struct loader *ld, const char *name, size_t shndx, uint64_t off,
				  bool global)
{
	struct vm_object *o = ld->obj;
	struct vm_map_def *m = realloc(o->maps, (o->map_cnt + 1) * sizeof(*m));
	struct map_src *s = m ? realloc(ld->msrc, (o->map_cnt + 1) * sizeof(*s)) : NULL;
	if (m)
		o->maps = m;
	if (s)
		ld->msrc = s;
	if (!m || !s) {
		(void)FAIL(ld, "out of memory");
		return NULL;
	}
	m = &o->maps[o->map_cnt];
	memset(m, 0, sizeof(*m));
	snprintf(m->name, sizeof(m->name), "%s", name);
	ld->msrc[o->map_cnt] = (struct map_src){shndx, off, global};
	o->map_cnt++;
	return m;
}

/* Offset of the symbol `name` defined in section `shndx`. */
static int symbol_offset(struct loader *ld, size_t shndx, const char *name, uint64_t *off)
{
	for (size_t i = 0; i < ld->nsyms; i++) {
		struct cubin_elf_symbol s;
		if (cubin_elf_symbol(&ld->elf, &ld->symtab, i, &s) < 0)
			return elf_fail(ld);
		if (s.shndx == shndx && !strcmp(s.name, name)) {
			*off = s.value;
			return 0;
		}
	}
	return FAIL(ld, "map '%s' is in .BTF but has no symbol in .maps", name);
}

static int btf_maps(struct loader *ld, const struct cubin_elf_section *sec)
{
	if (!ld->has_btf)
		return FAIL(ld, "the object defines maps in .maps but has no .BTF section (build with "
			    "clang -g)");
	int ds = vm_btf_find_datasec(&ld->btf, ".maps");
	struct btf_type t;
	const uint8_t *extra;
	if (ds < 0 || !vm_btf_type(&ld->btf, (uint32_t)ds, &t, &extra))
		return FAIL(ld, ".BTF has no DATASEC for .maps");
	for (uint32_t i = 0; i < BTF_INFO_VLEN(t.info); i++) {
		struct btf_var_secinfo vs;
		struct btf_type var;
		memcpy(&vs, extra + i * sizeof(vs), sizeof(vs));
		if (!vm_btf_type(&ld->btf, vs.type, &var, NULL) ||
		    BTF_INFO_KIND(var.info) != BTF_KIND_VAR)
			return FAIL(ld, ".BTF: entry %u of .maps is not a variable", i);
		const char *name = vm_btf_name(&ld->btf, var.name_off);
		uint64_t off;
		if (!name)
			return FAIL(ld, ".BTF: map entry %u has no name", i);
		/* clang leaves DATASEC offsets at 0 in objects: the symbol table has them */
		if (symbol_offset(ld, sec->index, name, &off) < 0)
			return -1;
		struct vm_map_def *m = add_map(ld, name, sec->index, off, false);
		if (!m || vm_btf_map_def(&ld->btf, var.type, m, ld->err, ld->errlen) < 0)
			return -1;
		if (!m->type)
			return FAIL(ld, "map '%s' has no type", name);
	}
	return 0;
}

/* Legacy `struct bpf_map_def { type, key_size, value_size, max_entries, map_flags }`. */
static int legacy_maps(struct loader *ld, const struct cubin_elf_section *sec)
{
	for (size_t i = 0; i < ld->nsyms; i++) {
		struct cubin_elf_symbol s;
		if (cubin_elf_symbol(&ld->elf, &ld->symtab, i, &s) < 0)
			return elf_fail(ld);
		if (s.shndx != sec->index || s.type == STT_SECTION || !s.name[0])
			continue;
		uint32_t f[5];
		if (!sec->data || s.value > sec->size || sec->size - s.value < sizeof(f))
			return FAIL(ld, "legacy map '%s' lies outside the maps section", s.name);
		memcpy(f, sec->data + s.value, sizeof(f));
		struct vm_map_def *m = add_map(ld, s.name, sec->index, s.value, false);
		if (!m)
			return -1;
		m->type = f[0], m->key_size = f[1], m->value_size = f[2];
		m->max_entries = f[3], m->flags = f[4];
	}
	return 0;
}

static bool has_prefix(const char *name, const char *p)
{
	size_t n = strlen(p);
	return !strncmp(name, p, n) && (name[n] == 0 || name[n] == '.');
}

static int global_map(struct loader *ld, const struct cubin_elf_section *sec)
{
	enum vm_map_origin origin = has_prefix(sec->name, ".rodata") ? VM_MAP_RODATA
				    : has_prefix(sec->name, ".bss")  ? VM_MAP_BSS
								     : VM_MAP_DATA;
	if (sec->size > (1u << 30))
		return FAIL(ld, "section %s is too large (%llu bytes)", sec->name,
			    (unsigned long long)sec->size);
	struct vm_map_def *m = add_map(ld, sec->name, sec->index, 0, true);
	if (!m)
		return -1;
	m->type = CUBPF_MAP_ARRAY;
	m->key_size = 4;
	m->value_size = (uint32_t)sec->size;
	m->max_entries = 1;
	m->origin = origin;
	if (origin == VM_MAP_RODATA)
		m->flags = BPF_F_RDONLY_PROG;
	if (sec->type != SHT_NOBITS && sec->data) {
		if (!(m->init = malloc(sec->size)))
			return FAIL(ld, "out of memory");
		memcpy(m->init, sec->data, sec->size);
	}
	return 0;
}

static int collect_maps(struct loader *ld)
{
	for (size_t i = 1; i < ld->elf.shnum; i++) {
		struct cubin_elf_section sec;
		if (cubin_elf_section(&ld->elf, i, &sec) < 0)
			return elf_fail(ld);
		int rc = 0;
		if (!strcmp(sec.name, ".maps"))
			rc = btf_maps(ld, &sec);
		else if (!strcmp(sec.name, "maps"))
			rc = legacy_maps(ld, &sec);
		else if ((sec.flags & SHF_ALLOC) && !(sec.flags & SHF_EXECINSTR) && sec.size &&
			 (has_prefix(sec.name, ".rodata") || has_prefix(sec.name, ".data") ||
			  has_prefix(sec.name, ".bss")))
			rc = global_map(ld, &sec);
		if (rc < 0)
			return -1;
	}
	return 0;
}

/* ---- relocation of one program ------------------------------------------------------------- */

static int find_reloc(struct loader *ld, size_t shndx, uint64_t off, struct cubin_elf_reloc *out)
{
	for (size_t i = 1; i < ld->elf.shnum; i++) {
		struct cubin_elf_section rel;
		if (cubin_elf_section(&ld->elf, i, &rel) < 0)
			return elf_fail(ld);
		if (rel.type != SHT_REL || rel.info != shndx)
			continue;
		size_t n = cubin_elf_reloc_count(&ld->elf, &rel);
		for (size_t k = 0; k < n; k++) {
			if (cubin_elf_reloc(&ld->elf, &rel, k, out) < 0)
				return elf_fail(ld);
			if (out->offset == off)
				return 1;
		}
	}
	return 0;
}

static int map_for(struct loader *ld, size_t shndx, uint64_t off, bool *global)
{
	for (uint32_t i = 0; i < ld->obj->map_cnt; i++) {
		const struct map_src *s = &ld->msrc[i];
		if (s->shndx == shndx && (s->global || s->off == off)) {
			*global = s->global;
			return (int)i;
		}
	}
	return -1;
}

static int reloc_lddw(struct loader *ld, struct bpf_insn *in, const struct cubin_elf_reloc *r)
{
	struct cubin_elf_symbol s;
	if (cubin_elf_symbol(&ld->elf, &ld->symtab, r->sym, &s) < 0)
		return elf_fail(ld);
	if (s.shndx == SHN_UNDEF)
		return FAIL(ld, "relocation against undefined symbol '%s' (externs and kfuncs are "
			    "not supported)", s.name);
	bool global = false;
	uint64_t off = s.value + (int64_t)in->imm;
	int map = map_for(ld, s.shndx, s.type == STT_SECTION ? off : s.value, &global);
	if (map < 0)
		return FAIL(ld, "relocation against '%s' which is not a map or global variable",
			    s.name[0] ? s.name : "(section)");
	if (global) {
		if (off > ld->obj->maps[map].value_size)
			return FAIL(ld, "relocation offset %llu past the end of %s",
				    (unsigned long long)off, ld->obj->maps[map].name);
		in[0].src_reg = BPF_PSEUDO_MAP_VALUE;
		in[1].imm = (int32_t)off;
	} else
		in[0].src_reg = BPF_PSEUDO_MAP_FD;
	in[0].imm = map;
	return 0;
}

/* The function (FUNC symbol) of section `shndx` that contains instruction `at`. */
static int func_at(struct loader *ld, size_t shndx, uint32_t at, uint32_t *start, uint32_t *cnt)
{
	struct cubin_elf_section sec;
	if (cubin_elf_section(&ld->elf, shndx, &sec) < 0)
		return elf_fail(ld);
	for (size_t i = 0; i < ld->nsyms; i++) {
		struct cubin_elf_symbol s;
		if (cubin_elf_symbol(&ld->elf, &ld->symtab, i, &s) < 0)
			return elf_fail(ld);
		if (s.shndx != shndx || s.type != STT_FUNC || s.value % 8 || s.size % 8)
			continue;
		if (at >= s.value / 8 && at < (s.value + s.size) / 8 && s.value + s.size <= sec.size) {
			*start = (uint32_t)(s.value / 8);
			*cnt = (uint32_t)(s.size / 8);
			return 0;
		}
	}
	return FAIL(ld, "call target %u in %s is not inside a function", at, sec.name);
}

static int add_piece(struct loader *ld, size_t shndx, uint32_t start, uint32_t cnt)
{
	struct cubin_elf_section sec;
	if (cubin_elf_section(&ld->elf, shndx, &sec) < 0)
		return elf_fail(ld);
	if (!sec.data || !(sec.flags & SHF_EXECINSTR) || (uint64_t)(start + cnt) * 8 > sec.size)
		return FAIL(ld, "code at %u+%u is outside executable section %s", start, cnt,
			    sec.name);
	if ((uint64_t)ld->out_cnt + cnt > VM_MAX_INSNS)
		return FAIL(ld, "program is larger than %u instructions", VM_MAX_INSNS);
	struct piece *p = realloc(ld->pieces, (ld->npieces + 1) * sizeof(*p));
	if (!p)
		return FAIL(ld, "out of memory");
	ld->pieces = p;
	if (ld->out_cnt + cnt > ld->out_cap) {
		uint32_t cap = (ld->out_cnt + cnt) * 2;
		struct bpf_insn *o = realloc(ld->out, cap * sizeof(*o));
		if (!o)
			return FAIL(ld, "out of memory");
		ld->out = o, ld->out_cap = cap;
	}
	memcpy(ld->out + ld->out_cnt, sec.data + (size_t)start * 8, (size_t)cnt * 8);
	ld->pieces[ld->npieces++] = (struct piece){shndx, start, cnt, ld->out_cnt};
	ld->out_cnt += cnt;
	return (int)ld->npieces - 1;
}

/* Returns the piece holding function-containing instruction `at` of section `shndx`. */
static int piece_for(struct loader *ld, size_t shndx, uint32_t at)
{
	for (uint32_t i = 0; i < ld->npieces; i++) {
		const struct piece *p = &ld->pieces[i];
		if (p->shndx == shndx && at >= p->sec_start && at < p->sec_start + p->cnt)
			return (int)i;
	}
	uint32_t start, cnt;
	if (func_at(ld, shndx, at, &start, &cnt) < 0)
		return -1;
	return add_piece(ld, shndx, start, cnt);
}

static int reloc_call(struct loader *ld, uint32_t pi, uint32_t j, const struct cubin_elf_reloc *r,
		      bool has_reloc)
{
	size_t shndx = ld->pieces[pi].shndx;
	int64_t target = (int64_t)ld->pieces[pi].sec_start + j + 1 + ld->out[ld->pieces[pi].out_start + j].imm;
	if (has_reloc) {
		struct cubin_elf_symbol s;
		if (cubin_elf_symbol(&ld->elf, &ld->symtab, r->sym, &s) < 0)
			return elf_fail(ld);
		if (s.shndx == SHN_UNDEF || s.value % 8)
			return FAIL(ld, "call to undefined or misaligned function '%s'", s.name);
		shndx = s.shndx;
		target = (int64_t)(s.value / 8) + ld->out[ld->pieces[pi].out_start + j].imm + 1;
	}
	if (target < 0 || target > UINT32_MAX)
		return FAIL(ld, "call target out of range");
	int tp = piece_for(ld, shndx, (uint32_t)target);
	if (tp < 0)
		return -1;
	const struct piece *p = &ld->pieces[pi], *t = &ld->pieces[tp];
	int64_t dest = (int64_t)t->out_start + (target - t->sec_start);
	ld->out[p->out_start + j].imm = (int32_t)(dest - (p->out_start + j + 1));
	return 0;
}

static int relocate_piece(struct loader *ld, uint32_t pi)
{
	for (uint32_t j = 0; j < ld->pieces[pi].cnt; j++) {
		const struct piece *p = &ld->pieces[pi];
		struct bpf_insn *in = &ld->out[p->out_start + j];
		struct cubin_elf_reloc r;
		int has = find_reloc(ld, p->shndx, (uint64_t)(p->sec_start + j) * 8, &r);
		if (has < 0)
			return -1;
		if (in->code == (BPF_LD | BPF_IMM | BPF_DW)) {
			if (j + 1 >= p->cnt)
				return FAIL(ld, "lddw at the end of a function is truncated");
			if (has && reloc_lddw(ld, in, &r) < 0)
				return -1;
			if (!has && in->src_reg)
				return FAIL(ld, "lddw with src_reg %u has no relocation", in->src_reg);
			j++;
		} else if (in->code == (BPF_JMP | BPF_CALL) && in->src_reg == BPF_PSEUDO_CALL) {
			if (reloc_call(ld, pi, j, &r, has) < 0)
				return -1;
		} else if (has)
			return FAIL(ld, "relocation at instruction %u is not on an lddw or a call",
				    p->sec_start + j);
	}
	return 0;
}

static int build_prog(struct loader *ld, struct vm_prog *prog, size_t shndx, uint32_t start,
		      uint32_t cnt)
{
	ld->out_cnt = 0;
	ld->npieces = 0;
	if (add_piece(ld, shndx, start, cnt) < 0)
		return -1;
	for (uint32_t i = 0; i < ld->npieces; i++)
		if (relocate_piece(ld, i) < 0)
			return -1;
	prog->insns = malloc(ld->out_cnt * sizeof(struct bpf_insn));
	prog->subprogs = malloc(ld->npieces * sizeof(uint32_t));
	if (!prog->insns || !prog->subprogs)
		return FAIL(ld, "out of memory");
	memcpy(prog->insns, ld->out, ld->out_cnt * sizeof(struct bpf_insn));
	for (uint32_t i = 0; i < ld->npieces; i++)
		prog->subprogs[i] = ld->pieces[i].out_start;
	prog->insn_cnt = ld->out_cnt;
	prog->subprog_cnt = ld->npieces;
	return 0;
}

/* ---- programs ------------------------------------------------------------------------------- */

static struct vm_prog *add_prog(struct loader *ld, const char *name, const char *section)
{
	struct vm_object *o = ld->obj;
	struct vm_prog *p = realloc(o->progs, (o->prog_cnt + 1) * sizeof(*p));
	if (!p) {
		(void)FAIL(ld, "out of memory");
		return NULL;
	}
	o->progs = p;
	p = &o->progs[o->prog_cnt++];
	memset(p, 0, sizeof(*p));
	const char *attach = "";
	p->kind = (enum vm_prog_kind)vm_prog_kind_from_section(section, &attach);
	snprintf(p->name, sizeof(p->name), "%s", name);
	snprintf(p->section, sizeof(p->section), "%s", section);
	snprintf(p->attach, sizeof(p->attach), "%s", attach);
	return p;
}

static int section_progs(struct loader *ld, const struct cubin_elf_section *sec)
{
	if (vm_prog_kind_from_section(sec->name, NULL) < 0)
		return FAIL(ld, "section '%s' is not a program kind cubpf knows (kprobe/, "
			    "kretprobe/, memprobe/, blockprobe/, blockretprobe/, syncprobe/, "
			    "fentry/, fexit/, bbprobe/, bbretprobe/, uprobe/, uretprobe/ followed by a name)",
			    sec->name);
	if (sec->size % 8 || !sec->data)
		return FAIL(ld, "section '%s' size %llu is not a multiple of 8", sec->name,
			    (unsigned long long)sec->size);
	int found = 0;
	for (size_t i = 0; i < ld->nsyms; i++) {
		struct cubin_elf_symbol s;
		if (cubin_elf_symbol(&ld->elf, &ld->symtab, i, &s) < 0)
			return elf_fail(ld);
		if (s.shndx != sec->index || s.type != STT_FUNC || s.bind != STB_GLOBAL)
			continue;
		if (s.value % 8 || s.size % 8 || s.size == 0 || s.value + s.size > sec->size)
			return FAIL(ld, "function '%s' lies outside its section %s", s.name, sec->name);
		struct vm_prog *p = add_prog(ld, s.name, sec->name);
		if (!p || build_prog(ld, p, sec->index, (uint32_t)(s.value / 8),
				     (uint32_t)(s.size / 8)) < 0)
			return -1;
		found++;
	}
	if (!found) { /* no symbol: the whole section is one program */
		struct vm_prog *p = add_prog(ld, sec->name, sec->name);
		if (!p || build_prog(ld, p, sec->index, 0, (uint32_t)(sec->size / 8)) < 0)
			return -1;
	}
	return 0;
}

static int collect_progs(struct loader *ld)
{
	for (size_t i = 1; i < ld->elf.shnum; i++) {
		struct cubin_elf_section sec;
		if (cubin_elf_section(&ld->elf, i, &sec) < 0)
			return elf_fail(ld);
		if (!(sec.flags & SHF_EXECINSTR) || !sec.size || !strcmp(sec.name, ".text"))
			continue;
		if (section_progs(ld, &sec) < 0)
			return -1;
	}
	if (!ld->obj->prog_cnt)
		return FAIL(ld, "the object has no programs (SEC(\"kprobe/...\") and the like)");
	return 0;
}

/* ---- the whole object ----------------------------------------------------------------------- */

static int open_elf(struct loader *ld, const void *data, size_t size)
{
	if (cubin_elf_open(&ld->elf, data, size) < 0)
		return FAIL(ld, "not a valid ELF64 object: %s", ld->elf.error);
	if (ld->elf.machine != EM_BPF)
		return FAIL(ld, "not an eBPF object (ELF machine %u, expected %u: build with clang "
			    "-target bpf)", ld->elf.machine, EM_BPF);
	if (ld->elf.type != ET_REL)
		return FAIL(ld, "not a relocatable eBPF object (ELF type %u)", ld->elf.type);
	int rc = cubin_elf_section_by_type(&ld->elf, SHT_SYMTAB, &ld->symtab);
	if (rc != 0)
		return rc < 0 ? elf_fail(ld) : FAIL(ld, "the object has no symbol table");
	ld->nsyms = cubin_elf_symbol_count(&ld->elf, &ld->symtab);
	if (!ld->nsyms && ld->elf.error[0])
		return elf_fail(ld);
	struct cubin_elf_section sec;
	rc = cubin_elf_section_by_name(&ld->elf, ".BTF", &sec);
	if (rc < 0)
		return elf_fail(ld);
	if (rc == 0) {
		if (!sec.data || vm_btf_open(&ld->btf, sec.data, sec.size, ld->err, ld->errlen) < 0)
			return sec.data ? -1 : FAIL(ld, ".BTF has no contents");
		ld->has_btf = true;
	}
	rc = cubin_elf_section_by_name(&ld->elf, "license", &sec);
	if (rc < 0)
		return elf_fail(ld);
	if (rc == 0 && sec.data)
		snprintf(ld->obj->license, sizeof(ld->obj->license), "%.*s",
			 (int)(sec.size < 63 ? sec.size : 63), (const char *)sec.data);
	return 0;
}

int vm_object_load(const void *data, size_t size, const char *name, struct vm_object **out,
		   char *err, size_t errlen)
{
	struct loader ld = {.err = err, .errlen = errlen};
	*out = NULL;
	ld.obj = calloc(1, sizeof(*ld.obj));
	if (!ld.obj)
		return FAIL(&ld, "out of memory");
	const char *base = name ? strrchr(name, '/') : NULL;
	snprintf(ld.obj->name, sizeof(ld.obj->name), "%s", base ? base + 1 : name ? name : "memory");
	int rc = -1;
	if (open_elf(&ld, data, size) == 0 && collect_maps(&ld) == 0 && collect_progs(&ld) == 0)
		rc = 0;
	if (ld.has_btf)
		vm_btf_close(&ld.btf);
	free(ld.msrc);
	free(ld.out);
	free(ld.pieces);
	if (rc < 0)
		vm_object_free(ld.obj);
	else
		*out = ld.obj;
	return rc;
}

uint8_t *vm_read_file(const char *path, size_t *size, char *err, size_t errlen)
{
	/* through cubin's one opener: a FIFO named as a probe object (CUBPF_PROGRAMS=FIFO) used to
	 * block the application's start forever, before the forked checker's timeout applied */
	char why[CUBIN_ERRLEN + 4096];
	uint8_t *buf = cubin_file_read(path, (size_t)1 << 30, size, why, sizeof(why));
	if (!buf)
		vm_errf(err, errlen, "%s", why);
	return buf;
}

int vm_object_load_file(const char *path, struct vm_object **out, char *err, size_t errlen)
{
	*out = NULL;
	size_t n = 0;
	uint8_t *buf = vm_read_file(path, &n, err, errlen);
	if (!buf)
		return -1;
	char msg[VM_ERRLEN];
	int rc = vm_object_load(buf, n, path, out, msg, sizeof(msg));
	if (rc < 0)
		vm_errf(err, errlen, "%s: %s", path, msg);
	free(buf);
	return rc;
}
