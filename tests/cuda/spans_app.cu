// spans_app: kernels of known, different durations, each timed by the program itself with its
// own cudaEventRecord pair, for tests/gpu/t_spans.sh (compared with the KSPAN records cubpf's
// shim measures) and tests/bench/b_trace_app.sh (the program's runtime with and without cubpf).
//
//   spans_app [spans]       three spin kernels (50 us, 200 us, 1 ms on %globaltimer), launched
//                           on two created streams and on the per-thread default stream (built
//                           with --default-stream per-thread: launches go through the _ptsz
//                           entry points), 4 rounds; one warm-up launch of each kernel first.
//                           Prints "warmup NAME" per warm-up launch, then one line per timed
//                           launch: "launch I NAME STREAM TARGET_US ELAPSED_US", in launch order.
//   spans_app bench [N M]   N (100) launches of a compute-bound kernel (8448 threads, a long chain of
//                           dependent FMAs: about 1 ms), then M (1000) launches of a short one (about
//                           10 us), each phase after a warm-up launch; prints "compute_ms X" and
//                           "short_ms Y" (host wall time of the phase, launches to sync) and a
//                           checksum.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

__device__ __forceinline__ unsigned long long globaltimer()
{
	unsigned long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

__device__ __forceinline__ void spin_ns(unsigned long long ns, unsigned long long *sink)
{
	unsigned long long t0 = globaltimer(), t;
	do {
		t = globaltimer();
	} while (t - t0 < ns);
	if (threadIdx.x == 0 && sink)
		*sink = t - t0;
}

__global__ void spans_spin_50us(unsigned long long *sink) { spin_ns(50000, sink); }
__global__ void spans_spin_200us(unsigned long long *sink) { spin_ns(200000, sink); }
__global__ void spans_spin_1ms(unsigned long long *sink) { spin_ns(1000000, sink); }

__global__ void spans_compute(float *x, int iters)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	float v = x[i];
	for (int k = 0; k < iters; k++)
		v = v * 0.99999f + 0.5f;
	x[i] = v;
}

#define CHECK(x)                                                                               \
	do {                                                                                   \
		cudaError_t e_ = (x);                                                          \
		if (e_ != cudaSuccess) {                                                       \
			printf("error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
			exit(1);                                                               \
		}                                                                              \
	} while (0)

typedef void (*spin_fn)(unsigned long long *);

static const struct {
	spin_fn fn;
	const char *name;
	int us;
} kernels[] = {
	{spans_spin_50us, "_Z15spans_spin_50usPy", 50},
	{spans_spin_200us, "_Z16spans_spin_200usPy", 200},
	{spans_spin_1ms, "_Z14spans_spin_1msPy", 1000},
};

static int spans(void)
{
	enum { ROUNDS = 4, NK = 3, NS = 3 };
	cudaStream_t streams[NS];
	const char *stream_names[NS] = {"A", "B", "per-thread"};
	CHECK(cudaStreamCreateWithFlags(&streams[0], cudaStreamNonBlocking));
	CHECK(cudaStreamCreateWithFlags(&streams[1], cudaStreamNonBlocking));
	streams[2] = 0; /* the per-thread default stream (--default-stream per-thread) */
	unsigned long long *sink;
	CHECK(cudaMalloc(&sink, sizeof(*sink)));
	for (int k = 0; k < NK; k++) {
		kernels[k].fn<<<1, 32>>>(sink);
		printf("warmup %s\n", kernels[k].name);
	}
	CHECK(cudaDeviceSynchronize());
	const int n = ROUNDS * NK * NS;
	cudaEvent_t ev[n][2];
	int which[n], on[n];
	for (int i = 0; i < n; i++) {
		CHECK(cudaEventCreate(&ev[i][0]));
		CHECK(cudaEventCreate(&ev[i][1]));
	}
	/* Interleaved: every stream gets every duration, the streams overlap. */
	for (int i = 0; i < n; i++) {
		int s = i % NS, k = (i / NS + s) % NK;
		which[i] = k, on[i] = s;
		CHECK(cudaEventRecord(ev[i][0], streams[s]));
		kernels[k].fn<<<1, 32, 0, streams[s]>>>(sink);
		CHECK(cudaGetLastError());
		CHECK(cudaEventRecord(ev[i][1], streams[s]));
	}
	CHECK(cudaDeviceSynchronize());
	for (int i = 0; i < n; i++) {
		float ms;
		CHECK(cudaEventElapsedTime(&ms, ev[i][0], ev[i][1]));
		printf("launch %d %s %s %d %.3f\n", i, kernels[which[i]].name, stream_names[on[i]],
		       kernels[which[i]].us, ms * 1000.0);
	}
	return 0;
}

static double phase_ms(int n, int blocks, int threads, float *x, int iters)
{
	spans_compute<<<blocks, threads>>>(x, iters); /* warm-up: cubpf instruments here */
	CHECK(cudaDeviceSynchronize());
	auto t0 = std::chrono::steady_clock::now();
	for (int r = 0; r < n; r++)
		spans_compute<<<blocks, threads>>>(x, iters);
	CHECK(cudaDeviceSynchronize());
	auto t1 = std::chrono::steady_clock::now();
	return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

static int bench(int n, int m)
{
	const int blocks = 132, threads = 64, count = blocks * threads;
	float *x, host[64];
	CHECK(cudaMalloc(&x, count * sizeof(float)));
	CHECK(cudaMemset(x, 0, count * sizeof(float)));
	double compute = phase_ms(n, blocks, threads, x, 500000);
	double shortk = phase_ms(m, 8, 64, x, 2000);
	CHECK(cudaMemcpy(host, x, sizeof(host), cudaMemcpyDeviceToHost));
	double sum = 0;
	for (int i = 0; i < 64; i++)
		sum += host[i];
	printf("compute_ms %.3f\nshort_ms %.3f\nchecksum %.4f\n", compute, shortk, sum);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "bench"))
		return bench(argc > 2 ? atoi(argv[2]) : 100, argc > 3 ? atoi(argv[3]) : 1000);
	return spans();
}
