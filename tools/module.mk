# tools/: the cubpf command and the bundled probe programs.
# Link order: modules that use others come first.
CUBPF_LIBS := $(STORE_LIB) $(PTX_LIB) $(VM_LIB) $(CUBIN_LIB)
TOOLS_SRCS := $(wildcard tools/*.c)
# The shim's table of numeric settings (shim/settings.c, a leaf): `cubpf run` checks its options
# and the variables it passes on with the very code the shim reads them with.
TOOLS_SHIM_OBJS := $(call objs,shim/settings.c)
$(BUILD)/bin/cubpf: $(call objs,$(TOOLS_SRCS)) $(TOOLS_SHIM_OBJS) $(CUBPF_LIBS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $(call objs,$(TOOLS_SRCS)) $(TOOLS_SHIM_OBJS) $(CUBPF_LIBS) $(DEP_LIBS) $(LDLIBS)
BINS += $(BUILD)/bin/cubpf
# The SQLite export uses the build's one SQLite (store/module.mk), which STORE_LIB carries.
$(call objs,tools/cmd_export_sqlite.c): CFLAGS += -I$(SQLITE_DIR)
$(call objs,tools/cmd_export_sqlite.c): | $(SQLITE_DIR)/sqlite3.h

# The conformance plugin (issue 4): cubpf's eBPF engines behind bpf_conformance's protocol.
PLUGIN_SRCS := $(wildcard tools/plugin/*.c)
$(BUILD)/bin/cubpf-bpf-plugin: $(call objs,$(PLUGIN_SRCS)) $(PTX_LIB) $(VM_LIB) $(CUBIN_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $(call objs,$(PLUGIN_SRCS)) $(PTX_LIB) $(VM_LIB) $(CUBIN_LIB) $(DEP_LIBS) $(LDLIBS)
BINS += $(BUILD)/bin/cubpf-bpf-plugin

# Probe authors' headers (-I tools/include): cubpf_helpers.h, and cubpf_abi.h, which in the source
# tree forwards to the ABI's home, vm/include/cubpf_abi.h.  PROBE_HEADERS is what `make install`
# and `make dist` put in include/cubpf (the ABI itself under its own name, not the forwarder);
# PROBE_HEADER_DEPS is what a probe compiled with -I tools/include depends on.
PROBE_HEADERS := tools/include/cubpf_helpers.h vm/include/cubpf_abi.h
PROBE_HEADER_DEPS := $(PROBE_HEADERS) tools/include/cubpf_abi.h

# Bundled probe programs (issue 4): tools/probes/NAME.bpf.c -> $(BUILD)/probes/NAME.bpf.o.
# Their debug info and BTF line info name sources relative to the repository, not the build
# machine's folder: the objects ship in `make dist` as they are (BTF is kept).
PROBE_SRCS := $(wildcard tools/probes/*.bpf.c)
PROBE_OBJS := $(patsubst tools/probes/%.bpf.c,$(BUILD)/probes/%.bpf.o,$(PROBE_SRCS))
# tools/module.mk too: the objects carry these flags (source paths in the debug info)
$(BUILD)/probes/%.bpf.o: tools/probes/%.bpf.c $(PROBE_HEADER_DEPS) tools/module.mk
	@mkdir -p $(@D)
	$(CLANG) -O2 -g -target bpf -fdebug-prefix-map=$(CURDIR)/= -fdebug-compilation-dir=. \
	  -I tools/include -I/usr/include/x86_64-linux-gnu -c $< -o $@
# variants that include another probe's source
$(BUILD)/probes/instrcount_threads.bpf.o: tools/probes/instrcount.bpf.c
$(BUILD)/probes/threadhist_entry.bpf.o: tools/probes/threadhist.bpf.c
BINS += $(PROBE_OBJS)
