/* shim/live/clock.c: clock calibration between the host's CLOCK_REALTIME and the device's
 * %globaltimer, so that host and device timestamps can be subtracted.
 *
 * A kernel of cubpf's own (one thread: store %globaltimer) runs on cubpf's stream between two
 * host clock reads; the GPU's reading lies between them, so offset = midpoint - gpu with an
 * uncertainty of half the round trip.  The best of several round trips is kept.  It never
 * touches the application's streams.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "shim/live/internal.h"

/* cubpf's own kernels, one module per context: the clock, and the zero scan of the maps'
 * allocation (maps.c: one flag byte per SHIM_LIVE_SCAN_BLOCK bytes, set when any is non-zero,
 * 256 threads of 16 bytes each a block; block 0 also stores `seq` after the flags, so that the
 * host can tell the scan ran). */
static const char clock_ptx[] =
	".version 7.0\n.target sm_70\n.address_size 64\n"
	".visible .entry cubpf_clock(.param .u64 out)\n{\n"
	"\t.reg .b64 %rd<3>;\n"
	"\tld.param.u64 %rd1, [out];\n"
	"\tcvta.to.global.u64 %rd1, %rd1;\n"
	"\tmov.u64 %rd2, %globaltimer;\n"
	"\tst.global.u64 [%rd1], %rd2;\n"
	"\tret;\n}\n"
	".visible .entry cubpf_nonzero(.param .u64 src, .param .u64 flags, .param .u64 blocks, "
	".param .u64 seq)\n{\n"
	"\t.reg .pred %p<4>;\n\t.reg .b16 %rs<2>;\n\t.reg .b32 %r<3>;\n\t.reg .b64 %rd<12>;\n"
	"\tld.param.u64 %rd1, [src];\n"
	"\tld.param.u64 %rd2, [flags];\n"
	"\tcvta.to.global.u64 %rd1, %rd1;\n"
	"\tcvta.to.global.u64 %rd2, %rd2;\n"
	"\tmov.u32 %r1, %ctaid.x;\n"
	"\tmov.u32 %r2, %tid.x;\n"
	"\tmul.wide.u32 %rd3, %r1, 4096;\n"
	"\tmul.wide.u32 %rd4, %r2, 16;\n"
	"\tadd.s64 %rd5, %rd1, %rd3;\n"
	"\tadd.s64 %rd5, %rd5, %rd4;\n"
	"\tld.global.v2.u64 {%rd6, %rd7}, [%rd5];\n"
	"\tor.b64 %rd8, %rd6, %rd7;\n"
	"\tsetp.ne.u64 %p1, %rd8, 0;\n"
	"\tbar.red.or.pred %p2, 0, %p1;\n"
	"\tsetp.ne.u32 %p3, %r2, 0;\n"
	"\t@%p3 bra DONE;\n"
	"\tselp.u16 %rs1, 1, 0, %p2;\n"
	"\tcvt.u64.u32 %rd9, %r1;\n"
	"\tadd.s64 %rd10, %rd2, %rd9;\n"
	"\tst.global.u8 [%rd10], %rs1;\n"
	"\tsetp.ne.u32 %p3, %r1, 0;\n"
	"\t@%p3 bra DONE;\n"
	"\tld.param.u64 %rd9, [blocks];\n"
	"\tld.param.u64 %rd11, [seq];\n"
	"\tadd.s64 %rd9, %rd9, 7;\n"
	"\tand.b64 %rd9, %rd9, -8;\n"
	"\tadd.s64 %rd10, %rd2, %rd9;\n"
	"\tst.global.u64 [%rd10], %rd11;\n"
	"DONE:\n"
	"\tret;\n}\n";

/* Round trips: the best of 7 goes into the trace's CLOCK record; without a trace the offset is
 * only logged, and 3 do. */
#define ROUNDS 7
#define ROUNDS_UNTRACED 3

/* The kernel compiled once per process and compute capability, so that a context loads a cubin
 * instead of JIT-compiling the PTX (an application that makes and destroys contexts in a loop
 * paid a JIT in each).  Not counted as a JIT of instrumented code. */
#define CLOCK_CUBINS 8
static struct {
	uint32_t sm;
	void *cubin;
} cubins[CLOCK_CUBINS];
static pthread_mutex_t cubins_lock = PTHREAD_MUTEX_INITIALIZER;

/* The driver's JIT of clock_ptx for the current context's device: a malloc'ed cubin, or NULL. */
static void *clock_jit(void)
{
	CUlinkState st;
	void *out = NULL, *copy = NULL;
	size_t size = 0;
	if (shim_live_cu.cuLinkCreate_v2(0, NULL, NULL, &st) != CUDA_SUCCESS)
		return NULL;
	if (shim_live_cu.cuLinkAddData_v2(st, CU_JIT_INPUT_PTX, (void *)clock_ptx, sizeof(clock_ptx),
				     "cubpf_clock.ptx", 0, NULL, NULL) == CUDA_SUCCESS &&
	    shim_live_cu.cuLinkComplete(st, &out, &size) == CUDA_SUCCESS && size &&
	    (copy = malloc(size)))
		memcpy(copy, out, size);
	shim_live_cu.cuLinkDestroy(st);
	return copy;
}

/* The cubin for compute capability sm (made at its first use), or the PTX when it cannot be
 * had (the driver JIT-compiles it at the load, as it always did). */
static const void *clock_image(uint32_t sm)
{
	const void *image = clock_ptx;
	pthread_mutex_lock(&cubins_lock);
	for (int i = 0; sm && i < CLOCK_CUBINS; i++) {
		if (cubins[i].sm == sm) {
			image = cubins[i].cubin;
			break;
		}
		if (!cubins[i].sm) {
			void *cubin = clock_jit();
			if (cubin) {
				cubins[i].sm = sm;
				cubins[i].cubin = cubin;
				image = cubin;
			}
			break;
		}
	}
	pthread_mutex_unlock(&cubins_lock);
	return image;
}

/* Set on a thread while it launches one of cubpf's own kernels: the Sanitizer backend's launch
 * callback leaves those alone (a launch made under maps.c's lock, whose callback asked for that
 * lock again, hung). */
static __thread bool own_launching;

bool shim_live_own_launching(void)
{
	return own_launching;
}

CUresult shim_live_own_launch(CUfunction f, unsigned grid, unsigned block, CUstream s, void **args)
{
	own_launching = true;
	CUresult r = shim_live_cu.cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, s, args, NULL);
	own_launching = false;
	return r;
}

int shim_live_own_kernels(struct live_ctx *c)
{
	if (c->clock_fn)
		return 0;
	if (shim_live_cu.cuModuleLoadData(&c->clock_mod, clock_image(c->sm)) != CUDA_SUCCESS ||
	    shim_live_cu.cuModuleGetFunction(&c->clock_fn, c->clock_mod, "cubpf_clock") != CUDA_SUCCESS ||
	    shim_live_cu.cuModuleGetFunction(&c->scan_fn, c->clock_mod, "cubpf_nonzero") != CUDA_SUCCESS) {
		c->clock_fn = c->scan_fn = NULL;
		return -1;
	}
	return 0;
}

static int clock_load(struct live_ctx *c)
{
	if (shim_live_own_kernels(c) != 0)
		return -1;
	/* (the word is in the context's one allocation, maps.c, when that was made) */
	if (!c->clock_buf && shim_live_cu.cuMemAlloc_v2(&c->clock_buf, sizeof(uint64_t)) != CUDA_SUCCESS)
		return -1;
	return 0;
}

/* One round trip: host before, device, host after.  Returns 0 and the three readings. */
static int round_trip(struct live_ctx *c, uint64_t *t0, uint64_t *gpu, uint64_t *t1)
{
	void *args[] = { &c->clock_buf };
	*gpu = 0;
	*t0 = shim_now_ns();
	CUresult r = shim_live_own_launch(c->clock_fn, 1, 1, c->stream, args);
	if (r == CUDA_SUCCESS)
		r = shim_live_cu.cuStreamSynchronize(c->stream);
	*t1 = shim_now_ns();
	if (r == CUDA_SUCCESS)
		r = shim_live_cu.cuMemcpyDtoHAsync_v2(gpu, c->clock_buf, sizeof(*gpu), c->stream);
	if (r == CUDA_SUCCESS)
		r = shim_live_cu.cuStreamSynchronize(c->stream);
	return r == CUDA_SUCCESS && *gpu ? 0 : -1;
}

int shim_live_clock_calibrate(struct live_ctx *c)
{
	uint64_t best = UINT64_MAX, host = 0, gpu_best = 0;
	if (clock_load(c) != 0)
		return -1;
	for (int i = 0; i < (shim_live_session.trace ? ROUNDS : ROUNDS_UNTRACED); i++) {
		uint64_t t0, gpu, t1;
		if (round_trip(c, &t0, &gpu, &t1) != 0)
			return -1;
		if (t1 - t0 < best) {
			best = t1 - t0;
			host = t0 + (t1 - t0) / 2;
			gpu_best = gpu;
		}
	}
	struct store_rec_clock rec = { .host_ns = host, .gpu_ns = gpu_best,
				       .uncertainty_ns = best / 2, .device = (uint32_t)c->dev };
	if (shim_live_session.trace)
		store_trace_clock(shim_live_session.trace, &rec);
	shim_log(SHIM_LOG_INFO, "live: clock device %d: host - gpu = %" PRId64 " ns (+/- %" PRIu64
		 " ns)", (int)c->dev, (int64_t)(host - gpu_best), best / 2);
	return 0;
}
