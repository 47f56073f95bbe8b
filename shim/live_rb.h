/* shim/live_rb.h: the host side of GPU ring buffers (layout and protocol: cubpf_abi.h,
 * "GPU ring buffers").  Plain memory operations, no driver calls: the shim applies them to pinned
 * mapped memory, the tests to ordinary memory with a CPU producer. */
#ifndef CUBPF_SHIM_LIVE_RB_H
#define CUBPF_SHIM_LIVE_RB_H

#include <stddef.h>
#include <stdint.h>

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
/* Records dropped so far (all lanes). */
uint64_t live_rb_drops(const void *mem);

/* The producer's protocol on the CPU: the reference for the device code, and the tests' fake
 * producer.  Returns 0, or -1 when the record did not fit (dropped and counted). */
int live_rb_produce(void *mem, uint32_t lane, const void *data, uint32_t len);

#endif
