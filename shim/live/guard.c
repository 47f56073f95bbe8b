/* shim/live/guard.c: a probe object is loaded and verified behind a process boundary.
 *
 * The shim runs inside the application: a loader or verifier bug, or a pathological program
 * (a state explosion the verifier's budget does not stop in time), must not crash or hang it.
 * So the work is done first in a forked child, which has copy-on-write memory and nothing to
 * lose; it sends the verdicts back through a pipe and exits with _exit (no exit handlers of the
 * application run there).  The parent waits at most the timeout, then kills it.  Only when the
 * child reported in full does the parent load the same bytes itself (the loader is
 * deterministic: what loaded there loads here) and take the child's verdicts, so the verifier
 * never runs in the application's process at all.
 *
 * Cost: one fork (page tables: grows with the parent's mapped memory) and one load; measured in
 * shim/live/README.md ("Probe objects behind a boundary").  glibc's fork() keeps malloc consistent in
 * the child even when other threads held its locks.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shim/live/guard.h"

#define GUARD_MAGIC 0x43425046u  /* "CBPF" */
#define GUARD_END 0x454e4421u    /* "END!" */

struct guard_head {
	uint32_t magic;
	int32_t status;       /* 0: loaded (verdicts follow), -1: refused (a message follows) */
	uint32_t prog_cnt;
	uint32_t dead_bytes;  /* after the verdicts: each program's dead code marks (insn_cnt) */
};

static void errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (errlen)
		vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* Loads and verifies here, and drops each verified GPU program's dead code (vm_prog_drop_dead).
 * Returns 0 with *out, *verdicts and *dead (every program's marks, one after the other: what a
 * checker child sends so that the parent drops the same), or -1 with err. */
static int load_here(const void *data, size_t size, const char *name, uint32_t max_processed,
		     struct vm_object **out, struct live_verdict **verdicts, uint8_t **dead,
		     size_t *dead_bytes, char *err, size_t errlen)
{
	*out = NULL;
	*verdicts = NULL;
	*dead = NULL;
	if (vm_object_load(data, size, name, out, err, errlen) != 0)
		return -1;
	struct vm_object *o = *out;
	size_t total = 0;
	for (uint32_t i = 0; i < o->prog_cnt; i++)
		total += o->progs[i].insn_cnt;
	struct live_verdict *v = calloc(o->prog_cnt ? o->prog_cnt : 1, sizeof(*v));
	uint8_t *d = calloc(total + 1, 1);
	if (!v || !d) {
		free(v), free(d);
		vm_object_free(o);
		*out = NULL;
		errf(err, errlen, "out of memory");
		return -1;
	}
	struct vm_verify_opts vo = {.max_processed = max_processed};
	for (uint32_t i = 0, at = 0; i < o->prog_cnt; at += o->progs[i++].insn_cnt) {
		struct vm_verify_info info;
		vo.dead = d + at;
		v[i].ok = vm_verify(o, i, &vo, &info, NULL, 0) == 0;
		if (v[i].ok)
			vm_prog_drop_dead(&o->progs[i], vo.dead);
		else
			snprintf(v[i].reason, sizeof(v[i].reason), "%s", info.reason);
	}
	*verdicts = v;
	*dead = d;
	*dead_bytes = total;
	return 0;
}

static int load_in_process(const void *data, size_t size, const char *name,
			   uint32_t max_processed, struct vm_object **out,
			   struct live_verdict **verdicts, char *err, size_t errlen)
{
	uint8_t *dead;
	size_t bytes;
	int rc = load_here(data, size, name, max_processed, out, verdicts, &dead, &bytes, err,
			   errlen);
	if (rc == 0)
		free(dead);
	return rc;
}

static int write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w, n -= (size_t)w;
	}
	return 0;
}

/* The child: never returns. */
static void child(int fd, const void *data, size_t size, const char *name, uint32_t max_processed)
{
	static const int crash[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
	for (size_t i = 0; i < sizeof(crash) / sizeof(crash[0]); i++)
		signal(crash[i], SIG_DFL); /* the application's handlers have nothing to do here */
	/* Tests only (tests/live): a checker that crashes or hangs, as a cubpf bug would make it. */
	const char *fault = getenv("CUBPF_VERIFY_TEST_FAULT");
	if (fault && !strcmp(fault, "crash"))
		raise(SIGSEGV);
	if (fault && !strcmp(fault, "hang"))
		for (;;)
			pause();
	struct vm_object *o;
	struct live_verdict *v;
	uint8_t *dead;
	size_t dead_bytes = 0;
	char err[VM_ERRLEN] = "";
	int rc = load_here(data, size, name, max_processed, &o, &v, &dead, &dead_bytes, err,
			   sizeof(err));
	struct guard_head h = {GUARD_MAGIC, rc, rc == 0 ? o->prog_cnt : 0, (uint32_t)dead_bytes};
	uint32_t end = GUARD_END;
	int bad = write_all(fd, &h, sizeof(h));
	if (rc == 0)
		bad |= write_all(fd, v, sizeof(*v) * o->prog_cnt) | write_all(fd, dead, dead_bytes);
	else
		bad |= write_all(fd, err, sizeof(err));
	bad |= write_all(fd, &end, sizeof(end));
	_exit(bad ? 1 : 0);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads the child's report until it closes the pipe or the time is up.  Returns the bytes read
 * (in *buf, malloc'd), or -1 on a timeout. */
static ssize_t read_report(int fd, uint32_t timeout_ms, uint8_t **buf)
{
	size_t n = 0, cap = 4096;
	int64_t deadline = now_ms() + timeout_ms;
	*buf = malloc(cap);
	while (*buf) {
		int64_t left = deadline - now_ms();
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (left <= 0)
			return -1;
		int r = poll(&p, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0)
			return -1;
		if (n == cap) {
			uint8_t *b = cap < (1u << 26) ? realloc(*buf, cap *= 2) : NULL;
			if (!b)
				break;
			*buf = b;
		}
		ssize_t got = read(fd, *buf + n, cap - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		n += (size_t)got;
	}
	return (ssize_t)n;
}

/* Waits for the child (killed first when it overran).  Returns its wait status, or -1 when it
 * cannot be known (an application that reaps every child itself). */
static int reap(pid_t pid, bool kill_it)
{
	int status;
	if (kill_it)
		kill(pid, SIGKILL);
	for (;;) {
		pid_t r = waitpid(pid, &status, 0);
		if (r == pid)
			return status;
		if (r < 0 && errno != EINTR)
			return -1;
	}
}

/* Makes sense of the child's report: 0 with the verdicts (prog_cnt of them), -1 with err. */
static int parse_report(const uint8_t *buf, ssize_t n, int status, uint32_t timeout_ms,
			struct guard_head *h, const uint8_t **body, char *err, size_t errlen)
{
	uint32_t end;
	if (n < 0) {
		errf(err, errlen, "verifying it took longer than %u ms (killed; a pathological "
		     "program, or raise CUBPF_VERIFY_TIMEOUT_MS)", timeout_ms);
		return -1;
	}
	if (status != -1 && WIFSIGNALED(status)) {
		errf(err, errlen, "loading or verifying it crashed cubpf's checker (signal %d): a "
		     "cubpf bug, please report it with the object", WTERMSIG(status));
		return -1;
	}
	if ((size_t)n < sizeof(*h) + sizeof(end))
		goto early;
	memcpy(h, buf, sizeof(*h));
	memcpy(&end, buf + n - sizeof(end), sizeof(end));
	size_t want = h->status == 0 ? sizeof(struct live_verdict) * h->prog_cnt + h->dead_bytes
				     : VM_ERRLEN;
	if (h->magic != GUARD_MAGIC || end != GUARD_END || (size_t)n != sizeof(*h) + want + sizeof(end))
		goto early;
	*body = buf + sizeof(*h);
	if (h->status != 0) {
		errf(err, errlen, "%.*s", VM_ERRLEN - 1, (const char *)*body);
		return -1;
	}
	return 0;
early:
	errf(err, errlen, "cubpf's checker ended without a verdict (status 0x%x)", (unsigned)status);
	return -1;
}

/* The checker's dead code marks, dropped here as the checker dropped them. */
static int drop_dead(struct vm_object *o, const struct live_verdict *v, const uint8_t *dead,
		     size_t bytes, char *err, size_t errlen)
{
	size_t total = 0;
	for (uint32_t i = 0; i < o->prog_cnt; i++)
		total += o->progs[i].insn_cnt;
	if (total != bytes) {
		errf(err, errlen, "the object loaded differently in the checker (%zu instructions, "
		     "here %zu)", bytes, total);
		return -1;
	}
	for (uint32_t i = 0; i < o->prog_cnt; dead += o->progs[i++].insn_cnt)
		if (v[i].ok)
			vm_prog_drop_dead(&o->progs[i], dead);
	return 0;
}

static int load_forked(const void *data, size_t size, const char *name,
		       const struct live_guard_opts *opts, struct vm_object **out,
		       struct live_verdict **verdicts, char *err, size_t errlen)
{
	int fds[2];
	uint32_t timeout = opts->timeout_ms ? opts->timeout_ms : 10000;
	if (pipe2(fds, O_CLOEXEC) != 0)
		return load_in_process(data, size, name, opts->max_processed, out, verdicts, err,
				       errlen);
	pid_t pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return load_in_process(data, size, name, opts->max_processed, out, verdicts, err,
				       errlen);
	}
	if (pid == 0) {
		close(fds[0]);
		child(fds[1], data, size, name, opts->max_processed);
	}
	close(fds[1]);
	uint8_t *buf = NULL;
	ssize_t n = read_report(fds[0], timeout, &buf);
	close(fds[0]);
	int status = reap(pid, n < 0);
	struct guard_head h;
	const uint8_t *body = NULL;
	int rc = buf ? parse_report(buf, n, status, timeout, &h, &body, err, errlen) : -1;
	if (!buf)
		errf(err, errlen, "out of memory");
	if (rc == 0 && vm_object_load(data, size, name, out, err, errlen) != 0)
		rc = -1;
	if (rc == 0 && (*out)->prog_cnt != h.prog_cnt) {
		errf(err, errlen, "the object loaded differently in the checker (%u programs, here %u)",
		     h.prog_cnt, (*out)->prog_cnt);
		vm_object_free(*out);
		*out = NULL;
		rc = -1;
	}
	if (rc == 0 && !(*verdicts = malloc(sizeof(**verdicts) * (h.prog_cnt ? h.prog_cnt : 1)))) {
		vm_object_free(*out);
		*out = NULL;
		errf(err, errlen, "out of memory");
		rc = -1;
	}
	if (rc == 0) {
		memcpy(*verdicts, body, sizeof(**verdicts) * h.prog_cnt);
		rc = drop_dead(*out, *verdicts, body + sizeof(**verdicts) * h.prog_cnt,
			       h.dead_bytes, err, errlen);
	}
	if (rc != 0 && *out) {
		vm_object_free(*out), free(*verdicts);
		*out = NULL, *verdicts = NULL;
	}
	free(buf);
	return rc;
}

int shim_live_guard_load(const void *data, size_t size, const char *name,
		    const struct live_guard_opts *opts, struct vm_object **out,
		    struct live_verdict **verdicts, char *err, size_t errlen)
{
	static const struct live_guard_opts plain = {0};
	*out = NULL;
	*verdicts = NULL;
	if (!opts)
		opts = &plain;
	if (!opts->fork)
		return load_in_process(data, size, name, opts->max_processed, out, verdicts, err,
				       errlen);
	return load_forked(data, size, name, opts, out, verdicts, err, errlen);
}
