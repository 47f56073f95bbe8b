# tests/ci: the build's own rules (issue 18): ci/check-names.sh passes here and fails on a
# planted unprefixed name; one zstd per build (header and library agree, every user of zstd.h
# compiled against the bundled one).  Compiled and linked the way cubpf is (tools/module.mk).
$(BUILD)/tests/test_ci: $(call objs,tests/ci/test_ci.c) $(CUBPF_LIBS) | $(BINS) $(LIBS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $(call objs,tests/ci/test_ci.c) $(CUBPF_LIBS) $(DEP_LIBS) -lcmocka $(LDLIBS)
TEST_BINS += $(BUILD)/tests/test_ci
