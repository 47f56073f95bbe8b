# tools/: the cubpf command and the bundled probe programs.
# Link order: modules that use others come first.
CUBPF_LIBS := $(STORE_LIB) $(PTX_LIB) $(VM_LIB) $(CUBIN_LIB)
TOOLS_SRCS := $(wildcard tools/*.c)
$(BUILD)/bin/cubpf: $(call objs,$(TOOLS_SRCS)) $(CUBPF_LIBS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $(call objs,$(TOOLS_SRCS)) $(CUBPF_LIBS) $(DEP_LIBS) $(LDLIBS)
BINS += $(BUILD)/bin/cubpf
