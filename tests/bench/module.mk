# tests/bench: the module-load benchmark (tests/bench/b_modload.sh).  A C program on the driver
# API (linked with the toolkit's stub, like tests/ptx/gpu), and two modules, each as a fatbin with
# sm_90 SASS and compute_90 PTX and as a PTX-only fatbin: the device code of
# tests/cuda/tools_known.cu (5 kernels) and a generated module of MODLOAD_KERNELS small kernels.
# Built by `make bench-build`.
ifneq ($(SAN),1)
ifneq ($(wildcard $(NVCC)),)
MODLOAD_KERNELS ?= 1000
MODLOAD_FATBIN  := -fatbin -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
# store/ is linked in to read the instrumented cubin out of a cache database (MODLOAD_CUBIN_FROM).
$(BUILD)/bench/modload_bench: tests/bench/modload_bench.c $(STORE_LIB) $(ZSTD_PIC_LIB)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra -Werror -I. -I$(CUDA_HOME)/include -o $@ $< \
	  $(STORE_LIB) $(ZSTD_PIC_LIB) $(DEP_LIBS) -L$(dir $(CUDA_STUB)) -lcuda
$(BUILD)/bench/modload_gen.cu: tests/bench/gen_modload.sh
	@mkdir -p $(@D)
	tests/bench/gen_modload.sh $(MODLOAD_KERNELS) > $@
$(BUILD)/bench/modload_gen.fatbin: $(BUILD)/bench/modload_gen.cu
	$(NVCC) $(MODLOAD_FATBIN) -o $@ $<
# the same kernels as PTX only: a native load is the driver's JIT (a "PTX-heavy" module)
$(BUILD)/bench/modload_genptx.fatbin: $(BUILD)/bench/modload_gen.cu
	$(NVCC) -fatbin -gencode arch=compute_90,code=compute_90 -o $@ $<
$(BUILD)/bench/modload_app.fatbin: tests/cuda/tools_known.cu
	@mkdir -p $(@D)
	$(NVCC) $(MODLOAD_FATBIN) -o $@ $<
$(BUILD)/bench/modload_appptx.fatbin: tests/cuda/tools_known.cu
	@mkdir -p $(@D)
	$(NVCC) -fatbin -gencode arch=compute_90,code=compute_90 -o $@ $<
BENCH_BINS += $(BUILD)/bench/modload_bench $(BUILD)/bench/modload_gen.fatbin \
  $(BUILD)/bench/modload_app.fatbin $(BUILD)/bench/modload_genptx.fatbin \
  $(BUILD)/bench/modload_appptx.fatbin
endif
endif
