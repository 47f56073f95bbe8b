/* shim/live/metrics.c: CUBPF_METRICS=[ADDR:]PORT, the application process's own Prometheus
 * endpoint (the plain shim, without `cubpf run`; under `cubpf run --metrics` the run has one
 * endpoint for all its processes instead, tools/tool_metrics_http.c).
 *
 * A thread of cubpf's (signals blocked, relaxed capture mode like the others) runs the server of
 * vm/metrics_http.c (the same as cubpf run's): one client at a time on 127.0.0.1 unless an address
 * is given, GET /metrics answered with the text of vm/metrics.c, anything else with 404.  It never takes a lock a launch takes: the
 * snapshot thread (maps.c), which reads the maps back anyway, publishes an immutable copy of
 * what a scrape shows (struct live_pub: the maps' non-zero entries, the kernel-id table) and the
 * server takes a reference to the latest one under pub_lock, which guards a pointer and a count
 * only; formatting and socket I/O happen after it is released.  Nobody scraping costs nothing:
 * copies are published only while scrapes come (a request in the last PUB_KEEP_NS; the maps
 * are not even read back without a trace), and nothing is formatted before a request.  A port
 * in use is one warning and the application runs on, without the endpoint. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shim/live/internal.h"

#define PUB_KEEP_NS (60ull * 1000000000ull) /* publish while the last request is this recent */

static int listen_fd = -1;
static pthread_t server;
static atomic_int server_state; /* 0 none, 1 running, 2 stopping */
static atomic_int serving;      /* what vm_metrics_serve looks at: server_state == 1 */
static char address[300];
static atomic_uint_fast64_t last_request_ns; /* CLOCK_MONOTONIC of the latest request, 0 none */
static pthread_mutex_t pub_lock = PTHREAD_MUTEX_INITIALIZER;
static struct live_pub *pub;

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- publication --------------------------------------------------------------------------- */

void shim_live_pub_free(struct live_pub *p)
{
	if (!p)
		return;
	for (uint32_t i = 0; i < p->nmaps; i++)
		free(p->maps[i].kv);
	for (uint32_t i = 0; i < p->nkernels; i++)
		free(p->kernels[i]);
	free(p->maps);
	free(p->kernels);
	free(p->ids);
	free(p);
}

static void pub_release(struct live_pub *p)
{
	if (p && atomic_fetch_sub(&p->refs, 1) == 1)
		shim_live_pub_free(p);
}

static struct live_pub *pub_acquire(void)
{
	pthread_mutex_lock(&pub_lock);
	struct live_pub *p = pub;
	if (p)
		atomic_fetch_add(&p->refs, 1);
	pthread_mutex_unlock(&pub_lock);
	return p;
}

void shim_live_metrics_publish(struct live_pub *p)
{
	atomic_store(&p->refs, 1); /* the slot's reference */
	p->mono_ns = mono_ns();
	pthread_mutex_lock(&pub_lock);
	struct live_pub *old = pub;
	pub = p;
	pthread_mutex_unlock(&pub_lock);
	pub_release(old);
}

bool shim_live_metrics_on(void)
{
	return listen_fd >= 0;
}

bool shim_live_metrics_wanted(void)
{
	uint64_t last = atomic_load(&last_request_ns);
	return listen_fd >= 0 && last && mono_ns() - last < PUB_KEEP_NS;
}

/* ---- the text ------------------------------------------------------------------------------ */

static void counter(FILE *f, const char *labels, const char *name, const char *extra, uint64_t v)
{
	fprintf(f, "%s{%s%s%s} %llu\n", name, labels, *extra ? "," : "", extra, (unsigned long long)v);
}

/* cubpf's own health, from the session's counters (atomics: read without a lock). */
static void health(FILE *f, const char *labels, const struct live_pub *p)
{
	const struct live_counters *n = &shim_live_session.n;
	vm_metrics_family(f, "cubpf_modules_total", "counter", "module loads seen by the shim, by "
			  "what became of them");
	counter(f, labels, "cubpf_modules_total", "outcome=\"instrumented\"",
		atomic_load(&n->modules_instrumented));
	counter(f, labels, "cubpf_modules_total", "outcome=\"fallback\"", atomic_load(&n->modules_fallback));
	counter(f, labels, "cubpf_modules_total", "outcome=\"no_ptx\"", atomic_load(&n->modules_no_ptx));
	counter(f, labels, "cubpf_modules_total", "outcome=\"untouched\"", atomic_load(&n->modules_untouched));
	vm_metrics_family(f, "cubpf_kernels_instrumented", "gauge", "kernels that run with probes "
			  "(kernel ids given)");
	counter(f, labels, "cubpf_kernels_instrumented", "", p ? p->kernels_total : 0);
	vm_metrics_family(f, "cubpf_map_memory_bytes", "gauge", "memory the probes' maps take");
	counter(f, labels, "cubpf_map_memory_bytes", "kind=\"device\"", p ? p->device_bytes : 0);
	counter(f, labels, "cubpf_map_memory_bytes", "kind=\"pinned\"", p ? p->pinned_bytes : 0);
	vm_metrics_family(f, "cubpf_snapshot_age_seconds", "gauge", "how old the maps' copy shown "
			  "is (-1: none read yet)");
	fprintf(f, "cubpf_snapshot_age_seconds{%s} %.3f\n", labels,
		p ? (double)(mono_ns() - p->mono_ns) / 1e9 : -1.0);
}

static void body(FILE *f, const struct live_pub *p)
{
	char labels[32];
	snprintf(labels, sizeof(labels), "pid=\"%d\"", (int)getpid());
	health(f, labels, p);
	vm_metrics_family(f, "cubpf_kernel_info", "gauge", "cubpf's kernel ids and their kernels "
			  "(join cubpf_map_value on key where a map's key is a kernel id)");
	for (uint32_t i = 0; p && i < p->nkernels; i++)
		if (p->kernels[i])
			vm_metrics_kernel_info(f, labels, p->ids[i], p->kernels[i]);
	vm_metrics_family(f, "cubpf_map_value", "gauge", "a map's value per key and word (u64 "
			  "words, summed over per-SM copies; non-zero ones)");
	for (uint32_t i = 0; p && i < p->nmaps; i++) {
		const struct live_pub_map *m = &p->maps[i];
		struct vm_metrics_map vm = {.name = m->name, .device = m->device,
			.key_size = m->key_size, .value_size = m->value_size, .copies = m->copies,
			.kv = m->kv, .count = m->count};
		vm_metrics_map_values(f, labels, &vm);
	}
}

/* The latest copy, waiting (this thread only) for a fresh one when the snapshot thread was not
 * publishing: at most two intervals and a half. */
static struct live_pub *fresh_pub(void)
{
	uint64_t interval = shim_live_session.interval_ms * 1000000ull, asked = mono_ns();
	struct live_pub *p = pub_acquire();
	if (!shim_live_maps_thread_running())
		return p;
	while ((!p || p->mono_ns < asked - (asked > 2 * interval ? 2 * interval : asked)) &&
	       mono_ns() - asked < 2 * interval + interval / 2 && atomic_load(&server_state) == 1) {
		pub_release(p);
		nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
		p = pub_acquire();
	}
	return p;
}

/* ---- HTTP (vm/metrics_http.c serves it) ----------------------------------------------------- */

static void respond_body(void *ctx, FILE *f)
{
	(void)ctx;
	atomic_store(&last_request_ns, mono_ns());
	struct live_pub *p = fresh_pub();
	body(f, p);
	pub_release(p); /* before any I/O with the client */
}

static void *serve(void *arg)
{
	(void)arg;
	shim_live_thread_relax();
	vm_metrics_serve(listen_fd, respond_body, NULL, &serving);
	return NULL;
}

void shim_live_metrics_start(void)
{
	const char *spec = getenv("CUBPF_METRICS");
	char err[LIVE_ERRLEN];
	int expect = 0;
	if (!spec || !*spec || atomic_load(&server_state) != 0)
		return;
	if ((listen_fd = vm_metrics_listen(spec, address, sizeof(address), err, sizeof(err))) < 0) {
		shim_log(SHIM_LOG_WARN, "live: CUBPF_METRICS=%s: %s; the program runs without the "
			 "metrics endpoint", spec, err);
		return;
	}
	if (!atomic_compare_exchange_strong(&server_state, &expect, 1))
		return;
	atomic_store(&serving, 1);
	if (shim_thread_start(&server, serve, NULL) != 0) { /* small stack, no signals */
		atomic_store(&server_state, 0);
		atomic_store(&serving, 0);
		close(listen_fd);
		listen_fd = -1;
		shim_log(SHIM_LOG_WARN, "live: CUBPF_METRICS: cannot start its thread");
		return;
	}
	shim_log(SHIM_LOG_INFO, "live: metrics at http://%s/metrics", address);
}

void shim_live_metrics_stop(void)
{
	int expect = 1;
	atomic_store(&serving, 0);
	if (atomic_compare_exchange_strong(&server_state, &expect, 2))
		pthread_join(server, NULL);
	if (listen_fd >= 0)
		close(listen_fd);
	listen_fd = -1;
	atomic_store(&server_state, 0);
	pthread_mutex_lock(&pub_lock);
	struct live_pub *p = pub;
	pub = NULL;
	pthread_mutex_unlock(&pub_lock);
	pub_release(p);
}

/* fork(): the server thread is the parent's, and so is the port: the child closes its copy of
 * the socket (a child that probes on its own starts an endpoint of its own, child_start). */
void shim_live_metrics_fork_child(void)
{
	if (listen_fd >= 0)
		close(listen_fd);
	listen_fd = -1;
	atomic_store(&server_state, 0);
	atomic_store(&serving, 0);
	atomic_store(&last_request_ns, 0);
	pthread_mutex_init(&pub_lock, NULL);
	pub = NULL; /* the parent's copy, left to it (its references may be held mid-scrape) */
}
