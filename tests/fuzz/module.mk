# libFuzzer targets (clang).  Each target is built from the module sources it exercises,
# compiled with $(FUZZ_CFLAGS), and added to FUZZ_BINS; `make fuzz-smoke` runs each briefly.
# Seeds: tests/fuzz/corpus/TARGET/.
# fuzz_rule(NAME, SOURCES[, FLAGS]): builds $(FUZZ_BUILD)/NAME from tests/fuzz/NAME.c and SOURCES
# (objects too: linked as they are), compiled with FLAGS added.
define fuzz_rule
$(FUZZ_BUILD)/$(1): tests/fuzz/$(1).c $(2) | $(DEPS_STAMP) $(ZSTD_PIC_LIB)
	@mkdir -p $$(@D)
	$(CLANG) $(FUZZ_CFLAGS) $(3) -o $$@ $$^ $(DEP_LIBS)
FUZZ_BINS += $(FUZZ_BUILD)/$(1)
endef

# Targets, one line each: $(eval $(call fuzz_rule,fuzz_NAME,$(MODULE_SRCS)))
$(eval $(call fuzz_rule,fuzz_cubin_fatbin,$(CUBIN_SRCS)))
$(eval $(call fuzz_rule,fuzz_cubin_ptx,$(CUBIN_SRCS)))
$(eval $(call fuzz_rule,fuzz_store_trace,store/trace_read.c store/ids.c store/file.c))
$(eval $(call fuzz_rule,fuzz_vm_object,$(VM_SRCS) $(CUBIN_SRCS)))
$(eval $(call fuzz_rule,fuzz_vm_verify,$(VM_SRCS) $(CUBIN_SRCS)))
$(eval $(call fuzz_rule,fuzz_shim_load,shim/live/guard.c $(VM_SRCS) $(CUBIN_SRCS)))
# The trace commands (tools/cmd_trace.c) and the tools' reports on any bytes as a trace; the
# replay's host programs are tests/store/replay.bpf.c, built beside the binary.
# (export --format sqlite brings the SQLite export and the demangler with it).
FUZZ_TRACE_CMD_SRCS := tools/cmd_trace.c tools/cmd_export_sqlite.c tools/cmd_inspect.c tools/tool_blocks.c \
  tools/tool_bb.c \
  tools/tool_common.c tools/tool_data.c tools/tool_reports.c store/trace_read.c store/ids.c \
  store/file.c $(VM_SRCS) $(CUBIN_SRCS) $(PTX_SRCS) $(SQLITE_OBJ)
$(eval $(call fuzz_rule,fuzz_trace_cmd,$(FUZZ_TRACE_CMD_SRCS),-I$(SQLITE_DIR)))
$(FUZZ_BUILD)/fuzz_trace_cmd: | $(FUZZ_BUILD)/fuzz_trace_cmd.bpf.o $(SQLITE_DIR)/sqlite3.h
$(FUZZ_BUILD)/fuzz_trace_cmd.bpf.o: tests/store/replay.bpf.c $(PROBE_HEADER_DEPS)
	@mkdir -p $(@D)
	$(CLANG) -O2 -g -target bpf -I tools/include -I/usr/include/x86_64-linux-gnu -c $< -o $@
# The module cache's readers on any bytes as the database file; sqlite itself is the plain
# build's object (not instrumented: the target is cubpf's handling of what sqlite says).
$(eval $(call fuzz_rule,fuzz_store_cache,store/cache.c store/cache_trust.c store/file.c $(SQLITE_OBJ),-I$(SQLITE_DIR)))
$(FUZZ_BUILD)/fuzz_store_cache: | $(SQLITE_DIR)/sqlite3.h

# The verifier's soundness fuzzer (tests/fuzz/sound.c): a plain program (no libFuzzer), built
# with ASan+UBSan, that generates eBPF programs, verifies them and runs the accepted ones twice
# on the checked interpreter.  `make fuzz` builds it; `make fuzz-sound` runs it for
# SOUND_SECONDS (600, seed SOUND_SEED or the time; violating programs land in
# $(BUILD)/sound-found); `make fuzz-smoke` (in `make test`) runs a fixed seed and count.
# It links the differential harness (tests/ptx/ptxdiff.c and the PTX generator) for
# --ptxdiff: `make fuzz-ptxdiff` compares PTXDIFF_PROGRAMS (400) generated programs on the
# interpreter and the CPU PTX simulator (seed PTXDIFF_SEED or the time; failures land in
# $(BUILD)/ptxdiff-found; undefined behaviour stops it); `make fuzz-smoke` compares a few with a
# fixed seed and replays tests/fuzz/ptxdiff-repro.
SOUND_BIN := $(FUZZ_BUILD)/sound
$(SOUND_BIN): tests/fuzz/sound.c tests/fuzz/sound_gen.c tests/fuzz/sound.h tests/ptx/ptxdiff.c \
		tests/ptx/ptxdiff.h $(VM_SRCS) $(CUBIN_SRCS) $(PTX_SRCS) | $(DEPS_STAMP) $(ZSTD_PIC_LIB)
	@mkdir -p $(@D)
	$(CLANG) $(filter-out -fsanitize=fuzzer%,$(FUZZ_CFLAGS)) -fsanitize=address,undefined \
	  -o $@ $(filter %.c,$^) $(DEP_LIBS)
FUZZ_BINS += $(SOUND_BIN)

SOUND_SECONDS ?= 600
.PHONY: fuzz-sound
fuzz-sound: $(SOUND_BIN)
	$(SOUND_BIN) -s $${SOUND_SEED:-$$(date +%s)} -t $(SOUND_SECONDS) -o $(BUILD)/sound-found

PTXDIFF_PROGRAMS ?= 400
.PHONY: fuzz-ptxdiff
fuzz-ptxdiff: $(SOUND_BIN)
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  $(SOUND_BIN) -s $${PTXDIFF_SEED:-$$(date +%s)} --ptxdiff $(PTXDIFF_PROGRAMS) \
	  -o $(BUILD)/ptxdiff-found
