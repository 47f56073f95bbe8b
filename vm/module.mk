# vm/: eBPF objects, verifier, interpreter, host maps and helpers.
VM_SRCS := $(wildcard vm/*.c)
VM_LIB  := $(BUILD)/lib/libcubpf-vm.a
$(VM_LIB): $(call objs,$(VM_SRCS))
LIBS += $(VM_LIB)
