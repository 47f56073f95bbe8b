# tests/dist: issue 19, cubpf as it ships: `make dist` unpacked to a new prefix (the CPU shim
# tests run against the shim there), ci/dist/Dockerfile replayed without a container engine,
# preload mode (LD_PRELOAD, cubpf run --preload, another interposer before and after cubpf) and
# `cubpf cdi`'s spec and hook.  Not in the sanitized pass: the tarball ships the plain build.
ifneq ($(SAN),1)
$(call objs,tests/dist/test_dist.c): CFLAGS += -DDIST_TEST_BUILD='"$(abspath $(BUILD))"' \
  -DDIST_TEST_SRC='"$(abspath .)"' -DDIST_TEST_TARBALL='"$(abspath $(DIST))"'
$(BUILD)/tests/test_dist: $(call objs,tests/dist/test_dist.c) | $(DIST) $(BUILD)/tests/test_shim \
  $(BUILD)/tests/tools_fake_app $(BUILD)/tests/libcuda-fake.so $(BUILD)/tests/interposer/libcuda.so.1
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $(call objs,tests/dist/test_dist.c) -lcmocka
TEST_BINS += $(BUILD)/tests/test_dist
endif
