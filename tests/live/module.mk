# tests/live: live probes in the shim (shim/live/*.c) against the fake driver of tests/shim, and
# the GPU programs and probe objects of tests/gpu/t_live*.sh and tests/bench/b_live.sh.

# Probe objects (clang -target bpf; the GPU machine has no clang: they travel in $(BUILD)).
LIVE_PROBEDIR := $(BUILD)/live-probes
LIVE_PROBES   := $(patsubst tests/live/probes/%.bpf.c,$(LIVE_PROBEDIR)/%.bpf.o,$(wildcard tests/live/probes/*.bpf.c))
$(LIVE_PROBEDIR)/%.bpf.o: tests/live/probes/%.bpf.c $(PROBE_HEADER_DEPS)
	@mkdir -p $(@D)
	$(CLANG) -O2 -g -target bpf -I tools/include -I/usr/include/x86_64-linux-gnu -c $< -o $@

$(call objs,tests/live/test_live.c): CFLAGS += -DLIVE_TEST_BUILD='"$(abspath $(BUILD))"' \
  -DLIVE_TEST_FIXTURES='"$(abspath $(FIXTURES))"'
$(BUILD)/tests/test_live: $(call objs,tests/live/test_live.c shim/live/rb.c) $(STORE_LIB) $(CUBIN_LIB) \
		| $(SHIM_LIB) $(BUILD)/tests/libcuda-fake.so $(LIVE_PROBES) $(PROBE_OBJS) \
		  $(BUILD)/ptx-probes/func.bpf.o \
		  $(FIXTURES)/shim/app.cubin $(FIXTURES)/shim/app.fatbin $(addprefix $(FIXTURES)/cubin/,lineinfo.cubin \
		  ptxas_o2.cubin ptxas_loc.cubin nvrtc_arch.cubin nvjitlink2.cubin rdc_app \
		  notk_int.cubin notk_float.cubin notk_fadd.cubin notk_mul.cubin notk_fused.cubin)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $(call objs,tests/live/test_live.c shim/live/rb.c) $(STORE_LIB) $(CUBIN_LIB) $(ZSTD_PIC_LIB) \
	  $(DEP_LIBS) -lcmocka -ldl -lpthread
TEST_BINS += $(BUILD)/tests/test_live

# Ring buffers: the drain against the CPU model of the producer (no driver needed).
# The batched drain's trace sink (shim_live_rb_to_trace) writes through store/: linked with it.
$(BUILD)/tests/test_live_rb: $(call objs,tests/live/test_rb.c shim/live/rb.c) $(STORE_LIB) $(ZSTD_PIC_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(DEP_LIBS) -lcmocka -lpthread
TEST_BINS += $(BUILD)/tests/test_live_rb

# GPU programs (tests/cuda/live_*.cu), built here with nvcc, the runtime linked statically.
ifneq ($(SAN),1)
ifneq ($(wildcard $(NVCC)),)
LIVE_GPU := $(patsubst tests/cuda/%.cu,$(BUILD)/gpu/%,$(wildcard tests/cuda/live_*.cu))
$(BUILD)/gpu/live_%: tests/cuda/live_%.cu tests/cuda/check.h
	@mkdir -p $(@D)
	$(NVCC) -O2 -arch=sm_90 -cudart static -o $@ $<
BINS += $(LIVE_GPU) $(LIVE_PROBES)
endif
endif

# Benchmark (CPU): the ring buffer drain into a trace against CPU producers
# (tests/bench/rbdrain_bench.c, run by tests/bench/b_rbdrain.sh).
$(BUILD)/bench/rbdrain_bench: $(call objs,tests/bench/rbdrain_bench.c shim/live/rb.c) $(STORE_LIB) $(ZSTD_PIC_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(DEP_LIBS) $(LDLIBS)
BENCH_BINS += $(BUILD)/bench/rbdrain_bench

# Where PTX comes from, on the GPU (tests/gpu/t_ptx_sources.sh): a cubin that keeps its PTX
# (nvcc -cubin -lineinfo), PTX for the driver's linker, the kernel's source for NVRTC at run
# time, the driver-API harness that loads each, and an -rdc program of two objects.
ifneq ($(SAN),1)
ifneq ($(wildcard $(NVCC)),)
SOURCES_GPU := $(addprefix $(BUILD)/gpu/,sources_app sources_rdc sources_lineinfo.cubin \
	sources.ptx sources_kernels.cu)
$(BUILD)/gpu/sources_app: tests/cuda/sources_app.c
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -Wall -Wextra -Werror -I$(CUDA_HOME)/include -o $@ $< \
	  -L$(dir $(CUDA_STUB)) -lcuda -ldl
$(BUILD)/gpu/sources_lineinfo.cubin: tests/cuda/sources_kernels.cu
	@mkdir -p $(@D)
	$(NVCC) -cubin -lineinfo -arch=sm_90 -o $@ $<
$(BUILD)/gpu/sources.ptx: tests/cuda/sources_kernels.cu
	@mkdir -p $(@D)
	$(NVCC) -ptx -arch=sm_90 -o $@ $<
$(BUILD)/gpu/sources_kernels.cu: tests/cuda/sources_kernels.cu
	@mkdir -p $(@D)
	cp $< $@
$(BUILD)/gpu/sources_rdc: tests/cuda/sources_rdc.cu tests/cuda/sources_rdc_lib.cu
	@mkdir -p $(@D)
	$(NVCC) -O2 -rdc=true -gencode arch=compute_90,code=sm_90 \
	  -gencode arch=compute_90,code=compute_90 -cudart static -o $@ $^
BINS += $(SOURCES_GPU)
endif
endif

# The Sanitizer backend's plumbing (shim/live/sanitizer.c): a fake Compute Sanitizer library
# that logs what cubpf asks of it and fires launch callbacks from the fake driver's launches.
$(BUILD)/tests/libsanitizer-fake.so: tests/live/fake_sanitizer.c shim/live/sanitizer.h
	@mkdir -p $(@D)
	$(CC) $(filter-out -MMD -MP,$(CFLAGS)) $(LDFLAGS) -shared -o $@ $< -ldl
$(BUILD)/tests/test_live_san: $(call objs,tests/live/test_san.c) \
		| $(SHIM_LIB) $(BUILD)/tests/libcuda-fake.so $(BUILD)/tests/libsanitizer-fake.so \
		  $(PROBE_OBJS) $(LIVE_PROBES) $(FIXTURES)/shim/app.cubin
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $(call objs,tests/live/test_san.c) -lcmocka -ldl
TEST_BINS += $(BUILD)/tests/test_live_san

# The Sanitizer backend on the GPU (tests/gpu/t_sass.sh, tests/bench/b_sass.sh): the same
# programs built SASS only (no PTX: cubpf can reach them only by patching), and a cuBLAS GEMM.
ifneq ($(SAN),1)
ifneq ($(wildcard $(NVCC)),)
SASS_GPU := $(addprefix $(BUILD)/gpu/,sass_count sass_bench sass_tools_known sass_gemm)
$(BUILD)/gpu/sass_count: tests/cuda/live_count.cu tests/cuda/check.h
	@mkdir -p $(@D)
	$(NVCC) -O2 -gencode arch=compute_90,code=sm_90 -cudart static -o $@ $<
$(BUILD)/gpu/sass_bench: tests/cuda/live_bench.cu
	@mkdir -p $(@D)
	$(NVCC) -O2 -gencode arch=compute_90,code=sm_90 -cudart static -o $@ $<
$(BUILD)/gpu/sass_tools_known: tests/cuda/tools_known.cu
	@mkdir -p $(@D)
	$(NVCC) -O2 -gencode arch=compute_90,code=sm_90 -cudart static -o $@ $<
$(BUILD)/gpu/sass_gemm: tests/cuda/sass_gemm.cu tests/cuda/check.h
	@mkdir -p $(@D)
	$(NVCC) -O2 -arch=sm_90 -o $@ $< -lcublas
BINS += $(SASS_GPU)
BENCH_BINS += $(BUILD)/gpu/sass_bench $(BUILD)/gpu/sass_gemm
endif
endif
