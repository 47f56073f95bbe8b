/* libFuzzer target for the verifier's soundness: the input is a program (first byte: kind,
 * then instructions) with a fixed set of maps.  Whatever the verifier accepts is run on the
 * fast interpreter, which trusts the verifier: ASan/UBSan then catch any unsafe acceptance. */
#include <stdlib.h>
#include <string.h>

#include "vm/vm.h"

static void set_map(struct vm_map_def *m, const char *name, uint32_t type, uint32_t k, uint32_t v,
		    uint32_t n, uint32_t flags, enum vm_map_origin origin)
{
	memset(m, 0, sizeof(*m));
	strcpy(m->name, name);
	m->type = type, m->key_size = k, m->value_size = v, m->max_entries = n;
	m->flags = flags, m->origin = origin;
}

static void add_maps(struct vm_object *obj)
{
	obj->maps = calloc(5, sizeof(*obj->maps));
	if (!obj->maps)
		return;
	obj->map_cnt = 5;
	set_map(&obj->maps[0], "h", CUBPF_MAP_HASH, 4, 8, 8, 0, VM_MAP_USER);
	set_map(&obj->maps[1], "a", CUBPF_MAP_ARRAY, 4, 16, 4, 0, VM_MAP_USER);
	set_map(&obj->maps[2], ".rodata", CUBPF_MAP_ARRAY, 4, 16, 1, BPF_F_RDONLY_PROG, VM_MAP_RODATA);
	obj->maps[2].init = calloc(1, 16);
	set_map(&obj->maps[3], "rb", CUBPF_MAP_RINGBUF, 0, 0, 4096, 0, VM_MAP_USER);
	set_map(&obj->maps[4], "p", CUBPF_MAP_PERCPU_ARRAY, 4, 8, 2, 0, VM_MAP_USER);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 9)
		return 0;
	enum vm_prog_kind kind = (enum vm_prog_kind)(data[0] % VM_PROG_RAW);
	uint32_t n = (uint32_t)((size - 1) / 8);
	struct bpf_insn *insns = malloc(n * sizeof(*insns));
	if (!insns)
		return 0;
	memcpy(insns, data + 1, n * sizeof(*insns));
	char err[256], log[1024];
	struct vm_object *obj = vm_object_from_insns(insns, n, kind, err, sizeof(err));
	free(insns);
	if (!obj)
		return 0;
	add_maps(obj);
	struct vm_verify_opts opts = {.max_processed = 20000};
	if (obj->maps && vm_verify(obj, 0, &opts, NULL, log, sizeof(log)) == 0) {
		struct vm_runtime *rt = vm_runtime_new(obj, err, sizeof(err));
		struct vm_exec *ex = rt ? vm_exec_new(rt, 0, err, sizeof(err)) : NULL;
		uint8_t ctx[sizeof(struct cubpf_kernel_ctx)] __attribute__((aligned(8))) = {0};
		size_t ctx_size = kind == VM_PROG_MEMPROBE ? sizeof(struct cubpf_mem_ctx)
				  : kind >= VM_PROG_UPROBE ? sizeof(struct cubpf_api_ctx)
							   : sizeof(struct cubpf_kernel_ctx);
		uint64_t r0;
		if (ex)
			vm_exec_run(ex, ctx, ctx_size, &r0, err, sizeof(err));
		vm_exec_free(ex);
		vm_runtime_free(rt);
	}
	vm_object_free(obj);
	return 0;
}
