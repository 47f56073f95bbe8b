# tests/shim: the drop-in libcuda.so.1 against a fake driver, the toolkit stub and no driver.
SHIM_FAKE := $(BUILD)/tests/libcuda-fake.so
SHIM_FAKE_SRCS := tests/shim/fake_weak.c tests/shim/fake_driver.c

# The fake is built from the shim's own export table; -Bsymbolic keeps its references to its
# own functions inside it (the shim exports the same names).
$(SHIM_FAKE): $(SHIM_FAKE_SRCS) tests/shim/fake.h $(SHIM_GEN)/exports.def
	@mkdir -p $(@D)
	$(CC) $(filter-out -MMD -MP,$(CFLAGS)) -I$(SHIM_GEN) $(LDFLAGS) -shared -Wl,-Bsymbolic \
	  -o $@ $(SHIM_FAKE_SRCS)

$(call objs,tests/shim/test_shim.c): CFLAGS += -DSHIM_TEST_BUILD='"$(abspath $(BUILD))"' \
  -DSHIM_TEST_STUB='"$(CUDA_STUB)"'
$(BUILD)/tests/test_shim: $(call objs,tests/shim/test_shim.c) | $(SHIM_LIB) $(BUILD)/lib/libcuda.so $(SHIM_FAKE)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $(call objs,tests/shim/test_shim.c) -lcmocka -ldl -lpthread
TEST_BINS += $(BUILD)/tests/test_shim

# A test copy of the shim with a hooks plug-in linked in (tests/shim/hooks_plugin.c): the way
# later work plugs into shim/shim.h.
SHIM_HOOKS_LIB := $(BUILD)/tests/shim-hooks/libcuda.so.1
SHIM_HOOKS_OBJS := $(SHIM_OBJS) $(SHIM_GEN)/trampolines.o $(call objs,tests/shim/hooks_plugin.c)
$(SHIM_HOOKS_LIB): $(SHIM_HOOKS_OBJS) $(CUBIN_LIB) $(SHIM_GEN)/libcuda.map
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -shared -o $@ -Wl,-soname,libcuda.so.1 \
	  -Wl,--version-script=$(SHIM_GEN)/libcuda.map -Wl,-z,defs -Wl,-Bsymbolic \
	  $(SHIM_HOOKS_OBJS) $(CUBIN_LIB) $(DEP_LIBS)
$(BUILD)/tests/test_shim: | $(SHIM_HOOKS_LIB)

# Real images for the load-description test, built with nvcc at test time.
SHIM_FIX := $(FIXTURES)/shim
$(SHIM_FIX)/app.fatbin: tests/cuda/shim_app.cu
	@mkdir -p $(@D)
	$(NVCC) -fatbin -arch=sm_90 -o $@ $<
$(SHIM_FIX)/app.cubin: tests/cuda/shim_app.cu
	@mkdir -p $(@D)
	$(NVCC) -cubin -arch=sm_90 -o $@ $<
$(BUILD)/tests/test_shim: | $(SHIM_FIX)/app.fatbin $(SHIM_FIX)/app.cubin
$(call objs,tests/shim/test_shim.c): CFLAGS += -DSHIM_TEST_FIXTURES='"$(abspath $(FIXTURES))"'

# Driver-API torture programs of tests/gpu/t_torture.sh (issue 16), built here with nvcc: the
# program, its kernels as a fatbin (SASS + PTX for sm_90) next to it, and a preloadable SIGSEGV
# reporter (backtrace to stderr, then the default action) for crashes on the GPU machine.
ifneq ($(SAN),1)
ifneq ($(wildcard $(NVCC)),)
$(BUILD)/gpu/torture_kernels.fatbin: tests/cuda/torture_kernels.cu
	@mkdir -p $(@D)
	$(NVCC) -fatbin -gencode arch=compute_90,code=[sm_90,compute_90] -o $@ $<
$(BUILD)/gpu/torture_drv: tests/cuda/torture_drv.cu | $(BUILD)/gpu/torture_kernels.fatbin
	@mkdir -p $(@D)
	$(NVCC) -O2 -arch=sm_90 -cudart static -o $@ $< -lcuda -lpthread
BINS += $(BUILD)/gpu/torture_drv $(BUILD)/gpu/torture_kernels.fatbin
endif
endif
$(BUILD)/gpu/segv_trace.so: tests/gpu/segv_trace.c
	@mkdir -p $(@D)
	$(CC) -O1 -g -fPIC -shared -o $@ $<
BINS += $(BUILD)/gpu/segv_trace.so

# Another interposer of the driver (soname libcuda.so.1, forwards through RTLD_NEXT): the
# chaining tests of tests/dist/test_dist.c preload it before and after cubpf.
SHIM_INTERPOSER := $(BUILD)/tests/interposer/libcuda.so.1
$(SHIM_INTERPOSER): tests/shim/interposer.c
	@mkdir -p $(@D)
	$(CC) $(filter-out -MMD -MP,$(CFLAGS)) $(LDFLAGS) -shared -Wl,-soname,libcuda.so.1 -o $@ $< -ldl
