/* Kernels of a CUDA ELF image: entry symbols, then their parameters, registers, stack and
 * shared memory from the .nv.info sections.  Per-kernel sections are matched to kernels by
 * the text section index they name in sh_info, in one pass (cubins with thousands of kernels
 * exist: no per-kernel search over all sections). */
#include <elf.h>
#include <stdlib.h>

#include "cubin/cubin.h"
#include "cubin/internal.h"

#define STO_CUDA_ENTRY 0x10
#define SHT_CUDA_INFO 0x70000000u
#define MAX_PARAMS 4096u

/* .nv.info attributes (EIATTR_*) we read; formats: 4 = size-prefixed value, 3 = 16-bit value. */
enum {
	EIFMT_HVAL = 3,
	EIFMT_SVAL = 4,
	EIATTR_MAX_THREADS = 0x05,
	EIATTR_FRAME_SIZE = 0x11,
	EIATTR_KPARAM_INFO = 0x17,
	EIATTR_CBANK_PARAM_SIZE = 0x19,
	EIATTR_MAX_STACK_SIZE = 0x23,
	EIATTR_REGCOUNT = 0x2f,
};

uint32_t cubin_elf_sm(const struct cubin_elf *elf)
{
	/* ABI version 8 (CUDA 12.8+ toolchains) moved the SM to bits 8-15; before it was the low
	 * byte (with the virtual arch in bits 16-23). */
	if (elf->abiversion >= 8 || elf->osabi == 0x41)
		return (elf->flags >> 8) & 0xff;
	return elf->flags & 0xff;
}

/* What one pass over the sections gathers, indexed by section index. */
struct sections {
	size_t n;
	size_t *info;        /* .nv.info.<k> section index for text section i, 0 if none */
	int64_t *shared;     /* .nv.shared.<k> size for text section i, -1 if none */
	int32_t *regs_info;  /* registers from .text.<k> sh_info bits 24-31 (older cubins) */
	size_t global_info;  /* .nv.info */
	size_t symtab;
};

struct attr {
	uint8_t fmt, id;
	uint16_t value;      /* HVAL value, or SVAL size */
	const uint8_t *data; /* SVAL bytes */
};

/* Next record of a .nv.info section; returns 1 when one was read, 0 at the end, -1 damaged. */
static int next_attr(const uint8_t *p, uint64_t size, uint64_t *at, struct attr *a)
{
	if (*at >= size)
		return 0;
	if (size - *at < 4)
		return -1;
	const uint8_t *r = p + *at;
	a->fmt = r[0];
	a->id = r[1];
	a->value = cubin_rd16(r + 2);
	a->data = r + 4;
	*at += 4;
	if (a->fmt == EIFMT_SVAL) {
		if (a->value > size - *at)
			return -1;
		*at += a->value;
	}
	return 1;
}

static int scan_sections(struct cubin_elf *elf, struct sections *s)
{
	struct cubin_elf_section sec;
	s->n = elf->shnum;
	s->info = calloc(s->n ? s->n : 1, sizeof(*s->info));
	s->shared = malloc((s->n ? s->n : 1) * sizeof(*s->shared));
	s->regs_info = calloc(s->n ? s->n : 1, sizeof(*s->regs_info));
	if (!s->info || !s->shared || !s->regs_info)
		return cubin_fail(elf->error, sizeof(elf->error), "out of memory");
	for (size_t i = 0; i < s->n; i++)
		s->shared[i] = -1;
	for (size_t i = 1; i < s->n; i++) {
		if (cubin_elf_section(elf, i, &sec))
			return -1;
		if (sec.type == SHT_SYMTAB && !s->symtab)
			s->symtab = i;
		else if (!strcmp(sec.name, ".nv.info"))
			s->global_info = i;
		else if (!strncmp(sec.name, ".nv.info.", 9) && sec.info < s->n)
			s->info[sec.info] = i;
		else if (!strncmp(sec.name, ".nv.shared.", 11) && sec.info && sec.info < s->n)
			s->shared[sec.info] = (int64_t)sec.size;
		else if (!strncmp(sec.name, ".text.", 6))
			s->regs_info[i] = (int32_t)(sec.info >> 24);
	}
	return 0;
}

static void free_sections(struct sections *s)
{
	free(s->info);
	free(s->shared);
	free(s->regs_info);
}

static int add_param(struct cubin_kernel *k, const struct attr *a, char *err, size_t errlen)
{
	if (a->value < 12)
		return cubin_fail(err, errlen, "kernel %s: short KPARAM_INFO record", k->name);
	uint32_t ordinal = cubin_rd16(a->data + 4), offset = cubin_rd16(a->data + 6);
	uint32_t word = cubin_rd32(a->data + 8);
	if (ordinal >= MAX_PARAMS)
		return cubin_fail(err, errlen, "kernel %s: parameter ordinal %u", k->name, ordinal);
	if (ordinal >= k->param_count) {
		struct cubin_param *n = realloc(k->params, (ordinal + 1) * sizeof(*n));
		if (!n)
			return cubin_fail(err, errlen, "out of memory");
		memset(n + k->param_count, 0, (ordinal + 1 - k->param_count) * sizeof(*n));
		k->params = n;
		k->param_count = ordinal + 1;
	}
	/* The last word packs log2 alignment (8 bits), space (4), cbank (5), is-cbank (1) and
	 * the size in bytes (14). */
	k->params[ordinal].offset = offset;
	k->params[ordinal].size = word >> 18;
	return 0;
}

/* x*y*z saturated at INT32_MAX: a damaged record must not overflow. */
static int64_t product3(uint32_t x, uint32_t y, uint32_t z)
{
	uint64_t p = (uint64_t)x * y;
	if (p > INT32_MAX)
		return INT32_MAX;
	p *= z;
	return p > INT32_MAX ? INT32_MAX : (int64_t)p;
}

static int read_kernel_info(struct cubin_elf *elf, size_t info, struct cubin_kernel *k,
			    char *err, size_t errlen)
{
	struct cubin_elf_section sec;
	struct attr a;
	int rc;
	uint64_t at = 0, end_of_params = 0;
	if (cubin_elf_section(elf, info, &sec) || !sec.data)
		return cubin_fail(err, errlen, "%s", elf->error);
	while ((rc = next_attr(sec.data, sec.size, &at, &a)) == 1) {
		if (a.id == EIATTR_KPARAM_INFO && a.fmt == EIFMT_SVAL && add_param(k, &a, err, errlen))
			return -1;
		if (a.id == EIATTR_CBANK_PARAM_SIZE && a.fmt == EIFMT_HVAL)
			k->param_bytes = a.value;
		if (a.id == EIATTR_MAX_THREADS && a.fmt == EIFMT_SVAL && a.value >= 12)
			k->max_threads = product3(cubin_rd32(a.data), cubin_rd32(a.data + 4),
						  cubin_rd32(a.data + 8));
	}
	if (rc < 0)
		return cubin_fail(err, errlen, "kernel %s: damaged section %s", k->name, sec.name);
	for (uint32_t i = 0; i < k->param_count; i++)
		if (k->params[i].offset + k->params[i].size > end_of_params)
			end_of_params = k->params[i].offset + k->params[i].size;
	if (!k->param_bytes)
		k->param_bytes = (uint32_t)end_of_params;
	return 0;
}

/* Per-function figures of the global .nv.info, keyed by symbol index (kernel_of_sym maps a
 * symbol index to its kernel, or -1). */
static int read_global_info(struct cubin_elf *elf, size_t info, const long *kernel_of_sym,
			    size_t nsyms, struct cubin_kernels *out, char *err, size_t errlen)
{
	struct cubin_elf_section sec;
	struct attr a;
	int rc;
	uint64_t at = 0;
	if (cubin_elf_section(elf, info, &sec) || !sec.data)
		return cubin_fail(err, errlen, "%s", elf->error);
	while ((rc = next_attr(sec.data, sec.size, &at, &a)) == 1) {
		if (a.fmt != EIFMT_SVAL || a.value < 8)
			continue;
		uint32_t sym = cubin_rd32(a.data), value = cubin_rd32(a.data + 4);
		if (sym >= nsyms || kernel_of_sym[sym] < 0)
			continue;
		struct cubin_kernel *k = &out->kernels[kernel_of_sym[sym]];
		if (a.id == EIATTR_REGCOUNT)
			k->registers = (int32_t)value;
		else if (a.id == EIATTR_MAX_STACK_SIZE ||
			 (a.id == EIATTR_FRAME_SIZE && k->stack_bytes < 0))
			k->stack_bytes = value;
	}
	if (rc < 0)
		return cubin_fail(err, errlen, "damaged .nv.info section");
	return 0;
}

static int add_kernel(struct cubin_kernels *out, size_t *cap, long *kernel_of_sym,
		      const struct cubin_elf_symbol *sy)
{
	if (out->count == *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		struct cubin_kernel *k = realloc(out->kernels, ncap * sizeof(*k));
		if (!k)
			return -1;
		out->kernels = k;
		*cap = ncap;
	}
	struct cubin_kernel *k = &out->kernels[out->count];
	memset(k, 0, sizeof(*k));
	k->registers = -1;
	k->shared_bytes = -1;
	k->stack_bytes = -1;
	k->max_threads = -1;
	if (!(k->name = strdup(sy->name)))
		return -1;
	kernel_of_sym[sy->index] = (long)out->count++;
	return 0;
}

static int collect_kernels(struct cubin_elf *elf, const struct sections *s,
			   struct cubin_kernels *out, long **kernel_of_sym, size_t *nsyms, char *err,
			   size_t errlen)
{
	struct cubin_elf_section symtab;
	struct cubin_elf_symbol sy;
	size_t cap = 0;
	if (!s->symtab)
		return 0; /* no symbols, no kernels (a data-only cubin) */
	if (cubin_elf_section(elf, s->symtab, &symtab))
		return cubin_fail(err, errlen, "%s", elf->error);
	size_t n = cubin_elf_symbol_count(elf, &symtab);
	if (!(*kernel_of_sym = malloc((n ? n : 1) * sizeof(long))))
		return cubin_fail(err, errlen, "out of memory");
	memset(*kernel_of_sym, 0xff, (n ? n : 1) * sizeof(long)); /* all -1 */
	*nsyms = n;
	for (size_t i = 1; i < n; i++) {
		if (cubin_elf_symbol(elf, &symtab, i, &sy))
			return cubin_fail(err, errlen, "%s", elf->error);
		if (sy.type != STT_FUNC || !(sy.other & STO_CUDA_ENTRY))
			continue;
		if (add_kernel(out, &cap, *kernel_of_sym, &sy))
			return cubin_fail(err, errlen, "out of memory");
		struct cubin_kernel *k = &out->kernels[out->count - 1];
		if (sy.shndx < s->n) {
			k->shared_bytes = s->shared[sy.shndx] < 0 ? 0 : s->shared[sy.shndx];
			if (s->regs_info[sy.shndx])
				k->registers = s->regs_info[sy.shndx];
			if (s->info[sy.shndx] &&
			    read_kernel_info(elf, s->info[sy.shndx], k, err, errlen))
				return -1;
		}
	}
	return 0;
}

int cubin_elf_kernels(const void *data, size_t size, struct cubin_kernels *out, char *err,
		      size_t errlen)
{
	struct cubin_elf elf;
	struct sections s = {0};
	long *kernel_of_sym = NULL;
	size_t nsyms = 0;
	memset(out, 0, sizeof(*out));
	if (cubin_elf_open(&elf, data, size))
		return cubin_fail(err, errlen, "%s", elf.error);
	if (elf.machine != EM_CUDA)
		return cubin_fail(err, errlen, "ELF: machine %u is not CUDA (190)", elf.machine);
	out->sm = cubin_elf_sm(&elf);
	int rc = scan_sections(&elf, &s) ? cubin_fail(err, errlen, "%s", elf.error) : 0;
	if (!rc)
		rc = collect_kernels(&elf, &s, out, &kernel_of_sym, &nsyms, err, errlen);
	if (!rc && s.global_info)
		rc = read_global_info(&elf, s.global_info, kernel_of_sym, nsyms, out, err, errlen);
	free(kernel_of_sym);
	free_sections(&s);
	if (rc)
		cubin_kernels_free(out);
	return rc;
}

void cubin_kernels_free(struct cubin_kernels *list)
{
	for (size_t i = 0; i < list->count; i++) {
		free((char *)list->kernels[i].name);
		free(list->kernels[i].params);
	}
	free(list->kernels);
	memset(list, 0, sizeof(*list));
}
