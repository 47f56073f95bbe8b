/* shim/live_link.c: PTX given to the driver's linker (what Numba and NVIDIA's ptxjit sample do).
 *
 * cuLinkAddData / cuLinkAddFile with PTX: the input is instrumented and handed to the linker in
 * place of the original (the driver compiles a PTX input when it is added: an instrumented input
 * it refuses is replaced by the original right away, see wrap_module.c).  One input per link is
 * instrumented: every instrumented module defines the maps' `__cubpf_map_<i>` globals, and two
 * definitions would make cuLinkComplete fail, where the original inputs can no longer be given.
 * The linker's options (the application's cuLinkCreate) apply to the instrumented input as they
 * would have to the original.
 *
 * cuLinkComplete: the linked cubin of a link with an instrumented input is remembered (its
 * address, size and a hash of its bytes, since programs often copy it before loading it), and
 * when it is loaded, the module is not instrumented again and its maps' pointers are stored
 * (live_module.c asks live_link_output).  The instrumented input is freed then. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "cubin/cubin.h"
#include "shim/live.h"

/* One link state with an instrumented input (or the output it made). */
struct link {
	const void *state;          /* CUlinkState; NULL once completed */
	char *ptx;                  /* the instrumented input, until the link completes */
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
	return live_kernel_id(NULL, mangled);
}

static void first_kernel(const char *ptx, size_t len, char *label, size_t n)
{
	struct cubin_kernels k;
	char err[CUBIN_ERRLEN];
	snprintf(label, n, "linked module");
	if (cubin_ptx_kernels(ptx, len, &k, err, sizeof(err)) == 0) {
		if (k.count)
			snprintf(label, n, "%s%s", k.kernels[0].name, k.count > 1 ? ", ..." : "");
		cubin_kernels_free(&k);
	}
}

void live_link_loading(struct shim_module_event *ev)
{
	char err[LIVE_ERRLEN] = "", *out = NULL;
	size_t len = 0;
	struct ptx_inject_report rep;
	if (!live.nprogs || !ev->image || ev->info.kind != SHIM_IMAGE_PTX || !ev->link_state)
		return;
	pthread_mutex_lock(&lock);
	bool taken = find_state(ev->link_state) != NULL;
	pthread_mutex_unlock(&lock);
	if (taken) {
		live_note(SHIM_LOG_INFO, STORE_NOINST_OTHER, ev->api_name, ev->path, ev->info.nkernels,
			  0, "live: %s: %u kernel%s not instrumented: another PTX input of this link "
			  "is instrumented already (one per link: each defines the probes' maps)",
			  ev->api_name, ev->info.nkernels, ev->info.nkernels == 1 ? "" : "s");
		return;
	}
	size_t max = ev->info.size ? ev->info.size : strlen(ev->image) + 1;
	int rc = live_instrument(ev->image, max, link_kernel_id, NULL, &out, &len, &rep, err,
				 sizeof(err));
	if (rc < 0)
		live_note(SHIM_LOG_WARN, STORE_NOINST_REWRITE, ev->api_name, ev->path, 0, 0,
			  "live: %s: link input not instrumented, the original is linked: %s",
			  ev->api_name, err);
	struct link *l = rc > 0 ? calloc(1, sizeof(*l)) : NULL;
	if (!l) {
		free(out);
		return;
	}
	l->state = ev->link_state;
	l->ptx = out;
	l->pending = out;
	first_kernel(out, len, l->label, sizeof(l->label));
	pthread_mutex_lock(&lock);
	l->next = links;
	links = l;
	pthread_mutex_unlock(&lock);
	atomic_fetch_add(&nlinks, 1);
	ev->image = out;
	ev->info.size = len + 1;
	shim_log(SHIM_LOG_INFO, "live: %s: instrumented %u of %u kernels of a link input (%s; %u "
		 "entry, %u exit, %u memory sites)", ev->api_name, rep.instrumented, rep.kernels,
		 l->label, rep.entry_sites, rep.exit_sites, rep.mem_sites);
	atomic_fetch_add(&live.n.kernels_instrumented, rep.instrumented);
}

/* The linker refused the instrumented input: it is forgotten (the wrapper adds the original). */
static void refused(struct link *l, const struct shim_module_event *ev)
{
	atomic_fetch_add(&live.n.modules_fallback, 1);
	live_note(SHIM_LOG_WARN, STORE_NOINST_JIT, ev->api_name, l->label, 0, 0,
		  "live: %s: %s not instrumented, the original input is linked: the linker refused "
		  "the instrumented PTX (%s)", ev->api_name, l->label,
		  live_cu_error((CUresult)ev->result));
	for (struct link **p = &links; *p; p = &(*p)->next)
		if (*p == l) {
			*p = l->next;
			break;
		}
	free(l->ptx);
	free(l);
	atomic_fetch_sub(&nlinks, 1);
}

void live_link_loaded(const struct shim_module_event *ev)
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
		free(l->ptx);
		l->ptx = NULL;
		if (ev->result == CUDA_SUCCESS && ev->image) {
			l->out = ev->image;
			l->out_size = ev->info.size; /* 0 when cubin/ cannot read it */
			l->out_hash = l->out_size ? XXH3_64bits(ev->image, l->out_size) : 0;
		}
	}
	pthread_mutex_unlock(&lock);
}

int live_link_output(const void *image, size_t size, char *label, size_t n)
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
