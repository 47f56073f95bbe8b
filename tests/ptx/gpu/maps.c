/* GPU check of the map kinds of issue 6 (tests/gpu/t_ptx_maps.sh): vec_add instrumented with
 * maps.bpf.o (enable words on), maps allocated exactly per the layouts of ptx-rewriter/layout.h
 * as the shim allocates them, read back and compared with what is known in advance:
 *   - the output is bit-identical to the native kernel's;
 *   - per-SM array: the copies of key 0 sum to the thread count;
 *   - per-thread array: thread t's copy holds t + 1 for every t below the capacity, and the
 *     threads past it (100 of them) found no copy;
 *   - hash: one key per block (1000 + block index) holding the block's size, nothing else;
 *   - ring buffer: one record per thread, each global id once, no drops; then lanes too small:
 *     records + drops = threads exactly, and drops = what the probes saw refused;
 *   - enable words: with the kernel's word 0 the probes do nothing.
 * usage: ptx_maps GPU_DIR PROBE_DIR */
#include <stdint.h>

#include "ptx-rewriter/ptx.h"
#include "tests/ptx/gpu/common.h"
#include "vm/vm.h"

#define KID 7u                   /* the kernel id the harness gives vec_add */
#define BLOCK 256u
#define GRID 64u
#define NT (BLOCK * GRID)        /* threads */
#define CAP (NT - 100u)          /* per-thread copies: the last 100 threads have none */
#define RB_WARPS 64u             /* warp slots per SM given to the ring buffer */
#define RB_LANES 16u             /* fewer lanes than warp slots: the warps of every SM share
				  * them (the CAS); 16 x 256 KiB hold every record with room */
#define RB_LANE_BIG (1u << 18)

enum { M_PER_SM, M_PER_THREAD, M_BLOCKS, M_EVENTS, M_MISC, M_COUNT };

struct maps {
	const struct vm_map_def *def[M_COUNT];
	CUdeviceptr dev[M_COUNT];
	size_t bytes[M_COUNT];
	void *rb_host;           /* the ring buffer: pinned, mapped; dev[M_EVENTS] is its
				  * producers' part (device memory) */
	CUdeviceptr rb_ring;     /* the device address of rb_host */
	CUdeviceptr enable;
};

static uint32_t kernel_id(void *user, const char *mangled)
{
	(void)user, (void)mangled;
	return KID;
}

static int map_index(const struct vm_object *o, const char *name)
{
	for (uint32_t i = 0; i < o->map_cnt; i++)
		if (!strcmp(o->maps[i].name, name))
			return (int)i;
	fprintf(stderr, "maps.bpf.o has no map %s\n", name);
	exit(1);
}

static char *instrument(const char *gpu_dir, const struct vm_object *obj)
{
	char path[1024], err[PTX_ERRLEN], log[1024];
	snprintf(path, sizeof(path), "%s/ptx_fix_vecadd.ptx", gpu_dir);
	char *text = gpu_read_file(path);
	struct ptx_prog progs[4];
	uint32_t n = ptx_progs_from_object(obj, progs, 4);
	for (uint32_t i = 0; i < obj->prog_cnt; i++)
		if (vm_verify(obj, i, NULL, NULL, log, sizeof(log))) {
			fprintf(stderr, "maps.bpf.o: %s\n", log);
			exit(1);
		}
	struct ptx_inject_opts o = {.progs = progs, .prog_cnt = n, .maps = obj->maps,
				    .map_cnt = obj->map_cnt, .kernel_id = kernel_id,
				    .enable_words = true};
	char *out;
	size_t len;
	struct ptx_inject_report rep;
	if (ptx_instrument(text, strlen(text), &o, &out, &len, &rep, err, sizeof(err))) {
		fprintf(stderr, "instrumenting: %s\n", err);
		exit(1);
	}
	free(text);
	return out;
}

static CUmodule load_text(const char *text)
{
	static char log[16384];
	CUjit_option opt[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
	void *val[2] = {log, (void *)(size_t)sizeof(log)};
	CUmodule m;
	if (cuModuleLoadDataEx(&m, text, 2, opt, val) != CUDA_SUCCESS) {
		fprintf(stderr, "JIT failed:\n%s\n", log);
		exit(1);
	}
	return m;
}

/* The ring buffer's ring (pinned mapped memory) and producers' part (device memory), zeroed,
 * with their headers, as the shim lays them out (ptx-rewriter/layout.h). */
static void rb_reset(struct maps *mp, uint64_t lane_bytes)
{
	memset(mp->rb_host, 0, mp->bytes[M_EVENTS]);
	struct cubpf_rb_header *h = mp->rb_host;
	h->version = CUBPF_RB_VERSION;
	h->lanes = RB_LANES;
	h->warps = RB_WARPS;
	h->lane_bytes = lane_bytes;
	h->state = mp->dev[M_EVENTS];
	struct cubpf_rb_state st = {
		.lanes = RB_LANES, .warps = RB_WARPS, .lane_bytes = lane_bytes,
		.heads = mp->dev[M_EVENTS] + CUBPF_RB_STATE_HEADS(RB_LANES),
		.tails = mp->dev[M_EVENTS] + CUBPF_RB_STATE_TAILS(RB_LANES),
		.drops = mp->dev[M_EVENTS] + CUBPF_RB_STATE_DROPS(RB_LANES),
		.data = mp->rb_ring + CUBPF_RB_DATA_OFFSET(RB_LANES),
	};
	CK(cuMemsetD8(mp->dev[M_EVENTS], 0, CUBPF_RB_STATE_BYTES(RB_LANES)));
	CK(cuMemcpyHtoD(mp->dev[M_EVENTS], &st, sizeof(st)));
}

static void alloc_maps(CUmodule m, const struct vm_object *obj, struct maps *mp)
{
	static const char *names[M_COUNT] = {"per_sm", "per_thread", "blocks", "events", "misc"};
	for (int k = 0; k < M_COUNT; k++) {
		int i = map_index(obj, names[k]);
		const struct vm_map_def *d = &obj->maps[i];
		mp->def[k] = d;
		switch (k) {
		case M_PER_SM: mp->bytes[k] = CUBPF_PERCPU_MAP_BYTES(d->max_entries, d->value_size); break;
		case M_PER_THREAD:
			mp->bytes[k] = CUBPF_PERTHREAD_MAP_BYTES(d->max_entries, CAP, d->value_size);
			break;
		case M_BLOCKS:
			mp->bytes[k] = CUBPF_HASH_MAP_BYTES(d->max_entries, d->key_size, d->value_size);
			break;
		case M_EVENTS: mp->bytes[k] = CUBPF_RB_MAP_BYTES(RB_LANES, RB_LANE_BIG); break;
		default: mp->bytes[k] = ptx_map_value_stride(d) * (size_t)d->max_entries;
		}
		if (k == M_EVENTS) {
			CK(cuMemHostAlloc(&mp->rb_host, mp->bytes[k], CU_MEMHOSTALLOC_DEVICEMAP));
			CK(cuMemHostGetDevicePointer(&mp->rb_ring, mp->rb_host, 0));
			CK(cuMemAlloc(&mp->dev[k], CUBPF_RB_STATE_BYTES(RB_LANES)));
			rb_reset(mp, RB_LANE_BIG);
		} else {
			CK(cuMemAlloc(&mp->dev[k], mp->bytes[k]));
			CK(cuMemsetD8(mp->dev[k], 0, mp->bytes[k]));
		}
		if (gpu_bind_map(m, (unsigned)i, mp->dev[k]))
			printf("note  map %s is not used by the module\n", names[k]);
	}
	struct cubpf_perthread_header h = {.threads = CAP};
	CK(cuMemcpyHtoD(mp->dev[M_PER_THREAD], &h, sizeof(h)));
	CK(cuMemAlloc(&mp->enable, 4ull * CUBPF_ENABLE_WORDS));
	CK(cuMemsetD32(mp->enable, 0xffffffffu, CUBPF_ENABLE_WORDS));
	CUdeviceptr sym;
	size_t sz;
	CK(cuModuleGetGlobal(&sym, &sz, m, CUBPF_ENABLE_SYMBOL));
	unsigned long long v = mp->enable;
	CK(cuMemcpyHtoD(sym, &v, sizeof(v)));
}

static void *run(CUmodule m, unsigned grid)
{
	CUfunction fn;
	CK(cuModuleGetFunction(&fn, m, "_Z7vec_addPKfS0_Pfi"));
	size_t bytes = 4ull * NT;
	float *h = malloc(bytes);
	for (unsigned i = 0; i < NT; i++)
		h[i] = (float)i * 0.25f + 1.0f;
	CUdeviceptr a, b, c;
	CK(cuMemAlloc(&a, bytes));
	CK(cuMemAlloc(&b, bytes));
	CK(cuMemAlloc(&c, bytes));
	CK(cuMemcpyHtoD(a, h, bytes));
	CK(cuMemcpyHtoD(b, h, bytes));
	CK(cuMemsetD8(c, 0, bytes));
	int n = NT;
	void *args[] = {&a, &b, &c, &n};
	CK(cuLaunchKernel(fn, grid, 1, 1, BLOCK, 1, 1, 0, NULL, args, NULL));
	CK(cuCtxSynchronize());
	CK(cuMemcpyDtoH(h, c, bytes));
	cuMemFree(a), cuMemFree(b), cuMemFree(c);
	return h;
}

static void *read_map(const struct maps *mp, int k)
{
	void *h = malloc(mp->bytes[k]);
	CK(cuMemcpyDtoH(h, mp->dev[k], mp->bytes[k]));
	return h;
}

static uint64_t per_sm_sum(const struct maps *mp, int key, int *nonzero)
{
	uint64_t *v = read_map(mp, M_PER_SM), sum = 0;
	*nonzero = 0;
	for (unsigned s = 0; s < CUBPF_PERCPU_SLOTS; s++) {
		uint64_t x = v[CUBPF_PERCPU_OFFSET(key, s, 8) / 8];
		sum += x;
		*nonzero += x != 0;
	}
	free(v);
	return sum;
}

static uint64_t misc(const struct maps *mp, int k)
{
	uint64_t *v = read_map(mp, M_MISC), x = v[k];
	free(v);
	return x;
}

static void check_per_thread(const struct maps *mp)
{
	uint8_t *v = read_map(mp, M_PER_THREAD);
	unsigned good = 0;
	for (unsigned t = 0; t < CAP; t++)
		good += *(uint64_t *)(v + CUBPF_PERTHREAD_OFFSET(0, t, CAP, 8)) == t + 1ull;
	CHECK(good == CAP, "per-thread array: %u of %u threads hold their own id + 1", good, CAP);
	CHECK(misc(mp, 0) == NT - CAP, "per-thread array: %llu threads past the capacity found no copy "
	      "(expected %u)", (unsigned long long)misc(mp, 0), NT - CAP);
	free(v);
}

static void check_hash(const struct maps *mp)
{
	const struct vm_map_def *d = mp->def[M_BLOCKS];
	uint32_t cap = cubpf_hash_capacity(d->max_entries);
	uint64_t sb = CUBPF_HASH_SLOT_BYTES(d->key_size, d->value_size);
	uint8_t *v = read_map(mp, M_BLOCKS);
	unsigned full = 0, other = 0, right = 0, seen[GRID] = {0};
	for (uint32_t i = 0; i < cap; i++) {
		uint8_t *s = v + i * sb;
		uint32_t state = *(uint32_t *)s;
		if (state == CUBPF_HASH_EMPTY)
			continue;
		if (state != CUBPF_HASH_FULL) {
			other++;
			continue;
		}
		full++;
		__u64 key = *(__u64 *)(s + 8), val = *(__u64 *)(s + 16);
		if (key >= 1000 && key < 1000 + GRID && val == BLOCK && !seen[key - 1000]++)
			right++;
		/* the device probed from the host's hash of the key: no empty slot in between */
		for (uint32_t j = cubpf_hash_key(&key, 1) & (cap - 1); j != i; j = (j + 1) & (cap - 1))
			if (*(uint32_t *)(v + j * sb) == CUBPF_HASH_EMPTY) {
				other++;
				break;
			}
	}
	CHECK(full == GRID && right == GRID && other == 0,
	      "hash: %u entries (expected %u), %u keys 1000+block holding the block size %u, "
	      "%u slots in another state or unreachable", full, GRID, right, BLOCK, other);
	CHECK(misc(mp, 2) == 0, "hash: %llu lookups failed after the insert",
	      (unsigned long long)misc(mp, 2));
	free(v);
}

/* Walks one lane's committed batches from its tail as the drain does (ptx-rewriter/layout.h):
 * each record (16 bytes: the global id, then the magic word) is checked and its global id
 * marked. */
static unsigned rb_walk_lane(const uint8_t *data, uint64_t lane_bytes, uint64_t pos,
			     unsigned char *seen, unsigned *bad)
{
	unsigned recs = 0;
	for (;;) {
		uint64_t off = pos % lane_bytes;
		const uint64_t *b = (const uint64_t *)(data + off);
		if (b[1] != CUBPF_RB_TAG(pos))
			return recs;
		uint32_t k = (uint32_t)b[0], len = (uint32_t)(b[0] >> 32);
		if (k == 0) { /* padding to the lane's end */
			pos += lane_bytes - off;
			continue;
		}
		if (len != 16 || k > 32 || off + CUBPF_RB_BATCH_BYTES(k, len) > lane_bytes) {
			(*bad)++;
			return recs;
		}
		for (uint32_t r = 0; r < k; r++) { /* field-major: word i of rank r at 2 + i k + r */
			uint32_t gtid = (uint32_t)b[2 + r];
			if (b[2 + k + r] != 0xc0ffee0011223344ull || gtid >= NT) {
				(*bad)++;
				continue;
			}
			seen[gtid]++;
			recs++;
		}
		pos += CUBPF_RB_BATCH_BYTES(k, len);
	}
}

/* Walks every lane's records; returns their number, adds the drops, marks global ids seen. */
static unsigned rb_walk(const struct maps *mp, uint64_t lane_bytes, uint64_t *drops,
		       unsigned char *seen, unsigned *bad)
{
	const uint8_t *ring = mp->rb_host;
	const uint64_t *tails = (const uint64_t *)(ring + CUBPF_RB_TAILS_OFFSET);
	uint64_t dr[RB_LANES]; /* the producers count drops in device memory */
	CK(cuMemcpyDtoH(dr, mp->dev[M_EVENTS] + CUBPF_RB_STATE_DROPS(RB_LANES), sizeof(dr)));
	unsigned recs = 0;
	*drops = 0;
	for (unsigned l = 0; l < RB_LANES; l++) {
		*drops += dr[l];
		recs += rb_walk_lane(ring + CUBPF_RB_LANE_OFFSET(l, RB_LANES, lane_bytes), lane_bytes,
				     tails[l], seen, bad);
	}
	return recs;
}

static void check_ringbuf(const struct maps *mp)
{
	unsigned char *seen = calloc(NT, 1);
	uint64_t drops;
	unsigned bad = 0, once = 0;
	unsigned recs = rb_walk(mp, RB_LANE_BIG, &drops, seen, &bad);
	for (unsigned t = 0; t < NT; t++)
		once += seen[t] == 1;
	CHECK(recs == NT && once == NT && bad == 0 && drops == 0 && misc(mp, 1) == 0,
	      "ring buffer: %u records (expected %u), %u global ids exactly once, %u damaged, "
	      "%llu drops", recs, NT, once, bad, (unsigned long long)drops);
	printf("RESULT ptx_maps ringbuf records=%u expected=%u drops=%llu\n", recs, NT,
	       (unsigned long long)drops);
	free(seen);
}

/* Lanes of 4 KiB: at most 16 + 32 x 16 bytes a batch of a full warp, 7 of them a lane, 224
 * records; the others (most) are dropped and counted, exactly. */
static void check_ringbuf_drops(CUmodule m, struct maps *mp)
{
	const uint64_t small = 4096;
	rb_reset(mp, small);
	uint64_t before = misc(mp, 1);
	free(run(m, GRID));
	unsigned char *seen = calloc(NT, 1);
	uint64_t drops;
	unsigned bad = 0, dup = 0;
	unsigned recs = rb_walk(mp, small, &drops, seen, &bad);
	for (unsigned t = 0; t < NT; t++)
		dup += seen[t] > 1;
	uint64_t refused = misc(mp, 1) - before;
	CHECK(recs + drops == NT && drops == refused && recs <= RB_LANES * (small / 16) && bad == 0 &&
	      dup == 0, "ring buffer, lanes of %llu bytes: %u records + %llu drops = %llu "
	      "(expected %u), the probes saw %llu refused", (unsigned long long)small, recs,
	      (unsigned long long)drops, (unsigned long long)(recs + drops), NT,
	      (unsigned long long)refused);
	printf("RESULT ptx_maps ringbuf_small records=%u drops=%llu sum=%llu expected=%u\n", recs,
	       (unsigned long long)drops, (unsigned long long)(recs + drops), NT);
	free(seen);
}

static void check_enable(CUmodule m, struct maps *mp)
{
	CK(cuMemsetD8(mp->dev[M_PER_SM], 0, mp->bytes[M_PER_SM]));
	CK(cuMemsetD32(mp->enable + 4 * KID, 0, 1));
	free(run(m, GRID));
	int nz;
	uint64_t off = per_sm_sum(mp, 0, &nz);
	CK(cuMemsetD32(mp->enable + 4 * KID, 1, 1)); /* bit 0: the one program */
	free(run(m, GRID));
	uint64_t on = per_sm_sum(mp, 0, &nz);
	CHECK(off == 0 && on == NT, "enable words: word 0 -> %llu probe runs, bit set -> %llu "
	      "(expected 0 and %u)", (unsigned long long)off, (unsigned long long)on, NT);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: ptx_maps GPU_DIR PROBE_DIR\n");
		return 2;
	}
	char path[1024], err[256];
	snprintf(path, sizeof(path), "%s/maps.bpf.o", argv[2]);
	struct vm_object *obj;
	if (vm_object_load_file(path, &obj, err, sizeof(err))) {
		fprintf(stderr, "%s: %s\n", path, err);
		return 1;
	}
	gpu_init();
	char *text = instrument(argv[1], obj);
	snprintf(path, sizeof(path), "%s/ptx_fix_vecadd.ptx", argv[1]);
	CUmodule native = gpu_load_ptx(path), inst = load_text(text);
	struct maps mp = {0};
	alloc_maps(inst, obj, &mp);
	float *want = run(native, GRID), *got = run(inst, GRID);
	CHECK(!memcmp(want, got, 4ull * NT), "vec_add output bit-identical with the map probes");
	free(want), free(got);
	int nz;
	uint64_t other = per_sm_sum(&mp, 1, &nz), sum = per_sm_sum(&mp, 0, &nz);
	CHECK(sum == NT && other == 0, "per-SM array: key 0 copies sum to %llu over %d SM slots "
	      "(expected %u), key 1 %llu", (unsigned long long)sum, nz, NT, (unsigned long long)other);
	printf("RESULT ptx_maps per_sm sum=%llu expected=%u slots=%d\n", (unsigned long long)sum,
	       NT, nz);
	check_per_thread(&mp);
	check_hash(&mp);
	check_ringbuf(&mp);
	check_ringbuf_drops(inst, &mp);
	check_enable(inst, &mp);
	printf("RESULT ptx_maps %s (%d failures)\n", gpu_failures ? "FAIL" : "PASS", gpu_failures);
	free(text);
	vm_object_free(obj);
	return gpu_failures ? 1 : 0;
}
