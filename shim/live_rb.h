/* shim/live_rb.h: the host side of GPU ring buffers (layout and protocol: cubpf_abi.h,
 * "GPU ring buffers").  Plain memory operations, no driver calls: the shim applies them to pinned
 * mapped memory, the tests to ordinary memory with a CPU producer. */
#ifndef CUBPF_SHIM_LIVE_RB_H
#define CUBPF_SHIM_LIVE_RB_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"
#include "tools/include/cubpf_abi.h"

/* Bytes a map of `lanes` lanes of `lane_bytes` (a power of two) takes. */
uint64_t live_rb_bytes(uint32_t lanes, uint64_t lane_bytes);
/* Lays out a map in `mem` (live_rb_bytes bytes, zeroed here). */
void live_rb_init(void *mem, uint32_t lanes, uint64_t lane_bytes);

/* Called for each record taken: lane, payload and its length. */
typedef void (*live_rb_fn)(void *user, uint32_t lane, const void *data, uint32_t len);

/* Takes every complete record of every lane, in each lane's reservation order, and frees their
 * space.  `scratch` (lane_bytes) holds a record that wraps around the end of its lane.  Returns
 * the number of records taken; a damaged header (a length the lane cannot hold) stops that
 * lane and counts in *damaged. */
uint64_t live_rb_drain(void *mem, void *scratch, live_rb_fn fn, void *user, uint64_t *damaged);

/* The batched drain (the shim's).  A run is the records of one lane from tail up to the first
 * one not yet committed (busy or unwritten), handed over at once: recs[i].data points into the
 * lane, or into scratch for the one record of a run that wraps around the lane's end, and is
 * valid until fn returns.  After fn the run's bytes are zeroed (one memset per contiguous
 * piece) and tail advances once.  A run holds at most LIVE_RB_RUN records; a lane gives at most
 * one ring's worth of bytes per call, so that a busy lane cannot hold the others back. */
#define LIVE_RB_RUN 512u
typedef void (*live_rb_run_fn)(void *user, uint32_t lane, const struct store_probe_data *recs,
			       uint32_t n);

struct live_rb_taken {
	uint64_t records, bytes; /* records and ring bytes (headers included) taken */
	uint64_t runs;           /* calls of fn */
	uint64_t damaged;        /* lanes stopped by a header whose length the lane cannot hold */
};

/* Drains lanes first, first + step, first + 2 step ... (step >= 1: drain threads share lanes
 * this way).  Adds to *t; returns the number of records taken. */
uint64_t live_rb_drain_runs(void *mem, uint32_t first, uint32_t step, void *scratch,
			    live_rb_run_fn fn, void *user, struct live_rb_taken *t);

/* A run_fn that appends each run to a trace as PROBE records of one map with one timestamp per
 * run (CLOCK_REALTIME read once): user is a struct live_rb_trace.  Without a writer it only
 * counts. */
struct live_rb_trace {
	struct store_trace_writer *w;  /* NULL: nothing written */
	struct store_rec_probe probe;  /* prog, map, device, flags; ts_ns is set per run */
};
void live_rb_to_trace(void *user, uint32_t lane, const struct store_probe_data *recs, uint32_t n);

/* Records dropped so far (all lanes). */
uint64_t live_rb_drops(const void *mem);

/* The producer's protocol on the CPU: the reference for the device code, and the tests' fake
 * producer.  Returns 0, or -1 when the record did not fit (dropped and counted). */
int live_rb_produce(void *mem, uint32_t lane, const void *data, uint32_t len);

#endif
