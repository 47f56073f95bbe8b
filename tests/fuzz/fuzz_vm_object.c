/* libFuzzer target: any bytes as an eBPF ELF object; what loads is verified (bounded effort). */
#include <stddef.h>
#include <stdint.h>

#include "vm/vm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vm_object *obj;
	char err[256], log[2048];
	if (vm_object_load(data, size, "fuzz.o", &obj, err, sizeof(err)) != 0)
		return 0;
	struct vm_verify_opts opts = {.max_processed = 20000};
	for (uint32_t i = 0; i < obj->prog_cnt; i++) {
		char text[160];
		vm_verify(obj, i, &opts, NULL, log, sizeof(log));
		for (uint32_t pc = 0; pc < obj->progs[i].insn_cnt;)
			pc += (uint32_t)vm_disasm_insn_at(&obj->progs[i].insns[pc],
							  obj->progs[i].insn_cnt - pc, pc, obj, text,
							  sizeof(text));
	}
	vm_object_free(obj);
	return 0;
}
