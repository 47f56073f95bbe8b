# libFuzzer targets (clang).  Each target is built from the module sources it exercises,
# compiled with $(FUZZ_CFLAGS), and added to FUZZ_BINS; `make fuzz-smoke` runs each briefly.
# Seeds: tests/fuzz/corpus/TARGET/.
# fuzz_rule(NAME, SOURCES): builds $(FUZZ_BUILD)/NAME from tests/fuzz/NAME.c and SOURCES.
define fuzz_rule
$(FUZZ_BUILD)/$(1): tests/fuzz/$(1).c $(2) | $(DEPS_STAMP)
	@mkdir -p $$(@D)
	$(CLANG) $(FUZZ_CFLAGS) -o $$@ $$^ $(DEP_LIBS)
FUZZ_BINS += $(FUZZ_BUILD)/$(1)
endef

# Targets, one line each: $(eval $(call fuzz_rule,fuzz_NAME,$(MODULE_SRCS)))
$(eval $(call fuzz_rule,fuzz_cubin_fatbin,$(CUBIN_SRCS)))
$(eval $(call fuzz_rule,fuzz_cubin_ptx,$(CUBIN_SRCS)))
$(eval $(call fuzz_rule,fuzz_store_trace,store/trace_read.c))
$(eval $(call fuzz_rule,fuzz_vm_object,$(VM_SRCS) $(CUBIN_SRCS)))
$(eval $(call fuzz_rule,fuzz_vm_verify,$(VM_SRCS) $(CUBIN_SRCS)))
