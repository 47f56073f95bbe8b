# tests/ptx: the PTX reader, probe injection and eBPF->PTX code generator (CPU), plus the
# prebuilt inputs of the GPU scripts tests/gpu/t_ptx_*.sh and tests/bench/b_ptx.sh.

PTX_FIXDIR  := $(FIXTURES)/ptx
PTX_FIX_CU  := vecadd vecadd_loop reduce early_ret calls asmvec
PTX_FIXES   := $(patsubst %,$(PTX_FIXDIR)/%.ptx,$(PTX_FIX_CU)) $(PTX_FIXDIR)/vecadd_g.ptx \
	$(PTX_FIXDIR)/sync.ptx
PTX_PROBEDIR := $(BUILD)/ptx-probes
PTX_PROBES  := $(patsubst tests/ptx/probes/%.bpf.c,$(PTX_PROBEDIR)/%.bpf.o,$(wildcard tests/ptx/probes/*.bpf.c))

# Fixture kernels: nvcc -ptx, .target sm_80 so that they assemble for sm_80 and sm_90.
$(PTX_FIXDIR)/%.ptx: tests/ptx/kernels/%.cu
	@mkdir -p $(@D)
	$(NVCC) -arch=sm_80 -ptx -O3 $< -o $@
$(PTX_FIXDIR)/vecadd_g.ptx: tests/ptx/kernels/vecadd.cu
	@mkdir -p $(@D)
	$(NVCC) -arch=sm_80 -ptx -G $< -o $@

$(PTX_PROBEDIR)/%.bpf.o: tests/ptx/probes/%.bpf.c tests/ptx/probes/probe.h $(PROBE_HEADER_DEPS)
	@mkdir -p $(@D)
	$(CLANG) -O2 -g -target bpf -I tools/include -I/usr/include/x86_64-linux-gnu -c $< -o $@

# Pointer shapes of issue 14 (class 7) and the differential harness (tests/ptx/ptxdiff.h):
# ptx-diff runs any object's programs on the interpreter and on the PTX path and compares.
PTX_SHAPEDIR := $(BUILD)/ptx-shapes
PTX_SHAPES  := $(patsubst tests/ptx/shapes/%.bpf.c,$(PTX_SHAPEDIR)/%.bpf.o,$(wildcard tests/ptx/shapes/*.bpf.c))
$(PTX_SHAPEDIR)/%.bpf.o: tests/ptx/shapes/%.bpf.c $(PROBE_HEADER_DEPS)
	@mkdir -p $(@D)
	$(CLANG) -O2 -g -target bpf -I tools/include -I/usr/include/x86_64-linux-gnu -c $< -o $@
# Probes calling GPU helpers on addresses they may not read (tests/gpu/t_ptx_safety.sh).
PTX_SAFEDIR := $(BUILD)/ptx-safety
PTX_SAFE    := $(patsubst tests/ptx/safety/%.bpf.c,$(PTX_SAFEDIR)/%.bpf.o,$(wildcard tests/ptx/safety/*.bpf.c))
$(PTX_SAFEDIR)/%.bpf.o: tests/ptx/safety/%.bpf.c $(PROBE_HEADER_DEPS)
	@mkdir -p $(@D)
	$(CLANG) -O2 -g -target bpf -I tools/include -I/usr/include/x86_64-linux-gnu -c $< -o $@
PTXDIFF_SRCS := tests/ptx/ptxdiff.c
$(BUILD)/bin/ptx-diff: $(call objs,tests/ptx/ptxdiff_main.c $(PTXDIFF_SRCS)) $(PTX_LIB) $(VM_LIB) $(CUBIN_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $(call objs,tests/ptx/ptxdiff_main.c $(PTXDIFF_SRCS)) $(PTX_LIB) \
		$(VM_LIB) $(CUBIN_LIB) $(DEP_LIBS) $(LDLIBS)
BINS += $(BUILD)/bin/ptx-diff

$(BUILD)/tests/test_ptx_diff: $(call objs,tests/ptx/test_ptx_diff.c $(PTXDIFF_SRCS)) $(PTX_LIB) \
		$(VM_LIB) $(CUBIN_LIB) | $(PTX_SHAPES) $(PTX_SAFE) $(PTX_PROBES)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $(call objs,tests/ptx/test_ptx_diff.c $(PTXDIFF_SRCS)) $(PTX_LIB) \
		$(VM_LIB) $(CUBIN_LIB) $(DEP_LIBS) -lcmocka $(LDLIBS)
TEST_BINS += $(BUILD)/tests/test_ptx_diff

TEST_PTX_SRCS := tests/ptx/test_ptx.c tests/ptx/conf.c
$(BUILD)/tests/test_ptx: $(call objs,$(TEST_PTX_SRCS)) $(PTX_LIB) $(VM_LIB) $(CUBIN_LIB) \
		| $(PTX_FIXES) $(PTX_PROBES) $(PROBE_OBJS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $(call objs,$(TEST_PTX_SRCS)) $(PTX_LIB) $(VM_LIB) $(CUBIN_LIB) \
		$(DEP_LIBS) -lcmocka $(LDLIBS)
TEST_BINS += $(BUILD)/tests/test_ptx

# Every refusal of the code generator with the verifier's reason (reads ptx-rewriter/*.c).
$(BUILD)/tests/test_ptx_refusals: $(call objs,tests/ptx/test_ptx_refusals.c) $(PTX_LIB) $(VM_LIB) \
		$(CUBIN_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $(call objs,tests/ptx/test_ptx_refusals.c) $(PTX_LIB) $(VM_LIB) \
		$(CUBIN_LIB) $(DEP_LIBS) -lcmocka $(LDLIBS)
TEST_BINS += $(BUILD)/tests/test_ptx_refusals

$(BUILD)/tests/test_ptx_gen: $(call objs,tests/ptx/test_ptx_gen.c) $(PTX_LIB) $(VM_LIB) $(CUBIN_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $(call objs,tests/ptx/test_ptx_gen.c) $(PTX_LIB) $(VM_LIB) \
		$(CUBIN_LIB) $(DEP_LIBS) -lcmocka $(LDLIBS)
TEST_BINS += $(BUILD)/tests/test_ptx_gen

# ---- GPU inputs, built here (the GPU machine has no clang): $(BUILD)/gpu/ ------------------
# Harnesses use the driver API only: plain C against cuda.h, linked with the toolkit's stub
# libcuda.so (the real driver is found at run time by its soname).
ifneq ($(SAN),1)
PTX_GPU      := $(BUILD)/gpu
PTX_GPU_CC   := $(CC) -std=gnu11 -O2 -g -Wall -Wextra -Werror -I. -I$(CUDA_HOME)/include
PTX_GPU_LINK := -L$(dir $(CUDA_STUB)) -lcuda
PTX_CUBPF    := $(BUILD)/bin/cubpf

$(PTX_GPU)/ptx_conf_gen: tests/ptx/gpu/conf_gen.c tests/ptx/conf.c tests/ptx/conf.h $(PTX_LIB) $(VM_LIB) \
		$(CUBIN_LIB)
	@mkdir -p $(@D)
	$(PTX_GPU_CC) -o $@ tests/ptx/gpu/conf_gen.c tests/ptx/conf.c $(PTX_LIB) $(VM_LIB) $(CUBIN_LIB)
$(PTX_GPU)/ptx_conformance.ptx: $(PTX_GPU)/ptx_conf_gen
	$(PTX_GPU)/ptx_conf_gen $(SHARED)/bpf_conformance $(PTX_GPU)
$(PTX_GPU)/ptx_conf_run: tests/ptx/gpu/conf_run.c tests/ptx/gpu/common.h
	@mkdir -p $(@D)
	$(PTX_GPU_CC) -o $@ $< $(PTX_GPU_LINK)
$(PTX_GPU)/ptx_fixtures: tests/ptx/gpu/fixtures.c tests/ptx/gpu/common.h $(PTX_LIB) $(VM_LIB) $(CUBIN_LIB)
	@mkdir -p $(@D)
	$(PTX_GPU_CC) -o $@ $< $(PTX_LIB) $(VM_LIB) $(CUBIN_LIB) $(DEP_LIBS) $(PTX_GPU_LINK)
$(PTX_GPU)/ptx_maps: tests/ptx/gpu/maps.c tests/ptx/gpu/common.h ptx-rewriter/layout.h vm/include/cubpf_abi.h $(PTX_LIB) $(VM_LIB) $(CUBIN_LIB)
	@mkdir -p $(@D)
	$(PTX_GPU_CC) -o $@ $< $(PTX_LIB) $(VM_LIB) $(CUBIN_LIB) $(DEP_LIBS) $(PTX_GPU_LINK)
# The differential harness on the GPU (tests/gpu/t_ptx_safety.sh): modules and cases written
# here by ptx-diff (the interpreter's results), run there by ptx_diff_run.
$(PTX_GPU)/ptx_diff_run: tests/ptx/gpu/diff_run.c tests/ptx/gpu/common.h
	@mkdir -p $(@D)
	$(PTX_GPU_CC) -o $@ $< $(PTX_GPU_LINK)
$(PTX_GPU)/diff/stamp: $(BUILD)/bin/ptx-diff $(PTX_SHAPES)
	rm -rf $(PTX_GPU)/diff $(PTX_GPU)/diff-fold
	mkdir -p $(PTX_GPU)/diff $(PTX_GPU)/diff-fold
	$(BUILD)/bin/ptx-diff -n 32 -s 11 -o $(PTX_GPU)/diff $(PTX_SHAPES)
	$(BUILD)/bin/ptx-diff -n 32 -s 12 -f -o $(PTX_GPU)/diff-fold $(PTX_SHAPES)
	touch $@
# The application t_ptx_safety.sh probes with tests/ptx/safety (built here with nvcc).
ifneq ($(wildcard $(NVCC)),)
$(PTX_GPU)/safety_vecadd: tests/cuda/vecadd.cu
	@mkdir -p $(@D)
	$(NVCC) -O2 -arch=sm_90 -cudart static -o $@ $<
PTX_SAFE_APP := $(PTX_GPU)/safety_vecadd
endif
$(PTX_GPU)/ptx_bench: tests/ptx/gpu/bench.c tests/ptx/gpu/common.h
	@mkdir -p $(@D)
	$(PTX_GPU_CC) -o $@ $< $(PTX_GPU_LINK)

# Native and instrumented PTX of the fixtures (count probes; params probes on vec_add).
PTX_GPU_FIX := $(PTX_FIX_CU) vecadd_g pred_ret
$(PTX_GPU)/ptx_fix_%.ptx: $(PTX_FIXDIR)/%.ptx
	@mkdir -p $(@D)
	cp $< $@
$(PTX_GPU)/ptx_fix_pred_ret.ptx: tests/ptx/kernels/pred_ret.ptx
	@mkdir -p $(@D)
	cp $< $@
$(PTX_GPU)/ptx_fix_%.count.ptx: $(PTX_GPU)/ptx_fix_%.ptx $(PTX_PROBEDIR)/count.bpf.o $(PTX_CUBPF)
	$(PTX_CUBPF) ptx -p $(PTX_PROBEDIR)/count.bpf.o $< -o $@
$(PTX_GPU)/ptx_fix_vecadd.params.ptx: $(PTX_GPU)/ptx_fix_vecadd.ptx $(PTX_PROBEDIR)/params.bpf.o $(PTX_CUBPF)
	$(PTX_CUBPF) ptx -p $(PTX_PROBEDIR)/params.bpf.o $< -o $@

# Benchmark kernels: native, empty probes, working probes.
$(PTX_GPU)/ptx_bench.ptx: tests/ptx/gpu/bench_kernels.cu
	@mkdir -p $(@D)
	$(NVCC) -arch=sm_80 -ptx -O3 $< -o $@
$(PTX_GPU)/ptx_bench.%.ptx: $(PTX_GPU)/ptx_bench.ptx $(PTX_PROBEDIR)/%.bpf.o $(PTX_CUBPF)
	$(PTX_CUBPF) ptx -p $(PTX_PROBEDIR)/$*.bpf.o $< -o $@

PTX_GPU_ALL := $(PTX_GPU)/ptx_conf_run $(PTX_GPU)/ptx_conformance.ptx $(PTX_GPU)/ptx_fixtures \
	$(PTX_GPU)/ptx_maps \
	$(patsubst %,$(PTX_GPU)/ptx_fix_%.ptx,$(PTX_GPU_FIX)) \
	$(patsubst %,$(PTX_GPU)/ptx_fix_%.count.ptx,$(PTX_GPU_FIX)) \
	$(PTX_GPU)/ptx_fix_vecadd.params.ptx $(PTX_PROBES) \
	$(PTX_GPU)/ptx_diff_run $(PTX_GPU)/diff/stamp $(PTX_SAFE) $(PTX_SAFE_APP)
PTX_BENCH_ALL := $(PTX_GPU)/ptx_bench $(PTX_GPU)/ptx_bench.ptx $(PTX_GPU)/ptx_bench.empty.ptx \
	$(PTX_GPU)/ptx_bench.work.ptx $(PTX_GPU)/ptx_bench.work_notimer.ptx \
	$(PTX_GPU)/ptx_bench.work_timer.ptx
.PHONY: ptx-gpu
ptx-gpu: $(PTX_GPU_ALL) $(PTX_BENCH_ALL)
BINS += $(PTX_GPU_ALL) $(PTX_BENCH_ALL)
BENCH_BINS += $(PTX_BENCH_ALL)
endif

# libFuzzer target (clang): the reader, the instrumenter and the code generator on damaged input.
$(FUZZ_BUILD)/fuzz_ptx: tests/ptx/fuzz_ptx.c $(PTX_SRCS) $(CUBIN_SRCS) vm/printk.c | $(DEPS_STAMP) $(ZSTD_PIC_LIB)
	@mkdir -p $(@D)
	$(CLANG) $(FUZZ_CFLAGS) -o $@ $^ $(DEP_LIBS)
FUZZ_BINS += $(FUZZ_BUILD)/fuzz_ptx

# Patch functions of the Sanitizer backend: the bundled tools' programs in tools-patch mode.
$(BUILD)/tests/test_ptx_patch: $(call objs,tests/ptx/test_ptx_patch.c) $(PTX_LIB) $(VM_LIB) \
		$(CUBIN_LIB) | $(PROBE_OBJS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $(call objs,tests/ptx/test_ptx_patch.c) $(PTX_LIB) $(VM_LIB) \
		$(CUBIN_LIB) $(DEP_LIBS) -lcmocka $(LDLIBS)
TEST_BINS += $(BUILD)/tests/test_ptx_patch
