# cubin/: reading CUDA containers (no CUDA calls).
CUBIN_SRCS := $(wildcard cubin/*.c)
CUBIN_LIB  := $(BUILD)/lib/libcubpf-cubin.a
$(CUBIN_LIB): $(call objs,$(CUBIN_SRCS))
LIBS += $(CUBIN_LIB)
