# tests/store: the store/ library (cache and traces) and the `cubpf trace`/`cubpf cache` commands.
# replay.bpf.c is an eBPF fixture the test builds with clang at run time.
TEST_STORE_SRCS := $(filter-out %.bpf.c,$(wildcard tests/store/*.c))
# Linked with the build's one zstd (ZSTD_PIC_LIB, also in DEP_LIBS), the one the shim uses.
$(BUILD)/tests/test_store: $(call objs,$(TEST_STORE_SRCS)) $(STORE_LIB) $(ZSTD_PIC_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(DEP_LIBS) -lcmocka $(LDLIBS)
TEST_BINS += $(BUILD)/tests/test_store
# test_cache.c makes a foreign sqlite database with the bundled sqlite.
$(call objs,$(TEST_STORE_SRCS)): CFLAGS += -I$(SQLITE_DIR)
$(call objs,$(TEST_STORE_SRCS)): | $(SQLITE_DIR)/sqlite3.h

# Benchmark (CPU): tests/bench/store_bench.c, run by tests/bench/b_store.sh.
$(BUILD)/bench/store_bench: $(call objs,tests/bench/store_bench.c) $(STORE_LIB) $(ZSTD_PIC_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(DEP_LIBS) $(LDLIBS)
BENCH_BINS += $(BUILD)/bench/store_bench
