/* store: the persistent cache of instrumented modules (sqlite) and the trace files (zstd).
 *
 * Part 1, the module cache.  One sqlite database shared by every process of a user (one per GPU
 * rank, say): WAL mode, a busy timeout, a checksum per blob, LRU eviction past a size limit.  A
 * damaged cubpf database is moved aside and rebuilt with a warning (through the log callback),
 * never a crash; a file at the cache's path that is not cubpf's is never moved or changed (see
 * store_cache_open).  The key is an XXH3-128 over everything that decides the instrumented
 * result; the value is the instrumented PTX and the cubin the driver compiled from it.
 *
 * Part 2, trace files: records (store_rec_*) in independent zstd frames; see store/FORMAT.md.
 * The writer never blocks its callers on I/O: a background thread compresses and writes, at
 * least every 100 ms, and whole batches are dropped (and counted) when it cannot keep up.
 *
 * Part 3, the trace reader: walks the records of a file frame by frame and stops cleanly at the
 * last whole frame of a file that was cut short (a process killed with SIGKILL).
 *
 * Errors: functions that can fail return a negative number (or NULL) and leave a message in the
 * caller's buffer (err, errlen) or in the object (store_*_error).  Nothing here prints or exits.
 */
#ifndef CUBPF_STORE_H
#define CUBPF_STORE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#define STORE_ERRLEN 512 /* a cache refusal names a path, why, and what to do */

/* Where log messages (warnings such as "database damaged, rebuilt") go; NULL = nowhere. */
typedef void (*store_log_fn)(void *ctx, const char *msg);

/* ==== Part 1: module cache ================================================================ */

struct store_cache;

typedef struct {
	uint8_t b[16]; /* XXH3-128, big-endian canonical form (as xxhsum prints it) */
} store_key;

struct store_blob {
	const void *data;
	size_t size;
};

/* Everything that decides the instrumented module; each field goes into the key. */
struct store_key_input {
	struct store_blob image;            /* the original module image as the app passed it */
	const struct store_blob *programs;  /* probe objects, in load order */
	size_t nprograms;
	const char *rewriter_version;       /* ptx-rewriter's version string (NULL = "") */
	uint32_t sm;                        /* device compute capability, e.g. 90 */
	uint32_t driver_version;            /* cuDriverGetVersion */
	const char *jit_options;            /* canonical text of the JIT options (NULL = "") */
	const char *kernel_glob;            /* which kernels are instrumented (NULL = all) */
	uint32_t kernel_id_base;            /* the caller's next kernel id, when ids are baked in */
	const char *origin;                 /* where the instrumented code came from in the image
					     * and how it is compiled back (the shim: "fatbin PTX",
					     * "embedded PTX: ptxas <options>"); NULL = not said, the
					     * key of images keyed before origins existed */
};

/* Computes the key; every field is length-prefixed so that no two inputs collide by framing. */
void store_key_compute(const struct store_key_input *in, store_key *out);
/* 32 hex digits and a NUL. */
void store_key_hex(const store_key *key, char out[33]);

struct store_cache_options {
	uint64_t max_bytes;     /* size limit of PTX + cubin bytes; 0 = 1 GiB */
	int busy_timeout_ms;    /* how long to wait for another process's lock; 0 = 10000 */
	int write_wait_ms;      /* how long a put waits for another process's write; past it the
				 * entry is not stored (put returns 1); 0 = busy_timeout_ms.
				 * Lookups never wait for a write: their use counts wait for later */
	store_log_fn log;       /* warnings; may be NULL */
	void *log_ctx;
	unsigned flags;         /* STORE_CACHE_OPEN_* */
	unsigned trusted_gid;   /* with STORE_CACHE_OPEN_TRUST_GROUP */
};

/* Read-only: lookups only.  sqlite opens the file read-only; nothing is made, written, counted,
 * moved aside or dropped (a put returns 1, "read-only"; a damaged file is reported and left).
 * The database's owner is trusted besides this user and root: the way to use a cache that
 * another user (a CI account, an administrator) fills. */
#define STORE_CACHE_OPEN_READ_ONLY 0x1u
/* Members of trusted_gid may own and write the database and its folders: a cache shared by a
 * group, by the user's explicit choice (CUBPF_CACHE_GROUP). */
#define STORE_CACHE_OPEN_TRUST_GROUP 0x2u

/* What goes in (put) and comes out (get).  get's buffers are malloc'd: store_cache_entry_free. */
struct store_cache_entry {
	void *ptx;              /* instrumented PTX (not NUL-terminated necessarily) */
	size_t ptx_size;
	void *cubin;            /* cubin the driver compiled for this device (may be empty) */
	size_t cubin_size;
	void *manifest;         /* the caller's own data about the entry (the shim: its kernels'
				 * names and ids); may be empty */
	size_t manifest_size;
	char *name;             /* label for `cubpf cache ls`: module or first kernel name */
	uint32_t sm;
	uint32_t driver_version;
	uint64_t rewrite_ns;    /* time the rewrite took when the entry was made */
	uint64_t jit_ns;        /* time the driver JIT took */
	uint64_t hits;          /* use count (get only) */
	int64_t created_ms;     /* unix milliseconds (get and list only) */
	int64_t last_used_ms;   /* unix milliseconds (get and list only) */
};

struct store_cache_stats {
	uint64_t entries;
	uint64_t bytes;         /* PTX + cubin bytes of all entries */
	uint64_t file_bytes;    /* database file size (with -wal) */
	uint64_t max_bytes;
	uint64_t lookups, hits, misses, puts, evictions, corrupt_blobs; /* since the db was made */
	uint64_t saved_ns;      /* rewrite + JIT time the hits avoided */
};

/* Default database path: $CUBPF_CACHE, else $XDG_CACHE_HOME/cubpf/cache.db, else
 * $HOME/.cache/cubpf/cache.db (per user, as ccache's and the CUDA JIT cache's).  Returns 0, or
 * -1 with the reason in err: no variable set, a path longer than buf (CUBPF_CACHE of N bytes),
 * a HOME that does not exist (cubpf never makes a home folder). */
int store_cache_default_path(char *buf, size_t size, char *err, size_t errlen);

/* The sharing settings of the environment, the same for the shim and `cubpf cache`:
 * CUBPF_CACHE_READONLY=1 (STORE_CACHE_OPEN_READ_ONLY) and CUBPF_CACHE_GROUP=NAME|GID
 * (STORE_CACHE_OPEN_TRUST_GROUP), added to o->flags.  0, or -1 with the reason in err. */
int store_cache_env_options(struct store_cache_options *o, char *err, size_t errlen);

/* Opens (creating with mode 0600, and missing folders 0700) the database at path (NULL = the
 * default path).  Only a cache that no other user can change is used (store/cache_trust.c):
 * the database, its -wal and -shm, its folder and the folders above must be owned and writable
 * by this user or root alone (sticky folders above its own excepted), unless trusted by flags;
 * a symbolic link for the database is refused, never followed.  NULL, with why and what to
 * do in err, otherwise.  A damaged cubpf database (cubpf's application id in its SQLite header, or
 * seen to be cubpf's by this object) is moved aside to PATH.broken-TIME (with its -wal) and a
 * new one made; the log callback says so and where it went.  So is one whose SQLite header is
 * damaged or carries another id when cubpf's schema still follows it.  A file cubpf cannot tell to be
 * its own (not SQLite, another application's database, a damaged one without cubpf's id) is
 * never moved or written: NULL, with a message in err saying what is there.  An empty file or
 * an empty SQLite database becomes the cache.  NULL with a message on other failures too (no
 * folder can be made, say). */
struct store_cache *store_cache_open(const char *path, const struct store_cache_options *opt,
				     char *err, size_t errlen);
void store_cache_close(struct store_cache *c);
const char *store_cache_path(const struct store_cache *c);
const char *store_cache_error(const struct store_cache *c);

/* 1 = hit (entry filled, use count and last use updated), 0 = miss, -1 = error.  A blob whose
 * checksum does not match counts as a miss: the entry is deleted and the log callback told. */
int store_cache_get(struct store_cache *c, const store_key *key, struct store_cache_entry *out);
/* The same; flags STORE_CACHE_NO_PTX leaves ptx NULL (ptx_size still set): a caller that loads
 * the cubin does not read, check and copy the PTX. */
#define STORE_CACHE_NO_PTX 0x1u
int store_cache_lookup(struct store_cache *c, const store_key *key, struct store_cache_entry *out,
		       unsigned flags);
/* Deletes one entry (a cubin the driver refused, say).  1 = deleted, 0 = not there, -1 = error. */
int store_cache_delete(struct store_cache *c, const store_key *key);
/* Inserts or replaces; then evicts least recently used entries past max_bytes.  0, 1 when another
 * process kept the database for longer than write_wait_ms (not stored; the message in
 * store_cache_error), or -1. */
int store_cache_put(struct store_cache *c, const store_key *key, const struct store_cache_entry *e);
void store_cache_entry_free(struct store_cache_entry *e);

int store_cache_stats(struct store_cache *c, struct store_cache_stats *out);
/* Calls fn for each entry, most recently used first (blobs are NULL, sizes are set).  fn returns
 * non-zero to stop.  Returns the number of entries visited or -1. */
int store_cache_list(struct store_cache *c,
		     int (*fn)(void *ctx, const store_key *key, const struct store_cache_entry *e),
		     void *ctx);
/* Deletes every entry and the counters; returns the number of entries deleted or -1. */
int64_t store_cache_clear(struct store_cache *c);

/* ==== Part 2: trace records (layout of store/FORMAT.md; little-endian, packed) ============ */

#define STORE_TRACE_MAGIC "CUBPFTRC"
#define STORE_TRACE_MAJOR 1
#define STORE_TRACE_MINOR 6 /* 1.1 added KSPAN; 1.2 KERNEL_ID, NOT_INSTRUMENTED, MAP_MEMORY;
			    * 1.3 PROBES; 1.4 the parent's pid after HEADER's strings; 1.5 HOST_MAP,
			    * RINGBUF,
			    * MAP_MEMORY's ring buffer bookkeeping, NOT_INSTRUMENTED reason 8; 1.6 LOST */

/* Every record: this header, then len payload bytes.  Readers skip types they do not know. */
struct store_rec_hdr {
	uint16_t type;
	uint16_t flags;  /* 0 for now */
	uint32_t len;    /* payload bytes after this header */
} __attribute__((packed));

enum store_rec_type {
	STORE_REC_HEADER = 1,  /* store_rec_header + 3 strings: cubpf version, host name, cmdline
				* [+ u32 parent pid (1.4)] */
	STORE_REC_STRING = 2,  /* u32 id + bytes: entry of the string table */
	STORE_REC_DEVICE = 3,  /* store_rec_device + string: device name */
	STORE_REC_CLOCK = 4,   /* store_rec_clock */
	STORE_REC_PROGRAM = 5, /* store_rec_program + 2 strings: name, path */
	STORE_REC_API = 6,     /* store_rec_api [+ u32 func_id, u32 nargs, nargs x u64] */
	STORE_REC_KERNEL = 7,  /* store_rec_kernel */
	STORE_REC_COPY = 8,    /* store_rec_copy */
	STORE_REC_PROBE = 9,   /* store_rec_probe + data */
	STORE_REC_MAP = 10,    /* store_rec_map + count * (key_size + value_size) bytes */
	STORE_REC_DROP = 11,   /* store_rec_drop */
	STORE_REC_END = 12,    /* store_rec_end: the writer closed the file cleanly */
	STORE_REC_KSPAN = 13,  /* store_rec_kspan (1.1): a launch's GPU begin/end */
	STORE_REC_KERNEL_ID = 14,        /* store_rec_kernel_id (1.2): cubpf's kernel id -> name */
	STORE_REC_NOT_INSTRUMENTED = 15, /* store_rec_not_instrumented + string (1.2) */
	STORE_REC_MAP_MEMORY = 16,       /* store_rec_map_memory (1.2): maps of one context */
	STORE_REC_PROBES = 17, /* store_rec_probe + u32 count + count x (u32 len + bytes) (1.3):
				* samples of one map sharing the fixed part; the reader hands
				* them out as PROBE records, never as PROBES */
	STORE_REC_HOST_MAP = 18, /* store_rec_map + pairs, as MAP (1.5): a host map at exit */
	STORE_REC_RINGBUF = 19,  /* store_rec_ringbuf (1.5): a ring buffer's counts at exit */
	STORE_REC_LOST = 20,     /* store_rec_lost (1.6): frames the writer could not write */
	STORE_REC_MAX_KNOWN = 20
};

/* Strings inside records: u32 length, then the bytes (no NUL). */

struct store_rec_header {
	char magic[8];              /* "CUBPFTRC" */
	uint16_t major, minor;      /* STORE_TRACE_MAJOR / MINOR */
	uint32_t pid;
	uint64_t start_realtime_ns; /* CLOCK_REALTIME when the trace began */
	uint64_t start_monotonic_ns;/* CLOCK_MONOTONIC at the same instant */
	uint32_t driver_version;    /* cuDriverGetVersion, 0 if not known yet */
	uint32_t flags;
} __attribute__((packed));

struct store_rec_device {
	uint32_t ordinal;
	uint32_t sm;                /* 90 for sm_90 */
	uint64_t memory_bytes;
	uint8_t uuid[16];
} __attribute__((packed));

/* GPU clock calibration: host_ns (CLOCK_REALTIME) and gpu_ns (%globaltimer) read at the same
 * moment, within uncertainty_ns.  A GPU time t is host time t + (host_ns - gpu_ns). */
struct store_rec_clock {
	uint64_t host_ns;
	uint64_t gpu_ns;
	uint64_t uncertainty_ns;
	uint32_t device;
	uint32_t pad;
} __attribute__((packed));

struct store_rec_program {
	uint32_t index;             /* as probe records name it */
	uint32_t nmaps;
	uint8_t hash[16];           /* XXH3-128 of the object file */
} __attribute__((packed));

/* One host driver call, written when it returns. */
struct store_rec_api {
	uint64_t begin_ns, end_ns;  /* host CLOCK_REALTIME */
	uint64_t stream;            /* CUstream handle value, 0 = legacy default stream */
	uint64_t bytes;             /* size argument (copies, allocations), 0 if none */
	uint64_t corr;              /* correlation id shared with the kernel/copy it started */
	uint32_t name;              /* string id of the function name */
	uint32_t tid;               /* host thread id */
	int32_t result;             /* CUresult */
	uint32_t device;
} __attribute__((packed));

struct store_rec_kernel {
	uint64_t launch_ns;         /* host CLOCK_REALTIME at the launch call */
	uint64_t gpu_start, gpu_end;/* %globaltimer at kernel start / end; 0 = not measured */
	uint64_t stream;
	uint64_t corr;
	uint32_t name;              /* string id of the kernel name (mangled) */
	uint32_t device;
	uint32_t grid[3], block[3];
	uint32_t shared_bytes;
	uint32_t tid;
} __attribute__((packed));

/* Format 1.1: when a kernel launched on the GPU and when it finished, measured by CUDA events
 * recorded on the launch's stream just before and just after it, in host CLOCK_REALTIME ns.
 * Written when both events have completed (so after the KERNEL record with the same corr,
 * usually, but a reader must accept either order).  Self-contained: name, stream and device
 * are repeated so that a reader can use spans without joining them to KERNEL records. */
struct store_rec_kspan {
	uint64_t corr;              /* the KERNEL record's corr (the shim's launch sequence, from 1) */
	uint64_t begin_ns, end_ns;  /* host CLOCK_REALTIME; end_ns >= begin_ns */
	uint64_t stream;            /* as in KERNEL */
	uint32_t name;              /* string id of the kernel name (mangled) */
	uint32_t device;
	uint32_t ref_uncertainty_ns;/* how well the event clock was tied to the host clock */
	uint32_t flags;             /* 0 for now */
} __attribute__((packed));

enum store_copy_kind {
	STORE_COPY_HTOD = 1, STORE_COPY_DTOH = 2, STORE_COPY_DTOD = 3, STORE_COPY_MEMSET = 4,
	STORE_COPY_OTHER = 5
};

struct store_rec_copy {
	uint64_t launch_ns;
	uint64_t gpu_start, gpu_end;/* %globaltimer; 0 = not measured */
	uint64_t stream;
	uint64_t corr;
	uint64_t bytes;
	uint32_t kind;              /* enum store_copy_kind */
	uint32_t device;
	uint32_t tid;
	uint32_t pad;
} __attribute__((packed));

#define STORE_PROBE_GPU_TIME 0x1u /* ts_ns is %globaltimer (else host CLOCK_REALTIME) */

/* One sample a probe program wrote to a ring buffer (bpf_ringbuf_output). */
struct store_rec_probe {
	uint64_t ts_ns;
	uint32_t prog;              /* program index (PROGRAM record) */
	uint32_t map;               /* map index within the program */
	uint32_t device;
	uint32_t flags;             /* STORE_PROBE_* */
} __attribute__((packed));

/* A copy of a map's contents at ts_ns. */
struct store_rec_map {
	uint64_t ts_ns;
	uint32_t prog, map;
	uint32_t name;              /* string id of the map's name */
	uint32_t map_type;          /* enum cubpf_map_type */
	uint32_t key_size, value_size;
	uint32_t count;             /* key/value pairs that follow */
	uint32_t ctx;               /* (1.2) the writer's context number, from 1, as MAP_MEMORY
				     * names it; 0 = not said (files before 1.2: was padding) */
} __attribute__((packed));

enum store_drop_source {
	STORE_DROP_WRITER = 1,      /* the trace writer's buffers were full: whole batches */
	STORE_DROP_RINGBUF = 2,     /* a device ring buffer was full (map names which) */
	STORE_DROP_OTHER = 3,
	STORE_DROP_SPANS = 4        /* (1.1) kernel spans not measured: the event pool was full */
};

struct store_rec_drop {
	uint64_t ts_ns;
	uint32_t source;            /* enum store_drop_source */
	uint32_t prog, map;
	uint32_t pad;
	uint64_t records;           /* records (events) lost since the previous DROP of this source */
	uint64_t batches;
	uint64_t bytes;
} __attribute__((packed));

struct store_rec_end {
	uint64_t end_realtime_ns;
	uint64_t records;           /* records written in all */
	uint64_t dropped_records;   /* records the writer dropped in all (1.6: and lost, LOST) */
	uint64_t dropped_batches;
} __attribute__((packed));

/* Format 1.2: what the tools learned from the shim's log lines before, so that a trace alone
 * says it (1.5 adds what was left: host maps, ring buffer bookkeeping, verifier rejections; the
 * tools read no log line since).  All three are metadata: never dropped, in file order after the strings they use. */

/* A kernel id the shim gave (probe programs see it as ctx->kernel_id). */
struct store_rec_kernel_id {
	uint32_t id;
	uint32_t name;              /* string id of the kernel name (mangled) */
	uint32_t module;            /* string id of the module's label (a file load's path), 0 = none */
	uint32_t flags;             /* STORE_KERNEL_ID_*; older writers: 0 (PTX rewriting) */
} __attribute__((packed));

/* store_rec_kernel_id.flags: how the kernel gets its probes (0: its PTX is rewritten) */
#define STORE_KERNEL_ID_SANITIZER 1u /* patched through the Sanitizer backend (SASS only) */

enum store_noinst_reason {
	STORE_NOINST_NO_PTX = 1,      /* the image has no PTX for the device (SASS only) */
	STORE_NOINST_REWRITE = 2,     /* the image or its PTX could not be read or rewritten */
	STORE_NOINST_JIT = 3,         /* the driver's JIT refused the instrumented PTX */
	STORE_NOINST_MAPS = 4,        /* the context's maps could not be had (memory, cap) */
	STORE_NOINST_REFUSED = 5,     /* the driver refused the substitute at load */
	STORE_NOINST_UNREACHABLE = 6, /* instrumented, but the maps' pointers could not be stored */
	STORE_NOINST_OTHER = 7,       /* anything else (out of memory, unknown SM) */
	STORE_NOINST_VERIFIER = 8,    /* (1.5) a probe program the verifier rejected: no kernel
				       * runs it (label: the program's name) */
	STORE_NOINST_PROBE_OBJECT = 9 /* (1.5) a probe object refused whole (unreadable, damaged,
				       * maps over the cap): none of its programs runs (label: its
				       * path) */
};

/* Kernels of one load that run without probes, and why.  Followed by a string: the message as
 * the shim logs it (without "cubpf: "). */
struct store_rec_not_instrumented {
	uint64_t ts_ns;             /* host CLOCK_REALTIME */
	uint32_t reason;            /* enum store_noinst_reason */
	uint32_t kernels;           /* kernels concerned, 0 = not known */
	uint32_t sm;                /* device compute capability, 0 = not known */
	uint32_t device;            /* device ordinal, UINT32_MAX = not known (no context) */
	uint32_t api;               /* string id of the load call ("cuModuleLoadData"), 0 = none */
	uint32_t label;             /* string id of the module's label (first kernel, path), 0 = none */
} __attribute__((packed));

/* The memory the maps of one context take, written when they are allocated.  Since 1.5 the
 * fixed part is followed by a u64: the bytes of device_bytes that are the ring buffers'
 * producer bookkeeping (readers of 1.4 ignore it; a record without it says 0). */
struct store_rec_map_memory {
	uint64_t ts_ns;
	uint64_t context;           /* CUcontext value (for messages; numbers may be reused) */
	uint64_t device_bytes;      /* device memory of the maps and enable words */
	uint64_t pinned_bytes;      /* pinned host memory (ring buffers) */
	uint32_t device;            /* device ordinal */
	uint32_t nmaps;
	uint32_t ctx;               /* the writer's context number, from 1 (MAP records' ctx) */
	uint32_t flags;             /* 0 for now */
} __attribute__((packed));

/* Format 1.5: one ring buffer of one context when the shim stops draining it (exit). */
struct store_rec_ringbuf {
	uint64_t ts_ns;
	uint64_t taken;             /* records the drain took from the map (all contexts) */
	uint64_t dropped;           /* records lost on this device: its lanes were full */
	uint64_t syncs;             /* times the drained tails were copied to the device */
	uint64_t sync_busy;         /* of them: times the previous copy was still running */
	uint32_t prog, map;         /* PROGRAM index, map index within it */
	uint32_t name;              /* string id of the map's name */
	uint32_t device;            /* device ordinal */
} __attribute__((packed));

/* Format 1.6: records the writer accepted but could not put in the file (the disk was full, the
 * file reached RLIMIT_FSIZE, memory ran out, the write or the compressor failed), since the
 * previous LOST record.  Written as metadata with the next frame that can be written, and
 * last, before END, into room the writer keeps for it: a trace that lost records says so and
 * why.  Readers sum them. */
enum store_lost_cause {
	STORE_LOST_DISK_FULL = 1,   /* ENOSPC, EDQUOT */
	STORE_LOST_SIZE_LIMIT = 2,  /* the file reached RLIMIT_FSIZE (EFBIG) */
	STORE_LOST_MEMORY = 3,      /* no memory to compress or keep them */
	STORE_LOST_IO = 4,          /* any other write error (err says which) */
	STORE_LOST_COMPRESS = 5     /* the compressor failed */
};

struct store_rec_lost {
	uint64_t ts_ns;             /* host CLOCK_REALTIME when the record was made */
	uint64_t first_ns;          /* when the first of these losses happened */
	uint64_t records;           /* records lost (events and metadata), as END counts them */
	uint64_t frames;            /* frames (batches, metadata) not written */
	uint64_t bytes;             /* their decoded bytes */
	uint32_t cause;             /* enum store_lost_cause of the latest loss */
	int32_t err;                /* its errno, 0 = none */
} __attribute__((packed));

/* Name of a cause ("disk full", ...; "unknown" otherwise). */
const char *store_lost_cause_name(uint32_t cause);

/* ==== Part 2: trace writer ================================================================ */

struct store_trace_writer;

struct store_trace_options {
	size_t buffer_bytes;        /* bound on buffered, not yet written bytes; 0 = 64 MiB */
	size_t batch_bytes;         /* a batch = one zstd frame's input; 0 = 1 MiB */
	unsigned flush_ms;          /* longest time data stays in memory; 0 = 100 */
	int level;                  /* zstd level; 0 = 1 (negative levels are faster) */
	int workers;                /* compressing threads; 0 = 2 (each takes whole batches) */
};

struct store_trace_process {
	uint32_t pid;
	uint32_t driver_version;
	const char *cubpf_version;
	const char *hostname;
	const char *cmdline;        /* arguments joined by spaces */
	uint32_t ppid;              /* the parent process (getppid()), 0 = not said */
};

/* Creates path (0600, truncating) and writes the header frame at once.  NULL + err on failure
 * (the file is removed again when its header could not be written).
 *
 * Under faults the writer never harms the application and never loses silently: its threads
 * block every signal (a write past RLIMIT_FSIZE raises SIGXFSZ, fatal by default), and the
 * writes it makes from the caller's thread (header, trailer) block and take SIGXFSZ and
 * SIGPIPE; a frame goes to the file whole or not at all (it must fit under RLIMIT_FSIZE and in
 * space reserved on disk first, and a write that fails anyway is cut off again), so the file
 * always ends on its last good frame and frames written after a passing failure are readable;
 * room for the trailer (LOST and END records, ~200 bytes) is kept past the last frame; a
 * batch that cannot be compressed or written is counted (LOST records, END's dropped_records,
 * the counters' lost_*); metadata that cannot be written is kept and written first when the
 * file takes writes again; the compressors' memory and a reserve for metadata are taken at
 * create, so that a memory limit reached later costs events, not names. */
struct store_trace_writer *store_trace_create(const char *path, const struct store_trace_process *p,
					      const struct store_trace_options *opt,
					      char *err, size_t errlen);
/* Flushes everything, writes the END record, joins the thread, closes.  0, or -1 when an I/O
 * error happened at any time (the message in err). */
int store_trace_close(struct store_trace_writer *w, char *err, size_t errlen);

/* The string table: returns the id of s (the same id for the same bytes), defining it in the
 * trace before any record appended after this call.  Never dropped.  0 is never an id. */
uint32_t store_trace_intern(struct store_trace_writer *w, const char *s);

/* Metadata that must not be lost (never dropped, written before later events). */
int store_trace_device(struct store_trace_writer *w, const struct store_rec_device *d, const char *name);
int store_trace_clock(struct store_trace_writer *w, const struct store_rec_clock *c);
int store_trace_program(struct store_trace_writer *w, const struct store_rec_program *p,
			const char *name, const char *path);
/* Format 1.2 metadata (never dropped): a kernel id; kernels not instrumented with the message
 * (NULL = ""); the maps' memory of a context. */
int store_trace_kernel_id(struct store_trace_writer *w, const struct store_rec_kernel_id *k);
int store_trace_not_instrumented(struct store_trace_writer *w,
				 const struct store_rec_not_instrumented *n, const char *message);
int store_trace_map_memory(struct store_trace_writer *w, const struct store_rec_map_memory *m,
			   uint64_t rb_state_bytes);
/* Format 1.5 (never dropped): the contents of a host map (host programs' maps, which no MAP
 * record carries) as a MAP record lays them out: prog, map, name, types, count pairs. */
int store_trace_host_map(struct store_trace_writer *w, const struct store_rec_map *m,
			 const void *kv, size_t kv_size);
/* Format 1.5 (never dropped): a ring buffer's counts when its drain stops. */
int store_trace_ringbuf(struct store_trace_writer *w, const struct store_rec_ringbuf *r);
/* Name of a reason ("no PTX", ...; "unknown" otherwise). */
const char *store_noinst_reason_name(uint32_t reason);
/* Losses outside the writer (device ring buffers), as counted by the caller. */
int store_trace_drop(struct store_trace_writer *w, const struct store_rec_drop *d);

/* Events: copied into the current batch under a short lock; never block on I/O.  Return 0, or
 * 1 when the buffers were full and a whole batch of events (the batch this event would have
 * joined, or this event alone if it is larger than the budget) was dropped and counted. */
int store_trace_api(struct store_trace_writer *w, const struct store_rec_api *e);
/* The same with the call's arguments (what a uprobe program saw), so that `cubpf trace replay`
 * can give host programs the same context: func_id is the shim's id of the function
 * (cubpf_api_ctx.func_id); at most CUBPF_MAX_API_ARGS (16) arguments are kept. */
int store_trace_api_args(struct store_trace_writer *w, const struct store_rec_api *e,
			 uint32_t func_id, const uint64_t *args, uint32_t nargs);
int store_trace_kernel(struct store_trace_writer *w, const struct store_rec_kernel *e);
/* A launch's API record and its KERNEL record (k NULL: none) under one lock, one after the
 * other in the batch: what store_trace_api and store_trace_kernel do, for half the locking. */
int store_trace_launch(struct store_trace_writer *w, const struct store_rec_api *a,
		       const struct store_rec_kernel *k);
int store_trace_copy(struct store_trace_writer *w, const struct store_rec_copy *e);
int store_trace_kspan(struct store_trace_writer *w, const struct store_rec_kspan *e);
/* n KSPAN records under one lock (a poller's round): the application's threads, which append
 * their launches under the same lock, find it taken once a round rather than once a span. */
int store_trace_kspans(struct store_trace_writer *w, const struct store_rec_kspan *e, size_t n);
int store_trace_probe(struct store_trace_writer *w, const struct store_rec_probe *e,
		      const void *data, uint32_t size);
/* Many samples of one map at once (a ring buffer drain's run) that share *e (one timestamp),
 * each with its own payload, copied under one lock into PROBES records (format 1.3: the fixed
 * part once, then each sample as u32 length + bytes; split where a batch ends).  A reader of
 * this library returns them as the n PROBE records that n store_trace_probe calls would have
 * written.  The counters (records, dropped_records) count samples.  Returns 0, or 1 when a
 * batch was dropped on the way (counted as always). */
struct store_probe_data {
	const void *data;
	uint32_t len;
};
int store_trace_probes(struct store_trace_writer *w, const struct store_rec_probe *e,
		       const struct store_probe_data *d, uint32_t n);
/* The same from a thread that appends many samples (a GPU ring buffer's drain thread): into a
 * batch of its own, filled without the writer's lock, which then guards only the hand-over of
 * full batches, so that other threads' records never wait behind the copies.  One
 * store_trace_local per thread; a batch goes to the writer when full, at the latest flush_ms
 * after its first sample when the owner keeps appending, at store_trace_local_flush (call it
 * when idle) and at store_trace_local_free (before the writer closes). */
struct store_trace_local;
struct store_trace_local *store_trace_local_new(struct store_trace_writer *w);
int store_trace_probes_local(struct store_trace_local *l, const struct store_rec_probe *e,
			     const struct store_probe_data *d, uint32_t n);
void store_trace_local_flush(struct store_trace_local *l);
void store_trace_local_free(struct store_trace_local *l);
int store_trace_map(struct store_trace_writer *w, const struct store_rec_map *m, const void *kv,
		    size_t kv_size);
/* Any record: type and payload as FORMAT.md lays it out. */
int store_trace_append(struct store_trace_writer *w, uint16_t type, const void *a, size_t alen,
		       const void *b, size_t blen);

/* Asks the writer thread to write everything it holds now, without waiting for it to finish
 * (the shim before fork or exec; tests). */
void store_trace_flush(struct store_trace_writer *w);

/* fork(): call prepare before, parent and child after (pthread_atfork).  The writer threads
 * do not exist in the child, and the file belongs to the parent: in the child the writer
 * keeps accepting calls but drops (and counts) everything, and store_trace_close only frees.
 * A child that wants a trace creates its own. */
void store_trace_fork_prepare(struct store_trace_writer *w);
void store_trace_fork_parent(struct store_trace_writer *w);
void store_trace_fork_child(struct store_trace_writer *w);

struct store_trace_counters {
	uint64_t records, bytes;                   /* accepted by append */
	uint64_t dropped_records, dropped_batches, dropped_bytes;
	uint64_t frames, compressed_bytes;         /* written to the file */
	int io_error;
	/* accepted, then not written (LOST records): events and metadata alike */
	uint64_t lost_records, lost_frames, lost_bytes;
	uint32_t lost_cause;                       /* enum store_lost_cause of the latest */
};
void store_trace_counters(struct store_trace_writer *w, struct store_trace_counters *out);

/* ==== Part 3: trace reader ================================================================ */

struct store_trace_reader;

/* One record as read.  payload points into the reader's buffer, valid until the next call. */
struct store_trace_record {
	uint16_t type;
	uint32_t len;
	const uint8_t *payload;
	uint64_t frame;             /* index of the zstd frame it came from */
};

enum store_trace_state {
	STORE_TRACE_OK = 0,         /* more may follow */
	STORE_TRACE_COMPLETE = 1,   /* END record seen, file ended there */
	STORE_TRACE_CUT = 2,        /* the file ends inside a frame (killed writer): ignored tail */
	STORE_TRACE_NO_END = 3,     /* ends on a frame boundary but without END (killed writer) */
	STORE_TRACE_DAMAGED = 4     /* a frame does not decode (checksum, garbage): reading stops */
};

/* Opens and checks the header record.  NULL + err when the file is not a cubpf trace. */
struct store_trace_reader *store_trace_open(const char *path, char *err, size_t errlen);
/* Same on a memory image (not copied: must outlive the reader). */
struct store_trace_reader *store_trace_open_mem(const void *data, size_t size, char *err,
						size_t errlen);
void store_trace_close_reader(struct store_trace_reader *r);
/* A trace still being written (a running process's), read as it grows: opened like
 * store_trace_open, its descriptor kept.  store_trace_next reads the whole frames there are and
 * returns 0 at the end (state CUT when the writer is inside a frame, NO_END between frames);
 * store_trace_refresh then maps what was appended since, and store_trace_next goes on from the
 * first byte not consumed: a frame cut short is decoded whole once it is, never read twice.
 * Records from before a refresh are no longer valid.  refresh: 1 = the file grew, 0 = nothing
 * new (or the trace is complete or damaged, or not opened to follow), -1 + err. */
struct store_trace_reader *store_trace_open_follow(const char *path, char *err, size_t errlen);
int store_trace_refresh(struct store_trace_reader *r, char *err, size_t errlen);

/* 1 = a record, 0 = no more (see store_trace_state), -1 = a damaged record (message in
 * store_trace_reader_error, naming the frame or record by index and file offset; state
 * DAMAGED).  STRING records are also added to the table, whose memory follows the number of
 * STRING records read, not the ids they declare; a frame's buffer is no larger than its bytes
 * can decode to.  So a reader's memory is bounded by what the file can hold. */
int store_trace_next(struct store_trace_reader *r, struct store_trace_record *rec);
enum store_trace_state store_trace_state(const struct store_trace_reader *r);
const char *store_trace_reader_error(const struct store_trace_reader *r);
/* The header record (valid for the reader's life) and its strings. */
const struct store_rec_header *store_trace_header(const struct store_trace_reader *r);
const char *store_trace_header_string(const struct store_trace_reader *r, int which); /* 0..2 */
/* The writer's parent process (format 1.4), 0 when the trace does not say. */
uint32_t store_trace_parent_pid(const struct store_trace_reader *r);
/* String id -> string, or NULL if the id is not (yet) defined. */
const char *store_trace_string(const struct store_trace_reader *r, uint32_t id);
/* Bytes of the file consumed so far (compressed), and decompressed bytes of whole frames. */
void store_trace_reader_sizes(const struct store_trace_reader *r, uint64_t *file_bytes,
			      uint64_t *raw_bytes, uint64_t *frames);

/* Decoding helper: copies the fixed part of a record into *out and returns a pointer to the
 * variable part (its length in *rest), or NULL when the record is shorter than its fixed part.
 * A minor version never changes a record's layout; it only adds record types. */
const uint8_t *store_rec_fixed(const struct store_trace_record *rec, void *out, size_t fixed,
			       size_t *rest);
/* The arguments of an API record written by store_trace_api_args: returns the number of
 * arguments copied into args (room for 16), -1 when the record carries none. */
int store_rec_api_args(const struct store_trace_record *rec, uint32_t *func_id, uint64_t args[16]);
/* Reads a length-prefixed string at *p (advancing *p, *n); returns a malloc'd C string or NULL. */
char *store_rec_string(const uint8_t **p, size_t *n);

/* Name of a record type ("api", "kernel", ...; "unknown" otherwise). */
const char *store_rec_type_name(uint16_t type);

/* Ids a file declares (string ids, any u32 a record carries) numbered 0, 1, 2, ... in the order
 * they are added, in memory that follows how many there are, never their values: keep data by
 * id in a dense array by that number (the reader's string table and `trace stats` do).  Zero
 * the struct to start. */
struct store_ids_slot;
struct store_ids {
	struct store_ids_slot *slots;
	size_t nslots, count;
};
/* The number of id (0..count-1), or -1 when it was never added. */
long store_ids_find(const struct store_ids *t, uint32_t id);
/* The number of id, added as count when new; -1 when out of memory. */
long store_ids_add(struct store_ids *t, uint32_t id);
void store_ids_free(struct store_ids *t);

/* ---- cubpf's writes on an application's thread (quiet.c) -----------------------------------
 * A write past RLIMIT_FSIZE raises SIGXFSZ, and one into a closed pipe SIGPIPE, both fatal by
 * default: between begin and end both are blocked on the calling thread, and one raised there is
 * taken at the end, so that the write fails (EFBIG, EPIPE) instead of the application dying.
 * The trace writer's own threads block every signal; the module cache's writes and the writer's
 * header and trailer run on the application's thread inside such a pair. */
struct store_quiet {
	sigset_t old, before;
};
void store_quiet_begin(struct store_quiet *q);
void store_quiet_end(struct store_quiet *q);

#endif /* CUBPF_STORE_H */
