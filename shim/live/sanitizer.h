/* shim/live/sanitizer.h: what cubpf uses of NVIDIA's Compute Sanitizer API, declared by cubpf.
 *
 * cubpf does not ship NVIDIA's headers: these are its own minimal declarations of the few
 * functions, constants and the one structure prefix it uses, written from the API's documented
 * signatures and values (CUDA 13.0's libsanitizer-public.so; the values were checked against
 * that release's headers).  The library is opened at run time (dlopen), never linked, so these
 * are function-pointer types.  Folder-private: shim/live/sanitizer.c and the CPU tests' fake
 * library (tests/live/fake_sanitizer.c) include it.
 */
#ifndef CUBPF_SHIM_LIVE_SANITIZER_H
#define CUBPF_SHIM_LIVE_SANITIZER_H

#include <stddef.h>
#include <stdint.h>

/* The library's file name, in the toolkit's compute-sanitizer folder and in the
 * nvidia-cuda-sanitizer-api wheel. */
#define SHIM_SAN_LIBRARY "libsanitizer-public.so"

typedef int shim_san_result;                 /* SanitizerResult: 0 is success */
#define SHIM_SAN_SUCCESS 0

/* Callback domains and the ids cubpf listens to. */
#define SHIM_SAN_DOMAIN_RESOURCE 3
#define SHIM_SAN_DOMAIN_LAUNCH 5
#define SHIM_SAN_CBID_LAUNCH_BEGIN 1

typedef struct shim_san_subscriber_st *shim_san_subscriber;
typedef struct shim_san_stream_st *shim_san_stream;   /* Sanitizer_StreamHandle */
typedef struct shim_san_launch_st *shim_san_launch;   /* Sanitizer_LaunchHandle */

/* The data of a launch callback: the leading fields of the API's structure, in its order (cubpf
 * reads nothing after hLaunch; the library's structure has more after it). */
struct shim_san_launch_data {
	void *context;                           /* CUcontext */
	void *stream;                            /* CUstream */
	shim_san_stream hStream;
	void *module;                            /* CUmodule */
	void *function;                          /* CUfunction */
	const char *functionName;
	uint32_t gridDim_x, gridDim_y, gridDim_z;
	uint32_t blockDim_x, blockDim_y, blockDim_z;
	uint32_t clusterDim_x, clusterDim_y, clusterDim_z;
	uint64_t gridId;
	shim_san_launch hLaunch;
};

typedef void (*shim_san_callback)(void *userdata, int domain, uint32_t cbid, const void *cbdata);

/* The functions, by the names the library exports. */
struct shim_san_api {
	shim_san_result (*sanitizerSubscribe)(shim_san_subscriber *sub, shim_san_callback cb,
					      void *userdata);
	shim_san_result (*sanitizerUnsubscribe)(shim_san_subscriber sub);
	shim_san_result (*sanitizerEnableDomain)(uint32_t enable, shim_san_subscriber sub,
						 int domain);
	shim_san_result (*sanitizerAddPatchesFromFile)(const char *path, void *ctx);
	shim_san_result (*sanitizerPatchInstructions)(int instruction, void *module,
						      const char *callback);
	shim_san_result (*sanitizerPatchModule)(void *module);
	shim_san_result (*sanitizerSetLaunchCallbackData)(shim_san_launch launch, void *function,
							  shim_san_stream stream,
							  const void *userdata);
	shim_san_result (*sanitizerAlloc)(void *ctx, void **dev, size_t size);
	shim_san_result (*sanitizerMemcpyHostToDeviceAsync)(void *dst, void *src, size_t count,
							    shim_san_stream stream);
	/* optional: messages */
	shim_san_result (*sanitizerGetResultString)(shim_san_result r, const char **str);
};

#endif
