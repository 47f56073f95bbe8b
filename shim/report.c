/* shim/report.c: what a loaded image holds (through cubin/), the per-load log line and the
 * summary at exit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cubin/cubin.h"
#include "shim/internal.h"

static atomic_uint loads_ok, loads_failed, unloads;
static atomic_int forked;
static unsigned loads_at_fork; /* loads_ok + loads_failed when this child was forked */
static atomic_uint_fast64_t graph_launches;

void shim_report_unload(CUresult r)
{
	if (r == CUDA_SUCCESS)
		atomic_fetch_add(&unloads, 1);
}

void shim_report_graph_launch(void)
{
	atomic_fetch_add_explicit(&graph_launches, 1, memory_order_relaxed);
}

static enum shim_image_kind kind_of(enum cubin_image_kind k)
{
	switch (k) {
	case CUBIN_IMAGE_WRAPPER: return SHIM_IMAGE_FATBIN_WRAPPER;
	case CUBIN_IMAGE_FATBIN: return SHIM_IMAGE_FATBIN;
	case CUBIN_IMAGE_CUBIN: return SHIM_IMAGE_CUBIN;
	case CUBIN_IMAGE_PTX: return SHIM_IMAGE_PTX;
	default: return SHIM_IMAGE_UNKNOWN;
	}
}

/* Kernels of one entry (a compressed entry is decompressed first). */
static unsigned entry_kernels(struct cubin_image *img, size_t i)
{
	const uint8_t *data;
	size_t size;
	struct cubin_kernels list;
	char err[CUBIN_ERRLEN];
	int rc = -1;
	if (img->kind == CUBIN_IMAGE_PTX) /* listed when it was opened */
		return (unsigned)img->ptx_kernels;
	if (cubin_entry_data(img, i, &data, &size) != 0)
		return 0;
	if (img->entries[i].kind == CUBIN_ENTRY_ELF)
		rc = cubin_elf_kernels(data, size, &list, err, sizeof(err));
	else if (img->entries[i].kind == CUBIN_ENTRY_PTX)
		rc = cubin_ptx_kernels((const char *)data, size, &list, err, sizeof(err));
	if (rc != 0)
		return 0;
	unsigned n = (unsigned)list.count;
	cubin_kernels_free(&list);
	return n;
}

/* Counts entries by kind and the kernels of the image, read from its first cubin (entries are
 * the same kernels built for different targets; reading one keeps large fatbins cheap), or
 * from its first PTX entry when it has no cubin. */
static void describe_entries(struct cubin_image *img, struct shim_image_info *info)
{
	long first_elf = -1, first_ptx = -1;
	for (size_t i = 0; i < img->entry_count; i++) {
		if (img->entries[i].kind == CUBIN_ENTRY_ELF && info->ncubins++ == 0)
			first_elf = (long)i;
		else if (img->entries[i].kind == CUBIN_ENTRY_PTX && info->nptx++ == 0)
			first_ptx = (long)i;
	}
	if (first_elf >= 0)
		info->nkernels = entry_kernels(img, (size_t)first_elf);
	else if (first_ptx >= 0)
		info->nkernels = entry_kernels(img, (size_t)first_ptx);
}

void shim_image_describe(const void *image, size_t size_hint, struct shim_image_info *info)
{
	shim_image_describe_open(image, size_hint, info, NULL);
}

void shim_image_describe_open(const void *image, size_t size_hint, struct shim_image_info *info,
			      struct cubin_image **opened)
{
	memset(info, 0, sizeof(*info));
	if (opened)
		*opened = NULL;
	if (!image)
		return;
	enum cubin_image_kind kind;
	size_t extent = 0;
	size_t max = size_hint ? size_hint : CUBIN_SIZE_UNKNOWN;
	if (cubin_identify(image, max, &kind, &extent) != 0)
		return;
	info->kind = kind_of(kind);
	info->size = extent;
	struct cubin_image *img;
	if (cubin_image_open(&img, image, extent ? extent : max, CUBIN_OPEN_IN_MEMORY, NULL, 0) != 0)
		return;
	info->readable = 1;
	describe_entries(img, info);
	if (opened)
		*opened = img; /* (the caller's hooks read it: one open per load) */
	else
		cubin_image_free(img);
}

static const char *kind_name(enum shim_image_kind k)
{
	static const char *const names[] = { "unknown", "cubin", "PTX", "fatbin", "fatbin-wrapper",
					     "file", "linked" };
	return (unsigned)k < sizeof(names) / sizeof(names[0]) ? names[k] : "?";
}

void shim_report_load(const struct shim_module_event *ev)
{
	/* Linker inputs and outputs are logged but are not loads. */
	if (ev->api <= SHIM_LOAD_LIBRARY_FILE)
		atomic_fetch_add(ev->result == CUDA_SUCCESS ? &loads_ok : &loads_failed, 1);
	if (!shim_log_enabled(SHIM_LOG_INFO))
		return;
	const struct shim_image_info *in = &ev->info;
	char what[160];
	if (in->readable)
		snprintf(what, sizeof(what), "%u kernel%s, %u cubin%s, %s", in->nkernels,
			 in->nkernels == 1 ? "" : "s", in->ncubins, in->ncubins == 1 ? "" : "s",
			 in->nptx ? "PTX available" : "no PTX entry"); /* (cubins may keep theirs) */
	else
		snprintf(what, sizeof(what), "contents not read");
	const void *handle = ev->module ? (const void *)ev->module : (const void *)ev->library;
	char outcome[64];
	if (ev->result == CUDA_SUCCESS)
		snprintf(outcome, sizeof(outcome), "-> %p", handle);
	else
		snprintf(outcome, sizeof(outcome), "-> FAILED (CUresult %d)", ev->result);
	shim_log(SHIM_LOG_INFO, "load %s %s%s%s %zu B: %s %s", ev->api_name, kind_name(in->kind),
		 ev->path ? " " : "", ev->path ? ev->path : "", in->size, what, outcome);
}

/* ---- exit summary ------------------------------------------------------------------------ */

struct tally {
	const char *name;
	uint64_t launches;
};

struct tallies {
	struct tally *v;
	size_t n, cap;
};

static void collect(const struct shim_kernel_info *k, void *arg)
{
	struct tallies *t = arg;
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 256;
		struct tally *v = realloc(t->v, cap * sizeof(*v));
		if (!v)
			return;
		t->v = v;
		t->cap = cap;
	}
	t->v[t->n].name = k->name;
	t->v[t->n].launches = __atomic_load_n(&k->launches, __ATOMIC_RELAXED);
	t->n++;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct tally *)a)->name, ((const struct tally *)b)->name);
}

static int by_launches(const void *a, const void *b)
{
	uint64_t x = ((const struct tally *)a)->launches, y = ((const struct tally *)b)->launches;
	return x < y ? 1 : x > y ? -1 : by_name(a, b);
}

/* The same kernel name loaded in several modules (or contexts) is one line. */
static size_t merge_names(struct tallies *t)
{
	size_t out = 0;
	if (!t->n)
		return 0;
	qsort(t->v, t->n, sizeof(*t->v), by_name);
	for (size_t i = 0; i < t->n; i++) {
		if (out && !strcmp(t->v[out - 1].name, t->v[i].name))
			t->v[out - 1].launches += t->v[i].launches;
		else
			t->v[out++] = t->v[i];
	}
	return out;
}

void shim_report_forked(void)
{
	loads_at_fork = atomic_load(&loads_ok) + atomic_load(&loads_failed);
	atomic_store(&forked, 1);
}

void shim_report_exit(void)
{
	if (!shim_log_enabled(SHIM_LOG_INFO))
		return;
	if (atomic_load(&forked) && atomic_load(&loads_ok) + atomic_load(&loads_failed) == loads_at_fork)
		return;
	struct tallies t = { 0 };
	shim_kernel_each(collect, &t);
	size_t n = merge_names(&t);
	uint64_t total = shim_unknown_launches(), launched = 0;
	for (size_t i = 0; i < n; i++) {
		total += t.v[i].launches;
		launched += t.v[i].launches != 0;
	}
	if (n)
		qsort(t.v, n, sizeof(*t.v), by_launches);
	shim_log(SHIM_LOG_INFO, "summary: %u module loads (%u failed, %u unloaded), %llu launches "
		 "of %llu kernels (%zu kernels known, %llu launches of unregistered handles), "
		 "%llu graph launches",
		 atomic_load(&loads_ok) + atomic_load(&loads_failed), atomic_load(&loads_failed),
		 atomic_load(&unloads), (unsigned long long)total, (unsigned long long)launched, n,
		 (unsigned long long)shim_unknown_launches(),
		 (unsigned long long)atomic_load(&graph_launches));
	size_t shown = n < 20 ? n : 20;
	for (size_t i = 0; i < shown && t.v[i].launches; i++)
		shim_log(SHIM_LOG_INFO, "  %10llu  %s", (unsigned long long)t.v[i].launches, t.v[i].name);
	if (n > shown && t.v[shown].launches)
		shim_log(SHIM_LOG_INFO, "  ... and %zu more kernels", n - shown);
	free(t.v);
}
