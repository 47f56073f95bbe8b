/* test_fault: the fault-injection suite (issue 28).  The trace writer, the shim over the fake
 * driver (tests/shim) and the cubpf command under the faults a shared machine brings: a full
 * file system (a tmpfs of a set size, mounted here when the machine lets root mount, else
 * RLIMIT_FSIZE), one full from the start, a read-only one, a file size limit, a write that fails
 * for a moment (failwrite.so, preloaded), memory limits, processes killed at random points, two
 * runs on one -o, joined and damaged traces, FIFOs and devices as inputs, absurd settings.
 *
 * Each case checks what was kept against what was written: the records fault_writer wrote
 * (events and metadata) = the records in the file + those the trace counts as dropped (DROP)
 * and as lost (LOST), and prints those figures.  Every command runs under timeout(1): a hang is
 * a failure with its case named, not a stalled make test. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "store/store.h"

#define B FAULT_TEST_BUILD
#define LIMIT "timeout -s KILL 60 " /* every command of a case: a bound on its time */
#define EVENTS 100000ull
#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
/* failwrite.so preloaded comes before ASan's runtime, which it does not use */
#define PRELOAD_ENV "ASAN_OPTIONS=verify_asan_link_order=0 "
#else
#define SANITIZED 0
#define PRELOAD_ENV ""
#endif

/* Under ASan a memory limit stops ASan itself ("Out of memory. ERROR: Failed to mmap": its
 * shadow and its own tables need address space as they go): the plain pass runs these cases. */
static void skip_if_sanitized(void)
{
	if (SANITIZED) {
		print_message("  under ASan a memory limit stops ASan itself: this case runs in the "
			      "plain pass\n");
		skip();
	}
}

/* ---- helpers ---------------------------------------------------------------------------- */

static char *temp_dir(void)
{
	const char *t = getenv("TMPDIR");
	char *d;
	if (asprintf(&d, "%s/cubpf-fault-XXXXXX", t && *t ? t : "/tmp") < 0 || !mkdtemp(d))
		fail_msg("cannot make a temporary folder");
	return d;
}

static void rm_tree(const char *dir)
{
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "umount -q %s/m 2>/dev/null; rm -rf %s", dir, dir);
	if (system(cmd) != 0)
		print_message("  (could not remove %s)\n", dir);
}

/* Runs a shell command; its exit status (128+N when killed by signal N) and its output. */
static int run(const char *cmd, char **out)
{
	char *full;
	if (asprintf(&full, "( %s ) 2>&1", cmd) < 0)
		fail();
	FILE *p = popen(full, "r");
	free(full);
	assert_non_null(p);
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap);
	size_t k;
	while (buf && (k = fread(buf + n, 1, cap - n - 1, p)) > 0) {
		n += k;
		if (n + 1 == cap)
			buf = realloc(buf, cap *= 2);
	}
	assert_non_null(buf);
	buf[n] = 0;
	int st = pclose(p);
	*out = buf;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The tmpfs mounted by the case running: unmounted after it even when it fails part way. */
static char mounted_at[4200];

/* A tmpfs of size bytes at DIR/m: 0, or -1 when this machine does not let us mount. */
static int mount_tmpfs(const char *dir, const char *opts, char *m, size_t len)
{
	snprintf(m, len, "%s/m", dir);
	mkdir(m, 0700);
	if (mount("tmpfs", m, "tmpfs", 0, opts) != 0)
		return -1;
	snprintf(mounted_at, sizeof(mounted_at), "%s", m);
	return 0;
}

static int unmount_left(void **state)
{
	(void)state;
	if (mounted_at[0] && umount2(mounted_at, MNT_DETACH) != 0 && errno != EINVAL &&
	    errno != ENOENT) /* unmounted and removed by the case itself */
		print_message("  (could not unmount %s: %s)\n", mounted_at, strerror(errno));
	mounted_at[0] = 0;
	return 0;
}

struct written {
	uint64_t events, meta;
	int status;
	char *out;
};

/* fault_writer PATH n, with a shell prefix (ulimit, environment); what it says it wrote. */
static void write_under(const char *prefix, const char *path, uint64_t n, struct written *w)
{
	char cmd[8192];
	snprintf(cmd, sizeof(cmd), "%s " LIMIT B "/tests/fault_writer %s %" PRIu64, prefix, path, n);
	w->status = run(cmd, &w->out);
	const char *l = strstr(w->out, "written ");
	unsigned long long e = 0, m = 0;
	if (l)
		sscanf(l, "written %llu events %llu metadata", &e, &m);
	w->events = e;
	w->meta = m;
}

/* What a trace holds, by the reader of store/. */
struct kept {
	uint64_t events, meta, dropped, lost, lost_frames, strings, after_lost;
	uint32_t cause;
	enum store_trace_state state;
	int opened;
	char error[STORE_ERRLEN];
};

static int is_event(uint16_t t)
{
	return t == STORE_REC_API || t == STORE_REC_KERNEL || t == STORE_REC_COPY ||
	       t == STORE_REC_PROBE || t == STORE_REC_KSPAN || t == STORE_REC_MAP;
}

static void count_record(struct kept *k, const struct store_trace_record *rec)
{
	struct store_rec_drop d;
	struct store_rec_lost l;
	if (is_event(rec->type)) {
		k->events++;
		k->after_lost += k->lost_frames > 0;
	} else if (rec->type == STORE_REC_DROP && store_rec_fixed(rec, &d, sizeof(d), NULL)) {
		k->dropped += d.source == STORE_DROP_WRITER ? d.records : 0;
	} else if (rec->type == STORE_REC_LOST && store_rec_fixed(rec, &l, sizeof(l), NULL)) {
		k->lost += l.records;
		k->lost_frames += l.frames;
		k->cause = l.cause;
	} else if (rec->type != STORE_REC_HEADER && rec->type != STORE_REC_END) {
		k->meta++;
		k->strings += rec->type == STORE_REC_STRING;
	}
}

static void read_trace(const char *path, struct kept *k)
{
	struct store_trace_record rec;
	memset(k, 0, sizeof(*k));
	struct store_trace_reader *r = store_trace_open(path, k->error, sizeof(k->error));
	if (!r)
		return;
	k->opened = 1;
	while (store_trace_next(r, &rec) == 1)
		count_record(k, &rec);
	k->state = store_trace_state(r);
	snprintf(k->error, sizeof(k->error), "%s", store_trace_reader_error(r));
	store_trace_close_reader(r);
}

static const char *state_name(enum store_trace_state s)
{
	static const char *const n[] = {"reading", "complete", "cut", "no end", "damaged"};
	return s <= STORE_TRACE_DAMAGED ? n[s] : "?";
}

/* The suite's one promise: every record written is in the file, or counted as dropped or lost. */
static void check_accounted(const char *what, const struct written *w, const struct kept *k)
{
	print_message("  %s: written %" PRIu64 " (%" PRIu64 " metadata), kept %" PRIu64 " (%" PRIu64
		      " metadata), dropped %" PRIu64 ", lost %" PRIu64 " in %" PRIu64 " frames (%s); "
		      "trace %s\n", what, w->events + w->meta, w->meta, k->events + k->meta, k->meta,
		      k->dropped, k->lost, k->lost_frames, store_lost_cause_name(k->cause),
		      state_name(k->state));
	assert_int_equal(k->events + k->meta + k->dropped + k->lost, w->events + w->meta);
}

static off_t file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? st.st_size : -1;
}

/* ---- file systems ---------------------------------------------------------------------------- */

/* A tmpfs of 256 KiB filled by the trace (RLIMIT_FSIZE where mounting is refused): the writer
 * stops at the last frame that fits, keeps every metadata record and says what it lost. */
static void test_disk_full(void **state)
{
	(void)state;
	char *dir = temp_dir(), m[4200], path[4300], prefix[64] = "";
	struct written w;
	struct kept k;
	int mounted = mount_tmpfs(dir, "size=256k", m, sizeof(m)) == 0;
	if (!mounted) {
		print_message("  no tmpfs here (%s): RLIMIT_FSIZE of 256 KiB instead\n", strerror(errno));
		snprintf(prefix, sizeof(prefix), "prlimit --fsize=262144");
	}
	snprintf(path, sizeof(path), "%s/full.trace", m);
	write_under(prefix, path, EVENTS, &w);
	read_trace(path, &k);
	check_accounted(mounted ? "tmpfs of 256 KiB" : "RLIMIT_FSIZE 256 KiB", &w, &k);
	assert_int_equal(w.status, 0);
	assert_int_equal(k.state, STORE_TRACE_COMPLETE);
	assert_true(k.lost > 0);
	assert_int_equal(k.cause, mounted ? STORE_LOST_DISK_FULL : STORE_LOST_SIZE_LIMIT);
	assert_int_equal(k.meta, w.meta); /* every string, the device, the program */
	assert_true(file_size(path) <= 256 << 10);
	free(w.out);
	rm_tree(dir);
	free(dir);
}

/* Full before the program starts: no trace can be made; the writer says so and leaves no empty
 * file, and cubpf run refuses before running the program, with the reason. */
static void test_disk_full_from_start(void **state)
{
	(void)state;
	char *dir = temp_dir(), m[4200], cmd[8192], *out;
	struct written w;
	if (mount_tmpfs(dir, "size=64k", m, sizeof(m)) != 0) {
		rm_tree(dir);
		free(dir);
		fail_msg("cannot mount a tmpfs here (%s): this case needs root (CI runs as root)",
			 strerror(errno));
	}
	snprintf(cmd, sizeof(cmd), "dd if=/dev/zero of=%s/fill bs=4k count=64 2>/dev/null; true", m);
	assert_int_equal(run(cmd, &out), 0);
	free(out);
	snprintf(cmd, sizeof(cmd), "%s/a.trace", m);
	write_under("", cmd, 1000, &w);
	print_message("  full file system, fault_writer: %s", w.out);
	assert_int_equal(w.status, 3);
	assert_non_null(strstr(w.out, "No space left on device"));
	assert_int_equal(file_size(cmd), -1);
	free(w.out);
	snprintf(cmd, sizeof(cmd), LIMIT B "/bin/cubpf run -o %s/run.trace --real-libcuda "
		 B "/tests/libcuda-fake.so -- " B "/tests/tools_fake_app 0", m);
	int rc = run(cmd, &out);
	print_message("  full file system, cubpf run -o: status %d: %s", rc, out);
	assert_int_equal(rc, 2);
	assert_non_null(strstr(out, "cannot make the trace"));
	assert_non_null(strstr(out, "No space left on device"));
	assert_null(strstr(out, "fake_app: done")); /* refused before the program ran */
	free(out);
	rm_tree(dir);
	free(dir);
}

/* A read-only file system: the same, with its reason. */
static void test_read_only(void **state)
{
	(void)state;
	char *dir = temp_dir(), m[4200], cmd[8192], *out;
	struct written w;
	if (mount_tmpfs(dir, "size=64k", m, sizeof(m)) != 0 ||
	    mount("tmpfs", m, "tmpfs", MS_REMOUNT | MS_RDONLY, "size=64k") != 0) {
		rm_tree(dir);
		free(dir);
		fail_msg("cannot mount a read-only tmpfs here (%s): this case needs root",
			 strerror(errno));
	}
	snprintf(cmd, sizeof(cmd), "%s/a.trace", m);
	write_under("", cmd, 1000, &w);
	print_message("  read-only file system, fault_writer: %s", w.out);
	assert_int_equal(w.status, 3);
	assert_non_null(strstr(w.out, "Read-only file system"));
	free(w.out);
	snprintf(cmd, sizeof(cmd), LIMIT B "/bin/cubpf run -o %s/run.trace --real-libcuda "
		 B "/tests/libcuda-fake.so -- " B "/tests/tools_fake_app 0", m);
	int rc = run(cmd, &out);
	print_message("  read-only file system, cubpf run -o: status %d: %s", rc, out);
	assert_int_equal(rc, 2);
	assert_non_null(strstr(out, "cannot make the trace"));
	assert_non_null(strstr(out, "Read-only file system"));
	free(out);
	rm_tree(dir);
	free(dir);
}

/* RLIMIT_FSIZE of 128 KiB (prlimit: bytes; a shell's ulimit -f counts 512- or 1024-byte blocks):
 * no SIGXFSZ kills the writer; the file stays under the limit. */
static void test_size_limit(void **state)
{
	(void)state;
	char *dir = temp_dir(), path[4200];
	struct written w;
	struct kept k;
	snprintf(path, sizeof(path), "%s/a.trace", dir);
	write_under("prlimit --fsize=131072", path, EVENTS, &w);
	read_trace(path, &k);
	check_accounted("RLIMIT_FSIZE 128 KiB", &w, &k);
	assert_int_equal(w.status, 0); /* was 153: SIGXFSZ */
	assert_int_equal(k.state, STORE_TRACE_COMPLETE);
	assert_int_equal(k.cause, STORE_LOST_SIZE_LIMIT);
	assert_int_equal(k.meta, w.meta);
	assert_true(file_size(path) <= 128 << 10);
	free(w.out);
	rm_tree(dir);
	free(dir);
}

/* The application under cubpf run with RLIMIT_FSIZE of 768 bytes: it runs to its end (status 0,
 * not 153 of SIGXFSZ) and its trace says what it lost and why; with a limit of 0 not even the
 * claim on -o can be written, and cubpf run says so before running the program. */
static void test_size_limit_app(void **state)
{
	(void)state;
	char *dir = temp_dir(), cmd[8192], path[4200], *out;
	struct kept k;
	snprintf(path, sizeof(path), "%s/app.trace", dir);
	snprintf(cmd, sizeof(cmd), "prlimit --fsize=768 " LIMIT B "/bin/cubpf run -t kcount "
		 "--cache off -o %s --real-libcuda " B "/tests/libcuda-fake.so -- "
		 B "/tests/tools_fake_app 0", path);
	int rc = run(cmd, &out);
	read_trace(path, &k);
	print_message("  app under RLIMIT_FSIZE 768 bytes: status %d, trace %s (%lld bytes), kept %" PRIu64
		      " records, lost %" PRIu64 " (%s)\n", rc, state_name(k.state),
		      (long long)file_size(path), k.events + k.meta, k.lost,
		      store_lost_cause_name(k.cause));
	assert_int_equal(rc, 0);
	assert_non_null(strstr(out, "fake_app: done"));
	assert_int_equal(k.state, STORE_TRACE_COMPLETE);
	assert_true(k.lost > 0);
	assert_int_equal(k.cause, STORE_LOST_SIZE_LIMIT);
	assert_non_null(strstr(out, "the writer could not write (file size limit"));
	assert_true(file_size(path) <= 768);
	free(out);
	snprintf(cmd, sizeof(cmd), "prlimit --fsize=0 " LIMIT B "/bin/cubpf run -t kcount "
		 "--cache off -o %s --real-libcuda " B "/tests/libcuda-fake.so -- "
		 B "/tests/tools_fake_app 0", path);
	rc = run(cmd, &out);
	print_message("  app under RLIMIT_FSIZE 0: status %d: %s", rc, out);
	assert_int_equal(rc, 2);
	assert_non_null(strstr(out, "cannot make the trace"));
	assert_non_null(strstr(out, "File too large"));
	free(out);
	rm_tree(dir);
	free(dir);
}

/* The same limit with the module cache on: SQLite's writes on the application's thread (the
 * database made, an entry put) fail with EFBIG instead of raising SIGXFSZ there (store_quiet
 * around the shim's hooks): the application runs to its end; the cache says why it was not
 * written. */
static void test_size_limit_app_with_cache(void **state)
{
	(void)state;
	char *dir = temp_dir(), cmd[8192], *out;
	snprintf(cmd, sizeof(cmd), "prlimit --fsize=2048 " LIMIT B "/bin/cubpf run -t kcount "
		 "--cache %s/c.db --real-libcuda " B "/tests/libcuda-fake.so -- "
		 B "/tests/tools_fake_app 0", dir);
	int rc = run(cmd, &out);
	print_message("  app with the cache under RLIMIT_FSIZE 2 KiB: status %d\n", rc);
	if (rc != 0)
		print_message("%s\n", out);
	assert_int_equal(rc, 0); /* was 153: SIGXFSZ from the cache's writes */
	assert_non_null(strstr(out, "fake_app: done"));
	free(out);
	rm_tree(dir);
	free(dir);
}

/* A disk full for a moment (a short write, then two failures, then room again): the part of a
 * frame that went out is cut off, so the frames after it are read; the two lost are counted. */
static void test_write_fails_for_a_moment(void **state)
{
	(void)state;
	char *dir = temp_dir(), path[4200];
	struct written w;
	struct kept k;
	snprintf(path, sizeof(path), "%s/a.trace", dir);
	write_under(PRELOAD_ENV "LD_PRELOAD=" B "/tests/failwrite.so FAULT_WRITE_SUFFIX=.trace "
		    "FAULT_WRITE_AFTER=100000 FAULT_WRITE_FAILS=3", path, EVENTS, &w);
	read_trace(path, &k);
	check_accounted("disk full for a moment", &w, &k);
	print_message("  records read after the loss: %" PRIu64 "\n", k.after_lost);
	assert_int_equal(w.status, 0);
	assert_int_equal(k.state, STORE_TRACE_COMPLETE);
	assert_int_equal(k.cause, STORE_LOST_DISK_FULL);
	assert_int_equal(k.lost_frames, 2);
	assert_true(k.after_lost > 0);
	assert_int_equal(k.meta, w.meta);
	free(w.out);
	rm_tree(dir);
	free(dir);
}

/* ---- memory ------------------------------------------------------------------------------- */

/* The address space used up after the writer started (ulimit -v reached mid-run): events are
 * dropped and counted; every metadata record is kept (its memory was taken at create). */
static void test_memory_limit(void **state)
{
	(void)state;
	skip_if_sanitized();
	char *dir = temp_dir(), path[4200];
	struct written w;
	struct kept k;
	snprintf(path, sizeof(path), "%s/a.trace", dir);
	write_under("FAULT_AS_SLACK=0", path, EVENTS, &w);
	read_trace(path, &k);
	check_accounted("address space used up", &w, &k);
	assert_int_equal(w.status, 0);
	assert_int_equal(k.state, STORE_TRACE_COMPLETE);
	assert_int_equal(k.meta, w.meta);
	assert_int_equal(k.strings, EVENTS / 500);
	assert_true(k.dropped > 0);
	free(w.out);
	rm_tree(dir);
	free(dir);
}

/* RLIMIT_AS (ulimit -v) from the start: with 16 MB the writer is made and keeps everything (its
 * threads' stacks are 1 MiB, not glibc's 8 MiB each: a limit the application fits in must not
 * be spent on them); with 4 MB, too small for the writer at all, it is not made, with a message,
 * and leaves no file; nothing crashes either way. */
static void test_memory_limit_from_start(void **state)
{
	(void)state;
	skip_if_sanitized();
	char *dir = temp_dir(), path[4200];
	struct written w;
	struct kept k;
	snprintf(path, sizeof(path), "%s/a.trace", dir);
	write_under("prlimit --as=16000000", path, 1000, &w);
	print_message("  RLIMIT_AS 16 MB from the start: status %d: %s", w.status, w.out);
	assert_int_equal(w.status, 0);
	read_trace(path, &k);
	check_accounted("RLIMIT_AS 16 MB", &w, &k);
	assert_int_equal(k.events, 1000);
	assert_int_equal(k.state, STORE_TRACE_COMPLETE);
	free(w.out);
	unlink(path);
	write_under("prlimit --as=4000000", path, 1000, &w);
	print_message("  RLIMIT_AS 4 MB from the start: status %d: %s", w.status, w.out);
	assert_int_equal(w.status, 3);
	assert_non_null(strstr(w.out, "create failed: "));
	assert_int_equal(file_size(path), -1);
	free(w.out);
	rm_tree(dir);
	free(dir);
}

/* ---- killed processes ----------------------------------------------------------------------- */

/* Starts sh -c cmd in a process group of its own, output to out; its pid. */
static pid_t spawn(const char *cmd, const char *out)
{
	pid_t pid = fork();
	if (pid == 0) {
		setpgid(0, 0);
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* The last "appended N" line fault_writer printed. */
static uint64_t last_appended(const char *out)
{
	FILE *f = fopen(out, "r");
	char line[256];
	unsigned long long n = 0, v;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "appended %llu", &v) == 1)
			n = v;
	if (f)
		fclose(f);
	return n;
}

/* SIGKILL at random points of a run: the trace reads to its last whole frame, never damaged,
 * with no more events than were appended. */
static void test_killed_at_random_points(void **state)
{
	(void)state;
	char *dir = temp_dir(), path[4200], out[4200], cmd[8192];
	unsigned seed = (unsigned)time(NULL);
	print_message("  seed %u\n", seed);
	srand(seed);
	for (int i = 0; i < 6; i++) {
		struct kept k;
		int ms = 30 + rand() % 400;
		snprintf(path, sizeof(path), "%s/k%d.trace", dir, i);
		snprintf(out, sizeof(out), "%s/k%d.out", dir, i);
		snprintf(cmd, sizeof(cmd), "exec " LIMIT B "/tests/fault_writer %s 100000000 500", path);
		pid_t pid = spawn(cmd, out);
		assert_true(pid > 0);
		usleep((useconds_t)ms * 1000);
		kill(-pid, SIGKILL);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		uint64_t appended = last_appended(out);
		read_trace(path, &k);
		print_message("  killed after %d ms: appended at least %" PRIu64 ", kept %" PRIu64
			      " events and %" PRIu64 " metadata records, trace %s\n", ms, appended,
			      k.events, k.meta, k.opened ? state_name(k.state) : k.error);
		if (!k.opened) { /* killed before its header was out: no file, or an empty one */
			assert_true(file_size(path) <= 0);
			continue;
		}
		assert_true(k.state == STORE_TRACE_NO_END || k.state == STORE_TRACE_CUT);
		assert_true(k.events <= appended + 100);
	}
	rm_tree(dir);
	free(dir);
}

/* The last "launched N" line fault_app printed. */
static uint64_t last_launched(const char *out)
{
	FILE *f = fopen(out, "r");
	char line[256];
	unsigned long long n = 0, v;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "launched %llu", &v) == 1)
			n = v;
	if (f)
		fclose(f);
	return n;
}

/* Kernel launches (KERNEL records) in a trace, and how it ends. */
static uint64_t launches_in(const char *path, struct kept *k)
{
	struct store_trace_record rec;
	uint64_t n = 0;
	memset(k, 0, sizeof(*k));
	struct store_trace_reader *r = store_trace_open(path, k->error, sizeof(k->error));
	if (!r)
		return 0;
	k->opened = 1;
	while (store_trace_next(r, &rec) == 1)
		n += rec.type == STORE_REC_KERNEL;
	k->state = store_trace_state(r);
	store_trace_close_reader(r);
	return n;
}

/* An application under the shim killed (SIGKILL) at random points while it launches: its
 * trace reads to its last whole frame, never damaged, with no launch it did not make, and all
 * but the last flush interval's (100 ms; launches every 2 ms here) of those it reported. */
static void test_app_killed_at_random_points(void **state)
{
	(void)state;
	char *dir = temp_dir(), path[4200], out[4200], cmd[8192];
	unsigned seed = (unsigned)time(NULL) ^ 0x5eed;
	print_message("  seed %u\n", seed);
	srand(seed);
	for (int i = 0; i < 4; i++) {
		struct kept k;
		int ms = 100 + rand() % 500;
		snprintf(path, sizeof(path), "%s/app%d.trace", dir, i);
		snprintf(out, sizeof(out), "%s/app%d.out", dir, i);
		snprintf(cmd, sizeof(cmd), "exec env CUBPF_CACHE=off CUBPF_TRACE=%s CUBPF_PROGRAMS="
			 B "/probes/kcount.bpf.o CUBPF_REAL_LIBCUDA=" B "/tests/libcuda-fake.so "
			 "LD_LIBRARY_PATH=" B "/lib " LIMIT B "/tests/fault_app 1000000 2000", path);
		pid_t pid = spawn(cmd, out);
		assert_true(pid > 0);
		usleep((useconds_t)ms * 1000);
		kill(-pid, SIGKILL);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		uint64_t said = last_launched(out), kept = launches_in(path, &k);
		print_message("  app killed after %d ms: launched at least %" PRIu64 ", trace holds %"
			      PRIu64 " launches, %s\n", ms, said, kept,
			      k.opened ? state_name(k.state) : k.error);
		if (!k.opened) { /* killed before the trace was made */
			assert_true(said == 0 && file_size(path) <= 0);
			continue;
		}
		assert_true(k.state == STORE_TRACE_NO_END || k.state == STORE_TRACE_CUT);
		assert_true(kept <= said + 10);
		assert_true(kept + 100 >= said); /* 100 ms of launches every 2 ms, and a margin */
	}
	rm_tree(dir);
	free(dir);
}

/* ---- two runs on one -o ------------------------------------------------------------------- */

static int wait_for_file(const char *path, int ms)
{
	for (int i = 0; i < ms / 10; i++) {
		if (access(path, F_OK) == 0)
			return 0;
		usleep(10000);
	}
	return -1;
}

/* The second `cubpf run -o SAME` while the first runs is refused and runs nothing; the first's
 * trace is its own, whole. */
static void test_two_runs_one_output(void **state)
{
	(void)state;
	char *dir = temp_dir(), path[4200], lock[4300], out[4200], cmd[8192], *o2;
	struct kept k;
	snprintf(path, sizeof(path), "%s/same.trace", dir);
	snprintf(lock, sizeof(lock), "%s.lock", path);
	snprintf(out, sizeof(out), "%s/first.out", dir);
	snprintf(cmd, sizeof(cmd), "exec " LIMIT B "/bin/cubpf run -t kcount -o %s --real-libcuda "
		 B "/tests/libcuda-fake.so -- sh -c '" B "/tests/tools_fake_app 0; sleep 1'", path);
	pid_t first = spawn(cmd, out);
	assert_int_equal(wait_for_file(lock, 10000), 0);
	snprintf(cmd, sizeof(cmd), LIMIT B "/bin/cubpf run -t kcount -o %s --real-libcuda "
		 B "/tests/libcuda-fake.so -- " B "/tests/tools_fake_app 0", path);
	int rc = run(cmd, &o2);
	int st;
	waitpid(first, &st, 0);
	read_trace(path, &k);
	print_message("  second run: status %d: %s  first run: status %d, its trace %s with %" PRIu64
		      " records\n", rc, o2, WIFEXITED(st) ? WEXITSTATUS(st) : -1,
		      state_name(k.state), k.events + k.meta);
	assert_int_equal(rc, 2);
	assert_non_null(strstr(o2, "is the output of another cubpf run still running"));
	assert_null(strstr(o2, "fake_app: done"));
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_int_equal(k.state, STORE_TRACE_COMPLETE);
	assert_true(k.events > 0);
	assert_int_equal(access(lock, F_OK), -1); /* the claim ends with the run */
	free(o2);
	rm_tree(dir);
	free(dir);
}

/* ---- hostile inputs ---------------------------------------------------------------------- */

/* `cat A B`: read as A alone, and not as complete (it was one process, "complete", before). */
static void test_joined_traces(void **state)
{
	(void)state;
	char *dir = temp_dir(), a[4200], b[4200], j[4200], cmd[16384], *out;
	struct written wa, wb;
	struct kept ka, kj;
	snprintf(a, sizeof(a), "%s/a.trace", dir);
	snprintf(b, sizeof(b), "%s/b.trace", dir);
	snprintf(j, sizeof(j), "%s/joined.trace", dir);
	write_under("", a, 5000, &wa);
	write_under("", b, 3000, &wb);
	snprintf(cmd, sizeof(cmd), "cat %s %s > %s", a, b, j);
	assert_int_equal(run(cmd, &out), 0);
	free(out);
	read_trace(a, &ka);
	read_trace(j, &kj);
	print_message("  A (%" PRIu64 " records) + B (%" PRIu64 "): read %" PRIu64 ", trace %s: %s\n",
		      wa.events + wa.meta, wb.events + wb.meta, kj.events + kj.meta,
		      state_name(kj.state), kj.error);
	assert_int_equal(kj.events, ka.events);
	assert_int_equal(kj.meta, ka.meta);
	assert_int_equal(kj.state, STORE_TRACE_DAMAGED);
	assert_non_null(strstr(kj.error, "files joined together"));
	snprintf(cmd, sizeof(cmd), LIMIT B "/bin/cubpf trace info %s", j);
	assert_int_equal(run(cmd, &out), 1);
	assert_non_null(strstr(out, "files joined together"));
	assert_null(strstr(out, "state     complete"));
	free(out);
	free(wa.out);
	free(wb.out);
	rm_tree(dir);
	free(dir);
}

/* A byte changed in the middle: every record before the damaged frame, reading stops there
 * and says where. */
static void test_damaged_trace(void **state)
{
	(void)state;
	char *dir = temp_dir(), a[4200];
	struct written w;
	struct kept k;
	snprintf(a, sizeof(a), "%s/a.trace", dir);
	write_under("", a, 20000, &w);
	off_t size = file_size(a);
	int fd = open(a, O_RDWR);
	assert_true(fd >= 0);
	uint8_t byte;
	assert_int_equal(pread(fd, &byte, 1, size / 2), 1);
	byte ^= 0x5a;
	assert_int_equal(pwrite(fd, &byte, 1, size / 2), 1);
	close(fd);
	read_trace(a, &k);
	print_message("  byte %lld of %lld changed: kept %" PRIu64 " of %" PRIu64 " records, trace "
		      "%s: %s\n", (long long)size / 2, (long long)size, k.events + k.meta,
		      w.events + w.meta, state_name(k.state), k.error);
	assert_int_equal(k.state, STORE_TRACE_DAMAGED);
	assert_true(k.events > 0 && k.events + k.meta < w.events + w.meta);
	assert_non_null(strstr(k.error, "file offset"));
	free(w.out);
	rm_tree(dir);
	free(dir);
}

/* A FIFO (no writer: opening it used to wait forever), a device, a folder of neither: refused
 * at once by every reading command. */
static void test_fifo_and_devices(void **state)
{
	(void)state;
	char *dir = temp_dir(), fifo[4200], cmd[8192], *out;
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	const char *inputs[] = {fifo, "/dev/null", "/dev/zero"};
	const char *cmds[] = {"info", "dump", "stats"};
	for (size_t i = 0; i < sizeof(inputs) / sizeof(inputs[0]); i++)
		for (size_t c = 0; c < sizeof(cmds) / sizeof(cmds[0]); c++) {
			snprintf(cmd, sizeof(cmd), "timeout -s KILL 10 " B "/bin/cubpf trace %s %s",
				 cmds[c], inputs[i]);
			int rc = run(cmd, &out);
			print_message("  trace %s %s: status %d: %s", cmds[c], inputs[i], rc, out);
			assert_true(rc != 0 && rc != 128 + SIGKILL);
			free(out);
		}
	rm_tree(dir);
	free(dir);
}

/* ---- settings ----------------------------------------------------------------------------- */

/* Absurd values of the writer's settings (CUBPF_TRACE_THREADS, the log, spans, the cache's wait)
 * under the shim: the application runs to its end, with or without a trace. */
static void test_absurd_settings(void **state)
{
	(void)state;
	char *dir = temp_dir(), cmd[8192], *out;
	const char *env[] = {"CUBPF_TRACE_THREADS=-1", "CUBPF_TRACE_THREADS=0",
			     "CUBPF_TRACE_THREADS=99999999999999999999999", "CUBPF_TRACE_THREADS=abc",
			     "CUBPF_LOG=loudest", "CUBPF_SPANS=banana", "CUBPF_CACHE_WAIT_MS=-5",
			     "CUBPF_TRACE=", "CUBPF_TRACE=/dev/null/x"};
	for (size_t i = 0; i < sizeof(env) / sizeof(env[0]); i++) {
		snprintf(cmd, sizeof(cmd), "cd %s && env CUBPF_TRACE=%s/t.trace CUBPF_CACHE=off %s "
			 "CUBPF_REAL_LIBCUDA=" B "/tests/libcuda-fake.so LD_LIBRARY_PATH=" B "/lib "
			 LIMIT B "/tests/tools_fake_app 0; rm -f %s/t.trace*", dir, dir, env[i], dir);
		int rc = run(cmd, &out);
		print_message("  %s: status %d\n", env[i], rc);
		assert_int_equal(rc, 0);
		assert_non_null(strstr(out, "fake_app: done"));
		free(out);
	}
	rm_tree(dir);
	free(dir);
}

/* Absurd options of the writer itself: made and closed cleanly, or refused with a message. */
static void test_absurd_writer_options(void **state)
{
	(void)state;
	char *dir = temp_dir(), path[4200], err[STORE_ERRLEN];
	const struct store_trace_options opts[] = {
		{.buffer_bytes = 1, .batch_bytes = (size_t)-1, .flush_ms = 1, .level = 1000,
		 .workers = -7},
		{.buffer_bytes = (size_t)-1, .batch_bytes = 1, .flush_ms = (unsigned)-1,
		 .level = -1000000, .workers = 1000},
		{.buffer_bytes = (size_t)-1 / 2, .batch_bytes = (size_t)-1 / 4, .level = 22},
	};
	snprintf(path, sizeof(path), "%s/a.trace", dir);
	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		pid_t pid = fork();
		if (pid == 0) {
			alarm(60);
			struct store_trace_writer *w = store_trace_create(path, NULL, &opts[i], err,
									  sizeof(err));
			struct store_rec_api a = {.begin_ns = 1};
			for (int n = 0; w && n < 1000; n++)
				store_trace_api(w, &a);
			if (w && store_trace_close(w, err, sizeof(err)) != 0)
				_exit(4);
			_exit(w ? 0 : 3);
		}
		int st;
		waitpid(pid, &st, 0);
		print_message("  options %zu: %s\n", i, WIFEXITED(st) ? (WEXITSTATUS(st) == 0 ? "made, "
			      "written, closed" : WEXITSTATUS(st) == 3 ? "refused" : "close failed")
			      : "killed");
		assert_true(WIFEXITED(st) && (WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 3));
	}
	rm_tree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_disk_full, unmount_left),
		cmocka_unit_test_teardown(test_disk_full_from_start, unmount_left),
		cmocka_unit_test_teardown(test_read_only, unmount_left),
		cmocka_unit_test(test_size_limit),
		cmocka_unit_test(test_size_limit_app),
		cmocka_unit_test(test_size_limit_app_with_cache),
		cmocka_unit_test(test_write_fails_for_a_moment),
		cmocka_unit_test(test_memory_limit),
		cmocka_unit_test(test_memory_limit_from_start),
		cmocka_unit_test(test_killed_at_random_points),
		cmocka_unit_test(test_app_killed_at_random_points),
		cmocka_unit_test(test_two_runs_one_output),
		cmocka_unit_test(test_joined_traces),
		cmocka_unit_test(test_damaged_trace),
		cmocka_unit_test(test_fifo_and_devices),
		cmocka_unit_test(test_absurd_settings),
		cmocka_unit_test(test_absurd_writer_options),
	};
	alarm(900); /* a hang the per-command bounds missed */
	return cmocka_run_group_tests_name("fault", tests, NULL, NULL);
}
