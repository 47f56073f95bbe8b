# shim/: the drop-in libcuda.so.1.
#
# The export surface is generated at build time (shim/gen.sh) from the union of the installed
# driver's exports (if any), the toolkit stub's and the list measured on the GPU machine; the
# names of shim/intercept.list get hand-written wrappers, the others one-jump trampolines.
SHIM_GEN     := $(BUILD)/shim
SHIM_SRCS    := $(wildcard shim/*.c)
SHIM_OBJS    := $(call objs,$(SHIM_SRCS))
# Live probes: a plug-in of the forwarding core (shim/live/module.mk gives LIVE_OBJS).
include shim/live/module.mk
# What the shim links, users first.  zstd is store's PIC build (Debian's libzstd.a is not
# position-independent), the build's only one (it is in DEP_LIBS too).
SHIM_LINK_LIBS := $(STORE_LIB) $(PTX_LIB) $(VM_LIB) $(CUBIN_LIB) $(ZSTD_PIC_LIB)
SHIM_LIB     := $(BUILD)/lib/libcuda.so.1
CUDA_INCLUDE ?= $(CUDA_HOME)/include
SHIM_STUB    ?= $(CUDA_STUB)
SHIM_LIST    ?= $(SHARED)/cuda/libcuda-580.159.04-exports.txt
# An installed driver (never on the build machine, but on a developer's GPU box).
SHIM_SYSTEM_DRIVER := $(shell ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 .*x86-64/ {print $$NF; exit}')
SHIM_SOURCES := $(SHIM_SYSTEM_DRIVER) $(SHIM_STUB) $(SHIM_LIST)

ifeq ($(wildcard $(CUDA_INCLUDE)/cuda.h),)
$(SHIM_OBJS): shim-no-cuda-h
.PHONY: shim-no-cuda-h
shim-no-cuda-h:
	@echo "shim: $(CUDA_INCLUDE)/cuda.h not found: install the CUDA toolkit or set CUDA_HOME" >&2; exit 1
endif

$(SHIM_GEN)/exports.def: shim/gen.sh shim/intercept.list $(wildcard $(SHIM_SOURCES))
	@mkdir -p $(@D)
	shim/gen.sh $(SHIM_GEN) shim/intercept.list $(SHIM_SOURCES)
$(SHIM_GEN)/trampolines.S $(SHIM_GEN)/libcuda.map $(SHIM_GEN)/exports.txt: $(SHIM_GEN)/exports.def

$(SHIM_OBJS) $(LIVE_OBJS): CFLAGS += -I$(SHIM_GEN) -I$(CUDA_INCLUDE)
$(SHIM_OBJS) $(LIVE_OBJS): $(SHIM_GEN)/exports.def

$(SHIM_GEN)/trampolines.o: $(SHIM_GEN)/trampolines.S
	$(CC) -c $< -o $@

# -z defs: a name of intercept.list without its wrapper fails here, not at run time.
# -Bsymbolic: our own references (the cuGetProcAddress wrapper table) bind to our functions.
$(SHIM_LIB): $(SHIM_OBJS) $(LIVE_OBJS) $(SHIM_GEN)/trampolines.o $(SHIM_LINK_LIBS) $(SHIM_GEN)/libcuda.map
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -shared -o $@ -Wl,-soname,libcuda.so.1 \
	  -Wl,--version-script=$(SHIM_GEN)/libcuda.map -Wl,-z,defs -Wl,-Bsymbolic \
	  $(SHIM_OBJS) $(LIVE_OBJS) $(SHIM_GEN)/trampolines.o $(SHIM_LINK_LIBS) $(DEP_LIBS)
$(BUILD)/lib/libcuda.so: $(SHIM_LIB)
	ln -sf libcuda.so.1 $@
BINS += $(SHIM_LIB) $(BUILD)/lib/libcuda.so

# GPU programs (run on the GPU machine by tests/gpu/t_shim*.sh and tests/bench/b_shim.sh),
# built here with nvcc; the runtime is linked statically so they need only libcuda there.
SHIM_NVCC_FLAGS := -O2 -arch=sm_90 -cudart static
ifneq ($(wildcard $(NVCC)),)
$(BUILD)/gpu/shim_app: tests/cuda/shim_app.cu
	@mkdir -p $(@D)
	$(NVCC) $(SHIM_NVCC_FLAGS) -o $@ $< -L$(dir $(CUDA_STUB)) -lcuda
$(BUILD)/gpu/shim_bench: tests/bench/shim_bench.cu
	@mkdir -p $(@D)
	$(NVCC) $(SHIM_NVCC_FLAGS) -o $@ $< -ldl
# Kernel spans (tests/gpu/t_spans.sh, tests/bench/b_trace_app.sh): per-thread default stream, so
# that its launches go through the _ptsz entry points.
$(BUILD)/gpu/spans_app: tests/cuda/spans_app.cu
	@mkdir -p $(@D)
	$(NVCC) $(SHIM_NVCC_FLAGS) --default-stream per-thread -o $@ $<
BINS += $(BUILD)/gpu/shim_app $(BUILD)/gpu/spans_app
BENCH_BINS += $(BUILD)/gpu/shim_bench
endif

# CPU benchmark of the shim's own per-call cost, against the fake driver of tests/shim.
$(BUILD)/bench/shim_cpubench: tests/bench/shim_cpubench.c tests/bench/median.h | $(SHIM_LIB) $(BUILD)/tests/libcuda-fake.so
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< -ldl
BENCH_BINS += $(BUILD)/bench/shim_cpubench
# The same for a launch-bound training step, per mode of cubpf (tests/bench/b_train_cpu.sh).
$(BUILD)/bench/train_cpubench: tests/bench/train_cpubench.c tests/bench/median.h | $(SHIM_LIB) $(BUILD)/tests/libcuda-fake.so
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< -ldl
BENCH_BINS += $(BUILD)/bench/train_cpubench

# The drop-in libnvrtc.so.13 and libnvJitLink.so.13 (shim/dropin/).
include shim/dropin/dropin.mk

# libcubpf-exit.so (shim/exit/): _exit and _Exit that let the shim finish its trace first;
# `cubpf run` preloads it.  No sanitizer flags: it goes into programs that are not sanitized.
EXIT_HOOK_LIB := $(BUILD)/lib/libcubpf-exit.so
$(EXIT_HOOK_LIB): shim/exit/exit_hook.c
	@mkdir -p $(@D)
	$(CC) $(filter-out -fsanitize=%,$(CFLAGS)) -shared -o $@ $< -ldl
BINS += $(EXIT_HOOK_LIB)
