/* tools/tool_metrics_http.c: the HTTP side of `cubpf run --metrics [ADDR:]PORT`.
 *
 * A minimal HTTP/1.x server for one client at a time (Prometheus scrapes one request per
 * target and interval): it reads a request's head (at most 8 KiB, 2 s), answers GET /metrics or
 * GET / with the body the caller writes (the body is made when asked: nobody scraping costs
 * nothing), anything else with 404, and closes the connection.  It runs in cubpf run, not in the
 * program: it reads the traces the program's processes write, so a slow or stuck client never
 * touches a launch.  Bound to 127.0.0.1 unless an address is given. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "tools/tools.h"

#define REQUEST_MAX 8192
#define CLIENT_TIMEOUT_S 2

struct tool_metrics_server {
	int fd;
	char address[300];
	pthread_t thread;
	int started;
	atomic_int stop;
	void (*body)(void *ctx, FILE *f);
	void *ctx;
};

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

static int bind_one(const struct addrinfo *a, char *err, size_t errlen)
{
	int one = 1, fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)); /* not SO_REUSEPORT */
	if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 16) != 0) {
		snprintf(err, errlen, "cannot listen: %s", strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

static void name_address(struct tool_metrics_server *s)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;
	if (getsockname(s->fd, (struct sockaddr *)&ss, &len) == 0) {
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
	snprintf(s->address, sizeof(s->address), ss.ss_family == AF_INET6 ? "[%s]:%u" : "%s:%u",
		 host, port);
}

struct tool_metrics_server *tool_metrics_listen(const char *spec, char *err, size_t errlen)
{
	char host[256], port[16];
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res;
	if (split_spec(spec, host, sizeof(host), port, sizeof(port)) != 0) {
		snprintf(err, errlen, "'%s' is not [ADDR:]PORT", spec);
		return NULL;
	}
	int rc = getaddrinfo(host, port, &hints, &res);
	if (rc != 0) {
		snprintf(err, errlen, "%s: %s", host, gai_strerror(rc));
		return NULL;
	}
	int fd = bind_one(res, err, errlen);
	freeaddrinfo(res);
	struct tool_metrics_server *s = fd >= 0 ? calloc(1, sizeof(*s)) : NULL;
	if (!s) {
		if (fd >= 0) {
			snprintf(err, errlen, "out of memory");
			close(fd);
		}
		return NULL;
	}
	s->fd = fd;
	name_address(s);
	return s;
}

const char *tool_metrics_address(const struct tool_metrics_server *s)
{
	return s->address;
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

static void respond(struct tool_metrics_server *s, int c)
{
	char head[REQUEST_MAX], hdr[256];
	char *body = NULL;
	size_t blen = 0;
	if (read_head(c, head, sizeof(head)) != 0)
		return;
	int ok = !strncmp(head, "GET /metrics ", 13) || !strncmp(head, "GET /metrics?", 13) ||
		 !strncmp(head, "GET / ", 6);
	FILE *f = ok ? open_memstream(&body, &blen) : NULL;
	if (f) {
		s->body(s->ctx, f);
		fclose(f);
	}
	int n = snprintf(hdr, sizeof(hdr), "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			 "Connection: close\r\n\r\n", f ? "200 OK" : ok ? "500 Internal Server Error" :
			 "404 Not Found", "text/plain; version=0.0.4; charset=utf-8",
			 f ? blen : (size_t)0);
	send_all(c, hdr, (size_t)n);
	if (f)
		send_all(c, body, blen);
	free(body);
}

static void *serve(void *arg)
{
	struct tool_metrics_server *s = arg;
	struct timeval tv = {.tv_sec = CLIENT_TIMEOUT_S};
	while (!atomic_load(&s->stop)) {
		struct pollfd p = {.fd = s->fd, .events = POLLIN};
		if (poll(&p, 1, 100) <= 0)
			continue;
		int c = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		respond(s, c);
		close(c);
	}
	return NULL;
}

int tool_metrics_start(struct tool_metrics_server *s, void (*body)(void *ctx, FILE *f), void *ctx)
{
	s->body = body, s->ctx = ctx;
	if (pthread_create(&s->thread, NULL, serve, s) != 0)
		return -1;
	s->started = 1;
	return 0;
}

void tool_metrics_stop(struct tool_metrics_server *s)
{
	if (!s)
		return;
	atomic_store(&s->stop, 1);
	if (s->started)
		pthread_join(s->thread, NULL);
	close(s->fd);
	free(s);
}
