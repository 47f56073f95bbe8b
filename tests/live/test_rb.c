/* tests/live/test_rb.c: the host side of GPU ring buffers (shim/live_rb.c) against the CPU model
 * of the producer: order, wrap-around, drops when full, records held back by a busy producer,
 * damaged headers, and many producers against a concurrent drain (every record arrives once,
 * intact, or is counted as dropped). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "shim/live_rb.h"

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

static void *new_map(uint32_t lanes, uint64_t lane_bytes)
{
	void *m = aligned_alloc(64, live_rb_bytes(lanes, lane_bytes));
	assert_non_null(m);
	live_rb_init(m, lanes, lane_bytes);
	return m;
}

static void test_records_come_in_order_across_the_wrap(void **state)
{
	(void)state;
	void *m = new_map(1, 256);
	uint8_t scratch[256];
	uint64_t damaged = 0, seq = 0, want = 0;
	for (int round = 0; round < 50; round++) {
		for (int k = 0; k < 3; k++) { /* 3 x (8 + 40) = 144 of 256 bytes */
			uint64_t rec[5] = { seq, seq * 3, seq * 5, seq * 7, ~seq };
			assert_int_equal(live_rb_produce(m, 0, rec, 36 + (seq % 4)), 0);
			seq++;
		}
		struct got g = { 0 };
		assert_int_equal(live_rb_drain(m, scratch, collect, &g, &damaged), 3);
		for (uint32_t i = 0; i < 3; i++, want++) {
			assert_int_equal(g.first[i], want);
			assert_int_equal(g.lens[i], 36 + want % 4);
		}
	}
	assert_int_equal(damaged, 0);
	assert_int_equal(live_rb_drops(m), 0);
	free(m);
}

static void test_full_lane_drops_and_recovers(void **state)
{
	(void)state;
	void *m = new_map(2, 128);
	uint8_t scratch[128], rec[24] = { 1 };
	uint64_t damaged = 0;
	int ok = 0, dropped = 0;
	for (int i = 0; i < 10; i++)
		live_rb_produce(m, 1, rec, sizeof(rec)) == 0 ? ok++ : dropped++;
	assert_int_equal(ok, 4); /* 4 x 32 bytes fill 128 */
	assert_int_equal(dropped, 6);
	assert_int_equal(live_rb_drops(m), 6);
	struct got g = { 0 };
	assert_int_equal(live_rb_drain(m, scratch, collect, &g, &damaged), 4);
	assert_int_equal(live_rb_produce(m, 1, rec, sizeof(rec)), 0);
	/* a record larger than the lane never fits */
	uint8_t big[200] = { 0 };
	assert_int_equal(live_rb_produce(m, 0, big, sizeof(big)), -1);
	free(m);
}

static void test_busy_record_holds_back_later_ones(void **state)
{
	(void)state;
	void *m = new_map(1, 256);
	uint8_t scratch[256];
	uint64_t damaged = 0, a = 11, b = 22;
	assert_int_equal(live_rb_produce(m, 0, &a, 8), 0);
	/* a producer that reserved 16 bytes and has not committed yet */
	struct cubpf_rb_lane *l = (struct cubpf_rb_lane *)((uint8_t *)m + CUBPF_RB_LANE_OFFSET(0, 256));
	uint32_t *hdr = (uint32_t *)((uint8_t *)(l + 1) + l->head);
	l->head += 16;
	*hdr = 8 | CUBPF_RB_BUSY;
	assert_int_equal(live_rb_produce(m, 0, &b, 8), 0);
	struct got g = { 0 };
	assert_int_equal(live_rb_drain(m, scratch, collect, &g, &damaged), 1);
	assert_int_equal(g.first[0], 11);
	hdr[2] = 33, hdr[3] = 0;
	*hdr = 8; /* committed */
	g.n = 0;
	assert_int_equal(live_rb_drain(m, scratch, collect, &g, &damaged), 2);
	assert_int_equal(g.first[0], 33);
	assert_int_equal(g.first[1], 22);
	assert_int_equal(damaged, 0);
	free(m);
}

static void test_damaged_header_stops_the_lane(void **state)
{
	(void)state;
	void *m = new_map(1, 64);
	uint8_t scratch[64];
	uint64_t damaged = 0, a = 5;
	assert_int_equal(live_rb_produce(m, 0, &a, 8), 0);
	struct cubpf_rb_lane *l = (struct cubpf_rb_lane *)((uint8_t *)m + CUBPF_RB_LANE_OFFSET(0, 64));
	*(uint32_t *)(l + 1) = 1000; /* longer than the lane */
	struct got g = { 0 };
	assert_int_equal(live_rb_drain(m, scratch, collect, &g, &damaged), 0);
	assert_int_equal(damaged, 1);
	free(m);
}

/* ---- many producers, one concurrent drain -------------------------------------------------- */

#define PRODUCERS 4
#define PER_PRODUCER 100000

struct stress {
	void *map;
	int id;
	uint64_t dropped;
};

struct seen {
	uint64_t next[PRODUCERS]; /* per producer: records are seen in increasing sequence */
	uint64_t received[PRODUCERS];
	uint64_t bad;
};

static int producers_done;

static void check(void *user, uint32_t lane, const void *data, uint32_t len)
{
	struct seen *s = user;
	uint64_t w[4];
	(void)lane;
	if (len % 8 || len > sizeof(w)) {
		s->bad++;
		return;
	}
	memcpy(w, data, len);
	uint64_t p = w[0] >> 56, seq = w[0] & ((1ull << 56) - 1);
	if (p >= PRODUCERS || seq < s->next[p]) {
		s->bad++;
		return;
	}
	for (uint32_t i = 1; i < len / 8; i++)
		s->bad += w[i] != (w[0] ^ (0x9E3779B97F4A7C15ull * i));
	s->next[p] = seq + 1;
	s->received[p]++;
}

static void *producer(void *arg)
{
	struct stress *st = arg;
	for (uint64_t seq = 0; seq < PER_PRODUCER; seq++) {
		uint64_t w[4];
		uint32_t words = 1 + (uint32_t)(seq % 4);
		w[0] = ((uint64_t)st->id << 56) | seq;
		for (uint32_t i = 1; i < words; i++)
			w[i] = w[0] ^ (0x9E3779B97F4A7C15ull * i);
		/* producers 0,1 share lane 0 and 2,3 lane 1: contention within a lane */
		if (live_rb_produce(st->map, (uint32_t)st->id / 2, w, 8 * words) != 0)
			st->dropped++;
	}
	__atomic_fetch_add(&producers_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void test_concurrent_producers_lose_nothing_uncounted(void **state)
{
	(void)state;
	void *m = new_map(2, 65536);
	static uint8_t scratch[65536];
	static struct seen s;
	struct stress st[PRODUCERS];
	pthread_t t[PRODUCERS];
	uint64_t damaged = 0;
	memset(&s, 0, sizeof(s));
	producers_done = 0;
	for (int i = 0; i < PRODUCERS; i++) {
		st[i] = (struct stress){ m, i, 0 };
		assert_int_equal(pthread_create(&t[i], NULL, producer, &st[i]), 0);
	}
	/* drain while the producers run, then once more after they are done */
	while (__atomic_load_n(&producers_done, __ATOMIC_ACQUIRE) < PRODUCERS)
		live_rb_drain(m, scratch, check, &s, &damaged);
	for (int i = 0; i < PRODUCERS; i++)
		pthread_join(t[i], NULL);
	live_rb_drain(m, scratch, check, &s, &damaged);
	uint64_t dropped = 0, received = 0;
	for (int i = 0; i < PRODUCERS; i++) {
		assert_int_equal(s.received[i] + st[i].dropped, PER_PRODUCER);
		dropped += st[i].dropped;
		received += s.received[i];
	}
	printf("rb stress: %llu received, %llu dropped (counted in lanes: %llu)\n",
	       (unsigned long long)received, (unsigned long long)dropped,
	       (unsigned long long)live_rb_drops(m));
	assert_int_equal(s.bad, 0);
	assert_int_equal(damaged, 0);
	assert_int_equal(live_rb_drops(m), dropped);
	assert_true(received > 0);
	free(m);
}

/* ---- the batched drain (live_rb_drain_runs) ------------------------------------------------- */

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

static struct cubpf_rb_lane *lane0(void *m, uint32_t i, uint64_t lane_bytes)
{
	return (struct cubpf_rb_lane *)((uint8_t *)m + CUBPF_RB_LANE_OFFSET(i, lane_bytes));
}

static bool lane_all_zero(void *m, uint32_t i, uint64_t lane_bytes)
{
	const uint8_t *d = (const uint8_t *)(lane0(m, i, lane_bytes) + 1);
	for (uint64_t k = 0; k < lane_bytes; k++)
		if (d[k])
			return false;
	return true;
}

/* Runs cross the end of the lane: each record (the wrapping one whole, through scratch) comes
 * in order, one call per run, tail moves to the end of the run and the ring is zeroed. */
static void test_runs_across_the_wrap(void **state)
{
	(void)state;
	void *m = new_map(1, 256);
	uint8_t scratch[256];
	uint64_t seq = 0, want = 0;
	struct live_rb_taken t = { 0 };
	for (int round = 0; round < 50; round++) {
		for (int k = 0; k < 4; k++) { /* 4 x (8 + 40) = 192 of 256 bytes */
			uint8_t rec[40];
			for (int j = 0; j < 40; j++)
				rec[j] = (uint8_t)(seq * 13 + (uint64_t)j);
			assert_int_equal(live_rb_produce(m, 0, rec, 33 + (uint32_t)(seq % 8)), 0);
			seq++;
		}
		struct runs *r = calloc(1, sizeof(*r));
		uint64_t calls = t.runs;
		assert_int_equal(live_rb_drain_runs(m, 0, 1, scratch, collect_run, r, &t), 4);
		assert_int_equal(t.runs - calls, 1);
		for (uint32_t i = 0; i < 4; i++, want++) {
			assert_int_equal(r->lens[i], 33 + want % 8);
			for (uint32_t j = 0; j < r->lens[i]; j++)
				assert_int_equal(r->data[i][j], (uint8_t)(want * 13 + j));
		}
		free(r);
		assert_int_equal(lane0(m, 0, 256)->tail, lane0(m, 0, 256)->head);
		assert_true(lane_all_zero(m, 0, 256));
	}
	assert_int_equal(t.records, 200);
	assert_int_equal(t.damaged, 0);
	free(m);
}

/* A record reserved but not committed in the middle of a run ends the run there: what is
 * before it is taken and freed, what is after it stays (not zeroed) until it commits. */
static void test_busy_record_ends_the_run(void **state)
{
	(void)state;
	void *m = new_map(1, 256);
	uint8_t scratch[256];
	uint64_t a = 11, b = 22, c = 44;
	struct live_rb_taken t = { 0 };
	struct cubpf_rb_lane *l = lane0(m, 0, 256);
	assert_int_equal(live_rb_produce(m, 0, &a, 8), 0);
	assert_int_equal(live_rb_produce(m, 0, &c, 8), 0);
	uint32_t *hdr = (uint32_t *)((uint8_t *)(l + 1) + l->head);
	l->head += 16;
	*hdr = 8 | CUBPF_RB_BUSY;
	assert_int_equal(live_rb_produce(m, 0, &b, 8), 0);
	struct runs *r = calloc(1, sizeof(*r));
	assert_int_equal(live_rb_drain_runs(m, 0, 1, scratch, collect_run, r, &t), 2);
	assert_int_equal(r->calls, 1);
	assert_int_equal(l->tail, 32);
	assert_int_equal(*(uint64_t *)((uint8_t *)(l + 1) + 56), 22); /* after the busy one: kept */
	assert_int_equal(live_rb_drain_runs(m, 0, 1, scratch, collect_run, r, &t), 0);
	hdr[2] = 33, hdr[3] = 0;
	*hdr = 8; /* committed */
	memset(r, 0, sizeof(*r));
	assert_int_equal(live_rb_drain_runs(m, 0, 1, scratch, collect_run, r, &t), 2);
	assert_int_equal(r->calls, 1);
	assert_memory_equal(r->data[0], &(uint64_t){ 33 }, 8);
	assert_memory_equal(r->data[1], &b, 8);
	assert_true(lane_all_zero(m, 0, 256));
	assert_int_equal(t.records, 4);
	assert_int_equal(t.bytes, 64);
	free(r);
	free(m);
}

/* A full lane drops and counts while the drain is behind; the runs path frees it again. */
static void test_runs_full_lane_drops_counted(void **state)
{
	(void)state;
	void *m = new_map(2, 128);
	uint8_t scratch[128], rec[24] = { 1 };
	struct live_rb_taken t = { 0 };
	int dropped = 0;
	for (int i = 0; i < 10; i++)
		dropped += live_rb_produce(m, 1, rec, sizeof(rec)) != 0;
	assert_int_equal(dropped, 6);
	assert_int_equal(live_rb_drops(m), 6);
	struct runs *r = calloc(1, sizeof(*r));
	assert_int_equal(live_rb_drain_runs(m, 0, 1, scratch, collect_run, r, &t), 4);
	assert_int_equal(r->calls, 1);
	assert_int_equal(r->lanes[0], 1);
	for (int i = 0; i < 4; i++)
		assert_int_equal(live_rb_produce(m, 1, rec, sizeof(rec)), 0);
	assert_int_equal(live_rb_produce(m, 1, rec, sizeof(rec)), -1);
	assert_int_equal(live_rb_drops(m), 7);
	free(r);
	free(m);
}

/* A long backlog comes in runs of at most LIVE_RB_RUN records; a damaged header stops its lane
 * and is counted; first/step select the lanes of one drain thread. */
static void test_runs_are_bounded_and_lanes_shared(void **state)
{
	(void)state;
	void *m = new_map(4, 65536);
	static uint8_t scratch[65536];
	struct live_rb_taken t = { 0 };
	for (uint64_t i = 0; i < 1500; i++) /* 16 bytes each: 24000 of 65536 */
		assert_int_equal(live_rb_produce(m, 1, &i, 8), 0);
	uint64_t x = 7;
	assert_int_equal(live_rb_produce(m, 3, &x, 8), 0);
	assert_int_equal(live_rb_produce(m, 2, &x, 8), 0);
	assert_int_equal(live_rb_produce(m, 0, &x, 8), 0);
	*(uint32_t *)(lane0(m, 0, 65536) + 1) = 100000; /* lane 0: longer than the lane */
	struct runs *r = calloc(1, sizeof(*r));
	assert_int_equal(live_rb_drain_runs(m, 1, 2, scratch, collect_run, r, &t), 1501);
	assert_int_equal(r->calls, 4); /* 512 + 512 + 476 on lane 1, then lane 3 */
	assert_int_equal(r->lanes[0], 1);
	assert_int_equal(r->lanes[3], 3);
	for (uint32_t i = 0; i < 1500; i++)
		assert_memory_equal(r->data[i], &(uint64_t){ i }, 8);
	memset(r, 0, sizeof(*r));
	assert_int_equal(live_rb_drain_runs(m, 0, 2, scratch, collect_run, r, &t), 1);
	assert_int_equal(r->lanes[0], 2);
	assert_int_equal(t.damaged, 1);
	free(r);
	free(m);
}

/* Two drain threads (even and odd lanes) against four producers: every record arrives once, in
 * each producer's order, or is counted as dropped. */
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
	static __thread uint8_t scratch[65536];
	while (__atomic_load_n(&producers_done, __ATOMIC_ACQUIRE) < PRODUCERS)
		live_rb_drain_runs(d->map, d->first, 2, scratch, check_run, &d->s, &d->t);
	return NULL;
}

static void test_runs_concurrent_two_drains(void **state)
{
	(void)state;
	void *m = new_map(2, 65536);
	static uint8_t scratch[65536];
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
		st[i] = (struct stress){ m, i, 0 };
		assert_int_equal(pthread_create(&t[i], NULL, producer, &st[i]), 0);
	}
	for (int i = 0; i < PRODUCERS; i++)
		pthread_join(t[i], NULL);
	for (int k = 0; k < 2; k++) {
		pthread_join(dt[k], NULL);
		live_rb_drain_runs(m, (uint32_t)k, 2, scratch, check_run, &d[k].s, &d[k].t);
	}
	uint64_t dropped = 0;
	for (int i = 0; i < PRODUCERS; i++) {
		assert_int_equal(d[0].s.received[i] + d[1].s.received[i] + st[i].dropped,
				 PER_PRODUCER);
		dropped += st[i].dropped;
	}
	assert_int_equal(d[0].s.bad + d[1].s.bad, 0);
	assert_int_equal(d[0].t.damaged + d[1].t.damaged, 0);
	assert_int_equal(live_rb_drops(m), dropped);
	free(m);
}

/* The shim's sink: runs become PROBE records of the map in a real trace, one timestamp per
 * run, payloads intact (the wrapping record too). */
static void test_runs_to_trace(void **state)
{
	(void)state;
	char path[] = "/tmp/test_live_rb.XXXXXX", err[STORE_ERRLEN];
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	struct store_trace_writer *w = store_trace_create(path, NULL, NULL, err, sizeof(err));
	assert_non_null(w);
	void *m = new_map(3, 512);
	uint8_t scratch[512];
	struct live_rb_trace sink = { w, { .prog = 2, .map = 5, .device = 1 } };
	struct live_rb_taken t = { 0 };
	uint64_t seq = 0;
	for (int round = 0; round < 20; round++) {
		for (uint32_t k = 0; k < 12; k++, seq++) {
			uint64_t rec[6] = { seq, seq * 3, seq * 5, seq * 7, seq * 11, ~seq };
			assert_int_equal(live_rb_produce(m, k % 3, rec, sizeof(rec)), 0);
		}
		assert_int_equal(live_rb_drain_runs(m, 0, 1, scratch, live_rb_to_trace, &sink, &t), 12);
	}
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_records_come_in_order_across_the_wrap),
		cmocka_unit_test(test_full_lane_drops_and_recovers),
		cmocka_unit_test(test_busy_record_holds_back_later_ones),
		cmocka_unit_test(test_damaged_header_stops_the_lane),
		cmocka_unit_test(test_concurrent_producers_lose_nothing_uncounted),
		cmocka_unit_test(test_runs_across_the_wrap),
		cmocka_unit_test(test_busy_record_ends_the_run),
		cmocka_unit_test(test_runs_full_lane_drops_counted),
		cmocka_unit_test(test_runs_are_bounded_and_lanes_shared),
		cmocka_unit_test(test_runs_concurrent_two_drains),
		cmocka_unit_test(test_runs_to_trace),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
