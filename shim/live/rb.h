/* shim/live/rb.h: the host side of GPU ring buffers (layout and protocol: ptx-rewriter/layout.h,
 * "GPU ring buffers").  Plain memory operations, no driver calls: the shim applies them to pinned
 * mapped memory, the tests to ordinary memory with a CPU producer. */
#ifndef CUBPF_SHIM_LIVE_RB_H
#define CUBPF_SHIM_LIVE_RB_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"
#include "ptx-rewriter/layout.h"

/* Bytes of the ring (pinned) of `lanes` lanes of `lane_bytes` (a multiple of 128), and of the
 * producers' part (device memory). */
uint64_t shim_live_rb_bytes(uint32_t lanes, uint64_t lane_bytes);
uint64_t shim_live_rb_state_bytes(uint32_t lanes);
/* Lays out a ring in `mem` (shim_live_rb_bytes bytes, zeroed here); `state` is the device address of
 * the producers' part, `ring` the device address of `mem` (the same in the tests). */
void shim_live_rb_init(void *mem, uint32_t lanes, uint32_t warps, uint64_t lane_bytes,
		  uint64_t state);
/* The header of the producers' part at device address `state` for a ring at device address
 * `ring` (the rest of the part is zero: heads, tails and drops start at 0). */
struct cubpf_rb_state shim_live_rb_state_header(uint32_t lanes, uint32_t warps, uint64_t lane_bytes,
					   uint64_t state, uint64_t ring);
/* The ring's tails (u64 per lane: the source of the host's copy to the device) and its drops
 * (u64 per lane: the destination of the copy from the device). */
void *shim_live_rb_tails(void *mem);
void *shim_live_rb_drops_copy(void *mem);

/* Called for each record taken: lane, payload and its length. */
typedef void (*live_rb_fn)(void *user, uint32_t lane, const void *data, uint32_t len);

/* Takes every complete record of every lane, in each lane's reservation order, and frees their
 * space.  `scratch` (lane_bytes) receives the records unpacked from their batches.  Returns the
 * number of records taken; a damaged batch header (a size the lane cannot hold) stops that lane
 * and counts in *damaged. */
uint64_t shim_live_rb_drain(void *mem, void *scratch, live_rb_fn fn, void *user, uint64_t *damaged);

/* The batched drain (the shim's).  A run is the records of the batches of one lane from tail up
 * to the first batch not yet committed, unpacked into scratch (lane_bytes: a run never holds
 * more) and handed over at once: recs[i].data points into scratch and is valid until fn
 * returns.  After fn the run's ring bytes are zeroed (one memset per contiguous piece) and tail
 * advances once.  A run holds at most LIVE_RB_RUN records (and whole batches: a batch of up to
 * 32 records may take it past LIVE_RB_RUN - 32); a lane gives at most one ring's worth of
 * bytes per call, so that a busy lane cannot hold the others back.  An empty lane costs one
 * load of its tail and one of the commit word there. */
#define LIVE_RB_RUN 512u
typedef void (*live_rb_run_fn)(void *user, uint32_t lane, const struct store_probe_data *recs,
			       uint32_t n);

struct live_rb_taken {
	uint64_t records, bytes; /* records and ring bytes (headers and padding included) taken */
	uint64_t runs;           /* calls of fn */
	uint64_t damaged;        /* lanes stopped by a batch header the lane cannot hold */
};

/* Drains lanes first, first + step, first + 2 step ... (step >= 1: drain threads share lanes
 * this way).  Adds to *t; returns the number of records taken. */
uint64_t shim_live_rb_drain_runs(void *mem, uint32_t first, uint32_t step, void *scratch,
			    live_rb_run_fn fn, void *user, struct live_rb_taken *t);

/* A run_fn that appends each run to a trace as PROBE records of one map with one timestamp per
 * run (CLOCK_REALTIME read once): user is a struct live_rb_trace.  Without a writer it only
 * counts. */
struct live_rb_trace {
	struct store_trace_writer *w;  /* NULL: nothing written */
	struct store_rec_probe probe;  /* prog, map, device, flags; ts_ns is set per run */
	struct store_trace_local *local; /* the calling thread's own batch, or NULL (w's lock) */
};
void shim_live_rb_to_trace(void *user, uint32_t lane, const struct store_probe_data *recs, uint32_t n);

/* Records dropped (all lanes), as of the host's last copy of the device's counts. */
uint64_t shim_live_rb_drops(const void *mem);

/* The producer's protocol on the CPU: the reference for the device code, and the tests' fake
 * producer.  The producers' part is reached through the ring header's `state`, which must be a
 * host address here.  Like the GPU, it sees the tails only as the host last copied them
 * (shim_live_rb_sync); its drops reach shim_live_rb_drops through the same copy.  A batch of k records of
 * `len` bytes each (recs: k records one after the other, len bytes apart) goes to lane `lane`
 * (modulo lanes).  Returns 0, or -1 when the batch did not fit (its k records dropped and
 * counted). */
int shim_live_rb_produce_batch(void *mem, uint32_t lane, const void *recs, uint32_t k, uint32_t len);
/* A batch of one record. */
int shim_live_rb_produce(void *mem, uint32_t lane, const void *data, uint32_t len);
/* The host's two copies, when the producers' part is host memory (tests): the ring's tails to
 * the producers' copy, the producers' drops to the ring's. */
void shim_live_rb_sync(void *mem);

#endif
