# tests/fault: the fault-injection suite (issue 28).  test_fault runs fault_writer (store/'s
# writer with a known count of records), the shim over the fake driver of tests/shim and the
# cubpf command under faults: full and read-only file systems (a tmpfs of a set size when the
# machine lets it be mounted, else RLIMIT_FSIZE), a preloaded write() failure (failwrite.so),
# memory limits, processes killed at random points, two runs on one -o, damaged and joined
# traces, FIFOs and devices as inputs, absurd settings.  Each case prints what was written,
# kept and counted as lost.
FAULT_WRITER := $(BUILD)/tests/fault_writer
FAULT_APP := $(BUILD)/tests/fault_app
$(FAULT_APP): $(call objs,tests/fault/fault_app.c)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ -ldl
FAULT_PRELOAD := $(BUILD)/tests/failwrite.so
$(FAULT_WRITER): $(call objs,tests/fault/fault_writer.c) $(STORE_LIB) $(ZSTD_PIC_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(DEP_LIBS) $(LDLIBS)
# Never sanitized: preloaded into a sanitized program it would come before the sanitizer's runtime.
$(FAULT_PRELOAD): tests/fault/failwrite.c
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra -Werror -fPIC -shared -o $@ $< -ldl
$(call objs,tests/fault/test_fault.c): CFLAGS += -DFAULT_TEST_BUILD='"$(abspath $(BUILD))"'
$(BUILD)/tests/test_fault: $(call objs,tests/fault/test_fault.c) $(STORE_LIB) $(ZSTD_PIC_LIB) \
  | $(FAULT_WRITER) $(FAULT_APP) $(FAULT_PRELOAD) $(BUILD)/bin/cubpf $(SHIM_LIB) $(BUILD)/tests/libcuda-fake.so \
  $(BUILD)/tests/tools_fake_app
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $(call objs,tests/fault/test_fault.c) $(STORE_LIB) $(ZSTD_PIC_LIB) \
	  $(DEP_LIBS) -lcmocka $(LDLIBS)
TEST_BINS += $(BUILD)/tests/test_fault
