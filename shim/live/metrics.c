/* shim/live/metrics.c: CUBPF_METRICS=[ADDR:]PORT, the application process's own Prometheus
 * endpoint (the plain shim, without `cubpf run`; under `cubpf run --metrics` the run has one
 * endpoint for all its processes instead, tools/tool_metrics_http.c).
 *
 * A thread of cubpf's (signals blocked, relaxed capture mode like the others) accepts one client
 * at a time on 127.0.0.1 unless an address is given, answers GET /metrics with the text of
 * vm/metrics.c, anything else with 404, and closes.  It never takes a lock a launch takes: the
 * snapshot thread (maps.c), which reads the maps back anyway, publishes an immutable copy of
 * what a scrape shows (struct live_pub: the maps' non-zero entries, the kernel-id table) and the
 * server takes a reference to the latest one under pub_lock, which guards a pointer and a count
 * only; formatting and socket I/O happen after it is released.  Nobody scraping costs nothing:
 * copies are published only while scrapes come (a request in the last PUB_KEEP_NS; the maps
 * are not even read back without a trace), and nothing is formatted before a request.  A port
 * in use is one warning and the application runs on, without the endpoint. */
#define _GNU_SOURCE
#include <errno.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "shim/live/internal.h"

#define REQUEST_MAX 8192
#define CLIENT_TIMEOUT_S 2
#define PUB_KEEP_NS (60ull * 1000000000ull) /* publish while the last request is this recent */

static int listen_fd = -1;
static pthread_t server;
static atomic_int server_state; /* 0 none, 1 running, 2 stopping */
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

/* ---- HTTP ---------------------------------------------------------------------------------- */

static int read_head(int c, char *buf, size_t len)
{
	size_t n = 0;
	while (n + 1 < len) {
		ssize_t r = recv(c, buf + n, len - 1 - n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		n += (size_t)r;
		buf[n] = '\0';
		if (strstr(buf, "\r\n\r\n") || strstr(buf, "\n\n"))
			return 0;
	}
	return -1;
}

static void send_all(int c, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(c, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		p += w, n -= (size_t)w;
	}
}

static void respond(int c)
{
	char head[REQUEST_MAX], hdr[256], *text = NULL;
	size_t len = 0;
	if (read_head(c, head, sizeof(head)) != 0)
		return;
	int ok = !strncmp(head, "GET /metrics ", 13) || !strncmp(head, "GET /metrics?", 13) ||
		 !strncmp(head, "GET / ", 6);
	FILE *f = NULL;
	if (ok) {
		atomic_store(&last_request_ns, mono_ns());
		struct live_pub *p = fresh_pub();
		if ((f = open_memstream(&text, &len))) {
			body(f, p);
			fclose(f);
		}
		pub_release(p); /* before any I/O with the client */
	}
	int n = snprintf(hdr, sizeof(hdr), "HTTP/1.1 %s\r\nContent-Type: text/plain; version=0.0.4; "
			 "charset=utf-8\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
			 f ? "200 OK" : ok ? "500 Internal Server Error" : "404 Not Found",
			 f ? len : (size_t)0);
	send_all(c, hdr, (size_t)n);
	if (f)
		send_all(c, text, len);
	free(text);
}

static void *serve(void *arg)
{
	(void)arg;
	struct timeval tv = {.tv_sec = CLIENT_TIMEOUT_S};
	shim_live_thread_relax();
	while (atomic_load(&server_state) == 1) {
		struct pollfd p = {.fd = listen_fd, .events = POLLIN};
		if (poll(&p, 1, 100) <= 0)
			continue;
		int c = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		respond(c);
		close(c);
	}
	return NULL;
}

/* "[ADDR:]PORT" ([v6]:PORT for IPv6) into host and port; -1 when it is not that. */
static int split_spec(const char *spec, char *host, size_t hlen, char *port, size_t plen)
{
	const char *colon = strrchr(spec, ':');
	const char *h = "127.0.0.1", *p = colon ? colon + 1 : spec;
	size_t hl = strlen(h);
	if (colon) {
		h = spec, hl = (size_t)(colon - spec);
		if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']')
			h++, hl -= 2;
	}
	if (!*p || strspn(p, "0123456789") != strlen(p) || atol(p) > 65535 || hl >= hlen ||
	    strlen(p) >= plen)
		return -1;
	snprintf(host, hlen, "%.*s", (int)hl, h);
	snprintf(port, plen, "%s", p);
	return 0;
}

static int bind_spec(const char *spec, char *err, size_t errlen)
{
	char host[256], port[16];
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res;
	if (split_spec(spec, host, sizeof(host), port, sizeof(port)) != 0) {
		snprintf(err, errlen, "not [ADDR:]PORT");
		return -1;
	}
	int rc = getaddrinfo(host, port, &hints, &res), one = 1, fd = -1;
	if (rc != 0) {
		snprintf(err, errlen, "%s: %s", host, gai_strerror(rc));
		return -1;
	}
	fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, res->ai_protocol);
	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)); /* not SO_REUSEPORT */
	if (fd < 0 || bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 16) != 0) {
		snprintf(err, errlen, "cannot listen on %s:%s: %s", host, port, strerror(errno));
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return fd;
}

/* The port the system gave (spec's port 0) for the log line. */
static void name_address(const char *spec)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	unsigned port = 0;
	if (getsockname(listen_fd, (struct sockaddr *)&ss, &len) == 0)
		port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						      : ((struct sockaddr_in *)&ss)->sin_port);
	const char *colon = strrchr(spec, ':');
	snprintf(address, sizeof(address), "%.*s:%u", colon ? (int)(colon - spec) : 9,
		 colon ? spec : "127.0.0.1", port);
}

void shim_live_metrics_start(void)
{
	const char *spec = getenv("CUBPF_METRICS");
	char err[LIVE_ERRLEN];
	int expect = 0;
	if (!spec || !*spec || atomic_load(&server_state) != 0)
		return;
	if ((listen_fd = bind_spec(spec, err, sizeof(err))) < 0) {
		shim_log(SHIM_LOG_WARN, "live: CUBPF_METRICS=%s: %s; the program runs without the "
			 "metrics endpoint", spec, err);
		return;
	}
	name_address(spec);
	if (!atomic_compare_exchange_strong(&server_state, &expect, 1))
		return;
	sigset_t all, old; /* the application's signals stay with the application's threads */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&server, NULL, serve, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		atomic_store(&server_state, 0);
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
	atomic_store(&last_request_ns, 0);
	pthread_mutex_init(&pub_lock, NULL);
	pub = NULL; /* the parent's copy, left to it (its references may be held mid-scrape) */
}
