# ptx-rewriter/: PTX parsing, probe injection, eBPF->PTX code generation.
PTX_SRCS := $(wildcard ptx-rewriter/*.c)
PTX_LIB  := $(BUILD)/lib/libcubpf-ptx.a
$(PTX_LIB): $(call objs,$(PTX_SRCS))
LIBS += $(PTX_LIB)
