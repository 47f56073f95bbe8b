/* shim/live/maps.c: device maps — one allocation per map per context, the pointers stored in
 * the instrumented modules, the copies read back at exit, the bpftool-like report.
 *
 * Per context rather than per device: an allocation belongs to a context and the kernels of
 * another context cannot reach it.  The CUDA runtime (and PyTorch, JAX, CuPy) use one primary
 * context per device, so this is one copy per device for them.
 *
 * cubpf's copies run on a non-blocking stream of its own and wait for that stream only: the
 * application's streams are never synchronised while it runs (at exit, see shim_live_snapshot_all).
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shim/live/internal.h"
#include "shim/live/rb.h"

static struct live_ctx *ctxs;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* The drain threads walk the list without `lock`, each pass under this (read); a context leaves
 * the list, and a context being torn down is marked, under it (write): once the writer has had
 * it, no pass touches that context's pinned memory, which the driver frees with the context.
 * Writers first: the drain's back-to-back passes must not starve a teardown. */
static pthread_rwlock_t ctxs_rw = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
/* What contexts gone before exit had (the exit line counts every context the process had). */
static uint64_t gone_device_bytes, gone_pinned_bytes;
static uint32_t gone_contexts;

/* Being torn down by some thread (its id, 0 = no): cubpf's threads leave it alone. */
static uint32_t retiring(const struct live_ctx *c)
{
	return __atomic_load_n(&c->retiring, __ATOMIC_ACQUIRE);
}

uint32_t shim_live_ctx_sm(CUcontext ctx)
{
	CUdevice dev = 0;
	int major = 0, minor = 0;
	if (ctx && shim_live_cu.cuCtxGetDevice(&dev) != CUDA_SUCCESS)
		return 0;
	if (shim_live_cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
					 dev) != CUDA_SUCCESS ||
	    shim_live_cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
					 dev) != CUDA_SUCCESS)
		return 0;
	return (uint32_t)(major * 10 + minor);
}

static void snap_free(struct live_snap *s)
{
	if (s)
		free(s->kv);
	free(s);
}

/* Whether a device address lies in the context's one allocation (maps_alloc). */
static bool in_pool(const struct live_ctx *c, CUdeviceptr d)
{
	return c->pool && d >= c->pool && d < c->pool + c->pool_bytes;
}

static void ctx_free(struct live_ctx *c)
{
	for (uint32_t i = 0; c->base && i < shim_live_session.nmaps; i++) {
		if (c->host && c->host[i]) /* a ring buffer's ring (its producers' part is pooled) */
			shim_live_cu.cuMemFreeHost(c->host[i]);
		if (c->base[i] && !in_pool(c, c->base[i])) /* a map shared with host programs */
			shim_live_cu.cuMemFree_v2(c->base[i]);
	}
	if (c->pool)
		shim_live_cu.cuMemFree_v2(c->pool);
	free(c->enable_set);
	free(c->base);
	free(c->host);
	free(c->drops_seen);
	free(c->rb_moved);
	free(c->rb_synced);
	for (uint32_t i = 0; c->snap && i < shim_live_session.nmaps; i++)
		snap_free(c->snap[i]);
	free(c->snap);
	free(c);
}

/* ---- ring buffers: pinned host memory mapped into the device ---------------------------------
 * One lane per warp slot (SMs x warp slots per SM, ptx-rewriter/layout.h).  Each ring buffer
 * gets the larger of its max_entries (bytes, as in Linux) and an equal share of what is left of the
 * budget (CUBPF_RINGBUF_MB, shared by all ring buffers of a context), spread over its lanes:
 * with 8448 lanes (an H100) a max_entries of a few MiB would give lanes too small to hold what
 * one kernel writes before the drain comes round, and the budget is what the user granted.
 * Lane sizes are multiples of 128 bytes (batches are 16-aligned and never wrap: no power of two
 * needed) and at least RB_LANE_MIN, one batch of 32 records of 48 bytes with room to spare.
 * The producers' part (heads, the device's copy of the tails, drops) is a device allocation of
 * 64 + 3 x 8 x lanes bytes (CUBPF_RB_STATE_BYTES), counted in the context's device bytes. */

#define RB_LANE_MIN 2048u
#define RB_WARPS_DEFAULT 64u /* sm_90's warp slots per SM, when the driver does not say */

static uint64_t rb_lane_size(uint64_t want, uint32_t lanes, uint64_t budget)
{
	uint64_t room = budget > CUBPF_RB_DATA_OFFSET(lanes) ? budget - CUBPF_RB_DATA_OFFSET(lanes) : 0;
	uint64_t lane = (want / lanes) & ~127ull, fit = (room / lanes) & ~127ull;
	lane = lane < fit ? lane : fit;
	return lane < RB_LANE_MIN ? RB_LANE_MIN : lane;
}

/* The producers' part (zeroed already, in the context's one allocation at c->base[i]): its
 * header, the ring's device addresses, copied from hdr (the caller's, kept until its
 * synchronisation). */
static CUresult ringbuf_state(struct live_ctx *c, uint32_t i, uint32_t lanes, uint32_t warps,
			      uint64_t lane, CUdeviceptr ring, struct cubpf_rb_state *hdr)
{
	*hdr = shim_live_rb_state_header(lanes, warps, lane, c->base[i], ring);
	return shim_live_cu.cuMemcpyHtoDAsync_v2(c->base[i], hdr, sizeof(*hdr), c->stream);
}

static int ringbuf_alloc(struct live_ctx *c, uint32_t i, uint32_t sms, uint32_t warps,
			 uint64_t want, uint64_t budget, struct cubpf_rb_state *hdr, char *err,
			 size_t errlen)
{
	const struct live_map *m = &shim_live_session.maps[i];
	uint32_t lanes = sms * warps;
	uint64_t lane = rb_lane_size(want, lanes, budget), bytes = shim_live_rb_bytes(lanes, lane);
	if (bytes > budget) {
		snprintf(err, errlen, "ring buffer %s needs %" PRIu64 " bytes of pinned memory "
			 "(%u lanes of %u bytes), more than the budget left of %" PRIu64
			 " (CUBPF_RINGBUF_MB)", m->def.name, bytes, lanes, RB_LANE_MIN, budget);
		return -1;
	}
	CUdeviceptr ring = 0;
	CUresult r = shim_live_cu.cuMemHostAlloc(&c->host[i], bytes, CU_MEMHOSTALLOC_DEVICEMAP |
					    CU_MEMHOSTALLOC_PORTABLE);
	if (r == CUDA_SUCCESS)
		r = shim_live_cu.cuMemHostGetDevicePointer_v2(&ring, c->host[i], 0);
	if (r == CUDA_SUCCESS)
		r = ringbuf_state(c, i, lanes, warps, lane, ring, hdr);
	if (r != CUDA_SUCCESS) {
		snprintf(err, errlen, "ring buffer %s: %" PRIu64 " bytes of pinned memory and %"
			 PRIu64 " of device memory: %s", m->def.name, bytes,
			 shim_live_rb_state_bytes(lanes), shim_live_cu_error(r));
		return -1;
	}
	shim_live_rb_init(c->host[i], lanes, warps, lane, c->base[i]);
	c->pinned_bytes += bytes;
	c->rb_state_bytes += shim_live_rb_state_bytes(lanes);
	return 0;
}

/* SMs and warp slots per SM of the context's device. */
static void ringbuf_geometry(const struct live_ctx *c, uint32_t *sms, uint32_t *warps)
{
	int n = 0, t = 0;
	if (shim_live_cu.cuDeviceGetAttribute(&n, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
					 c->dev) != CUDA_SUCCESS || n <= 0)
		n = 1;
	if (shim_live_cu.cuDeviceGetAttribute(&t, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
					 c->dev) != CUDA_SUCCESS || t < 32)
		t = 32 * RB_WARPS_DEFAULT;
	*sms = (uint32_t)n, *warps = (uint32_t)t / 32;
}

/* The rings, in pinned memory; their producers' parts are in the context's one allocation
 * (c->base[i], zeroed), their headers copied on c->stream from hdr (synchronised by the
 * caller). */
static int ringbufs_alloc(struct live_ctx *c, uint32_t sms, uint32_t warps,
			  struct cubpf_rb_state *hdr, char *err, size_t errlen)
{
	uint32_t left = 0;
	for (uint32_t i = 0; i < shim_live_session.nmaps; i++)
		left += shim_live_session.maps[i].ringbuf;
	for (uint32_t i = 0; i < shim_live_session.nmaps; i++) {
		if (!shim_live_session.maps[i].ringbuf)
			continue;
		uint64_t budget = shim_live_session.ringbuf_bytes - c->pinned_bytes, share = budget / left--;
		uint64_t want = shim_live_session.maps[i].def.max_entries;
		if (ringbuf_alloc(c, i, sms, warps, want > share ? want : share, budget, &hdr[i], err,
				  errlen) != 0)
			return -1;
	}
	return 0;
}

/* Copies a global's initial value (.data/.rodata) into a map (zeroed already), or a per-thread
 * array's thread capacity into its header (ptx-rewriter/layout.h). */
static CUresult map_init(struct live_ctx *c, uint32_t i)
{
	const struct live_map *m = &shim_live_session.maps[i];
	CUresult r = CUDA_SUCCESS;
	if (m->def.init && m->def.value_size)
		r = shim_live_cu.cuMemcpyHtoDAsync_v2(c->base[i], m->def.init, m->def.value_size,
						 c->stream);
	if (r == CUDA_SUCCESS && m->def.origin == VM_MAP_USER &&
	    m->def.type == CUBPF_MAP_PERTHREAD_ARRAY) /* a static source: outlives the copy */
		r = shim_live_cu.cuMemcpyHtoDAsync_v2(c->base[i], &shim_live_session.perthread_threads,
						 sizeof(shim_live_session.perthread_threads), c->stream);
	return r;
}

static const char *map_kind(const struct vm_map_def *d)
{
	switch (d->origin) {
	case VM_MAP_RODATA: return "rodata";
	case VM_MAP_DATA: return "data";
	case VM_MAP_BSS: return "bss";
	default: break;
	}
	switch (d->type) {
	case CUBPF_MAP_GPU_ARRAY: return "gpu_array";
	case CUBPF_MAP_PERCPU_ARRAY: return "percpu_array";
	case CUBPF_MAP_PERTHREAD_ARRAY: return "perthread_array";
	case CUBPF_MAP_HASH: return "hash";
	default: return "array";
	}
}

/* How a map's size comes about, for the refusal message. */
static void map_shape(const struct vm_map_def *d, char *out, size_t len)
{
	uint64_t stride = ptx_map_value_stride(d);
	if (d->origin == VM_MAP_USER && d->type == CUBPF_MAP_PERCPU_ARRAY)
		snprintf(out, len, "%u entries x %u SM slots x %" PRIu64 " B", d->max_entries,
			 CUBPF_PERCPU_SLOTS, stride);
	else if (d->origin == VM_MAP_USER && d->type == CUBPF_MAP_PERTHREAD_ARRAY)
		snprintf(out, len, "%u entries x %" PRIu64 " threads (CUBPF_PERTHREAD_THREADS) x %"
			 PRIu64 " B", d->max_entries, shim_live_session.perthread_threads, stride);
	else if (d->origin == VM_MAP_USER && d->type == CUBPF_MAP_HASH)
		snprintf(out, len, "%u slots x %" PRIu64 " B", cubpf_hash_capacity(d->max_entries),
			 (uint64_t)CUBPF_HASH_SLOT_BYTES(d->key_size, d->value_size));
	else
		snprintf(out, len, "%u entries x %" PRIu64 " B", d->max_entries, stride);
}

void shim_live_map_describe(const struct vm_map_def *d, char *out, size_t len)
{
	char shape[160];
	map_shape(d, shape, sizeof(shape));
	snprintf(out, len, "%s (%s, %s = %" PRIu64 " bytes)", d->name, map_kind(d), shape,
		 shim_live_map_bytes(d));
}

/* Refuses maps over the cap or over the device's free memory, naming the largest. */
static int check_size(uint64_t total, char *err, size_t errlen)
{
	size_t free_b = 0, total_b = 0;
	bool over_free = shim_live_cu.cuMemGetInfo_v2(&free_b, &total_b) == CUDA_SUCCESS &&
			 total > free_b;
	if (total <= shim_live_session.map_cap_bytes && !over_free)
		return 0;
	uint32_t big = 0;
	for (uint32_t i = 1; i < shim_live_session.nmaps; i++)
		if (shim_live_session.maps[i].bytes > shim_live_session.maps[big].bytes)
			big = i;
	char shape[160];
	map_shape(&shim_live_session.maps[big].def, shape, sizeof(shape));
	if (total > shim_live_session.map_cap_bytes)
		snprintf(err, errlen, "the maps need %" PRIu64 " bytes of device memory, more than "
			 "the cap of %" PRIu64 " (CUBPF_MAP_MAX_MB); the largest is %s (%s, %s = %"
			 PRIu64 " bytes)", total, shim_live_session.map_cap_bytes, shim_live_session.maps[big].def.name,
			 map_kind(&shim_live_session.maps[big].def), shape, shim_live_session.maps[big].bytes);
	else
		snprintf(err, errlen, "the maps need %" PRIu64 " bytes of device memory, the device "
			 "has %zu free; the largest is %s (%s, %s = %" PRIu64 " bytes)", total, free_b,
			 shim_live_session.maps[big].def.name, map_kind(&shim_live_session.maps[big].def), shape,
			 shim_live_session.maps[big].bytes);
	return -1;
}

/* ---- maps shared by host and GPU programs --------------------------------------------------
 * The host programs' copy of the map (vm_runtime) moves into managed memory, which the host and
 * every kernel of the context reach at the same address: a count a host probe makes on a launch
 * is what the kernel's probes read, and the other way round.  Only the first context shares (the
 * storage belongs to it); a later context gets a device copy of its own, as for other maps, and
 * the log says so.  Before the owner's teardown the host side moves back into host memory
 * (unshare_maps), so that host probes never touch freed memory. */
static bool share_map(struct live_ctx *c, uint32_t i)
{
	struct live_map *m = &shim_live_session.maps[i];
	struct vm_runtime *rt = shim_live_host_runtime(m->obj);
	char err[VM_ERRLEN] = "";
	CUdeviceptr d = 0;
	if (m->shared_dev || !rt) {
		if (m->shared_dev)
			shim_log(SHIM_LOG_INFO, "live: map %s: shared with host programs in context %p "
				 "only; context %p gets its own copy", m->def.name,
				 (void *)m->shared_owner, (void *)c->ctx);
		return false;
	}
	CUresult r = shim_live_cu.cuMemAllocManaged
			     ? shim_live_cu.cuMemAllocManaged(&d, m->bytes, CU_MEM_ATTACH_GLOBAL)
			     : CUDA_ERROR_NOT_SUPPORTED;
	if (r == CUDA_SUCCESS &&
	    vm_runtime_share_array(rt, m->index, (void *)(uintptr_t)d, m->bytes, err,
				   sizeof(err)) != 0) {
		shim_live_cu.cuMemFree_v2(d);
		r = CUDA_ERROR_INVALID_VALUE;
	}
	if (r != CUDA_SUCCESS) {
		shim_log(SHIM_LOG_WARN, "live: map %s: not shared between host and GPU programs "
			 "(%s); each side keeps its own copy", m->def.name,
			 err[0] ? err : shim_live_cu_error(r));
		return false;
	}
	m->shared_dev = d;
	m->shared_owner = c->ctx;
	c->base[i] = d;
	shim_log(SHIM_LOG_INFO, "live: map %s: shared by host and GPU programs (%" PRIu64
		 " bytes of managed memory)", m->def.name, m->bytes);
	return true;
}

/* The owner context of shared maps is going: their host side moves back to host memory, with
 * what the kernels left in them. */
static void unshare_maps(struct live_ctx *c)
{
	for (uint32_t i = 0; i < shim_live_session.nmaps; i++) {
		struct live_map *m = &shim_live_session.maps[i];
		if (!m->shared_dev || m->shared_owner != c->ctx)
			continue;
		char err[VM_ERRLEN];
		/* reachable from shim_live_session.maps for the life of the process: host probes may run to
		 * the end */
		void *copy = aligned_alloc(64, (m->bytes + 63) & ~(uint64_t)63);
		struct vm_runtime *rt = shim_live_host_runtime(m->obj);
		if (copy && rt && vm_runtime_share_array(rt, m->index, copy, m->bytes, err,
							 sizeof(err)) == 0)
			m->def.init = NULL; /* (the object's initial value is spent) */
		else
			shim_log(SHIM_LOG_WARN, "live: map %s: could not move back to host memory; "
				 "host probes may see stale values", m->def.name);
		m->shared_dev = 0;
	}
}

bool shim_live_block_table(void)
{
	for (uint32_t i = 0; i < shim_live_session.nprogs; i++)
		if (shim_live_session.progs[i].kind == VM_PROG_BLOCKRETPROBE)
			return true;
	return false;
}

/* Device memory is laid out in one allocation per context, zeroed by one memset: the enable
 * words, the thread block table, every map that has device storage, the ring buffers'
 * producers' parts and the clock kernel's word, each at a multiple of POOL_ALIGN, then the zero
 * scan's flags (one byte per POOL_ALIGN bytes before them, and the scan's sequence word).  One allocation per map cost a cuMemAlloc, a memset and a cuMemFree
 * each, in every context: 24 of each with every bundled tool. */
#define POOL_ALIGN SHIM_LIVE_SCAN_BLOCK /* each map starts a scan block (read-back below) */

/* The scan's flags for `blocks` blocks and its sequence word after them. */
static uint64_t scan_flag_bytes(uint64_t blocks)
{
	return ((blocks + 7) & ~(uint64_t)7) + sizeof(uint64_t);
}

static uint64_t pool_take(uint64_t *off, uint64_t bytes)
{
	uint64_t at = *off;
	*off += (bytes + POOL_ALIGN - 1) & ~(uint64_t)(POOL_ALIGN - 1);
	return at;
}

/* Where each part goes: at[i] for map i (POOL_NONE: no device storage, or a map shared with
 * host programs, which has storage of its own: share_map), then the enable words, the block
 * table, the clock's word and the scan's flags at at[nmaps ... nmaps + 3].  Returns the
 * allocation's size. */
#define POOL_NONE UINT64_MAX

static uint64_t pool_layout(struct live_ctx *c, uint32_t lanes, uint64_t *at)
{
	uint32_t n = shim_live_session.nmaps;
	uint64_t off = 0;
	at[n] = pool_take(&off, CUBPF_ENABLE_WORDS * sizeof(uint32_t));
	/* the thread block table (layout.h), when some program is a blockretprobe: one per
	 * context, whatever the number of modules, in device memory rather than the blocks'
	 * shared memory (which belongs to the application) */
	at[n + 1] = shim_live_block_table() ? pool_take(&off, CUBPF_BLOCK_TABLE_BYTES) : POOL_NONE;
	at[n + 2] = pool_take(&off, sizeof(uint64_t));
	for (uint32_t i = 0; i < n; i++) {
		const struct live_map *m = &shim_live_session.maps[i];
		at[i] = POOL_NONE;
		if (m->ringbuf)
			at[i] = pool_take(&off, shim_live_rb_state_bytes(lanes));
		else if (m->bytes && !(m->shared && share_map(c, i)))
			at[i] = pool_take(&off, m->bytes);
	}
	at[n + 3] = pool_take(&off, scan_flag_bytes(off / SHIM_LIVE_SCAN_BLOCK));
	return off;
}

/* Makes the allocation and hands its parts out. */
static CUresult pool_alloc(struct live_ctx *c, const uint64_t *at, uint64_t bytes)
{
	uint32_t n = shim_live_session.nmaps;
	CUresult r = shim_live_cu.cuMemAlloc_v2(&c->pool, bytes);
	if (r != CUDA_SUCCESS) {
		c->pool = 0;
		return r;
	}
	c->pool_bytes = bytes;
	c->enable = c->pool + at[n];
	c->blocks = at[n + 1] != POOL_NONE ? c->pool + at[n + 1] : 0;
	c->clock_buf = c->pool + at[n + 2];
	c->scan_flags = c->pool + at[n + 3];
	c->scan_blocks = at[n + 3] / SHIM_LIVE_SCAN_BLOCK;
	for (uint32_t i = 0; i < n; i++)
		if (at[i] != POOL_NONE)
			c->base[i] = c->pool + at[i];
	return CUDA_SUCCESS;
}

/* Allocates every map of the current context `c->ctx`.  The caller holds the lock. */
static int ctx_alloc(struct live_ctx *c, char *err, size_t errlen)
{
	uint64_t total = 0;
	uint32_t sms, warps;
	for (uint32_t i = 0; i < shim_live_session.nmaps; i++)
		total += shim_live_session.maps[i].bytes;
	if (check_size(total, err, errlen) != 0)
		return -1;
	ringbuf_geometry(c, &sms, &warps);
	struct cubpf_rb_state *hdr = calloc(shim_live_session.nmaps + 1, sizeof(*hdr));
	uint64_t *at = calloc(shim_live_session.nmaps + 4, sizeof(*at)), bytes = 0;
	CUresult r = hdr && at ? shim_live_cu.cuStreamCreate(&c->stream, CU_STREAM_NON_BLOCKING)
			       : CUDA_ERROR_OUT_OF_MEMORY;
	if (r == CUDA_SUCCESS)
		bytes = pool_layout(c, sms * warps, at);
	if (r == CUDA_SUCCESS)
		r = pool_alloc(c, at, bytes);
	if (r == CUDA_SUCCESS)
		r = shim_live_cu.cuMemsetD8Async(c->pool, 0, bytes, c->stream);
	/* Enable words: every program on in every kernel until sampling says otherwise. */
	if (r == CUDA_SUCCESS)
		r = shim_live_cu.cuMemsetD32Async(c->enable, ~0u, CUBPF_ENABLE_WORDS, c->stream);
	if (r == CUDA_SUCCESS && !(c->enable_set = malloc(CUBPF_ENABLE_WORDS * sizeof(uint32_t))))
		r = CUDA_ERROR_OUT_OF_MEMORY;
	if (r == CUDA_SUCCESS)
		memset(c->enable_set, 0xff, CUBPF_ENABLE_WORDS * sizeof(uint32_t));
	if (r == CUDA_SUCCESS && c->blocks)
		total += CUBPF_BLOCK_TABLE_BYTES;
	for (uint32_t i = 0; r == CUDA_SUCCESS && i < shim_live_session.nmaps; i++)
		if (at[i] != POOL_NONE && !shim_live_session.maps[i].ringbuf)
			r = map_init(c, i);
	free(at);
	if (r != CUDA_SUCCESS) {
		snprintf(err, errlen, "allocating %" PRIu64 " bytes of maps: %s", total,
			 shim_live_cu_error(r));
		free(hdr);
		return -1;
	}
	c->device_bytes = total;
	int rc = ringbufs_alloc(c, sms, warps, hdr, err, errlen);
	r = shim_live_cu.cuStreamSynchronize(c->stream); /* (hdr is read by the copies) */
	free(hdr);
	if (rc == 0 && r != CUDA_SUCCESS) {
		snprintf(err, errlen, "initialising %" PRIu64 " bytes of maps: %s", total,
			 shim_live_cu_error(r));
		rc = -1;
	}
	c->device_bytes += c->rb_state_bytes;
	return rc;
}

/* A DEVICE record, once per device, so that readers can name the device of maps, clocks and
 * launches (at its first context with maps, or its first launch, whichever comes first). */
void shim_live_trace_device(int dev, uint32_t sm)
{
	static _Atomic uint64_t written; /* bit per device ordinal below 64 */
	if (!shim_live_session.trace || dev < 0 || dev >= 64 ||
	    (atomic_fetch_or(&written, 1ull << dev) & (1ull << dev)))
		return;
	struct store_rec_device d = { .ordinal = (uint32_t)dev, .sm = sm };
	CUdevice cd = dev;
	char name[256] = "";
	size_t mem = 0;
	CUuuid uuid;
	if (shim_live_cu.cuDeviceGetName)
		shim_live_cu.cuDeviceGetName(name, sizeof(name) - 1, cd);
	if (shim_live_cu.cuDeviceTotalMem_v2 && shim_live_cu.cuDeviceTotalMem_v2(&mem, cd) == CUDA_SUCCESS)
		d.memory_bytes = mem;
	if (shim_live_cu.cuDeviceGetUuid_v2 && shim_live_cu.cuDeviceGetUuid_v2(&uuid, cd) == CUDA_SUCCESS)
		memcpy(d.uuid, uuid.bytes, sizeof(d.uuid));
	store_trace_device(shim_live_session.trace, &d, name);
}

/* A MAP_MEMORY record: what the log's "maps on device" line says, for readers of the trace
 * (the tools read this record, never the line). */
static void trace_memory(const struct live_ctx *c)
{
	if (!shim_live_session.trace)
		return;
	struct store_rec_map_memory m = {
		.ts_ns = shim_now_ns(), .context = (uint64_t)(uintptr_t)c->ctx,
		.device_bytes = c->device_bytes, .pinned_bytes = c->pinned_bytes,
		.device = (uint32_t)c->dev, .nmaps = shim_live_session.nmaps, .ctx = c->num,
	};
	store_trace_map_memory(shim_live_session.trace, &m, c->rb_state_bytes);
}

struct live_ctx *shim_live_ctx_find(CUcontext ctx)
{
	pthread_mutex_lock(&lock);
	struct live_ctx *c = ctxs;
	while (c && c->ctx != ctx)
		c = c->next;
	pthread_mutex_unlock(&lock);
	return c;
}

struct live_ctx *shim_live_ctx_get(CUcontext ctx, char *err, size_t errlen)
{
	pthread_mutex_lock(&lock);
	struct live_ctx *c = ctxs;
	while (c && c->ctx != ctx)
		c = c->next;
	if (c) {
		pthread_mutex_unlock(&lock);
		return c;
	}
	c = calloc(1, sizeof(*c));
	if (c) {
		c->base = calloc(shim_live_session.nmaps + 1, sizeof(*c->base));
		c->host = calloc(shim_live_session.nmaps + 1, sizeof(*c->host));
		c->drops_seen = calloc(shim_live_session.nmaps + 1, sizeof(*c->drops_seen));
		c->rb_moved = calloc(shim_live_session.nmaps + 1, sizeof(*c->rb_moved));
		c->rb_synced = calloc(shim_live_session.nmaps + 1, sizeof(*c->rb_synced));
		c->snap = calloc(shim_live_session.nmaps + 1, sizeof(*c->snap));
	}
	if (!c || !c->base || !c->host || !c->drops_seen || !c->rb_moved || !c->rb_synced ||
	    !c->snap) {
		snprintf(err, errlen, "out of memory");
		if (c)
			ctx_free(c);
		pthread_mutex_unlock(&lock);
		return NULL;
	}
	c->ctx = ctx;
	if (shim_live_cu.cuCtxGetDevice(&c->dev) != CUDA_SUCCESS || ctx_alloc(c, err, errlen) != 0) {
		if (!*err)
			snprintf(err, errlen, "no device for the current context");
		unshare_maps(c); /* host probes keep their maps when this storage goes */
		ctx_free(c);
		pthread_mutex_unlock(&lock);
		return NULL;
	}
	c->sm = shim_live_ctx_sm(ctx);
	/* before the context joins the list: the snapshot thread's reads use the zero scan */
	shim_live_own_kernels(c);
	static uint32_t nctx;
	c->num = ++nctx;
	shim_live_trace_device(c->dev, c->sm);
	trace_memory(c);
	c->next = ctxs;
	__atomic_store_n(&ctxs, c, __ATOMIC_RELEASE); /* the drain threads read it without the lock */
	pthread_mutex_unlock(&lock);
	char rb[96] = ""; /* for people: the tools read the MAP_MEMORY record */
	if (c->rb_state_bytes)
		snprintf(rb, sizeof(rb), "; ring buffer bookkeeping %" PRIu64 " of the device bytes",
			 c->rb_state_bytes);
	shim_log(SHIM_LOG_INFO, "live: maps on device %d (context %p): %" PRIu64 " device bytes, "
		 "%" PRIu64 " pinned bytes, %u maps%s", (int)c->dev, (void *)ctx, c->device_bytes,
		 c->pinned_bytes, shim_live_session.nmaps, rb);
	shim_live_exit_arm(); /* the driver is initialised by now: see live_exit */
	shim_live_clock_calibrate(c); /* the context is current: this is the application's thread */
	shim_live_maps_start_thread();
	if (c->pinned_bytes)
		shim_live_ringbuf_start();
	return c;
}

/* Stores *value (a field of c: it outlives the copy) in the module's global `name` when the
 * module declares it; CUDA_ERROR_NOT_FOUND when it does not, CUDA_ERROR_INVALID_VALUE when it
 * does but *value is 0 (nothing to point it at). */
static CUresult fill_one(struct live_ctx *c, CUmodule mod, CUlibrary lib, const char *name,
			 const CUdeviceptr *value)
{
	CUdeviceptr sym = 0;
	size_t size = 0;
	CUresult r = mod ? shim_live_cu.cuModuleGetGlobal_v2(&sym, &size, mod, name)
			 : shim_live_cu.cuLibraryGetGlobal(&sym, &size, lib, name);
	if (r != CUDA_SUCCESS || size != sizeof(*value))
		return r == CUDA_SUCCESS ? CUDA_ERROR_NOT_FOUND : r;
	if (!*value)
		return CUDA_ERROR_INVALID_VALUE;
	return shim_live_cu.cuMemcpyHtoDAsync_v2(sym, value, sizeof(*value), c->stream);
}

int shim_live_fill(struct live_ctx *c, CUmodule mod, CUlibrary lib, char *err, size_t errlen)
{
	CUresult r = CUDA_SUCCESS;
	unsigned filled = 0;
	for (uint32_t i = 0; i < shim_live_session.nmaps; i++) {
		char name[32];
		CUdeviceptr sym = 0;
		size_t size = 0;
		snprintf(name, sizeof(name), PTX_MAP_SYMBOL_FMT, i);
		r = mod ? shim_live_cu.cuModuleGetGlobal_v2(&sym, &size, mod, name)
			: shim_live_cu.cuLibraryGetGlobal(&sym, &size, lib, name);
		if (r == CUDA_ERROR_NOT_FOUND) /* this module does not use map i */
			continue;
		if (r != CUDA_SUCCESS || size != sizeof(CUdeviceptr) || !c->base[i]) {
			snprintf(err, errlen, "%s: %s", name,
				 r != CUDA_SUCCESS ? shim_live_cu_error(r)
				 : size != sizeof(CUdeviceptr) ? "not an 8-byte global"
							       : "the map has no device storage");
			return -1;
		}
		/* The source is c->base[i], which lives as long as the context's record. */
		r = shim_live_cu.cuMemcpyHtoDAsync_v2(sym, &c->base[i], sizeof(c->base[i]), c->stream);
		if (r != CUDA_SUCCESS)
			break;
		filled++;
	}
	if (r == CUDA_SUCCESS || r == CUDA_ERROR_NOT_FOUND)
		r = fill_one(c, mod, lib, CUBPF_ENABLE_SYMBOL, &c->enable);
	if ((r == CUDA_SUCCESS || r == CUDA_ERROR_NOT_FOUND) &&
	    (r = fill_one(c, mod, lib, CUBPF_BLOCKS_SYMBOL, &c->blocks)) == CUDA_ERROR_INVALID_VALUE) {
		snprintf(err, errlen, CUBPF_BLOCKS_SYMBOL ": the context has no block table");
		return -1;
	}
	if (r == CUDA_SUCCESS || r == CUDA_ERROR_NOT_FOUND)
		r = shim_live_cu.cuStreamSynchronize(c->stream);
	if (r != CUDA_SUCCESS) {
		snprintf(err, errlen, "storing map pointers: %s", shim_live_cu_error(r));
		return -1;
	}
	shim_log(SHIM_LOG_DEBUG, "live: %u map pointers stored in %s %p (context %p)", filled,
		 mod ? "module" : "library", mod ? (void *)mod : (void *)lib, (void *)c->ctx);
	return 0;
}

/* ---- reading back ------------------------------------------------------------------------ */

/* The device's drop counts of ring buffer i, to the ring's copy (ptx-rewriter/layout.h), on cubpf's
 * stream (context current). */
static CUresult rb_drops_copy(struct live_ctx *c, uint32_t i)
{
	uint32_t lanes = ((const struct cubpf_rb_header *)c->host[i])->lanes;
	return shim_live_cu.cuMemcpyDtoHAsync_v2(shim_live_rb_drops_copy(c->host[i]),
					    c->base[i] + CUBPF_RB_STATE_DROPS(lanes),
					    (size_t)lanes * sizeof(uint64_t), c->stream);
}

/* The ring's tails, to the device's copy that producers check (context current). */
static CUresult rb_tails_copy(struct live_ctx *c, uint32_t i)
{
	uint32_t lanes = ((const struct cubpf_rb_header *)c->host[i])->lanes;
	return shim_live_cu.cuMemcpyHtoDAsync_v2(c->base[i] + CUBPF_RB_STATE_TAILS(lanes),
					    shim_live_rb_tails(c->host[i]),
					    (size_t)lanes * sizeof(uint64_t), c->stream);
}

/* Blocks whose end ran no blockretprobe because the block table was full (layout.h): said
 * once per new count, so that a report missing blocks says why. */
static void block_table_note(struct live_ctx *c, uint64_t untracked)
{
	if (untracked <= c->blocks_untracked)
		return;
	c->blocks_untracked = untracked;
	shim_log(SHIM_LOG_WARN, "live: context %p: %" PRIu64 " thread blocks found the block table "
		 "full (%u slots): their blockretprobes did not run", (void *)c->ctx, untracked,
		 CUBPF_BLOCK_SLOTS);
}

/* ---- reading maps back ------------------------------------------------------------------
 * A map is read into `staging` (the largest map's bytes, reused: fresh pages cost the kernel
 * zeroing them, most of a teardown with every bundled tool's 349 MB of maps) and reduced to its
 * non-zero entries at once.  Maps are mostly zeros, and reading all their bytes back cost a
 * context its maps' size in copies: cubpf's zero scan (clock.c's cubpf_nonzero, one launch over
 * the context's whole allocation) flags the blocks that hold anything, and only those are
 * copied, into a staging buffer that is kept zeroed elsewhere.  The scan is checked once per
 * process against whole copies (the first read at a teardown or at exit that finds data, when
 * the application's work is done and the bytes stand still); until then, and after a
 * disagreement (said once), or with CUBPF_MAP_SCAN=0, maps are read whole.  `lock` guards all
 * of it. */
static uint8_t *staging;
static uint64_t staging_bytes, staging_dirty; /* dirty: bytes a whole read left there */
static uint8_t *flags_host;
static uint64_t flags_cap;
static int scan_state = 2;   /* 2 not decided, 0 not checked yet, 1 checked, -1 off */
static bool scan_checking;   /* this read checks the scan */
static bool scan_saw_data;   /* it copied non-zero blocks */
static bool scan_mismatch;   /* and a whole copy disagreed */

static int map_entries(uint32_t i, const uint8_t *raw, const uint8_t *nz, struct live_snap *e);

static int staging_reserve(uint64_t n)
{
	if (n <= staging_bytes)
		return 0;
	free(staging);
	staging_bytes = staging_dirty = 0;
	if (!(staging = calloc(1, n)))
		return -1;
	staging_bytes = n;
	return 0;
}

/* Runs the zero scan over c's allocation: the host's flags (a byte per block), or NULL when
 * maps are read whole (no scan, or it did not run). */
static const uint8_t *scan_pool(struct live_ctx *c, bool sync)
{
	if (scan_state == 2) {
		const char *e = getenv("CUBPF_MAP_SCAN");
		scan_state = e && !strcmp(e, "0") ? -1 : 0;
	}
	uint64_t n = c->scan_blocks, bytes = scan_flag_bytes(n), seq = ++c->scan_seq, got = 0;
	if (scan_state < 0 || (scan_state == 0 && !sync) || !c->scan_flags || !n || n > INT32_MAX ||
	    shim_live_own_kernels(c) != 0)
		return NULL;
	if (bytes > flags_cap) {
		free(flags_host);
		flags_cap = 0;
		if (!(flags_host = malloc(bytes)))
			return NULL;
		flags_cap = bytes;
	}
	void *args[] = { &c->pool, &c->scan_flags, &n, &seq };
	CUresult r = shim_live_own_launch(c->scan_fn, (unsigned)n, SHIM_LIVE_SCAN_BLOCK / 16,
					  c->stream, args);
	if (r == CUDA_SUCCESS)
		r = shim_live_cu.cuMemcpyDtoHAsync_v2(flags_host, c->scan_flags, bytes, c->stream);
	if (r == CUDA_SUCCESS)
		r = shim_live_cu.cuStreamSynchronize(c->stream);
	if (r == CUDA_SUCCESS)
		memcpy(&got, flags_host + bytes - sizeof(got), sizeof(got));
	if (got != seq) { /* (a failed copy stays in the stream's error, which the reads see) */
		shim_log(SHIM_LOG_DEBUG, "live: the zero scan of context %p did not run (%s): its "
			 "maps are read whole", (void *)c->ctx, shim_live_cu_error(r));
		return NULL;
	}
	scan_checking = scan_state == 0;
	return flags_host;
}

/* The runs of flagged blocks of a map of `n` bytes (nz: its blocks' flags): copied from the
 * device into staging at the same offsets (copy), or zeroed there again (!copy).  *runs: how
 * many. */
static CUresult map_runs(struct live_ctx *c, uint32_t i, const uint8_t *nz, uint64_t n, bool copy,
			 uint64_t *runs)
{
	uint64_t nb = (n + SHIM_LIVE_SCAN_BLOCK - 1) / SHIM_LIVE_SCAN_BLOCK;
	CUresult r = CUDA_SUCCESS;
	for (uint64_t j = 0; r == CUDA_SUCCESS && j < nb;) {
		uint64_t k = j;
		while (k < nb && nz[k])
			k++;
		if (k == j) {
			j++;
			continue;
		}
		uint64_t lo = j * SHIM_LIVE_SCAN_BLOCK, hi = k * SHIM_LIVE_SCAN_BLOCK;
		hi = hi < n ? hi : n;
		if (copy)
			r = shim_live_cu.cuMemcpyDtoHAsync_v2(staging + lo, c->base[i] + lo, hi - lo,
							 c->stream);
		else
			memset(staging + lo, 0, hi - lo);
		scan_saw_data |= copy;
		++*runs;
		j = k;
	}
	return r;
}

/* The check of the scan: the whole map, compared with what the flagged blocks gave.  Returns
 * the whole copy (malloc'ed) when they differ, else NULL. */
static uint8_t *scan_check(struct live_ctx *c, uint32_t i, uint64_t n, CUresult *r)
{
	uint8_t *whole = malloc(n);
	if (!whole) {
		*r = CUDA_ERROR_OUT_OF_MEMORY;
		return NULL;
	}
	*r = shim_live_cu.cuMemcpyDtoHAsync_v2(whole, c->base[i], n, c->stream);
	if (*r == CUDA_SUCCESS)
		*r = shim_live_cu.cuStreamSynchronize(c->stream);
	if (*r != CUDA_SUCCESS || !memcmp(whole, staging, n)) {
		free(whole);
		return NULL;
	}
	if (!scan_mismatch)
		shim_log(SHIM_LOG_WARN, "live: the device's zero scan of the maps disagreed with a "
			 "whole copy of map %s; maps are read back whole from now on",
			 shim_live_session.maps[i].def.name);
	scan_mismatch = true;
	return whole;
}

/* Map i of context c (current) read back and reduced to its non-zero entries (*out); flags:
 * the scan's (NULL: read whole). */
static CUresult read_map(struct live_ctx *c, uint32_t i, const uint8_t *flags,
			 struct live_snap **out)
{
	uint64_t n = shim_live_session.maps[i].bytes;
	const uint8_t *nz = flags ? flags + (c->base[i] - c->pool) / SHIM_LIVE_SCAN_BLOCK : NULL;
	uint8_t *whole = NULL;
	if (staging_reserve(n) != 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (nz && staging_dirty) {
		memset(staging, 0, staging_dirty);
		staging_dirty = 0;
	}
	uint64_t runs = 0;
	CUresult r = nz ? map_runs(c, i, nz, n, true, &runs)
			: shim_live_cu.cuMemcpyDtoHAsync_v2(staging, c->base[i], n, c->stream);
	if (r == CUDA_SUCCESS && (!nz || runs)) /* (nothing flagged: nothing to wait for) */
		r = shim_live_cu.cuStreamSynchronize(c->stream);
	if (r == CUDA_SUCCESS && nz && scan_checking)
		whole = scan_check(c, i, n, &r);
	struct live_snap *e = r == CUDA_SUCCESS ? calloc(1, sizeof(*e)) : NULL;
	if (r == CUDA_SUCCESS && (!e || map_entries(i, whole ? whole : staging, whole ? NULL : nz,
						    e) != 0))
		r = CUDA_ERROR_OUT_OF_MEMORY;
	if (nz && runs)
		map_runs(c, i, nz, n, false, &runs); /* staging is zero again */
	else
		staging_dirty = n > staging_dirty ? n : staging_dirty;
	free(whole);
	if (r != CUDA_SUCCESS) {
		snap_free(e);
		return r;
	}
	*out = e;
	return CUDA_SUCCESS;
}

/* After a read that checked the scan: it is trusted once it agreed on data, dropped when not. */
static void scan_settle(void)
{
	if (!scan_checking)
		return;
	if (scan_mismatch)
		scan_state = -1;
	else if (scan_saw_data)
		scan_state = 1;
	scan_checking = scan_saw_data = false;
}

static void snapshot(struct live_ctx *c, bool sync)
{
	CUcontext popped;
	CUresult pr = shim_live_cu.cuCtxPushCurrent_v2(c->ctx);
	if (pr != CUDA_SUCCESS) { /* the context is gone: the last snapshot stands */
		shim_log(c->snap_ns ? SHIM_LOG_DEBUG : SHIM_LOG_WARN, "live: reading the maps of "
			 "context %p: %s%s", (void *)c->ctx, shim_live_cu_error(pr),
			 c->snap_ns ? "; the copy read earlier stands" : "; no copy of them was read");
		return;
	}
	CUresult r = sync ? shim_live_cu.cuCtxSynchronize() : CUDA_SUCCESS;
	struct live_snap **tmp = calloc(shim_live_session.nmaps + 1, sizeof(*tmp));
	if (!tmp)
		r = CUDA_ERROR_OUT_OF_MEMORY;
	uint64_t untracked = 0; /* blocks the block table had no slot for */
	/* a ring buffer is drained, not copied: only its drop counts (synchronised below) */
	for (uint32_t i = 0; r == CUDA_SUCCESS && i < shim_live_session.nmaps; i++)
		if (c->host[i])
			r = rb_drops_copy(c, i);
	if (r == CUDA_SUCCESS && c->blocks)
		r = shim_live_cu.cuMemcpyDtoHAsync_v2(&untracked,
						 c->blocks + CUBPF_BLOCK_UNTRACKED_OFFSET,
						 sizeof(untracked), c->stream);
	const uint8_t *flags = r == CUDA_SUCCESS ? scan_pool(c, sync) : NULL;
	for (uint32_t i = 0; r == CUDA_SUCCESS && i < shim_live_session.nmaps; i++)
		if (!c->host[i] && in_pool(c, c->base[i]) && shim_live_session.maps[i].bytes)
			r = read_map(c, i, flags, &tmp[i]);
		else if (!c->host[i] && c->base[i] && shim_live_session.maps[i].bytes)
			r = read_map(c, i, NULL, &tmp[i]); /* shared with host programs: not pooled */
	scan_settle();
	if (r == CUDA_SUCCESS)
		r = shim_live_cu.cuStreamSynchronize(c->stream);
	shim_live_cu.cuCtxPopCurrent_v2(&popped);
	if (r == CUDA_SUCCESS)
		block_table_note(c, untracked);
	for (uint32_t i = 0; tmp && i < shim_live_session.nmaps; i++) {
		if (r == CUDA_SUCCESS) {
			snap_free(c->snap[i]);
			c->snap[i] = tmp[i];
		} else {
			snap_free(tmp[i]);
		}
	}
	free(tmp);
	if (r == CUDA_SUCCESS)
		c->snap_ns = shim_now_ns();
	else /* a context already gone at exit is expected once its teardown was seen */
		shim_log(c->snap_ns ? SHIM_LOG_DEBUG : SHIM_LOG_WARN, "live: reading the maps of "
			 "context %p: %s%s", (void *)c->ctx, shim_live_cu_error(r),
			 c->snap_ns ? "; the copy read at its teardown stands" : "");
}

void shim_live_snapshot_all(bool sync)
{
	pthread_mutex_lock(&lock);
	for (struct live_ctx *c = ctxs; c; c = c->next)
		if (!retiring(c))
			snapshot(c, sync);
	pthread_mutex_unlock(&lock);
}

static uint64_t rb_drain_ctx(struct live_ctx *c, uint32_t k, uint32_t step, uint8_t *scratch,
			     struct store_trace_local *local);

/* The records a context's ring buffers still hold, taken before the context (and its pinned
 * lanes) go: the drain threads leave a retiring context alone, so this is the lanes' only
 * consumer.  The caller holds `lock` (the scratch buffer is its). */
static void rb_drain_last(struct live_ctx *c)
{
	static uint8_t *scratch;
	bool rings = false;
	for (uint32_t i = 0; i < shim_live_session.nmaps; i++)
		rings |= c->host[i] != NULL;
	if (!rings || (!scratch && !(scratch = malloc(shim_live_session.ringbuf_bytes ? shim_live_session.ringbuf_bytes : 1))))
		return;
	rb_drain_ctx(c, 0, 1, scratch, NULL);
}

/* The primary context of dev if it is active (NULL: inactive, or the driver cannot say).  A
 * retain and a release of cubpf's own: the application holds a reference, so the count comes
 * back to where it was and nothing is created or destroyed. */
static CUcontext primary_of(CUdevice dev)
{
	unsigned flags = 0;
	int active = 0;
	CUcontext p = NULL;
	if (!shim_live_cu.cuDevicePrimaryCtxGetState || !shim_live_cu.cuDevicePrimaryCtxRetain ||
	    !shim_live_cu.cuDevicePrimaryCtxRelease_v2 ||
	    shim_live_cu.cuDevicePrimaryCtxGetState(dev, &flags, &active) != CUDA_SUCCESS || !active ||
	    shim_live_cu.cuDevicePrimaryCtxRetain(&p, dev) != CUDA_SUCCESS)
		return NULL;
	shim_live_cu.cuDevicePrimaryCtxRelease_v2(dev);
	return p;
}

/* The context_ending hook (shim/wrap_ctx.c), before the real call: the maps of the context
 * about to go are read back, waiting for its work (the application is done with it), and it is
 * marked so that cubpf's threads leave it alone while the driver tears it down.  A primary
 * release or reset concerns the device's primary context only (without the driver's answer to
 * which one that is, every context of the device, as before). */
void shim_live_teardown(CUcontext ctx, CUdevice dev, int primary)
{
	shim_live_spans_teardown(ctx, dev, primary);
	if (!shim_live_session.nprogs || !shim_live_cu.cuCtxPushCurrent_v2 || shim_live_session.forked)
		return;
	CUcontext target = primary ? primary_of(dev) : ctx;
	bool any_of_device = primary && !shim_live_cu.cuDevicePrimaryCtxGetState;
	uint32_t me = shim_tid();
	bool marked = false;
	pthread_mutex_lock(&lock);
	for (struct live_ctx *c = ctxs; c; c = c->next) {
		if (retiring(c) || !(any_of_device ? c->dev == dev : target && c->ctx == target))
			continue;
		snapshot(c, true);
		unshare_maps(c);
		__atomic_store_n(&c->retiring, me, __ATOMIC_RELEASE);
		marked = true;
		shim_log(SHIM_LOG_DEBUG, "live: maps of context %p read before its teardown",
			 (void *)c->ctx);
	}
	if (marked) { /* the drain passes that may have seen it unmarked are over */
		pthread_rwlock_wrlock(&ctxs_rw);
		pthread_rwlock_unlock(&ctxs_rw);
		for (struct live_ctx *c = ctxs; c; c = c->next)
			if (retiring(c) == me)
				rb_drain_last(c);
	}
	pthread_mutex_unlock(&lock);
}

static void trace_map(const struct live_ctx *c, uint32_t i);
static void report_map(bool print, const struct live_ctx *c, uint32_t i);

/* A context that is gone: its last maps go into the trace and the report now (the exit report
 * no longer sees it), then its record is freed.  No driver call: its memory, stream and modules
 * went with it.  The caller holds `lock` and has unlinked c under ctxs_rw. */
static void ctx_forget(struct live_ctx *c)
{
	bool print = shim_live_session.dump_maps || shim_log_enabled(SHIM_LOG_DEBUG);
	for (uint32_t i = 0; c->snap_ns && i < shim_live_session.nmaps; i++)
		if (c->snap[i]) {
			if (shim_live_session.trace)
				trace_map(c, i);
			report_map(print, c, i);
		}
	gone_device_bytes += c->device_bytes;
	gone_pinned_bytes += c->pinned_bytes;
	gone_contexts++;
	/* ctx_free without the driver's part: the driver freed those with the context */
	free(c->base);
	free(c->host);
	c->base = NULL;
	c->host = NULL;
	c->pool = 0;
	ctx_free(c);
}

/* Whether the context a successful teardown call concerned is gone: a destroy or a reset always,
 * a primary release when it was the last reference. */
static bool gone(CUdevice dev, int primary, CUresult r)
{
	unsigned flags = 0;
	int active = 1;
	if (r != CUDA_SUCCESS)
		return false;
	if (primary != SHIM_PRIMARY_RELEASE)
		return true;
	return shim_live_cu.cuDevicePrimaryCtxGetState &&
	       shim_live_cu.cuDevicePrimaryCtxGetState(dev, &flags, &active) == CUDA_SUCCESS && !active;
}

/* The context_ended hook, after the real call: the contexts this thread marked are forgotten when gone, and
 * taken up again otherwise.  Then the module substitutes forget them too. */
void shim_live_torn_down(CUcontext ctx, CUdevice dev, int primary, CUresult r)
{
	if (!shim_live_session.nprogs || !shim_live_cu.cuCtxPushCurrent_v2 || shim_live_session.forked)
		return;
	uint32_t me = shim_tid();
	bool is_gone = gone(dev, primary, r);
	CUcontext forgotten[16];
	unsigned nforgotten = 0;
	pthread_mutex_lock(&lock);
	for (struct live_ctx **p = &ctxs; *p;) {
		struct live_ctx *c = *p;
		if (retiring(c) != me) {
			p = &c->next;
			continue;
		}
		if (!is_gone) {
			__atomic_store_n(&c->retiring, 0, __ATOMIC_RELEASE);
			p = &c->next;
			continue;
		}
		pthread_rwlock_wrlock(&ctxs_rw);
		__atomic_store_n(p, c->next, __ATOMIC_RELEASE);
		pthread_rwlock_unlock(&ctxs_rw);
		if (nforgotten < sizeof(forgotten) / sizeof(forgotten[0]))
			forgotten[nforgotten++] = c->ctx;
		shim_log(SHIM_LOG_DEBUG, "live: context %p is gone: its maps are forgotten",
			 (void *)c->ctx);
		ctx_forget(c);
	}
	pthread_mutex_unlock(&lock);
	if (is_gone && !primary)
		shim_live_module_ctx_gone(ctx);
	for (unsigned i = 0; i < nforgotten; i++)
		if (!(!primary && forgotten[i] == ctx))
			shim_live_module_ctx_gone(forgotten[i]);
}

void shim_live_maps_memory(uint64_t *device_bytes, uint64_t *pinned_bytes, uint32_t *contexts)
{
	pthread_mutex_lock(&lock);
	*device_bytes += gone_device_bytes;
	*pinned_bytes += gone_pinned_bytes;
	*contexts += gone_contexts;
	for (struct live_ctx *c = ctxs; c; c = c->next) {
		*device_bytes += c->device_bytes;
		*pinned_bytes += c->pinned_bytes;
		++*contexts;
	}
	pthread_mutex_unlock(&lock);
}

/* ---- the snapshot thread ---------------------------------------------------------------------
 * With a trace, the maps (read without waiting for the application's kernels: a live view) and
 * a fresh clock calibration go into it every interval, so that `cubpf run` can show them while
 * the application runs and a killed process leaves its last state behind. */

#define CLOCK_EVERY_MS 5000

static pthread_t thread;
static atomic_int thread_state; /* 0 none, 1 running, 2 stopping */

static void nap_ms(uint64_t ms)
{
	for (uint64_t t = 0; t < ms && atomic_load(&thread_state) == 1; t += 10)
		nanosleep(&(struct timespec){ 0, 10 * 1000 * 1000 }, NULL);
}

static void refresh_clocks(void)
{
	for (struct live_ctx *c = ctxs; c; c = c->next) {
		CUcontext popped;
		if (retiring(c) || shim_live_cu.cuCtxPushCurrent_v2(c->ctx) != CUDA_SUCCESS)
			continue;
		shim_live_clock_calibrate(c);
		shim_live_cu.cuCtxPopCurrent_v2(&popped);
	}
}

static void *snapshot_main(void *arg)
{
	(void)arg;
	uint64_t since_clock = 0;
	shim_live_thread_relax();
	while (atomic_load(&thread_state) == 1) {
		nap_ms(shim_live_session.interval_ms);
		if (atomic_load(&thread_state) != 1)
			break;
		/* without a trace the maps are read back only while someone scrapes them */
		bool publish = shim_live_metrics_wanted();
		if (!shim_live_session.trace && !publish)
			continue;
		pthread_mutex_lock(&lock);
		for (struct live_ctx *c = ctxs; c; c = c->next)
			if (!retiring(c))
				snapshot(c, false);
		since_clock += shim_live_session.interval_ms;
		if (since_clock >= CLOCK_EVERY_MS) {
			refresh_clocks();
			since_clock = 0;
		}
		if (publish)
			shim_live_maps_publish();
		pthread_mutex_unlock(&lock);
		shim_live_maps_trace();
	}
	return NULL;
}

void shim_live_maps_start_thread(void)
{
	int expect = 0;
	if ((!shim_live_session.trace && !shim_live_metrics_on()) ||
	    !atomic_compare_exchange_strong(&thread_state, &expect, 1))
		return;
	/* a small stack, the application's signals left to the application's threads */
	if (shim_thread_start(&thread, snapshot_main, NULL) != 0)
		atomic_store(&thread_state, 0);
}

bool shim_live_maps_thread_running(void)
{
	return atomic_load(&thread_state) == 1;
}

bool shim_live_maps_have_contexts(void)
{
	return __atomic_load_n(&ctxs, __ATOMIC_ACQUIRE) != NULL;
}

void shim_live_maps_fork_child(void)
{
	pthread_rwlockattr_t a;
	atomic_store(&thread_state, 0);
	pthread_mutex_init(&lock, NULL);
	pthread_rwlockattr_init(&a);
	pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&ctxs_rw, &a);
	pthread_rwlockattr_destroy(&a);
}

void shim_live_maps_stop_thread(void)
{
	int expect = 1;
	if (atomic_compare_exchange_strong(&thread_state, &expect, 2))
		pthread_join(thread, NULL);
}

/* ---- the ring buffer drain ------------------------------------------------------------------
 * Drain threads poll every lane of every ring buffer and append each lane's run of committed
 * records to the trace at once (shim_live_rb_drain_runs, shim_live_rb_to_trace: PROBE records, one
 * timestamp per run); without a trace records are only counted.  Thread 0 always runs, about
 * every millisecond while idle; when records keep coming (at least RB_HELPER_RATE a second over
 * a window of RB_WINDOW_NS), it starts helpers, one per RB_LANES_PER_THREAD lanes, at most
 * CUBPF_RINGBUF_THREADS (default 4) threads in all, and they stay until the end: thread k then drains lanes k, k + n, k + 2n... of every map, so
 * that no lane has two consumers.  The GPU never waits for them: a full lane drops and counts
 * (ptx-rewriter/layout.h); thread 0 writes DROP records where the drops grew.
 *
 * A context's ring buffers are set before it joins the list, and a context leaves it (torn
 * down) only under ctxs_rw, which each pass holds for reading: the drain threads walk the list
 * without `lock` and do not serialise on it. */

#define RB_MAX_THREADS 16
#define RB_LANES_PER_THREAD 33
#define RB_WINDOW_NS 10000000ull      /* 10 ms */
#define RB_HELPER_RATE 1000000ull     /* records a second: 56 MB/s of kernelretsnoop records */
#define RB_DROPS_EVERY_NS 100000000ull /* the device's drop counts read at least this often */

static pthread_t rb_threads[RB_MAX_THREADS];
static uint32_t rb_nthreads;   /* threads started (thread 0 changes it, between its passes) */
static atomic_uint rb_step;    /* lanes are shared modulo this many threads */
static atomic_int rb_state;    /* 0 none, 1 running, 2 stopping */
static uint8_t *rb_scratch[RB_MAX_THREADS];

/* A context is complete when it is published at the head (the caller holds ctxs_rw). */
static struct live_ctx *ctxs_head(void)
{
	return __atomic_load_n(&ctxs, __ATOMIC_ACQUIRE);
}

/* Drain thread k's lanes of context c's ring buffers.  Thread 0 (or the caller at finish or
 * teardown, k = 0 and step = 1) also writes DROP records where drops grew.  Returns the number
 * of records taken. */
static uint64_t rb_drain_ctx(struct live_ctx *c, uint32_t k, uint32_t step, uint8_t *scratch,
			     struct store_trace_local *local)
{
	uint64_t taken = 0;
	for (uint32_t i = 0; i < shim_live_session.nmaps; i++) {
		if (!c->host[i])
			continue;
		struct live_map *m = &shim_live_session.maps[i];
		struct live_rb_trace sink = {
			shim_live_session.trace, { .prog = m->obj, .map = m->index,
				      .device = (uint32_t)c->dev }, local };
		struct live_rb_taken t = { 0 };
		uint64_t n = shim_live_rb_drain_runs(c->host[i], k, step, scratch, shim_live_rb_to_trace,
						&sink, &t);
		atomic_fetch_add_explicit(&m->records, n, memory_order_relaxed);
		if (t.bytes) /* tails moved: rb_sync_all copies them to the device */
			atomic_fetch_add_explicit(&c->rb_moved[i], 1, memory_order_release);
		taken += n;
		if (t.damaged)
			shim_log(SHIM_LOG_DEBUG, "live: ring buffer %s: a damaged record "
				 "header stopped a lane", m->def.name);
		if (k != 0)
			continue;
		uint64_t drops = shim_live_rb_drops(c->host[i]);
		if (drops > c->drops_seen[i] && shim_live_session.trace) {
			struct store_rec_drop d = {
				.ts_ns = shim_now_ns(), .source = STORE_DROP_RINGBUF,
				.prog = m->obj, .map = m->index,
				.records = drops - c->drops_seen[i] };
			store_trace_drop(shim_live_session.trace, &d);
		}
		c->drops_seen[i] = drops;
	}
	return taken;
}

/* One pass of drain thread k over every context but those being torn down. */
static uint64_t rb_drain_pass(uint32_t k, uint32_t step, uint8_t *scratch,
			      struct store_trace_local *local)
{
	uint64_t taken = 0;
	pthread_rwlock_rdlock(&ctxs_rw);
	for (struct live_ctx *c = ctxs_head(); c; c = __atomic_load_n(&c->next, __ATOMIC_ACQUIRE))
		if (!retiring(c))
			taken += rb_drain_ctx(c, k, step, scratch, local);
	pthread_rwlock_unlock(&ctxs_rw);
	return taken;
}

static uint64_t rb_monotonic_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Whether context c's ring buffers need their copies: tails moved since the last ones, or the
 * drop counts are due. */
static bool rb_sync_due(const struct live_ctx *c, uint64_t now)
{
	bool rings = false;
	for (uint32_t i = 0; i < shim_live_session.nmaps; i++) {
		if (!c->host[i])
			continue;
		rings = true;
		if (atomic_load_explicit(&c->rb_moved[i], memory_order_acquire) != c->rb_synced[i])
			return true;
	}
	return rings && now - c->rb_sync_ns >= RB_DROPS_EVERY_NS;
}

/* Every drain thread, after each of its passes: for every context whose lanes were freed, the
 * ring's tails go to the device's copy (producers see the room; only rings whose tails moved)
 * and the device's drops come back (every RB_DROPS_EVERY_NS at least), on cubpf's stream.  Only when that stream is idle (the last copies are done: they never
 * queue up) and only when the lock is free at once (one thread copies at a time, the drain
 * never waits for a snapshot, and none runs while teardown reads a context's maps; once the
 * context is gone, pushing it fails and its copies stop).  Any thread rather than thread 0
 * alone: with a trace, a pass can take milliseconds, and lanes freed meanwhile would stay full
 * on the device. */
static void rb_sync_all(void)
{
	uint64_t now = rb_monotonic_ns();
	if (pthread_mutex_trylock(&lock) != 0)
		return;
	for (struct live_ctx *c = ctxs; c; c = c->next) {
		CUcontext popped;
		if (retiring(c) || !rb_sync_due(c, now) ||
		    shim_live_cu.cuCtxPushCurrent_v2(c->ctx) != CUDA_SUCCESS)
			continue;
		CUresult r = shim_live_cu.cuStreamQuery(c->stream);
		bool tails = false;
		for (uint32_t i = 0; r == CUDA_SUCCESS && i < shim_live_session.nmaps; i++) {
			if (!c->host[i])
				continue;
			uint64_t moved = atomic_load_explicit(&c->rb_moved[i], memory_order_acquire);
			if (moved != c->rb_synced[i]) { /* else the device's copy is current */
				r = rb_tails_copy(c, i);
				tails = true;
			}
			if (r == CUDA_SUCCESS)
				r = rb_drops_copy(c, i);
			if (r == CUDA_SUCCESS)
				c->rb_synced[i] = moved;
		}
		if (r == CUDA_SUCCESS) {
			c->rb_sync_ns = now;
			c->rb_syncs += tails;
		} else if (r == CUDA_ERROR_NOT_READY) {
			c->rb_sync_busy++;
		} else if (!c->rb_sync_warned) {
			c->rb_sync_warned = true;
			shim_log(SHIM_LOG_WARN, "live: ring buffers of context %p: copying tails and "
				 "drops: %s; their lanes stay full once filled (records dropped, "
				 "counted)", (void *)c->ctx, shim_live_cu_error(r));
		}
		shim_live_cu.cuCtxPopCurrent_v2(&popped);
	}
	pthread_mutex_unlock(&lock);
}

/* Threads wanted for the widest ring buffer: one per RB_LANES_PER_THREAD lanes, bounded. */
static uint32_t rb_threads_wanted(void)
{
	uint32_t lanes = 0, max = shim_live_session.ringbuf_threads;
	pthread_rwlock_rdlock(&ctxs_rw);
	for (struct live_ctx *c = ctxs_head(); c; c = c->next)
		for (uint32_t i = 0; i < shim_live_session.nmaps; i++)
			if (c->host[i] && !retiring(c) &&
			    ((struct cubpf_rb_header *)c->host[i])->lanes > lanes)
				lanes = ((struct cubpf_rb_header *)c->host[i])->lanes;
	pthread_rwlock_unlock(&ctxs_rw);
	uint32_t n = (lanes + RB_LANES_PER_THREAD - 1) / RB_LANES_PER_THREAD;
	max = max < 1 ? 1 : max > RB_MAX_THREADS ? RB_MAX_THREADS : max;
	return n < 1 ? 1 : n > max ? max : n;
}

static void *rb_main(void *arg);

/* Thread 0, between two of its passes: starts the helpers (once). */
static void rb_start_helpers(void)
{
	uint32_t want = rb_threads_wanted();
	uint64_t lane_max = shim_live_session.ringbuf_bytes ? shim_live_session.ringbuf_bytes : 1;
	atomic_store(&rb_step, want);
	uint32_t k = 1;
	for (; k < want; k++)
		if ((!rb_scratch[k] && !(rb_scratch[k] = malloc(lane_max))) ||
		    shim_thread_start(&rb_threads[k], rb_main, (void *)(uintptr_t)k) != 0)
			break;
	if (k < want) { /* fewer than wanted: stop those started, go on alone */
		atomic_store(&rb_step, 0); /* helpers see 0: they leave */
		for (uint32_t j = 1; j < k; j++)
			pthread_join(rb_threads[j], NULL);
		k = 1;
	}
	rb_nthreads = k;
	atomic_store(&rb_step, k);
	shim_log(SHIM_LOG_INFO, "live: ring buffers: %u drain threads", k);
}

static void *rb_main(void *arg)
{
	uint32_t k = (uint32_t)(uintptr_t)arg;
	uint64_t taken = 0, window = 0, since = 0; /* thread 0: records taken in the window */
	shim_live_thread_relax(); /* tails copied, the stream queried while applications capture */
	/* records go into a trace batch of this thread's own (NULL: the writer's, locked) */
	struct store_trace_local *local = shim_live_session.trace ? store_trace_local_new(shim_live_session.trace) : NULL;
	while (atomic_load(&rb_state) == 1) {
		uint32_t step = atomic_load(&rb_step);
		if (step == 0 || k >= step)
			break;
		/* while records keep coming, go round again at once: the lanes refill faster
		 * than a millisecond's sleep at streaming rates; idle, one look per millisecond */
		if (taken == 0) {
			store_trace_local_flush(local); /* idle: what it holds goes to the file */
			nanosleep(&(struct timespec){ 0, 1000 * 1000 }, NULL);
		}
		taken = rb_drain_pass(k, step, rb_scratch[k], local);
		rb_sync_all();
		if (k != 0 || rb_nthreads > 1)
			continue;
		uint64_t now = rb_monotonic_ns();
		window += taken;
		if (now - since < RB_WINDOW_NS)
			continue;
		if (since && window * 1000000000ull >= RB_HELPER_RATE * (now - since) &&
		    rb_threads_wanted() > 1)
			rb_start_helpers();
		since = now;
		window = 0;
	}
	store_trace_local_free(local); /* shim_live_ringbuf_finish joins us before the trace closes */
	return NULL;
}

void shim_live_ringbuf_start(void)
{
	int expect = 0;
	uint64_t lane_max = shim_live_session.ringbuf_bytes;
	if (!rb_scratch[0] && !(rb_scratch[0] = malloc(lane_max ? lane_max : 1)))
		return;
	if (!atomic_compare_exchange_strong(&rb_state, &expect, 1))
		return;
	rb_nthreads = 1;
	atomic_store(&rb_step, 1);
	if (shim_thread_start(&rb_threads[0], rb_main, (void *)(uintptr_t)0) != 0) /* small stack */
		atomic_store(&rb_state, 0);
}

/* What the log's "ring buffer NAME: ... taken, ... dropped on device" line says, as a RINGBUF
 * record: the tools read this, not the line. */
static void trace_ringbuf(const struct live_ctx *c, uint32_t i)
{
	const struct live_map *m = &shim_live_session.maps[i];
	if (!shim_live_session.trace)
		return;
	struct store_rec_ringbuf r = {
		.ts_ns = shim_now_ns(), .taken = atomic_load(&m->records), .dropped = c->drops_seen[i],
		.syncs = c->rb_syncs, .sync_busy = c->rb_sync_busy, .prog = m->obj, .map = m->index,
		.name = store_trace_intern(shim_live_session.trace, m->def.name),
		.device = (uint32_t)c->dev,
	};
	store_trace_ringbuf(shim_live_session.trace, &r);
}

void shim_live_ringbuf_finish(void)
{
	int expect = 1;
	if (atomic_compare_exchange_strong(&rb_state, &expect, 2)) {
		pthread_join(rb_threads[0], NULL); /* first: thread 0 is the one that starts helpers */
		for (uint32_t k = 1; k < rb_nthreads; k++)
			pthread_join(rb_threads[k], NULL);
	}
	if (rb_scratch[0])
		rb_drain_pass(0, 1, rb_scratch[0], NULL); /* what is left, every lane */
	pthread_mutex_lock(&lock);
	for (struct live_ctx *c = ctxs; c; c = c->next)
		for (uint32_t i = 0; i < shim_live_session.nmaps; i++) {
			if (!c->host[i])
				continue;
			trace_ringbuf(c, i);
			shim_log(SHIM_LOG_INFO, "live: ring buffer %s: %llu records taken, %llu "
				 "dropped on device %d (lanes full); tails copied to the device "
				 "%llu times (%llu times the last copy was still running)",
				 shim_live_session.maps[i].def.name,
				 (unsigned long long)atomic_load(&shim_live_session.maps[i].records),
				 (unsigned long long)c->drops_seen[i], (int)c->dev,
				 (unsigned long long)c->rb_syncs,
				 (unsigned long long)c->rb_sync_busy);
		}
	pthread_mutex_unlock(&lock);
}

/* ---- report -------------------------------------------------------------------------------- */

/* memcmp against the buffer shifted by one byte: every byte equals the first, which is 0 (the
 * C library's memcmp runs at memory speed; a byte loop took most of a context's teardown with
 * every bundled tool's maps, 349 MB, read back). */
static bool all_zero(const uint8_t *v, uint64_t n)
{
	return n == 0 || (v[0] == 0 && (n == 1 || memcmp(v, v + 1, n - 1) == 0));
}

/* A map as read back: its bytes, and its blocks' scan flags (NULL: none, every block looked at). */
struct raw_map {
	const uint8_t *p;
	const uint8_t *nz;
};

/* Whether n bytes at offset off are zero: blocks the scan did not flag are, without a look. */
static bool raw_zero(const struct raw_map *m, uint64_t off, uint64_t n)
{
	if (!m->nz || !n)
		return all_zero(m->p + off, n);
	for (uint64_t b = off / SHIM_LIVE_SCAN_BLOCK; b <= (off + n - 1) / SHIM_LIVE_SCAN_BLOCK; b++)
		if (m->nz[b])
			return all_zero(m->p + off, n);
	return true;
}

/* How many bytes from offset off on are zero (at most n), block by block: the values those
 * cover are skipped without looking at each (maps are mostly zeros). */
static uint64_t zero_prefix(const struct raw_map *m, uint64_t off, uint64_t n)
{
	uint64_t o = 0;
	while (o < n) {
		uint64_t at = off + o, end = (at / SHIM_LIVE_SCAN_BLOCK + 1) * SHIM_LIVE_SCAN_BLOCK - off;
		end = end < n ? end : n;
		if (!raw_zero(m, at, end - o))
			break;
		o = end;
	}
	return o;
}

/* A map's non-zero entries as the trace's MAP records carry them (key, value pairs), taken
 * from `raw`, the map's bytes as read back:
 *   arrays, globals: u32 key, the value;
 *   per-SM arrays: u32 key, the CUBPF_PERCPU_SLOTS copies of the value, slot s at s * value
 *     size (as Linux's lookup of a per-CPU map returns one value per CPU); readers sum (or take
 *     the min/max of) the copies;
 *   per-thread arrays: {u32 key, u32 thread}, the thread's copy (non-zero copies only);
 *   hash maps: the key (key_size bytes), the value, for every FULL slot. */
static uint64_t perthread_threads(const uint8_t *raw)
{
	uint64_t t;
	memcpy(&t, raw, sizeof(t));
	return t < shim_live_session.perthread_threads ? t : shim_live_session.perthread_threads;
}

static int entries_add(struct live_snap *e, uint64_t *cap, const void *key, const void *value)
{
	size_t pair = (size_t)e->key_size + e->value_size;
	if (e->count == *cap) {
		uint64_t n = *cap ? *cap * 2 : 64;
		uint8_t *q = realloc(e->kv, n * pair);
		if (!q)
			return -1;
		e->kv = q;
		*cap = n;
	}
	memcpy(e->kv + e->count * pair, key, e->key_size);
	memcpy(e->kv + e->count * pair + e->key_size, value, e->value_size);
	e->count++;
	return 0;
}

static int percpu_entries(const struct vm_map_def *d, const struct raw_map *raw,
			  struct live_snap *e, uint64_t *cap)
{
	uint64_t stride = ptx_map_value_stride(d);
	uint8_t *v = malloc((size_t)CUBPF_PERCPU_SLOTS * d->value_size + 1);
	if (!v)
		return -1;
	e->value_size = CUBPF_PERCPU_SLOTS * d->value_size;
	for (uint32_t k = 0; k < d->max_entries; k++) {
		uint64_t off = CUBPF_PERCPU_OFFSET(k, 0, d->value_size);
		if (raw_zero(raw, off, CUBPF_PERCPU_SLOTS * stride))
			continue;
		for (uint32_t sl = 0; sl < CUBPF_PERCPU_SLOTS; sl++)
			memcpy(v + (size_t)sl * d->value_size, raw->p + off + sl * stride, d->value_size);
		if (entries_add(e, cap, &k, v) != 0) {
			free(v);
			return -1;
		}
	}
	free(v);
	return 0;
}

/* Values of `stride` bytes from offset `first` on, `n` of them: the non-zero ones added with key
 * {k, i} (per-thread arrays, key_size 8) or k + i (arrays, key_size 4). */
static int run_entries(struct live_snap *e, uint64_t *cap, const struct raw_map *raw,
		       uint64_t first, uint64_t n, uint64_t stride, uint32_t k)
{
	for (uint64_t i = 0; i < n; i++) {
		uint64_t off = first + i * stride;
		uint32_t key[2] = { e->key_size == 8 ? k : k + (uint32_t)i, (uint32_t)i };
		if (!raw_zero(raw, off, e->value_size)) {
			if (entries_add(e, cap, key, raw->p + off) != 0)
				return -1;
			continue;
		}
		uint64_t z = zero_prefix(raw, off, (n - i) * stride);
		if (z >= stride) /* values i .. i + z / stride - 1 are zero */
			i += z / stride - 1;
	}
	return 0;
}

static int map_entries(uint32_t i, const uint8_t *bytes, const uint8_t *nz, struct live_snap *e)
{
	const struct vm_map_def *d = &shim_live_session.maps[i].def;
	const struct raw_map raw = { bytes, nz };
	uint64_t stride = ptx_map_value_stride(d), cap = 0;
	uint32_t type = d->origin == VM_MAP_USER ? d->type : CUBPF_MAP_ARRAY;
	*e = (struct live_snap){ .key_size = 4, .value_size = d->value_size };
	if (type == CUBPF_MAP_PERCPU_ARRAY)
		return percpu_entries(d, &raw, e, &cap);
	if (type == CUBPF_MAP_PERTHREAD_ARRAY) {
		e->threads = perthread_threads(bytes);
		e->key_size = 8;
		uint64_t threads = e->threads < UINT32_MAX ? e->threads : (uint64_t)UINT32_MAX + 1;
		for (uint32_t k = 0; k < d->max_entries; k++)
			if (run_entries(e, &cap, &raw, CUBPF_PERTHREAD_OFFSET(k, 0, e->threads,
									     d->value_size),
					threads, stride, k) != 0)
				return -1;
		return 0;
	}
	if (type == CUBPF_MAP_HASH) {
		uint64_t slot = CUBPF_HASH_SLOT_BYTES(d->key_size, d->value_size);
		uint64_t voff = 8 + 8ull * CUBPF_HASH_KEY_WORDS(d->key_size);
		e->key_size = d->key_size;
		for (uint32_t k = 0; k < cubpf_hash_capacity(d->max_entries); k++) {
			const uint8_t *p = bytes + k * slot;
			uint32_t state;
			memcpy(&state, p, 4);
			if (state == CUBPF_HASH_FULL && entries_add(e, &cap, p + 8, p + voff) != 0)
				return -1;
		}
		return 0;
	}
	return run_entries(e, &cap, &raw, 0, d->max_entries, stride, 0);
}

/* Copies of one value in an entry: CUBPF_PERCPU_SLOTS for per-SM arrays, else 1. */
static uint32_t copies(const struct vm_map_def *d)
{
	return d->origin == VM_MAP_USER && d->type == CUBPF_MAP_PERCPU_ARRAY ? CUBPF_PERCPU_SLOTS
									     : 1;
}

/* The value of an entry summed over its copies, word by word (4- and 8-byte values as one
 * integer, larger ones as u64 words); *nz, *lo, *hi: copies holding something and the least
 * and largest first word among them (the per-SM spread). */
static void format_value(const struct vm_map_def *d, const uint8_t *v, char *out, size_t len,
			 uint32_t *nz, uint64_t *lo, uint64_t *hi)
{
	uint32_t vs = d->value_size, n = copies(d), wb = vs == 4 ? 4 : 8, words = vs / wb;
	uint64_t sum[16] = { 0 };
	*nz = 0, *lo = UINT64_MAX, *hi = 0;
	for (uint32_t s = 0; s < n; s++) {
		const uint8_t *p = v + (size_t)s * vs;
		if (all_zero(p, vs))
			continue;
		for (uint32_t w = 0; w < words && w < 16; w++) {
			uint64_t x = 0;
			memcpy(&x, p + w * wb, wb);
			sum[w] += x;
			if (w == 0) {
				*lo = x < *lo ? x : *lo;
				*hi = x > *hi ? x : *hi;
			}
		}
		++*nz;
	}
	if (vs % 4 || (vs > 8 && vs % 8) || words > 16) { /* odd sizes: the first copy's bytes */
		size_t o = 0;
		for (uint32_t i = 0; i < vs && o + 4 < len; i++)
			o += (size_t)snprintf(out + o, len - o, "%s%02x", i ? " " : "", v[i]);
		return;
	}
	if (words == 1) {
		snprintf(out, len, "%" PRIu64, sum[0]);
		return;
	}
	size_t o = (size_t)snprintf(out, len, "{");
	for (uint32_t w = 0; w < words && o + 24 < len; w++)
		o += (size_t)snprintf(out + o, len - o, "%s%" PRIu64, w ? ", " : "", sum[w]);
	snprintf(out + o, len - o, "}");
}

static void format_key(const struct live_snap *e, const uint8_t *k, char *out, size_t len)
{
	if (e->key_size == 4 || e->key_size == 8) {
		uint64_t x = 0;
		memcpy(&x, k, e->key_size);
		snprintf(out, len, "%" PRIu64, x);
		return;
	}
	size_t o = 0;
	for (uint32_t i = 0; i < e->key_size && o + 4 < len; i++)
		o += (size_t)snprintf(out + o, len - o, "%02x", k[i]);
}

/* Entries shown at info level without CUBPF_DUMP_MAPS: enough to see that counts arrived. */
#define REPORT_FIRST 8

static void report_line(const struct live_ctx *c, uint32_t i, const struct live_snap *e,
			uint64_t sum, uint32_t sms)
{
	const struct vm_map_def *d = &shim_live_session.maps[i].def;
	char sumtxt[40] = "", shape[96] = "";
	if (d->value_size == 4 || d->value_size == 8)
		snprintf(sumtxt, sizeof(sumtxt), ", sum %" PRIu64, sum);
	uint32_t type = d->origin == VM_MAP_USER ? d->type : CUBPF_MAP_ARRAY;
	if (type == CUBPF_MAP_PERCPU_ARRAY)
		snprintf(shape, sizeof(shape), "%u entries x %u SM slots, %u non-zero (%u SMs)",
			 d->max_entries, CUBPF_PERCPU_SLOTS, e->count, sms);
	else if (type == CUBPF_MAP_PERTHREAD_ARRAY)
		snprintf(shape, sizeof(shape), "%u entries x %" PRIu64 " threads, %u non-zero "
			 "copies", d->max_entries, e->threads, e->count);
	else if (type == CUBPF_MAP_HASH)
		snprintf(shape, sizeof(shape), "%u entries (%u slots), %u in use", d->max_entries,
			 cubpf_hash_capacity(d->max_entries), e->count);
	else
		snprintf(shape, sizeof(shape), "%u entries, %u non-zero", d->max_entries, e->count);
	shim_log_print("map %s: %s, key %u B, value %u B, %s%s, device %d", d->name,
		map_kind(d), type == CUBPF_MAP_ARRAY ? 4 : d->key_size, d->value_size, shape, sumtxt,
		(int)c->dev);
}

/* The lines go where the log goes (shim_log_print): under cubpf run that is its pipe, never
 * the program's stderr, where a "map kstats" line used to land. */
static void report_map(bool print, const struct live_ctx *c, uint32_t i)
{
	const struct vm_map_def *d = &shim_live_session.maps[i].def;
	const struct live_snap e = *c->snap[i];
	size_t pair = (size_t)e.key_size + e.value_size;
	uint64_t sum = 0;
	uint32_t sms = 0, n = copies(d);
	for (uint32_t j = 0; j < e.count; j++) {
		const uint8_t *v = e.kv + j * pair + e.key_size;
		for (uint32_t s = 0; s < n; s++) {
			uint64_t x = 0;
			if (d->value_size == 4 || d->value_size == 8)
				memcpy(&x, v + (size_t)s * d->value_size, d->value_size);
			sum += x;
		}
	}
	if (n > 1) /* SM slots that hold anything, over the whole map */
		for (uint32_t s = 0; s < n; s++)
			for (uint32_t j = 0; j < e.count; j++)
				if (!all_zero(e.kv + j * pair + e.key_size + (size_t)s * d->value_size,
					      d->value_size)) {
					sms++;
					break;
				}
	if (shim_log_enabled(SHIM_LOG_INFO) || print)
		report_line(c, i, &e, sum, sms);
	uint32_t shown = 0;
	for (uint32_t j = 0; j < e.count; j++) {
		if (!print && (!shim_log_enabled(SHIM_LOG_INFO) || shown >= REPORT_FIRST))
			break;
		const uint8_t *k = e.kv + j * pair;
		char text[200], key[160], spread[96] = "";
		uint32_t nz;
		uint64_t lo, hi;
		format_value(d, k + e.key_size, text, sizeof(text), &nz, &lo, &hi);
		if (n > 1)
			snprintf(spread, sizeof(spread), "; %u SMs, per SM %" PRIu64 "..%" PRIu64, nz,
				 nz ? lo : 0, hi);
		if (e.key_size == 8 && d->type == CUBPF_MAP_PERTHREAD_ARRAY &&
		    d->origin == VM_MAP_USER) {
			uint32_t kt[2];
			memcpy(kt, k, 8);
			snprintf(key, sizeof(key), "%u] thread [%u", kt[0], kt[1]);
		} else {
			format_key(&e, k, key, sizeof(key));
		}
		shim_log_print("map %s[%s] = %s (device %d%s)", d->name, key, text, (int)c->dev,
			       spread);
		shown++;
	}
	if (!print && shown < e.count && shim_log_enabled(SHIM_LOG_INFO))
		shim_log_print("map %s: %u more non-zero entries (CUBPF_DUMP_MAPS=1 shows them)",
			       d->name, e.count - shown);
}

/* One MAP record per map and context: the non-zero entries (map_entries). */
static void trace_map(const struct live_ctx *c, uint32_t i)
{
	const struct live_map *m = &shim_live_session.maps[i];
	const struct live_snap e = *c->snap[i];
	struct store_rec_map rec = {
		.ts_ns = c->snap_ns, .prog = m->obj, .map = m->index,
		.name = store_trace_intern(shim_live_session.trace, m->def.name), .map_type = m->def.type,
		.key_size = e.key_size, .value_size = e.value_size, .count = e.count,
		.ctx = c->num,
	};
	store_trace_map(shim_live_session.trace, &rec, e.kv, (size_t)e.count * (e.key_size + e.value_size));
}

void shim_live_maps_trace(void)
{
	pthread_mutex_lock(&lock);
	for (struct live_ctx *c = ctxs; shim_live_session.trace && c; c = c->next)
		for (uint32_t i = 0; c->snap_ns && i < shim_live_session.nmaps; i++)
			if (c->snap[i])
				trace_map(c, i);
	pthread_mutex_unlock(&lock);
}

void shim_live_maps_report(bool print)
{
	shim_live_maps_trace();
	pthread_mutex_lock(&lock);
	for (struct live_ctx *c = ctxs; c; c = c->next)
		for (uint32_t i = 0; c->snap_ns && i < shim_live_session.nmaps; i++)
			if (c->snap[i])
				report_map(print, c, i);
	pthread_mutex_unlock(&lock);
}

/* ---- CUBPF_METRICS: what a scrape shows, published by the snapshot thread -------------------- */

/* One map of one context as a scrape shows it: its non-zero entries (map_entries), copied. */
static int pub_map(const struct live_ctx *c, uint32_t i, struct live_pub_map *out)
{
	const struct vm_map_def *d = &shim_live_session.maps[i].def;
	const struct live_snap e = *c->snap[i];
	size_t bytes = (size_t)e.count * (e.key_size + e.value_size);
	uint8_t *kv = malloc(bytes + 1);
	if (!kv)
		return -1;
	if (bytes)
		memcpy(kv, e.kv, bytes);
	snprintf(out->name, sizeof(out->name), "%s", d->name);
	out->device = (int)c->dev;
	out->copies = copies(d);
	out->key_size = e.key_size;
	out->value_size = e.value_size / out->copies;
	out->kv = kv;
	out->count = e.count;
	return 0;
}

/* `lock` held (the snapshot thread, right after its copies): builds the copy and hands it
 * over; the launch path never waits on anything here but `lock`, as for the snapshots. */
void shim_live_maps_publish(void)
{
	uint32_t n = 0;
	struct live_pub *p = calloc(1, sizeof(*p));
	for (struct live_ctx *c = ctxs; c; c = c->next)
		n += shim_live_session.nmaps;
	if (!p || !(p->maps = calloc(n ? n : 1, sizeof(*p->maps))) ||
	    shim_live_kernel_names(p, LIVE_PUB_KERNELS) != 0) {
		shim_live_pub_free(p);
		return;
	}
	for (struct live_ctx *c = ctxs; c; c = c->next) {
		p->device_bytes += c->device_bytes;
		p->pinned_bytes += c->pinned_bytes;
		for (uint32_t i = 0; c->snap_ns && i < shim_live_session.nmaps; i++)
			if (c->snap[i] && !c->host[i] && pub_map(c, i, &p->maps[p->nmaps]) == 0)
				p->nmaps++;
	}
	shim_live_metrics_publish(p);
}
