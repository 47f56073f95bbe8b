/* shim/live_rb.c: the host side of GPU ring buffers — draining lanes, and the CPU model of the
 * producer.  The protocol is in cubpf_abi.h; the reasons for its shape:
 *  - a producer never waits: reservation is a compare-and-swap on head that gives up (and counts
 *    a drop) when the record does not fit, instead of an add that could not be undone;
 *  - records are committed out of order (warps finish when they finish), so each carries a busy
 *    bit in its header and the host stops at the first busy one, keeping reservation order;
 *  - the host zeroes what it consumed, so that a header landing on old data later reads 0
 *    ("not yet") until its producer writes it. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shim/live_rb.h"

static struct cubpf_rb_lane *lane_at(void *mem, uint32_t i, uint64_t lane_bytes)
{
	return (struct cubpf_rb_lane *)((uint8_t *)mem + CUBPF_RB_LANE_OFFSET(i, lane_bytes));
}

static uint64_t record_bytes(uint32_t len)
{
	return CUBPF_RB_HDR_BYTES + (((uint64_t)len + 7) & ~7ull);
}

uint64_t live_rb_bytes(uint32_t lanes, uint64_t lane_bytes)
{
	return CUBPF_RB_MAP_BYTES(lanes, lane_bytes);
}

void live_rb_init(void *mem, uint32_t lanes, uint64_t lane_bytes)
{
	memset(mem, 0, live_rb_bytes(lanes, lane_bytes));
	struct cubpf_rb_header *h = mem;
	h->lanes = lanes;
	h->lane_bytes = lane_bytes;
}

/* Copies n bytes at ring position pos out of (or into) a lane's data, wrapping at the end. */
static void ring_read(const uint8_t *data, uint64_t size, uint64_t pos, void *out, uint64_t n)
{
	uint64_t off = pos & (size - 1), first = n < size - off ? n : size - off;
	memcpy(out, data + off, first);
	memcpy((uint8_t *)out + first, data, n - first);
}

static void ring_write(uint8_t *data, uint64_t size, uint64_t pos, const void *in, uint64_t n)
{
	uint64_t off = pos & (size - 1), first = n < size - off ? n : size - off;
	memcpy(data + off, in, first);
	memcpy(data, (const uint8_t *)in + first, n - first);
}

static void ring_zero(uint8_t *data, uint64_t size, uint64_t pos, uint64_t n)
{
	uint64_t off = pos & (size - 1), first = n < size - off ? n : size - off;
	memset(data + off, 0, first);
	memset(data, 0, n - first);
}

static uint64_t drain_lane(struct cubpf_rb_lane *l, uint32_t i, uint64_t size, void *scratch,
			   live_rb_fn fn, void *user, uint64_t *damaged)
{
	uint8_t *data = (uint8_t *)(l + 1);
	uint64_t tail = l->tail, head = __atomic_load_n(&l->head, __ATOMIC_ACQUIRE), n = 0;
	while (tail < head) {
		uint32_t *hdr = (uint32_t *)(data + (tail & (size - 1)));
		uint32_t word = __atomic_load_n(hdr, __ATOMIC_ACQUIRE);
		if (word == 0 || (word & CUBPF_RB_BUSY))
			break; /* reserved, not yet committed */
		uint64_t rec = record_bytes(word);
		if (rec > size || rec > head - tail) {
			++*damaged;
			break;
		}
		uint64_t off = (tail + CUBPF_RB_HDR_BYTES) & (size - 1);
		const void *payload = data + off;
		if (off + word > size) { /* wraps: gather it */
			ring_read(data, size, tail + CUBPF_RB_HDR_BYTES, scratch, word);
			payload = scratch;
		}
		fn(user, i, payload, word);
		ring_zero(data, size, tail, rec);
		tail += rec;
		__atomic_store_n(&l->tail, tail, __ATOMIC_RELEASE);
		n++;
	}
	return n;
}

uint64_t live_rb_drain(void *mem, void *scratch, live_rb_fn fn, void *user, uint64_t *damaged)
{
	const struct cubpf_rb_header *h = mem;
	uint64_t n = 0;
	for (uint32_t i = 0; i < h->lanes; i++)
		n += drain_lane(lane_at(mem, i, h->lane_bytes), i, h->lane_bytes, scratch, fn, user,
				damaged);
	return n;
}

/* One lane's runs; returns the records taken.  head is read once per run: records committed
 * after that wait for the next run, and the bytes taken per call are bounded by the ring. */
static uint64_t drain_lane_runs(struct cubpf_rb_lane *l, uint32_t i, uint64_t size, void *scratch,
				live_rb_run_fn fn, void *user, struct live_rb_taken *t)
{
	uint8_t *data = (uint8_t *)(l + 1);
	struct store_probe_data recs[LIVE_RB_RUN];
	uint64_t tail = l->tail, start = tail, n = 0;
	while (tail - start < size) {
		uint64_t head = __atomic_load_n(&l->head, __ATOMIC_ACQUIRE), pos = tail;
		uint32_t k = 0;
		bool stop = false;
		while (k < LIVE_RB_RUN && pos < head) {
			uint32_t word = __atomic_load_n((uint32_t *)(data + (pos & (size - 1))),
							__ATOMIC_ACQUIRE);
			if (word == 0 || (word & CUBPF_RB_BUSY)) {
				stop = true; /* reserved, not yet committed: the run ends here */
				break;
			}
			uint64_t rec = record_bytes(word);
			if (rec > size || rec > head - pos) {
				t->damaged++;
				stop = true;
				break;
			}
			uint64_t off = (pos + CUBPF_RB_HDR_BYTES) & (size - 1);
			recs[k].data = data + off;
			if (off + word > size) { /* wraps: gather it (at most one per run) */
				ring_read(data, size, pos + CUBPF_RB_HDR_BYTES, scratch, word);
				recs[k].data = scratch;
			}
			recs[k++].len = word;
			pos += rec;
		}
		if (k) {
			fn(user, i, recs, k);
			ring_zero(data, size, tail, pos - tail);
			t->bytes += pos - tail;
			t->runs++;
			n += k;
			tail = pos;
			__atomic_store_n(&l->tail, tail, __ATOMIC_RELEASE);
		}
		if (stop || k < LIVE_RB_RUN)
			break;
	}
	t->records += n;
	return n;
}

uint64_t live_rb_drain_runs(void *mem, uint32_t first, uint32_t step, void *scratch,
			    live_rb_run_fn fn, void *user, struct live_rb_taken *t)
{
	const struct cubpf_rb_header *h = mem;
	uint64_t n = 0;
	for (uint32_t i = first; i < h->lanes; i += step ? step : 1)
		n += drain_lane_runs(lane_at(mem, i, h->lane_bytes), i, h->lane_bytes, scratch, fn,
				     user, t);
	return n;
}

void live_rb_to_trace(void *user, uint32_t lane, const struct store_probe_data *recs, uint32_t n)
{
	struct live_rb_trace *s = user;
	(void)lane;
	if (!s->w)
		return;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	s->probe.ts_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	store_trace_probes(s->w, &s->probe, recs, n);
}

uint64_t live_rb_drops(const void *mem)
{
	const struct cubpf_rb_header *h = mem;
	uint64_t d = 0;
	for (uint32_t i = 0; i < h->lanes; i++)
		d += __atomic_load_n(&lane_at((void *)mem, i, h->lane_bytes)->drops,
				     __ATOMIC_RELAXED);
	return d;
}

int live_rb_produce(void *mem, uint32_t lane, const void *data, uint32_t len)
{
	const struct cubpf_rb_header *h = mem;
	uint64_t size = h->lane_bytes, rec = record_bytes(len);
	struct cubpf_rb_lane *l = lane_at(mem, lane % h->lanes, size);
	uint8_t *ring = (uint8_t *)(l + 1);
	uint64_t head = __atomic_load_n(&l->head, __ATOMIC_ACQUIRE);
	for (;;) {
		uint64_t tail = __atomic_load_n(&l->tail, __ATOMIC_ACQUIRE);
		if (len == 0 || len >= CUBPF_RB_BUSY || head + rec - tail > size) {
			__atomic_fetch_add(&l->drops, 1, __ATOMIC_RELAXED);
			return -1;
		}
		if (__atomic_compare_exchange_n(&l->head, &head, head + rec, false, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE))
			break;
	}
	uint32_t *hdr = (uint32_t *)(ring + (head & (size - 1)));
	__atomic_store_n(hdr, len | CUBPF_RB_BUSY, __ATOMIC_RELAXED);
	ring_write(ring, size, head + CUBPF_RB_HDR_BYTES, data, len);
	__atomic_store_n(hdr, len, __ATOMIC_RELEASE); /* commit */
	return 0;
}
