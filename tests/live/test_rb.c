/* tests/live/test_rb.c: the host side of GPU ring buffers (shim/live_rb.c) against the CPU model
 * of the producer: order, wrap-around, drops when full, records held back by a busy producer,
 * damaged headers, and many producers against a concurrent drain (every record arrives once,
 * intact, or is counted as dropped). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_records_come_in_order_across_the_wrap),
		cmocka_unit_test(test_full_lane_drops_and_recovers),
		cmocka_unit_test(test_busy_record_holds_back_later_ones),
		cmocka_unit_test(test_damaged_header_stops_the_lane),
		cmocka_unit_test(test_concurrent_producers_lose_nothing_uncounted),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
