/* tests/live/test_rb.c: the host side of GPU ring buffers (shim/live/rb.c) against the CPU model
 * of the producer (batches, ptx-rewriter/layout.h): the field-major batch layout, order, padding
 * and wrap-around, drops when full (counted exactly), batches not yet committed or carrying a stale
 * commit word held back, damaged headers, and many producers writing batches of several sizes
 * into many lanes against concurrent drains (every record arrives once, intact, in each lane's
 * batch order, or is counted as dropped). */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "shim/live/rb.h"

struct got {
	uint32_t n;
	uint32_t lens[4096];
	uint64_t first[4096];
};

static void collect(void *user, uint32_t lane, const void *data, uint32_t len)
{
	struct got *g = user;
	(void)lane;
	if (g->n < 4096) {
		g->lens[g->n] = len;
		memcpy(&g->first[g->n], data, len < 8 ? len : 8);
	}
	g->n++;
}

/* A ring and its producers' part in one block (the part after the ring: host memory here, so
 * the CPU producer reaches it through the header's `state`). */
static void *new_map(uint32_t lanes, uint64_t lane_bytes)
{
	uint64_t ring = (shim_live_rb_bytes(lanes, lane_bytes) + 127) & ~127ull;
	uint8_t *m = aligned_alloc(128, ring + ((shim_live_rb_state_bytes(lanes) + 127) & ~127ull));
	assert_non_null(m);
	memset(m + ring, 0, shim_live_rb_state_bytes(lanes));
	struct cubpf_rb_state st = shim_live_rb_state_header(lanes, 1, lane_bytes, (uintptr_t)(m + ring),
							(uintptr_t)m);
	memcpy(m + ring, &st, sizeof(st));
	shim_live_rb_init(m, lanes, 1, lane_bytes, (uintptr_t)(m + ring));
	return m;
}

static uint8_t *lane_data(void *m, uint32_t i)
{
	const struct cubpf_rb_header *h = m;
	return (uint8_t *)m + CUBPF_RB_LANE_OFFSET(i, h->lanes, h->lane_bytes);
}

static uint64_t *tail_of(void *m, uint32_t i)
{
	return (uint64_t *)((uint8_t *)m + CUBPF_RB_TAILS_OFFSET) + i;
}

/* Lane i's reservation head in the producers' part. */
static uint64_t *head_of(void *m, uint32_t i)
{
	const struct cubpf_rb_header *h = m;
	return (uint64_t *)((uint8_t *)(uintptr_t)h->state + CUBPF_RB_STATE_HEADS(h->lanes)) + i;
}

/* The drains as the shim runs them: after taking records, the tails go to the producers' copy
 * and the drop counts come back (shim_live_rb_sync). */
static uint64_t drain(void *m, void *scratch, live_rb_fn fn, void *user, uint64_t *damaged)
{
	uint64_t n = shim_live_rb_drain(m, scratch, fn, user, damaged);
	shim_live_rb_sync(m);
	return n;
}

static uint64_t drain_runs(void *m, uint32_t first, uint32_t step, void *scratch,
			   live_rb_run_fn fn, void *user, struct live_rb_taken *t)
{
	uint64_t n = shim_live_rb_drain_runs(m, first, step, scratch, fn, user, t);
	shim_live_rb_sync(m);
	return n;
}

static uint64_t drops(void *m)
{
	shim_live_rb_sync(m);
	return shim_live_rb_drops(m);
}

static bool lane_all_zero(void *m, uint32_t i)
{
	const uint8_t *d = lane_data(m, i);
	for (uint64_t k = 0; k < ((const struct cubpf_rb_header *)m)->lane_bytes; k++)
		if (d[k])
			return false;
	return true;
}

/* ---- the batched drain's collector ---------------------------------------------------------- */

struct runs {
	uint32_t n, calls, lanes[64];
	uint32_t lens[4096];
	uint8_t data[4096][40];
};

static void collect_run(void *user, uint32_t lane, const struct store_probe_data *recs, uint32_t n)
{
	struct runs *r = user;
	if (r->calls < 64)
		r->lanes[r->calls] = lane;
	r->calls++;
	for (uint32_t i = 0; i < n; i++, r->n++)
		if (r->n < 4096) {
			r->lens[r->n] = recs[i].len;
			memcpy(r->data[r->n], recs[i].data, recs[i].len < 40 ? recs[i].len : 40);
		}
}

/* The layout: header {k, len}, the commit word with the position's tag, then word i of rank r
 * at +16 + (i k + r) 8; the drain gives the records back whole, in rank order, and zeroes. */
static void test_batch_is_field_major(void **state)
{
	(void)state;
	void *m = new_map(2, 1024);
	uint8_t recs[5][20], scratch[1024];
	for (int r = 0; r < 5; r++)
		for (int j = 0; j < 20; j++)
			recs[r][j] = (uint8_t)(r * 32 + j);
	assert_int_equal(shim_live_rb_produce_batch(m, 1, recs, 5, 20), 0);
	const uint64_t *b = (const uint64_t *)lane_data(m, 1);
	assert_int_equal(b[0], (20ull << 32) | 5);
	assert_int_equal(b[1], CUBPF_RB_TAG(0));
	for (int i = 0; i < 3; i++)
		for (int r = 0; r < 5; r++) {
			uint64_t w = 0;
			memcpy(&w, recs[r] + 8 * i, i < 2 ? 8 : 4);
			assert_int_equal(b[2 + i * 5 + r], w);
		}
	assert_int_equal(CUBPF_RB_BATCH_BYTES(5, 20), 16 + 120 + 8); /* padded to 16 */
	assert_int_equal(*head_of(m, 1), CUBPF_RB_BATCH_BYTES(5, 20));
	struct runs *g = calloc(1, sizeof(*g));
	struct live_rb_taken t = { 0 };
	assert_int_equal(drain_runs(m, 0, 1, scratch, collect_run, g, &t), 5);
	assert_int_equal(g->calls, 1);
	assert_int_equal(g->lanes[0], 1);
	for (int r = 0; r < 5; r++) {
		assert_int_equal(g->lens[r], 20);
		assert_memory_equal(g->data[r], recs[r], 20);
	}
	assert_int_equal(*tail_of(m, 1), CUBPF_RB_BATCH_BYTES(5, 20));
	assert_int_equal(t.bytes, CUBPF_RB_BATCH_BYTES(5, 20));
	assert_true(lane_all_zero(m, 1));
	free(g);
	free(m);
}

static void test_records_come_in_order_across_the_wrap(void **state)
{
	(void)state;
	void *m = new_map(1, 256);
	uint8_t scratch[256];
	uint64_t damaged = 0, seq = 0, want = 0;
	for (int round = 0; round < 50; round++) {
		for (int k = 0; k < 3; k++) { /* 3 x (16 + 40, padded to 64) = 192 of 256 bytes */
			uint64_t rec[5] = { seq, seq * 3, seq * 5, seq * 7, ~seq };
			assert_int_equal(shim_live_rb_produce(m, 0, rec, 36 + (seq % 4)), 0);
			seq++;
		}
		struct got g = { 0 };
		assert_int_equal(drain(m, scratch, collect, &g, &damaged), 3);
		for (uint32_t i = 0; i < 3; i++, want++) {
			assert_int_equal(g.first[i], want);
			assert_int_equal(g.lens[i], 36 + want % 4);
		}
	}
	assert_int_equal(damaged, 0);
	assert_int_equal(drops(m), 0);
	assert_int_equal(*tail_of(m, 0), 150 * 64);
	free(m);
}

/* A batch that does not fit before the lane's end is preceded by a padding batch (k = 0) up to
 * the end, and starts at offset 0; the drain skips the padding and zeroes it too. */
static void test_padding_before_the_end(void **state)
{
	(void)state;
	void *m = new_map(1, 256);
	uint8_t scratch[256], recs[4][24];
	uint64_t damaged = 0;
	memset(recs, 0x5a, sizeof(recs));
	assert_int_equal(shim_live_rb_produce_batch(m, 0, recs, 4, 24), 0); /* 16 + 96 = 112 */
	assert_int_equal(shim_live_rb_produce_batch(m, 0, recs, 4, 24), 0); /* 224 */
	struct got g = { 0 };
	assert_int_equal(drain(m, scratch, collect, &g, &damaged), 8);
	recs[0][0] = 7;
	assert_int_equal(shim_live_rb_produce_batch(m, 0, recs, 4, 24), 0); /* 32 left: padding */
	assert_int_equal(*head_of(m, 0), 256 + 112);
	const uint64_t *pad = (const uint64_t *)(lane_data(m, 0) + 224);
	assert_int_equal(pad[0], 0);
	assert_int_equal(pad[1], CUBPF_RB_TAG(224));
	assert_int_equal(((const uint64_t *)lane_data(m, 0))[1], CUBPF_RB_TAG(256));
	memset(&g, 0, sizeof(g));
	assert_int_equal(drain(m, scratch, collect, &g, &damaged), 4);
	assert_int_equal(g.first[0] & 0xff, 7);
	assert_int_equal(*tail_of(m, 0), 256 + 112);
	assert_true(lane_all_zero(m, 0));
	assert_int_equal(damaged, 0);
	free(m);
}

static void test_full_lane_drops_and_recovers(void **state)
{
	(void)state;
	void *m = new_map(2, 128);
	uint8_t scratch[128], rec[24] = { 1 }, four[4][24] = { { 0 } };
	uint64_t damaged = 0;
	int ok = 0, dropped = 0;
	for (int i = 0; i < 10; i++)
		shim_live_rb_produce(m, 1, rec, sizeof(rec)) == 0 ? ok++ : dropped++;
	assert_int_equal(ok, 2); /* 2 x 48 bytes; the third needs 32 of padding + 48 */
	assert_int_equal(dropped, 8);
	assert_int_equal(drops(m), 8);
	/* a batch counts all its records */
	assert_int_equal(shim_live_rb_produce_batch(m, 1, four, 4, 24), -1);
	assert_int_equal(drops(m), 12);
	struct got g = { 0 };
	assert_int_equal(drain(m, scratch, collect, &g, &damaged), 2);
	assert_int_equal(shim_live_rb_produce(m, 1, rec, sizeof(rec)), 0);
	/* a batch larger than the lane never fits */
	uint8_t big[200] = { 0 };
	assert_int_equal(shim_live_rb_produce(m, 0, big, sizeof(big)), -1);
	assert_int_equal(drops(m), 13);
	free(m);
}

/* Producers see the room the drain freed only once the host copied the tails to their side
 * (on the GPU: the shim's copy after a drain pass); until then a full lane drops, and drops
 * reach the host through the same copies. */
static void test_tails_reach_producers_by_copy(void **state)
{
	(void)state;
	void *m = new_map(1, 256);
	uint8_t scratch[256];
	uint64_t a = 1, damaged = 0;
	for (int i = 0; i < 8; i++) /* 8 x 32 bytes: full */
		assert_int_equal(shim_live_rb_produce(m, 0, &a, 8), 0);
	struct got g = { 0 };
	assert_int_equal(shim_live_rb_drain(m, scratch, collect, &g, &damaged), 8);
	assert_int_equal(*tail_of(m, 0), 256);
	assert_int_equal(shim_live_rb_produce(m, 0, &a, 8), -1); /* the device's tail: still 0 */
	assert_int_equal(shim_live_rb_drops(m), 0);               /* not copied back yet */
	shim_live_rb_sync(m);
	assert_int_equal(shim_live_rb_drops(m), 1);
	assert_int_equal(shim_live_rb_produce(m, 0, &a, 8), 0);
	assert_int_equal(*head_of(m, 0), 288);
	free(m);
}

/* A reserved batch not yet committed (commit word 0), or whose commit word carries another
 * position's tag (stale bytes of an earlier lap), holds back the batches after it. */
static void test_uncommitted_batch_holds_back_later_ones(void **state)
{
	(void)state;
	void *m = new_map(1, 256);
	uint8_t scratch[256];
	uint64_t damaged = 0, a = 11, b = 22;
	assert_int_equal(shim_live_rb_produce(m, 0, &a, 8), 0);
	/* a producer that reserved a batch of one 8-byte record (32 bytes) at 32 */
	uint64_t *hdr = (uint64_t *)(lane_data(m, 0) + *head_of(m, 0));
	*head_of(m, 0) += 32;
	hdr[0] = (8ull << 32) | 1;
	hdr[2] = 33;
	assert_int_equal(shim_live_rb_produce(m, 0, &b, 8), 0);
	struct got g = { 0 };
	assert_int_equal(drain(m, scratch, collect, &g, &damaged), 1);
	assert_int_equal(g.first[0], 11);
	hdr[1] = CUBPF_RB_TAG(32 + 256); /* a tag, but not this position's */
	assert_int_equal(drain(m, scratch, collect, &g, &damaged), 0);
	hdr[1] = CUBPF_RB_TAG(32 - 256 + (1ull << 63));
	assert_int_equal(drain(m, scratch, collect, &g, &damaged), 0);
	assert_int_equal(*tail_of(m, 0), 32);
	hdr[1] = CUBPF_RB_TAG(32); /* committed */
	g.n = 0;
	assert_int_equal(drain(m, scratch, collect, &g, &damaged), 2);
	assert_int_equal(g.first[0], 33);
	assert_int_equal(g.first[1], 22);
	assert_int_equal(damaged, 0);
	free(m);
}

static void test_damaged_header_stops_the_lane(void **state)
{
	(void)state;
	void *m = new_map(2, 128);
	uint8_t scratch[128];
	uint64_t damaged = 0, a = 5;
	assert_int_equal(shim_live_rb_produce(m, 0, &a, 8), 0);
	assert_int_equal(shim_live_rb_produce(m, 1, &a, 8), 0);
	uint64_t *b0 = (uint64_t *)lane_data(m, 0), *b1 = (uint64_t *)lane_data(m, 1);
	b0[0] = (8ull << 32) | 40; /* more records than a warp */
	b1[0] = (200ull << 32) | 1; /* longer than the lane */
	struct got g = { 0 };
	assert_int_equal(drain(m, scratch, collect, &g, &damaged), 0);
	assert_int_equal(damaged, 2);
	b0[0] = 0; /* padding at offset 0: a whole lane of it is no padding */
	assert_int_equal(drain(m, scratch, collect, &g, &damaged), 0);
	assert_int_equal(damaged, 4);
	free(m);
}

/* ---- many producers, concurrent drains ----------------------------------------------------- */

#define PRODUCERS 8
#define RB_LANES 16
#define PER_PRODUCER 200000

/* A record: word 0 = producer << 56 | lane << 48 | seq (per producer and lane), then words
 * derived from it; 1 to 4 words. */
struct stress {
	void *map;
	int id;
	uint64_t produced, dropped;
};

struct seen {
	uint64_t next[PRODUCERS][RB_LANES]; /* records of a producer in a lane come in order */
	uint64_t received[PRODUCERS];
	uint64_t bad;
};

static int producers_done;

static void check(void *user, uint32_t lane, const void *data, uint32_t len)
{
	struct seen *s = user;
	uint64_t w[4];
	if (len % 8 || len > sizeof(w)) {
		s->bad++;
		return;
	}
	memcpy(w, data, len);
	uint64_t p = w[0] >> 56, l = (w[0] >> 48) & 0xff, seq = w[0] & ((1ull << 48) - 1);
	if (p >= PRODUCERS || l != lane || seq < s->next[p][l]) {
		s->bad++;
		return;
	}
	for (uint32_t i = 1; i < len / 8; i++)
		s->bad += w[i] != (w[0] ^ (0x9E3779B97F4A7C15ull * i));
	s->next[p][l] = seq + 1;
	s->received[p]++;
}

/* Producer p writes batches of 1 to 32 records (a warp's callers) of 1 to 4 words alternately
 * to lanes p and p + 8 (mod 16): two producers share every lane. */
static void *producer(void *arg)
{
	struct stress *st = arg;
	static __thread uint64_t w[32][4];
	uint64_t seq[RB_LANES] = { 0 };
	for (uint64_t n = 0; st->produced < PER_PRODUCER; n++) {
		uint32_t lane = (uint32_t)(st->id + (n % 2) * 5 + (n % 3) * 8) % RB_LANES;
		uint32_t k = 1 + (uint32_t)(n * 7 % 32), words = 1 + (uint32_t)(n % 4);
		for (uint32_t r = 0; r < k; r++) {
			w[r][0] = ((uint64_t)st->id << 56) | ((uint64_t)lane << 48) | seq[lane]++;
			for (uint32_t i = 1; i < words; i++)
				w[r][i] = w[r][0] ^ (0x9E3779B97F4A7C15ull * i);
		}
		/* records of the batch one after the other, 8 x words bytes each */
		uint64_t packed[32 * 4];
		for (uint32_t r = 0; r < k; r++)
			memcpy(packed + r * words, w[r], 8 * words);
		if (shim_live_rb_produce_batch(st->map, lane, packed, k, 8 * words) != 0) {
			st->dropped += k;
			sched_yield(); /* the drain has the core: most records should arrive */
		}
		st->produced += k;
	}
	__atomic_fetch_add(&producers_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void test_concurrent_producers_lose_nothing_uncounted(void **state)
{
	(void)state;
	void *m = new_map(RB_LANES, 65536);
	static uint8_t scratch[65536];
	static struct seen s;
	struct stress st[PRODUCERS];
	pthread_t t[PRODUCERS];
	uint64_t damaged = 0;
	memset(&s, 0, sizeof(s));
	producers_done = 0;
	for (int i = 0; i < PRODUCERS; i++) {
		st[i] = (struct stress){ m, i, 0, 0 };
		assert_int_equal(pthread_create(&t[i], NULL, producer, &st[i]), 0);
	}
	/* drain while the producers run, then once more after they are done */
	while (__atomic_load_n(&producers_done, __ATOMIC_ACQUIRE) < PRODUCERS)
		drain(m, scratch, check, &s, &damaged);
	for (int i = 0; i < PRODUCERS; i++)
		pthread_join(t[i], NULL);
	drain(m, scratch, check, &s, &damaged);
	uint64_t dropped = 0, received = 0;
	for (int i = 0; i < PRODUCERS; i++) {
		assert_int_equal(s.received[i] + st[i].dropped, st[i].produced);
		dropped += st[i].dropped;
		received += s.received[i];
	}
	printf("rb stress: %llu received, %llu dropped (counted in lanes: %llu)\n",
	       (unsigned long long)received, (unsigned long long)dropped,
	       (unsigned long long)drops(m));
	assert_int_equal(s.bad, 0);
	assert_int_equal(damaged, 0);
	assert_int_equal(drops(m), dropped);
	assert_true(received > 0);
	for (uint32_t l = 0; l < RB_LANES; l++) /* everything taken: heads and tails meet */
		assert_int_equal(*tail_of(m, l), *head_of(m, l));
	free(m);
}

/* ---- the batched drain (shim_live_rb_drain_runs) ------------------------------------------------- */

/* Runs cross the end of the lane (after padding): each record comes whole and in order, one
 * call per run, tail moves to the end of the run and the ring is zeroed. */
static void test_runs_across_the_wrap(void **state)
{
	(void)state;
	void *m = new_map(1, 256);
	uint8_t scratch[256];
	uint64_t seq = 0, want = 0;
	struct live_rb_taken t = { 0 };
	for (int round = 0; round < 50; round++) {
		for (int k = 0; k < 3; k++) { /* 3 x 64 = 192 of 256 bytes */
			uint8_t rec[40];
			for (int j = 0; j < 40; j++)
				rec[j] = (uint8_t)(seq * 13 + (uint64_t)j);
			assert_int_equal(shim_live_rb_produce(m, 0, rec, 33 + (uint32_t)(seq % 8)), 0);
			seq++;
		}
		struct runs *r = calloc(1, sizeof(*r));
		uint64_t calls = t.runs;
		assert_int_equal(drain_runs(m, 0, 1, scratch, collect_run, r, &t), 3);
		assert_int_equal(t.runs - calls, 1);
		for (uint32_t i = 0; i < 3; i++, want++) {
			assert_int_equal(r->lens[i], 33 + want % 8);
			for (uint32_t j = 0; j < r->lens[i]; j++)
				assert_int_equal(r->data[i][j], (uint8_t)(want * 13 + j));
		}
		free(r);
		assert_int_equal(*tail_of(m, 0), *head_of(m, 0));
		assert_true(lane_all_zero(m, 0));
	}
	assert_int_equal(t.records, 150);
	assert_int_equal(t.damaged, 0);
	free(m);
}

/* A batch reserved but not committed in the middle of a run ends the run there: what is before
 * it is taken and freed, what is after it stays (not zeroed) until it commits. */
static void test_uncommitted_batch_ends_the_run(void **state)
{
	(void)state;
	void *m = new_map(1, 256);
	uint8_t scratch[256];
	uint64_t a = 11, b = 22, c = 44;
	struct live_rb_taken t = { 0 };
	assert_int_equal(shim_live_rb_produce(m, 0, &a, 8), 0);
	assert_int_equal(shim_live_rb_produce(m, 0, &c, 8), 0);
	uint64_t *hdr = (uint64_t *)(lane_data(m, 0) + *head_of(m, 0));
	*head_of(m, 0) += 32;
	assert_int_equal(shim_live_rb_produce(m, 0, &b, 8), 0);
	struct runs *r = calloc(1, sizeof(*r));
	assert_int_equal(drain_runs(m, 0, 1, scratch, collect_run, r, &t), 2);
	assert_int_equal(r->calls, 1);
	assert_int_equal(*tail_of(m, 0), 64);
	assert_int_equal(*(uint64_t *)(lane_data(m, 0) + 96 + 16), 22); /* after it: kept */
	assert_int_equal(drain_runs(m, 0, 1, scratch, collect_run, r, &t), 0);
	hdr[0] = (8ull << 32) | 1;
	hdr[2] = 33;
	hdr[1] = CUBPF_RB_TAG(64); /* committed */
	memset(r, 0, sizeof(*r));
	assert_int_equal(drain_runs(m, 0, 1, scratch, collect_run, r, &t), 2);
	assert_int_equal(r->calls, 1);
	assert_memory_equal(r->data[0], &(uint64_t){ 33 }, 8);
	assert_memory_equal(r->data[1], &b, 8);
	assert_true(lane_all_zero(m, 0));
	assert_int_equal(t.records, 4);
	assert_int_equal(t.bytes, 128);
	free(r);
	free(m);
}

/* A long backlog comes in runs of at most LIVE_RB_RUN records, whole batches; a damaged header
 * stops its lane and is counted; first/step select the lanes of one drain thread. */
static void test_runs_are_bounded_and_lanes_shared(void **state)
{
	(void)state;
	void *m = new_map(4, 65536);
	static uint8_t scratch[65536];
	struct live_rb_taken t = { 0 };
	uint64_t v[30];
	for (uint64_t i = 0; i < 50; i++) { /* 50 batches of 30: 1500 records, 50 x 256 bytes */
		for (int r = 0; r < 30; r++)
			v[r] = i * 30 + (uint64_t)r;
		assert_int_equal(shim_live_rb_produce_batch(m, 1, v, 30, 8), 0);
	}
	uint64_t x = 7;
	assert_int_equal(shim_live_rb_produce(m, 3, &x, 8), 0);
	assert_int_equal(shim_live_rb_produce(m, 2, &x, 8), 0);
	assert_int_equal(shim_live_rb_produce(m, 0, &x, 8), 0);
	*(uint64_t *)lane_data(m, 0) = (100000ull << 32) | 1; /* lane 0: longer than the lane */
	struct runs *r = calloc(1, sizeof(*r));
	assert_int_equal(drain_runs(m, 1, 2, scratch, collect_run, r, &t), 1501);
	assert_int_equal(r->calls, 4); /* 510 + 510 + 480 on lane 1 (17 batches of 30), lane 3 */
	assert_int_equal(r->lanes[0], 1);
	assert_int_equal(r->lanes[3], 3);
	for (uint32_t i = 0; i < 1500; i++)
		assert_memory_equal(r->data[i], &(uint64_t){ i }, 8);
	memset(r, 0, sizeof(*r));
	assert_int_equal(drain_runs(m, 0, 2, scratch, collect_run, r, &t), 1);
	assert_int_equal(r->lanes[0], 2);
	assert_int_equal(t.damaged, 1);
	free(r);
	free(m);
}

/* Two drain threads (even and odd lanes) against the producers: every record arrives once, in
 * order per producer and lane, or is counted as dropped. */
struct runs_drainer {
	void *map;
	uint32_t first;
	struct seen s;
	struct live_rb_taken t;
};

static void check_run(void *user, uint32_t lane, const struct store_probe_data *recs, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		check(user, lane, recs[i].data, recs[i].len);
}

static void *runs_drainer_main(void *arg)
{
	struct runs_drainer *d = arg;
	static __thread uint8_t scratch[8192];
	while (__atomic_load_n(&producers_done, __ATOMIC_ACQUIRE) < PRODUCERS)
		drain_runs(d->map, d->first, 2, scratch, check_run, &d->s, &d->t);
	return NULL;
}

static void test_runs_concurrent_two_drains(void **state)
{
	(void)state;
	void *m = new_map(RB_LANES, 8192);
	static uint8_t scratch[8192];
	static struct runs_drainer d[2];
	struct stress st[PRODUCERS];
	pthread_t t[PRODUCERS], dt[2];
	memset(d, 0, sizeof(d));
	producers_done = 0;
	for (uint32_t k = 0; k < 2; k++) {
		d[k].map = m;
		d[k].first = k;
		assert_int_equal(pthread_create(&dt[k], NULL, runs_drainer_main, &d[k]), 0);
	}
	for (int i = 0; i < PRODUCERS; i++) {
		st[i] = (struct stress){ m, i, 0, 0 };
		assert_int_equal(pthread_create(&t[i], NULL, producer, &st[i]), 0);
	}
	for (int i = 0; i < PRODUCERS; i++)
		pthread_join(t[i], NULL);
	for (int k = 0; k < 2; k++) {
		pthread_join(dt[k], NULL);
		drain_runs(m, (uint32_t)k, 2, scratch, check_run, &d[k].s, &d[k].t);
	}
	uint64_t dropped = 0;
	for (int i = 0; i < PRODUCERS; i++) {
		assert_int_equal(d[0].s.received[i] + d[1].s.received[i] + st[i].dropped,
				 st[i].produced);
		dropped += st[i].dropped;
	}
	assert_int_equal(d[0].s.bad + d[1].s.bad, 0);
	assert_int_equal(d[0].t.damaged + d[1].t.damaged, 0);
	assert_int_equal(drops(m), dropped);
	free(m);
}

/* The shim's sink: runs become PROBE records of the map in a real trace, one timestamp per
 * run, payloads intact; through the writer's lock, or (the drain threads' way) a batch of the
 * caller's own that is handed over when the writer closes it. */
static void runs_to_trace(bool local)
{
	char path[] = "/tmp/test_live_rb.XXXXXX", err[STORE_ERRLEN];
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	struct store_trace_writer *w = store_trace_create(path, NULL, NULL, err, sizeof(err));
	assert_non_null(w);
	void *m = new_map(3, 1024);
	uint8_t scratch[1024];
	struct live_rb_trace sink = { w, { .prog = 2, .map = 5, .device = 1 },
				      local ? store_trace_local_new(w) : NULL };
	struct live_rb_taken t = { 0 };
	uint64_t seq = 0;
	for (int round = 0; round < 20; round++) {
		for (uint32_t k = 0; k < 3; k++) { /* batches of 4 */
			uint64_t rec[4][6];
			for (int r = 0; r < 4; r++, seq++) {
				uint64_t v[6] = { seq, seq * 3, seq * 5, seq * 7, seq * 11, ~seq };
				memcpy(rec[r], v, sizeof(v));
			}
			assert_int_equal(shim_live_rb_produce_batch(m, k, rec, 4, sizeof(rec[0])), 0);
		}
		assert_int_equal(drain_runs(m, 0, 1, scratch, shim_live_rb_to_trace, &sink, &t), 12);
	}
	store_trace_local_free(sink.local);
	assert_int_equal(store_trace_close(w, err, sizeof(err)), 0);
	struct store_trace_reader *r = store_trace_open(path, err, sizeof(err));
	assert_non_null(r);
	struct store_trace_record rec;
	uint64_t n = 0, sum = 0;
	while (store_trace_next(r, &rec) == 1) {
		if (rec.type != STORE_REC_PROBE)
			continue;
		struct store_rec_probe p;
		size_t rest = 0;
		const uint8_t *x = store_rec_fixed(&rec, &p, sizeof(p), &rest);
		assert_non_null(x);
		assert_int_equal(p.prog, 2);
		assert_int_equal(p.map, 5);
		assert_int_equal(p.device, 1);
		assert_true(p.ts_ns > 0);
		assert_int_equal(rest, 48);
		uint64_t v[6];
		memcpy(v, x, sizeof(v));
		assert_int_equal(v[1], v[0] * 3);
		assert_int_equal(v[5], ~v[0]);
		sum += v[0];
		n++;
	}
	assert_int_equal(n, 240);
	assert_int_equal(sum, 239 * 240 / 2);
	store_trace_close_reader(r);
	unlink(path);
	free(m);
}

static void test_runs_to_trace(void **state)
{
	(void)state;
	runs_to_trace(false);
	runs_to_trace(true);
}

/* An empty lane costs a look at its tail and one commit word: a pass over 8448 empty lanes (an
 * H100's 132 SMs x 64 warp slots) is quick. */
static void test_empty_pass_is_cheap(void **state)
{
	(void)state;
	void *m = new_map(8448, 2048);
	static uint8_t scratch[2048];
	struct live_rb_taken t = { 0 };
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int i = 0; i < 100; i++)
		assert_int_equal(drain_runs(m, 0, 1, scratch, collect_run, NULL, &t), 0);
	clock_gettime(CLOCK_MONOTONIC, &b);
	double us = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / 1e3 / 100;
	printf("rb empty pass over 8448 lanes: %.1f us\n", us);
	assert_true(us < 20000); /* generous: sanitized builds on a loaded machine */
	free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_batch_is_field_major),
		cmocka_unit_test(test_records_come_in_order_across_the_wrap),
		cmocka_unit_test(test_padding_before_the_end),
		cmocka_unit_test(test_full_lane_drops_and_recovers),
		cmocka_unit_test(test_tails_reach_producers_by_copy),
		cmocka_unit_test(test_uncommitted_batch_holds_back_later_ones),
		cmocka_unit_test(test_damaged_header_stops_the_lane),
		cmocka_unit_test(test_concurrent_producers_lose_nothing_uncounted),
		cmocka_unit_test(test_runs_across_the_wrap),
		cmocka_unit_test(test_uncommitted_batch_ends_the_run),
		cmocka_unit_test(test_runs_are_bounded_and_lanes_shared),
		cmocka_unit_test(test_runs_concurrent_two_drains),
		cmocka_unit_test(test_runs_to_trace),
		cmocka_unit_test(test_empty_pass_is_cheap),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
