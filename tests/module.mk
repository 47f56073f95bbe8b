# tests/: each test folder describes its programs in its own fragment.
include $(wildcard tests/*/module.mk)

# test_NAME programs: tests/NAME/*.c linked with cmocka and the project's libraries.
TEST_LINK = $(CC) $(LDFLAGS) -o $@ $^ $(CUBPF_LIBS) $(DEP_LIBS) -lcmocka $(LDLIBS)
