/* shim/live/rb.c: the host side of GPU ring buffers — draining lanes, and the CPU model of the
 * producer.  The protocol is in ptx-rewriter/layout.h; the reasons for its shape:
 *  - a producer never waits: reservation is a compare-and-swap on head that gives up (and counts
 *    a drop) when the batch does not fit, instead of an add that could not be undone;
 *  - heads, a copy of the tails and the drop counts live in device memory (the host copies the
 *    tails in and the drops out), so that neither a reservation nor a drop crosses PCIe: when
 *    lanes are full, most warps drop, and a PCIe round trip each would cost the SMs more than
 *    the records kept;
 *  - a batch stores its records field-major, so that the warp's stores are contiguous (full
 *    lines over PCIe, not one 8-byte write per record), and has one fence and one commit word;
 *  - batches are committed out of order (warps finish when they finish), so the host stops at
 *    the first one whose commit word does not carry its position's tag, keeping reservation
 *    order;
 *  - the host zeroes what it consumed, so that a commit word landing on old bytes later reads 0
 *    ("not yet") until its producer writes it. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shim/live/rb.h"

#define RB_WARP 32u /* most records in a batch: the lanes of a warp */

static const struct cubpf_rb_header *hdr(const void *mem)
{
	return mem;
}

static uint64_t *tail_at(void *mem, uint32_t i)
{
	return (uint64_t *)((uint8_t *)mem + CUBPF_RB_TAILS_OFFSET) + i;
}

static uint64_t *drops_at(void *mem, uint32_t i)
{
	return (uint64_t *)((uint8_t *)mem + CUBPF_RB_DROPS_OFFSET(hdr(mem)->lanes)) + i;
}

static uint8_t *lane_data(void *mem, uint32_t i)
{
	return (uint8_t *)mem + CUBPF_RB_LANE_OFFSET(i, hdr(mem)->lanes, hdr(mem)->lane_bytes);
}

uint64_t shim_live_rb_bytes(uint32_t lanes, uint64_t lane_bytes)
{
	return CUBPF_RB_MAP_BYTES(lanes, lane_bytes);
}

uint64_t shim_live_rb_state_bytes(uint32_t lanes)
{
	return CUBPF_RB_STATE_BYTES(lanes);
}

void shim_live_rb_init(void *mem, uint32_t lanes, uint32_t warps, uint64_t lane_bytes, uint64_t state)
{
	memset(mem, 0, shim_live_rb_bytes(lanes, lane_bytes));
	struct cubpf_rb_header *h = mem;
	h->version = CUBPF_RB_VERSION;
	h->lanes = lanes;
	h->warps = warps;
	h->lane_bytes = lane_bytes;
	h->state = state;
}

struct cubpf_rb_state shim_live_rb_state_header(uint32_t lanes, uint32_t warps, uint64_t lane_bytes,
					   uint64_t state, uint64_t ring)
{
	return (struct cubpf_rb_state){
		.lanes = lanes, .warps = warps, .lane_bytes = lane_bytes,
		.heads = state + CUBPF_RB_STATE_HEADS(lanes),
		.tails = state + CUBPF_RB_STATE_TAILS(lanes),
		.drops = state + CUBPF_RB_STATE_DROPS(lanes),
		.data = ring + CUBPF_RB_DATA_OFFSET(lanes),
	};
}

void *shim_live_rb_tails(void *mem)
{
	return tail_at(mem, 0);
}

void *shim_live_rb_drops_copy(void *mem)
{
	return drops_at(mem, 0);
}

/* Zeroes n consumed bytes from ring position pos (a run may go on past the lane's end, after a
 * padding batch). */
static void ring_zero(uint8_t *data, uint64_t size, uint64_t pos, uint64_t n)
{
	uint64_t off = pos % size, first = n < size - off ? n : size - off;
	memset(data + off, 0, first);
	memset(data, 0, n - first);
}

/* The batch at position pos: 1 when committed (*k records of *len bytes, k = 0 for padding,
 * *bytes of ring in all), 0 when not yet, -1 when its header is damaged (a batch the lane
 * cannot hold). */
static int batch_at(const uint8_t *data, uint64_t size, uint64_t pos, uint32_t *k, uint32_t *len,
		    uint64_t *bytes)
{
	uint64_t off = pos % size;
	const uint64_t *w = (const uint64_t *)(data + off);
	if (__atomic_load_n(&w[1], __ATOMIC_ACQUIRE) != CUBPF_RB_TAG(pos))
		return 0;
	uint64_t kl = __atomic_load_n(&w[0], __ATOMIC_RELAXED);
	*k = (uint32_t)kl, *len = (uint32_t)(kl >> 32);
	if (*k == 0) {
		*bytes = size - off;
		return off ? 1 : -1;
	}
	if (*k > RB_WARP || *len == 0 || *len > CUBPF_RB_MAX_RECORD)
		return -1;
	*bytes = CUBPF_RB_BATCH_BYTES(*k, *len);
	return off + *bytes <= size ? 1 : -1;
}

/* The k records of a batch back to records one after the other, `stride` bytes apart (len
 * rounded up to 8): word i of rank r is at +16 + (i * k + r) * 8.  Read in the order they lie. */
static void unpack(const uint8_t *batch, uint32_t k, uint32_t len, uint8_t *out)
{
	uint32_t words = (len + 7) / 8;
	const uint8_t *src = batch + CUBPF_RB_BATCH_HDR;
	for (uint32_t i = 0; i < words; i++)
		for (uint32_t r = 0; r < k; r++, src += 8)
			memcpy(out + (size_t)r * words * 8 + 8 * i, src, 8);
}

/* Walks a lane from pos: unpacks committed batches into scratch and recs until the run is full
 * (LIVE_RB_RUN records or size bytes of scratch: *full set), the next batch is not committed, or
 * `limit` bytes of ring were passed.  Returns the position after the last batch taken. */
static uint64_t collect_run(uint8_t *data, uint64_t size, uint64_t pos, uint64_t limit,
			    uint8_t *scratch, struct store_probe_data *recs, uint32_t *cnt,
			    bool *full, struct live_rb_taken *t)
{
	uint64_t used = 0, end = pos + limit;
	*cnt = 0, *full = false;
	while (pos < end) {
		uint32_t k, len;
		uint64_t bytes;
		int st = batch_at(data, size, pos, &k, &len, &bytes);
		if (st <= 0) {
			t->damaged += st < 0;
			break;
		}
		uint64_t stride = ((uint64_t)len + 7) & ~7ull;
		if (k && (*cnt + k > LIVE_RB_RUN || used + k * stride > size)) {
			*full = true;
			break;
		}
		if (k)
			unpack(data + pos % size, k, len, scratch + used);
		for (uint32_t r = 0; r < k; r++, used += stride)
			recs[(*cnt)++] = (struct store_probe_data){ scratch + used, len };
		pos += bytes;
	}
	return pos;
}

/* One lane's runs; returns the records taken.  The lane gives at most one ring's worth of bytes
 * per call; records committed meanwhile wait for the next call. */
static uint64_t drain_lane_runs(void *mem, uint32_t i, uint8_t *scratch, live_rb_run_fn fn,
				void *user, struct live_rb_taken *t)
{
	uint64_t size = hdr(mem)->lane_bytes, *tailp = tail_at(mem, i);
	uint8_t *data = lane_data(mem, i);
	struct store_probe_data recs[LIVE_RB_RUN];
	uint64_t tail = __atomic_load_n(tailp, __ATOMIC_RELAXED), start = tail, n = 0;
	bool full = true;
	while (full && tail - start < size) {
		uint32_t cnt;
		uint64_t pos = collect_run(data, size, tail, size - (tail - start), scratch, recs,
					   &cnt, &full, t);
		if (pos == tail)
			break;
		if (cnt) {
			fn(user, i, recs, cnt);
			t->runs++;
			n += cnt;
		}
		ring_zero(data, size, tail, pos - tail);
		t->bytes += pos - tail;
		tail = pos;
		__atomic_store_n(tailp, tail, __ATOMIC_RELEASE);
	}
	t->records += n;
	return n;
}

uint64_t shim_live_rb_drain_runs(void *mem, uint32_t first, uint32_t step, void *scratch,
			    live_rb_run_fn fn, void *user, struct live_rb_taken *t)
{
	uint64_t n = 0;
	for (uint32_t i = first; i < hdr(mem)->lanes; i += step ? step : 1)
		n += drain_lane_runs(mem, i, scratch, fn, user, t);
	return n;
}

struct per_record {
	live_rb_fn fn;
	void *user;
};

static void per_record(void *user, uint32_t lane, const struct store_probe_data *recs, uint32_t n)
{
	struct per_record *p = user;
	for (uint32_t i = 0; i < n; i++)
		p->fn(p->user, lane, recs[i].data, recs[i].len);
}

uint64_t shim_live_rb_drain(void *mem, void *scratch, live_rb_fn fn, void *user, uint64_t *damaged)
{
	struct per_record p = { fn, user };
	struct live_rb_taken t = { 0 };
	uint64_t n = shim_live_rb_drain_runs(mem, 0, 1, scratch, per_record, &p, &t);
	*damaged += t.damaged;
	return n;
}

void shim_live_rb_to_trace(void *user, uint32_t lane, const struct store_probe_data *recs, uint32_t n)
{
	struct live_rb_trace *s = user;
	(void)lane;
	if (!s->w)
		return;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	s->probe.ts_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	if (s->local)
		store_trace_probes_local(s->local, &s->probe, recs, n);
	else
		store_trace_probes(s->w, &s->probe, recs, n);
}

uint64_t shim_live_rb_drops(const void *mem)
{
	uint64_t d = 0;
	for (uint32_t i = 0; i < hdr(mem)->lanes; i++)
		d += __atomic_load_n(drops_at((void *)mem, i), __ATOMIC_RELAXED);
	return d;
}

/* ---- the producer (CPU model of ptx-rewriter/maps.c's ptx_cg_ringbuf_output) ------------------ */

/* The device's arrays, reached through the ring header's `state` (a host address here). */
static uint64_t *state_word(const void *mem, size_t array, uint32_t lane)
{
	const struct cubpf_rb_header *h = hdr(mem);
	return (uint64_t *)((uint8_t *)(uintptr_t)h->state + array) + lane;
}

/* Step 1 of the protocol: *head = the reserved position, *pad = padding bytes before the batch.
 * The tail is the device's copy, which only the host's copy (shim_live_rb_sync) raises.  The fit
 * test is signed: a head read before the tail passed it (stale) must retry, not drop. */
static int reserve(uint64_t *headp, const uint64_t *tailp, uint64_t size, uint64_t batch,
		   uint64_t *head, uint64_t *pad)
{
	uint64_t h = __atomic_load_n(headp, __ATOMIC_RELAXED);
	if (batch > size)
		return -1;
	for (;;) {
		uint64_t off = h % size, pd = size - off < batch ? size - off : 0, need = pd + batch;
		uint64_t t = __atomic_load_n(tailp, __ATOMIC_ACQUIRE);
		if ((int64_t)(h + need - t) > (int64_t)size)
			return -1;
		if (__atomic_compare_exchange_n(headp, &h, h + need, false, __ATOMIC_ACQ_REL,
						__ATOMIC_RELAXED)) {
			*head = h, *pad = pd;
			return 0;
		}
	}
}

/* Steps 2 and 3: the payload field-major, {k, len}, then the commit words after a fence. */
static void write_batch(uint8_t *data, uint64_t size, uint64_t head, uint64_t pad,
			const uint8_t *recs, uint32_t k, uint32_t len)
{
	uint64_t pos = head + pad, *b = (uint64_t *)(data + pos % size);
	uint32_t words = (len + 7) / 8;
	for (uint32_t i = 0; i < words; i++)
		for (uint32_t r = 0; r < k; r++) {
			uint64_t w = 0;
			memcpy(&w, recs + (size_t)r * len + 8 * i, len - 8 * i < 8 ? len - 8 * i : 8);
			__atomic_store_n(&b[2 + (uint64_t)i * k + r], w, __ATOMIC_RELAXED);
		}
	__atomic_store_n(&b[0], (uint64_t)len << 32 | k, __ATOMIC_RELAXED);
	uint64_t *p = (uint64_t *)(data + head % size);
	if (pad)
		__atomic_store_n(&p[0], 0, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE); /* membar.sys */
	if (pad)
		__atomic_store_n(&p[1], CUBPF_RB_TAG(head), __ATOMIC_RELAXED);
	__atomic_store_n(&b[1], CUBPF_RB_TAG(pos), __ATOMIC_RELAXED);
}

int shim_live_rb_produce_batch(void *mem, uint32_t lane, const void *recs, uint32_t k, uint32_t len)
{
	const struct cubpf_rb_header *h = hdr(mem);
	lane %= h->lanes;
	uint64_t *drops = state_word(mem, CUBPF_RB_STATE_DROPS(h->lanes), lane), head, pad;
	if (k == 0 || k > RB_WARP || len == 0 || len > CUBPF_RB_MAX_RECORD ||
	    reserve(state_word(mem, CUBPF_RB_STATE_HEADS(h->lanes), lane),
		    state_word(mem, CUBPF_RB_STATE_TAILS(h->lanes), lane), h->lane_bytes,
		    CUBPF_RB_BATCH_BYTES(k, len), &head, &pad) != 0) {
		__atomic_fetch_add(drops, k, __ATOMIC_RELAXED);
		return -1;
	}
	write_batch(lane_data(mem, lane), h->lane_bytes, head, pad, recs, k, len);
	return 0;
}

int shim_live_rb_produce(void *mem, uint32_t lane, const void *data, uint32_t len)
{
	return shim_live_rb_produce_batch(mem, lane, data, 1, len);
}

/* What the shim does with two copies on its stream (maps.c), word by word: tails in, drops
 * out.  A word-by-word copy may interleave with the drain's stores; every word it writes is a
 * value its source held, and both only grow, so readers see old values, never wrong ones. */
void shim_live_rb_sync(void *mem)
{
	const struct cubpf_rb_header *h = hdr(mem);
	for (uint32_t i = 0; i < h->lanes; i++) {
		__atomic_store_n(state_word(mem, CUBPF_RB_STATE_TAILS(h->lanes), i),
				 __atomic_load_n(tail_at(mem, i), __ATOMIC_ACQUIRE), __ATOMIC_RELEASE);
		__atomic_store_n(drops_at(mem, i),
				 __atomic_load_n(state_word(mem, CUBPF_RB_STATE_DROPS(h->lanes), i),
						 __ATOMIC_RELAXED), __ATOMIC_RELAXED);
	}
}
