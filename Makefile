# cubpf build.  `make` builds the shim, the cubpf command and the conformance plugin;
# `make test` runs every CPU test (plain, then ASan+UBSan, then a short fuzz run);
# `make demo` runs the main job; `make gpu-test` / `make bench` need the GPU machine.
#
# Each module describes itself in its own fragment (MODULE/module.mk) so that modules can
# grow without touching this file.  A fragment adds to:
#   LIBS       static libraries it builds           (built by `make`)
#   BINS       executables / shared objects          (built by `make`)
#   TEST_BINS  cmocka test programs                  (run by `make unit`)
#   FUZZ_BINS  libFuzzer targets                      (built by `make fuzz`)
#   BENCH_BINS benchmark programs                     (built by `make bench-build`)

BUILD    ?= build
SHARED   ?= ../shared
PREFIX   ?= /usr/local
SAN      ?= 0

CC       ?= gcc
CLANG    ?= clang
NVCC     ?= $(shell command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)
PTXAS    ?= $(shell command -v ptxas 2>/dev/null || echo /usr/local/cuda/bin/ptxas)
# The toolkit's home: nvcc may be a link or a wrapper script (/usr/local/bin/nvcc running
# /usr/local/cuda-13.0/bin/nvcc), so take the first candidate that really holds cuda.h.
CUDA_HOME ?= $(firstword $(foreach h,$(patsubst %/bin/nvcc,%,$(realpath $(NVCC)) $(NVCC)) \
               /usr/local/cuda,$(if $(wildcard $(h)/include/cuda.h),$(h))) /usr/local/cuda)
# The toolkit's driver stub (for linking GPU programs here and for the shim's tests).
CUDA_STUB ?= $(firstword $(wildcard $(CUDA_HOME)/lib64/stubs/libcuda.so \
               $(CUDA_HOME)/targets/*/lib/stubs/libcuda.so /usr/local/cuda/lib64/stubs/libcuda.so) \
               $(CUDA_HOME)/lib64/stubs/libcuda.so)

# `make dist`'s tarball (see "dist" below; defined here for the tests that use it).
VERSION   := $(shell sed -n 's/^\#define CUBPF_VERSION "\(.*\)"/\1/p' tools/commands.h)
DIST_NAME := cubpf-$(VERSION)-x86_64
DIST      := $(BUILD)/dist/$(DIST_NAME).tar.gz
DIST_DATE := $(shell git log -1 --format=%ct 2>/dev/null || echo 0)

# Fixtures built with nvcc do not depend on the sanitizer setting: keep one copy.
FIXTURES ?= build/fixtures

WARN     := -Wall -Wextra -Werror
CFLAGS   ?= -O2 -g
CFLAGS   += -std=gnu11 $(WARN) -fPIC -fvisibility=hidden -I. -MMD -MP
LDFLAGS  ?=
LDLIBS   ?=

ifeq ($(SAN),1)
CFLAGS   += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS  += -fsanitize=address,undefined
endif

# One copy of each bundled library per build, and every user compiles against the header of
# the library it links.  zstd is built here from Debian's source package (store/module.mk:
# Debian's libzstd.a is not position-independent, and the shim must carry it), so every object
# finds its zstd.h in $(ZSTD_DIR)/lib and every program links $(ZSTD_PIC_LIB), never -lzstd:
# tests/ci checks both.  lz4 and xxHash are Debian's (liblz4-dev, libxxhash-dev), header and
# static archive from the same package.  Static, so that the shim and the tool run on machines
# that lack them (see DESIGN.md: no shared deps but glibc).
ZSTD_DIR     := $(BUILD)/zstd
ZSTD_PIC_LIB := $(BUILD)/lib/libcubpf-zstd.a
DEP_LIBS := $(ZSTD_PIC_LIB) -Wl,-Bstatic -llz4 -lxxhash -Wl,-Bdynamic -lpthread -ldl -lm
CFLAGS   += -I$(ZSTD_DIR)/lib

LIBS       :=
BINS       :=
TEST_BINS  :=
FUZZ_BINS  :=
BENCH_BINS :=

.PHONY: all test check-deps check-names unit test-asan fuzz fuzz-smoke demo gpu-test bench bench-build \
  install clean deps

all:

# Dependencies: a missing header means a fresh machine; ci/deps.sh installs what is missing.
DEPS_STAMP := $(BUILD)/.deps-ok
$(DEPS_STAMP):
	@ci/deps.sh
	@mkdir -p $(@D) && touch $@
deps: $(DEPS_STAMP)

# zstd.h (fetched with its sources) before any object: each finds it in $(ZSTD_DIR)/lib.
$(BUILD)/obj/%.o: %.c | $(DEPS_STAMP) $(ZSTD_DIR)/lib/zstd.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/lib/%.a:
	@mkdir -p $(@D)
	@rm -f $@
	ar rcs $@ $^

# objs(SOURCES): the object files of a list of C sources.
objs = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

# libFuzzer targets (tests/fuzz/module.mk); defined before the fragments, which use them.
FUZZ_BUILD := $(BUILD)/fuzz
FUZZ_CFLAGS := -std=gnu11 -g -O1 -I. -I$(ZSTD_DIR)/lib -fsanitize=fuzzer,address,undefined \
  -fno-omit-frame-pointer

include cubin/module.mk
include vm/module.mk
include ptx-rewriter/module.mk
include store/module.mk
include shim/module.mk
include tools/module.mk
include tests/module.mk

all: $(LIBS) $(BINS)

# Every program that links one of our archives links DEP_LIBS, and with it $(ZSTD_PIC_LIB).
$(filter-out $(ZSTD_PIC_LIB),$(LIBS)): | $(ZSTD_PIC_LIB)

# ---- tests -----------------------------------------------------------------------------
# unit: run the cmocka programs of this build (plain or sanitized) and write a summary.
unit: $(TEST_BINS) $(BINS)
	@CUBPF_BUILD=$(abspath $(BUILD)) CUBPF_FIXTURES=$(abspath $(FIXTURES)) \
	  CUBPF_SHARED=$(abspath $(SHARED)) NVCC=$(NVCC) PTXAS=$(PTXAS) CLANG=$(CLANG) \
	  tests/run-tests.sh $(BUILD)/test-summary.txt $(TEST_BINS)

# The sanitized build lives inside the plain one, so that parallel BUILD folders stay apart.
test-asan:
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/asan SAN=1 unit

# check-deps: no module includes a header of a module above it (ci/check-deps.sh prints each
# FILE:LINE that does and fails; the order is in CONTRIBUTING.md).  `make test` runs it first and
# counts it as one test of its own in the summary.
check-deps:
	@ci/check-deps.sh

# check-names: every global name of our objects carries its module's prefix (ci/check-names.sh
# lists those that do not and fails).  `make test` runs it after the build, one test in the
# summary.
check-names: all
	@ci/check-names.sh $(BUILD)

test:
	@rm -f $(BUILD)/test-summary.txt $(BUILD)/asan/test-summary.txt $(BUILD)/fuzz-summary.txt \
	  $(BUILD)/deps-summary.txt $(BUILD)/names-summary.txt
	@mkdir -p $(BUILD)
	@echo "== include order (make check-deps) =="
	@if $(MAKE) --no-print-directory check-deps; then echo "1 0" >$(BUILD)/deps-summary.txt; \
	  else echo "0 1" >$(BUILD)/deps-summary.txt; fi
	@$(MAKE) --no-print-directory all
	@echo "== global names (make check-names) =="
	@if $(MAKE) --no-print-directory check-names; then echo "1 0" >$(BUILD)/names-summary.txt; \
	  else echo "0 1" >$(BUILD)/names-summary.txt; fi
	@$(MAKE) --no-print-directory -k unit || true
	@echo "== sanitizer pass (ASan+UBSan) =="
	@$(MAKE) --no-print-directory -k test-asan || true
	@echo "== fuzz smoke run =="
	@$(MAKE) --no-print-directory -k fuzz-smoke || true
	@tests/summary.sh $(BUILD)/deps-summary.txt $(BUILD)/names-summary.txt $(BUILD)/test-summary.txt \
	  $(BUILD)/asan/test-summary.txt $(BUILD)/fuzz-summary.txt

# ---- fuzzing (libFuzzer, clang) ------------------------------------------------------------
fuzz: $(FUZZ_BINS)
FUZZ_SECONDS ?= 20
fuzz-smoke: $(FUZZ_BINS)
	@tests/fuzz/smoke.sh $(BUILD)/fuzz-summary.txt $(FUZZ_SECONDS) $(FUZZ_BINS)

# ---- demo, GPU tests, benchmarks ------------------------------------------------------------
demo: all
	@BUILD=$(BUILD) NVCC=$(NVCC) ci/demo.sh

# On the GPU machine nothing is rebuilt (it has no clang and few headers): build here, carry
# build/ and run `make gpu-test NOBUILD=1` (or tests/gpu/run.sh) there.
ifeq ($(NOBUILD),1)
gpu-test:
	@BUILD=$(BUILD) NVCC=$(NVCC) tests/gpu/run.sh
bench:
	@BUILD=$(BUILD) NVCC=$(NVCC) tests/bench/run.sh
else
gpu-test: all $(TEST_BINS)
	@BUILD=$(BUILD) NVCC=$(NVCC) tests/gpu/run.sh
bench: all bench-build
	@BUILD=$(BUILD) NVCC=$(NVCC) tests/bench/run.sh
endif
bench-build: $(BENCH_BINS)

# install_tree(ROOT,LIBDIR,PROBEDIR,INCDIR): cubpf's files under ROOT, in the folders (relative to
# ROOT) where `cubpf run` looks for them: ROOT/bin/cubpf finds the shim in ../lib or
# ../lib/cubpf and the probes in ../probes or ../lib/cubpf/probes (tools/cmd_run.c).
define install_tree
	install -d $(1)/bin $(1)/$(2) $(1)/$(4)
	install -m 0755 $(BUILD)/bin/cubpf $(BUILD)/bin/cubpf-bpf-plugin $(1)/bin/
	install -m 0755 $(BUILD)/lib/libcuda.so.1 $(BUILD)/lib/libnvrtc.so.13 \
	  $(BUILD)/lib/libnvJitLink.so.13 $(BUILD)/lib/libcubpf-exit.so $(1)/$(2)/
	ln -sf libcuda.so.1 $(1)/$(2)/libcuda.so
	ln -sf libnvrtc.so.13 $(1)/$(2)/libnvrtc.so
	ln -sf libnvJitLink.so.13 $(1)/$(2)/libnvJitLink.so
	install -m 0644 $(PROBE_HEADERS) $(1)/$(4)/
	if ls $(BUILD)/probes/*.bpf.o >/dev/null 2>&1; then install -d $(1)/$(3) && \
	  install -m 0644 $(BUILD)/probes/*.bpf.o $(1)/$(3)/; fi
endef

install: all
	$(call install_tree,$(DESTDIR)$(PREFIX),lib/cubpf,lib/cubpf/probes,share/cubpf/include)

# ---- dist: a relocatable tarball, usable as an OCI image layer as it is -------------------------
# build/dist/cubpf-VERSION-x86_64.tar.gz holds opt/cubpf/{bin,lib,probes,include/cubpf,README}:
# applied at / (an image layer, `ADD` in a Dockerfile) it is /opt/cubpf; unpacked anywhere else
# (tar -C DIR, --strip-components=2 for DIR itself) it works from there, as nothing in it names
# a path of its own: cubpf finds its libraries beside its binary, the shim finds the driver by
# searching.  Debug info (which names the build folder) is stripped; the tar is reproducible
# (sorted, root-owned, dated by the last commit, gzip -n).
.PHONY: dist
dist: $(DIST)
$(DIST): $(LIBS) $(BINS) $(PROBE_HEADERS) ci/dist/README.txt ci/dist/Dockerfile Makefile
	rm -rf $(BUILD)/dist/stage $@
	$(call install_tree,$(BUILD)/dist/stage/opt/cubpf,lib,probes,include/cubpf)
	strip --strip-debug $(BUILD)/dist/stage/opt/cubpf/bin/* $(addprefix $(BUILD)/dist/stage/opt/cubpf/lib/,libcuda.so.1 libnvrtc.so.13 libnvJitLink.so.13 libcubpf-exit.so)
	install -m 0644 ci/dist/README.txt $(BUILD)/dist/stage/opt/cubpf/README
	install -m 0644 ci/dist/Dockerfile $(BUILD)/dist/stage/opt/cubpf/Dockerfile
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@$(DIST_DATE) \
	  --mode=u+rwX,go+rX,go-w -C $(BUILD)/dist/stage -cf - opt | gzip -n -9 > $@.tmp
	mv $@.tmp $@
	@echo "$@: $$(du -k $@ | cut -f1) KB"

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
