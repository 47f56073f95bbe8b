/* cubpf inspect: what CUDA device code a file holds (executables, shared libraries, objects,
 * fatbins, cubins, PTX): a summary per file, then each fatbin's entries and kernels, as a table
 * or as JSON.  Everything is read first and printed after, so a damaged file yields one error
 * line and no half-printed report. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cubin/cubin.h"
#include "ptx-rewriter/ptx.h"
#include "tools/commands.h"
#include "tools/tools.h"

struct options {
	int json, summary_only, no_kernels, mangled;
	uint32_t sm;                /* the device the "PTX usable" column is for */
};

/* A kernel of one fatbin, merged by name over the entries (cubins, PTX) that hold it. */
struct kern {
	const char *name;
	const struct cubin_kernel *info; /* from the highest-SM cubin, else from PTX */
	size_t *entries;
	size_t n_entries;
	int ptx_usable;
	int embedded_usable;        /* no PTX entry, but its cubin's kept PTX stands in (the shim's
				     * ptx_embedded_verdict): 1, or 2 if -fmad is reproduced */
};

/* A fatbin, or the whole image for a standalone cubin / PTX file. */
struct group {
	size_t fatbin;              /* SIZE_MAX: not in a fatbin */
	size_t first, count;        /* its entries */
	struct kern *kerns;
	size_t n_kerns;
};

/* The PTX ptxas kept in a cubin entry, and how it was assembled (text not kept). */
struct embedded {
	unsigned sections;          /* .nv_debug_ptx_txt* sections; 0: none */
	uint64_t bytes;
	int has_options, lineinfo;
	char tool[16], options[192];
	int usable;                 /* ptx_embedded_verdict: the shim would instrument from it (1),
				     * if it reproduces the machine code with one -fmad (2) */
	char why[256];              /* else why not */
};

struct model {
	const char *path;
	size_t file_size;
	struct cubin_image *img;
	struct cubin_kernels *lists; /* per entry */
	struct embedded *emb;        /* per entry (cubins only) */
	size_t n_embedded;           /* cubins that keep their PTX */
	struct group *groups;
	size_t n_groups;
	size_t n_kind[3];           /* ELF, PTX, other (LTO-IR...) */
	size_t n_comp[3];
	uint64_t stored, uncompressed;
	size_t kernels, kernels_ptx, ptx_usable_entries;
	size_t kernels_embedded;    /* of kernels_ptx: through their cubin's kept PTX */
};

/* ---- demangling --------------------------------------------------------------------------
 * cubpf's own demangler first (the one `-k GLOB` matches against), then libstdc++'s
 * __cxa_demangle when the process can load it, for the forms ours leaves out (lambdas...). */

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);

static demangle_fn cxa_demangler(void)
{
	static int tried;
	static demangle_fn fn;
	if (!tried) {
		tried = 1;
		void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
		if (h)
			*(void **)&fn = dlsym(h, "__cxa_demangle");
	}
	return fn;
}

/* The demangled name (caller frees) or NULL when not a C++ name or not demanglable. */
char *tool_demangle(const char *name)
{
	if (strncmp(name, "_Z", 2))
		return NULL;
	char buf[1024];
	if (ptx_demangle(name, buf, sizeof(buf)) == 0)
		return strdup(buf);
	demangle_fn fn = cxa_demangler();
	int status = -1;
	char *out = fn ? fn(name, NULL, NULL, &status) : NULL;
	if (status != 0) {
		free(out);
		return NULL;
	}
	return out;
}

/* ---- reading ---------------------------------------------------------------------------------- */

/* What a cubin entry keeps of its PTX (a damaged note or section is shown as none). */
static void embedded_of(struct model *m, size_t i, const uint8_t *data, size_t size)
{
	struct cubin_embedded_ptx e;
	char err[CUBIN_ERRLEN];
	struct embedded *out = &m->emb[i];
	if (cubin_embedded_ptx(data, size, &e, err, sizeof(err)) < 0) {
		cubin_embedded_ptx_free(&e);
		return;
	}
	out->sections = e.sections;
	out->bytes = e.bytes;
	out->has_options = e.has_options;
	out->lineinfo = e.opts.lineinfo;
	snprintf(out->tool, sizeof(out->tool), "%s", e.opts.tool);
	snprintf(out->options, sizeof(out->options), "%s", e.opts.raw);
	/* the note's options end with blanks: trimmed for display */
	for (size_t n = strlen(out->options); n && out->options[n - 1] == ' ';)
		out->options[--n] = 0;
	m->n_embedded += e.sections > 0;
	if (e.sections) {
		int v = ptx_embedded_verdict(data, size, &e, out->why, sizeof(out->why));
		out->usable = v == 1 ? 1 : v == PTX_EMBEDDED_FMAD_UNKNOWN ? 2 : 0;
	}
	cubin_embedded_ptx_free(&e);
}

static int entry_kernels(struct model *m, size_t i, char *err, size_t errlen)
{
	struct cubin_entry *e = &m->img->entries[i];
	const uint8_t *data;
	size_t size;
	char why[CUBIN_ERRLEN];
	if (e->kind != CUBIN_ENTRY_ELF && e->kind != CUBIN_ENTRY_PTX)
		return 0;
	if (cubin_entry_data(m->img, i, &data, &size))
		return snprintf(err, errlen, "%s", m->img->error), -1;
	int rc = e->kind == CUBIN_ENTRY_ELF
			 ? cubin_elf_kernels(data, size, &m->lists[i], why, sizeof(why))
			 : cubin_ptx_kernels((const char *)data, size, &m->lists[i], why, sizeof(why));
	if (rc == 0 && e->kind == CUBIN_ENTRY_ELF)
		embedded_of(m, i, data, size);
	cubin_entry_release(m->img, i); /* bounded memory on images of thousands of entries */
	if (rc)
		return snprintf(err, errlen, "entry %zu (%s %s_%u at %#llx): %s", i,
				cubin_entry_kind_name(e->kind), e->kind == CUBIN_ENTRY_PTX ? "compute" : "sm",
				e->sm, (unsigned long long)e->offset, why), -1;
	return 0;
}

struct slot {
	const char *name;
	size_t entry;
	const struct cubin_kernel *k;
};

static int by_name(const void *a, const void *b)
{
	const struct slot *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	return c ? c : (x->entry > y->entry) - (x->entry < y->entry);
}

/* The better description of a kernel: a cubin's (registers, shared memory) of the highest SM. */
static int better(const struct model *m, const struct slot *cand, const struct slot *cur)
{
	const struct cubin_entry *a = &m->img->entries[cand->entry], *b = &m->img->entries[cur->entry];
	if ((a->kind == CUBIN_ENTRY_ELF) != (b->kind == CUBIN_ENTRY_ELF))
		return a->kind == CUBIN_ENTRY_ELF;
	return a->sm > b->sm;
}

static int merge_run(struct model *m, struct kern *k, const struct slot *s, size_t n, uint32_t sm)
{
	const struct slot *best = s;
	k->name = s->name;
	k->n_entries = n;
	if (!(k->entries = malloc(n * sizeof(*k->entries))))
		return -1;
	for (size_t i = 0; i < n; i++) {
		const struct cubin_entry *e = &m->img->entries[s[i].entry];
		k->entries[i] = s[i].entry;
		if (e->kind == CUBIN_ENTRY_PTX && cubin_ptx_usable(e->sm, cubin_entry_arch_suffix(e), sm))
			k->ptx_usable = 1;
		if (better(m, &s[i], best))
			best = &s[i];
	}
	k->info = best->k;
	return 0;
}

/* The cubin the shim would take for `sm` in this group (the highest SM it can run), or -1. */
static long group_elf(const struct model *m, const struct group *g, uint32_t sm)
{
	long best = -1;
	for (size_t i = g->first; i < g->first + g->count; i++) {
		const struct cubin_entry *e = &m->img->entries[i];
		if (e->kind == CUBIN_ENTRY_ELF && cubin_sass_usable(e->sm, cubin_entry_arch_suffix(e), sm) &&
		    (best < 0 || e->sm > m->img->entries[best].sm))
			best = (long)i;
	}
	return best;
}

/* Kernels without a usable PTX entry that the chosen cubin's kept PTX covers. */
static void mark_embedded(const struct model *m, struct group *g, uint32_t sm)
{
	long elf = group_elf(m, g, sm);
	if (elf < 0 || !m->emb[elf].usable)
		return;
	for (size_t k = 0; k < g->n_kerns; k++)
		for (size_t j = 0; !g->kerns[k].ptx_usable && j < g->kerns[k].n_entries; j++)
			if (g->kerns[k].entries[j] == (size_t)elf)
				g->kerns[k].embedded_usable = m->emb[elf].usable;
}

static int group_kernels(struct model *m, struct group *g, uint32_t sm)
{
	size_t n = 0, at = 0;
	for (size_t i = g->first; i < g->first + g->count; i++)
		n += m->lists[i].count;
	struct slot *slots = malloc((n ? n : 1) * sizeof(*slots));
	g->kerns = calloc(n ? n : 1, sizeof(*g->kerns));
	if (!slots || !g->kerns)
		return free(slots), -1;
	for (size_t i = g->first; i < g->first + g->count; i++)
		for (size_t j = 0; j < m->lists[i].count; j++)
			slots[at++] = (struct slot){m->lists[i].kernels[j].name, i, &m->lists[i].kernels[j]};
	qsort(slots, n, sizeof(*slots), by_name);
	for (size_t i = 0, j; i < n; i = j) {
		for (j = i + 1; j < n && !strcmp(slots[j].name, slots[i].name); j++)
			;
		if (merge_run(m, &g->kerns[g->n_kerns++], slots + i, j - i, sm))
			return free(slots), -1;
	}
	free(slots);
	return 0;
}

static int make_groups(struct model *m, uint32_t sm)
{
	struct cubin_image *img = m->img;
	m->n_groups = img->fatbin_count ? img->fatbin_count : (img->entry_count ? 1 : 0);
	m->groups = calloc(m->n_groups ? m->n_groups : 1, sizeof(*m->groups));
	if (!m->groups)
		return -1;
	for (size_t i = 0; i < m->n_groups; i++) {
		struct group *g = &m->groups[i];
		g->fatbin = img->fatbin_count ? i : SIZE_MAX;
		g->first = img->fatbin_count ? img->fatbins[i].first_entry : 0;
		g->count = img->fatbin_count ? img->fatbins[i].entry_count : img->entry_count;
		if (group_kernels(m, g, sm))
			return -1;
		mark_embedded(m, g, sm);
		m->kernels += g->n_kerns;
		for (size_t k = 0; k < g->n_kerns; k++) {
			m->kernels_ptx += g->kerns[k].ptx_usable || g->kerns[k].embedded_usable == 1;
			m->kernels_embedded += g->kerns[k].embedded_usable == 1;
		}
	}
	return 0;
}

static void count_entries(struct model *m, uint32_t sm)
{
	for (size_t i = 0; i < m->img->entry_count; i++) {
		const struct cubin_entry *e = &m->img->entries[i];
		m->n_kind[e->kind == CUBIN_ENTRY_ELF ? 0 : e->kind == CUBIN_ENTRY_PTX ? 1 : 2]++;
		m->n_comp[e->compression]++;
		m->stored += e->compressed_size;
		m->uncompressed += e->size;
		if (e->kind == CUBIN_ENTRY_PTX && cubin_ptx_usable(e->sm, cubin_entry_arch_suffix(e), sm))
			m->ptx_usable_entries++;
	}
}

static int build_model(struct model *m, const uint8_t *data, size_t size, uint32_t sm, char *err,
		       size_t errlen)
{
	if (cubin_image_open(&m->img, data, size, 0, err, errlen))
		return -1;
	m->lists = calloc(m->img->entry_count ? m->img->entry_count : 1, sizeof(*m->lists));
	m->emb = calloc(m->img->entry_count ? m->img->entry_count : 1, sizeof(*m->emb));
	if (!m->lists || !m->emb)
		return snprintf(err, errlen, "out of memory"), -1;
	for (size_t i = 0; i < m->img->entry_count; i++)
		if (entry_kernels(m, i, err, errlen))
			return -1;
	count_entries(m, sm);
	if (make_groups(m, sm))
		return snprintf(err, errlen, "out of memory"), -1;
	return 0;
}

static void free_model(struct model *m)
{
	for (size_t i = 0; i < m->n_groups; i++) {
		for (size_t k = 0; k < m->groups[i].n_kerns; k++)
			free(m->groups[i].kerns[k].entries);
		free(m->groups[i].kerns);
	}
	free(m->groups);
	if (m->img)
		for (size_t i = 0; i < m->img->entry_count; i++)
			cubin_kernels_free(&m->lists[i]);
	free(m->lists);
	free(m->emb);
	cubin_image_free(m->img);
}

/* ---- shared formatting ---------------------------------------------------------------------- */

/* "sm_90a", "compute_80" */
static const char *arch_name(const struct cubin_entry *e, char *buf, size_t len)
{
	char suffix[2] = {cubin_entry_arch_suffix(e), 0};
	snprintf(buf, len, "%s_%u%s", e->kind == CUBIN_ENTRY_PTX ? "compute" : "sm", e->sm, suffix);
	return buf;
}

static const char *human(uint64_t n, char *buf, size_t len)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)n;
	size_t u = 0;
	while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0]))
		v /= 1024, u++;
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, units[u]);
	return buf;
}

/* "sm_80,sm_90" or "compute_86" for the entries of a kernel of one kind. */
static void arch_list(const struct model *m, const struct kern *k, uint16_t kind, char *buf,
		      size_t len)
{
	size_t used = 0;
	buf[0] = 0;
	for (size_t i = 0; i < k->n_entries && used + 1 < len; i++) {
		const struct cubin_entry *e = &m->img->entries[k->entries[i]];
		char a[32];
		if (e->kind != kind)
			continue;
		int w = snprintf(buf + used, len - used, "%s%s", used ? "," : "", arch_name(e, a, sizeof(a)));
		used += w > 0 ? (size_t)w : 0;
	}
	if (!buf[0])
		snprintf(buf, len, "-");
}

/* ---- text output ---------------------------------------------------------------------------- */

static void print_arch_counts(const struct model *m, uint16_t kind)
{
	/* Entry counts per arch, highest first; small images have few archs, so a scan per arch
	 * over the entries is cheap. */
	uint32_t last = UINT32_MAX;
	int first = 1;
	while (1) {
		uint32_t next = 0;
		int found = 0;
		for (size_t i = 0; i < m->img->entry_count; i++) {
			const struct cubin_entry *e = &m->img->entries[i];
			if (e->kind == kind && e->sm < last && (!found || e->sm > next))
				next = e->sm, found = 1;
		}
		if (!found)
			break;
		size_t n = 0;
		for (size_t i = 0; i < m->img->entry_count; i++)
			n += m->img->entries[i].kind == kind && m->img->entries[i].sm == next;
		printf("%s%s_%u x%zu", first ? " (" : ", ", kind == CUBIN_ENTRY_PTX ? "compute" : "sm",
		       next, n);
		first = 0;
		last = next;
	}
	printf("%s", first ? "" : ")");
}

static void print_summary(const struct model *m, const struct options *o)
{
	const struct cubin_image *img = m->img;
	char a[32], b[32], t[TOOL_TEXT_MAX];
	printf("%s: %s, %s\n", tool_text(m->path, t, sizeof(t)), cubin_image_kind_name(img->kind),
	       human(m->file_size, a, sizeof(a)));
	if (img->kind == CUBIN_IMAGE_HOST_ELF)
		printf("  fatbins:      %zu (%zu wrappers in .nvFatBinSegment)\n", img->fatbin_count,
		       img->wrapper_count);
	else if (img->kind == CUBIN_IMAGE_FATBIN || img->kind == CUBIN_IMAGE_ARCHIVE)
		printf("  fatbins:      %zu\n", img->fatbin_count);
	printf("  entries:      %zu SASS", m->n_kind[0]);
	print_arch_counts(m, CUBIN_ENTRY_ELF);
	printf(", %zu PTX", m->n_kind[1]);
	print_arch_counts(m, CUBIN_ENTRY_PTX);
	printf(", %zu other\n", m->n_kind[2]);
	printf("  compression:  none %zu, zstd %zu, lz4 %zu\n", m->n_comp[CUBIN_RAW],
	       m->n_comp[CUBIN_ZSTD], m->n_comp[CUBIN_LZ4]);
	printf("  payloads:     %s stored, %s uncompressed\n", human(m->stored, a, sizeof(a)),
	       human(m->uncompressed, b, sizeof(b)));
	printf("  kernels:      %zu; PTX usable on sm_%u for %zu of them (usable PTX entries: %zu",
	       m->kernels, o->sm, m->kernels_ptx, m->ptx_usable_entries);
	if (m->kernels_embedded)
		printf("; %zu through the PTX their cubin keeps", m->kernels_embedded);
	printf(")\n");
	if (m->n_embedded)
		printf("  embedded PTX: %zu of %zu cubins keep the PTX ptxas assembled "
		       "(.nv_debug_ptx_txt)\n", m->n_embedded, m->n_kind[0]);
	if (m->kernels && m->kernels_ptx == m->kernels_embedded && m->kernels_embedded)
		printf("  note:         no PTX entry for sm_%u: %zu kernels are instrumented from the "
		       "PTX their cubin keeps (compiled as ptxas did, with a current context)\n", o->sm,
		       m->kernels_embedded);
	else if (m->kernels && !m->kernels_ptx && !m->n_embedded)
		printf("  note:         no PTX for sm_%u: these kernels cannot be instrumented at PTX "
		       "level (host-side probes still work); cubins built with -lineinfo keep theirs\n",
		       o->sm);
	else if (m->kernels && !m->kernels_ptx)
		printf("  note:         no PTX entry for sm_%u: kernels are instrumented from the PTX "
		       "their cubin keeps, when it can be compiled as ptxas did\n", o->sm);
	if (!img->entry_count)
		printf("  note:         no CUDA device code\n");
}

/* The line under a cubin entry: its embedded PTX as a kind of its own, or why it has none. */
static void print_embedded(const struct embedded *e)
{
	char t1[TOOL_TEXT_MAX], t2[TOOL_TEXT_MAX]; /* the assembler's note, as the cubin has it */
	if (e->sections)
		printf("          embedded PTX: %u section%s, %llu bytes; %s %s\n", e->sections,
		       e->sections == 1 ? "" : "s (one per linked input)",
		       (unsigned long long)e->bytes,
		       e->has_options ? tool_text(e->tool, t1, sizeof(t1)) : "assembler",
		       e->has_options ? tool_text(e->options, t2, sizeof(t2)) : "options not recorded");
	if (e->sections && !e->usable)
		printf("          not instrumented from it: %s\n", tool_text(e->why, t1, sizeof(t1)));
	else if (e->sections && e->usable == 2)
		printf("          instrumented from it if the driver's JIT reproduces its machine code "
		       "with -fmad=true or false: %s\n", tool_text(e->why, t1, sizeof(t1)));
	else if (e->has_options && !e->lineinfo)
		printf("          no embedded PTX (%s %s: no line info)\n", tool_text(e->tool, t1, sizeof(t1)),
		       tool_text(e->options, t2, sizeof(t2)));
}

static void print_entries(const struct model *m, const struct group *g)
{
	printf("    %-5s %-6s %-12s %-6s %10s %10s %7s\n", "entry", "kind", "arch", "comp", "stored",
	       "size", "kernels");
	for (size_t i = g->first; i < g->first + g->count; i++) {
		const struct cubin_entry *e = &m->img->entries[i];
		char a[32];
		printf("    %-5zu %-6s %-12s %-6s %10llu %10llu %7zu\n", i, cubin_entry_kind_name(e->kind),
		       arch_name(e, a, sizeof(a)), cubin_compression_name(e->compression),
		       (unsigned long long)e->compressed_size, (unsigned long long)e->size,
		       m->lists[i].count);
		print_embedded(&m->emb[i]);
	}
}

static void param_text(const struct cubin_kernel *k, char *buf, size_t len)
{
	size_t used = (size_t)snprintf(buf, len, "%u:", k->param_count);
	for (uint32_t i = 0; i < k->param_count && used < len; i++) {
		int w = snprintf(buf + used, len - used, "%s%u", i ? "," : "", k->params[i].size);
		used += w > 0 ? (size_t)w : 0;
	}
	if (used >= len && len > 4)
		memcpy(buf + len - 4, "...", 4);
}

/* The SASS and PTX cells of a kernel row. */
static void arch_cells(const struct model *m, const struct kern *k, char *sass, char *ptx,
		       size_t len)
{
	arch_list(m, k, CUBIN_ENTRY_ELF, sass, len);
	arch_list(m, k, CUBIN_ENTRY_PTX, ptx, len);
	if (!k->ptx_usable && k->embedded_usable)
		snprintf(ptx, len, "%s", k->embedded_usable == 1 ? "embedded" : "embedded?");
	else if (!k->ptx_usable)
		snprintf(ptx, len, "%s", strcmp(ptx, "-") ? "no (too new)" : "no");
}

static void print_kernels(const struct model *m, const struct group *g, const struct options *o)
{
	char ptxcol[16], sass[96], ptx[96];
	int ws = 4, wp = (int)snprintf(ptxcol, sizeof(ptxcol), "PTX@sm_%u", o->sm);
	for (size_t i = 0; i < g->n_kerns; i++) { /* column widths: arch lists vary a lot */
		arch_cells(m, &g->kerns[i], sass, ptx, sizeof(sass));
		ws = (int)strlen(sass) > ws ? (int)strlen(sass) : ws;
		wp = (int)strlen(ptx) > wp ? (int)strlen(ptx) : wp;
	}
	printf("    %-4s %6s %-20s %-*s %-*s %s\n", "regs", "shared", "params (bytes)", ws, "SASS",
	       wp, ptxcol, "kernel");
	for (size_t i = 0; i < g->n_kerns; i++) {
		const struct kern *k = &g->kerns[i];
		char regs[16] = "-", shared[24] = "-", params[21];
		if (k->info->registers >= 0)
			snprintf(regs, sizeof(regs), "%d", k->info->registers);
		if (k->info->shared_bytes >= 0)
			snprintf(shared, sizeof(shared), "%lld", (long long)k->info->shared_bytes);
		param_text(k->info, params, sizeof(params));
		arch_cells(m, k, sass, ptx, sizeof(sass));
		char *dm = o->mangled ? NULL : tool_demangle(k->name), t[TOOL_TEXT_MAX];
		printf("    %-4s %6s %-20s %-*s %-*s %s\n", regs, shared, params, ws, sass, wp, ptx,
		       tool_text(dm ? dm : k->name, t, sizeof(t)));
		free(dm);
	}
}

static void print_text(const struct model *m, const struct options *o)
{
	print_summary(m, o);
	if (o->summary_only)
		return;
	for (size_t i = 0; i < m->n_groups; i++) {
		const struct group *g = &m->groups[i];
		if (g->fatbin != SIZE_MAX) {
			const struct cubin_fatbin *f = &m->img->fatbins[g->fatbin];
			char t[TOOL_TEXT_MAX]; /* the section's name, as the ELF file has it */
			printf("\n  fatbin %zu at %#llx: %llu bytes, %zu entries%s%s\n", g->fatbin,
			       (unsigned long long)f->offset, (unsigned long long)f->size, f->entry_count,
			       f->section ? ", section " : "", f->section ? tool_text(f->section, t, sizeof(t)) : "");
		} else {
			printf("\n");
		}
		print_entries(m, g);
		if (!o->no_kernels && g->n_kerns)
			print_kernels(m, g, o);
	}
}

/* ---- JSON output ------------------------------------------------------------------------------ */

static void json_string(const char *s)
{
	tool_json_string(stdout, s);
}

/* A cubin entry's embedded PTX: "embedded_ptx" (null when none) and the assembler's record. */
static void json_embedded(const struct embedded *e)
{
	if (e->sections)
		printf(",\"embedded_ptx\":{\"kind\":\"embedded PTX\",\"sections\":%u,\"bytes\":%llu}",
		       e->sections, (unsigned long long)e->bytes);
	else
		printf(",\"embedded_ptx\":null");
	if (!e->has_options)
		return;
	printf(",\"assembler\":{\"tool\":");
	json_string(e->tool);
	printf(",\"options\":");
	json_string(e->options);
	printf(",\"lineinfo\":%s}", e->lineinfo ? "true" : "false");
}

static void json_entry(const struct model *m, size_t i)
{
	const struct cubin_entry *e = &m->img->entries[i];
	char a[32];
	printf("{\"index\":%zu,\"kind\":", i);
	json_string(cubin_entry_kind_name(e->kind));
	printf(",\"arch\":");
	json_string(arch_name(e, a, sizeof(a)));
	printf(",\"sm\":%u,\"compression\":\"%s\",\"offset\":%llu,\"header_size\":%u,"
	       "\"stored_size\":%llu,\"size\":%llu,\"flags\":%llu,\"version\":\"%u.%u\",\"kernels\":%zu",
	       e->sm, cubin_compression_name(e->compression), (unsigned long long)e->offset,
	       e->header_size, (unsigned long long)e->compressed_size, (unsigned long long)e->size,
	       (unsigned long long)e->flags, e->major, e->minor, m->lists[i].count);
	if (e->kind == CUBIN_ENTRY_ELF)
		json_embedded(&m->emb[i]);
	printf("}");
}

static void json_arch_array(const struct model *m, const struct kern *k, uint16_t kind)
{
	int first = 1;
	putchar('[');
	for (size_t i = 0; i < k->n_entries; i++) {
		const struct cubin_entry *e = &m->img->entries[k->entries[i]];
		char a[32];
		if (e->kind != kind)
			continue;
		printf("%s", first ? "" : ",");
		json_string(arch_name(e, a, sizeof(a)));
		first = 0;
	}
	putchar(']');
}

static void json_kernel(const struct model *m, const struct kern *k)
{
	const struct cubin_kernel *ki = k->info;
	char *dm = tool_demangle(k->name);
	printf("{\"name\":");
	json_string(k->name);
	if (dm) {
		printf(",\"demangled\":");
		json_string(dm);
		free(dm);
	}
	printf(",\"param_count\":%u,\"param_bytes\":%u,\"params\":[", ki->param_count, ki->param_bytes);
	for (uint32_t i = 0; i < ki->param_count; i++)
		printf("%s{\"offset\":%u,\"size\":%u}", i ? "," : "", ki->params[i].offset,
		       ki->params[i].size);
	printf("],\"registers\":%d,\"shared_bytes\":%lld,\"stack_bytes\":%lld,\"sass\":",
	       ki->registers, (long long)ki->shared_bytes, (long long)ki->stack_bytes);
	json_arch_array(m, k, CUBIN_ENTRY_ELF);
	printf(",\"ptx\":");
	json_arch_array(m, k, CUBIN_ENTRY_PTX);
	printf(",\"ptx_usable\":%s,\"ptx_source\":%s}", /* on device_sm */
	       k->ptx_usable || k->embedded_usable == 1 ? "true" : "false",
	       k->ptx_usable ? "\"entry\"" : k->embedded_usable == 1 ? "\"embedded\""
	       : k->embedded_usable ? "\"embedded if -fmad is reproduced\"" : "null");
}

static void json_group(const struct model *m, const struct group *g, const struct options *o)
{
	printf("{");
	if (g->fatbin != SIZE_MAX) {
		const struct cubin_fatbin *f = &m->img->fatbins[g->fatbin];
		printf("\"index\":%zu,\"offset\":%llu,\"size\":%llu,\"section\":", g->fatbin,
		       (unsigned long long)f->offset, (unsigned long long)f->size);
		if (f->section)
			json_string(f->section);
		else
			printf("null");
		printf(",");
	}
	printf("\"entries\":[");
	for (size_t i = g->first; i < g->first + g->count; i++) {
		printf("%s", i > g->first ? "," : "");
		json_entry(m, i);
	}
	printf("],\"kernels\":[");
	for (size_t i = 0; !o->no_kernels && i < g->n_kerns; i++) {
		printf("%s", i ? "," : "");
		json_kernel(m, &g->kerns[i]);
	}
	printf("]}");
}

static void print_json(const struct model *m, const struct options *o, int first)
{
	const struct cubin_image *img = m->img;
	printf("%s{\"path\":", first ? "" : ",\n");
	json_string(m->path);
	printf(",\"kind\":");
	json_string(cubin_image_kind_name(img->kind));
	printf(",\"file_size\":%zu,\"fatbin_count\":%zu,\"wrapper_count\":%zu,\"entry_count\":%zu,"
	       "\"sass_entries\":%zu,\"ptx_entries\":%zu,\"other_entries\":%zu,"
	       "\"compression\":{\"none\":%zu,\"zstd\":%zu,\"lz4\":%zu},"
	       "\"stored_bytes\":%llu,\"uncompressed_bytes\":%llu,\"kernel_count\":%zu,"
	       "\"device_sm\":%u,\"kernels_with_usable_ptx\":%zu,\"usable_ptx_entries\":%zu,"
	       "\"cubins_with_embedded_ptx\":%zu,\"kernels_through_embedded_ptx\":%zu",
	       m->file_size, img->fatbin_count, img->wrapper_count, img->entry_count, m->n_kind[0],
	       m->n_kind[1], m->n_kind[2], m->n_comp[0], m->n_comp[1], m->n_comp[2],
	       (unsigned long long)m->stored, (unsigned long long)m->uncompressed, m->kernels, o->sm,
	       m->kernels_ptx, m->ptx_usable_entries, m->n_embedded, m->kernels_embedded);
	if (!o->summary_only) {
		printf(",\"%s\":[", m->img->fatbin_count ? "fatbins" : "images");
		for (size_t i = 0; i < m->n_groups; i++) {
			printf("%s", i ? "," : "");
			json_group(m, &m->groups[i], o);
		}
		printf("]");
	}
	printf("}");
}

/* ---- files and arguments ------------------------------------------------------------------------ */

static int inspect_file(const char *path, const struct options *o, int *first_json)
{
	struct model m = {.path = path};
	char err[CUBIN_ERRLEN * 2] = "";
	char why[CUBIN_ERRLEN + 4096];
	int fd = cubin_file_open(path, &m.file_size, why, sizeof(why));
	if (fd < 0) {
		tool_warn("cubpf inspect: %s", why);
		return 1;
	}
	void *map = m.file_size ? mmap(NULL, m.file_size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
	close(fd);
	if (map == MAP_FAILED) {
		tool_warn("cubpf inspect: %s: cannot map: %s", path, strerror(errno));
		return 1;
	}
	int rc = build_model(&m, map, m.file_size, o->sm, err, sizeof(err));
	if (rc)
		tool_warn("cubpf inspect: %s: %s", path, err); /* may quote the file's names */
	else if (o->json)
		print_json(&m, o, *first_json), *first_json = 0;
	else
		print_text(&m, o);
	free_model(&m);
	if (map)
		munmap(map, m.file_size);
	return rc ? 1 : 0;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: cubpf inspect [OPTIONS] FILE...\n"
		"\n"
		"Lists the CUDA device code in executables, shared libraries, objects, fatbins, cubins\n"
		"and PTX files: per file a summary, then per fatbin its entries (kind, arch,\n"
		"compression, sizes) and its kernels (registers, static shared memory, parameter sizes,\n"
		"the SASS archs that hold them, and whether PTX usable on the device is present: cubpf\n"
		"instruments kernels through their PTX).\n"
		"\n"
		"options:\n"
		"  --json        one JSON object per run: {\"files\":[...]} (names mangled, demangled too)\n"
		"  --summary     only the per-file summary\n"
		"  --no-kernels  entries only, no kernel lists\n"
		"  --mangled     show mangled kernel names in the table (default: demangled when possible)\n"
		"  --sm N        device compute capability for the PTX column (default 90, i.e. sm_90)\n"
		"  -h, --help    this text\n"
		"\n"
		"Exit status: 0 when every file was read, 1 when one was unreadable, unknown or damaged\n"
		"(one line on stderr each), 2 on a usage error.\n");
}

static int parse_sm(const char *s, uint32_t *sm)
{
	char *end;
	if (!strncmp(s, "sm_", 3))
		s += 3;
	unsigned long v = strtoul(s, &end, 10);
	if (*end || v < 10 || v > 1000)
		return -1;
	*sm = (uint32_t)v;
	return 0;
}

/* Options first or mixed with files; "--" ends them.  Returns the index of the first file
 * argument after compacting them to the front, or -1 on error. */
static int parse_args(int argc, char **argv, struct options *o, int *nfiles)
{
	int files = 0, opts_done = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (opts_done || a[0] != '-' || !a[1]) {
			argv[1 + files++] = argv[i];
		} else if (!strcmp(a, "--")) {
			opts_done = 1;
		} else if (!strcmp(a, "--json")) {
			o->json = 1;
		} else if (!strcmp(a, "--summary")) {
			o->summary_only = 1;
		} else if (!strcmp(a, "--no-kernels")) {
			o->no_kernels = 1;
		} else if (!strcmp(a, "--mangled")) {
			o->mangled = 1;
		} else if (!strcmp(a, "--sm") && i + 1 < argc) {
			if (parse_sm(argv[++i], &o->sm))
				return fprintf(stderr, "cubpf inspect: bad --sm '%s' (e.g. 90 or sm_90)\n", argv[i]), -1;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			exit(0);
		} else {
			return fprintf(stderr, "cubpf inspect: unknown option '%s' (see --help)\n", a), -1;
		}
	}
	*nfiles = files;
	return 0;
}

int cmd_inspect(int argc, char **argv)
{
	struct options o = {.sm = 90};
	int nfiles, failed = 0, first_json = 1;
	if (parse_args(argc, argv, &o, &nfiles))
		return 2;
	if (!nfiles) {
		usage(stderr);
		return 2;
	}
	if (o.json)
		printf("{\"files\":[\n");
	for (int i = 0; i < nfiles; i++) {
		if (!o.json && i)
			printf("\n");
		failed |= inspect_file(argv[1 + i], &o, &first_json);
	}
	if (o.json)
		printf("\n]}\n");
	return failed;
}
