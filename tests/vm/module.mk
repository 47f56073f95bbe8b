# tests/vm: the vm/ library tests (test_vm): conformance vectors (needs $(SHARED)), verifier
# corpus, C programs built at test time with $(CLANG), damaged objects, maps and helpers.
# They also run build/bin/cubpf-bpf-plugin and read tools/probes/*.bpf.c.
TEST_VM_SRCS := $(wildcard tests/vm/*.c)
$(BUILD)/tests/test_vm: $(call objs,$(TEST_VM_SRCS)) $(VM_LIB) $(CUBIN_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $(call objs,$(TEST_VM_SRCS)) $(VM_LIB) $(CUBIN_LIB) $(DEP_LIBS) -lcmocka $(LDLIBS)
TEST_BINS += $(BUILD)/tests/test_vm

# Benchmark (CPU): interpreter and verifier speed, run by tests/bench/b_vm.sh.
$(BUILD)/bench/vm_bench: $(call objs,tests/bench/vm_bench.c) $(VM_LIB) $(CUBIN_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(DEP_LIBS) $(LDLIBS)
BENCH_BINS += $(BUILD)/bench/vm_bench
