/* tests/tools: the formatters of `cubpf run -t TOOL`, fed with traces written through store/'s
 * writer (the tools read no log line), and cubpf run's option errors (the built binary). */
#define _GNU_SOURCE
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "store/store.h"
#include "tools/tools.h"
#include "vm/vm.h"

static char trace_path[] = "/tmp/cubpf-test-tools-XXXXXX";

static struct store_trace_writer *create(void)
{
	char err[STORE_ERRLEN];
	struct store_trace_process p = {.pid = 1, .cubpf_version = "test", .hostname = "h",
					.cmdline = "./app"};
	int fd = mkstemp(trace_path);
	assert_true(fd >= 0);
	close(fd);
	struct store_trace_writer *w = store_trace_create(trace_path, &p, NULL, err, sizeof(err));
	if (!w)
		fail_msg("store_trace_create: %s", err);
	return w;
}

static void kernel(struct store_trace_writer *w, const char *name, uint64_t launch_ns,
		   uint32_t grid, uint32_t block)
{
	struct store_rec_kernel k = {.launch_ns = launch_ns, .name = store_trace_intern(w, name),
				     .grid = {grid, 1, 1}, .block = {block, 1, 1}};
	assert_int_equal(store_trace_kernel(w, &k), 0);
}

/* A MAP record of u32 keys and u64 values (nwords per value). */
static void map_u64(struct store_trace_writer *w, const char *name, uint64_t ts, const uint32_t *keys,
		    const uint64_t *vals, uint32_t n, uint32_t nwords)
{
	size_t pair = 4 + 8 * (size_t)nwords;
	uint8_t *kv = calloc(n ? n : 1, pair);
	assert_non_null(kv);
	for (uint32_t i = 0; i < n; i++) {
		memcpy(kv + i * pair, &keys[i], 4);
		memcpy(kv + i * pair + 4, &vals[i * nwords], 8 * (size_t)nwords);
	}
	struct store_rec_map m = {.ts_ns = ts, .name = store_trace_intern(w, name),
				  .map_type = 1503, .key_size = 4, .value_size = 8 * nwords, .count = n};
	assert_int_equal(store_trace_map(w, &m, kv, n * pair), 0);
	free(kv);
}

/* A per-SM MAP record as the shim writes it: u32 keys, 256 copies of a value of nwords u64
 * words each (slot-major); vals[(i * 256 + slot) * nwords + word], zero where not given. */
static uint32_t map_ctx; /* the MAP records' context (format 1.2); 0 = not said */

static void map_percpu(struct store_trace_writer *w, const char *name, uint64_t ts,
		       const uint32_t *keys, const uint64_t *vals, uint32_t n, uint32_t nwords)
{
	size_t value = 256 * 8 * (size_t)nwords, pair = 4 + value;
	uint8_t *kv = calloc(n ? n : 1, pair);
	assert_non_null(kv);
	for (uint32_t i = 0; i < n; i++) {
		memcpy(kv + i * pair, &keys[i], 4);
		memcpy(kv + i * pair + 4, &vals[(size_t)i * 256 * nwords], value);
	}
	struct store_rec_map m = {.ts_ns = ts, .name = store_trace_intern(w, name),
				  .map_type = 6, .key_size = 4, .value_size = (uint32_t)value,
				  .count = n, .ctx = map_ctx};
	assert_int_equal(store_trace_map(w, &m, kv, n * pair), 0);
	free(kv);
}

/* A HOST_MAP record of one u32 key and u64 value, as the shim writes a host map at exit. */
static void host_map_u32(struct store_trace_writer *w, const char *name, uint32_t key,
			 uint64_t value)
{
	uint8_t kv[12];
	memcpy(kv, &key, 4);
	memcpy(kv + 4, &value, 8);
	struct store_rec_map m = {.name = store_trace_intern(w, name), .map_type = 1, .key_size = 4,
				  .value_size = 8, .count = 1};
	assert_int_equal(store_trace_host_map(w, &m, kv, sizeof(kv)), 0);
}

static void finish(struct store_trace_writer *w, struct tool_data *d)
{
	char err[STORE_ERRLEN];
	assert_int_equal(store_trace_close(w, err, sizeof(err)), 0);
	memset(d, 0, sizeof(*d));
	err[0] = '\0';
	assert_int_equal(tool_data_load(d, trace_path, err, sizeof(err)), 0);
	assert_string_equal(err, "");
	unlink(trace_path);
	strcpy(trace_path, "/tmp/cubpf-test-tools-XXXXXX");
}

/* The report of one tool as a string (caller frees). */
static char *report(const char *tool, const struct tool_data *d, int json)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct tool_opts o = {.json = json, .top = 10};
	assert_non_null(f);
	if (!strcmp(tool, "maps"))
		tool_report_maps(d, &o, f);
	else
		tool_find(tool)->report(d, &o, f);
	tool_report_common(d, &o, f);
	fclose(f);
	return buf;
}

/* --json: the parts wrapped in braces (as cubpf run prints them) must be one JSON object. */
static void assert_json(const char *parts)
{
	if (system("python3 -c '' 2>/dev/null") != 0)
		return; /* no python here: the substring checks still run */
	FILE *p = popen("python3 -c 'import json,sys; json.load(sys.stdin)'", "w");
	assert_non_null(p);
	fprintf(p, "{%s}", parts);
	int st = pclose(p);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail_msg("not JSON: {%s}", parts);
}

static void assert_contains(const char *hay, const char *needle)
{
	if (!strstr(hay, needle))
		fail_msg("expected \"%s\" in:\n%s", needle, hay);
}

static const char noinst_a[] = "live: cuModuleLoadData: 3 kernels not instrumentable: no PTX "
			       "for sm_90 in the image (1 cubins, SASS only)";

/* The run metadata the shim writes for one module of vecadd (kernel id 1), one context's maps
 * and a SASS-only module. */
static void meta_a(struct store_trace_writer *w)
{
	struct store_rec_kernel_id k = {.id = 1, .name = store_trace_intern(w, "_Z6vecaddPfS_i")};
	assert_int_equal(store_trace_kernel_id(w, &k), 0);
	struct store_rec_map_memory mm = {.context = 0x1234, .device_bytes = 131072, .nmaps = 1,
					  .ctx = 1};
	assert_int_equal(store_trace_map_memory(w, &mm, 0), 0);
	struct store_rec_not_instrumented n = {
		.reason = STORE_NOINST_NO_PTX, .kernels = 3, .sm = 90,
		.api = store_trace_intern(w, "cuModuleLoadData")};
	assert_int_equal(store_trace_not_instrumented(w, &n, noinst_a), 0);
}

/* The ring buffers' producer bookkeeping (device memory) is named in the memory line: MAP_MEMORY
 * of format 1.5 says it after its fixed part. */
static void test_ringbuf_bookkeeping_in_the_memory_line(void **state)
{
	(void)state;
	struct store_trace_writer *w = create();
	struct store_rec_map_memory mm = {.device_bytes = 8768, .pinned_bytes = 4165760, .nmaps = 2,
					  .ctx = 1};
	assert_int_equal(store_trace_map_memory(w, &mm, 8256), 0);
	struct tool_data d;
	finish(w, &d);
	char *out = report("kcount", &d, 0);
	assert_contains(out, "maps and buffers: 8768 device bytes (8256 of them ring buffer "
			     "bookkeeping), 4165760 pinned host bytes");
	free(out);
	tool_data_free(&d);
}

static void test_kcount(void **state)
{
	(void)state;
	struct store_trace_writer *w = create();
	kernel(w, "_Z6vecaddPfS_i", 100, 4, 256);
	kernel(w, "_Z6vecaddPfS_i", 200, 2, 128);
	kernel(w, "sass_only_kernel", 300, 1, 32);
	uint32_t keys[] = {1};
	/* launches, threads, first entry, last exit on SMs 0 and 5: summed, least, largest */
	static uint64_t vals[256 * 16]; /* 128-byte values: the 4 counters, padding */
	const uint64_t sm0[] = {1, 768, 1000000, 1200000}, sm5[] = {1, 512, 1100000, 1250000};
	memcpy(vals, sm0, sizeof(sm0));
	memcpy(vals + 5 * 16, sm5, sizeof(sm5));
	map_percpu(w, "kstats", 10, keys, vals, 1, 16);
	struct tool_data d;
	meta_a(w);
	finish(w, &d);
	char *out = report("kcount", &d, 0);
	assert_contains(out, "vecadd");
	assert_contains(out, "        2         1280         2          250.0");
	assert_contains(out, "maps and buffers: 131072 device bytes, 0 pinned host bytes");
	assert_contains(out, "kernels instrumented: 1");
	assert_contains(out, "kernels launched but not instrumented: 1\n  sass_only_kernel (1 launches)\n");
	assert_contains(out, "reasons:\n  - cuModuleLoadData: 3 kernels not "
			     "instrumentable: no PTX for sm_90");
	assert_contains(out, "trace: complete");
	free(out);
	out = report("kcount", &d, 1);
	assert_json(out);
	assert_contains(out, "\"name\":\"_Z6vecaddPfS_i\",\"instrumented\":true,\"launches\":2,"
			     "\"threads\":1280,\"gpu_runs\":2,\"gpu_threads\":1280,\"gpu_span_ns\":250000");
	assert_contains(out, "\"not_instrumented\":[\"sass_only_kernel\"]");
	free(out);
	tool_data_free(&d);
}

/* blocklat (issue 32): per-SM block statistics of one kernel on SMs 0 and 5 are combined (sums,
 * least, largest, the slowest block where the largest was), the spread per SM and the tail
 * come out of the SM copies, and the histogram is the kernel's. */
static void test_blocklat(void **state)
{
	(void)state;
	struct store_trace_writer *w = create();
	kernel(w, "_Z6vecaddPfS_i", 100, 4, 256);
	uint32_t keys[] = {1};
	static uint64_t vals[256 * 16];
	/* blocks, sum, max, min + 1, first begin, last end, slowest block + 1 */
	const uint64_t sm0[] = {3, 30000, 15000, 5001, 1000000, 1040000, 8};
	const uint64_t sm5[] = {1, 50000, 50000, 50001, 1001000, 1051000, 3};
	memcpy(vals, sm0, sizeof(sm0));
	memcpy(vals + 5 * 16, sm5, sizeof(sm5));
	map_percpu(w, "blstats", 10, keys, vals, 1, 16);
	uint32_t hkeys[] = {32 + 12, 32 + 13, 32 + 15};
	uint64_t hvals[] = {1, 2, 1};
	map_u64(w, "blhist", 10, hkeys, hvals, 3, 1);
	meta_a(w);
	struct tool_data d;
	finish(w, &d);
	char *out = report("blocklat", &d, 0);
	assert_contains(out, "vecadd                              4       20.0        5.0       50.0"
			     "        2     5    2     1-3            30.0        50.0       11.0\n");
	assert_contains(out, "vecadd: block durations\n");
	assert_contains(out, "     8192 -> 16383    : 2 ");
	assert_contains(out, "    32768 -> 65535    : 1 ");
	free(out);
	out = report("blocklat", &d, 1);
	assert_json(out);
	assert_contains(out, "\"tool\":\"blocklat\",\"kernels\":[{\"name\":\"_Z6vecaddPfS_i\","
			     "\"blocks\":4,\"mean_ns\":20000,\"min_ns\":5000,\"max_ns\":50000,"
			     "\"slowest_block\":2,\"slowest_sm_slot\":5,\"sms\":2,\"sm_blocks_min\":1,"
			     "\"sm_blocks_max\":3,\"sm_busy_min_ns\":30000,\"sm_busy_max_ns\":50000,"
			     "\"tail_ns\":11000,\"hist_log2_ns\":[0,0,0,0,0,0,0,0,0,0,0,0,1,2,0,1,");
	free(out);
	tool_data_free(&d);
	/* nothing recorded: said, not an empty table */
	w = create();
	meta_a(w);
	finish(w, &d);
	out = report("blocklat", &d, 0);
	assert_contains(out, "(no thread block ended in a probed kernel)");
	free(out);
	tool_data_free(&d);
}

/* instrcount (issue 32): the lanes and SM copies of a kernel's records add up; instructions per
 * thread launched and the SIMT occupancy come from them; --json says the same. */
static void test_instrcount(void **state)
{
	(void)state;
	struct store_trace_writer *w = create();
	kernel(w, "_Z6vecaddPfS_i", 100, 4, 256);
	uint32_t keys[] = {1 * 4 + 0, 1 * 4 + 2};
	static uint64_t vals[2 * 256 * 16]; /* 128-byte values: threads, warps, padding */
	vals[0] = 10240, vals[1] = 320;                      /* lane 0, SM 0 */
	vals[5 * 16] = 5120, vals[5 * 16 + 1] = 200;         /* lane 0, SM 5 */
	vals[(256 + 1) * 16] = 4096, vals[(256 + 1) * 16 + 1] = 128; /* lane 2, SM 1 */
	map_percpu(w, "icstats", 10, keys, vals, 2, 16);
	meta_a(w);
	struct tool_data d;
	finish(w, &d);
	char *out = report("instrcount", &d, 0);
	/* 19456 instructions by threads, 648 by warps: 19.0 per thread, 19456 / (32 x 648) */
	assert_contains(out, "vecadd                              1         1024            19456"
			     "              648       19.0  93.8%\n");
	free(out);
	out = report("instrcount", &d, 1);
	assert_json(out);
	assert_contains(out, "\"tool\":\"instrcount\",\"kernels\":[{\"name\":\"_Z6vecaddPfS_i\","
			     "\"launches\":1,\"threads\":1024,\"thread_insns\":19456,\"warp_insns\":648}]");
	free(out);
	tool_data_free(&d);
	w = create();
	meta_a(w);
	finish(w, &d);
	out = report("instrcount", &d, 0);
	assert_contains(out, "(no probed kernel ran a basic block)");
	free(out);
	tool_data_free(&d);
}

/* opcodehist (issue 32): each class's lanes and SM copies add up, with their share of the
 * kernel's instructions. */
static void test_opcodehist(void **state)
{
	(void)state;
	struct store_trace_writer *w = create();
	kernel(w, "_Z6vecaddPfS_i", 100, 4, 256);
	uint32_t keys[] = {1 * 4 + 0, 1 * 4 + 3};
	static uint64_t vals[2 * 256 * 20]; /* threads[20] */
	vals[CUBPF_OP_INT] = 100, vals[CUBPF_OP_FP32] = 250;
	vals[3 * 20 + CUBPF_OP_FP32] = 100;          /* lane 0, SM 3 */
	vals[(256 + 7) * 20 + CUBPF_OP_FP32] = 50;   /* lane 3, SM 7 */
	map_percpu(w, "ohstats", 10, keys, vals, 2, 20);
	meta_a(w);
	struct tool_data d;
	finish(w, &d);
	char *out = report("opcodehist", &d, 0);
	assert_contains(out, "vecadd: 500 instructions by threads\n");
	assert_contains(out, "  int                       100  20.0%\n");
	assert_contains(out, "  fp32                      400  80.0%\n");
	assert_true(strstr(out, "fp64") == NULL);
	free(out);
	out = report("opcodehist", &d, 1);
	assert_json(out);
	assert_contains(out, "\"tool\":\"opcodehist\",\"kernels\":[{\"name\":\"_Z6vecaddPfS_i\","
			     "\"thread_insns\":500,\"classes\":{\"int\":{\"threads\":100},"
			     "\"fp32\":{\"threads\":400}}}]");
	free(out);
	tool_data_free(&d);
}

/* hotblocks (issue 32): a block's shards add up, its facts come from whichever shard has them,
 * blocks are ordered by instructions (entries x instructions) with their share. */
static void test_hotblocks(void **state)
{
	(void)state;
	struct store_trace_writer *w = create();
	kernel(w, "_Z6vecaddPfS_i", 100, 4, 256);
#define HBK(shard, block) (((1 * 64) + (shard)) * 256 + (block))
	uint32_t keys[] = {HBK(0, 0), HBK(3, 1), HBK(5, 1), HBK(0, 2)};
	static uint64_t vals[4 * 16]; /* threads, insns << 32 | line, file << 32 | line */
	const uint64_t b0[] = {1024, 9ull << 32 | 30, 1ull << 32 | 10};
	const uint64_t b1[] = {1000, 12ull << 32 | 41, 1ull << 32 | 12};
	const uint64_t b1b[] = {24, 0, 0}; /* a shard whose leaders wrote no facts */
	const uint64_t b2[] = {1024, 1ull << 32 | 55, 0};
	memcpy(vals, b0, sizeof(b0));
	memcpy(vals + 16, b1, sizeof(b1));
	memcpy(vals + 32, b1b, sizeof(b1b));
	memcpy(vals + 48, b2, sizeof(b2));
	map_u64(w, "hbstats", 10, keys, vals, 4, 16);
	meta_a(w);
	struct tool_data d;
	finish(w, &d);
	char *out = report("hotblocks", &d, 0);
	const char *r1 = strstr(out, "vecadd                            1       41       1:12     12"
				     "           1024            12288  54.5%\n");
	const char *r0 = strstr(out, "vecadd                            0       30       1:10      9"
				     "           1024             9216  40.9%\n");
	const char *r2 = strstr(out, "vecadd                            2       55          -      1"
				     "           1024             1024   4.5%\n");
	if (!r1 || !r0 || !r2 || r0 < r1 || r2 < r0)
		fail_msg("hotblocks rows missing or out of order:\n%s", out);
	free(out);
	out = report("hotblocks", &d, 1);
	assert_json(out);
	assert_contains(out, "\"tool\":\"hotblocks\",\"blocks\":[{\"kernel\":\"_Z6vecaddPfS_i\","
			     "\"block\":1,\"shared_slot\":false,\"insns\":12,\"ptx_line\":41,"
			     "\"src_file\":1,\"src_line\":12,\"thread_entries\":1024,"
			     "\"thread_insns\":12288,\"kernel_thread_insns\":22528}");
	free(out);
	tool_data_free(&d);
#undef HBK
}

/* syncwait's records since 2026-11-28 (128 bytes, 16 sites by place): the instruction index
 * comes from the copies that wrote it, the last record (every site from the 16th on) is
 * marked '+'. */
static void test_syncwait_sites(void **state)
{
	(void)state;
	struct store_trace_writer *w = create();
	kernel(w, "_Z6vecaddPfS_i", 100, 4, 256);
	uint32_t keys[] = {16 + 2, 16 + 15};
	static uint64_t vals[2 * 256 * 16];
	/* threads, wait_ns, max_ns, kind << 32 | id, instruction + 1 */
	const uint64_t a0[] = {64, 6400, 300, 1ull << 32 | 0, 41 + 1};
	const uint64_t a3[] = {32, 3200, 200, 0, 0};     /* SM 3 wrote no facts */
	const uint64_t b0[] = {32, 96000, 5000, 1ull << 32 | 1, 377 + 1};
	memcpy(vals, a0, sizeof(a0));
	memcpy(vals + 3 * 16, a3, sizeof(a3));
	memcpy(vals + 256 * 16, b0, sizeof(b0));
	map_percpu(w, "swsites", 10, keys, vals, 2, 16);
	meta_a(w);
	struct tool_data d;
	finish(w, &d);
	char *out = report("syncwait", &d, 0);
	const char *b = strstr(out, "vecadd                        377+ bar.sync           1         "
				    "32         96.0       3000        5.0  90.9%\n");
	const char *a = strstr(out, "vecadd                          41 bar.sync           0         "
				    "96          9.6        100        0.3   9.1%\n");
	if (!a || !b || a < b)
		fail_msg("syncwait rows missing or out of order:\n%s", out);
	free(out);
	tool_data_free(&d);
}

/* syncwait (issue 32): a site's SM copies add up, sites come most time first with their kind,
 * id and share of the kernel's barrier time; --json says the same.  Records of cubpf before
 * 2026-11-28 (32 bytes, 64 sites by instruction index). */
static void test_syncwait(void **state)
{
	(void)state;
	struct store_trace_writer *w = create();
	kernel(w, "_Z6vecaddPfS_i", 100, 4, 256);
	uint32_t keys[] = {64 + 3, 64 + 9};
	static uint64_t vals[2 * 256 * 4];
	/* threads, wait_ns, max_ns, kind << 32 | id */
	const uint64_t fence0[] = {32, 3200, 100, 7ull << 32 | 0xffffffffu};
	const uint64_t bar0[] = {64, 640000, 12000, 1ull << 32 | 0};
	const uint64_t bar2[] = {32, 160000, 9000, 1ull << 32 | 0};
	memcpy(vals, fence0, sizeof(fence0));
	memcpy(vals + 256 * 4, bar0, sizeof(bar0));
	memcpy(vals + 256 * 4 + 2 * 4, bar2, sizeof(bar2));
	/* SM 2's warps wrote no kind (syncwait.bpf.c writes it now and then): SM 0's names it */
	vals[256 * 4 + 2 * 4 + 3] = 0;
	map_percpu(w, "swsites", 10, keys, vals, 2, 4);
	meta_a(w);
	struct tool_data d;
	finish(w, &d);
	char *out = report("syncwait", &d, 0);
	const char *bar = strstr(out, "vecadd                           9 bar.sync           0         "
				      "96        800.0       8333       12.0  99.6%\n");
	const char *fence = strstr(out, "vecadd                           3 fence              -         "
					"32          3.2        100        0.1   0.4%\n");
	if (!bar || !fence || fence < bar)
		fail_msg("syncwait rows missing or out of order:\n%s", out);
	free(out);
	out = report("syncwait", &d, 1);
	assert_json(out);
	assert_contains(out, "\"tool\":\"syncwait\",\"sites\":[{\"kernel\":\"_Z6vecaddPfS_i\","
			     "\"site\":9,\"kind\":\"bar.sync\",\"id\":0,\"threads\":96,\"wait_ns\":800000,"
			     "\"max_ns\":12000,\"kernel_wait_ns\":803200},{\"kernel\":\"_Z6vecaddPfS_i\","
			     "\"site\":3,\"kind\":\"fence\",\"id\":-1,");
	free(out);
	tool_data_free(&d);
}

/* memdelay (issue 32): the kernel's timed launches split by their place among its launches
 * (the probes ran on places 0, 2, ...: cubpf run's --sample 2), the ratio of the mean device
 * times, and the loads the SM copies counted; a kernel with one timed launch has no ratio. */
static void kernel_corr(struct store_trace_writer *w, const char *name, uint64_t corr)
{
	struct store_rec_kernel k = {.launch_ns = 1000 + corr, .name = store_trace_intern(w, name),
				     .corr = corr, .grid = {4, 1, 1}, .block = {256, 1, 1}};
	assert_int_equal(store_trace_kernel(w, &k), 0);
}

static void span(struct store_trace_writer *w, const char *name, uint64_t corr, uint64_t ns);

static void test_memdelay(void **state)
{
	(void)state;
	struct store_trace_writer *w = create();
	const uint64_t ns[] = {300000, 100000, 310000, 100000};
	for (uint64_t c = 1; c <= 4; c++)
		kernel_corr(w, "_Z6vecaddPfS_i", c * 2); /* another kernel's launches between */
	for (int i = 3; i >= 0; i--) /* spans come when their events complete: any order */
		span(w, "_Z6vecaddPfS_i", (uint64_t)(i + 1) * 2, ns[i]);
	kernel_corr(w, "_Z4oncev", 9);
	span(w, "_Z4oncev", 9, 5000);
	uint32_t keys[] = {1};
	static uint64_t vals[256 * 16];
	vals[0] = 1000, vals[1] = 250;
	vals[3 * 16] = 24, vals[3 * 16 + 1] = 250;
	map_percpu(w, "mdstats", 10, keys, vals, 1, 16);
	meta_a(w);
	struct store_rec_kernel_id kid = {.id = 2, .name = store_trace_intern(w, "_Z4oncev")};
	assert_int_equal(store_trace_kernel_id(w, &kid), 0);
	struct tool_data d;
	finish(w, &d);
	char *out = report("memdelay", &d, 0);
	assert_contains(out, "vecadd                              4        2        2        305.0"
			     "        100.0    3.050x           1024      250\n");
	assert_contains(out, "once                                1        1        0          5.0"
			     "          0.0         -              0        0\n");
	free(out);
	out = report("memdelay", &d, 1);
	assert_json(out);
	assert_contains(out, "{\"name\":\"_Z6vecaddPfS_i\",\"launches\":4,\"delayed_runs\":2,"
			     "\"native_runs\":2,\"delayed_mean_ns\":305000,\"native_mean_ns\":100000,"
			     "\"slowdown\":3.0500,\"loads_delayed\":1024,\"delay_ns\":250}");
	free(out);
	tool_data_free(&d);
}

/* The probe object memdelay runs: delay_ns written into .rodata, the rest byte for byte. */
static void test_patch_rodata(void **state)
{
	(void)state;
	char err[256], out[] = "/tmp/cubpf-test-patch-XXXXXX";
	const char *in = TOOLS_TEST_BUILD "/probes/memdelay.bpf.o";
	int fd = mkstemp(out);
	assert_true(fd >= 0);
	close(fd);
	if (tool_patch_rodata_u64(in, "delay_ns", 123456, out, err, sizeof(err)))
		fail_msg("%s", err);
	struct vm_object *a, *b;
	assert_int_equal(vm_object_load_file(in, &a, err, sizeof(err)), 0);
	assert_int_equal(vm_object_load_file(out, &b, err, sizeof(err)), 0);
	uint64_t va = 0, vb = 0;
	for (uint32_t i = 0; i < b->map_cnt; i++)
		if (b->maps[i].origin == VM_MAP_RODATA && b->maps[i].value_size >= 8) {
			memcpy(&va, a->maps[i].init, 8);
			memcpy(&vb, b->maps[i].init, 8);
		}
	assert_int_equal(va, 1000);
	assert_int_equal(vb, 123456);
	assert_int_equal(vm_verify(b, 0, NULL, NULL, NULL, 0), 0);
	vm_object_free(a);
	vm_object_free(b);
	assert_int_equal(tool_patch_rodata_u64(in, "no_such", 1, out, err, sizeof(err)), -1);
	assert_string_equal(err, "no symbol no_such");
	assert_int_equal(tool_patch_rodata_u64(in, "memdelay", 1, out, err, sizeof(err)), -1);
	assert_contains(err, "is not a 8-byte constant in .rodata");
	unlink(out);
}

/* Issue 30: the report says how much ran with probes: kernels and launches instrumented of
 * those launched, and the share of the device time (kernel spans) spent in instrumented kernels;
 * --json says the same. */
static void span(struct store_trace_writer *w, const char *name, uint64_t corr, uint64_t ns)
{
	struct store_rec_kspan k = {.corr = corr, .begin_ns = 1000000, .end_ns = 1000000 + ns,
				    .name = store_trace_intern(w, name)};
	assert_int_equal(store_trace_kspan(w, &k), 0);
}

static void test_coverage(void **state)
{
	(void)state;
	struct store_trace_writer *w = create();
	meta_a(w); /* _Z6vecaddPfS_i has kernel id 1: instrumented */
	kernel(w, "_Z6vecaddPfS_i", 100, 4, 256);
	kernel(w, "_Z6vecaddPfS_i", 200, 2, 128);
	kernel(w, "sass_only_kernel", 300, 1, 32);
	kernel(w, "sass_only_kernel", 400, 1, 32);
	span(w, "_Z6vecaddPfS_i", 1, 3000);
	span(w, "_Z6vecaddPfS_i", 2, 3000);
	span(w, "sass_only_kernel", 3, 2000);
	/* the fourth launch has no span (a graph's, say) */
	struct tool_data d;
	finish(w, &d);
	char *out = report("kcount", &d, 0);
	assert_contains(out, "probed: 1 of 2 kernels launched, 2 of 4 launches (50.0%), 75.0% of "
			     "the GPU time of 3 timed launches (0.006 of 0.008 ms)\n");
	free(out);
	out = report("kcount", &d, 1);
	assert_json(out);
	assert_contains(out, "\"coverage\":{\"kernels_launched\":2,\"kernels_instrumented\":1,"
			     "\"launches\":4,\"launches_instrumented\":2,\"timed_launches\":3,"
			     "\"gpu_ns\":8000,\"gpu_ns_instrumented\":6000}");
	free(out);
	tool_data_free(&d);
}

/* The report says kernel ids, the maps' memory and the kernels not instrumented from the run
 * metadata records alone (no log line is read): the same trace without them reports every
 * kernel as not instrumented, 0 bytes and no reason. */
static void kcount_trace(struct tool_data *d, int meta)
{
	struct store_trace_writer *w = create();
	if (meta)
		meta_a(w);
	kernel(w, "_Z6vecaddPfS_i", 100, 4, 256);
	kernel(w, "_Z6vecaddPfS_i", 200, 2, 128);
	kernel(w, "sass_only_kernel", 300, 1, 32);
	uint32_t keys[] = {1};
	static uint64_t vals[256 * 16];
	const uint64_t sm0[] = {1, 768, 1000000, 1200000};
	memcpy(vals, sm0, sizeof(sm0));
	map_percpu(w, "kstats", 10, keys, vals, 1, 16);
	finish(w, d);
}

/* A kernel patched through the Sanitizer backend (KERNEL_ID flags) is named as such, in the text
 * report and in --json; the kernel rewritten as PTX is not. */
static void test_report_names_the_backend(void **state)
{
	(void)state;
	struct store_trace_writer *w = create();
	meta_a(w);
	struct store_rec_kernel_id k = {.id = 2, .name = store_trace_intern(w, "sass_only_kernel"),
					.flags = STORE_KERNEL_ID_SANITIZER};
	assert_int_equal(store_trace_kernel_id(w, &k), 0);
	kernel(w, "_Z6vecaddPfS_i", 100, 4, 256);
	kernel(w, "sass_only_kernel", 300, 1, 32);
	struct tool_data d;
	finish(w, &d);
	char *out = report("kcount", &d, 0);
	assert_contains(out, "kernels instrumented: 2 (PTX rewriting 1, Sanitizer patching 1)\n"
			     "kernels patched through the Sanitizer backend (SASS only):\n"
			     "  sass_only_kernel\nkernels launched but not instrumented: 0\n");
	free(out);
	out = report("kcount", &d, 1);
	assert_json(out);
	assert_contains(out, "\"sanitizer_kernels\":[\"sass_only_kernel\"]");
	free(out);
	tool_data_free(&d);
}

static void test_report_from_trace_alone(void **state)
{
	(void)state;
	struct tool_data bare, from_trace;
	kcount_trace(&bare, 0);
	kcount_trace(&from_trace, 1);
	char *a = report("kcount", &bare, 0), *b = report("kcount", &from_trace, 0);
	assert_contains(a, "maps and buffers: 0 device bytes, 0 pinned host bytes\n");
	assert_contains(a, "kernels instrumented: 0\nkernels launched but not instrumented: 2\n");
	assert_null(strstr(a, "reasons:"));
	assert_contains(b, "maps and buffers: 131072 device bytes, 0 pinned host bytes\n");
	assert_contains(b, "kernels instrumented: 1\nkernels launched but not instrumented: 1\n"
			   "  sass_only_kernel (1 launches)\nreasons:\n  - cuModuleLoadData: 3 kernels "
			   "not instrumentable: no PTX for sm_90");
	free(a);
	free(b);
	b = report("kcount", &from_trace, 1);
	assert_json(b);
	assert_contains(b, "\"device_bytes\":131072");
	assert_contains(b, "\"not_instrumented\":[\"sass_only_kernel\"],\"notes\":[\"live: "
			   "cuModuleLoadData: 3 kernels not instrumentable");
	free(b);
	/* cubpf run reloads the trace for each report: the memory, the reasons and the host maps
	 * are not added up again */
	char err[STORE_ERRLEN] = "";
	struct store_trace_writer *w = create();
	struct store_rec_map_memory mm = {.device_bytes = 4096, .pinned_bytes = 8, .ctx = 1};
	store_trace_map_memory(w, &mm, 0);
	mm.ctx = 2; /* a second GPU */
	store_trace_map_memory(w, &mm, 0);
	struct store_rec_not_instrumented n = {.reason = STORE_NOINST_JIT};
	store_trace_not_instrumented(w, &n, "live: a reason");
	host_map_u32(w, "hits", 0, 7);
	struct tool_data d;
	char path[sizeof(trace_path)];
	strcpy(path, trace_path);
	assert_int_equal(store_trace_close(w, err, sizeof(err)), 0);
	memset(&d, 0, sizeof(d));
	for (int i = 0; i < 2; i++) {
		tool_data_reset_trace(&d);
		assert_int_equal(tool_data_load(&d, path, err, sizeof(err)), 0);
		assert_int_equal(d.device_bytes, 8192);
		assert_int_equal(d.pinned_bytes, 16);
		assert_int_equal(d.nnotes, 1);
		assert_int_equal(d.nmaplines, 1);
	}
	unlink(path);
	strcpy(trace_path, "/tmp/cubpf-test-tools-XXXXXX");
	tool_data_free(&d);
	tool_data_free(&bare);
	tool_data_free(&from_trace);
}

/* Format 1.2: MAP records name their context; the tools keep the latest snapshot of each and
 * combine them: the kernel's runs on two GPUs are summed, its first entry is the least of both
 * and its last exit the largest. */
static void test_maps_of_two_gpus_are_combined(void **state)
{
	(void)state;
	struct store_trace_writer *w = create();
	struct store_rec_kernel_id k = {.id = 1, .name = store_trace_intern(w, "_Z6vecaddPfS_i")};
	store_trace_kernel_id(w, &k);
	kernel(w, "_Z6vecaddPfS_i", 100, 4, 256);
	kernel(w, "_Z6vecaddPfS_i", 200, 2, 128);
	uint32_t keys[] = {1};
	static uint64_t vals[256 * 16];
	const uint64_t gpu0[] = {1, 768, 1000000, 1200000}, gpu1[] = {1, 512, 1100000, 1250000};
	memset(vals, 0, sizeof(vals));
	map_ctx = 1;
	map_percpu(w, "kstats", 5, keys, vals, 1, 16); /* older: replaced */
	memcpy(vals, gpu0, sizeof(gpu0));
	map_percpu(w, "kstats", 10, keys, vals, 1, 16);
	map_percpu(w, "kstats", 10, keys, vals, 1, 16); /* the same snapshot again: not added */
	memset(vals, 0, sizeof(vals));
	memcpy(vals + 7 * 16, gpu1, sizeof(gpu1)); /* SM 7 of the other GPU */
	map_ctx = 2;
	map_percpu(w, "kstats", 8, keys, vals, 1, 16); /* older than ctx 1's: still its latest */
	map_ctx = 0;
	struct tool_data d;
	finish(w, &d);
	assert_int_equal(d.nmaps, 1);
	assert_int_equal(d.maps[0].contexts, 2);
	assert_int_equal(tool_map_copies(&d.maps[0]), 512);
	char *out = report("kcount", &d, 0);
	assert_contains(out, "        2         1280         2          250.0");
	free(out);
	out = report("maps", &d, 1);
	assert_json(out);
	assert_contains(out, "{\"context\":1,\"sm\":7,");
	free(out);
	out = report("maps", &d, 0);
	assert_contains(out, "  value (context 0, SM 0): ");
	assert_contains(out, "  value (context 1, SM 7): ");
	free(out);
	tool_data_free(&d);
}

/* Many contexts that share no key (a damaged trace: one MAP record each): combining them would
 * take keys x contexts (2000 one-key snapshots: 2000 x 16 KB = 32 MB, from a trace of a few
 * KB); past 16 times the snapshots' bytes the latest context is shown alone, with a note. */
static void test_maps_too_sparse_to_combine(void **state)
{
	(void)state;
	struct store_trace_writer *w = create();
	for (uint32_t c = 1; c <= 2000; c++) {
		uint32_t key = c;
		uint64_t v = c;
		map_ctx = c;
		struct store_rec_map m = {.ts_ns = c, .name = store_trace_intern(w, "sparse"),
					  .map_type = 1, .key_size = 4, .value_size = 8, .count = 1,
					  .ctx = c};
		uint8_t kv[12];
		memcpy(kv, &key, 4);
		memcpy(kv + 4, &v, 8);
		assert_int_equal(store_trace_map(w, &m, kv, sizeof(kv)), 0);
	}
	map_ctx = 0;
	struct tool_data d;
	finish(w, &d);
	assert_int_equal(d.nmaps, 1);
	assert_int_equal(d.maps[0].count, 1);
	assert_int_equal(d.maps[0].contexts, 1);
	assert_int_equal(d.maps[0].value_size, 8);
	assert_int_equal(tool_map_u64(&d.maps[0], 2000, 0), 2000);
	assert_int_equal(d.nnotes, 1);
	assert_string_equal(d.notes[0], "map sparse: 2000 contexts with too few keys in common to "
					"combine; the latest shown alone");
	tool_data_free(&d);
}

/* The latest snapshot replaces older ones; a copy of it (same time, written again by the shim)
 * and an older one arriving late are not counted again. */
static void test_threadhist(void **state)
{
	(void)state;
	struct store_trace_writer *w = create();
	uint32_t keys[10];
	uint64_t old[10], a[10], b[10];
	for (uint32_t i = 0; i < 10; i++) {
		keys[i] = i;
		old[i] = 100;
		a[i] = i < 5 ? 3 : 1;
		b[i] = 7;
	}
	map_u64(w, "threads", 1000, keys, old, 10, 1);
	map_u64(w, "threads", 2000, keys, a, 10, 1);
	map_u64(w, "threads", 2000, keys, a, 10, 1); /* the same snapshot written again */
	map_u64(w, "threads", 1500, keys, b, 10, 1); /* an older one, late */
	struct tool_data d;
	meta_a(w);
	finish(w, &d);
	char *out = report("threadhist", &d, 0);
	assert_contains(out, "           3             5\n");
	assert_contains(out, "           1             5\n");
	assert_contains(out, "threads 10 (ids 0..9)  min 1  max 3  mean 2.000  stddev 1.000");
	assert_contains(out, "most loaded: 0=3 1=3 2=3 3=3 4=3 5=1");
	assert_contains(out, "least loaded: 9=1 8=1");
	/* meta_a names _Z6vecaddPfS_i kernel id 1; the trace launched none of it */
	assert_contains(out, "executions 20 of 0 threads launched (instrumented kernels)");
	free(out);
	out = report("threadhist", &d, 1);
	assert_json(out);
	assert_contains(out, "\"distribution\":[{\"executions\":1,\"threads\":5},"
			     "{\"executions\":3,\"threads\":5}]");
	assert_contains(out, "\"launched_threads\":0,");
	free(out);
	tool_data_free(&d);
}

static void test_launchlate(void **state)
{
	(void)state;
	struct store_trace_writer *w = create();
	struct store_rec_clock c = {.host_ns = 1000000, .gpu_ns = 999000, .device = 0};
	assert_int_equal(store_trace_clock(w, &c), 0);
	kernel(w, "_Z6vecaddPfS_i", 2000000, 1, 32);
	kernel(w, "_Z6vecaddPfS_i", 3000000, 1, 32);
	/* GPU starts (gpu clock): host = gpu + 1000 -> latencies 5000 and 6000 ns */
	uint32_t keys[] = {1024 + 1, 1024 + 0};
	uint64_t vals[] = {3000000 - 1000 + 6000, 2000000 - 1000 + 5000};
	map_u64(w, "starts", 5, keys, vals, 2, 1);
	struct tool_data d;
	meta_a(w);
	finish(w, &d);
	char *out = report("launchlate", &d, 1);
	assert_json(out);
	free(out);
	out = report("launchlate", &d, 0);
	assert_contains(out, "kernel = vecadd  (2 samples of 2 launches, mean 5.5 us)");
	assert_contains(out, "     4096 -> 8191     : 2          |****************************************|");
	free(out);
	tool_data_free(&d);
}

/* Two GPUs, one context each: each GPU's starts (its context's MAP snapshot) are joined with
 * the launches made on that GPU, and converted with that GPU's clock (offsets 1000 and 5000 ns):
 * latencies 5000 and 7000 ns. */
static void test_launchlate_two_gpus(void **state)
{
	(void)state;
	struct store_trace_writer *w = create();
	for (uint32_t dev = 0; dev < 2; dev++) {
		struct store_rec_clock c = {.host_ns = 1000000, .gpu_ns = 1000000 - (dev ? 5000 : 1000),
					    .device = dev};
		assert_int_equal(store_trace_clock(w, &c), 0);
		struct store_rec_map_memory mm = {.ts_ns = 1, .device_bytes = 4096, .device = dev,
						  .nmaps = 3, .ctx = dev + 1};
		assert_int_equal(store_trace_map_memory(w, &mm, 0), 0);
		struct store_rec_kernel k = {.launch_ns = dev ? 3000000 : 2000000,
					     .name = store_trace_intern(w, "_Z6vecaddPfS_i"),
					     .grid = {1, 1, 1}, .block = {32, 1, 1}, .device = dev};
		assert_int_equal(store_trace_kernel(w, &k), 0);
	}
	uint8_t kv[2][12];
	uint32_t key = 1024; /* kernel id 1, launch 0 */
	uint64_t start[2] = {2000000 - 1000 + 5000, 3000000 - 5000 + 7000};
	for (uint32_t dev = 0; dev < 2; dev++) {
		memcpy(kv[dev], &key, 4);
		memcpy(kv[dev] + 4, &start[dev], 8);
		struct store_rec_map m = {.ts_ns = 5, .name = store_trace_intern(w, "starts"),
					  .map_type = 1503, .key_size = 4, .value_size = 8, .count = 1,
					  .ctx = dev + 1};
		assert_int_equal(store_trace_map(w, &m, kv[dev], sizeof(kv[dev])), 0);
	}
	struct tool_data d;
	meta_a(w);
	finish(w, &d);
	char *out = report("launchlate", &d, 0);
	assert_contains(out, "kernel = vecadd  (2 samples of 2 launches, mean 6.0 us)");
	assert_contains(out, "     4096 -> 8191     : 2 ");
	free(out);
	tool_data_free(&d);
}

/* Whole warps counted once per group of 32 thread ids (`warps`), the rest thread by thread
 * (`threads`): each thread gets its group's count plus its own.  Groups 0 and 1 ran twice,
 * group 2 once, and thread 70 once more on its own: ids 0..95. */
static void test_threadhist_warps(void **state)
{
	(void)state;
	struct store_trace_writer *w = create();
	uint32_t gk[] = {0, 1, 2}, tk[] = {70};
	uint64_t gv[] = {2, 2, 1}, tv[] = {1};
	map_u64(w, "warps", 10, gk, gv, 3, 1);
	map_u64(w, "threads", 10, tk, tv, 1, 1);
	struct tool_data d;
	meta_a(w);
	finish(w, &d);
	char *out = report("threadhist", &d, 0);
	assert_contains(out, "           1            31\n");
	assert_contains(out, "           2            65\n");
	assert_contains(out, "threads 96 (ids 0..95)  min 1  max 2");
	assert_contains(out, "most loaded: 0=2 1=2 2=2");
	assert_contains(out, "least loaded: 95=1 94=1");
	free(out);
	out = report("threadhist", &d, 1);
	assert_json(out);
	assert_contains(out, "\"threads\":96,\"min\":1,\"max\":2");
	free(out);
	tool_data_free(&d);
	/* a grid of 2^25 threads in 2^20 whole warps, all once: no per-thread list is built */
	w = create();
	uint32_t *keys = malloc(sizeof(uint32_t) << 20);
	uint64_t *vals = malloc(sizeof(uint64_t) << 20);
	assert_non_null(keys);
	assert_non_null(vals);
	for (uint32_t i = 0; i < 1u << 20; i++)
		keys[i] = i, vals[i] = 1;
	map_u64(w, "warps", 10, keys, vals, 1u << 20, 1);
	free(keys);
	free(vals);
	meta_a(w);
	finish(w, &d);
	out = report("threadhist", &d, 0);
	assert_contains(out, "           1      33554432\n");
	assert_contains(out, "threads 33554432 (ids 0..33554431)  min 1  max 1");
	free(out);
	tool_data_free(&d);
}

/* Blocks of whole warps as a difference array over groups of 32 ids (`edges`, what the probe
 * writes now): two launches, one of 2 blocks of 64 threads (+1 at groups 0 and 2, -1 at 2 and 4)
 * and one of 1 block (+1 at 0, -1 at 2), and thread 127 once more on its own: ids 0..63 ran
 * twice, 64..126 once, 127 twice. */
static void test_threadhist_edges(void **state)
{
	(void)state;
	struct store_trace_writer *w = create();
	uint32_t ek[] = {0, 2, 4}, tk[] = {127};
	uint64_t ev[] = {2, (uint64_t)-1, (uint64_t)-1}, tv[] = {1};
	map_u64(w, "edges", 10, ek, ev, 3, 1);
	map_u64(w, "threads", 10, tk, tv, 1, 1);
	struct tool_data d;
	meta_a(w);
	finish(w, &d);
	char *out = report("threadhist", &d, 0);
	assert_contains(out, "           2            65\n");
	assert_contains(out, "           1            63\n");
	assert_contains(out, "threads 128 (ids 0..127)  min 1  max 2");
	free(out);
	tool_data_free(&d);
}

/* A MAP record of u32 values, of context map_ctx, as the shim writes `blocks`. */
static void map_u32(struct store_trace_writer *w, const char *name, uint64_t ts, const uint32_t *keys,
		    const uint32_t *vals, uint32_t n)
{
	uint8_t *kv = calloc(n ? n : 1, 8);
	assert_non_null(kv);
	for (uint32_t i = 0; i < n; i++) {
		memcpy(kv + i * 8, &keys[i], 4);
		memcpy(kv + i * 8 + 4, &vals[i], 4);
	}
	struct store_rec_map m = {.ts_ns = ts, .name = store_trace_intern(w, name), .map_type = 1503,
				  .key_size = 4, .value_size = 4, .count = n, .ctx = map_ctx};
	assert_int_equal(store_trace_map(w, &m, kv, n * 8), 0);
	free(kv);
}

/* The counter in `blocks` of block b of `warps` warps (a power of two) as the probe lays them
 * out: 64 units of 2^16 counters, the region of blocks of that size at unit
 * (0x20c40 >> warps) & 63 (units 0: 1024 threads, 2: 512, 4: 128, 12: 256, 16: 64, 32: 32),
 * consecutive blocks side by side; blocks past the end of their region (thread ids from 2^26)
 * count in the first counter of the free unit 1. */
#define TH_BLOCKS (1u << 22)
#define TH_PAST (1u << 16)
static uint32_t th_slot(uint64_t b, uint32_t warps)
{
	if (b * warps >= 1u << 21)
		return TH_PAST;
	return (uint32_t)(((0x20c40ull >> warps) & 63) << 16) + (uint32_t)b;
}

/* Blocks of 2^c warps counted once per block in `blocks`, several sizes in one map, on two
 * GPUs: blocks of 256 threads 0 and 1 ran 2 and 1 times on GPU 0, block 1 once more on GPU 1;
 * on GPU 1 also block 3 of 32 threads (ids 96..127), block 0 of 1024 threads (ids 0..1023) and
 * block 16 of 64 threads (ids 1024..1087), once each: ids 0..95 ran 3 times, 96..127 4,
 * 128..511 3, 512..1087 once. */
static void test_threadhist_blocks(void **state)
{
	(void)state;
	struct store_trace_writer *w = create();
	uint32_t k0[] = {th_slot(0, 8), th_slot(1, 8)}, v0[] = {2, 1};
	uint32_t k1[] = {th_slot(1, 8), th_slot(3, 1), th_slot(0, 32), th_slot(16, 2)};
	uint32_t v1[] = {1, 1, 1, 1};
	assert_int_equal(k0[0], 12u << 16);
	assert_int_equal(k0[1], (12u << 16) + 1); /* consecutive blocks, consecutive counters */
	assert_int_equal(k1[1], (32u << 16) + 3);
	assert_int_equal(k1[2], 0);
	assert_int_equal(k1[3], (16u << 16) + 16);
	map_ctx = 1;
	map_u32(w, "blocks", 10, k0, v0, 2);
	map_ctx = 2;
	map_u32(w, "blocks", 10, k1, v1, 4);
	map_ctx = 0;
	struct tool_data d;
	meta_a(w);
	finish(w, &d);
	char *out = report("threadhist", &d, 0);
	assert_contains(out, "           4            32\n");
	assert_contains(out, "           3           480\n");
	assert_contains(out, "           1           576\n");
	assert_contains(out, "threads 1088 (ids 0..1087)  min 1  max 4");
	assert_null(strstr(out, "share the last slot"));
	free(out);
	tool_data_free(&d);
}

/* Blocks past the end of their region (thread ids from 2^26) count in one counter outside the
 * regions, which the report gives to the last group and says so: the last block of 1024 threads
 * inside (its region's last counter, ids 2^26 - 1024 ..) once, and the block after it once. */
static void test_threadhist_blocks_clamp(void **state)
{
	(void)state;
	struct store_trace_writer *w = create();
	uint32_t k[] = {th_slot(65535, 32), th_slot(65536, 32)}, v[] = {1, 1};
	assert_int_equal(k[0], 65535);
	assert_int_equal(k[1], TH_PAST);
	/* the last block of 32 threads inside: the map's last counter */
	assert_int_equal(th_slot((1u << 21) - 1, 1), TH_BLOCKS - 1);
	map_u32(w, "blocks", 10, k, v, 2);
	struct tool_data d;
	meta_a(w);
	finish(w, &d);
	char *out = report("threadhist", &d, 0);
	assert_contains(out, "           0      67107840\n");
	assert_contains(out, "           1           992\n");
	assert_contains(out, "           2            32\n");
	assert_contains(out, "threads 67108864 (ids 0..67108863)  min 0  max 2");
	assert_contains(out, "note: thread ids past 67108863");
	free(out);
	tool_data_free(&d);
}

/* ---- threadhist's probe on the interpreter, its maps through the report -------------------- */

/* The built probe, prepared for the interpreter (its maps start at zero). */
struct th_vm {
	struct vm_object *obj;
	struct vm_runtime *rt;
	struct vm_exec *ex;
};

static void th_vm_open(struct th_vm *v)
{
	char err[VM_ERRLEN];
	if (vm_object_load_file(TOOLS_TEST_BUILD "/probes/threadhist.bpf.o", &v->obj, err,
				sizeof(err)) < 0)
		fail_msg("%s", err);
	v->rt = vm_runtime_new(v->obj, err, sizeof(err));
	v->ex = v->rt ? vm_exec_new(v->rt, 0, err, sizeof(err)) : NULL;
	if (!v->ex)
		fail_msg("%s", err);
}

static void th_vm_close(struct th_vm *v)
{
	vm_exec_free(v->ex);
	vm_runtime_free(v->rt);
	vm_object_free(v->obj);
}

/* The exit of thread t (linear) of block b of a launch of `grid` blocks of block[0..2]. */
static void th_vm_exit(struct th_vm *v, uint32_t grid, const uint32_t *block, uint32_t b,
		       uint32_t t)
{
	char err[VM_ERRLEN];
	struct cubpf_kernel_ctx c = {.tid_x = t % block[0], .tid_y = t / block[0] % block[1],
				     .tid_z = t / (block[0] * block[1]), .ntid_x = block[0],
				     .ntid_y = block[1], .ntid_z = block[2], .ctaid_x = b,
				     .nctaid_x = grid, .nctaid_y = 1, .nctaid_z = 1};
	uint64_t r0;
	if (vm_exec_run(v->ex, &c, sizeof(c), &r0, err, sizeof(err)) != 0)
		fail_msg("%s", err);
}

static uint32_t th_vm_map(const struct th_vm *v, const char *name)
{
	for (uint32_t m = 0; m < v->obj->map_cnt; m++)
		if (!strcmp(v->obj->maps[m].name, name))
			return m;
	fail_msg("threadhist.bpf.o has no map '%s'", name);
	return 0;
}

/* A map's value at key (u32 or u64 values). */
static uint64_t th_vm_value(const struct th_vm *v, uint32_t m, uint32_t key)
{
	uint64_t val = 0;
	assert_int_equal(vm_map_lookup(v->rt, m, &key, &val), 0);
	return v->obj->maps[m].value_size == 4 ? (uint32_t)val : val;
}

/* The map's non-zero entries as a MAP record, as the shim writes them. */
static void th_vm_record(struct store_trace_writer *w, const struct th_vm *v, const char *name)
{
	uint32_t m = th_vm_map(v, name), n = 0, cap = 1024;
	uint32_t *keys = malloc(cap * sizeof(*keys));
	uint64_t *vals = malloc(cap * sizeof(*vals));
	assert_true(keys && vals);
	for (uint32_t k = 0; k < v->obj->maps[m].max_entries; k++) {
		uint64_t val = th_vm_value(v, m, k);
		if (!val)
			continue;
		assert_true(n < cap); /* the tests' launches are small */
		keys[n] = k, vals[n++] = val;
	}
	if (v->obj->maps[m].value_size == 4) {
		uint32_t v32[1024];
		for (uint32_t i = 0; i < n; i++)
			v32[i] = (uint32_t)vals[i];
		map_u32(w, name, 10, keys, v32, n);
	} else {
		map_u64(w, name, 10, keys, vals, n, 1);
	}
	free(keys);
	free(vals);
}

struct th_launch {
	uint32_t grid, block[3];
};

/* Runs the probe at every thread's exit of the launches and writes its maps into a trace. */
static void th_probe_trace(struct store_trace_writer *w, const struct th_launch *l, size_t n)
{
	struct th_vm v;
	th_vm_open(&v);
	for (size_t i = 0; i < n; i++)
		for (uint32_t b = 0; b < l[i].grid; b++)
			for (uint32_t t = 0; t < l[i].block[0] * l[i].block[1] * l[i].block[2]; t++)
				th_vm_exit(&v, l[i].grid, l[i].block, b, t);
	th_vm_record(w, &v, "blocks");
	th_vm_record(w, &v, "edges");
	th_vm_record(w, &v, "tedges");
	th_vm_close(&v);
}

/* ---- issue 32's probes on vm/'s interpreter: what they put in their maps ---- */

struct probe_vm {
	struct vm_object *obj;
	struct vm_runtime *rt;
	struct vm_exec *ex;
};

static void probe_vm_open(struct probe_vm *v, const char *path)
{
	char err[VM_ERRLEN];
	if (vm_object_load_file(path, &v->obj, err, sizeof(err)) < 0)
		fail_msg("%s", err);
	if (vm_verify(v->obj, 0, NULL, NULL, err, sizeof(err)))
		fail_msg("%s: %s", path, err);
	v->rt = vm_runtime_new(v->obj, err, sizeof(err));
	v->ex = v->rt ? vm_exec_new(v->rt, 0, err, sizeof(err)) : NULL;
	if (!v->ex)
		fail_msg("%s", err);
}

static void probe_vm_run(struct probe_vm *v, void *ctx, size_t size)
{
	char err[VM_ERRLEN];
	uint64_t r0;
	if (vm_exec_run(v->ex, ctx, size, &r0, err, sizeof(err)) != 0)
		fail_msg("%s", err);
}

/* Word `word` of the value at key of a per-SM map, summed over the host's copies. */
static uint64_t probe_vm_word(struct probe_vm *v, const char *map, uint32_t key, uint32_t word)
{
	for (uint32_t m = 0; m < v->obj->map_cnt; m++) {
		if (strcmp(v->obj->maps[m].name, map))
			continue;
		uint32_t n = vm_percpu_slots(), vs = (v->obj->maps[m].value_size + 7) & ~7u;
		uint64_t *all = calloc(n, vs), sum = 0;
		assert_non_null(all);
		assert_int_equal(vm_map_lookup_percpu(v->rt, m, &key, all), 0);
		for (uint32_t s = 0; s < n; s++)
			sum += all[(size_t)s * (vs / 8) + word];
		free(all);
		return sum;
	}
	fail_msg("no map %s", map);
	return 0;
}

static void probe_vm_close(struct probe_vm *v)
{
	vm_exec_free(v->ex);
	vm_runtime_free(v->rt);
	vm_object_free(v->obj);
}

/* blocklat's probe: three blocks of kernel 3 (durations 5000, 20000 and 9000 ns): blocks,
 * sum, largest with its block, least (+ 1), first begin, last end, and the histogram. */
static void test_blocklat_probe(void **state)
{
	(void)state;
	struct probe_vm v;
	probe_vm_open(&v, TOOLS_TEST_BUILD "/probes/blocklat.bpf.o");
	const uint64_t begin[] = {1000000, 1001000, 1002000}, dur[] = {5000, 20000, 9000};
	for (uint32_t b = 0; b < 3; b++) {
		struct cubpf_block_ctx c = {.ctaid_x = b, .nctaid_x = 3, .nctaid_y = 1, .nctaid_z = 1,
					    .ntid_x = 64, .ntid_y = 1, .ntid_z = 1, .kernel_id = 3,
					    .end = 1, .begin_ns = begin[b],
					    .time_ns = begin[b] + dur[b]};
		probe_vm_run(&v, &c, sizeof(c));
	}
	assert_int_equal(probe_vm_word(&v, "blstats", 3, 0), 3);
	assert_int_equal(probe_vm_word(&v, "blstats", 3, 1), 34000);
	assert_int_equal(probe_vm_word(&v, "blstats", 3, 2), 20000);
	assert_int_equal(probe_vm_word(&v, "blstats", 3, 3), 5001);
	assert_int_equal(probe_vm_word(&v, "blstats", 3, 4), 1000000);
	assert_int_equal(probe_vm_word(&v, "blstats", 3, 5), 1011000); /* the last store */
	assert_int_equal(probe_vm_word(&v, "blstats", 3, 6), 2);       /* block 1, + 1 */
	uint64_t h;
	uint32_t m = 0, k = 3 * 32 + 12; /* 5000 and 9000 ns: 4096 .. 8191, 8192 .. 16383 */
	while (strcmp(v.obj->maps[m].name, "blhist"))
		m++;
	assert_int_equal(vm_map_lookup(v.rt, m, &k, &h), 0);
	assert_int_equal(h, 1);
	k = 3 * 32 + 14; /* 20000 ns */
	assert_int_equal(vm_map_lookup(v.rt, m, &k, &h), 0);
	assert_int_equal(h, 1);
	probe_vm_close(&v);
}

/* syncwait's probe: nothing before a barrier; after it, the time since before_ns for the warp
 * of one lane (the host's interpreter) at the site of its kernel, with kind and id. */
static void test_syncwait_probe(void **state)
{
	(void)state;
	struct probe_vm v;
	probe_vm_open(&v, TOOLS_TEST_BUILD "/probes/syncwait.bpf.o");
	/* the 4th sync site of its function (record 2 * 16 + 3), instruction 7 */
	struct cubpf_sync_ctx c = {.kind = CUBPF_SYNC_BAR, .id = 1, .after = 0, .site = 7,
				   .sync_index = 3, .kernel_id = 2, .time_ns = 5000,
				   .before_ns = 5000};
	probe_vm_run(&v, &c, sizeof(c));
	assert_int_equal(probe_vm_word(&v, "swsites", 2 * 16 + 3, 0), 0);
	c.after = 1, c.time_ns = 8000, c.before_ns = 5100;
	probe_vm_run(&v, &c, sizeof(c));
	c.time_ns = 9000, c.before_ns = 8900;
	probe_vm_run(&v, &c, sizeof(c));
	assert_int_equal(probe_vm_word(&v, "swsites", 2 * 16 + 3, 0), 2);
	assert_int_equal(probe_vm_word(&v, "swsites", 2 * 16 + 3, 1), 3000);
	assert_int_equal(probe_vm_word(&v, "swsites", 2 * 16 + 3, 2), 2900);
	assert_int_equal(probe_vm_word(&v, "swsites", 2 * 16 + 3, 3), 1ull << 32 | 1);
	assert_int_equal(probe_vm_word(&v, "swsites", 2 * 16 + 3, 4), 7 + 1);
	c.ctaid_x = 1; /* outside block (0,0,0) max and kind are written now and then; the counts
			* always */
	c.time_ns = 20000, c.before_ns = 10000;
	probe_vm_run(&v, &c, sizeof(c));
	assert_int_equal(probe_vm_word(&v, "swsites", 2 * 16 + 3, 0), 3);
	assert_int_equal(probe_vm_word(&v, "swsites", 2 * 16 + 3, 1), 13000);
	c.sync_index = 40; /* sites from 15 on share 15 */
	probe_vm_run(&v, &c, sizeof(c));
	assert_int_equal(probe_vm_word(&v, "swsites", 2 * 16 + 15, 0), 1);
	probe_vm_close(&v);
}

/* The instruction tools' probes on the interpreter (a warp of one lane): instrcount adds the
 * thread's counts at exit; opcodehist each class present in the block; hotblocks, at exit, the
 * block's entries and, in thread block (0,0,0), its facts; kernels past their tables count
 * nothing. */
static uint64_t array_word_sum(struct probe_vm *v, const char *map, uint32_t key0,
			       uint32_t stride, uint32_t n, uint32_t word)
{
	uint32_t m = 0;
	while (strcmp(v->obj->maps[m].name, map))
		m++;
	uint64_t sum = 0, val[16];
	for (uint32_t i = 0; i < n; i++) {
		uint32_t k = key0 + i * stride;
		assert_int_equal(vm_map_lookup(v->rt, m, &k, val), 0);
		sum += val[word];
	}
	return sum;
}

static void test_bb_tool_probes(void **state)
{
	(void)state;
	struct probe_vm v;
	struct cubpf_bb_ctx c = {.block_id = 5, .insn_count = 7, .kernel_id = 3, .ptx_line = 77,
				 .src_file = 1, .src_line = 12};
	c.op_class[CUBPF_OP_FP32] = 4, c.op_class[CUBPF_OP_INT] = 3;
	/* instrcount: at kernel exit, the thread's counts (a warp of one lane sums its own) */
	struct cubpf_kernel_ctx k = {.kernel_id = 3, .insns = 700, .warp_insns = 25};
	probe_vm_open(&v, TOOLS_TEST_BUILD "/probes/instrcount.bpf.o");
	probe_vm_run(&v, &k, sizeof(k));
	probe_vm_run(&v, &k, sizeof(k));
	uint64_t t = 0, wp = 0;
	for (uint32_t l = 0; l < 4; l++)
		t += probe_vm_word(&v, "icstats", 3 * 4 + l, 0), wp += probe_vm_word(&v, "icstats", 3 * 4 + l, 1);
	assert_int_equal(t, 1400);
	assert_int_equal(wp, 50);
	k.kernel_id = 256;
	probe_vm_run(&v, &k, sizeof(k));
	probe_vm_close(&v);
	probe_vm_open(&v, TOOLS_TEST_BUILD "/probes/opcodehist.bpf.o");
	c.entries = 10; /* at exit: entered 10 times */
	probe_vm_run(&v, &c, sizeof(c));
	/* key: kernel 3's lane 0 (the interpreter's warp slot is 0) */
	assert_int_equal(probe_vm_word(&v, "ohstats", 3 * 4, CUBPF_OP_FP32), 40);
	assert_int_equal(probe_vm_word(&v, "ohstats", 3 * 4, CUBPF_OP_INT), 30);
	assert_int_equal(probe_vm_word(&v, "ohstats", 3 * 4, CUBPF_OP_FP64), 0);
	assert_int_equal(probe_vm_word(&v, "ohstats", 3, CUBPF_OP_FP32), 0);
	probe_vm_close(&v);
	probe_vm_open(&v, TOOLS_TEST_BUILD "/probes/hotblocks.bpf.o");
	c.entries = 40; /* at exit: the thread entered the block 40 times */
	probe_vm_run(&v, &c, sizeof(c));
	c.ctaid_x = 1; /* elsewhere the facts are written only now and then: entries still count */
	c.entries = 2;
	probe_vm_run(&v, &c, sizeof(c));
	c.entries = 0; /* a block the thread never entered adds nothing */
	probe_vm_run(&v, &c, sizeof(c));
	assert_int_equal(array_word_sum(&v, "hbstats", 3 * 64 * 256 + 5, 256, 64, 0), 42);
	assert_int_equal(array_word_sum(&v, "hbstats", 3 * 64 * 256 + 5, 256, 64, 1),
			 7ull << 32 | 77);
	assert_int_equal(array_word_sum(&v, "hbstats", 3 * 64 * 256 + 5, 256, 64, 2), 1ull << 32 | 12);
	c.block_id = 1000, c.entries = 1; /* shares the last slot, writes no facts */
	probe_vm_run(&v, &c, sizeof(c));
	assert_int_equal(array_word_sum(&v, "hbstats", 3 * 64 * 256 + 255, 256, 64, 0), 1);
	assert_int_equal(array_word_sum(&v, "hbstats", 3 * 64 * 256 + 255, 256, 64, 1), 0);
	probe_vm_close(&v);
}

/* memdelay's probe: global loads wait (the interpreter spins too) and count; stores and
 * shared loads do neither; the delay is the .rodata constant, patched as cubpf run does. */
static void test_memdelay_probe(void **state)
{
	(void)state;
	char out[] = "/tmp/cubpf-test-md-XXXXXX", err[256];
	int fd = mkstemp(out);
	assert_true(fd >= 0);
	close(fd);
	if (tool_patch_rodata_u64(TOOLS_TEST_BUILD "/probes/memdelay.bpf.o", "delay_ns", 200000, out,
				  err, sizeof(err)))
		fail_msg("%s", err);
	struct probe_vm v;
	probe_vm_open(&v, out);
	struct cubpf_mem_ctx c = {.op = CUBPF_MEM_LOAD, .space = CUBPF_SPACE_GLOBAL, .size = 4,
				  .kernel_id = 5};
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	probe_vm_run(&v, &c, sizeof(c));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	int64_t ns = (t1.tv_sec - t0.tv_sec) * 1000000000ll + (t1.tv_nsec - t0.tv_nsec);
	assert_true(ns >= 200000);
	c.op = CUBPF_MEM_STORE;
	probe_vm_run(&v, &c, sizeof(c));
	c.op = CUBPF_MEM_LOAD, c.space = CUBPF_SPACE_SHARED;
	probe_vm_run(&v, &c, sizeof(c));
	assert_int_equal(probe_vm_word(&v, "mdstats", 5, 0), 1);
	assert_int_equal(probe_vm_word(&v, "mdstats", 5, 1), 200000);
	probe_vm_close(&v);
	unlink(out);
}

/* tests/cuda/tools_known.cu's hist part (what tests/gpu/t_tools.sh expects on the GPU): 8, 6, 4
 * and 2 blocks of 64 threads: 128 threads each ran 4, 3, 2 and 1 times. */
static void test_threadhist_probe_known(void **state)
{
	(void)state;
	const struct th_launch l[] = {{8, {64, 1, 1}}, {6, {64, 1, 1}}, {4, {64, 1, 1}},
				      {2, {64, 1, 1}}};
	struct store_trace_writer *w = create();
	th_probe_trace(w, l, 4);
	struct tool_data d;
	meta_a(w);
	finish(w, &d);
	char *out = report("threadhist", &d, 0);
	for (int c = 1; c <= 4; c++) {
		char row[64];
		snprintf(row, sizeof(row), "%12d  %12d\n", c, 128);
		assert_contains(out, row);
	}
	assert_contains(out, "threads 512 (ids 0..511)  min 1  max 4  mean 2.500");
	free(out);
	tool_data_free(&d);
}

/* Every kind of block the probe tells apart, in one trace: 2^c warps (32, 64 as 16 x 4, 1024:
 * `blocks`), other whole warps (96: `edges`), not whole warps (100, 5 x 3 x 2: `tedges`);
 * the report's distribution is the one counted thread by thread. */
static void test_threadhist_probe_shapes(void **state)
{
	(void)state;
	const struct th_launch l[] = {{5, {32, 1, 1}},  {3, {16, 4, 1}}, {1, {1024, 1, 1}},
				      {4, {96, 1, 1}},  {3, {100, 1, 1}}, {7, {5, 3, 2}},
				      {2, {1024, 1, 1}}, {9, {64, 1, 1}}};
	const size_t nl = sizeof(l) / sizeof(l[0]);
	static uint64_t want[4096];
	uint64_t n = 0;
	memset(want, 0, sizeof(want));
	for (size_t i = 0; i < nl; i++) {
		uint64_t per = (uint64_t)l[i].block[0] * l[i].block[1] * l[i].block[2];
		for (uint64_t t = 0; t < l[i].grid * per; t++)
			want[t]++;
		n = l[i].grid * per > n ? l[i].grid * per : n;
	}
	struct store_trace_writer *w = create();
	th_probe_trace(w, l, nl);
	struct tool_data d;
	meta_a(w);
	finish(w, &d);
	char *out = report("threadhist", &d, 0), line[128];
	uint64_t rows[16] = {0}, max = 0;
	for (uint64_t t = 0; t < n; t++) {
		assert_true(want[t] < 16);
		rows[want[t]]++;
		max = want[t] > max ? want[t] : max;
	}
	for (uint64_t c = 0; c < 16; c++) {
		if (!rows[c])
			continue;
		snprintf(line, sizeof(line), "%12" PRIu64 "  %12" PRIu64 "\n", c, rows[c]);
		assert_contains(out, line);
	}
	snprintf(line, sizeof(line), "threads %" PRIu64 " (ids 0..%" PRIu64 ")  min 1  max %" PRIu64,
		 n, n - 1, max);
	assert_contains(out, line);
	free(out);
	tool_data_free(&d);
}

/* The probe's own layout: thread (0,0,0) of block b of 2^c warps adds 1 at th_slot (consecutive
 * blocks side by side), no other thread of the block writes, a block past the end of its region
 * counts at TH_PAST, and so does one past 2^32 blocks (a 32-bit block index would wrap to 0). */
static void test_threadhist_probe_regions(void **state)
{
	(void)state;
	struct th_vm v;
	th_vm_open(&v);
	uint32_t blocks = th_vm_map(&v, "blocks"), b256[3] = {256, 1, 1}, b1024[3] = {1024, 1, 1};
	uint32_t b32[3] = {32, 1, 1}, b64[3] = {16, 4, 1};
	assert_int_equal(v.obj->maps[blocks].max_entries, TH_BLOCKS);
	th_vm_exit(&v, 8, b256, 5, 0);
	th_vm_exit(&v, 8, b256, 5, 1);
	th_vm_exit(&v, 8, b256, 5, 255);
	th_vm_exit(&v, 8, b256, 6, 0);
	th_vm_exit(&v, 9, b32, 8, 0);
	th_vm_exit(&v, 9, b64, 8, 0);
	th_vm_exit(&v, 65537, b1024, 65535, 0);
	th_vm_exit(&v, 65537, b1024, 65536, 0);
	char err[VM_ERRLEN];
	struct cubpf_kernel_ctx c = {.ntid_x = 256, .ntid_y = 1, .ntid_z = 1, .ctaid_y = 2,
				     .nctaid_x = 1u << 31, .nctaid_y = 3, .nctaid_z = 1};
	uint64_t r0;
	if (vm_exec_run(v.ex, &c, sizeof(c), &r0, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	assert_int_equal(th_vm_value(&v, blocks, (12u << 16) + 5), 1);
	assert_int_equal(th_vm_value(&v, blocks, (12u << 16) + 6), 1);
	assert_int_equal(th_vm_value(&v, blocks, (32u << 16) + 8), 1);
	assert_int_equal(th_vm_value(&v, blocks, (16u << 16) + 8), 1);
	assert_int_equal(th_vm_value(&v, blocks, 65535), 1);
	assert_int_equal(th_vm_value(&v, blocks, TH_PAST), 2);
	/* a block that is not whole warps: its thread 0 marks the range in `tedges`, no other
	 * thread of it writes anything */
	uint32_t tedges = th_vm_map(&v, "tedges"), b100[3] = {100, 1, 1};
	th_vm_exit(&v, 4, b100, 3, 7);
	assert_int_equal(th_vm_value(&v, tedges, 300), 0);
	th_vm_exit(&v, 4, b100, 3, 0);
	assert_int_equal(th_vm_value(&v, tedges, 300), 1);
	assert_int_equal(th_vm_value(&v, tedges, 400), (uint64_t)-1);
	uint64_t sum = 0;
	for (uint32_t k = 0; k < TH_BLOCKS; k++)
		sum += th_vm_value(&v, blocks, k);
	assert_int_equal(sum, 7);
	th_vm_close(&v);
}

/* Per-SM counts of thread accesses per (kernel, space, op, log2 size), summed over the SMs;
 * bytes follow from the size; sectors touched per (kernel, space, op) give the coalescing. */
static void test_memtrace(void **state)
{
	(void)state;
	struct store_trace_writer *w = create();
	/* kernel id 1, global (key 9): loads of 4 B: 1024 (SM 0: 1000, SM 7: 24), stores 512;
	 * sectors: loads 4096 B with no waste = 128, stores 2048 B + waste 1024 (+1536 on SM 1,
	 * -512 on SM 2: broadcasts touch fewer bytes than they read) = 96.  Value:
	 * accesses[op][log2 size] (4 x 6), waste[op] (4, signed), pad (4). */
	uint32_t keys[] = {1 * 8 + 1};
	static uint64_t v[256 * 32];
	v[0 * 32 + 0 * 6 + 2] = 1000, v[7 * 32 + 0 * 6 + 2] = 24, v[3 * 32 + 1 * 6 + 2] = 512;
	v[1 * 32 + 24 + 1] = 1536, v[2 * 32 + 24 + 1] = (uint64_t)-512;
	map_percpu(w, "counts", 5, keys, v, 1, 32);
	struct tool_data d;
	meta_a(w);
	finish(w, &d);
	char *out = report("memtrace", &d, 1);
	assert_json(out);
	assert_contains(out, "\"global_bytes\":6144,\"global_accesses\":1536,\"ideal_sectors\":192,"
			     "\"sectors\":224");
	free(out);
	out = report("memtrace", &d, 0);
	assert_contains(out, "    global     load             4096           1024        4.0");
	assert_contains(out, "    global    store             2048            512        4.0");
	assert_contains(out, "        4 -> 7        : 1536");
	assert_contains(out, "6144 bytes in 1536 thread accesses; 32-byte sectors touched 224 "
			     "(counted per warp access), ideal 192: 85.7% efficiency");
	free(out);
	tool_data_free(&d);
}

static void exit_event(struct store_trace_writer *w, uint64_t ts, uint32_t lane, uint32_t block)
{
	struct tool_exit_event e = {.ts = ts, .kernel_id = 1, .tid_x = lane, .ctaid_x = block,
				    .ntid_x = 64, .ntid_y = 1};
	struct store_rec_probe p = {.ts_ns = ts, .flags = STORE_PROBE_GPU_TIME};
	assert_int_equal(store_trace_probe(w, &p, &e, sizeof(e)), 0);
}

static void test_kernelretsnoop(void **state)
{
	(void)state;
	struct store_trace_writer *w = create();
	for (uint32_t b = 0; b < 3; b++)
		for (uint32_t lane = 0; lane < 64; lane++)
			exit_event(w, 1000 + lane, lane, b);
	exit_event(w, 500000, 45, 2); /* block 2's lane 45 leaves again, late (a second exit) */
	struct tool_data d;
	meta_a(w);
	finish(w, &d);
	char *out = report("kernelretsnoop", &d, 0);
	assert_contains(out, "193 thread exits in 6 warps");
	/* the first row is the slow lane, 500000 - 1032 behind its warp's first exit */
	const char *row = strstr(out, "LAG_ns\n");
	assert_non_null(row);
	assert_contains(row, "LAG_ns\nvecadd                       (2,0,0)          (45,0,0)       "
			     "      498968\n");
	free(out);
	out = report("kernelretsnoop", &d, 1);
	assert_json(out);
	assert_contains(out, "\"slowest\":[{\"kernel\":\"_Z6vecaddPfS_i\",\"block\":[2,0,0],"
			     "\"thread\":[45,0,0],\"lag_ns\":498968}");
	free(out);
	tool_data_free(&d);
}

static void test_maps_dump(void **state)
{
	(void)state;
	struct store_trace_writer *w = create();
	uint32_t keys[] = {1, 258};
	uint64_t vals[] = {5, 0x0102030405060708ull};
	map_u64(w, "counts", 5, keys, vals, 2, 1);
	static uint64_t per_sm[256];
	per_sm[3] = 9;
	uint32_t pk[] = {2};
	map_percpu(w, "per_sm", 5, pk, per_sm, 1, 1);
	struct tool_data d;
	host_map_u32(w, "hits", 0, 7);
	finish(w, &d);
	char *out = report("maps", &d, 0);
	assert_contains(out, "map counts (program 0, map 0, type 1503, key 4 B, value 8 B;");
	assert_contains(out, "key: 01 00 00 00  value: 05 00 00 00 00 00 00 00\n");
	assert_contains(out, "key: 02 01 00 00  value: 08 07 06 05 04 03 02 01\n");
	assert_contains(out, "Found 2 elements\n");
	assert_contains(out, "map hits[0] = 7 (host)");
	assert_contains(out, "key: 02 00 00 00\n  value (SM 3): 09 00 00 00 00 00 00 00\nFound 1 element");
	free(out);
	out = report("maps", &d, 1);
	assert_json(out);
	assert_contains(out, "{\"key\":[\"0x01\",\"0x00\",\"0x00\",\"0x00\"],\"value\":[\"0x05\"");
	assert_contains(out, "\"host_maps\":[\"map hits[0] = 7 (host)\"]");
	free(out);
	tool_data_free(&d);
}

/* Issue 18: the facts the tools once took from the shim's log lines come from records of format
 * 1.5, in the words the shim logs them: a ring buffer's counts at exit (RINGBUF), a program the
 * verifier rejected (NOT_INSTRUMENTED, reason 8), host maps of any key size (HOST_MAP); and a
 * MAP_MEMORY record of 1.4 (no bookkeeping bytes after it) still reads, as 0 of them. */
static void test_run_metadata_of_format_1_5(void **state)
{
	(void)state;
	struct store_trace_writer *w = create();
	struct store_rec_ringbuf rb = {.taken = 1234, .dropped = 5, .syncs = 7, .sync_busy = 1,
				       .name = store_trace_intern(w, "events"), .device = 1};
	assert_int_equal(store_trace_ringbuf(w, &rb), 0);
	struct store_rec_not_instrumented n = {.reason = STORE_NOINST_VERIFIER,
					       .device = UINT32_MAX,
					       .label = store_trace_intern(w, "on_exit")};
	const char *why = "live: k.bpf.o: program on_exit rejected by the verifier, skipped: R1 !read_ok";
	assert_int_equal(store_trace_not_instrumented(w, &n, why), 0);
	uint8_t kv[3 + 2] = {0xab, 0x01, 0xff, 0x10, 0x20};
	struct store_rec_map hm = {.name = store_trace_intern(w, "odd"), .key_size = 3,
				   .value_size = 2, .count = 1};
	assert_int_equal(store_trace_host_map(w, &hm, kv, sizeof(kv)), 0);
	struct store_rec_map_memory mm = {.device_bytes = 100, .pinned_bytes = 10, .ctx = 1};
	assert_int_equal(store_trace_append(w, STORE_REC_MAP_MEMORY, &mm, sizeof(mm), NULL, 0), 0);
	struct tool_data d;
	finish(w, &d);
	assert_int_equal(d.nnotes, 2);
	assert_string_equal(d.notes[0], "live: ring buffer events: 1234 records taken, 5 dropped on "
					"device 1 (lanes full); tails copied to the device 7 times (1 "
					"times the last copy was still running)");
	assert_string_equal(d.notes[1], why);
	assert_int_equal(d.nmaplines, 1);
	assert_string_equal(d.maplines[0], "map odd[ab 01 ff] = 10 20 (host)");
	char *out = report("kcount", &d, 0);
	assert_contains(out, "maps and buffers: 100 device bytes, 10 pinned host bytes\n");
	assert_contains(out, "reasons:\n  - ring buffer events: 1234 records taken, 5 dropped");
	assert_contains(out, "  - k.bpf.o: program on_exit rejected by the verifier, skipped: ");
	free(out);
	tool_data_free(&d);
}

static void test_bad_trace(void **state)
{
	(void)state;
	char path[] = "/tmp/cubpf-test-tools-bad-XXXXXX", err[256] = "";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "not a trace", 11), 11);
	close(fd);
	struct tool_data d = {0};
	assert_int_equal(tool_data_load(&d, path, err, sizeof(err)), -1);
	assert_true(err[0] != '\0');
	unlink(path);
	tool_data_free(&d);
}

/* Text from files on a terminal: control characters, C1 (CSI), DEL, bidi overrides and bytes
 * that are not UTF-8 come out escaped; valid UTF-8 stays as it is (the same pointer, nothing
 * copied); a long name is cut with "..." inside the buffer. */
static void test_text_escaping(void **state)
{
	(void)state;
	static const struct {
		const char *in, *out;
	} cases[] = {
		{"\x1b[31mRED\x1b]0;pwned\x07", "\\e[31mRED\\e]0;pwned\\x07"},
		{"tab\tnl\ncr\r", "tab\\tnl\\ncr\\r"},
		{"back\\slash", "back\\\\slash"},
		{"del\x7f", "del\\x7f"},
		{"csi\xc2\x9b" "2J", "csi\\u009b2J"},           /* C1 CSI, as UTF-8 */
		{"raw\x9b" "2J\xff", "raw\\x9b2J\\xff"},         /* bytes that are not UTF-8 */
		{"bidi\xe2\x80\xae" "x", "bidi\\u202ex"},
		{"overlong\xc0\xaf", "overlong\\xc0\\xaf"},
		{"surrogate\xed\xa0\x80", "surrogate\\xed\\xa0\\x80"},
		{"cut\xe2\x82", "cut\\xe2\\x82"},
	};
	char buf[TOOL_TEXT_MAX];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_string_equal(tool_text(cases[i].in, buf, sizeof(buf)), cases[i].out);
	static const char *const clean[] = {"_Z6vecaddPfS_i", "caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80",
					    ""};
	for (size_t i = 0; i < 3; i++)
		assert_ptr_equal(tool_text(clean[i], buf, sizeof(buf)), clean[i]);
	assert_string_equal(tool_text(NULL, buf, sizeof(buf)), "");
	/* cut: never past the buffer, never inside an escape, "..." at the end */
	char small[16];
	assert_string_equal(tool_text("\x1b\x1b\x1b\x1b\x1b\x1b\x1b\x1b", small, sizeof(small)),
			    "\\e\\e\\e\\e\\e\\e...");
	char *big = malloc(5000);
	memset(big, 'a', 4999);
	big[4999] = 0;
	big[10] = 0x1b;
	const char *t = tool_text(big, buf, sizeof(buf));
	assert_int_equal(strlen(t), sizeof(buf) - 1);
	assert_string_equal(t + strlen(t) - 3, "...");
	free(big);
	assert_string_equal(tool_short_name("_Z6a\x1b[2JbPfS_i", small, sizeof(small)), "a\\e[2Jb");

	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	tool_text_put(f, "line 1\n\tline \x1b[2 2\n", 1);
	tool_text_put(f, "\n", 0);
	fclose(f);
	assert_string_equal(out, "line 1\n\tline \\e[2 2\n\\n");
	free(out);

	/* JSON: every case parses (strictly, as UTF-8), valid UTF-8 round-trips, and no control
	 * character, DEL or C1 is left raw */
	f = open_memstream(&out, &len);
	fputc('[', f);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tool_json_string(f, cases[i].in);
		fputc(',', f);
	}
	tool_json_string(f, "q\"uote caf\xc3\xa9");
	fputc(']', f);
	fclose(f);
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)out[i] < 0x20 || out[i] == 0x7f ||
		    ((unsigned char)out[i] == 0xc2 && (unsigned char)out[i + 1] < 0xa0))
			fail_msg("raw control byte 0x%02x at %zu in %s", (unsigned char)out[i], i, out);
	char cmd[4096];
	snprintf(cmd, sizeof(cmd), "python3 -c 'import json,sys; v=json.loads(sys.stdin.buffer.read()"
		 ".decode(\"utf-8\")); assert v[0]==\"\\x1b[31mRED\\x1b]0;pwned\\x07\", v[0];"
		 " assert v[4]==\"csi\\x9b2J\" and v[6]==\"bidi\\u202ex\", v;"
		 " assert v[-1]==\"q\\\"uote caf\\xe9\", v[-1]'");
	FILE *p = popen(cmd, "w");
	assert_non_null(p);
	fwrite(out, 1, len, p);
	int st = pclose(p);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		fail_msg("JSON rejected: %s", out);
	free(out);
}

/* A kernel named with escape sequences (a damaged or hostile trace): the table shows it
 * escaped, the JSON report parses and gives the name back as it was. */
static void test_report_names_escaped(void **state)
{
	(void)state;
	static const char evil[] = "_Z4evil\x1b]0;owned\x07\x1b[2J\xc2\x9b" "31m";
	struct store_trace_writer *w = create();
	kernel(w, evil, 100, 1, 32);
	struct store_rec_device dv = {.ordinal = 0, .sm = 90};
	assert_int_equal(store_trace_device(w, &dv, "GPU\x1b[5m"), 0);
	struct store_rec_not_instrumented n = {.reason = STORE_NOINST_NO_PTX, .kernels = 1};
	assert_int_equal(store_trace_not_instrumented(w, &n, "live: no PTX for \x1b[8mhidden"), 0);
	struct tool_data d;
	finish(w, &d);
	for (int json = 0; json < 2; json++) {
		char *out = report("kcount", &d, json);
		for (const char *c = out; *c; c++)
			if (*c == 0x1b || *c == 0x07 || ((unsigned char)c[0] == 0xc2 &&
							 (unsigned char)c[1] == 0x9b))
				fail_msg("a raw control character in:\n%s", out);
		if (json) {
			assert_json(out);
			assert_contains(out, "\"not_instrumented\":[\"_Z4evil\\u001b]0;owned\\u0007"
					     "\\u001b[2J\\u009b31m\"]");
		} else {
			assert_contains(out, "  _Z4evil\\e]0;owned\\x07\\e[2J\\u009b31m (1 launches)");
			assert_contains(out, "device 0: GPU\\e[5m (sm_90");
			assert_contains(out, "  - no PTX for \\e[8mhidden");
		}
		free(out);
	}
	tool_data_free(&d);
}

/* cubpf run's own errors, on the built binary: status and message. */
static int run_cubpf(const char *args, char *out, size_t len)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "%s/bin/cubpf run %s 2>&1", TOOLS_TEST_BUILD, args);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	size_t n = fread(out, 1, len - 1, p);
	out[n] = '\0';
	int st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_run_options(void **state)
{
	(void)state;
	char out[8192];
	assert_int_equal(run_cubpf("-t nope -- true", out, sizeof(out)), 2);
	assert_contains(out, "unknown tool 'nope'");
	assert_contains(out, "kernelretsnoop");
	assert_int_equal(run_cubpf("-t kcount -i 0 -- true", out, sizeof(out)), 2);
	assert_contains(out, "-i '0': expected a positive number of seconds");
	assert_int_equal(run_cubpf("-t kcount -d abc -- true", out, sizeof(out)), 2);
	assert_contains(out, "-d 'abc'");
	assert_int_equal(run_cubpf("-t kcount", out, sizeof(out)), 2);
	assert_contains(out, "no command given");
	assert_int_equal(run_cubpf("--json -- true", out, sizeof(out)), 2);
	assert_contains(out, "need a tool");
	assert_int_equal(run_cubpf("-p /nonexistent.bpf.o -- true", out, sizeof(out)), 2);
	assert_contains(out, "cannot read probe object '/nonexistent.bpf.o'");
	assert_int_equal(run_cubpf("--sample 0 -- true", out, sizeof(out)), 2);
	assert_contains(out, "CUBPF_SAMPLE (--sample) '0': expected a whole number from 1 to "
			     "2147483648");
	assert_int_equal(run_cubpf("--ringbuf-mb 1x -- true", out, sizeof(out)), 2);
	assert_contains(out, "CUBPF_RINGBUF_MB (--ringbuf-mb) '1x'");
	/* the memory and sampling options reach the program's environment */
	assert_int_equal(run_cubpf("--ringbuf-mb 16 --map-max-mb 512 --sample 3 -- sh -c "
				   "'echo rb=$CUBPF_RINGBUF_MB mm=$CUBPF_MAP_MAX_MB s=$CUBPF_SAMPLE'",
				   out, sizeof(out)), 0);
	assert_contains(out, "rb=16 mm=512 s=3");
	/* the Sanitizer backend: off unless asked for; --sanitizer is "auto", =PATH a path */
	assert_int_equal(run_cubpf("-- sh -c 'echo san=${CUBPF_SANITIZER-unset}'", out, sizeof(out)),
			 0);
	assert_contains(out, "san=unset");
	assert_int_equal(run_cubpf("--sanitizer -- sh -c 'echo san=$CUBPF_SANITIZER'", out,
				   sizeof(out)), 0);
	assert_contains(out, "san=auto");
	assert_int_equal(run_cubpf("--sanitizer=/opt/x/libsanitizer-public.so -- sh -c "
				   "'echo san=$CUBPF_SANITIZER'", out, sizeof(out)), 0);
	assert_contains(out, "san=/opt/x/libsanitizer-public.so");
	/* threadhist counts at the kernels' entry under --sanitizer, at their exit otherwise */
	assert_int_equal(run_cubpf("--sanitizer -t threadhist -- sh -c 'echo p=$CUBPF_PROGRAMS'",
				   out, sizeof(out)), 0);
	assert_contains(out, "/threadhist_entry.bpf.o");
	assert_int_equal(run_cubpf("-t threadhist -- sh -c 'echo p=$CUBPF_PROGRAMS'", out,
				   sizeof(out)), 0);
	assert_contains(out, "/threadhist.bpf.o");
	/* memdelay: -n in range, its own; it samples every other launch with spans on, and its
	 * probe object is a patched copy, gone after the run */
	assert_int_equal(run_cubpf("-t memdelay -n 0 -- true", out, sizeof(out)), 2);
	assert_contains(out, "-n '0': expected nanoseconds from 1 to 1000000");
	assert_int_equal(run_cubpf("-t memdelay -n 1000001 -- true", out, sizeof(out)), 2);
	assert_int_equal(run_cubpf("-t kcount -n 5 -- true", out, sizeof(out)), 2);
	assert_contains(out, "-n is memdelay's option, not kcount's");
	assert_int_equal(run_cubpf("-t memdelay -n 250 -- sh -c 'echo s=$CUBPF_SAMPLE "
				   "sp=$CUBPF_SPANS p=$CUBPF_PROGRAMS; test -s $CUBPF_PROGRAMS'",
				   out, sizeof(out)), 0);
	assert_contains(out, "s=2 sp=1 p=");
	const char *p = strstr(out, " p="), *e = p ? strpbrk(p + 3, " \n") : NULL;
	assert_non_null(e);
	char obj[512];
	snprintf(obj, sizeof(obj), "%.*s", (int)(e - p - 3), p + 3);
	assert_non_null(strstr(obj, "cubpf-memdelay-"));
	assert_int_not_equal(access(obj, F_OK), 0);
	/* a tool's own temporary trace goes without kernel spans; a kept one (-o) has them */
	assert_int_equal(run_cubpf("-t kcount -- sh -c 'echo spans=$CUBPF_SPANS.'", out,
				   sizeof(out)), 0);
	assert_contains(out, "spans=0.");
	assert_int_equal(run_cubpf("-t kcount -o /tmp/cubpf-test-spans.trace -- sh -c "
				   "'echo spans=$CUBPF_SPANS.'", out, sizeof(out)), 0);
	assert_contains(out, "spans=.");
	unlink("/tmp/cubpf-test-spans.trace");
	/* -o, and a program that never loads libcuda: said in one line, the program's status; a
	 * trace an earlier run left at that path is gone (the shim would write beside it) */
	FILE *old = fopen("/tmp/cubpf-test-none.trace", "w");
	assert_non_null(old);
	fputs("an earlier run's trace\n", old);
	fclose(old);
	assert_int_equal(run_cubpf("-o /tmp/cubpf-test-none.trace -- sh -c 'exit 3'", out,
				   sizeof(out)), 3);
	assert_contains(out, "cubpf run: no trace written to /tmp/cubpf-test-none.trace: sh made "
			     "no CUDA driver call through cubpf");
	assert_int_equal(access("/tmp/cubpf-test-none.trace", F_OK), -1);
	assert_int_equal(run_cubpf("-t kcount -o /tmp/cubpf-test-none.trace -- true", out,
				   sizeof(out)), 0);
	assert_contains(out, "cubpf run: no report: the program made no CUDA driver call through "
			     "cubpf (nothing was recorded in /tmp/cubpf-test-none.trace; it never loaded "
			     "libcuda.so.1");
	assert_int_equal(run_cubpf("--list-tools", out, sizeof(out)), 0);
	assert_contains(out, "threadhist");
	assert_int_equal(run_cubpf("-t launchlate --help", out, sizeof(out)), 0);
	assert_contains(out, "usage: cubpf run -t launchlate");
}

/* A shell command's status and output (stdout and stderr); -1 when it did not exit. */
static int sh_out(const char *cmd, char *out, size_t len)
{
	char full[4096];
	snprintf(full, sizeof(full), "%s 2>&1", cmd);
	FILE *p = popen(full, "r");
	assert_non_null(p);
	size_t n = fread(out, 1, len - 1, p);
	out[n] = '\0';
	int st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The first line of out that holds needle, without its newline (a refusal's message). */
static void line_with(const char *out, const char *needle, char *line, size_t len)
{
	const char *p = strstr(out, needle);
	if (!p)
		fail_msg("no '%s' in:\n%s", needle, out);
	while (p > out && p[-1] != '\n')
		p--;
	size_t n = strcspn(p, "\n");
	snprintf(line, len, "%.*s", (int)n, p);
}

/* Issue 28: every numeric setting, as a `cubpf run` option and as the variable cubpf run passes
 * on, takes the same values and refuses absurd ones (0, negative, 2^32, past 2^64, garbage,
 * empty) with the same line; the shim alone takes such a value as its default with that line
 * as a warning: CUBPF_SAMPLE=2^32 (0 once cut to 32 bits) with CUBPF_CONTROL used to end the
 * application with SIGFPE at its first probed launch. */
static void test_settings_refused_alike(void **state)
{
	(void)state;
	static const struct { const char *env, *opt, *max; } set[] = {
		{"CUBPF_SAMPLE", "--sample", "2147483648"},
		{"CUBPF_RINGBUF_MB", "--ringbuf-mb", "1048576"},
		{"CUBPF_MAP_MAX_MB", "--map-max-mb", "16777216"},
		{"CUBPF_RINGBUF_THREADS", NULL, "16"},
		{"CUBPF_TRACE_THREADS", NULL, "16"},
		{"CUBPF_PERTHREAD_THREADS", NULL, "2147483648"},
		{"CUBPF_VERIFY_TIMEOUT_MS", NULL, "3600000"},
		{"CUBPF_CACHE_WAIT_MS", NULL, "60000"},
		{"CUBPF_INTERVAL_MS", NULL, "10000000000"},
		{"CUBPF_ENABLE_WORDS", NULL, "1"},
		{"CUBPF_SHARED_SUMS", NULL, "1"},
	};
	static const char *const absurd[] = {"0", "-1", "4294967296", "18446744073709551616",
					     "99999999999999999999999", "12abc", "abc", " 5", "+5",
					     "0x10"};
	static char out[8192];
	char cmd[2048], want[512], got[512];
	int refusals = 0;
	for (size_t i = 0; i < sizeof(set) / sizeof(set[0]); i++)
		for (size_t j = 0; j < sizeof(absurd) / sizeof(absurd[0]); j++) {
			if ((!strcmp(set[i].env, "CUBPF_ENABLE_WORDS") ||
			     !strcmp(set[i].env, "CUBPF_SHARED_SUMS")) && !strcmp(absurd[j], "0"))
				continue; /* 0 is one of its two values */
			if (!strcmp(set[i].env, "CUBPF_INTERVAL_MS") && !strcmp(absurd[j], "4294967296"))
				continue; /* 49 days between snapshots: allowed (-i takes 10^7 s) */
			snprintf(want, sizeof(want), "%s%s%s%s '%s': expected a whole number from",
				 set[i].env, set[i].opt ? " (" : "", set[i].opt ? set[i].opt : "",
				 set[i].opt ? ")" : "", absurd[j]);
			snprintf(cmd, sizeof(cmd), "%s='%s' %s/bin/cubpf run -- true", set[i].env,
				 absurd[j], TOOLS_TEST_BUILD);
			if (sh_out(cmd, out, sizeof(out)) != 2)
				fail_msg("%s=%s: not refused:\n%s", set[i].env, absurd[j], out);
			line_with(out, want, got, sizeof(got));
			assert_non_null(strstr(got, set[i].max));
			refusals++;
			if (!set[i].opt)
				continue;
			char env_line[512];
			snprintf(env_line, sizeof(env_line), "%s", got);
			snprintf(cmd, sizeof(cmd), "%s/bin/cubpf run %s '%s' -- true", TOOLS_TEST_BUILD,
				 set[i].opt, absurd[j]);
			if (sh_out(cmd, out, sizeof(out)) != 2)
				fail_msg("%s %s: not refused:\n%s", set[i].opt, absurd[j], out);
			line_with(out, want, got, sizeof(got));
			assert_string_equal(got, env_line);
			refusals++;
		}
	/* the largest value passes both ways */
	assert_int_equal(sh_out("CUBPF_SAMPLE=2147483648 " TOOLS_TEST_BUILD "/bin/cubpf run "
				"--sample 2147483648 -- true", out, sizeof(out)), 0);
	print_message("settings: %d absurd values refused, option and variable word for word\n",
		      refusals);

	/* the shim alone: a warning, the default, and the program runs (it used to get SIGFPE) */
	FILE *f = fopen("/tmp/cubpf-test-control", "w");
	assert_non_null(f);
	fputs("on\n", f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "cd /tmp && LD_LIBRARY_PATH=%s/lib CUBPF_REAL_LIBCUDA=%s/tests/"
		 "libcuda-fake.so CUBPF_PROGRAMS=%s/probes/kcount.bpf.o CUBPF_CACHE=off "
		 "CUBPF_CONTROL=/tmp/cubpf-test-control CUBPF_SAMPLE=4294967296 timeout 60 "
		 "%s/tests/tools_fake_app", TOOLS_TEST_BUILD, TOOLS_TEST_BUILD, TOOLS_TEST_BUILD,
		 TOOLS_TEST_BUILD);
	int rc = sh_out(cmd, out, sizeof(out));
	if (rc != 0 || !strstr(out, "fake_app: done") ||
	    !strstr(out, "CUBPF_SAMPLE (--sample) '4294967296': expected a whole number from 1 to "
			 "2147483648; using the default, 1"))
		fail_msg("CUBPF_SAMPLE=2^32 under CUBPF_CONTROL (%d):\n%s", rc, out);
	unlink("/tmp/cubpf-test-control");
}

/* Issue 28: a FIFO where a file is expected is refused at once with what it is, never waited
 * on: a trace for `cubpf trace`, a file for `cubpf inspect`, a probe object for `cubpf verify`,
 * CUBPF_PROGRAMS and CUBPF_REAL_LIBCUDA in the shim (each bounded by timeout: a hang is 124). */
static void test_fifo_inputs(void **state)
{
	(void)state;
	static char out[1 << 14];
	char fifo[128], cmd[2048];
	snprintf(fifo, sizeof(fifo), "/tmp/cubpf-test-fifo-%d", (int)getpid());
	unlink(fifo);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	static const char *const subs[] = {"trace info", "trace dump", "trace stats", "inspect",
					   "verify", "disasm"};
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
		snprintf(cmd, sizeof(cmd), "timeout 20 %s/bin/cubpf %s %s", TOOLS_TEST_BUILD,
			 subs[i], fifo);
		int rc = sh_out(cmd, out, sizeof(out));
		if (rc == 124 || rc == 0 || !strstr(out, "is a FIFO, not a regular file"))
			fail_msg("cubpf %s FIFO (%d):\n%s", subs[i], rc, out);
	}
	/* the shim: the probe object is left out with a warning, the program runs */
	snprintf(cmd, sizeof(cmd), "cd /tmp && LD_LIBRARY_PATH=%s/lib CUBPF_REAL_LIBCUDA=%s/tests/"
		 "libcuda-fake.so CUBPF_PROGRAMS=%s CUBPF_CACHE=off timeout 20 %s/tests/tools_fake_app",
		 TOOLS_TEST_BUILD, TOOLS_TEST_BUILD, fifo, TOOLS_TEST_BUILD);
	int rc = sh_out(cmd, out, sizeof(out));
	if (rc != 0 || !strstr(out, "is a FIFO, not a regular file") || !strstr(out, "fake_app: done"))
		fail_msg("CUBPF_PROGRAMS=FIFO (%d):\n%s", rc, out);
	/* the real driver: not found (the application's first call fails), said, no hang */
	snprintf(cmd, sizeof(cmd), "cd /tmp && LD_LIBRARY_PATH=%s/lib CUBPF_REAL_LIBCUDA=%s "
		 "timeout 20 %s/tests/tools_fake_app", TOOLS_TEST_BUILD, fifo, TOOLS_TEST_BUILD);
	rc = sh_out(cmd, out, sizeof(out));
	if (rc == 124 || !strstr(out, "is not a regular file"))
		fail_msg("CUBPF_REAL_LIBCUDA=FIFO (%d):\n%s", rc, out);
	/* the NVRTC drop-in's real library, the same way (through python, which cannot load a
	 * sanitized library: not in the ASan pass) */
#ifndef __SANITIZE_ADDRESS__
	snprintf(cmd, sizeof(cmd), "CUBPF_REAL_LIBNVRTC=%s timeout 20 python3 -c 'import ctypes; "
		 "l = ctypes.CDLL(\"%s/lib/libnvrtc.so.13\"); a = ctypes.c_int(); "
		 "print(\"rc\", l.nvrtcVersion(ctypes.byref(a), ctypes.byref(a)))'", fifo,
		 TOOLS_TEST_BUILD);
	rc = sh_out(cmd, out, sizeof(out));
	if (rc != 0 || !strstr(out, "is not a regular file") || !strstr(out, "rc "))
		fail_msg("CUBPF_REAL_LIBNVRTC=FIFO (%d):\n%s", rc, out);
#endif
	unlink(fifo);
}

static int count_of(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

/* Issue 28, through the shim and the fake driver: a cache filled by one run gives the next run,
 * read-only (CUBPF_CACHE_READONLY=1), its hit and is not written; a cache in a folder another
 * group can write is not used, with one warning that says why and how to share, and the
 * program runs; trusting that group (CUBPF_CACHE_GROUP) makes it usable. */
static void test_cache_shared_through_the_shim(void **state)
{
	(void)state;
	static char out[1 << 14];
	char dir[64], db[128], cmd[2048];
	snprintf(dir, sizeof(dir), "/tmp/cubpf-test-cache-%d", (int)getpid());
	snprintf(db, sizeof(db), "%s/cache.db", dir);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(mkdir(dir, 0700), 0);
	const char *fmt = "cd /tmp && LD_LIBRARY_PATH=%s/lib CUBPF_REAL_LIBCUDA=%s/tests/libcuda-fake.so "
			  "CUBPF_PROGRAMS=%s/probes/kcount.bpf.o CUBPF_CACHE=%s CUBPF_LOG=info %s "
			  "timeout 60 %s/tests/tools_fake_app";
#define RUN(extra) (snprintf(cmd, sizeof(cmd), fmt, TOOLS_TEST_BUILD, TOOLS_TEST_BUILD, \
			     TOOLS_TEST_BUILD, db, extra, TOOLS_TEST_BUILD), sh_out(cmd, out, sizeof(out)))
	assert_int_equal(RUN(""), 0);
	assert_contains(out, "cache: 0 hits, 1 misses");
	FILE *f = fopen(db, "rb");
	assert_non_null(f);
	static uint8_t before[1 << 20], after[1 << 20];
	size_t n0 = fread(before, 1, sizeof(before), f);
	fclose(f);
	assert_int_equal(RUN("CUBPF_CACHE_READONLY=1"), 0);
	assert_contains(out, "cache: 1 hits, 0 misses, 0 JIT compiles");
	f = fopen(db, "rb");
	assert_non_null(f);
	size_t n1 = fread(after, 1, sizeof(after), f);
	fclose(f);
	assert_int_equal(n0, n1);
	assert_memory_equal(before, after, n0);

	assert_int_equal(chown(dir, 0, 65534), 0);
	assert_int_equal(chmod(dir, 0770), 0);
	assert_int_equal(RUN(""), 0);
	assert_contains(out, "fake_app: done");
	assert_int_equal(count_of(out, "is writable by group"), 1);
	assert_contains(out, "CUBPF_CACHE_GROUP=NAME");
	assert_contains(out, "(cache off)");
	assert_int_equal(RUN("CUBPF_CACHE_GROUP=65534"), 0);
	assert_contains(out, "cache: 1 hits, 0 misses");
#undef RUN
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/* End to end on the CPU: cubpf run over the shim and the fake driver.  The fake runs no kernel
 * (the maps stay zero), but the launches, the kernel ids and the memory come through, and a
 * failing app's status is returned with the report printed. */
static void test_run_fake(void **state)
{
	(void)state;
	static char out[1 << 16];
	char args[1024];
	snprintf(args, sizeof(args), "-t kcount --real-libcuda %s/tests/libcuda-fake.so -- "
		 "%s/tests/tools_fake_app 3", TOOLS_TEST_BUILD, TOOLS_TEST_BUILD);
	assert_int_equal(run_cubpf(args, out, sizeof(out)), 3);
	assert_contains(out, "fake_app: done");
	assert_contains(out, "fake_app: a line of the app's own stderr");
	assert_contains(out, "--- at exit ---");
	assert_contains(out, "tools_k                                          3          480");
	assert_contains(out, "kernels instrumented: 1");
	assert_contains(out, "maps and buffers: ");
	assert_contains(out, "trace: complete");
	assert_contains(out, "exited with status 3");
	assert_null(strstr(out, "cubpf: live: kernel id")); /* the shim's lines are not echoed */
	assert_null(strstr(out, "cubpf: map ")); /* nor its map report: it used to reach stderr */
	assert_contains(out, "kernels launched but not instrumented: 0\n");
	assert_null(strstr(out, "1 modules instrumented")); /* the counters are no reason */
	snprintf(args, sizeof(args), "--json -p %s/probes/kcount.bpf.o --real-libcuda "
		 "%s/tests/libcuda-fake.so -- %s/tests/tools_fake_app", TOOLS_TEST_BUILD,
		 TOOLS_TEST_BUILD, TOOLS_TEST_BUILD);
	assert_int_equal(run_cubpf(args, out, sizeof(out)), 0);
	assert_contains(out, "{\"final\":true,\"maps\":[{\"name\":\"kstats\"");
}

/* `cubpf run -o TRACE` without a tool records what the README says: API calls, kernels and
 * their spans (the shim started its live part only with probe objects, so no trace was
 * written and cubpf run said "no trace written"). */
static void test_run_trace_without_tool(void **state)
{
	(void)state;
	static char out[1 << 16];
	char args[1024], trace[64], cmd[1200];
	snprintf(trace, sizeof(trace), "/tmp/cubpf-tools-notool-%d.trace", (int)getpid());
	unlink(trace);
	snprintf(args, sizeof(args), "-o %s --real-libcuda %s/tests/libcuda-fake.so -- "
		 "%s/tests/tools_fake_app", trace, TOOLS_TEST_BUILD, TOOLS_TEST_BUILD);
	assert_int_equal(run_cubpf(args, out, sizeof(out)), 0);
	assert_contains(out, "fake_app: done");
	assert_null(strstr(out, "no trace written"));
	snprintf(cmd, sizeof(cmd), "%s/bin/cubpf trace info %s 2>&1", TOOLS_TEST_BUILD, trace);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	size_t n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	assert_int_equal(pclose(p), 0);
	assert_contains(out, "kernel=3 ");
	assert_contains(out, "kspan=3");
	assert_contains(out, "state     complete");
	unlink(trace);
}

/* The report after "--- at exit ---" (its time stamp's line left out), copied. */
static char *at_exit_part(const char *out)
{
	const char *p = strstr(out, "--- at exit ---\n");
	assert_non_null(p);
	return strdup(p);
}

/* Issue 18: the report comes from the trace's records alone.  With the shim's log off (no
 * kernel id, memory, reason or host map line written at all), cubpf run reports the same kernel
 * ids, map memory and host maps, word for word, as with the log on. */
static void test_run_report_without_log(void **state)
{
	(void)state;
	static char out[1 << 16];
	char args[1024], *with_log, *without_log;
	const char *fmt = "-t kcount %s-p %s/live-probes/host.bpf.o --real-libcuda "
			  "%s/tests/libcuda-fake.so -- %s/tests/tools_fake_app";
	snprintf(args, sizeof(args), fmt, "", TOOLS_TEST_BUILD, TOOLS_TEST_BUILD, TOOLS_TEST_BUILD);
	assert_int_equal(run_cubpf(args, out, sizeof(out)), 0);
	with_log = at_exit_part(out);
	snprintf(args, sizeof(args), fmt, "-l off ", TOOLS_TEST_BUILD, TOOLS_TEST_BUILD,
		 TOOLS_TEST_BUILD);
	assert_int_equal(run_cubpf(args, out, sizeof(out)), 0);
	assert_null(strstr(out, "cubpf: ")); /* the log is off, and -l echoes it: no line */
	without_log = at_exit_part(out);
	assert_contains(without_log, "tools_k                                          3          480");
	assert_contains(without_log, "kernels instrumented: 1\n");
	assert_contains(without_log, "map calls[0] = 3 (host)\n"); /* the host program's count */
	assert_contains(without_log, "map calls[2] = 3 (host)\n");
	assert_contains(without_log, "maps and buffers: ");
	assert_null(strstr(without_log, "maps and buffers: 0 device bytes"));
	assert_string_equal(with_log, without_log);
	free(with_log);
	free(without_log);
}

/* cubpf cdi-hook reads the container state JSON a runtime gives it on stdin: every truncation
 * of a state, and escapes cut short, are refused with a message, never read past their end
 * (the sanitized pass runs the sanitized cubpf). */
static void test_cdi_hook_damaged_state(void **state)
{
	(void)state;
	static const char good[] = "{\"ociVersion\":\"1.0.2\",\"bundle\":\"/nonexistent/b\\u0041\","
				   "\"annotations\":{\"k\":[1,{\"x\":\"y\"}]}}";
	static const char *const odd[] = {"{\"bundle\":\"\\u41", "{\"bundle\":\"\\", "{\"bundle\":",
					  "{\"a\":[[[[", "\"bundle\"", "{\"bundle\":\"\\u0000\"}", ""};
	char path[] = "/tmp/cubpf-test-hook-XXXXXX", cmd[1024], out[8192];
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	for (size_t n = 0; n <= sizeof(good) - 1 + sizeof(odd) / sizeof(odd[0]); n++) {
		FILE *f = fopen(path, "w");
		assert_non_null(f);
		if (n < sizeof(good) - 1)
			fwrite(good, 1, n, f);
		else if (n > sizeof(good) - 1)
			fputs(odd[n - sizeof(good)], f);
		fclose(f);
		snprintf(cmd, sizeof(cmd), "%s/bin/cubpf cdi-hook --preload /x.so < %s 2>&1", TOOLS_TEST_BUILD,
			 path);
		FILE *p = popen(cmd, "r");
		assert_non_null(p);
		size_t got = fread(out, 1, sizeof(out) - 1, p);
		out[got] = '\0';
		int st = pclose(p);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 1 || !strstr(out, "cubpf cdi-hook: ") ||
		    strstr(out, "Sanitizer") || strstr(out, "runtime error"))
			fail_msg("state of %zu bytes: status %d:\n%s", n, st, out);
	}
	unlink(path);
}

/* ---- programs of several processes (issue 17) ---------------------------------------------- */
/* A trace of one process: kernel ids as given, kstats (kcount) and counts (memtrace) keyed by
 * them, one launch per kernel. */
static void process_trace(const char *path, uint32_t pid, const char *const *names,
			  const uint32_t *ids, uint32_t n, uint64_t runs)
{
	char err[STORE_ERRLEN];
	struct store_trace_process p = {.pid = pid, .ppid = 1, .cubpf_version = "test",
					.hostname = "h", .cmdline = "./app"};
	struct store_trace_writer *w = store_trace_create(path, &p, NULL, err, sizeof(err));
	assert_non_null(w);
	uint32_t keys[8], mkeys[8];
	uint64_t *vals = calloc((size_t)n * 256 * 16, 8), *mvals = calloc((size_t)n * 256 * 32, 8);
	assert_true(vals && mvals && n <= 8);
	for (uint32_t i = 0; i < n; i++) {
		struct store_rec_kernel_id k = {.id = ids[i], .name = store_trace_intern(w, names[i])};
		assert_int_equal(store_trace_kernel_id(w, &k), 0);
		kernel(w, names[i], 100 + i, 2, 32);
		keys[i] = ids[i];
		vals[(size_t)i * 256 * 16] = runs;          /* launches seen, SM slot 0 */
		vals[(size_t)i * 256 * 16 + 1] = 64 * runs; /* threads */
		mkeys[i] = ids[i] * 8 + 1;                  /* global space */
		mvals[(size_t)i * 256 * 32] = 10 * runs;    /* loads of 1 byte */
	}
	map_percpu(w, "kstats", 10, keys, vals, n, 16);
	map_percpu(w, "counts", 10, mkeys, mvals, n, 32);
	assert_int_equal(store_trace_close(w, err, sizeof(err)), 0);
	free(vals), free(mvals);
}

/* Two processes number the same kernels differently: the report counts each kernel once, with
 * both processes' figures, and a kernel of one process only keeps its own. */
static void test_processes_renumbered(void **state)
{
	(void)state;
	char a[] = "/tmp/cubpf-test-proc-a-XXXXXX", b[] = "/tmp/cubpf-test-proc-b-XXXXXX";
	close(mkstemp(a)), close(mkstemp(b));
	static const char *const na[] = {"_Z2kAv", "_Z2kBv"}, *const nb[] = {"_Z2kBv", "_Z2kCv"};
	static const uint32_t ia[] = {1, 2}, ib[] = {1, 2};
	process_trace(a, 100, na, ia, 2, 1);
	process_trace(b, 200, nb, ib, 2, 5);
	struct tool_data d;
	char err[STORE_ERRLEN] = "";
	memset(&d, 0, sizeof(d));
	assert_int_equal(tool_data_load_process(&d, a, tool_find("kcount")->kernel_keys, err,
						sizeof(err)), 0);
	assert_int_equal(tool_data_load_process(&d, b, tool_find("kcount")->kernel_keys, err,
						sizeof(err)), 0);
	assert_int_equal(d.nprocs, 2);
	char *out = report("kcount", &d, 0);
	assert_contains(out, "kA                                               1           64         1");
	assert_contains(out, "kB                                               2          128         6");
	assert_contains(out, "kC                                               1           64         5");
	assert_contains(out, "processes: 2 (a trace each)");
	assert_contains(out, "  pid 200 (parent 1): 2 launches, trace complete: ./app");
	free(out);
	tool_data_free(&d);
	memset(&d, 0, sizeof(d));
	assert_int_equal(tool_data_load_process(&d, a, tool_find("memtrace")->kernel_keys, err,
						sizeof(err)), 0);
	assert_int_equal(tool_data_load_process(&d, b, tool_find("memtrace")->kernel_keys, err,
						sizeof(err)), 0);
	out = report("memtrace", &d, 1);
	assert_contains(out, "{\"name\":\"_Z2kBv\",\"traffic\":[{\"space\":\"global\",\"op\":\"load\","
			     "\"bytes\":60,");
	assert_contains(out, "{\"name\":\"_Z2kCv\",\"traffic\":[{\"space\":\"global\",\"op\":\"load\","
			     "\"bytes\":50,");
	assert_contains(out, "\"processes\":2,");
	free(out);
	tool_data_free(&d);
	unlink(a), unlink(b);
}

static int traces_in(const char *dir)
{
	char cmd[512], buf[64] = "";
	snprintf(cmd, sizeof(cmd), "ls %s | grep -c '^cubpf-[0-9]*\\.trace$'", dir);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	if (!fgets(buf, sizeof(buf), p))
		buf[0] = 0;
	pclose(p);
	return atoi(buf);
}

/* `cubpf run -t kcount -o DIR -- CMD` over the fake driver: the report's text in out. */
static void run_processes(const char *dir, const char *cmd, char *out, size_t len)
{
	char args[2048];
	snprintf(args, sizeof(args), "-t kcount -o %s --real-libcuda %s/tests/libcuda-fake.so -- %s",
		 dir, TOOLS_TEST_BUILD, cmd);
	int rc = run_cubpf(args, out, len);
	if (rc != 0)
		fail_msg("cubpf run %s: status %d:\n%s", args, rc, out);
}

/* One program of several processes (tools_fake_app 0 MODE) under kcount -o DIR: one trace per
 * process that used CUDA, none for a child that did not, and one report whose counts are the
 * sum over the processes. */
static void check_processes(const char *mode, int procs)
{
	static char out[1 << 16];
	char dir[] = "/tmp/cubpf-test-procs-XXXXXX", cmd[512], line[128];
	assert_non_null(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd), "%s/tests/tools_fake_app 0 %s", TOOLS_TEST_BUILD, mode);
	run_processes(dir, cmd, out, sizeof(out));
	assert_contains(out, "fake_app: done");
	if (traces_in(dir) != procs)
		fail_msg("%s: %d traces in %s, expected %d:\n%s", mode, traces_in(dir), dir, procs,
			 out);
	snprintf(line, sizeof(line), "tools_k %*d %12d", 40 - 7 + 9, 3 * procs, 480 * procs);
	assert_contains(out, line);
	if (procs > 1) {
		snprintf(line, sizeof(line), "processes: %d (a trace each)", procs);
		assert_contains(out, line);
		assert_contains(out, "kernels instrumented: 1\n");
	} else {
		assert_null(strstr(out, "processes:"));
	}
	if (!strcmp(mode, "fork"))
		assert_contains(out, "fake_app: child done");
	assert_contains(out, "trace: complete");
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/* fork + exec, posix_spawn, and a child that never touches CUDA. */
static void test_run_processes(void **state)
{
	(void)state;
	check_processes("exec", 2);
	check_processes("spawn", 2);
	check_processes("nocuda", 1);
}

/* fork only: the child ends in _exit(), which runs no exit handler, so its trace is complete
 * only through libcubpf-exit.so, which cubpf run cannot preload into a sanitized build's
 * programs (they need the ASan runtime first). */
static void test_run_processes_fork_exit(void **state)
{
	(void)state;
#if defined(__SANITIZE_ADDRESS__)
	skip(); /* reported as skipped; the plain build runs it */
#endif
	check_processes("fork", 2);
}

/* -o FILE: the first process writes FILE, the other FILE.PID; a run again replaces both.
 * Without -o the report merges the processes' temporary traces; --json says how many. */
static void test_run_processes_file(void **state)
{
	(void)state;
	static char out[1 << 16];
	char cmd[512], args[2048];
	const char *file = "/tmp/cubpf-test-procs.trace";
	snprintf(cmd, sizeof(cmd), "%s/tests/tools_fake_app 0 exec", TOOLS_TEST_BUILD);
	for (int round = 0; round < 2; round++) {
		run_processes(file, cmd, out, sizeof(out));
		assert_contains(out, "processes: 2 (a trace each)");
		assert_int_equal(access(file, R_OK), 0);
		FILE *p = popen("ls /tmp/cubpf-test-procs.trace.* | grep -c 'trace\\.[0-9]*$'", "r");
		char n[32] = "";
		assert_non_null(p);
		assert_non_null(fgets(n, sizeof(n), p));
		pclose(p);
		assert_int_equal(atoi(n), 1); /* the earlier round's FILE.PID was replaced */
	}
	assert_int_equal(system("rm -f /tmp/cubpf-test-procs.trace /tmp/cubpf-test-procs.trace.*"), 0);
	snprintf(args, sizeof(args), "-t kcount --json --real-libcuda %s/tests/libcuda-fake.so -- %s",
		 TOOLS_TEST_BUILD, cmd);
	assert_int_equal(run_cubpf(args, out, sizeof(out)), 0);
	assert_contains(out, "\"processes\":2,\"process_list\":[{\"pid\":");
	assert_contains(out, "\"launches\":6,\"threads\":960,");
}

/* Python's multiprocessing, both start methods: two workers and the parent. */
static void test_run_python_multiprocessing(void **state)
{
	(void)state;
	static char out[1 << 16];
#if defined(__SANITIZE_ADDRESS__)
	skip(); /* python is not sanitized: it cannot load a sanitized shim (the plain pass runs it) */
#endif
	if (system("python3 -c 'import multiprocessing, ctypes' 2>/dev/null") != 0)
		skip(); /* reported as skipped, not passed */
	static const char *const methods[] = {"spawn", "fork"};
	for (int i = 0; i < 2; i++) {
		char dir[] = "/tmp/cubpf-test-mp-XXXXXX", cmd[512];
		assert_non_null(mkdtemp(dir));
		snprintf(cmd, sizeof(cmd), "python3 %s/tests/tools/mp_app.py %s", TOOLS_TEST_SRC,
			 methods[i]);
		run_processes(dir, cmd, out, sizeof(out));
		assert_contains(out, "mp_app: done");
		if (traces_in(dir) != 3)
			fail_msg("%s: %d traces in %s, expected 3:\n%s", methods[i], traces_in(dir), dir,
				 out);
		assert_contains(out, "processes: 3 (a trace each)");
		assert_contains(out, "tools_k                                          9         1440");
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		assert_int_equal(system(cmd), 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kcount),
		cmocka_unit_test(test_blocklat),
		cmocka_unit_test(test_syncwait),
		cmocka_unit_test(test_syncwait_sites),
		cmocka_unit_test(test_memdelay),
		cmocka_unit_test(test_patch_rodata),
		cmocka_unit_test(test_blocklat_probe),
		cmocka_unit_test(test_syncwait_probe),
		cmocka_unit_test(test_memdelay_probe),
		cmocka_unit_test(test_instrcount),
		cmocka_unit_test(test_opcodehist),
		cmocka_unit_test(test_hotblocks),
		cmocka_unit_test(test_bb_tool_probes),
		cmocka_unit_test(test_coverage),
		cmocka_unit_test(test_ringbuf_bookkeeping_in_the_memory_line),
		cmocka_unit_test(test_report_from_trace_alone),
		cmocka_unit_test(test_report_names_the_backend),
		cmocka_unit_test(test_run_metadata_of_format_1_5),
		cmocka_unit_test(test_maps_of_two_gpus_are_combined),
		cmocka_unit_test(test_maps_too_sparse_to_combine),
		cmocka_unit_test(test_threadhist),
		cmocka_unit_test(test_threadhist_warps),
		cmocka_unit_test(test_threadhist_edges),
		cmocka_unit_test(test_threadhist_blocks),
		cmocka_unit_test(test_threadhist_blocks_clamp),
		cmocka_unit_test(test_threadhist_probe_known),
		cmocka_unit_test(test_threadhist_probe_shapes),
		cmocka_unit_test(test_threadhist_probe_regions),
		cmocka_unit_test(test_launchlate_two_gpus),
		cmocka_unit_test(test_launchlate),    cmocka_unit_test(test_memtrace),
		cmocka_unit_test(test_kernelretsnoop), cmocka_unit_test(test_maps_dump),
		cmocka_unit_test(test_bad_trace),     cmocka_unit_test(test_run_options),
		cmocka_unit_test(test_settings_refused_alike), cmocka_unit_test(test_fifo_inputs),
		cmocka_unit_test(test_cache_shared_through_the_shim),
		cmocka_unit_test(test_text_escaping), cmocka_unit_test(test_report_names_escaped),
		cmocka_unit_test(test_run_fake),      cmocka_unit_test(test_run_trace_without_tool),
		cmocka_unit_test(test_run_processes),
		cmocka_unit_test(test_run_report_without_log),
		cmocka_unit_test(test_run_processes_fork_exit),
		cmocka_unit_test(test_run_processes_file),
		cmocka_unit_test(test_processes_renumbered),
		cmocka_unit_test(test_cdi_hook_damaged_state),
		cmocka_unit_test(test_run_python_multiprocessing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
