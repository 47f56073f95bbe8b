# tests/tools: the formatters of `cubpf run -t TOOL` (traces written with store/'s writer; for
# threadhist also maps filled by its probe on vm/'s interpreter) and cubpf run's option errors
# (on the built binary); the GPU programs of tests/gpu/t_tools.sh and tests/bench/b_tools.sh.
TOOLS_TEST_OBJS := $(call objs,tests/tools/test_tools.c tools/tool_data.c tools/tool_common.c \
  tools/tool_reports.c tools/tool_blocks.c tools/tool_bb.c tools/tool_patch.c)
$(call objs,tests/tools/test_tools.c): CFLAGS += -DTOOLS_TEST_BUILD='"$(abspath $(BUILD))"' \
  -DTOOLS_TEST_SRC='"$(abspath .)"'
$(BUILD)/tests/test_tools: $(TOOLS_TEST_OBJS) $(STORE_LIB) $(VM_LIB) $(CUBIN_LIB) $(ZSTD_PIC_LIB) \
  | $(BUILD)/bin/cubpf
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $(TOOLS_TEST_OBJS) $(STORE_LIB) $(VM_LIB) $(CUBIN_LIB) $(ZSTD_PIC_LIB) \
	  $(DEP_LIBS) -lcmocka $(LDLIBS)
TEST_BINS += $(BUILD)/tests/test_tools

# cubpf run end to end on the CPU: a small app over the shim and the fake driver of tests/shim.
$(BUILD)/tests/tools_fake_app: $(call objs,tests/tools/fake_app.c)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ -ldl
$(BUILD)/tests/test_tools: | $(BUILD)/tests/tools_fake_app $(SHIM_LIB) $(BUILD)/tests/libcuda-fake.so \
  $(PROBE_OBJS) $(BUILD)/live-probes/host.bpf.o

# GPU programs with known answers (tests/cuda/tools_*.cu), built here with nvcc.
ifneq ($(SAN),1)
ifneq ($(wildcard $(NVCC)),)
TOOLS_GPU := $(patsubst tests/cuda/%.cu,$(BUILD)/gpu/%,$(wildcard tests/cuda/tools_*.cu))
$(BUILD)/gpu/tools_%: tests/cuda/tools_%.cu tests/cuda/check.h
	@mkdir -p $(@D)
	$(NVCC) -O2 -arch=sm_90 -cudart static -o $@ $<
BINS += $(TOOLS_GPU)
# the PTX of tools_instr (the same compilation as its fatbin's): tests/gpu/t_instr.sh computes
# the expected instruction counts from it
$(BUILD)/gpu/tools_instr.ptx: tests/cuda/tools_instr.cu tests/cuda/check.h
	@mkdir -p $(@D)
	$(NVCC) -O2 -arch=sm_90 -ptx -o $@ $<
BINS += $(BUILD)/gpu/tools_instr.ptx
endif
endif

# test_export: `cubpf trace export --format sqlite` read back with the sqlite3 tool (issue 33).
$(call objs,tests/tools/test_export.c): CFLAGS += -DTOOLS_TEST_BUILD='"$(abspath $(BUILD))"' \
  -DTOOLS_TEST_SRC='"$(abspath .)"'
$(BUILD)/tests/test_export: $(call objs,tests/tools/test_export.c) $(STORE_LIB) $(ZSTD_PIC_LIB) \
  | $(BUILD)/bin/cubpf $(BUILD)/tests/tools_fake_app $(SHIM_LIB) $(BUILD)/tests/libcuda-fake.so \
  $(PROBE_OBJS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $(call objs,tests/tools/test_export.c) $(STORE_LIB) $(ZSTD_PIC_LIB) \
	  $(DEP_LIBS) -lcmocka $(LDLIBS)
TEST_BINS += $(BUILD)/tests/test_export

# test_metrics: `cubpf run --metrics` scraped by a real Prometheus server (issue 33), and the
# exposition of tools/tool_metrics.c on traces written by the test.
METRICS_TEST_OBJS := $(call objs,tests/tools/test_metrics.c tools/tool_metrics.c tools/tool_data.c \
  tools/tool_common.c tools/tool_reports.c tools/tool_blocks.c tools/tool_bb.c)
$(call objs,tests/tools/test_metrics.c): CFLAGS += -DTOOLS_TEST_BUILD='"$(abspath $(BUILD))"'
$(BUILD)/tests/test_metrics: $(METRICS_TEST_OBJS) $(STORE_LIB) $(VM_LIB) $(CUBIN_LIB) $(ZSTD_PIC_LIB) \
  | $(BUILD)/bin/cubpf $(BUILD)/tests/tools_fake_app $(SHIM_LIB) $(BUILD)/tests/libcuda-fake.so \
  $(PROBE_OBJS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $(METRICS_TEST_OBJS) $(STORE_LIB) $(VM_LIB) $(CUBIN_LIB) $(ZSTD_PIC_LIB) \
	  $(DEP_LIBS) -lcmocka $(LDLIBS)
TEST_BINS += $(BUILD)/tests/test_metrics
