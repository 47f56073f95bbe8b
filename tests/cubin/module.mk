# tests/cubin: the cubin/ library tests (test_cubin) and the nvcc fixtures they read.
TEST_CUBIN_SRCS := $(wildcard tests/cubin/*.c)
$(BUILD)/tests/test_cubin: $(call objs,$(TEST_CUBIN_SRCS)) $(CUBIN_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(DEP_LIBS) -lcmocka $(LDLIBS)
TEST_BINS += $(BUILD)/tests/test_cubin
