/* cubin: reading CUDA containers without calling CUDA.
 *
 * Part 1, the ELF64 reader: a small bounds-checked reader of little-endian ELF64 images, used
 * for cubins, host executables and libraries (.nv_fatbin), and eBPF objects (vm/).  libelf's
 * static archive is not position-independent, so it cannot go into the shim; this one can.
 *
 * Ownership and lifetimes: a struct cubin_elf does not copy or allocate anything.  It points
 * into the caller's bytes, which must stay alive and unchanged while the struct (and every
 * section, symbol or name read through it) is in use.  All strings returned point into the
 * image and are NUL-terminated inside their string table (checked).  Nothing here needs to be
 * freed.  Every offset and size is checked against the image: any input, however damaged,
 * yields an error with a message, never a read out of bounds.
 */
#ifndef CUBPF_CUBIN_H
#define CUBPF_CUBIN_H

#include <stddef.h>
#include <stdint.h>

/* ---- ELF64 reader ---------------------------------------------------------------------- */

#define CUBIN_ERRLEN 160

struct cubin_elf {
	const uint8_t *data;     /* the image (caller-owned) */
	size_t size;             /* its size in bytes */
	uint16_t type;           /* e_type: ET_REL, ET_EXEC, ET_DYN */
	uint16_t machine;        /* e_machine: EM_CUDA (190), EM_BPF (247), EM_X86_64 (62)... */
	uint32_t flags;          /* e_flags (for cubins: the target SM, see cubin_elf_sm) */
	uint8_t osabi;           /* e_ident[EI_OSABI] (0x33 = CUDA, 0x41 = CUDA since 12.x) */
	uint8_t abiversion;      /* e_ident[EI_ABIVERSION] */
	uint64_t entry;          /* e_entry */
	size_t shnum;            /* number of sections (extended numbering resolved) */
	size_t shstrndx;         /* index of the section-name string table */
	uint64_t shoff;          /* section header table offset (checked) */
	uint16_t shentsize;      /* section header size (>= 64, checked) */
	char error[CUBIN_ERRLEN]; /* message of the last failure on this image */
};

struct cubin_elf_section {
	size_t index;
	const char *name;        /* "" when the section has no name */
	uint32_t type;           /* sh_type */
	uint64_t flags;          /* sh_flags */
	uint64_t addr;
	uint64_t offset;
	uint64_t size;
	uint32_t link;
	uint32_t info;
	uint64_t addralign;
	uint64_t entsize;
	const uint8_t *data;     /* the section bytes, or NULL for SHT_NOBITS (size still valid) */
};

struct cubin_elf_symbol {
	size_t index;
	const char *name;        /* "" when unnamed */
	uint64_t value;
	uint64_t size;
	uint8_t info;            /* st_info: bind = info >> 4, type = info & 0xf */
	uint8_t bind;            /* STB_LOCAL, STB_GLOBAL, STB_WEAK */
	uint8_t type;            /* STT_NOTYPE, STT_OBJECT, STT_FUNC, STT_SECTION... */
	uint8_t other;           /* st_other (CUDA: STO_CUDA_ENTRY = 0x10 marks a kernel) */
	uint16_t shndx;          /* st_shndx as stored (SHN_UNDEF, SHN_ABS, SHN_XINDEX...) */
};

struct cubin_elf_reloc {
	uint64_t offset;         /* r_offset */
	uint32_t sym;            /* ELF64_R_SYM(r_info) */
	uint32_t type;           /* ELF64_R_TYPE(r_info) */
	int64_t addend;          /* r_addend, 0 for SHT_REL */
};

/* Opens an image of `size` bytes: checks the identification (ELF64, little-endian), the header
 * and the section header table.  Returns 0, or -1 with elf->error set. */
int cubin_elf_open(struct cubin_elf *elf, const void *data, size_t size);

/* The extent of an ELF64 image whose size is unknown (the driver's cuModuleLoadData gets only a
 * pointer): the end of the furthest header table or section contents.  `max` bounds how far the
 * caller allows reading (SIZE_MAX when nothing is known).  Returns 0 and *extent, or -1. */
int cubin_elf_extent(const void *data, size_t max, size_t *extent);

/* Section number `index` (0 <= index < elf->shnum).  Returns 0, or -1 with elf->error set. */
int cubin_elf_section(struct cubin_elf *elf, size_t index, struct cubin_elf_section *out);

/* The first section named `name`.  Returns 0 when found, 1 when absent, -1 on a damaged image. */
int cubin_elf_section_by_name(struct cubin_elf *elf, const char *name,
			      struct cubin_elf_section *out);

/* The first section of type `type` (SHT_SYMTAB, SHT_DYNSYM...).  Returns 0, 1 absent, -1 error. */
int cubin_elf_section_by_type(struct cubin_elf *elf, uint32_t type, struct cubin_elf_section *out);

/* Symbols of a SHT_SYMTAB or SHT_DYNSYM section: their count (0 for a damaged table, with
 * elf->error set), and symbol `index`, whose name comes from the table's sh_link string table.
 * Returns 0, or -1 with elf->error set. */
size_t cubin_elf_symbol_count(struct cubin_elf *elf, const struct cubin_elf_section *symtab);
int cubin_elf_symbol(struct cubin_elf *elf, const struct cubin_elf_section *symtab, size_t index,
		     struct cubin_elf_symbol *out);

/* Relocations of a SHT_REL or SHT_RELA section: count, and entry `index`.  Same conventions. */
size_t cubin_elf_reloc_count(struct cubin_elf *elf, const struct cubin_elf_section *rel);
int cubin_elf_reloc(struct cubin_elf *elf, const struct cubin_elf_section *rel, size_t index,
		    struct cubin_elf_reloc *out);

/* A NUL-terminated string at `offset` of string-table section `strtab_index`, or NULL (with
 * elf->error set) when the offset or the terminator lies outside that section. */
const char *cubin_elf_string(struct cubin_elf *elf, size_t strtab_index, uint64_t offset);

#endif
