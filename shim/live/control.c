/* shim/live/control.c: switching GPU probes on and off while the application runs, without
 * reloading modules: CUBPF_CONTROL names a file whose lines say which programs run
 *     off            every program off        on            every program on
 *     off NAME       program NAME off         on NAME       program NAME on
 * read in order from "all on" each time the file changes (a missing or empty file: all on).
 * NAME is a GPU program's name (its function) or a glob.  The result is a mask of GPU programs
 * (bit p = program p, the enable-word layout of ptx-rewriter/layout.h) that the launching hook
 * folds into the kernel's enable word (module.c sample()); the file is looked at, at most
 * every 100 ms, from a launch. */
#define _GNU_SOURCE
#include <fnmatch.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <unistd.h>

#include "cubin/cubin.h"
#include "shim/live/internal.h"

#define CONTROL_EVERY_NS (100 * 1000 * 1000ull)

static pthread_mutex_t control_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_uint_fast32_t mask = UINT32_MAX;
static atomic_uint_fast64_t next_look_ns;
static struct timespec seen_mtime;
static off_t seen_size = -1;

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Bits of the GPU programs whose name matches `name` (programs from 32 on share bit 31). */
static uint32_t bits_of(const char *name)
{
	uint32_t b = 0;
	for (uint32_t p = 0; p < shim_live_session.nprogs; p++)
		if (!strcmp(shim_live_session.progs[p].name, name) || fnmatch(name, shim_live_session.progs[p].name, 0) == 0)
			b |= 1u << (p < 31 ? p : 31);
	return b;
}

/* One line: "on" / "off", then an optional program name.  Blank lines and '#' comments pass. */
static void apply_line(char *line, uint32_t *m)
{
	char verb[8], name[256] = "";
	int n = sscanf(line, "%7s %255s", verb, name);
	if (n < 1 || verb[0] == '#')
		return;
	bool on = !strcmp(verb, "on");
	if (!on && strcmp(verb, "off")) {
		shim_log(SHIM_LOG_WARN, "live: CUBPF_CONTROL: '%s' is neither on nor off", verb);
		return;
	}
	uint32_t b = n == 2 ? bits_of(name) : UINT32_MAX;
	if (n == 2 && !b)
		shim_log(SHIM_LOG_WARN, "live: CUBPF_CONTROL: no GPU program named %s", name);
	*m = on ? *m | b : *m & ~b;
}

static uint32_t read_control(const char *path)
{
	uint32_t m = UINT32_MAX;
	char err[CUBIN_ERRLEN + 4096];
	int fd = cubin_file_open(path, NULL, err, sizeof(err)); /* a FIFO is not waited on */
	FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
	if (!f) {
		if (fd >= 0)
			close(fd);
		return m;
	}
	char line[512];
	while (fgets(line, sizeof(line), f))
		apply_line(line, &m);
	fclose(f);
	return m;
}

uint32_t shim_live_control_mask(void)
{
	if (!shim_live_session.control_path)
		return UINT32_MAX;
	uint64_t now = mono_ns();
	if (now < atomic_load_explicit(&next_look_ns, memory_order_relaxed) ||
	    pthread_mutex_trylock(&control_lock) != 0)
		return (uint32_t)atomic_load_explicit(&mask, memory_order_relaxed);
	atomic_store(&next_look_ns, now + CONTROL_EVERY_NS);
	struct stat st;
	bool exists = stat(shim_live_session.control_path, &st) == 0;
	off_t size = exists ? st.st_size : -1;
	struct timespec mt = exists ? st.st_mtim : (struct timespec){ 0, 0 };
	if (size != seen_size || mt.tv_sec != seen_mtime.tv_sec || mt.tv_nsec != seen_mtime.tv_nsec) {
		seen_size = size, seen_mtime = mt;
		uint32_t m = exists ? read_control(shim_live_session.control_path) : UINT32_MAX;
		if (atomic_exchange(&mask, m) != m)
			shim_log(SHIM_LOG_INFO, "live: CUBPF_CONTROL: GPU programs now %s (mask %#x)",
				 m == UINT32_MAX ? "all on" : m ? "partly on" : "all off", m);
	}
	pthread_mutex_unlock(&control_lock);
	return (uint32_t)atomic_load_explicit(&mask, memory_order_relaxed);
}

/* fork() child: see shim_live_maps_fork_child. */
void shim_live_control_fork_child(void)
{
	pthread_mutex_init(&control_lock, NULL);
}
