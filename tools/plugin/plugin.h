/* cubpf-bpf-plugin: private declarations shared by its engines (tools/plugin/). */
#ifndef CUBPF_TOOLS_PLUGIN_H
#define CUBPF_TOOLS_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#include "ptx-rewriter/ptx.h"

/* The PTX module the gpu engine loads for a raw program (for --ptx-out and tests). */
int tool_plugin_gpu_ptx(const void *code, size_t code_len, struct ptx_buf *out, char *err,
		   size_t errlen);
/* Runs a raw program on CUDA device 0: r1 = device copy of mem, r2 = mem_len. */
int tool_plugin_gpu_run(const void *code, size_t code_len, void *mem, size_t mem_len, uint64_t *r0,
		   char *err, size_t errlen);

#endif
