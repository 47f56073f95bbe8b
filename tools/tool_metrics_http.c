/* tools/tool_metrics_http.c: the endpoint of `cubpf run --metrics [ADDR:]PORT`.
 *
 * vm/metrics_http.c serves it (the same server as the shim's CUBPF_METRICS) on a thread of
 * cubpf run's.  It runs in cubpf run, not in the program: it reads the traces the program's
 * processes write, so a slow or stuck client never touches a launch. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "tools/tools.h"
#include "vm/vm.h"

struct tool_metrics_server {
	int fd;
	char address[300];
	pthread_t thread;
	int started;
	atomic_int running;
	void (*body)(void *ctx, FILE *f);
	void *ctx;
};

struct tool_metrics_server *tool_metrics_listen(const char *spec, char *err, size_t errlen)
{
	struct tool_metrics_server *s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if ((s->fd = vm_metrics_listen(spec, s->address, sizeof(s->address), err, errlen)) < 0) {
		free(s);
		return NULL;
	}
	return s;
}

const char *tool_metrics_address(const struct tool_metrics_server *s)
{
	return s->address;
}

static void *serve(void *arg)
{
	struct tool_metrics_server *s = arg;
	vm_metrics_serve(s->fd, s->body, s->ctx, &s->running);
	return NULL;
}

int tool_metrics_start(struct tool_metrics_server *s, void (*body)(void *ctx, FILE *f), void *ctx)
{
	s->body = body, s->ctx = ctx;
	atomic_store(&s->running, 1);
	if (pthread_create(&s->thread, NULL, serve, s) != 0)
		return -1;
	s->started = 1;
	return 0;
}

void tool_metrics_stop(struct tool_metrics_server *s)
{
	if (!s)
		return;
	atomic_store(&s->running, 0);
	if (s->started)
		pthread_join(s->thread, NULL);
	close(s->fd);
	free(s);
}
