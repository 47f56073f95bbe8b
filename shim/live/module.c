/* shim/live/module.c: module substitution.
 *
 * module_loading: the PTX of the image for the device is found (the PTX source step below: a
 * fatbin's PTX entry; the PTX ptxas kept in the cubin, one module or one per linked input,
 * compiled back with ptxas's recorded options; an -rdc program's objects) and instrumented
 * (ptx-rewriter/); several modules (linked inputs, -rdc objects) are linked again by the
 * driver's linker with the maps defined once.  PTX the application gives the driver's linker
 * itself is link.c's.  Each source is used only when it is the image's own code (kernels,
 * parameters, target); otherwise the original runs and the reason says what would help.
 * With a current context it is compiled to a cubin by the driver's JIT right away (cuLink*), so
 * that a JIT error shows here, with the JIT's log, and the original image is loaded instead.
 * Without a current context the instrumented PTX itself is substituted (the driver compiles it
 * when it loads the module).  The substitute lives until the module or library is unloaded.
 *
 * With a context, the module cache (cache.c) is looked up first: a hit registers the kernel
 * ids the entry was made with and substitutes its cubin (no PTX read, no rewrite, no JIT); a
 * miss instruments and compiles, and the result is put into the cache once the driver has
 * accepted it.  A cached cubin the driver refuses is dropped from the cache.
 *
 * module_loaded: the maps' device addresses are stored in the module's `__cubpf_map_<i>`
 * globals.  A library (cuLibraryLoadData) is loaded per context, lazily: its pointers are
 * stored in each context where it is first launched (launching hook), before that launch.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "cubin/cubin.h"
#include "shim/live/internal.h"

#define MAX_PARTS 64

/* One substituted module or library. */
struct sub {
	const void *image;          /* the substitute handed to the driver (owned) */
	const void *handle;         /* CUmodule or CUlibrary once loaded */
	CUcontext ctx;              /* a module's context (a module goes with it) */
	bool library;
	CUcontext filled[8];        /* contexts whose pointers are stored (a library: several) */
	unsigned nfilled;
	char label[96];             /* first instrumented kernel, for messages */
	size_t size;                /* of image */
	bool from_cache;            /* image came from the cache: dropped there if refused */
	bool borrowed;              /* image is the application's (a linked cubin): not freed */
	bool put;                   /* put into the cache once the driver accepted it */
	store_key key, alt;
	char *ptx;                  /* for the put: the instrumented PTX, */
	size_t ptx_len;
	char *manifest;             /* the kernel ids, */
	size_t manifest_size;
	uint64_t rewrite_ns, jit_ns;/* and what it cost */
	uint32_t sm;
	struct sub *next;
};

static struct sub *subs;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_uint nsubs;          /* launches skip everything while no library is substituted */
static atomic_uint subs_gen;       /* bumped when a context goes or a library's substitute comes
				    * or goes: the launch hook's caches (lib_seen) are stale */

/* The substitute being loaded by this thread, between module_loading and module_loaded. */
static __thread struct sub *pending;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void fallback(uint32_t reason, const char *api, const char *label, const char *why)
{
	atomic_fetch_add(&shim_live_session.n.modules_fallback, 1);
	shim_live_note(SHIM_LOG_WARN, reason, api, label, 0, 0,
		  "live: %s: %s not instrumented, the original module runs: %s", api, label, why);
}

/* ---- the PTX to instrument ---------------------------------------------------------------- */

/* Kernels without PTX cubpf can use: the message says why, and what would help. */
static void note_no_ptx(const struct shim_module_event *ev, uint32_t sm, const char *why)
{
	atomic_fetch_add(&shim_live_session.n.modules_no_ptx, 1);
	atomic_fetch_add(&shim_live_session.n.kernels_no_ptx, ev->info.nkernels);
	shim_live_note(SHIM_LOG_INFO, STORE_NOINST_NO_PTX, ev->api_name, ev->path, ev->info.nkernels, sm,
		  "live: %s: %u kernel%s not instrumentable: %s", ev->api_name, ev->info.nkernels,
		  ev->info.nkernels == 1 ? "" : "s", why);
}

/* The options of the code being compiled on this thread (NULL: the JIT's defaults), for every
 * JIT of it, regs.c's included: PTX kept in a cubin is compiled as ptxas compiled it. */
static __thread const struct cubin_asm_options *jit_asm;

#define JIT_MAX_OPTS 8

/* The driver JIT options that give what ptxas's recorded options gave (device_sm: the target,
 * checked against ptxas's -arch; 0 = checked already).  Returns the number of options
 * written, or -1 with why when one cannot be honoured (then nothing is instrumented:
 * code compiled otherwise could compute other results). */
static int jit_options_of(const struct cubin_asm_options *o, uint32_t device_sm, CUjit_option *opt,
			  void **val, char *why, size_t whylen)
{
	int n = 0;
	if (o->unsupported[0])
		return snprintf(why, whylen, "it was assembled with '%s', which cubpf does not give "
				"the driver's JIT", o->unsupported), -1;
	if (o->disagree)
		return snprintf(why, whylen, "its parts were assembled with different options"), -1;
	/* -fmad false has no JIT option for PTX (CU_JIT_FMA applies to LTO-IR only): the PTX
	 * itself says it (no_contraction), before it is instrumented. */
	if (device_sm && o->sm && o->sm != device_sm)
		return snprintf(why, whylen, "it was assembled for sm_%u, the device is sm_%u",
				o->sm, device_sm), -1;
	if (o->lineinfo)
		opt[n] = CU_JIT_GENERATE_LINE_INFO, val[n++] = (void *)(uintptr_t)1;
	if (o->debug)
		opt[n] = CU_JIT_GENERATE_DEBUG_INFO, val[n++] = (void *)(uintptr_t)1;
	/* ptxas's -O3 (its default) is the JIT's default level (4); lower levels are the same
	 * numbers in both. */
	if (o->opt_level < 3)
		opt[n] = CU_JIT_OPTIMIZATION_LEVEL, val[n++] = (void *)(uintptr_t)o->opt_level;
	if (o->maxrregcount)
		opt[n] = CU_JIT_MAX_REGISTERS, val[n++] = (void *)(uintptr_t)o->maxrregcount;
	return n;
}

/* ---- JIT ----------------------------------------------------------------------------------- */

/* The driver's JIT link of PTX texts (each NUL-terminated at out[out_len]) with the options of
 * the code being compiled, and, for objects that declare the maps .extern, cubpf's definitions
 * of them.  Returns a malloc'ed copy of the cubin, or NULL with the JIT's log in err. */
static void *jit_link(const struct live_part *parts, size_t np, bool definitions,
		      const char *what, size_t *cubin_size, char *err, size_t errlen)
{
	char log[4096] = "";
	CUjit_option opt[2 + JIT_MAX_OPTS] = { CU_JIT_ERROR_LOG_BUFFER,
					       CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES };
	void *val[2 + JIT_MAX_OPTS] = { log, (void *)(uintptr_t)sizeof(log) };
	CUlinkState st;
	void *cubin = NULL, *copy = NULL;
	size_t size = 0;
	int n = jit_asm ? jit_options_of(jit_asm, 0, opt + 2, val + 2, err, errlen) : 0;
	if (n < 0)
		return NULL;
	atomic_fetch_add(&shim_live_session.n.jit_compiles, 1);
	CUresult r = shim_live_cu.cuLinkCreate_v2(2 + (unsigned)n, opt, val, &st);
	if (r != CUDA_SUCCESS)
		return snprintf(err, errlen, "cuLinkCreate: %s", shim_live_cu_error(r)), NULL;
	if (definitions && shim_live_link_definitions(st, err, errlen)) {
		shim_live_cu.cuLinkDestroy(st);
		return NULL;
	}
	for (size_t i = 0; r == CUDA_SUCCESS && i < np; i++)
		r = shim_live_cu.cuLinkAddData_v2(st, CU_JIT_INPUT_PTX, parts[i].out, parts[i].out_len + 1,
					     "cubpf.ptx", 0, NULL, NULL);
	if (r == CUDA_SUCCESS)
		r = shim_live_cu.cuLinkComplete(st, &cubin, &size);
	if (r == CUDA_SUCCESS && !(copy = malloc(size ? size : 1)))
		r = CUDA_ERROR_OUT_OF_MEMORY;
	else if (r == CUDA_SUCCESS)
		memcpy(copy, cubin, size);
	shim_live_cu.cuLinkDestroy(st);
	if (r != CUDA_SUCCESS) {
		log[sizeof(log) - 1] = 0;
		for (char *p = log; *p; p++)
			*p = *p == '\n' ? ' ' : *p;
		snprintf(err, errlen, "the driver's JIT refused the instrumented %s (%s): %s", what,
			 shim_live_cu_error(r), log);
		return NULL;
	}
	*cubin_size = size;
	return copy;
}

/* Compiles PTX text (NUL-terminated) to a cubin for the current context's device. */
void *shim_live_jit(const char *ptx, size_t len, size_t *cubin_size, char *err, size_t errlen)
{
	const struct live_part one = { .out = (char *)ptx, .out_len = len };
	return jit_link(&one, 1, false, "PTX", cubin_size, err, errlen);
}

void *shim_live_jit_parts(struct live_part *parts, size_t np, size_t *cubin_size, char *err,
		     size_t errlen)
{
	return jit_link(parts, np, true, "objects", cubin_size, err, errlen);
}

/* ---- module_loading ------------------------------------------------------------------------ */

struct work {
	const struct shim_module_event *ev;
	CUcontext ctx;
	uint32_t sm;
	struct cubin_image *img;    /* the original image (headers read) */
	bool img_borrowed;          /* img is the core's (ev->opened): not ours to free */
	long ptx_entry;             /* its PTX entry for sm, or -1 */
	const char *ptx;            /* the PTX to instrument: the entry's, or embedded.text */
	size_t ptx_len;
	struct cubin_embedded_ptx embedded; /* the PTX kept in the device's cubin, when used */
	const char *origin;         /* where the PTX came from, for the cache key (NULL: an entry) */
	bool no_lineinfo;           /* the device's cubin was assembled without line info */
	struct live_part *parts;    /* -rdc: the objects' PTX, linked instrumented (else NULL) */
	size_t nparts;
	struct cubin_image *objs[MAX_PARTS]; /* the objects' fatbins */
	size_t nobjs;
	struct cubin_asm_options part_opts; /* how ptxas assembled the objects */
	char *owned[MAX_PARTS];     /* the objects' PTX when it had to change (-fmad false) */
	size_t nowned;
	char origin_buf[320];
	bool cached;                /* key is valid: look up, and put what is made */
	bool keyed;                 /* key taken and looked up already (early_lookup) */
	uint64_t t0;                /* when the load began */
	store_key key, alt;         /* alt: the key without the kernel id base (cache.c) */
	struct live_manifest manifest; /* the kernel ids the rewriter asked for */
	char *out;                  /* instrumented PTX */
	size_t out_len;
	struct ptx_inject_report rep;
	uint64_t rewrite_ns, jit_ns;
	char label[96];
	char err[LIVE_ERRLEN];
};

/* ---- the PTX source: where a module's PTX comes from -------------------------------------------
 * (a) a PTX entry of the image's fatbins for the device, as before; (b) the PTX ptxas kept in
 * the cubin the driver would load (.nv_debug_ptx_txt), compiled with ptxas's recorded options,
 * used only when it is exactly that cubin's code.  Otherwise the reason, with what would help. */

/* The cubin entry the driver loads on `sm`: the highest usable SASS. */
static long choose_elf(const struct cubin_image *img, uint32_t sm)
{
	long best = -1;
	for (size_t i = 0; i < img->entry_count; i++) {
		const struct cubin_entry *e = &img->entries[i];
		if (e->kind == CUBIN_ENTRY_ELF && cubin_sass_usable(e->sm, cubin_entry_arch_suffix(e), sm) &&
		    (best < 0 || e->sm > img->entries[best].sm))
			best = (long)i;
	}
	return best;
}

#define LINEINFO_HELP "compile with -lineinfo (nvcc, NVRTC), leave TRITON_DISABLE_LINE_INFO " \
		      "unset (Triton, Inductor), or add --xla_gpu_generate_line_info=true to " \
		      "XLA_FLAGS (JAX)"

/* Why an image without a usable PTX entry has none, when its cubin does not help either
 * (no_lineinfo: ptxas's note says it was assembled without line info). */
static void no_entry_reason(const struct cubin_image *img, uint32_t sm, bool no_lineinfo,
			    char *why, size_t n)
{
	uint32_t newer = 0, ltoir = 0, cubins = 0;
	for (size_t i = 0; i < img->entry_count; i++) {
		const struct cubin_entry *e = &img->entries[i];
		if (e->kind == CUBIN_ENTRY_PTX && (!newer || e->sm < newer))
			newer = e->sm;
		ltoir += e->kind == CUBIN_ENTRY_LTOIR;
		cubins += e->kind == CUBIN_ENTRY_ELF;
	}
	if (img->wrapper_version == 2)
		snprintf(why, n, "no PTX for sm_%u in the image: an -rdc program's linked SASS (not "
			 "instrumented: the objects' PTX is not linked again by cubpf yet)", sm);
	else if (newer)
		snprintf(why, n, "PTX only for sm_%u and above, newer than the device (sm_%u): build "
			 "with -gencode arch=compute_%u,code=compute_%u too", newer, sm, sm, sm);
	else if (ltoir)
		snprintf(why, n, "no PTX for sm_%u in the image: linked from LTO-IR (-dlto), which "
			 "keeps no PTX", sm);
	else
		snprintf(why, n, "no PTX for sm_%u in the image (%u cubins, SASS only)%s", sm, cubins,
			 no_lineinfo ? "; the cubin was assembled without line info, so ptxas kept "
				       "no PTX in it: " LINEINFO_HELP
				     : "; no line info either (a library shipped as SASS?)");
}

static int objects_match(struct work *w, bool exact, char *why, size_t n);

/* ptxas -fmad false, in the PTX itself (ptx_no_contraction): *text (malloc'ed) replaced. */
static int no_contraction(char **text, size_t *len, char *err, size_t errlen)
{
	char *t;
	size_t n;
	if (ptx_no_contraction(*text, *len, &t, &n) < 0)
		return snprintf(err, errlen, "out of memory"), -1;
	free(*text);
	*text = t, *len = n;
	return 0;
}

/* A cubin linked from several PTX inputs (nvJitLink, the driver's linker with line info): each
 * input's PTX, instrumented and linked again with ptxas's options.  Returns 1, 0 with why. */
static int embedded_parts(struct work *w, char *why, size_t n)
{
	struct cubin_embedded_ptx *e = &w->embedded;
	CUjit_option opt[JIT_MAX_OPTS];
	void *val[JIT_MAX_OPTS];
	char jwhy[160];
	if (!e->parts)
		return snprintf(why, n, "its cubin keeps the PTX of %u linked inputs, more than cubpf "
				"links again", e->sections), 0;
	if (!w->ctx)
		return snprintf(why, n, "its cubin keeps the PTX of %u linked inputs, linked again "
				"instrumented only with a current context", e->sections), 0;
	if (!e->has_options)
		return snprintf(why, n, "its cubin keeps PTX but not the options it was assembled "
				"with (no .note.nv.tkinfo)"), 0;
	if (!(w->parts = calloc(e->sections, sizeof(*w->parts))))
		return snprintf(w->err, sizeof(w->err), "out of memory"), -1;
	for (unsigned i = 0; i < e->sections; i++) {
		if (!e->opts.fmad &&
		    no_contraction(&e->parts[i], &e->part_lens[i], w->err, sizeof(w->err)))
			return -1;
		w->parts[i].ptx = e->parts[i], w->parts[i].len = e->part_lens[i];
	}
	w->nparts = e->sections;
	if (objects_match(w, true, why, n))
		return 0;
	if (jit_options_of(&e->opts, w->sm, opt, val, jwhy, sizeof(jwhy)) < 0)
		return snprintf(why, n, "the PTX kept in its cubin cannot be compiled as it was: %s",
				jwhy), 0;
	w->part_opts = e->opts;
	snprintf(w->origin_buf, sizeof(w->origin_buf), "embedded PTX of %u linked inputs: %s %s",
		 e->sections, e->opts.tool, e->opts.raw);
	w->origin = w->origin_buf;
	return 1;
}

/* Whether the PTX, compiled by the driver's JIT at ptxas's default level with line info (Triton
 * passes -lineinfo; it leaves .text alone), gives the cubin's machine code.  1, 0, or -1 (OOM). */
static int reproduces(const char *ptx, size_t len, const uint8_t *data, size_t size)
{
	struct cubin_asm_options opts = { .opt_level = 3, .fmad = 1, .lineinfo = 1 };
	char err[LIVE_ERRLEN], why[160];
	size_t jsize;
	jit_asm = &opts;
	void *cubin = shim_live_jit(ptx, len, &jsize, err, sizeof(err));
	jit_asm = NULL;
	int same = cubin && cubin_same_code(data, size, cubin, jsize, why, sizeof(why)) == 0;
	shim_log(SHIM_LOG_DEBUG, "live: reproducing a cubin's machine code: %s", same ? "same"
		 : cubin ? why : err);
	free(cubin);
	return same;
}

/* The embedded PTX has multiply-add pairs and no record of -fmad (Triton's ptxas writes no
 * .note.nv.tkinfo; enable_fp_fusion=False passes -fmad=false): the value that made the cubin is
 * found by compiling the PTX both ways (fusion on, ptxas's default, first; off as .rn in the
 * text) and keeping the one whose machine code is the cubin's own.  The JIT is the driver's
 * ptxas: a cubin made by another ptxas version matches neither and stays refused.  Paid once per
 * module: the instrumented result is cached.  Returns 1 (e->text and opts set), 0 (why), -1. */
static int reproduce_fmad(struct work *w, const uint8_t *data, size_t size, char *why, size_t n)
{
	struct cubin_embedded_ptx *e = &w->embedded;
	if (!w->ctx)
		return snprintf(why + strlen(why), n - strlen(why), "; with a current context cubpf "
				"would find which by reproducing the cubin's machine code"), 0;
	for (int fmad = 1; fmad >= 0; fmad--) {
		char *text = NULL;
		size_t len = e->len;
		if (!fmad && ptx_no_contraction(e->text, e->len, &text, &len) < 0)
			return snprintf(w->err, sizeof(w->err), "out of memory"), -1;
		int same = reproduces(fmad ? e->text : text, len, data, size);
		if (same == 1) {
			if (text) {
				free(e->text);
				e->text = text, e->len = len;
			}
			snprintf(e->opts.tool, sizeof(e->opts.tool), "ptxas");
			snprintf(e->opts.raw, sizeof(e->opts.raw), "(options not recorded; -fmad=%s "
				 "reproduces the cubin's machine code)", fmad ? "true" : "false");
			e->opts.opt_level = 3, e->opts.lineinfo = 1, e->opts.fmad = 1;
			return 1;
		}
		free(text);
	}
	return snprintf(why + strlen(why), n - strlen(why), "; neither -fmad=true nor -fmad=false "
			"gives the cubin's machine code with the driver's JIT (another ptxas made it)"),
	       0;
}

static bool image_key(struct work *w);
static int cache_lookup(struct work *w, uint64_t t0);

/* The cache, asked before the embedded PTX is judged: the verdict parses the PTX and may compile
 * it twice to find ptxas's -fmad (reproduce_fmad), which a cache hit must not pay again, or a
 * cached Triton cubin loads several times slower than the original.  What the verdict decides
 * depends only on the image's bytes, the driver and this build, all in the key, so the key's
 * origin is the path's name alone.  Returns 1 when the cache settled the load. */
static int early_lookup(struct work *w)
{
	w->origin = "embedded PTX";
	w->keyed = true;
	w->cached = w->ctx && image_key(w);
	return w->cached && cache_lookup(w, w->t0);
}

/* The embedded PTX of cubin entry `elf`, if cubpf can compile it as ptxas did.  Returns 1 (it
 * is w->ptx), 0 with why (not usable), 2 when the cache settled the load before the PTX was
 * judged (early_lookup), -1 on an unreadable entry (w->err). */
static int embedded_source(struct work *w, long elf, char *why, size_t n)
{
	const uint8_t *data;
	size_t size;
	struct cubin_embedded_ptx *e = &w->embedded;
	CUjit_option opt[JIT_MAX_OPTS];
	void *val[JIT_MAX_OPTS];
	if (cubin_entry_data(w->img, (size_t)elf, &data, &size) != 0)
		return snprintf(w->err, sizeof(w->err), "reading the cubin: %s", w->img->error), -1;
	if (cubin_embedded_ptx(data, size, e, w->err, sizeof(w->err)) < 0)
		return -1;
	if (!e->sections) { /* no_entry_reason says why */
		if (e->has_options && !e->opts.lineinfo)
			w->no_lineinfo = true;
		return 0;
	}
	if (early_lookup(w))
		return 2;
	if (!e->text)
		return embedded_parts(w, why, n);
	int rc = ptx_embedded_verdict(data, size, e, why, n);
	if (rc < 0)
		return snprintf(w->err, sizeof(w->err), "out of memory"), -1;
	if (rc == PTX_EMBEDDED_FMAD_UNKNOWN && (rc = reproduce_fmad(w, data, size, why, n)) == 1)
		rc = 2; /* options found: e->opts says them */
	if (rc <= 0)
		return rc;
	if (rc == 1 && !e->has_options) { /* nothing -fmad could change: ptxas's defaults */
		snprintf(e->opts.tool, sizeof(e->opts.tool), "ptxas");
		snprintf(e->opts.raw, sizeof(e->opts.raw), "(options not recorded; no multiply-add "
			 "that they could fuse: ptxas's defaults)");
	}
	char jwhy[160];
	int nopt = jit_options_of(&e->opts, w->sm, opt, val, jwhy, sizeof(jwhy));
	if (nopt < 0)
		return snprintf(why, n, "the PTX kept in its cubin cannot be compiled as it was: %s",
				jwhy), 0;
	/* Without a context the driver compiles the substitute PTX at load, with its defaults:
	 * only line info may be missing then. */
	if (!w->ctx && nopt > (e->opts.lineinfo ? 1 : 0))
		return snprintf(why, n, "the PTX kept in its cubin needs ptxas's options (%s), and "
				"there is no current context to compile it with them", e->opts.raw), 0;
	if (!e->opts.fmad && no_contraction(&e->text, &e->len, w->err, sizeof(w->err)))
		return -1;
	w->ptx = e->text;
	w->ptx_len = e->len;
	snprintf(w->origin_buf, sizeof(w->origin_buf), "embedded PTX: %s %s", e->opts.tool,
		 e->opts.raw);
	w->origin = w->origin_buf;
	return 1;
}

/* How ptxas assembled one object (its relocatable cubin's note): the first sets the options,
 * the others must agree.  Returns 0, or 1 with why. */
static int object_options(struct work *w, struct cubin_image *obj, size_t i, char *why, size_t n)
{
	long elf = choose_elf(obj, w->sm);
	const uint8_t *data;
	size_t size;
	struct cubin_embedded_ptx e;
	char err[CUBIN_ERRLEN];
	memset(&e, 0, sizeof(e));
	int bad = elf < 0 || cubin_entry_data(obj, (size_t)elf, &data, &size) ||
		  cubin_embedded_ptx(data, size, &e, err, sizeof(err)) < 0 || !e.has_options;
	cubin_embedded_ptx_free(&e);
	if (bad)
		return snprintf(why, n, "an -rdc program's linked SASS: how object %zu was assembled "
				"is not recorded", i), 1;
	if (i == 0)
		w->part_opts = e.opts;
	else if (strcmp(w->part_opts.raw, e.opts.raw) || e.opts.disagree)
		w->part_opts.disagree = 1;
	return 0;
}

/* Every kernel of the linked SASS is in one part's PTX with the same parameters; exact: and no
 * other (the objects of an -rdc program may hold more: the device linker drops kernels the host
 * never registers).  0, or 1 with why. */
static int objects_match(struct work *w, bool exact, char *why, size_t n)
{
	long elf = choose_elf(w->img, w->sm);
	const uint8_t *data;
	size_t size;
	struct cubin_kernels linked, part;
	char err[CUBIN_ERRLEN];
	if (elf < 0 || cubin_entry_data(w->img, (size_t)elf, &data, &size) ||
	    cubin_elf_kernels(data, size, &linked, err, sizeof(err)))
		return snprintf(why, n, "an -rdc program's linked SASS that cubpf cannot read"), 1;
	size_t found = 0, total = 0;
	for (size_t i = 0; i < w->nparts; i++) {
		if (cubin_ptx_kernels(w->parts[i].ptx, w->parts[i].len, &part, err, sizeof(err)))
			continue;
		total += part.count;
		for (size_t k = 0; k < linked.count; k++)
			for (size_t j = 0; j < part.count; j++)
				if (!strcmp(linked.kernels[k].name, part.kernels[j].name) &&
				    linked.kernels[k].param_bytes == part.kernels[j].param_bytes &&
				    linked.kernels[k].param_count == part.kernels[j].param_count)
					found++;
		cubin_kernels_free(&part);
	}
	int rc = found == linked.count && (!exact || total == found) ? 0 : 1;
	if (rc)
		snprintf(why, n, "%s: the kernels of its SASS (%zu) are not those of its inputs' PTX "
			 "(%zu, %zu the same)", exact ? "a cubin linked from several PTX inputs"
						      : "an -rdc program's linked SASS",
			 linked.count, total, found);
	cubin_kernels_free(&linked);
	return rc;
}

/* (c) an -rdc program: the registered image is device-linked SASS, its objects' fatbins (with
 * their PTX) are listed by the wrapper.  Their PTX, instrumented and linked by the driver's
 * linker with ptxas's options, replaces it.  Returns 1, 0 with why, -1 (w->err). */
static int rdc_source(struct work *w, char *why, size_t n)
{
	const void *fat[MAX_PARTS];
	char jwhy[160];
	long count = cubin_prelinked(w->img, fat, MAX_PARTS);
	if (count <= 0)
		return snprintf(why, n, "no PTX for sm_%u in the image: an -rdc program's linked SASS "
				"%s", w->sm, count < 0 ? "whose list of objects cannot be read"
						       : "without its list of objects"), 0;
	if (!w->ctx)
		return snprintf(why, n, "an -rdc program's linked SASS: its objects' PTX is linked "
				"instrumented only with a current context"), 0;
	if (!(w->parts = calloc((size_t)count, sizeof(*w->parts))))
		return snprintf(w->err, sizeof(w->err), "out of memory"), -1;
	for (size_t i = 0; i < (size_t)count; i++) {
		struct cubin_image *obj;
		const uint8_t *text;
		if (cubin_image_open(&obj, fat[i], CUBIN_SIZE_UNKNOWN, CUBIN_OPEN_IN_MEMORY, w->err,
				     sizeof(w->err)))
			return -1;
		w->objs[w->nobjs++] = obj;
		long e = cubin_choose_ptx(obj, SIZE_MAX, w->sm);
		if (e < 0)
			return snprintf(why, n, "an -rdc program's linked SASS: object %zu has no PTX "
					"for sm_%u (build it with -gencode arch=compute_%u,code="
					"compute_%u too)", i, w->sm, w->sm, w->sm), 0;
		if (cubin_entry_data(obj, (size_t)e, &text, &w->parts[i].len))
			return snprintf(w->err, sizeof(w->err), "reading object %zu's PTX: %s", i,
					obj->error), -1;
		w->parts[i].ptx = (const char *)text;
		w->parts[i].len = strnlen(w->parts[i].ptx, w->parts[i].len);
		if (object_options(w, obj, i, why, n))
			return 0;
	}
	w->nparts = (size_t)count;
	if (objects_match(w, false, why, n))
		return 0;
	for (size_t i = 0; !w->part_opts.fmad && i < w->nparts; i++) {
		char *copy = strndup(w->parts[i].ptx, w->parts[i].len);
		if (!copy || no_contraction(&copy, &w->parts[i].len, w->err, sizeof(w->err)))
			return free(copy), snprintf(w->err, sizeof(w->err), "out of memory"), -1;
		w->parts[i].ptx = w->owned[w->nowned++] = copy;
	}
	CUjit_option opt[JIT_MAX_OPTS];
	void *val[JIT_MAX_OPTS];
	if (jit_options_of(&w->part_opts, w->sm, opt, val, jwhy, sizeof(jwhy)) < 0)
		return snprintf(why, n, "an -rdc program's objects cannot be compiled as they were: "
				"%s", jwhy), 0;
	XXH64_hash_t h = 0;
	for (size_t i = 0; i < w->nparts; i++)
		h = XXH3_64bits_withSeed(w->parts[i].ptx, w->parts[i].len, h);
	snprintf(w->origin_buf, sizeof(w->origin_buf), "rdc objects' PTX: %zu objects %016llx, "
		 "ptxas %s", w->nparts, (unsigned long long)h, w->part_opts.raw);
	w->origin = w->origin_buf;
	return 1;
}

/* CUBPF_JIT_CHECK=1 (a check for the GPU tests): the recovered PTX, not instrumented, compiled
 * by the driver's JIT with the options mapped from ptxas's, must give the cubin's own machine
 * code; the result is logged.  Context needed. */
static void jit_check(struct work *w, long elf)
{
	const char *env = getenv("CUBPF_JIT_CHECK");
	const uint8_t *data;
	size_t size, jsize;
	char why[160] = "", err[LIVE_ERRLEN] = "";
	if (!env || *env != '1' || !w->ctx || !w->ptx || elf < 0 ||
	    cubin_entry_data(w->img, (size_t)elf, &data, &size))
		return;
	jit_asm = &w->embedded.opts;
	void *cubin = shim_live_jit(w->ptx, w->ptx_len, &jsize, err, sizeof(err));
	jit_asm = NULL;
	int rc = cubin ? cubin_same_code(data, size, cubin, jsize, why, sizeof(why)) : -1;
	shim_log(SHIM_LOG_INFO, "live: jit check (%s %s): %s%s%s", w->embedded.opts.tool,
		 w->embedded.opts.raw, rc == 0 ? "the same machine code" : "different: ",
		 rc == 0 ? "" : cubin ? why : "", cubin ? "" : err);
	free(cubin);
}

/* The image, opened once per load: the one the core opened to describe it (ev->opened) when
 * there is one, else opened here (headers only).  Returns 0, or -1 (w->err). */
static int take_image(struct work *w)
{
	const struct shim_module_event *ev = w->ev;
	size_t max = ev->info.size ? ev->info.size : CUBIN_SIZE_UNKNOWN;
	if (ev->opened && ev->opened->data == ev->image) {
		w->img = ev->opened;
		w->img_borrowed = true;
		return 0;
	}
	return cubin_image_open(&w->img, ev->image, max, CUBIN_OPEN_IN_MEMORY, w->err,
				sizeof(w->err));
}

static void release_image(struct work *w)
{
	if (!w->img_borrowed)
		cubin_image_free(w->img);
	w->img = NULL;
}

/* CUBPF_DUMP_REFUSED=DIR: a cubin that keeps PTX cubpf would not use is written to
 * DIR/refused-PID-N.cubin with the reason beside it (.txt), so that a user can send it, or a
 * developer see why (`cubpf inspect` shows the same verdict).  Best effort, and said once. */
static void dump_refused(const struct work *w, long elf, const char *why)
{
	static atomic_uint n;
	const char *dir = getenv("CUBPF_DUMP_REFUSED");
	const uint8_t *data;
	size_t size;
	char path[4096];
	if (!dir || !*dir || elf < 0 || !w->embedded.sections ||
	    cubin_entry_data(w->img, (size_t)elf, &data, &size) != 0)
		return;
	unsigned i = atomic_fetch_add(&n, 1);
	snprintf(path, sizeof(path), "%s/refused-%d-%u.cubin", dir, (int)getpid(), i);
	FILE *f = fopen(path, "wbx");
	bool ok = f && fwrite(data, 1, size, f) == size;
	if (f)
		ok &= fclose(f) == 0;
	snprintf(path + strlen(path) - 6, 6, ".txt");
	FILE *t = ok ? fopen(path, "wx") : NULL;
	if (t) {
		fprintf(t, "%s\n", why);
		fclose(t);
	}
	shim_log(SHIM_LOG_INFO, "live: refused cubin written to %s (%s)", path,
		 ok ? "with the reason" : strerror(errno));
}

/* Takes the image and finds its PTX for the device, once for the whole load.  Returns 1, 0 when
 * the image has no usable PTX (said once, with the reason), -1 on an unreadable image
 * (w->err). */
static int open_image(struct work *w)
{
	const struct shim_module_event *ev = w->ev;
	char why[LIVE_ERRLEN];
	if (take_image(w))
		return -1;
	w->ptx_entry = cubin_choose_ptx(w->img, SIZE_MAX, w->sm);
	if (w->ptx_entry >= 0) {
		const uint8_t *text;
		if (cubin_entry_data(w->img, (size_t)w->ptx_entry, &text, &w->ptx_len) != 0)
			return snprintf(w->err, sizeof(w->err), "reading the PTX: %s",
					w->img->error), -1;
		w->ptx = (const char *)text;
		return 1;
	}
	long elf = choose_elf(w->img, w->sm);
	int rc = 0;
	why[0] = 0;
	if (w->img->wrapper_version == 2)
		rc = rdc_source(w, why, sizeof(why));
	else if (elf >= 0 && (rc = embedded_source(w, elf, why, sizeof(why))) == 1 && w->ptx)
		jit_check(w, elf);
	if (rc != 0)
		return rc; /* (2: a cache hit settled the load) */
	if (!why[0])
		no_entry_reason(w->img, w->sm, w->no_lineinfo, why, sizeof(why));
	note_no_ptx(ev, w->sm, why);
	dump_refused(w, elf, why);
	return 0;
}

/* The cache key of the image: its bytes; a fatbin wrapper's are the fatbins it points to (the
 * wrapper itself holds addresses), taken as the XXH3-128 of each. */
static bool image_key(struct work *w)
{
	const struct cubin_image *img = w->img;
	if (img->kind != CUBIN_IMAGE_WRAPPER)
		return img->size && img->size != CUBIN_SIZE_UNKNOWN &&
		       shim_live_cache_key(img->data, img->size, w->sm, w->origin, &w->key, &w->alt);
	size_t n = img->fatbin_count;
	XXH128_canonical_t *d = calloc(n + 1, sizeof(*d));
	if (!d || !n) {
		free(d);
		return false;
	}
	for (size_t i = 0; i < n; i++)
		XXH128_canonicalFromHash(&d[i], XXH3_128bits(img->fatbins[i].data, img->fatbins[i].size));
	bool ok = shim_live_cache_key(d, n * sizeof(*d), w->sm, w->origin, &w->key, &w->alt);
	free(d);
	return ok;
}

/* ctx->kernel_id for the rewriter: the shim's id, recorded for the cache entry. */
static uint32_t record_id(void *user, const char *mangled)
{
	struct work *w = user;
	uint32_t id = shim_live_kernel_id(NULL, mangled);
	if (w->cached)
		shim_live_manifest_add(&w->manifest, mangled, id);
	return id;
}

/* Instruments the image's PTX.  Returns 1 when kernels or device functions (fentry/fexit, a
 * .func's memory probes) were instrumented (w->out), 0 when there is nothing to do, -1 on
 * failure (w->err). */
int shim_live_instrument(const char *ptx, size_t len, uint32_t (*kernel_id)(void *, const char *),
		    void *user, char **out, size_t *out_len, struct ptx_inject_report *rep,
		    char *err, size_t errlen)
{
	struct ptx_inject_opts o = {
		.progs = shim_live_session.progs, .prog_cnt = shim_live_session.nprogs, .kernel_glob = shim_live_session.kernel_glob,
		.kernel_id = kernel_id, .user = user, .enable_words = shim_live_session.enable_words,
		.no_shared = !shim_live_session.shared_sums,
	};
	struct vm_map_def *defs = calloc(shim_live_session.nmaps + 1, sizeof(*defs));
	for (uint32_t i = 0; defs && i < shim_live_session.nmaps; i++)
		defs[i] = shim_live_session.maps[i].def;
	o.maps = defs, o.map_cnt = shim_live_session.nmaps;
	int rc = defs ? ptx_instrument(ptx, strnlen(ptx, len), &o, out, out_len, rep, err, errlen)
		      : -1;
	free(defs);
	if (rc == 0 && rep->instrumented == 0 && rep->funcs == 0) {
		atomic_fetch_add(&shim_live_session.n.modules_untouched, 1);
		free(*out);
		*out = NULL;
	}
	if (rc != 0 && !err[0])
		snprintf(err, errlen, "out of memory");
	return rc != 0 ? -1 : *out != NULL;
}


/* The objects of an -rdc program: each instrumented (or kept as it is), with the maps declared
 * .extern (shim_live_jit_parts adds their definitions); w->out is their text one after the other,
 * for the cache.  Same returns as instrument(). */
static int instrument_parts(struct work *w)
{
	struct ptx_inject_report rep;
	size_t total = 0;
	for (size_t i = 0; i < w->nparts; i++) {
		struct live_part *p = &w->parts[i];
		int rc = shim_live_instrument(p->ptx, p->len, record_id, w, &p->out, &p->out_len, &rep,
					 w->err, sizeof(w->err));
		if (rc < 0)
			return -1;
		if (rc == 0 && !(p->out = strndup(p->ptx, p->len)))
			return snprintf(w->err, sizeof(w->err), "out of memory"), -1;
		if (rc == 0)
			p->out_len = p->len;
		shim_live_extern_maps(p->out);
		w->rep.instrumented += rep.instrumented, w->rep.kernels += rep.kernels;
		w->rep.entry_sites += rep.entry_sites, w->rep.exit_sites += rep.exit_sites;
		w->rep.mem_sites += rep.mem_sites, w->rep.block_sites += rep.block_sites;
		w->rep.sync_sites += rep.sync_sites, w->rep.funcs += rep.funcs;
		total += p->out_len + 32;
		if (rc > 0 && !w->label[0]) /* (the rewriter's parse named it: no lexing again) */
			snprintf(w->label, sizeof(w->label), "%s", rep.label[0] ? rep.label : "module");
	}
	if (!w->rep.instrumented && !w->rep.funcs)
		return 0;
	if (!(w->out = malloc(total + 1)))
		return snprintf(w->err, sizeof(w->err), "out of memory"), -1;
	w->out_len = 0;
	for (size_t i = 0; i < w->nparts; i++)
		w->out_len += (size_t)sprintf(w->out + w->out_len, "%s\n// cubpf: next object\n",
					      w->parts[i].out);
	return 1;
}

static int instrument(struct work *w)
{
	uint64_t t0 = now_ns();
	int rc = w->nparts ? instrument_parts(w)
			   : shim_live_instrument(w->ptx, w->ptx_len, record_id, w, &w->out,
					     &w->out_len, &w->rep, w->err, sizeof(w->err));
	w->rewrite_ns = now_ns() - t0;
	return rc;
}

static void free_parts(struct work *w)
{
	for (size_t i = 0; w->parts && i < w->nparts; i++)
		free(w->parts[i].out);
	free(w->parts);
	w->parts = NULL;
	for (size_t i = 0; i < w->nobjs; i++)
		cubin_image_free(w->objs[i]);
	w->nobjs = 0;
	for (size_t i = 0; i < w->nowned; i++)
		free(w->owned[i]);
	w->nowned = 0;
}

void shim_live_ptx_label(const char *ptx, size_t len, const char *fallback, char *label, size_t n)
{
	struct cubin_kernels k;
	char err[CUBIN_ERRLEN];
	snprintf(label, n, "%s", fallback);
	if (cubin_ptx_kernels(ptx, len, &k, err, sizeof(err)) == 0) {
		if (k.count)
			snprintf(label, n, "%s%s", k.kernels[0].name, k.count > 1 ? ", ..." : "");
		cubin_kernels_free(&k);
	}
}

static bool handled(const struct shim_module_event *ev)
{
	switch (ev->api) {
	case SHIM_LOAD_MODULE_LOAD: /* file loads: the wrapper hands us the file's bytes */
	case SHIM_LOAD_MODULE_DATA:
	case SHIM_LOAD_MODULE_DATA_EX:
	case SHIM_LOAD_MODULE_FATBINARY:
	case SHIM_LOAD_LIBRARY_DATA:
	case SHIM_LOAD_LIBRARY_FILE:
		break;
	default:
		return false; /* link steps: link.c */
	}
	return ev->image && (ev->info.kind == SHIM_IMAGE_PTX || ev->info.kind == SHIM_IMAGE_FATBIN ||
			     ev->info.kind == SHIM_IMAGE_FATBIN_WRAPPER ||
			     ev->info.kind == SHIM_IMAGE_CUBIN);
}

/* Makes the substitute: the cubin the JIT made (with a context) or the PTX. */
static struct sub *make_sub(struct work *w, size_t *size)
{
	struct sub *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	snprintf(s->label, sizeof(s->label), "%s", w->label);
	s->library = w->ev->api == SHIM_LOAD_LIBRARY_DATA || w->ev->api == SHIM_LOAD_LIBRARY_FILE;
	if (!w->ctx) {
		s->image = w->out;
		*size = w->out_len + 1;
		w->out = NULL;
		return s;
	}
	uint64_t t0 = now_ns();
	void *cubin;
	if (w->nparts) {
		cubin = shim_live_jit_parts(w->parts, w->nparts, size, w->err, sizeof(w->err));
		if (cubin && shim_live_regs_fit_parts(w->img, w->sm, w->parts, w->nparts, &cubin, size,
						 w->err, sizeof(w->err)) != 0) {
			free(cubin);
			cubin = NULL;
		}
	} else {
		cubin = shim_live_jit(w->out, w->out_len, size, w->err, sizeof(w->err));
		if (cubin && shim_live_regs_fit(w->img, w->ptx_entry, w->sm, &w->out, &w->out_len, &cubin,
					   size, w->err, sizeof(w->err)) != 0) {
			free(cubin);
			cubin = NULL;
		}
	}
	w->jit_ns = now_ns() - t0;
	if (!cubin) {
		free(s);
		return NULL;
	}
	s->image = cubin;
	return s;
}

/* Hands the substitute to the driver in place of the application's image. */
static void substitute(struct shim_module_event *ev, struct sub *s, bool cubin)
{
	pending = s;
	ev->image = s->image;
	ev->info.kind = cubin ? SHIM_IMAGE_CUBIN : SHIM_IMAGE_PTX;
	ev->info.size = s->size;
	ev->info.ncubins = cubin ? 1 : 0; /* what the driver gets now (the load's log line) */
	ev->info.nptx = cubin ? 0 : 1;
}

/* Looks the module up in the cache.  Returns 1 when the load is settled (a hit substituted, or
 * a hit that says there is nothing to instrument, or a fallback), 0 to instrument it. */
static int cache_lookup(struct work *w, uint64_t t0)
{
	struct store_cache_entry e;
	store_key found = w->key; /* the entry's key: the load's, or its alias's */
	uint64_t t1 = now_ns();
	int rc = shim_live_cache_get(&w->key, &e);
	if (rc == 0 && shim_live_cache_alias_find(&w->alt, &found) &&
	    memcmp(&found, &w->key, sizeof(found)) && (rc = shim_live_cache_get(&found, &e)) == 1)
		shim_log(SHIM_LOG_DEBUG, "live: cache: %s, loaded before in this process (another "
			 "kernel id base)", e.name);
	uint64_t t2 = now_ns();
	if (rc <= 0) {
		if (rc == 0)
			atomic_fetch_add(&shim_live_session.n.cache_misses, 1);
		w->cached = rc == 0;
		return 0;
	}
	uint32_t n = 0;
	rc = shim_live_manifest_claim(e.manifest, e.manifest_size, &n, NULL, 0);
	if (rc != 0) { /* made with other kernel ids than this process would give: a miss */
		if (rc < 0)
			shim_live_cache_drop(&found);
		shim_log(SHIM_LOG_DEBUG, "live: cache entry for %s %s; instrumenting again", e.name,
			 rc < 0 ? "unreadable" : "made with other kernel ids");
		store_cache_entry_free(&e);
		atomic_fetch_add(&shim_live_session.n.cache_misses, 1);
		return 0;
	}
	atomic_fetch_add(&shim_live_session.n.cache_hits, 1);
	shim_live_cache_alias_note(&w->alt, &found);
	shim_log(SHIM_LOG_DEBUG, "live: cache hit: image and key %llu us, read %llu us, kernel ids "
		 "%llu us", (unsigned long long)(t1 - t0) / 1000, (unsigned long long)(t2 - t1) / 1000,
		 (unsigned long long)(now_ns() - t2) / 1000);
	snprintf(w->label, sizeof(w->label), "%s", e.name && e.name[0] ? e.name : "module");
	if (!e.cubin_size) { /* the rewriter found nothing to instrument here */
		atomic_fetch_add(&shim_live_session.n.modules_untouched, 1);
		shim_log(SHIM_LOG_INFO, "live: cache hit for %s (no kernel to instrument, %llu us)",
			 w->label, (unsigned long long)(now_ns() - t0) / 1000);
		store_cache_entry_free(&e);
		return 1;
	}
	struct sub *s = NULL;
	if (!shim_live_ctx_get(w->ctx, w->err, sizeof(w->err)))
		fallback(STORE_NOINST_MAPS, w->ev->api_name, w->label, w->err);
	else if (!(s = calloc(1, sizeof(*s))))
		fallback(STORE_NOINST_OTHER, w->ev->api_name, w->label, "out of memory");
	if (!s) {
		store_cache_entry_free(&e);
		return 1;
	}
	snprintf(s->label, sizeof(s->label), "%s", w->label);
	s->library = w->ev->api == SHIM_LOAD_LIBRARY_DATA || w->ev->api == SHIM_LOAD_LIBRARY_FILE;
	s->image = e.cubin;
	s->size = e.cubin_size;
	s->from_cache = true;
	s->key = found;
	e.cubin = NULL;
	store_cache_entry_free(&e);
	substitute((struct shim_module_event *)w->ev, s, true);
	atomic_fetch_add(&shim_live_session.n.kernels_instrumented, n);
	shim_log(SHIM_LOG_INFO, "live: cache hit for %s (%u kernel%s, cubin %zu bytes, %llu us)",
		 w->label, n, n == 1 ? "" : "s", s->size, (unsigned long long)(now_ns() - t0) / 1000);
	return 1;
}

/* Nothing to instrument in a module the cache knows now: an entry without a cubin, so that the
 * next process skips the rewrite too. */
static void put_untouched(struct work *w)
{
	size_t msize = 0;
	char *m = shim_live_manifest_finish(&w->manifest, &msize);
	struct store_cache_entry e = { .manifest = m, .manifest_size = msize, .name = "module",
				       .sm = w->sm, .rewrite_ns = w->rewrite_ns };
	if (m) {
		shim_live_cache_put(&w->key, &e);
		shim_live_cache_alias_note(&w->alt, &w->key);
	}
	free(m);
}

/* Keeps what the put needs (after the driver accepts the cubin) in the substitute. */
static void keep_for_put(struct work *w, struct sub *s)
{
	s->manifest = shim_live_manifest_finish(&w->manifest, &s->manifest_size);
	if (!s->manifest)
		return;
	s->put = true;
	s->key = w->key;
	s->alt = w->alt;
	s->ptx = w->out;
	s->ptx_len = w->out_len;
	w->out = NULL;
	s->rewrite_ns = w->rewrite_ns;
	s->jit_ns = w->jit_ns;
	s->sm = w->sm;
}

static void module_loading(struct shim_module_event *ev);

void shim_live_module_loading(struct shim_module_event *ev, void *user)
{
	(void)user;
	shim_live_kernel_module(ev->path); /* KERNEL_ID records name a file load's path */
	module_loading(ev);
	shim_live_kernel_module(NULL);
	/* Process totals, so that a test loading one module sees what its load cost (the core's
	 * description of the image included). */
	shim_log(SHIM_LOG_DEBUG, "live: load path: %lu image opens, %lu PTX lexes (%lu rewriter "
		 "parses) so far", cubin_image_opens(), cubin_ptx_lexes(), ptx_parses());
}

/* A cubin linked from instrumented inputs (link.c): loaded as it is, its maps filled. */
static bool linked_output(struct shim_module_event *ev)
{
	char label[96];
	if (ev->api == SHIM_LOAD_MODULE_LOAD || ev->api == SHIM_LOAD_LIBRARY_FILE ||
	    !shim_live_link_output(ev->image, ev->info.size, label, sizeof(label)))
		return false;
	struct sub *s = calloc(1, sizeof(*s));
	if (!s)
		return true;
	snprintf(s->label, sizeof(s->label), "%s", label);
	s->library = ev->api == SHIM_LOAD_LIBRARY_DATA;
	s->image = ev->image;
	s->borrowed = true;
	pending = s;
	shim_log(SHIM_LOG_INFO, "live: %s: %s was linked from instrumented PTX", ev->api_name,
		 label);
	return true;
}

static void module_loading(struct shim_module_event *ev)
{
	pending = NULL;
	if (!shim_live_session.nprogs) /* host programs only */
		return;
	if (ev->api == SHIM_LOAD_LINK_DATA || ev->api == SHIM_LOAD_LINK_FILE) {
		shim_live_link_loading(ev);
		return;
	}
	if (ev->image && linked_output(ev))
		return;
	if (!handled(ev)) {
		if (ev->api <= SHIM_LOAD_LIBRARY_FILE)
			atomic_fetch_add(&shim_live_session.n.modules_skipped, 1);
		return;
	}
	uint64_t t0 = now_ns();
	struct work w = { .ev = ev, .t0 = t0 };
	if (shim_live_cu.cuCtxGetCurrent(&w.ctx) != CUDA_SUCCESS)
		w.ctx = NULL;
	w.sm = shim_live_ctx_sm(w.ctx);
	int rc = -1;
	if (!w.sm)
		snprintf(w.err, sizeof(w.err), "the device's compute capability is unknown");
	else if ((rc = open_image(&w)) > 0) {
		/* The cache holds cubins: only with a context (without one the PTX is substituted). */
		if (!w.keyed)
			w.cached = w.ctx && image_key(&w);
		if (rc == 2 || (!w.keyed && w.cached && cache_lookup(&w, t0))) {
			cubin_embedded_ptx_free(&w.embedded);
			free_parts(&w);
			release_image(&w);
			return;
		}
		rc = instrument(&w);
		if (rc == 0 && w.cached) /* nothing to instrument in PTX cubpf could use */
			put_untouched(&w);
	}
	if (rc <= 0) {
		cubin_embedded_ptx_free(&w.embedded);
		free_parts(&w);
		release_image(&w);
		if (rc < 0)
			fallback(w.sm ? STORE_NOINST_REWRITE : STORE_NOINST_OTHER, ev->api_name,
				 "module", w.err);
		shim_live_manifest_reset(&w.manifest);
		return;
	}
	if (!w.nparts) /* (the objects' label is their first instrumented kernel already) */
		snprintf(w.label, sizeof(w.label), "%s", w.rep.label[0] ? w.rep.label : "module");
	size_t size = 0;
	struct sub *s = NULL;
	if (w.ctx && !shim_live_ctx_get(w.ctx, w.err, sizeof(w.err)))
		fallback(STORE_NOINST_MAPS, ev->api_name, w.label, w.err);
	else {
		/* compiled as ptxas compiled it */
		jit_asm = w.nparts ? &w.part_opts : w.origin ? &w.embedded.opts : NULL;
		s = make_sub(&w, &size);
		jit_asm = NULL;
		if (!s)
			fallback(w.err[0] ? STORE_NOINST_JIT : STORE_NOINST_OTHER, ev->api_name,
				 w.label, w.err[0] ? w.err : "out of memory");
	}
	cubin_embedded_ptx_free(&w.embedded);
	free_parts(&w);
	release_image(&w); /* (make_sub may read the original's registers) */
	if (s) {
		s->size = size;
		if (w.cached)
			keep_for_put(&w, s);
	}
	free(w.out);
	shim_live_manifest_reset(&w.manifest);
	if (!s)
		return;
	substitute(ev, s, w.ctx != NULL);
	shim_log(SHIM_LOG_INFO, "live: %s: instrumented %u of %u kernels (%s; %u entry, %u exit, "
		 "%u memory sites), %s of %zu B for sm_%u in %llu ms", ev->api_name,
		 w.rep.instrumented, w.rep.kernels, w.label, w.rep.entry_sites, w.rep.exit_sites,
		 w.rep.mem_sites, w.ctx ? "cubin" : "PTX", size, w.sm,
		 (unsigned long long)(now_ns() - t0) / 1000000);
	if (w.cached)
		shim_log(SHIM_LOG_INFO, "live: cache miss for %s (rewrite %llu us, JIT %llu us)",
			 w.label, (unsigned long long)w.rewrite_ns / 1000,
			 (unsigned long long)w.jit_ns / 1000);
	atomic_fetch_add(&shim_live_session.n.kernels_instrumented, w.rep.instrumented);
}

/* ---- module_loaded ------------------------------------------------------------------------- */

/* Stores the pointers in the current context if not done yet.  Lock held. */
static int fill_locked(struct sub *s, CUcontext ctx)
{
	char err[LIVE_ERRLEN] = "";
	for (unsigned i = 0; i < s->nfilled; i++)
		if (s->filled[i] == ctx)
			return 0;
	/* a library's first launch in a context may be inside the application's capture */
	CUstreamCaptureMode mode = shim_live_relax();
	struct live_ctx *c = shim_live_ctx_get(ctx, err, sizeof(err));
	int r = !c || shim_live_fill(c, s->library ? NULL : (CUmodule)s->handle,
				     s->library ? (CUlibrary)s->handle : NULL, err, sizeof(err));
	shim_live_unrelax(mode);
	if (r != 0) {
		atomic_fetch_add(&shim_live_session.n.fill_failures, 1);
		shim_live_note(SHIM_LOG_WARN, STORE_NOINST_UNREACHABLE, NULL, s->label, 0, 0,
			  "live: %s (context %p): the probes' maps are not reachable: %s", s->label,
			  (void *)ctx, err);
		return -1;
	}
	if (s->nfilled < sizeof(s->filled) / sizeof(s->filled[0]))
		s->filled[s->nfilled++] = ctx;
	return 0;
}

void shim_live_module_loaded(const struct shim_module_event *ev, void *user)
{
	(void)user;
	if (ev->api >= SHIM_LOAD_LINK_DATA) {
		shim_live_link_loaded(ev);
		return;
	}
	struct sub *s = pending;
	if (!s || ev->image != s->image)
		return;
	pending = NULL;
	if (ev->result != CUDA_SUCCESS) { /* the wrapper loads the original image next */
		fallback(STORE_NOINST_REFUSED, ev->api_name, s->label,
			 shim_live_cu_error((CUresult)ev->result));
		if (s->from_cache) /* never offer it again */
			shim_live_cache_drop(&s->key);
		free(s->ptx);
		free(s->manifest);
		if (!s->borrowed)
			free((void *)s->image);
		free(s);
		return;
	}
	if (s->put) {
		struct store_cache_entry e = {
			.ptx = s->ptx, .ptx_size = s->ptx_len, .cubin = (void *)s->image,
			.cubin_size = s->size, .manifest = s->manifest,
			.manifest_size = s->manifest_size, .name = s->label, .sm = s->sm,
			.rewrite_ns = s->rewrite_ns, .jit_ns = s->jit_ns,
		};
		shim_live_cache_put(&s->key, &e);
		shim_live_cache_alias_note(&s->alt, &s->key);
		free(s->ptx);
		free(s->manifest);
		s->ptx = s->manifest = NULL;
		s->put = false;
	}
	s->handle = s->library ? (const void *)ev->library : (const void *)ev->module;
	CUcontext ctx = NULL;
	pthread_mutex_lock(&lock);
	if (shim_live_cu.cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx)
		fill_locked(s, ctx);
	s->ctx = ctx;
	s->next = subs;
	subs = s;
	if (s->library) /* a handle the launch caches took for "no substitute" may be this one */
		atomic_fetch_add(&subs_gen, 1);
	pthread_mutex_unlock(&lock);
	atomic_fetch_add(&shim_live_session.n.modules_instrumented, 1);
	if (s->library)
		atomic_fetch_add(&nsubs, 1);
}

void shim_live_module_unloaded(shim_module_t module, shim_library_t library, int result, void *user)
{
	(void)user;
	const void *h = module ? (const void *)module : (const void *)library;
	if (result != CUDA_SUCCESS || !h)
		return;
	pthread_mutex_lock(&lock);
	for (struct sub **p = &subs; *p; p = &(*p)->next)
		if ((*p)->handle == h) {
			struct sub *s = *p;
			*p = s->next;
			if (s->library) {
				atomic_fetch_sub(&nsubs, 1);
				atomic_fetch_add(&subs_gen, 1);
			}
			if (!s->borrowed)
				free((void *)s->image);
			free(s);
			break;
		}
	pthread_mutex_unlock(&lock);
}

static void sub_free(struct sub *s)
{
	free(s->ptx);
	free(s->manifest);
	free((void *)s->image);
	free(s);
}

void shim_live_module_ctx_gone(CUcontext ctx)
{
	if (!ctx)
		return;
	pthread_mutex_lock(&lock);
	for (struct sub **p = &subs; *p;) {
		struct sub *s = *p;
		unsigned k = 0;
		for (unsigned i = 0; i < s->nfilled; i++)
			if (s->filled[i] != ctx)
				s->filled[k++] = s->filled[i];
		s->nfilled = k;
		if (s->library || s->ctx != ctx) {
			p = &s->next;
			continue;
		}
		*p = s->next; /* the module went with its context: its handle may come back */
		sub_free(s);
	}
	atomic_fetch_add(&subs_gen, 1);
	pthread_mutex_unlock(&lock);
}

/* ---- launches: a library's first launch in a context --------------------------------------- */

/* Launch sampling: the kernel's enable word is set on the launch's own stream, before the launch,
 * to all-on for every Nth launch and all-off for the others (only when it changes). */
static void sample(const struct shim_launch_event *ev, const struct shim_kernel_info *k)
{
	CUcontext ctx = NULL;
	uint64_t n = 0;
	struct live_ctx *c;
	if (ev->api == SHIM_LAUNCH_GRAPH_NODE || ev->api == SHIM_LAUNCH_LEGACY ||
	    ev->api == SHIM_LAUNCH_MULTI_DEVICE)
		return; /* not a launch on a stream we can order against */
	if (!(ctx = shim_live_launch_ctx()) || !(c = shim_live_ctx_find(ctx)))
		return;
	uint32_t id = shim_live_kernel_launch(k->name, &n);
	if (!id || id >= CUBPF_ENABLE_WORDS)
		return;
	uint32_t word = n % shim_live_session.sample == 0 ? shim_live_control_mask() : 0;
	if (__atomic_load_n(&c->enable_set[id], __ATOMIC_RELAXED) == word)
		return; /* most launches: no change, no driver call */
	/* A launch being captured into a graph is not a launch: a memset before it would become a
	 * node of the application's graph (its nodes, their order and its replays would change).
	 * The graph's kernel runs with the word as it is when the graph is replayed. */
	CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
	if (shim_live_cu.cuStreamIsCapturing &&
	    (shim_live_cu.cuStreamIsCapturing((CUstream)ev->stream, &cs) != CUDA_SUCCESS ||
	     cs != CU_STREAM_CAPTURE_STATUS_NONE))
		return;
	if (__atomic_exchange_n(&c->enable_set[id], word, __ATOMIC_RELAXED) == word)
		return;
	size_t len = strlen(ev->api_name);
	bool ptsz = len > 5 && !strcmp(ev->api_name + len - 5, "_ptsz");
	CUresult r = (ptsz ? shim_live_cu.cuMemsetD32Async_ptsz : shim_live_cu.cuMemsetD32Async)(
		c->enable + id * sizeof(uint32_t), word, 1, (CUstream)ev->stream);
	if (r != CUDA_SUCCESS)
		shim_log(SHIM_LOG_DEBUG, "live: sampling %s: %s", k->name, shim_live_cu_error(r));
}

/* What each thread knows of the libraries it launched from lately: (library, context) pairs
 * whose map pointers are stored, or whose library has no substitute (the driver's own, a
 * SASS-only one), so that a launch finds its answer without the lock or a walk of every
 * substitute.  A training step alternates between the kernels of several libraries (the runtime
 * registers every fatbin as one), so one remembered pair was not enough: every launch of a
 * library other than the last, and every launch of a library without a substitute, took the
 * lock and walked the list.  Direct-mapped by the handle; valid while subs_gen stands. */
#define LIB_SEEN 64
static __thread struct lib_seen {
	const void *lib;
	CUcontext ctx;
	unsigned gen;
} lib_seen[LIB_SEEN];

static struct lib_seen *lib_seen_slot(const void *lib)
{
	return &lib_seen[((uintptr_t)lib * 0x9E3779B97F4A7C15ull) >> 58]; /* 6 bits: LIB_SEEN */
}

/* The lock held: the library's substitute gets its pointers in ctx if it has none there yet;
 * false when that failed (asked again at the next launch). */
static bool library_fill_locked(const void *lib, CUcontext ctx)
{
	for (struct sub *s = subs; s; s = s->next)
		if (s->library && s->handle == lib)
			return fill_locked(s, ctx) == 0;
	return true; /* no substitute: nothing to store */
}

void shim_live_launching(struct shim_launch_event *ev, void *user)
{
	(void)user;
	const struct shim_kernel_info *k = ev->kernel;
	CUcontext ctx = NULL;
	shim_live_host_launch(ev, false);
	if ((shim_live_session.sample > 1 || shim_live_session.control_path) && k)
		sample(ev, k);
	if (!atomic_load_explicit(&nsubs, memory_order_relaxed) || !k || !k->library)
		return;
	if (!(ctx = shim_live_launch_ctx()))
		return;
	unsigned g = atomic_load_explicit(&subs_gen, memory_order_acquire);
	struct lib_seen *seen = lib_seen_slot(k->library);
	if (seen->lib == (const void *)k->library && seen->ctx == ctx && seen->gen == g)
		return; /* filled already, or nothing to fill */
	pthread_mutex_lock(&lock);
	if (library_fill_locked(k->library, ctx))
		*seen = (struct lib_seen){ k->library, ctx, g };
	pthread_mutex_unlock(&lock);
}

/* fork() child: see shim_live_maps_fork_child. */
void shim_live_module_fork_child(void)
{
	pthread_mutex_init(&lock, NULL);
}
