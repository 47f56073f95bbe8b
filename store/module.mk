# store/: sqlite module cache, trace writer and reader.
STORE_SRCS := $(wildcard store/*.c)
STORE_LIB  := $(BUILD)/lib/libcubpf-store.a
$(STORE_LIB): $(call objs,$(STORE_SRCS))
LIBS += $(STORE_LIB)
