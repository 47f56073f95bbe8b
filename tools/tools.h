/* tools/tools.h: the bundled tools of `cubpf run -t TOOL` (private to tools/).
 *
 * A tool is a probe object (tools/probes/NAME.bpf.c, built into PREFIX/probes) plus a formatter
 * that reads what the run recorded: the trace (MAP snapshots, KERNEL records, PROBE samples,
 * CLOCK, DEVICE, DROP, since format 1.2 KERNEL_ID, NOT_INSTRUMENTED, MAP_MEMORY, since 1.5
 * HOST_MAP), never the shim's log, whose wording is for people and may change.  The formatters
 * only read a struct tool_data, so the tests feed them traces written with store/'s writer. */
#ifndef CUBPF_TOOLS_TOOLS_H
#define CUBPF_TOOLS_TOOLS_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The kernelretsnoop probe's ring-buffer record (tools/probes/kernelretsnoop.bpf.c). */
struct tool_exit_event {
	uint64_t ts;
	uint32_t kernel_id;
	uint32_t tid_x, tid_y, tid_z;
	uint32_t ctaid_x, ctaid_y, ctaid_z;
	uint32_t ntid_x, ntid_y;
	uint32_t pad;
} __attribute__((packed));

struct tool_kernel {
	char *name;                 /* mangled, as the trace and the shim name it */
	uint32_t id;                /* cubpf's kernel id (KERNEL_ID record); 0 = not instrumented */
	uint32_t id_flags;          /* the KERNEL_ID record's STORE_KERNEL_ID_* (the backend) */
	uint32_t device;
	uint64_t launches, threads; /* from KERNEL records */
	uint64_t gpu_ns, spans;     /* device time of its timed launches (KSPAN, or KERNEL's own) */
	uint64_t *launch_ns;        /* host time of each launch call, in record order */
	uint32_t *launch_dev;       /* the device of each launch (same order) */
	uint64_t *launch_corr;      /* the shim's launch sequence number of each (same order) */
	size_t nlaunch, cap, dev_cap, corr_cap;
	/* each timed launch (KSPAN): its launch sequence number and device time, in record order
	 * (memdelay joins them to launch_corr: which launches ran with probes) */
	uint64_t *span_corr, *span_ns;
	size_t nspan, span_cap, span_ns_cap;
};

/* The latest snapshot of one map.  MAP records of format 1.2 say their context (GPU): the
 * latest snapshot of each context is kept, and the map the tools see holds, per key, the value
 * of every context back to back (context-major, zero where a context lacks the key), so that
 * value_size = contexts * the map's value size and tool_map_copies counts them: sums, minima
 * and maxima run over all GPUs. */
struct tool_map {
	uint32_t prog, map, type, key_size, value_size;
	uint32_t ctx;               /* a snapshot's context (0 = not said); merged maps: 0 */
	uint32_t contexts;          /* contexts merged here (1 or 0 = one) */
	char *name;
	uint64_t ts;
	uint8_t *kv;                /* count * (key_size + value_size) bytes */
	size_t count;
};

struct tool_clock {
	uint32_t device;
	uint64_t host_ns, gpu_ns, uncertainty_ns;
};

/* One warp seen by kernelretsnoop. */
struct tool_warp {
	uint32_t kernel_id, used;
	uint32_t ctaid[3];
	uint32_t warp;              /* linear thread id / 32 within the block */
	uint64_t first, last;       /* earliest and latest exit */
	uint32_t slow_tid[3];       /* the lane that left last */
	uint32_t exits;
};

/* One process of the run: its trace's HEADER and what it recorded. */
struct tool_process {
	uint32_t pid, ppid;         /* ppid 0: the trace does not say (before format 1.4) */
	char *cmdline;
	const char *state;          /* its trace's, as tool_data.state */
	uint64_t launches;          /* its KERNEL records */
	/* per kernel of the run (index into tool_data.kernels): this process's launches and
	 * device time, for its own coverage line */
	uint64_t *k_launches, *k_gpu_ns, *k_spans;
	size_t k_cap;
};


/* Maps whose keys hold a kernel id: key = (id, or id % kernels when kernels != 0) * per_kernel
 * + the rest.  Kernel ids are numbered per process; a run of several processes renumbers each
 * process's into the run's (one id per kernel name), keys with them. */
struct tool_kernel_key {
	const char *map;
	uint32_t per_kernel, kernels;
};

struct tool_data {
	struct tool_kernel *kernels;
	size_t nkernels;
	struct tool_map *maps;
	size_t nmaps;
	struct tool_map *snaps;     /* the latest snapshot per map and context, merged into maps */
	size_t nsnaps;
	struct tool_clock *clocks;
	size_t nclocks;
	char **devices;             /* "device 0: NVIDIA H200 (sm_90, 139 GiB)" */
	size_t ndevices;
	uint64_t probes;            /* PROBE records */
	uint64_t rb_drops, writer_drops;
	uint64_t writer_lost;       /* records the writer could not write (LOST, format 1.6) */
	uint32_t lost_cause;        /* enum store_lost_cause of the latest */
	int32_t lost_err;
	uint64_t span_drops;        /* launches without a kernel span (event pool full) */
	struct tool_warp *warps;    /* open-addressing table, nwarps_cap slots */
	size_t nwarps, nwarps_cap;
	const char *state;          /* "complete", "no end (process killed?)", ... */
	/* from the run metadata of the trace (format 1.2 and later) */
	char **notes;               /* NOT_INSTRUMENTED messages (the shim logs the same text) */
	size_t nnotes;
	char **maplines;            /* "map NAME[KEY] = VALUE (host)", from HOST_MAP, for -p */
	size_t nmaplines;
	uint64_t device_bytes, pinned_bytes; /* the MAP_MEMORY records' sums */
	uint64_t rb_state_bytes;    /* of the device bytes: ring buffers' producer bookkeeping */
	int have_meta;              /* format 1.2 or later: the trace names ids, reasons, memory */
	int have_mapmem;
	uint32_t *ctx_device;       /* [ctx] = device ordinal + 1 (0: not known), from MAP_MEMORY */
	size_t nctx_device;
	struct tool_process *procs; /* the processes whose traces were read, in order */
	size_t nprocs;
	uint32_t *remap;            /* while a process of several loads: its kernel id -> the run's */
	size_t nremap;
};

/* Contexts of the i-th process of a run are numbered from i * TOOL_PROCESS_CTX (context
 * numbers of one process stay below it), and its devices from i * TOOL_PROCESS_DEVICE, so that
 * each process's maps, launches and clocks stay its own where they must (launchlate joins a
 * context's GPU starts with its own process's launches) and add up where they may. */
#define TOOL_PROCESS_CTX 8192u
#define TOOL_PROCESS_DEVICE 65536u

/* Reads a trace (a running one too: whole frames so far).  0, or -1 with a message in err. */
int tool_data_load(struct tool_data *d, const char *trace, char *err, size_t errlen);
/* Reads the trace of one more process of a run into d (a fresh tool_data for the first): kernels
 * merge by name (launches and threads add up), kernel ids and the keys of the maps `keys` names
 * (NULL-terminated, NULL = none) are renumbered into the run's, map snapshots become contexts
 * of their own, so that the tools' sums run over every process.  0, or -1 with err. */
int tool_data_load_process(struct tool_data *d, const char *trace,
			   const struct tool_kernel_key *keys, char *err, size_t errlen);
void tool_data_free(struct tool_data *d);

/* How much of a run (or of one of its processes) ran with probes: kernels launched and
 * instrumented, their launches, and the device time of the launches that have a kernel span
 * (kernels of CUDA graphs have none; spans off, none at all). */
struct tool_coverage {
	uint64_t kernels, kernels_probed;
	uint64_t launches, launches_probed;
	uint64_t spans, gpu_ns, gpu_ns_probed;
};
/* p = NULL: the whole run. */
void tool_coverage_of(const struct tool_data *d, const struct tool_process *p,
		      struct tool_coverage *c);
/* "probed: K of N kernels launched, L of M launches (x%), y% of the GPU time of T timed
 * launches": one line, or the JSON object's members (no braces). */
void tool_coverage_print(const struct tool_coverage *c, int json, FILE *f);
/* The device of a map snapshot's context (MAP records' ctx), or -1 when the trace does not say. */
int tool_ctx_device(const struct tool_data *d, uint32_t ctx);
/* Drops what the trace gave (kernels keep their ids), for a reload while following. */
void tool_data_reset_trace(struct tool_data *d);
/* A trace read as it grows (a running process's, for --metrics): open reads the header,
 * each update reads only what was appended since the previous one (whole frames; a frame the
 * writer is still writing waits for the next update) and folds it into the data, which then
 * equals what tool_data_load of the file would give.  update: 0, or -1 with err (out of
 * memory, the file unreadable); at damage, 0 with the message in err: the records before it
 * are kept and reading stops there. */
struct tool_follow;
struct tool_follow *tool_follow_open(const char *trace, char *err, size_t errlen);
int tool_follow_update(struct tool_follow *f, char *err, size_t errlen);
const struct tool_data *tool_follow_data(const struct tool_follow *f);
/* Compressed bytes of the file decoded: in all, and by the last update. */
void tool_follow_bytes(const struct tool_follow *f, uint64_t *total, uint64_t *last_update);
void tool_follow_close(struct tool_follow *f);

const struct tool_kernel *tool_kernel_by_id(const struct tool_data *d, uint32_t id);
const struct tool_map *tool_map_by_name(const struct tool_data *d, const char *name);
/* A map's u64 word `word` of the value at key (0 when absent); for per-SM maps the sum of the
 * SM copies. */
uint64_t tool_map_u64(const struct tool_map *m, uint32_t key, uint32_t word);
/* The same with a choice of how the copies of a per-SM map combine (the least non-zero copy,
 * the largest); plain maps have one copy. */
enum tool_reduce { TOOL_SUM, TOOL_MIN, TOOL_MAX };
uint64_t tool_map_reduce(const struct tool_map *m, uint32_t key, uint32_t word,
			 enum tool_reduce how);
/* Copies of each value in the map's records: CUBPF_PERCPU_SLOTS for per-SM maps, else 1. */
uint32_t tool_map_copies(const struct tool_map *m);
/* GPU time -> host time with the CLOCK record of the device nearest before t (the first if
 * none is before it).  Returns t unchanged when the trace has no CLOCK for the device. */
uint64_t tool_gpu_to_host(const struct tool_data *d, uint32_t device, uint64_t t);

/* ---- the tools ---------------------------------------------------------------------------- */
struct tool_opts {
	int json;
	int top;                    /* rows in "top N" lists (default 10) */
};

struct tool {
	const char *name;
	const char *probe;          /* probe object file name; NULL = user programs (-p) */
	/* under --sanitizer, when not NULL: the same tool counting where NVIDIA's patching API is
	 * cheap (BLOCK_ENTER; its BLOCK_EXIT costs ~19x on a memory-bound kernel) */
	const char *sanitizer_probe;
	const char *summary;
	const char *help;           /* what it prints, for `cubpf run -t NAME --help` */
	void (*report)(const struct tool_data *d, const struct tool_opts *o, FILE *f);
	const struct tool_kernel_key *kernel_keys; /* its maps keyed by kernel id, NULL-ended */
};

const struct tool *tool_find(const char *name);
const struct tool *tool_list(size_t *n);
/* launchlate's latencies of kernel k (launch call -> GPU start) over every GPU, as its report
 * counts them: log2 slots of ns (slot b: 2^b .. 2^(b+1) - 1; 0 and 1 ns in slot 0), samples,
 * their sum; all 0 when the trace has no launchlate map or k no launch. */
void tool_launchlate_latencies(const struct tool_data *d, const struct tool_kernel *k,
			       uint64_t slots[64], uint64_t *n, uint64_t *total_ns);

/* threadhist's distribution as its report lists it: how many threads ran how many times, most
 * executions first (caller frees); NULL and *n = 0 when the trace has none. */
struct tool_th_row {
	uint64_t executions, threads;
};
struct tool_th_row *tool_threadhist_rows(const struct tool_data *d, size_t *n);

/* Copies the probe object `in` to `out` with the 8-byte .rodata constant `sym` (a `const
 * volatile __u64` global) set to value (tools/tool_patch.c).  0, or -1 with err. */
int tool_patch_rodata_u64(const char *in, const char *sym, uint64_t value, const char *out,
			  char *err, size_t errlen);

/* The common footer: memory the maps take, kernels not instrumented (with reasons), drops. */
void tool_report_common(const struct tool_data *d, const struct tool_opts *o, FILE *f);
/* -p: every map of the latest snapshots, as `bpftool map dump` prints them. */
void tool_report_maps(const struct tool_data *d, const struct tool_opts *o, FILE *f);

/* ---- metrics (tools/tool_metrics.c, served by tools/tool_metrics_http.c) -------------------- */
/* Kernels of a process with series of their own; the others are summed as kernel="_other". */
#define TOOL_METRICS_KERNELS 200
/* One process of the run as the endpoint shows it: its trace read alone (labels pid=). */
struct tool_metrics_proc {
	uint32_t pid;
	const struct tool_data *d;
	uint64_t trace_bytes;
};
/* The Prometheus text exposition (0.0.4) of the run: cubpf's health, launches and threads per
 * kernel, and the maps of `tool` (kcount, launchlate, memtrace; NULL or another: none). */
void tool_metrics_write(FILE *f, const char *tool, const struct tool_metrics_proc *p, size_t n);
/* The run's traces kept open between scrapes (one thread uses it: the server's): each call
 * reads what paths[0..n) gained since the last (a path new to it is opened), then writes the
 * exposition as tool_metrics_write.  A trace's cubpf_trace_bytes is what was read of it. */
struct tool_metrics_traces;
struct tool_metrics_traces *tool_metrics_traces_new(void);
void tool_metrics_traces_write(struct tool_metrics_traces *t, FILE *f, const char *tool,
			       char *const *paths, size_t n);
void tool_metrics_traces_free(struct tool_metrics_traces *t);

/* An HTTP endpoint on [ADDR:]PORT (ADDR defaults to 127.0.0.1): GET /metrics (or /) answers
 * with what body writes, from a thread of its own that holds no lock of the caller's.  listen
 * binds at once (NULL + err: a port in use is said before anything starts); start runs the
 * thread; stop ends it and closes the socket. */
struct tool_metrics_server;
struct tool_metrics_server *tool_metrics_listen(const char *spec, char *err, size_t errlen);
int tool_metrics_start(struct tool_metrics_server *s, void (*body)(void *ctx, FILE *f), void *ctx);
/* The address it listens on, "127.0.0.1:9400" (the port the system gave for port 0). */
const char *tool_metrics_address(const struct tool_metrics_server *s);
void tool_metrics_stop(struct tool_metrics_server *s);

/* Text from a file (kernel, module, map and program names, paths, messages) for a terminal:
 * valid UTF-8 stays as it is; C0 controls, DEL, C1 controls (ESC and CSI sequences), bidi
 * overrides, bytes that are not UTF-8 and the backslash are escaped (\e, \x1b, \u009b, ...).
 * tool_text returns s itself when nothing needs escaping (no copy, no length limit), else buf
 * (cut with "..." past len; TOOL_TEXT_MAX suits a name).  tool_text_put writes any length,
 * with newlines and tabs as they are when keep_newlines (a log of several lines). */
#define TOOL_TEXT_MAX 1024
const char *tool_text(const char *s, char *buf, size_t len);
void tool_text_put(FILE *f, const char *s, int keep_newlines);
/* One line on stderr, the whole of it escaped as tool_text (messages quote names from files);
 * fmt has no newline. */
void tool_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A JSON string of s: valid and UTF-8 whatever s holds (see tool_common.c). */
void tool_json_string(FILE *f, const char *s);
/* The demangled name of a mangled one (caller frees), NULL when it is not C++ or cannot be
 * demangled: cubpf's demangler, then libstdc++'s (tools/cmd_inspect.c). */
char *tool_demangle(const char *mangled);
/* The readable part of a mangled name (_Z6vecaddPfS_i -> vecadd), escaped as tool_text. */
const char *tool_short_name(const char *mangled, char *buf, size_t len);
void tool_log2_hist(FILE *f, const char *unit, const uint64_t *slots, int nslots);

#endif
