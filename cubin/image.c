/* Images: identification from a pointer, fatbin wrappers, fatbins and their entries, host ELF
 * files, standalone cubins and PTX (see cubin.h for ownership).  Payloads are not touched
 * here; decompress.c turns them into bytes on demand. */
#include <elf.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "cubin/cubin.h"
#include "cubin/internal.h"

#define WRAPPER_MAGIC 0x466243B1u
#define FATBIN_MAGIC 0xBA55ED50u
#define WRAPPER_SIZE 24u
#define FATBIN_HEADER_MIN 16u
#define ENTRY_HEADER_MIN 64u
#define AR_MAGIC "!<arch>\n"
#define AR_MAGIC_LEN 8u
#define AR_HEADER 60u

#define FAIL(img, ...) cubin_fail((img)->error, sizeof((img)->error), __VA_ARGS__)

/* ---- identification -------------------------------------------------------------------- */

/* PTX starts, after blank space and comments, with a directive; nvcc's starts with comments
 * then ".version".  We accept any text whose first directive is .version. */
static int looks_like_ptx(const uint8_t *p, size_t max)
{
	size_t i = 0;
	while (i < max && p[i]) {
		if (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r') {
			i++;
		} else if (i + 1 < max && p[i] == '/' && p[i + 1] == '/') {
			while (i < max && p[i] && p[i] != '\n')
				i++;
		} else if (i + 1 < max && p[i] == '/' && p[i + 1] == '*') {
			for (i += 2; i + 1 < max && p[i] && !(p[i] == '*' && p[i + 1] == '/'); i++)
				;
			i += 2;
		} else {
			return max - i >= 8 && !memcmp(p + i, ".version", 8);
		}
	}
	return 0;
}

int cubin_identify(const void *data, size_t max, enum cubin_image_kind *kind, size_t *extent)
{
	const uint8_t *p = data;
	*kind = CUBIN_IMAGE_UNKNOWN;
	if (!p || max < 4)
		return -1;
	uint32_t magic = cubin_rd32(p);
	if (magic == WRAPPER_MAGIC && max >= WRAPPER_SIZE) {
		*kind = CUBIN_IMAGE_WRAPPER;
		*extent = WRAPPER_SIZE;
		return 0;
	}
	if (magic == FATBIN_MAGIC && max >= FATBIN_HEADER_MIN) {
		uint16_t hs = cubin_rd16(p + 6);
		uint64_t size = cubin_rd64(p + 8);
		*kind = CUBIN_IMAGE_FATBIN; /* even when damaged: lets the caller say why */
		if (hs < FATBIN_HEADER_MIN || !cubin_in_bounds(hs, size, max))
			return -1;
		*extent = hs + size;
		return 0;
	}
	if (!memcmp(p, ELFMAG, SELFMAG)) {
		*kind = max >= 20 && cubin_rd16(p + 18) == EM_CUDA ? CUBIN_IMAGE_CUBIN : CUBIN_IMAGE_HOST_ELF;
		return cubin_elf_extent(p, max, extent);
	}
	if (max >= AR_MAGIC_LEN && !memcmp(p, AR_MAGIC, AR_MAGIC_LEN)) {
		*kind = CUBIN_IMAGE_ARCHIVE;
		*extent = max; /* members carry sizes, the archive does not: its size must be known */
		return max == CUBIN_SIZE_UNKNOWN ? -1 : 0;
	}
	if (looks_like_ptx(p, max)) {
		const uint8_t *nul = memchr(p, 0, max);
		*kind = CUBIN_IMAGE_PTX;
		*extent = nul ? (size_t)(nul - p) + 1 : max;
		return 0;
	}
	return -1;
}

/* ---- growing arrays ----------------------------------------------------------------------- */

static int grow(void **arr, size_t *cap, size_t count, size_t elem)
{
	if (count < *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 16;
	void *n = realloc(*arr, ncap * elem);
	if (!n)
		return -1;
	*arr = n;
	*cap = ncap;
	return 0;
}

struct builder {
	struct cubin_image *img;
	size_t fatbin_cap, entry_cap;
};

static struct cubin_entry *new_entry(struct builder *b)
{
	struct cubin_image *img = b->img;
	if (grow((void **)&img->entries, &b->entry_cap, img->entry_count, sizeof(*img->entries))) {
		FAIL(img, "out of memory");
		return NULL;
	}
	struct cubin_entry *e = &img->entries[img->entry_count++];
	memset(e, 0, sizeof(*e));
	return e;
}

/* ---- fatbin entries ------------------------------------------------------------------------ */

static int all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

static int entry_compression(struct cubin_image *img, struct cubin_entry *e, const uint8_t *h)
{
	int zstd = !!(e->flags & CUBIN_FLAG_ZSTD), lz4 = !!(e->flags & CUBIN_FLAG_LZ4);
	if (zstd && lz4)
		return FAIL(img, "entry at %#llx is flagged both zstd and LZ4",
			    (unsigned long long)e->offset);
	if (!zstd && !lz4) {
		e->compression = CUBIN_RAW;
		e->compressed_size = e->size = e->payload_size;
		e->data = e->payload;
		return 0;
	}
	e->compression = zstd ? CUBIN_ZSTD : CUBIN_LZ4;
	uint32_t csize = cubin_rd32(h + 0x10);
	e->compressed_size = csize ? csize : e->payload_size;
	e->size = cubin_rd64(h + 0x38);
	if (e->compressed_size > e->payload_size)
		return FAIL(img, "entry at %#llx: compressed size %llu exceeds its payload (%llu bytes)",
			    (unsigned long long)e->offset, (unsigned long long)e->compressed_size,
			    (unsigned long long)e->payload_size);
	if (e->size == 0)
		return FAIL(img, "entry at %#llx: compressed payload without an uncompressed size",
			    (unsigned long long)e->offset);
	return 0;
}

static int read_entry(struct builder *b, const uint8_t *h, uint64_t avail, uint64_t offset,
		      uint64_t *advance)
{
	struct cubin_image *img = b->img;
	uint32_t hs = cubin_rd32(h + 4);
	uint64_t psize = cubin_rd64(h + 8);
	if (hs < ENTRY_HEADER_MIN || hs > avail)
		return FAIL(img, "entry at %#llx: header size %u is %s", (unsigned long long)offset,
			    hs, hs < ENTRY_HEADER_MIN ? "below 64" : "past the end of its fatbin");
	if (psize > avail - hs)
		return FAIL(img, "entry at %#llx: payload of %llu bytes runs past its fatbin (%llu left)",
			    (unsigned long long)offset, (unsigned long long)psize,
			    (unsigned long long)(avail - hs));
	struct cubin_entry *e = new_entry(b);
	if (!e)
		return -1;
	e->kind = cubin_rd16(h);
	e->header_size = hs;
	e->payload_size = psize;
	e->minor = cubin_rd16(h + 0x18);
	e->major = cubin_rd16(h + 0x1a);
	e->sm = cubin_rd32(h + 0x1c);
	e->flags = cubin_rd64(h + 0x28);
	e->fatbin = img->fatbin_count - 1;
	e->offset = offset;
	e->payload = h + hs;
	*advance = hs + psize;
	return entry_compression(img, e, h);
}

static int read_entries(struct builder *b, const uint8_t *p, uint64_t size, uint64_t offset)
{
	uint64_t at = 0, advance = 0;
	while (at < size) {
		if (size - at < ENTRY_HEADER_MIN) {
			if (all_zero(p + at, size - at))
				return 0; /* alignment padding after the last entry */
			return FAIL(b->img, "entry at %#llx: %llu bytes left, too few for a header",
				    (unsigned long long)(offset + at), (unsigned long long)(size - at));
		}
		if (read_entry(b, p + at, size - at, offset + at, &advance))
			return -1;
		at += advance;
	}
	return 0;
}

/* One fatbin at p (at most `avail` bytes readable); *advance = its total size. */
static int read_fatbin(struct builder *b, const uint8_t *p, uint64_t avail, uint64_t offset,
		       const char *section, uint64_t *advance)
{
	struct cubin_image *img = b->img;
	if (avail < FATBIN_HEADER_MIN)
		return FAIL(img, "fatbin at %#llx: truncated header", (unsigned long long)offset);
	uint16_t version = cubin_rd16(p + 4), hs = cubin_rd16(p + 6);
	uint64_t size = cubin_rd64(p + 8);
	if (version != 1)
		return FAIL(img, "fatbin at %#llx: version %u is not supported (1 expected)",
			    (unsigned long long)offset, version);
	if (hs < FATBIN_HEADER_MIN || hs > avail)
		return FAIL(img, "fatbin at %#llx: header size %u is invalid",
			    (unsigned long long)offset, hs);
	if (size > avail - hs)
		return FAIL(img, "fatbin at %#llx: declares %llu bytes of entries, only %llu remain",
			    (unsigned long long)offset, (unsigned long long)size,
			    (unsigned long long)(avail - hs));
	if (grow((void **)&img->fatbins, &b->fatbin_cap, img->fatbin_count, sizeof(*img->fatbins)))
		return FAIL(img, "out of memory");
	struct cubin_fatbin *f = &img->fatbins[img->fatbin_count++];
	f->data = p;
	f->offset = offset;
	f->size = hs + size;
	f->section = section;
	f->first_entry = img->entry_count;
	int rc = read_entries(b, p + hs, size, offset + hs);
	f->entry_count = img->entry_count - f->first_entry;
	*advance = hs + size;
	return rc;
}

/* Fatbins back to back (a .nv_fatbin section, a file of several): zero padding between them is
 * skipped 8 bytes at a time; anything else is an error. */
static int read_fatbins(struct builder *b, const uint8_t *p, uint64_t size, uint64_t offset,
			const char *section)
{
	uint64_t at = 0, advance = 0;
	while (at < size) {
		if (size - at >= 4 && cubin_rd32(p + at) == FATBIN_MAGIC) {
			if (read_fatbin(b, p + at, size - at, offset + at, section, &advance))
				return -1;
			at += advance;
			continue;
		}
		uint64_t n = size - at < 8 ? size - at : 8;
		if (!all_zero(p + at, n))
			return FAIL(b->img, "%s%s%sno fatbin magic at offset %#llx",
				    section ? "section " : "", section ? section : "",
				    section ? ": " : "", (unsigned long long)(offset + at));
		at += n;
	}
	return 0;
}

/* ---- host ELF, cubin, PTX, wrapper ----------------------------------------------------------- */

/* The fatbins of one ELF file at `base` in the image (the whole image, or an archive member). */
static int read_elf_fatbins(struct builder *b, const uint8_t *p, size_t size, uint64_t base)
{
	struct cubin_image *img = b->img;
	struct cubin_elf elf;
	struct cubin_elf_section s;
	if (cubin_elf_open(&elf, p, size))
		return FAIL(img, "%s", elf.error);
	img->elf_machine = elf.machine;
	for (size_t i = 1; i < elf.shnum; i++) {
		if (cubin_elf_section(&elf, i, &s))
			return FAIL(img, "%s", elf.error);
		const char *which = !strcmp(s.name, ".nv_fatbin") ? ".nv_fatbin"
				  : !strcmp(s.name, "__nv_relfatbin") ? "__nv_relfatbin" : NULL;
		if (which && s.data && read_fatbins(b, s.data, s.size, base + s.offset, which))
			return -1;
		if (!strcmp(s.name, ".nvFatBinSegment") && s.data)
			for (uint64_t at = 0; at + WRAPPER_SIZE <= s.size; at += WRAPPER_SIZE)
				img->wrapper_count += cubin_rd32(s.data + at) == WRAPPER_MAGIC;
	}
	return 0;
}

static int read_host_elf(struct builder *b)
{
	return read_elf_fatbins(b, b->img->data, b->img->size, 0);
}

/* Decimal field of an ar member header (space-padded); -1 when it is not a number. */
static int64_t ar_number(const uint8_t *p, size_t len)
{
	int64_t v = 0;
	size_t i = 0;
	while (i < len && p[i] >= '0' && p[i] <= '9' && v < ((int64_t)1 << 55))
		v = v * 10 + (p[i++] - '0');
	if (i == 0)
		return -1;
	while (i < len && p[i] == ' ')
		i++;
	return i == len ? v : -1;
}

/* A static library (ar archive): the fatbins of every ELF member, at their offsets in it. */
static int read_archive(struct builder *b)
{
	struct cubin_image *img = b->img;
	uint64_t at = AR_MAGIC_LEN;
	while (at < img->size) {
		if (img->size - at < AR_HEADER)
			return FAIL(img, "archive: truncated member header at %#llx", (unsigned long long)at);
		const uint8_t *h = img->data + at;
		int64_t size = ar_number(h + 48, 10);
		if (h[58] != '`' || h[59] != '\n' || size < 0)
			return FAIL(img, "archive: damaged member header at %#llx", (unsigned long long)at);
		if ((uint64_t)size > img->size - at - AR_HEADER)
			return FAIL(img, "archive: member at %#llx of %lld bytes runs past the end",
				    (unsigned long long)at, (long long)size);
		const uint8_t *m = h + AR_HEADER;
		if (size >= SELFMAG && !memcmp(m, ELFMAG, SELFMAG) &&
		    read_elf_fatbins(b, m, (size_t)size, at + AR_HEADER))
			return -1;
		at += AR_HEADER + (uint64_t)size + ((uint64_t)size & 1); /* members are 2-aligned */
	}
	return 0;
}

/* A standalone cubin or PTX file: one entry, as if it were a fatbin entry, so that callers
 * treat every image alike. */
static int read_single(struct builder *b, uint16_t kind, uint32_t sm, uint64_t flags)
{
	struct cubin_entry *e = new_entry(b);
	if (!e)
		return -1;
	e->kind = kind;
	e->payload_size = e->compressed_size = e->size = b->img->size;
	e->payload = e->data = b->img->data;
	e->sm = sm;
	e->flags = flags;
	e->fatbin = SIZE_MAX;
	return 0;
}

static int read_cubin(struct builder *b)
{
	struct cubin_elf elf;
	if (cubin_elf_open(&elf, b->img->data, b->img->size))
		return FAIL(b->img, "%s", elf.error);
	b->img->elf_machine = elf.machine;
	return read_single(b, CUBIN_ENTRY_ELF, cubin_elf_sm(&elf), CUBIN_FLAG_64BIT);
}

static int read_ptx(struct builder *b)
{
	struct cubin_kernels k;
	char err[CUBIN_ERRLEN];
	if (cubin_ptx_kernels((const char *)b->img->data, b->img->size, &k, err, sizeof(err)))
		return FAIL(b->img, "%s", err);
	uint64_t flags = k.suffix == 'a' ? CUBIN_FLAG_ARCH_A : k.suffix == 'f' ? CUBIN_FLAG_ARCH_F : 0;
	int rc = read_single(b, CUBIN_ENTRY_PTX, k.sm, flags);
	if (!rc) {
		b->img->entries[0].major = k.ptx_major;
		b->img->entries[0].minor = k.ptx_minor;
		b->img->ptx_kernels = k.count; /* (describing the image needs no second pass) */
	}
	cubin_kernels_free(&k);
	return rc;
}

static int read_wrapper(struct builder *b, unsigned flags)
{
	struct cubin_image *img = b->img;
	img->wrapper_version = cubin_rd32(img->data + 4);
	uint64_t ptr = cubin_rd64(img->data + 8);
	img->prelinked_list = img->wrapper_version >= 2 ? cubin_rd64(img->data + 16) : 0;
	if (img->wrapper_version != 1 && img->wrapper_version != 2)
		return FAIL(img, "fatbin wrapper version %u is not supported (1 or 2 expected)",
			    img->wrapper_version);
	img->in_memory = !!(flags & CUBIN_OPEN_IN_MEMORY);
	if (!(flags & CUBIN_OPEN_IN_MEMORY))
		return FAIL(img, "fatbin wrapper: its fatbin is at address %#llx of the process that "
			    "made it; open the whole executable or library instead",
			    (unsigned long long)ptr);
	const uint8_t *fat = (const uint8_t *)(uintptr_t)ptr;
	enum cubin_image_kind kind;
	size_t extent;
	if (!fat || cubin_identify(fat, CUBIN_SIZE_UNKNOWN, &kind, &extent) ||
	    kind != CUBIN_IMAGE_FATBIN)
		return FAIL(img, "fatbin wrapper: no fatbin at %p", (const void *)fat);
	uint64_t advance;
	return read_fatbin(b, fat, extent, 0, NULL, &advance);
}

static int read_image(struct builder *b, unsigned flags)
{
	struct cubin_image *img = b->img;
	switch (img->kind) {
	case CUBIN_IMAGE_WRAPPER:
		return read_wrapper(b, flags);
	case CUBIN_IMAGE_FATBIN:
		return read_fatbins(b, img->data, img->size, 0, NULL);
	case CUBIN_IMAGE_CUBIN:
		return read_cubin(b);
	case CUBIN_IMAGE_PTX:
		return read_ptx(b);
	case CUBIN_IMAGE_HOST_ELF:
		return read_host_elf(b);
	case CUBIN_IMAGE_ARCHIVE:
		return read_archive(b);
	default:
		return FAIL(img, "unknown image kind");
	}
}

static const char *unknown_reason(const uint8_t *p, size_t size)
{
	if (!p || size == 0)
		return "empty input";
	if (size >= 4 && cubin_rd32(p) == FATBIN_MAGIC)
		return "damaged fatbin: its header is truncated or declares more bytes than there are";
	if (size >= 4 && !memcmp(p, ELFMAG, SELFMAG))
		return "damaged ELF: truncated or with tables past the end of the file";
	if (size >= 4 && cubin_rd32(p) == WRAPPER_MAGIC)
		return "truncated fatbin wrapper";
	if (size >= 8 && !memcmp(p, "!<thin>\n", 8))
		return "thin archive: its members are separate files, inspect those";
	return "not a fatbin, fatbin wrapper, ELF file, static library or PTX text";
}

static atomic_ulong opens;

unsigned long cubin_image_opens(void)
{
	return atomic_load_explicit(&opens, memory_order_relaxed);
}

int cubin_image_open(struct cubin_image **out, const void *data, size_t size, unsigned flags,
		     char *err, size_t errlen)
{
	atomic_fetch_add_explicit(&opens, 1, memory_order_relaxed);
	struct cubin_image *img = calloc(1, sizeof(*img));
	struct builder b = {.img = img};
	*out = NULL;
	if (!img)
		return err ? cubin_fail(err, errlen, "out of memory") : -1;
	img->data = data;
	size_t extent = size;
	/* A fatbin or ELF whose headers do not add up, in a buffer of known size, is read anyway:
	 * the reader then says precisely what is wrong. */
	if (cubin_identify(data, size, &img->kind, &extent) &&
	    (size == CUBIN_SIZE_UNKNOWN ||
	     (img->kind != CUBIN_IMAGE_FATBIN && img->kind != CUBIN_IMAGE_HOST_ELF &&
	      img->kind != CUBIN_IMAGE_CUBIN))) {
		if (err)
			cubin_fail(err, errlen, "%s", unknown_reason(data, size));
		free(img);
		return -1;
	}
	/* A known size keeps fatbins back to back and PTX without NUL; an unknown one is the
	 * extent the headers give. */
	img->size = size == CUBIN_SIZE_UNKNOWN || img->kind == CUBIN_IMAGE_WRAPPER ? extent : size;
	if (read_image(&b, flags)) {
		if (err)
			cubin_fail(err, errlen, "%s", img->error);
		cubin_image_free(img);
		return -1;
	}
	*out = img;
	return 0;
}

long cubin_prelinked(const struct cubin_image *img, const void **out, size_t max)
{
	if (img->kind != CUBIN_IMAGE_WRAPPER || img->wrapper_version != 2 || !img->in_memory ||
	    !img->prelinked_list)
		return 0;
	const uint64_t *list = (const uint64_t *)(uintptr_t)img->prelinked_list;
	for (size_t i = 0; i <= max; i++) {
		if (!list[i])
			return (long)i;
		const uint8_t *fat = (const uint8_t *)(uintptr_t)list[i];
		if (i == max || cubin_rd32(fat) != FATBIN_MAGIC)
			return -1;
		out[i] = fat;
	}
	return -1;
}

/* ---- device compatibility --------------------------------------------------------------------- */

char cubin_entry_arch_suffix(const struct cubin_entry *e)
{
	if (e->flags & CUBIN_FLAG_ARCH_A)
		return 'a';
	if (e->flags & CUBIN_FLAG_ARCH_F)
		return 'f';
	return 0;
}

int cubin_ptx_usable(uint32_t sm, char suffix, uint32_t device_sm)
{
	if (suffix == 'a')
		return sm == device_sm;
	if (suffix == 'f')
		return sm / 10 == device_sm / 10 && sm <= device_sm;
	return sm <= device_sm;
}

int cubin_sass_usable(uint32_t sm, char suffix, uint32_t device_sm)
{
	if (suffix == 'a')
		return sm == device_sm;
	return sm / 10 == device_sm / 10 && sm <= device_sm;
}

long cubin_choose_ptx(const struct cubin_image *img, size_t fatbin, uint32_t device_sm)
{
	long best = -1;
	for (size_t i = 0; i < img->entry_count; i++) {
		const struct cubin_entry *e = &img->entries[i];
		if (e->kind != CUBIN_ENTRY_PTX || (fatbin != SIZE_MAX && e->fatbin != fatbin))
			continue;
		if (!cubin_ptx_usable(e->sm, cubin_entry_arch_suffix(e), device_sm))
			continue;
		/* Highest arch wins; at equal arch, the generic one (portable across devices of
		 * the family) over an 'a'/'f' one, keeping the first seen. */
		if (best < 0 || e->sm > img->entries[best].sm ||
		    (e->sm == img->entries[best].sm && cubin_entry_arch_suffix(&img->entries[best]) &&
		     !cubin_entry_arch_suffix(e)))
			best = (long)i;
	}
	return best;
}

/* ---- names --------------------------------------------------------------------------------- */

const char *cubin_image_kind_name(enum cubin_image_kind kind)
{
	static const char *const names[] = {"unknown", "fatbin wrapper", "fatbin", "cubin", "PTX",
					    "host ELF", "static library"};
	return (unsigned)kind < sizeof(names) / sizeof(names[0]) ? names[kind] : "unknown";
}

const char *cubin_entry_kind_name(uint16_t kind)
{
	switch (kind) {
	case CUBIN_ENTRY_PTX: return "PTX";
	case CUBIN_ENTRY_ELF: return "ELF";
	case CUBIN_ENTRY_LTOIR: return "LTO-IR";
	default: return "other";
	}
}

const char *cubin_compression_name(enum cubin_compression c)
{
	return c == CUBIN_ZSTD ? "zstd" : c == CUBIN_LZ4 ? "lz4" : "none";
}
