/* Bounds-checked ELF64 little-endian reader (see cubin.h).  Nothing is copied: every accessor
 * re-reads the header fields it needs from the image, after checking they lie inside it. */
#include <elf.h>

#include "cubin/cubin.h"
#include "cubin/internal.h"

#define EHDR_SIZE 64u
#define SHDR_SIZE 64u
#define SYM_SIZE 24u
#define REL_SIZE 16u
#define RELA_SIZE 24u

#define FAIL(elf, ...) cubin_fail((elf)->error, sizeof((elf)->error), __VA_ARGS__)

static int check_ident(struct cubin_elf *elf, const uint8_t *p, size_t size)
{
	if (size < EHDR_SIZE)
		return FAIL(elf, "ELF: image of %zu bytes is shorter than an ELF64 header", size);
	if (memcmp(p, ELFMAG, SELFMAG))
		return FAIL(elf, "ELF: bad magic (not an ELF file)");
	if (p[EI_CLASS] != ELFCLASS64)
		return FAIL(elf, "ELF: class %u is not ELF64", p[EI_CLASS]);
	if (p[EI_DATA] != ELFDATA2LSB)
		return FAIL(elf, "ELF: big-endian images are not supported");
	return 0;
}

/* Section count and name-table index, with the extended numbering of sections >= SHN_LORESERVE
 * kept in section 0 (sh_size and sh_link). */
static int read_section_counts(struct cubin_elf *elf, uint16_t shnum, uint16_t shstrndx)
{
	if (elf->shoff == 0) {
		elf->shnum = 0;
		elf->shstrndx = 0;
		return 0;
	}
	if (!cubin_in_bounds(elf->shoff, SHDR_SIZE, elf->size))
		return FAIL(elf, "ELF: section header table at %#llx lies past the end (%zu bytes)",
			    (unsigned long long)elf->shoff, elf->size);
	const uint8_t *sh0 = elf->data + elf->shoff;
	elf->shnum = shnum ? shnum : (size_t)cubin_rd64(sh0 + 32);
	elf->shstrndx = shstrndx == SHN_XINDEX ? cubin_rd32(sh0 + 40) : shstrndx;
	if (elf->shnum > (elf->size - elf->shoff) / elf->shentsize)
		return FAIL(elf, "ELF: %zu section headers at %#llx run past the end (%zu bytes)",
			    elf->shnum, (unsigned long long)elf->shoff, elf->size);
	if (elf->shstrndx >= elf->shnum)
		elf->shstrndx = 0; /* no usable name table: sections are unnamed */
	return 0;
}

int cubin_elf_open(struct cubin_elf *elf, const void *data, size_t size)
{
	const uint8_t *p = data;
	memset(elf, 0, sizeof(*elf));
	elf->data = p;
	elf->size = size;
	if (!p)
		return FAIL(elf, "ELF: no image");
	if (check_ident(elf, p, size))
		return -1;
	elf->osabi = p[EI_OSABI];
	elf->abiversion = p[EI_ABIVERSION];
	elf->type = cubin_rd16(p + 16);
	elf->machine = cubin_rd16(p + 18);
	elf->entry = cubin_rd64(p + 24);
	elf->shoff = cubin_rd64(p + 40);
	elf->flags = cubin_rd32(p + 48);
	elf->shentsize = cubin_rd16(p + 58);
	if (elf->shoff && elf->shentsize < SHDR_SIZE)
		return FAIL(elf, "ELF: section header size %u is below 64", elf->shentsize);
	/* Program headers are not read here, but a table past the end means a truncated file. */
	uint64_t phoff = cubin_rd64(p + 32), phbytes = (uint64_t)cubin_rd16(p + 54) * cubin_rd16(p + 56);
	if (phoff && !cubin_in_bounds(phoff, phbytes, size))
		return FAIL(elf, "ELF: program header table at %#llx runs past the end (%zu bytes)",
			    (unsigned long long)phoff, size);
	return read_section_counts(elf, cubin_rd16(p + 60), cubin_rd16(p + 62));
}

/* The raw header of section `index`, without its name (used to reach string tables). */
static int read_shdr(struct cubin_elf *elf, size_t index, struct cubin_elf_section *s)
{
	if (index >= elf->shnum)
		return FAIL(elf, "ELF: section %zu does not exist (%zu sections)", index, elf->shnum);
	const uint8_t *h = elf->data + elf->shoff + index * elf->shentsize;
	memset(s, 0, sizeof(*s));
	s->index = index;
	s->name = "";
	s->type = cubin_rd32(h + 4);
	s->flags = cubin_rd64(h + 8);
	s->addr = cubin_rd64(h + 16);
	s->offset = cubin_rd64(h + 24);
	s->size = cubin_rd64(h + 32);
	s->link = cubin_rd32(h + 40);
	s->info = cubin_rd32(h + 44);
	s->addralign = cubin_rd64(h + 48);
	s->entsize = cubin_rd64(h + 56);
	if (s->type == SHT_NOBITS || s->type == SHT_NULL)
		return 0;
	if (!cubin_in_bounds(s->offset, s->size, elf->size))
		return FAIL(elf, "ELF: section %zu (offset %#llx, size %#llx) runs past the end (%zu bytes)",
			    index, (unsigned long long)s->offset, (unsigned long long)s->size, elf->size);
	s->data = elf->data + s->offset;
	return 0;
}

const char *cubin_elf_string(struct cubin_elf *elf, size_t strtab_index, uint64_t offset)
{
	struct cubin_elf_section st;
	if (read_shdr(elf, strtab_index, &st))
		return NULL;
	if (st.type != SHT_STRTAB || !st.data) {
		FAIL(elf, "ELF: section %zu is not a string table", strtab_index);
		return NULL;
	}
	if (offset >= st.size || !memchr(st.data + offset, 0, st.size - offset)) {
		FAIL(elf, "ELF: string at %#llx of section %zu is outside it or unterminated",
		     (unsigned long long)offset, strtab_index);
		return NULL;
	}
	return (const char *)st.data + offset;
}

int cubin_elf_section(struct cubin_elf *elf, size_t index, struct cubin_elf_section *out)
{
	if (read_shdr(elf, index, out))
		return -1;
	uint32_t name = cubin_rd32(elf->data + elf->shoff + index * elf->shentsize);
	if (elf->shstrndx == 0 || name == 0)
		return 0;
	out->name = cubin_elf_string(elf, elf->shstrndx, name);
	return out->name ? 0 : -1;
}

int cubin_elf_section_by_name(struct cubin_elf *elf, const char *name,
			      struct cubin_elf_section *out)
{
	for (size_t i = 1; i < elf->shnum; i++) {
		if (cubin_elf_section(elf, i, out))
			return -1;
		if (!strcmp(out->name, name))
			return 0;
	}
	return 1;
}

int cubin_elf_section_by_type(struct cubin_elf *elf, uint32_t type, struct cubin_elf_section *out)
{
	for (size_t i = 1; i < elf->shnum; i++) {
		if (cubin_elf_section(elf, i, out))
			return -1;
		if (out->type == type)
			return 0;
	}
	return 1;
}

/* Entries of a table section: its entry size must be the one ELF64 defines (a smaller one
 * would make us read past each entry). */
static size_t table_count(struct cubin_elf *elf, const struct cubin_elf_section *s,
			  uint64_t want, const char *what)
{
	if (!s->data) {
		FAIL(elf, "ELF: %s section %zu has no contents", what, s->index);
		return 0;
	}
	if (s->entsize != want) {
		FAIL(elf, "ELF: %s section %zu has entry size %llu, expected %llu", what, s->index,
		     (unsigned long long)s->entsize, (unsigned long long)want);
		return 0;
	}
	return (size_t)(s->size / want);
}

size_t cubin_elf_symbol_count(struct cubin_elf *elf, const struct cubin_elf_section *symtab)
{
	if (symtab->type != SHT_SYMTAB && symtab->type != SHT_DYNSYM) {
		FAIL(elf, "ELF: section %zu is not a symbol table", symtab->index);
		return 0;
	}
	return table_count(elf, symtab, SYM_SIZE, "symbol");
}

int cubin_elf_symbol(struct cubin_elf *elf, const struct cubin_elf_section *symtab, size_t index,
		     struct cubin_elf_symbol *out)
{
	if (index >= cubin_elf_symbol_count(elf, symtab))
		return FAIL(elf, "ELF: symbol %zu is outside table section %zu", index, symtab->index);
	const uint8_t *p = symtab->data + index * SYM_SIZE;
	uint32_t name = cubin_rd32(p);
	out->index = index;
	out->info = p[4];
	out->bind = p[4] >> 4;
	out->type = p[4] & 0xf;
	out->other = p[5];
	out->shndx = cubin_rd16(p + 6);
	out->value = cubin_rd64(p + 8);
	out->size = cubin_rd64(p + 16);
	out->name = name ? cubin_elf_string(elf, symtab->link, name) : "";
	return out->name ? 0 : -1;
}

size_t cubin_elf_reloc_count(struct cubin_elf *elf, const struct cubin_elf_section *rel)
{
	if (rel->type == SHT_REL)
		return table_count(elf, rel, REL_SIZE, "REL");
	if (rel->type == SHT_RELA)
		return table_count(elf, rel, RELA_SIZE, "RELA");
	FAIL(elf, "ELF: section %zu is not a relocation section", rel->index);
	return 0;
}

int cubin_elf_reloc(struct cubin_elf *elf, const struct cubin_elf_section *rel, size_t index,
		    struct cubin_elf_reloc *out)
{
	if (index >= cubin_elf_reloc_count(elf, rel))
		return FAIL(elf, "ELF: relocation %zu is outside section %zu", index, rel->index);
	const uint8_t *p = rel->data + index * rel->entsize;
	uint64_t info = cubin_rd64(p + 8);
	out->offset = cubin_rd64(p);
	out->sym = (uint32_t)(info >> 32);
	out->type = (uint32_t)info;
	out->addend = rel->type == SHT_RELA ? (int64_t)cubin_rd64(p + 16) : 0;
	return 0;
}

/* ---- extent of an image known only by its address ---------------------------------------- */

static int extend(uint64_t off, uint64_t len, size_t max, uint64_t *end)
{
	if (!cubin_in_bounds(off, len, max))
		return -1;
	if (off + len > *end)
		*end = off + len;
	return 0;
}

static int extent_of_sections(const uint8_t *p, size_t max, uint64_t shoff, size_t shnum,
			      uint16_t shentsize, uint64_t *end)
{
	if (extend(shoff, (uint64_t)shnum * shentsize, max, end))
		return -1;
	for (size_t i = 0; i < shnum; i++) {
		const uint8_t *h = p + shoff + i * shentsize;
		uint32_t type = cubin_rd32(h + 4);
		if (type == SHT_NOBITS || type == SHT_NULL)
			continue;
		if (extend(cubin_rd64(h + 24), cubin_rd64(h + 32), max, end))
			return -1;
	}
	return 0;
}

int cubin_elf_extent(const void *data, size_t max, size_t *extent)
{
	struct cubin_elf tmp;
	const uint8_t *p = data;
	memset(&tmp, 0, sizeof(tmp));
	if (!p || check_ident(&tmp, p, max))
		return -1;
	uint64_t end = EHDR_SIZE;
	uint64_t phoff = cubin_rd64(p + 32), shoff = cubin_rd64(p + 40);
	uint16_t phentsize = cubin_rd16(p + 54), phnum = cubin_rd16(p + 56);
	uint16_t shentsize = cubin_rd16(p + 58), shnum = cubin_rd16(p + 60);
	if (phoff && extend(phoff, (uint64_t)phnum * phentsize, max, &end))
		return -1;
	if (shoff) {
		if (shentsize < SHDR_SIZE || extend(shoff, SHDR_SIZE, max, &end))
			return -1;
		size_t n = shnum ? shnum : (size_t)cubin_rd64(p + shoff + 32);
		if (n > (max - shoff) / shentsize ||
		    extent_of_sections(p, max, shoff, n, shentsize, &end))
			return -1;
	}
	*extent = (size_t)end;
	return 0;
}
