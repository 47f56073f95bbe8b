/* cubin: reading CUDA containers without calling CUDA.
 *
 * Contents: (1) a bounds-checked ELF64 reader; (2) images: fatbin wrappers, fatbins, their
 * entries and payloads (raw, zstd, LZ4), host ELF files with .nv_fatbin sections, static
 * libraries of them, standalone cubins and PTX; (3) kernel lists of cubin ELF images and of PTX text; (4) choosing the PTX to
 * instrument for a device; (5) the PTX lexer every module uses.
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

/* ---- files named by a path ------------------------------------------------------------ */

/* Opens path read-only only when it is a regular file, never blocking on a FIFO or a device
 * (O_NONBLOCK for the open, fstat on the descriptor); the size in *size (may be NULL).  The
 * descriptor, or -1 with "cannot open PATH: ..." or "PATH is a FIFO, not a regular file" in
 * err.  Every module above store/ opens the files users name through it (store/file.c is
 * store's). */
int cubin_file_open(const char *path, size_t *size, char *err, size_t errlen);
/* The whole regular file in malloc'd memory (at most max bytes); NULL with a message. */
uint8_t *cubin_file_read(const char *path, size_t max, size_t *size, char *err, size_t errlen);

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

/* ---- images: what an application hands the driver, or a file on disk ---------------------
 *
 * Ownership and lifetimes: cubin_image_open() never copies the caller's bytes: the image, its
 * fatbins and every raw (uncompressed) payload point into them, so they must outlive the
 * struct cubin_image.  Compressed payloads are decompressed on demand by cubin_entry_data(),
 * once, into buffers the image owns; cubin_image_free() releases the image and all of them.
 * An image is not thread-safe: use one per thread, or lock around cubin_entry_data().
 */

enum cubin_image_kind {
	CUBIN_IMAGE_UNKNOWN = 0,
	CUBIN_IMAGE_WRAPPER,    /* fatbin wrapper (0x466243B1): what cuModuleLoadFatBinary gets */
	CUBIN_IMAGE_FATBIN,     /* one or more fatbins (0xBA55ED50) back to back */
	CUBIN_IMAGE_CUBIN,      /* a CUDA ELF (e_machine EM_CUDA) */
	CUBIN_IMAGE_PTX,        /* PTX text */
	CUBIN_IMAGE_HOST_ELF,   /* an executable, shared library or object with .nv_fatbin */
	CUBIN_IMAGE_ARCHIVE,    /* a static library (ar archive) of such objects; size needed */
};

/* Entry kinds, as stored in the fatbin entry header. */
enum cubin_entry_kind { CUBIN_ENTRY_PTX = 1, CUBIN_ENTRY_ELF = 2, CUBIN_ENTRY_LTOIR = 8 };

enum cubin_compression { CUBIN_RAW = 0, CUBIN_ZSTD, CUBIN_LZ4 };

/* Entry header flags. */
#define CUBIN_FLAG_64BIT 0x1ull
#define CUBIN_FLAG_LINUX 0x10ull
#define CUBIN_FLAG_LZ4 0x2000ull
#define CUBIN_FLAG_ZSTD 0x8000ull
#define CUBIN_FLAG_ARCH_A 0x100000ull   /* sm_90a-style architecture-specific target */
#define CUBIN_FLAG_ARCH_F 0x200000ull   /* sm_100f-style family target */

/* Size to pass when only a pointer is known (cuModuleLoadData, cuModuleLoadFatBinary): the
 * extent is derived from the headers (fatbin size, ELF tables, PTX terminating NUL). */
#define CUBIN_SIZE_UNKNOWN SIZE_MAX

/* cubin_image_open flags. */
#define CUBIN_OPEN_IN_MEMORY 0x1u  /* data is live in this process: follow a wrapper's pointer */

struct cubin_fatbin {
	const uint8_t *data;     /* the fatbin header (16 bytes), inside the caller's bytes */
	uint64_t offset;         /* offset in the image (0 for a fatbin reached by pointer) */
	uint64_t size;           /* header + entries */
	const char *section;     /* host ELF: ".nv_fatbin" or "__nv_relfatbin"; else NULL */
	size_t first_entry;      /* index of its first entry in cubin_image.entries */
	size_t entry_count;
};

struct cubin_entry {
	uint16_t kind;           /* enum cubin_entry_kind (other values are kept, not read) */
	uint32_t header_size;    /* as stored: 64, 80, 96, 112 seen */
	uint64_t payload_size;   /* bytes after the header, padding included */
	uint64_t compressed_size; /* bytes of compressed data (payload_size when raw; for zstd,
				   * trimmed to the frame by the first cubin_entry_data()) */
	uint64_t size;           /* uncompressed size (payload_size when raw) */
	uint16_t major, minor;   /* PTX ISA version of a PTX entry; ELF ABI of a cubin */
	uint32_t sm;             /* target SM: 90 = sm_90 / compute_90 */
	uint64_t flags;          /* CUBIN_FLAG_* */
	enum cubin_compression compression;
	size_t fatbin;           /* index of its fatbin; SIZE_MAX in a standalone cubin / PTX */
	uint64_t offset;         /* offset of the entry header in the image */
	const uint8_t *payload;  /* payload as stored, inside the caller's bytes */
	const uint8_t *data;     /* uncompressed bytes once cubin_entry_data() ran (or raw) */
	uint8_t *owned;          /* decompression buffer, freed with the image */
};

struct cubin_image {
	enum cubin_image_kind kind;
	const uint8_t *data;     /* the caller's bytes */
	size_t size;             /* their extent (derived when opened with CUBIN_SIZE_UNKNOWN) */
	uint32_t wrapper_version; /* wrapper: 1, or 2 (with a list of prelinked fatbins) */
	uint64_t prelinked_list; /* wrapper version 2: the list pointer as stored.  Not followed
				  * by cubin_image_open: in -rdc programs it points into .bss,
				  * filled at registration; cubin_prelinked() reads it then */
	int in_memory;           /* opened with CUBIN_OPEN_IN_MEMORY */
	size_t wrapper_count;    /* host ELF: wrappers in .nvFatBinSegment */
	size_t ptx_kernels;      /* PTX image: its .entry count, read when opened; else 0 */
	uint16_t elf_machine;    /* host ELF / cubin: e_machine */
	struct cubin_fatbin *fatbins;
	size_t fatbin_count;
	struct cubin_entry *entries; /* every entry of every fatbin; a cubin or PTX image has one */
	size_t entry_count;
	void *zstd;              /* decompression context, created on first use */
	char error[CUBIN_ERRLEN];
};

/* Kind and extent of an image known by its address only.  `max` bounds the bytes that may be
 * read (CUBIN_SIZE_UNKNOWN when nothing is known).  Returns 0, or -1 for unknown content or
 * headers that do not add up (then *kind still names what the magic number said).  Cost: a
 * few header reads (ELF: one pass over the section headers); PTX: strlen. */
int cubin_identify(const void *data, size_t max, enum cubin_image_kind *kind, size_t *extent);

/* Opens an image: reads the container headers and every fatbin entry header (no payload is
 * decompressed).  Returns 0 and *out, or -1 with a message in err (when err is not NULL); on
 * failure *out is NULL and nothing needs freeing. */
int cubin_image_open(struct cubin_image **out, const void *data, size_t size, unsigned flags,
		     char *err, size_t errlen);

/* The per-object fatbins of an -rdc program's device-linked wrapper (version 2, opened in
 * memory): the NULL-terminated list its third field points to, which the CUDA runtime's link
 * stub (crt/link.stub, __cudaPrelinkedFatbins) fills with each object's fatbin (PTX and
 * relocatable SASS) before it registers the wrapper.  Writes up to `max` pointers; returns how
 * many the list holds (0: not such a wrapper, or an empty list), or -1 when the list holds
 * something that is not a fatbin or does not end within `max` entries. */
long cubin_prelinked(const struct cubin_image *image, const void **out, size_t max);

/* How many times cubin_image_open() ran in this process (relaxed counter, never reset): the
 * tests measure the module-load path with it (one load should open its image once). */
unsigned long cubin_image_opens(void);

/* Releases the image and every buffer it made.  NULL is accepted. */
void cubin_image_free(struct cubin_image *image);

/* The uncompressed bytes of entry `index`: the stored payload when raw, else decompressed on
 * the first call (sizes checked against the header) and kept until cubin_image_free().
 * Returns 0, or -1 with image->error set. */
int cubin_entry_data(struct cubin_image *image, size_t index, const uint8_t **data, size_t *size);

/* Drops the decompressed buffer of entry `index`, if any (a later cubin_entry_data() makes it
 * again).  Lets a caller walk huge images (libtorch_cuda.so: gigabytes uncompressed) in bounded
 * memory.  Pointers obtained earlier for that entry become invalid. */
void cubin_entry_release(struct cubin_image *image, size_t index);

/* Architecture suffix of an entry: 'a', 'f' or 0. */
char cubin_entry_arch_suffix(const struct cubin_entry *entry);

/* Whether code built for `sm` with `suffix` ('a', 'f', 0) can run (SASS) or be JIT-compiled
 * (PTX) on a device of compute capability `device_sm`.  PTX: any arch not above the device's;
 * 'a': that exact arch; 'f': the same family (major) at or below.  SASS: same major, minor not
 * above the device's, suffix rules as for PTX. */
int cubin_ptx_usable(uint32_t sm, char suffix, uint32_t device_sm);
int cubin_sass_usable(uint32_t sm, char suffix, uint32_t device_sm);

/* The PTX entry to instrument for a device: the highest PTX arch usable on `device_sm`, taken
 * from fatbin `fatbin` (or from any fatbin when fatbin == SIZE_MAX).  Returns the entry index,
 * or -1 when no PTX entry is usable. */
long cubin_choose_ptx(const struct cubin_image *image, size_t fatbin, uint32_t device_sm);

/* Names for printing. */
const char *cubin_image_kind_name(enum cubin_image_kind kind);
const char *cubin_entry_kind_name(uint16_t kind);
const char *cubin_compression_name(enum cubin_compression c);

/* ---- kernels ------------------------------------------------------------------------------
 * A kernel list owns copies of its names and parameter arrays, so it outlives the bytes it was
 * read from; cubin_kernels_free() releases it. */

struct cubin_param {
	uint32_t offset;         /* byte offset in the parameter buffer (cubin) / computed (PTX) */
	uint32_t size;           /* bytes */
	uint32_t align;          /* PTX: .align or natural alignment; cubin: 0 when unknown */
	int is_pointer;          /* PTX: 1 when declared .ptr (nvcc often omits it); cubin: 0 */
};

struct cubin_kernel {
	const char *name;        /* mangled name as in the image */
	uint32_t param_count;
	uint32_t param_bytes;    /* total size of the parameter buffer */
	struct cubin_param *params;
	int32_t registers;       /* cubin: registers per thread; -1 when not recorded */
	int64_t shared_bytes;    /* cubin: static shared memory (.nv.shared.<kernel>); -1 unknown */
	int64_t stack_bytes;     /* cubin: EIATTR_MAX_STACK_SIZE / frame size; -1 unknown */
	int64_t max_threads;     /* PTX .maxntid product or cubin EIATTR_MAX_THREADS; -1 unknown */
};

struct cubin_kernels {
	struct cubin_kernel *kernels;
	size_t count;
	uint32_t sm;             /* cubin: target SM from e_flags; PTX: from .target */
	char suffix;             /* cubin/PTX: 'a' / 'f' target suffix where known, else 0 */
	uint16_t ptx_major, ptx_minor; /* PTX: .version */
	uint16_t address_size;   /* PTX: .address_size (32, the ISA default, when absent) */
	char target[64];         /* PTX: the .target line's operands, e.g. "sm_90a" */
};

/* SM of a CUDA ELF from its e_flags (the layout changed with ELF ABI version 8). */
uint32_t cubin_elf_sm(const struct cubin_elf *elf);

/* Kernels of a CUDA ELF image (entry functions: STT_FUNC with STO_CUDA_ENTRY, or with a
 * .nv.info.<name> section): parameters from EIATTR_KPARAM_INFO, registers from
 * EIATTR_REGCOUNT, shared memory from .nv.shared.<name>.  Returns 0, or -1 with err set. */
int cubin_elf_kernels(const void *data, size_t size, struct cubin_kernels *out, char *err,
		      size_t errlen);

/* Header and .entry list of PTX text of `len` bytes (a NUL ends it early).  Returns 0, or -1
 * with err set when the text is not PTX (no .version / .target) or an .entry is malformed. */
int cubin_ptx_kernels(const char *text, size_t len, struct cubin_kernels *out, char *err,
		      size_t errlen);

void cubin_kernels_free(struct cubin_kernels *list);

/* ---- PTX tokens (lex.c) ----------------------------------------------------------------------
 * The one PTX lexer: cubin_ptx_kernels() and the rewriter's parser (ptx-rewriter/parse.c) walk
 * text with it.  A token is an identifier or directive (".param", "%r1", "_Z3fooi"), a number
 * ("9.0", "0x10"), a quoted string (a backslash escapes the next character), or one other
 * character ("{", ";", "@").  Blanks and comments (// and block comments) separate tokens.
 * Tokens point into the caller's text, which must outlive them; nothing is allocated, nothing
 * is read at or past `len`.  A lexer is a plain value: copy it to look ahead. */

struct cubin_ptx_lexer {
	const char *s;           /* the text (caller-owned) */
	size_t n;                /* its length */
	size_t at;               /* offset of what comes next */
	int depth;               /* '{' minus '}' tokens read so far (never below 0) */
};

struct cubin_ptx_token {
	const char *p;           /* inside the text */
	size_t len;              /* >= 1 */
};

/* Starts a pass over `len` bytes of text (counted: cubin_ptx_lexes). */
void cubin_ptx_lex_start(struct cubin_ptx_lexer *lx, const char *text, size_t len);

/* Moves past blanks and comments. */
void cubin_ptx_lex_skip(struct cubin_ptx_lexer *lx);

/* The next token.  Returns 1, or 0 at the end of the text. */
int cubin_ptx_lex_next(struct cubin_ptx_lexer *lx, struct cubin_ptx_token *t);

/* Whether the token is exactly `word`. */
int cubin_ptx_tok_is(const struct cubin_ptx_token *t, const char *word);

/* How many lexing passes ran in this process (relaxed counter, never reset): the tests measure
 * the module-load path with it. */
unsigned long cubin_ptx_lexes(void);

/* ---- PTX embedded in a cubin (embedded.c) ---------------------------------------------------
 * ptxas keeps the PTX it assembled in .nv_debug_ptx_txt sections (nvJitLink:
 * .nv_debug_ptx_txt.<hash>, one per PTX input) when it writes line information (-lineinfo, or
 * PTX with .loc/.file lines), and records its options in the .note.nv.tkinfo note. */

struct cubin_asm_options {
	unsigned notes;          /* ptxas notes found (0: the options are not known) */
	int disagree;            /* several ptxas notes with different options */
	char tool[16];           /* "ptxas" */
	char raw[192];           /* the options as recorded, e.g. "-lineinfo  -arch sm_90 -m 64 " */
	int opt_level;           /* -O N (3, ptxas's default, when absent) */
	int fmad;                /* 0 with -fmad false */
	int lineinfo;            /* -lineinfo */
	int debug;               /* -g */
	int relocatable;         /* -c (nvJitLink inputs) */
	uint32_t maxrregcount;   /* -maxrregcount N; 0 when absent */
	uint32_t sm;             /* -arch sm_XX; 0 when absent */
	char suffix;             /* its 'a' / 'f', or 0 */
	char unsupported[48];    /* the first option not understood ("" when all were) */
};

struct cubin_embedded_ptx {
	char *text;              /* the PTX (lines joined by '\n', NUL-terminated, malloc'ed);
				  * NULL unless exactly one section holds it */
	size_t len;
	unsigned sections;       /* .nv_debug_ptx_txt* sections (several: a link of PTX inputs) */
	char **parts;            /* with several sections: each one's PTX (malloc'ed, like text),
				  * in section order; NULL otherwise */
	size_t *part_lens;
	uint64_t bytes;          /* their stored size */
	uint32_t sm;             /* the cubin's SM (e_flags) */
	int has_options;         /* a ptxas note was found */
	struct cubin_asm_options opts;
};

/* Reads the embedded PTX and the assembler's options of a cubin.  Returns 1 when PTX sections
 * exist (out->text set when there is exactly one, out->parts when there are several, up to
 * 64), 0 when there are none (out->opts may still
 * say how the cubin was assembled), -1 on a damaged image (err).  Free with
 * cubin_embedded_ptx_free(). */
int cubin_embedded_ptx(const void *data, size_t size, struct cubin_embedded_ptx *out, char *err,
		       size_t errlen);
void cubin_embedded_ptx_free(struct cubin_embedded_ptx *p);

/* The parsed options as a ptxas command line ("-arch sm_90 -O2 -fmad=false -lineinfo"): the
 * note's own text is not always ptxas syntax ("-O 2", "-fmad false").  0, or -1 when it does
 * not fit in n bytes. */
int cubin_asm_options_ptxas(const struct cubin_asm_options *o, char *buf, size_t n);

/* Whether two cubins hold the same machine code: the same .text.* sections, byte for byte.
 * Returns 0 when they do, 1 when not (why names the first difference), -1 when either is not a
 * readable cubin. */
int cubin_same_code(const void *a, size_t asize, const void *b, size_t bsize, char *why,
		    size_t whylen);

/* Whether PTX text is the code of a cubin: the same kernels with the same parameter lists, and
 * a target the cubin's arch can come from.  Returns 0 when it is, 1 when not (why says what
 * differs), -1 when either cannot be read (why). */
int cubin_embedded_ptx_matches(const void *cubin, size_t size, const char *ptx, size_t len,
			       char *why, size_t whylen);

#endif
