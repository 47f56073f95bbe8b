/* shim/live/link.c: PTX given to the driver's linker (what Numba and NVIDIA's ptxjit sample do).
 *
 * cuLinkAddData / cuLinkAddFile with PTX: the input is instrumented and handed to the linker in
 * place of the original (the driver compiles a PTX input when it is added: an instrumented input
 * it refuses is replaced by the original right away, see wrap_module.c).  Every instrumented
 * module defines the maps it uses (`__cubpf_map_<i>`, `__cubpf_enable`, `__cubpf_blocks`,
 * .visible .const), and two definitions would make cuLinkComplete fail, when the original
 * inputs can no longer be given: in a link, the instrumented inputs declare them .extern, and
 * one more input of cubpf's own, added before the first instrumented one, defines them all.
 * The linker's options (the application's cuLinkCreate) apply to the instrumented inputs as
 * they would to the originals.
 *
 * cuLinkComplete: the linked cubin of a link with an instrumented input is remembered (its
 * address, size and a hash of its bytes, since programs often copy it before loading it), and
 * when it is loaded, the module is not instrumented again and its maps' pointers are stored
 * (module.c asks shim_live_link_output).  The instrumented input is freed then. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "cubin/cubin.h"
#include "shim/live/internal.h"

#define MAX_INPUTS 64

/* One link state with instrumented inputs (or the output it made). */
struct link {
	const void *state;          /* CUlinkState; NULL once completed */
	char *ptx[MAX_INPUTS];      /* the instrumented inputs, until the link completes */
	unsigned kernels[MAX_INPUTS]; /* and their instrumented kernels */
	unsigned ninputs;
	const void *pending;        /* the substitute being added by this call */
	const void *out;            /* the linked cubin, as cuLinkComplete gave it */
	size_t out_size;
	XXH64_hash_t out_hash;
	char label[96];
	struct link *next;
};

static struct link *links;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_uint nlinks;          /* module loads skip the look-up while there is none */

static struct link *find_state(const void *state)
{
	for (struct link *l = links; l; l = l->next)
		if (l->state == state)
			return l;
	return NULL;
}

static uint32_t link_kernel_id(void *user, const char *mangled)
{
	(void)user;
	return shim_live_kernel_id(NULL, mangled);
}

/* The maps' declarations the rewriter writes: "<DECL>__cubpf_map_<i>;", "<DECL>__cubpf_enable;"
 * or "<DECL>__cubpf_blocks;". */
#define DECL ".visible .const .align 8 .u64 "
#define EXTERN ".extern  .const .align 8 .u64 " /* the same length: edited in place */

void shim_live_extern_maps(char *ptx)
{
	size_t n = sizeof(DECL) - 1;
	for (char *p = strstr(ptx, DECL); p; p = strstr(p + n, DECL))
		if ((p == ptx || p[-1] == '\n') && !strncmp(p + n, "__cubpf_", 8))
			memcpy(p, EXTERN, n);
}

int shim_live_link_definitions(void *state, char *err, size_t errlen)
{
	size_t cap = 128 + (size_t)(shim_live_session.nmaps + 1) * 64, len;
	char *ptx = malloc(cap);
	if (!ptx)
		return snprintf(err, errlen, "out of memory"), -1;
	len = (size_t)snprintf(ptx, cap, ".version 7.0\n.target sm_50\n.address_size 64\n");
	for (uint32_t i = 0; i < shim_live_session.nmaps && i < 64; i++)
		len += (size_t)snprintf(ptx + len, cap - len, DECL PTX_MAP_SYMBOL_FMT ";\n", i);
	if (shim_live_session.enable_words)
		len += (size_t)snprintf(ptx + len, cap - len, DECL CUBPF_ENABLE_SYMBOL ";\n");
	if (shim_live_block_table())
		len += (size_t)snprintf(ptx + len, cap - len, DECL CUBPF_BLOCKS_SYMBOL ";\n");
	CUresult r = shim_live_cu.cuLinkAddData_v2((CUlinkState)state, CU_JIT_INPUT_PTX, ptx, len + 1,
					      "cubpf_maps.ptx", 0, NULL, NULL);
	free(ptx);
	if (r != CUDA_SUCCESS)
		return snprintf(err, errlen, "the linker refused cubpf's map definitions (%s)",
				shim_live_cu_error(r)), -1;
	return 0;
}

/* The link record of a state, made (with cubpf's definitions added to the link) on its first
 * instrumented input.  Lock held. */
static struct link *link_of(const void *state, char *err, size_t errlen)
{
	struct link *l = find_state(state);
	if (l)
		return l;
	if (shim_live_link_definitions((void *)state, err, errlen))
		return NULL;
	if (!(l = calloc(1, sizeof(*l)))) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	l->state = state;
	l->next = links;
	links = l;
	atomic_fetch_add(&nlinks, 1);
	return l;
}

void shim_live_link_loading(struct shim_module_event *ev)
{
	char err[LIVE_ERRLEN] = "", *out = NULL;
	size_t len = 0;
	struct ptx_inject_report rep;
	if (!shim_live_session.nprogs || !ev->image || ev->info.kind != SHIM_IMAGE_PTX || !ev->link_state)
		return;
	size_t max = ev->info.size ? ev->info.size : strlen(ev->image) + 1;
	int rc = shim_live_instrument(ev->image, max, link_kernel_id, NULL, &out, &len, &rep, err,
				 sizeof(err));
	if (rc < 0)
		shim_live_note(SHIM_LOG_WARN, STORE_NOINST_REWRITE, ev->api_name, ev->path, 0, 0,
			  "live: %s: link input not instrumented, the original is linked: %s",
			  ev->api_name, err);
	if (rc <= 0)
		return;
	pthread_mutex_lock(&lock);
	struct link *l = link_of(ev->link_state, err, sizeof(err));
	if (!l || l->ninputs == MAX_INPUTS) {
		pthread_mutex_unlock(&lock);
		free(out);
		shim_live_note(SHIM_LOG_WARN, STORE_NOINST_OTHER, ev->api_name, ev->path, 0, 0,
			  "live: %s: link input not instrumented, the original is linked: %s",
			  ev->api_name, l ? "too many inputs" : err);
		return;
	}
	shim_live_extern_maps(out);
	l->kernels[l->ninputs] = rep.instrumented;
	l->ptx[l->ninputs++] = out;
	l->pending = out;
	if (!l->label[0])
		shim_live_ptx_label(out, len, "linked module", l->label, sizeof(l->label));
	pthread_mutex_unlock(&lock);
	ev->image = out;
	ev->info.size = len + 1;
	char label[96];
	shim_live_ptx_label(out, len, "linked module", label, sizeof(label));
	shim_log(SHIM_LOG_INFO, "live: %s: instrumented %u of %u kernels of a link input (%s; %u "
		 "entry, %u exit, %u memory sites)", ev->api_name, rep.instrumented, rep.kernels,
		 label, rep.entry_sites, rep.exit_sites, rep.mem_sites);
	atomic_fetch_add(&shim_live_session.n.kernels_instrumented, rep.instrumented);
}

/* The linker refused the instrumented input: it is forgotten (the wrapper adds the original). */
static void refused(struct link *l, const struct shim_module_event *ev)
{
	atomic_fetch_add(&shim_live_session.n.modules_fallback, 1);
	shim_live_note(SHIM_LOG_WARN, STORE_NOINST_JIT, ev->api_name, l->label, 0, 0,
		  "live: %s: %s not instrumented, the original input is linked: the linker refused "
		  "the instrumented PTX (%s)", ev->api_name, l->label,
		  shim_live_cu_error((CUresult)ev->result));
	free(l->ptx[--l->ninputs]);
	l->ptx[l->ninputs] = NULL;
	atomic_fetch_sub(&shim_live_session.n.kernels_instrumented, l->kernels[l->ninputs]);
	if (l->ninputs == 0)
		l->label[0] = 0;
}

void shim_live_link_loaded(const struct shim_module_event *ev)
{
	if (!ev->link_state || !atomic_load(&nlinks))
		return;
	pthread_mutex_lock(&lock);
	struct link *l = find_state(ev->link_state);
	if (l && ev->api == SHIM_LOAD_LINK_DATA && l->pending && ev->image == l->pending) {
		l->pending = NULL;
		if (ev->result != CUDA_SUCCESS)
			refused(l, ev);
	} else if (l && ev->api == SHIM_LOAD_LINK_COMPLETE) {
		l->state = NULL; /* a state may be destroyed and its address reused */
		for (unsigned i = 0; i < l->ninputs; i++)
			free(l->ptx[i]), l->ptx[i] = NULL;
		if (ev->result == CUDA_SUCCESS && ev->image && l->ninputs) {
			l->out = ev->image;
			l->out_size = ev->info.size; /* 0 when cubin/ cannot read it */
			l->out_hash = l->out_size ? XXH3_64bits(ev->image, l->out_size) : 0;
		}
	}
	pthread_mutex_unlock(&lock);
}

int shim_live_link_output(const void *image, size_t size, char *label, size_t n)
{
	if (!image || !atomic_load_explicit(&nlinks, memory_order_relaxed))
		return 0;
	int found = 0;
	pthread_mutex_lock(&lock);
	for (struct link *l = links; l && !found; l = l->next) {
		if (!l->out)
			continue;
		/* A copy of the linked cubin (same size and bytes), or, when its size is not known,
		 * the very buffer cuLinkComplete gave. */
		found = size && l->out_size ? size == l->out_size &&
					      XXH3_64bits(image, size) == l->out_hash
					    : l->out == image;
		if (found)
			snprintf(label, n, "%s", l->label);
	}
	pthread_mutex_unlock(&lock);
	return found;
}

/* fork() child: see shim_live_maps_fork_child. */
void shim_live_link_fork_child(void)
{
	pthread_mutex_init(&lock, NULL);
}
