# shim/dropin/: the drop-in libnvrtc.so.13 and libnvJitLink.so.13, beside libcuda.so.1 in
# $(BUILD)/lib.  Like the shim: the export surface is generated at build time (gen.sh) from
# the real library (nm -D) or, without the toolkit, from the committed list of CUDA 13.0; every
# name is a one-jump trampoline to the real library but the few of NAME.list; static
# dependencies, glibc only.
DROPIN_GEN   := $(BUILD)/dropin
DROPIN_COMMON := $(call objs,shim/dropin/dropin.c shim/libsearch.c)
DROPIN_LIBS  :=

# dropin_lib(NAME, SONAME, PREFIX, SOURCES): the rules of one drop-in.
define dropin_lib
$(DROPIN_GEN)/$(1)/exports.def: shim/dropin/gen.sh shim/dropin/dropin.mk shim/dropin/$(1).list $(wildcard $(4))
	@mkdir -p $$(@D)
	shim/dropin/gen.sh $(DROPIN_GEN)/$(1) $(3) $(2) shim/dropin/$(1).list $(4)
$(DROPIN_GEN)/$(1)/trampolines.S $(DROPIN_GEN)/$(1)/lib.map: $(DROPIN_GEN)/$(1)/exports.def
$(DROPIN_GEN)/$(1)/trampolines.o: $(DROPIN_GEN)/$(1)/trampolines.S
	$(CC) -c $$< -o $$@
$(call objs,shim/dropin/$(1).c): CFLAGS += -I$(DROPIN_GEN)/$(1)
$(call objs,shim/dropin/$(1).c): $(DROPIN_GEN)/$(1)/exports.def
$(BUILD)/lib/$(2): $(call objs,shim/dropin/$(1).c) $(DROPIN_COMMON) $(DROPIN_GEN)/$(1)/trampolines.o \
		$(CUBIN_LIB) $(DROPIN_GEN)/$(1)/lib.map
	@mkdir -p $$(@D)
	$(CC) $(LDFLAGS) -shared -o $$@ -Wl,-soname,$(2) -Wl,--version-script=$(DROPIN_GEN)/$(1)/lib.map \
	  -Wl,-z,defs -Wl,-Bsymbolic $(call objs,shim/dropin/$(1).c) $(DROPIN_COMMON) \
	  $(DROPIN_GEN)/$(1)/trampolines.o $(CUBIN_LIB) $(DEP_LIBS)
$(BUILD)/lib/$(basename $(2)): $(BUILD)/lib/$(2)
	ln -sf $(2) $$@
DROPIN_LIBS += $(BUILD)/lib/$(2) $(BUILD)/lib/$(basename $(2))
endef

$(eval $(call dropin_lib,nvrtc,libnvrtc.so.13,shim_nvrtc,\
  $(CUDA_HOME)/lib64/libnvrtc.so.13 shim/dropin/libnvrtc-13.0-exports.txt))
$(eval $(call dropin_lib,nvjitlink,libnvJitLink.so.13,shim_jitlink,\
  $(CUDA_HOME)/lib64/libnvJitLink.so.13 shim/dropin/libnvJitLink-13.0-exports.txt))
BINS += $(DROPIN_LIBS)

# GPU programs of tests/gpu/t_frameworks.sh (built here, run on the GPU machine): kernels
# compiled at run time (NVRTC, nvJitLink, the driver's linker) and an -rdc program.  RUNPATH (not
# RPATH) to the toolkit, so that LD_LIBRARY_PATH, and with it cubpf's drop-ins, come first.
ifneq ($(wildcard $(NVCC)),)
$(BUILD)/gpu/rtc_app: tests/cuda/rtc_app.c
	@mkdir -p $(@D)
	$(CC) -O2 -std=gnu11 $(WARN) -I$(CUDA_INCLUDE) -o $@ $< -L$(CUDA_HOME)/lib64 \
	  -Wl,--enable-new-dtags,-rpath,$(CUDA_HOME)/lib64 -lnvrtc -lnvJitLink \
	  -L$(dir $(CUDA_STUB)) -lcuda
$(BUILD)/gpu/rdc_app: tests/cuda/rdc_app.cu tests/cuda/rdc_lib.cu tests/cuda/check.h
	@mkdir -p $(@D)
	$(NVCC) $(SHIM_NVCC_FLAGS) -rdc=true -o $@ tests/cuda/rdc_app.cu tests/cuda/rdc_lib.cu
BINS += $(BUILD)/gpu/rtc_app $(BUILD)/gpu/rdc_app
endif

# tests/shim/test_dropin.c: the drop-ins against the toolkit's real libraries (no GPU needed).
$(call objs,tests/shim/test_dropin.c): CFLAGS += -DDROPIN_TEST_BUILD='"$(abspath $(BUILD))"' \
  -DDROPIN_TEST_CUDA='"$(CUDA_HOME)"'
$(BUILD)/tests/test_dropin: $(call objs,tests/shim/test_dropin.c) $(CUBIN_LIB) | $(DROPIN_LIBS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $(call objs,tests/shim/test_dropin.c) $(CUBIN_LIB) -lcmocka -ldl
TEST_BINS += $(BUILD)/tests/test_dropin
