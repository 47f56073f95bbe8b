# tests/deps: ci/check-deps.sh (`make check-deps`), the one-way include order of the modules, on
# the repository and on copies with upward includes planted.
$(call objs,tests/deps/test_deps.c): CFLAGS += -DDEPS_TEST_SRC='"$(abspath .)"'
$(BUILD)/tests/test_deps: $(call objs,tests/deps/test_deps.c)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka
TEST_BINS += $(BUILD)/tests/test_deps
