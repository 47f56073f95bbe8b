// The shim's end-to-end program (tests/gpu/t_shim_apps.sh): runtime API, driver API, several
// streams and CUDA graphs, each result checked on the host and printed as a checksum, so that
// a run under the shim can be compared line for line with a run without it.
// Integer kernels only: the output must not depend on the order of floating-point sums.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <cuda.h>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
	fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)
#define CHECK_DRV(x) do { CUresult e_ = (x); if (e_ != CUDA_SUCCESS) { const char *s_ = "?"; \
	cuGetErrorString(e_, &s_); fprintf(stderr, "%s:%d: %s (%d)\n", __FILE__, __LINE__, s_, (int)e_); \
	exit(1); } } while (0)

static const int N = 1 << 20;

__global__ void mix(const uint32_t *in, uint32_t *out, uint32_t salt, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		out[i] = in[i] * 2654435761u + salt;
}

__global__ void increment(uint32_t *p, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		p[i] += 1;
}

static uint64_t checksum(const uint32_t *v, int n)
{
	uint64_t h = 1469598103934665603ull;
	for (int i = 0; i < n; i++)
		h = (h ^ v[i]) * 1099511628211ull;
	return h;
}

static int failures;

static void report(const char *what, uint64_t got, uint64_t want)
{
	printf("%-28s checksum=%016llx %s\n", what, (unsigned long long)got, got == want ? "ok" : "MISMATCH");
	failures += got != want;
}

// Four streams, each copying its quarter in, mixing it and copying it out.
static void runtime_streams(const uint32_t *host_in)
{
	const int nstreams = 4, part = N / nstreams;
	uint32_t *d_in, *d_out, *h_out;
	CHECK(cudaMalloc(&d_in, N * sizeof(uint32_t)));
	CHECK(cudaMalloc(&d_out, N * sizeof(uint32_t)));
	CHECK(cudaMallocHost(&h_out, N * sizeof(uint32_t)));
	CHECK(cudaMemset(d_out, 0, N * sizeof(uint32_t)));
	cudaStream_t s[nstreams];
	for (int k = 0; k < nstreams; k++) {
		CHECK(cudaStreamCreateWithFlags(&s[k], cudaStreamNonBlocking));
		size_t off = (size_t)k * part;
		CHECK(cudaMemcpyAsync(d_in + off, host_in + off, part * sizeof(uint32_t), cudaMemcpyHostToDevice, s[k]));
		mix<<<part / 256, 256, 0, s[k]>>>(d_in + off, d_out + off, 7u * k, part);
		CHECK(cudaGetLastError());
		CHECK(cudaMemcpyAsync(h_out + off, d_out + off, part * sizeof(uint32_t), cudaMemcpyDeviceToHost, s[k]));
	}
	for (int k = 0; k < nstreams; k++) {
		CHECK(cudaStreamSynchronize(s[k]));
		CHECK(cudaStreamDestroy(s[k]));
	}
	uint32_t *want = (uint32_t *)malloc(N * sizeof(uint32_t));
	for (int i = 0; i < N; i++)
		want[i] = host_in[i] * 2654435761u + 7u * (uint32_t)(i / part);
	report("runtime: 4 streams", checksum(h_out, N), checksum(want, N));
	free(want);
	CHECK(cudaFreeHost(h_out));
	CHECK(cudaFree(d_in));
	CHECK(cudaFree(d_out));
}

// A graph captured from a stream (three increments), launched five times.
static void runtime_graph(void)
{
	uint32_t *d, *h = (uint32_t *)malloc(N * sizeof(uint32_t));
	CHECK(cudaMalloc(&d, N * sizeof(uint32_t)));
	CHECK(cudaMemset(d, 0, N * sizeof(uint32_t)));
	cudaStream_t s;
	CHECK(cudaStreamCreate(&s));
	cudaGraph_t g;
	cudaGraphExec_t ge;
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	for (int k = 0; k < 3; k++)
		increment<<<N / 256, 256, 0, s>>>(d, N);
	CHECK(cudaStreamEndCapture(s, &g));
	CHECK(cudaGraphInstantiate(&ge, g, 0));
	for (int r = 0; r < 5; r++)
		CHECK(cudaGraphLaunch(ge, s));
	CHECK(cudaStreamSynchronize(s));
	CHECK(cudaMemcpy(h, d, N * sizeof(uint32_t), cudaMemcpyDeviceToHost));
	uint32_t *want = (uint32_t *)malloc(N * sizeof(uint32_t));
	for (int i = 0; i < N; i++)
		want[i] = 15;
	report("runtime: captured graph", checksum(h, N), checksum(want, N));
	CHECK(cudaGraphExecDestroy(ge));
	CHECK(cudaGraphDestroy(g));
	CHECK(cudaStreamDestroy(s));
	CHECK(cudaFree(d));
	free(h);
	free(want);
}

// Driver API: a PTX module (JIT) and the same PTX as a library, launched through a CUfunction,
// a CUkernel passed as a CUfunction, cuLaunchKernelEx, and a kernel node of a driver graph.
static const char ptx[] =
	".version 8.0\n.target sm_90\n.address_size 64\n"
	".visible .entry add_index(.param .u64 p, .param .u32 n)\n{\n"
	"\t.reg .pred %p<2>;\n\t.reg .b32 %r<8>;\n\t.reg .b64 %rd<5>;\n"
	"\tld.param.u64 %rd1, [p];\n\tld.param.u32 %r1, [n];\n"
	"\tmov.u32 %r2, %ctaid.x;\n\tmov.u32 %r3, %ntid.x;\n\tmov.u32 %r4, %tid.x;\n"
	"\tmad.lo.s32 %r5, %r2, %r3, %r4;\n\tsetp.ge.u32 %p1, %r5, %r1;\n\t@%p1 bra DONE;\n"
	"\tcvta.to.global.u64 %rd2, %rd1;\n\tmul.wide.u32 %rd3, %r5, 4;\n\tadd.s64 %rd4, %rd2, %rd3;\n"
	"\tld.global.u32 %r6, [%rd4];\n\tadd.u32 %r7, %r6, %r5;\n\tst.global.u32 [%rd4], %r7;\n"
	"DONE:\n\tret;\n}\n";

static void driver_api(void)
{
	CHECK_DRV(cuInit(0));
	CUdevice dev;
	CUcontext ctx;
	CHECK_DRV(cuDeviceGet(&dev, 0));
	CHECK_DRV(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK_DRV(cuCtxPushCurrent(ctx));
	CUmodule mod;
	CUfunction f;
	CUlibrary lib;
	CUkernel k;
	CHECK_DRV(cuModuleLoadData(&mod, ptx));
	CHECK_DRV(cuModuleGetFunction(&f, mod, "add_index"));
	CHECK_DRV(cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0));
	CHECK_DRV(cuLibraryGetKernel(&k, lib, "add_index"));
	CUdeviceptr d;
	unsigned n = N;
	CHECK_DRV(cuMemAlloc(&d, N * sizeof(uint32_t)));
	CHECK_DRV(cuMemsetD32(d, 1, N));
	CUstream s;
	CHECK_DRV(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	void *args[] = { &d, &n };
	// 1: CUfunction; 2: CUkernel passed as CUfunction; 3: cuLaunchKernelEx.
	CHECK_DRV(cuLaunchKernel(f, N / 256, 1, 1, 256, 1, 1, 0, s, args, NULL));
	CHECK_DRV(cuLaunchKernel((CUfunction)k, N / 256, 1, 1, 256, 1, 1, 0, s, args, NULL));
	CUlaunchConfig cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.gridDimX = N / 256; cfg.gridDimY = 1; cfg.gridDimZ = 1;
	cfg.blockDimX = 256; cfg.blockDimY = 1; cfg.blockDimZ = 1;
	cfg.hStream = s;
	CHECK_DRV(cuLaunchKernelEx(&cfg, f, args, NULL));
	// 4: a driver graph with one kernel node, launched twice.
	CUgraph g;
	CUgraphExec ge;
	CUgraphNode node;
	CUDA_KERNEL_NODE_PARAMS kp;
	memset(&kp, 0, sizeof(kp));
	kp.func = f;
	kp.gridDimX = N / 256; kp.gridDimY = 1; kp.gridDimZ = 1;
	kp.blockDimX = 256; kp.blockDimY = 1; kp.blockDimZ = 1;
	kp.kernelParams = args;
	CHECK_DRV(cuGraphCreate(&g, 0));
	CHECK_DRV(cuGraphAddKernelNode(&node, g, NULL, 0, &kp));
	CHECK_DRV(cuGraphInstantiate(&ge, g, 0));
	CHECK_DRV(cuGraphLaunch(ge, s));
	CHECK_DRV(cuGraphLaunch(ge, s));
	CHECK_DRV(cuStreamSynchronize(s));
	uint32_t *h = (uint32_t *)malloc(N * sizeof(uint32_t)), *want = (uint32_t *)malloc(N * sizeof(uint32_t));
	CHECK_DRV(cuMemcpyDtoH(h, d, N * sizeof(uint32_t)));
	for (int i = 0; i < N; i++)
		want[i] = 1 + 5u * (uint32_t)i;
	report("driver: module+library+graph", checksum(h, N), checksum(want, N));
	CHECK_DRV(cuGraphExecDestroy(ge));
	CHECK_DRV(cuGraphDestroy(g));
	CHECK_DRV(cuStreamDestroy(s));
	CHECK_DRV(cuMemFree(d));
	CHECK_DRV(cuModuleUnload(mod));
	CHECK_DRV(cuLibraryUnload(lib));
	CHECK_DRV(cuCtxPopCurrent(&ctx));
	CHECK_DRV(cuDevicePrimaryCtxRelease(dev));
	free(h);
	free(want);
}

int main(void)
{
	int count = 0;
	CHECK(cudaGetDeviceCount(&count));
	cudaDeviceProp prop;
	CHECK(cudaGetDeviceProperties(&prop, 0));
	printf("devices: %d, device 0 is sm_%d%d\n", count, prop.major, prop.minor);
	uint32_t *host_in;
	CHECK(cudaMallocHost(&host_in, N * sizeof(uint32_t)));
	for (int i = 0; i < N; i++)
		host_in[i] = (uint32_t)i * 40503u + 17u;
	runtime_streams(host_in);
	runtime_graph();
	driver_api();
	CHECK(cudaFreeHost(host_in));
	CHECK(cudaDeviceSynchronize());
	printf("shim_app: %s\n", failures ? "FAILED" : "all results correct");
	return failures ? 1 : 0;
}
