/* shim/log.c: the shim's log, a leaf: it needs nothing of the shim but its own settings, so
 * that every file (the forwarding core, plug-ins, the libraries under them through their
 * callers) can log from anywhere, during init included.
 *
 * Lines start with "cubpf: ", are filtered by CUBPF_LOG (off|error|warn|info|debug, warn by
 * default) and go to stderr, CUBPF_LOG_FD or CUBPF_LOG_FILE (shim_log_setup).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shim/shim.h"

static int log_level = SHIM_LOG_WARN;

static void read_log_level(void)
{
	static const char *const names[] = { "off", "error", "warn", "info", "debug" };
	const char *v = getenv("CUBPF_LOG");
	if (!v || !*v)
		return;
	for (int i = 0; i < 5; i++)
		if (!strcasecmp(v, names[i])) {
			log_level = i;
			return;
		}
	shim_log(SHIM_LOG_WARN, "CUBPF_LOG=%s is not one of off|error|warn|info|debug; using warn", v);
}

/* Where log lines go: stderr unless CUBPF_LOG_FD names an open descriptor (cubpf run passes a
 * pipe, so that the application's own stderr is left alone) or CUBPF_LOG_FILE a file to append
 * to ("%p" in it becomes the process id, so that the ranks of a job keep their own files). */
static int log_fd = 2;
static dev_t log_dev;  /* what log_fd was when chosen: an application that closes it and */
static ino_t log_ino;  /* opens a file of its own under the same number never gets our lines */

static int remember_log_fd(int fd, const char *want_id)
{
	struct stat st;
	if (fstat(fd, &st) != 0)
		return -1;
	if (want_id) { /* "DEV:INO" from cubpf run: the very pipe it made, not one of the app's */
		unsigned long long dev, ino;
		if (sscanf(want_id, "%llu:%llu", &dev, &ino) != 2 ||
		    dev != (unsigned long long)st.st_dev || ino != (unsigned long long)st.st_ino)
			return -1;
	}
	log_fd = fd, log_dev = st.st_dev, log_ino = st.st_ino;
	return 0;
}

/* Whether log_fd is still the descriptor we chose (stderr always is). */
static int log_fd_unchanged(void)
{
	struct stat st;
	return log_fd == 2 || (fstat(log_fd, &st) == 0 && st.st_dev == log_dev &&
			       st.st_ino == log_ino);
}

void shim_expand_pid(const char *in, char *out, size_t size)
{
	size_t o = 0;
	for (; *in && o + 1 < size; in++) {
		if (in[0] == '%' && in[1] == 'p') {
			o += (size_t)snprintf(out + o, size - o, "%d", (int)getpid());
			in++;
		} else {
			out[o++] = *in;
		}
		if (o >= size)
			o = size - 1;
	}
	out[o] = 0;
}

static void read_log_destination(void)
{
	const char *fd = getenv("CUBPF_LOG_FD"), *file = getenv("CUBPF_LOG_FILE");
	if (fd && *fd) {
		char *end;
		long n = strtol(fd, &end, 10);
		if ((*end && *end != ':') || n < 0 || n > INT32_MAX ||
		    remember_log_fd((int)n, *end ? end + 1 : NULL) != 0)
			shim_log(SHIM_LOG_WARN, "CUBPF_LOG_FD=%s is not an open descriptor (or not "
				 "the one named); logging to stderr", fd);
		return;
	}
	if (file && *file) {
		char path[4096];
		shim_expand_pid(file, path, sizeof(path));
		int f = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		if (f < 0 || remember_log_fd(f, NULL) != 0)
			shim_log(SHIM_LOG_WARN, "CUBPF_LOG_FILE=%s: %s; logging to stderr", path,
				 strerror(errno));
	}
}

void shim_log_setup(void)
{
	read_log_level();
	read_log_destination();
}

int shim_log_enabled(enum shim_log_level level)
{
	return level != SHIM_LOG_OFF && (int)level <= log_level;
}

/* One line, "cubpf: " and fmt, to the log's destination. */
static void emit(const char *fmt, va_list ap)
{
	char line[1040];
	int n = vsnprintf(line + 7, 1024, fmt, ap);
	memcpy(line, "cubpf: ", 7);
	n = 7 + (n < 0 ? 0 : n > 1023 ? 1023 : n);
	line[n++] = '\n';
	/* One write per line, so that lines of several threads do not interleave. */
	int saved = errno; /* logging inside a driver call must not change the caller's errno */
	if (!log_fd_unchanged())
		log_fd = 2; /* the application closed it (and may have reused the number) */
	ssize_t w;
	while ((w = write(log_fd, line, (size_t)n)) < 0 && errno == EINTR)
		;
	(void)w;
	errno = saved;
}

void shim_log(enum shim_log_level level, const char *fmt, ...)
{
	if (!shim_log_enabled(level))
		return;
	va_list ap;
	va_start(ap, fmt);
	emit(fmt, ap);
	va_end(ap);
}

void shim_log_print(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	emit(fmt, ap);
	va_end(ap);
}
