/* vm/metrics_http.c: the HTTP side of both metrics endpoints, the shim's (CUBPF_METRICS, in the
 * application's process) and cubpf run's (--metrics, beside it).
 *
 * A minimal HTTP/1.x server for one client at a time (Prometheus scrapes one request per target
 * and interval): it reads a request's head (at most 8 KiB, 2 s), answers GET /metrics or GET /
 * with the text the caller's body function writes (made when asked: nobody scraping costs
 * nothing), anything else with 404, and closes the connection.  The caller runs the loop on a
 * thread of its own (the shim's threads have rules of their own: small stacks, signals blocked,
 * relaxed capture mode), so that this file knows nothing of either. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "vm/vm.h"

#define REQUEST_MAX 8192
#define CLIENT_TIMEOUT_S 2

/* "[ADDR:]PORT" into host and port; [v6]:PORT takes a bracketed IPv6 address. */
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

static int bind_one(const struct addrinfo *a, const char *host, const char *port, char *err,
		    size_t errlen)
{
	int one = 1, fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)); /* not SO_REUSEPORT */
	if (fd < 0 || bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 16) != 0) {
		snprintf(err, errlen, "cannot listen on %s:%s: %s", host, port, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* "HOST:PORT" of the bound socket (the port the system gave for port 0). */
static void name_address(int fd, char *out, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;
	memset(&ss, 0, sizeof(ss));
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
		if (ss.ss_family == AF_INET) {
			struct sockaddr_in *in = (struct sockaddr_in *)&ss;
			inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
			port = ntohs(in->sin_port);
		} else if (ss.ss_family == AF_INET6) {
			struct sockaddr_in6 *in = (struct sockaddr_in6 *)&ss;
			inet_ntop(AF_INET6, &in->sin6_addr, host, sizeof(host));
			port = ntohs(in->sin6_port);
		}
	}
	snprintf(out, len, ss.ss_family == AF_INET6 ? "[%s]:%u" : "%s:%u", host, port);
}

int vm_metrics_listen(const char *spec, char *address, size_t alen, char *err, size_t errlen)
{
	char host[256], port[16];
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res;
	if (split_spec(spec, host, sizeof(host), port, sizeof(port)) != 0) {
		snprintf(err, errlen, "'%s' is not [ADDR:]PORT", spec);
		return -1;
	}
	int rc = getaddrinfo(host, port, &hints, &res);
	if (rc != 0) {
		snprintf(err, errlen, "%s: %s", host, gai_strerror(rc));
		return -1;
	}
	int fd = bind_one(res, host, port, err, errlen);
	freeaddrinfo(res);
	if (fd >= 0)
		name_address(fd, address, alen);
	return fd;
}

/* The request's head, up to the blank line; -1 when the client is too slow or says too much. */
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

static void respond(int c, vm_metrics_body_fn body, void *ctx)
{
	char head[REQUEST_MAX], hdr[256], *text = NULL;
	size_t len = 0;
	if (read_head(c, head, sizeof(head)) != 0)
		return;
	int ok = !strncmp(head, "GET /metrics ", 13) || !strncmp(head, "GET /metrics?", 13) ||
		 !strncmp(head, "GET / ", 6);
	FILE *f = ok ? open_memstream(&text, &len) : NULL;
	if (f) { /* the whole text first: the caller's state is let go before any client I/O */
		body(ctx, f);
		fclose(f);
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

void vm_metrics_serve(int fd, vm_metrics_body_fn body, void *ctx, const atomic_int *running)
{
	struct timeval tv = {.tv_sec = CLIENT_TIMEOUT_S};
	while (atomic_load(running)) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 100) <= 0)
			continue;
		int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		respond(c, body, ctx);
		close(c);
	}
}
