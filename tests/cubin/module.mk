# tests/cubin: the cubin/ library tests (test_cubin) and the nvcc fixtures they read.
#
# Fixtures go to $(FIXTURES)/cubin.  Each is built from tests/cubin/*.cu with one -gencode /
# --compress-mode mix; test_fixtures.c knows what each must contain.  A fixture that nvcc cannot
# build is left missing (the rule does not stop make), and the tests that need it fail saying so.
CUBIN_FIX := $(FIXTURES)/cubin
CUBIN_KERNELS := tests/cubin/kernels.cu
CUBIN_G_SM80 := -gencode arch=compute_80,code=sm_80
CUBIN_G_SM90 := -gencode arch=compute_90,code=sm_90
CUBIN_G_PTX80 := -gencode arch=compute_80,code=compute_80
CUBIN_G_PTX90 := -gencode arch=compute_90,code=compute_90
CUBIN_G_PTX86 := -gencode arch=compute_86,code=compute_86
CUBIN_G_MULTI := -gencode arch=compute_75,code=sm_75 -gencode arch=compute_90a,code=sm_90a \
	-gencode arch=compute_100f,code=sm_100f -gencode arch=compute_120,code=compute_120

# fixture(NAME, NVCC ARGS, SOURCES)
define cubin_fixture
$(CUBIN_FIX)/$(1): $(3) tests/cubin/module.mk
	@mkdir -p $$(@D)
	@echo "NVCC $$@"
	@$(NVCC) $(2) -o $$@ $(3) >$$@.log 2>&1 || { echo "fixture $$@ failed: see $$@.log"; rm -f $$@; }
CUBIN_FIXTURES += $(CUBIN_FIX)/$(1)
endef

CUBIN_FIXTURES :=
$(eval $(call cubin_fixture,sass_only.fatbin,-fatbin $(CUBIN_G_SM80) $(CUBIN_G_SM90),$(CUBIN_KERNELS)))
$(eval $(call cubin_fixture,ptx_only.fatbin,-fatbin $(CUBIN_G_PTX80) $(CUBIN_G_PTX90),$(CUBIN_KERNELS)))
$(eval $(call cubin_fixture,multi.fatbin,-fatbin $(CUBIN_G_MULTI),$(CUBIN_KERNELS)))
$(eval $(call cubin_fixture,mode_default.fatbin,-fatbin $(CUBIN_G_SM90) $(CUBIN_G_PTX90),$(CUBIN_KERNELS)))
$(eval $(call cubin_fixture,mode_speed.fatbin,-fatbin --compress-mode=speed $(CUBIN_G_SM90) $(CUBIN_G_PTX90),$(CUBIN_KERNELS)))
$(eval $(call cubin_fixture,mode_size.fatbin,-fatbin --compress-mode=size $(CUBIN_G_SM90) $(CUBIN_G_PTX90),$(CUBIN_KERNELS)))
$(eval $(call cubin_fixture,mode_none.fatbin,-fatbin --compress-mode=none $(CUBIN_G_SM90) $(CUBIN_G_PTX90),$(CUBIN_KERNELS)))
$(eval $(call cubin_fixture,kernels.cubin,-cubin -arch=sm_90,$(CUBIN_KERNELS)))
$(eval $(call cubin_fixture,kernels.ptx,-ptx -arch=compute_90,$(CUBIN_KERNELS)))
$(eval $(call cubin_fixture,kernels.o,-c $(CUBIN_G_SM90) $(CUBIN_G_PTX90),$(CUBIN_KERNELS)))
$(eval $(call cubin_fixture,app,$(CUBIN_G_SM80) $(CUBIN_G_SM90) $(CUBIN_G_PTX90),tests/cubin/host_main.cu $(CUBIN_KERNELS)))
$(eval $(call cubin_fixture,rdc_app,-rdc=true $(CUBIN_G_SM90) $(CUBIN_G_PTX90),tests/cubin/rdc_part.cu tests/cubin/rdc_lib.cu tests/cubin/host_main.cu $(CUBIN_KERNELS)))
$(eval $(call cubin_fixture,libkernels.so,-shared -Xcompiler -fPIC $(CUBIN_G_SM90) $(CUBIN_G_PTX86),$(CUBIN_KERNELS)))
$(eval $(call cubin_fixture,libkernels.a,-lib $(CUBIN_G_SM90) $(CUBIN_G_PTX90),$(CUBIN_KERNELS) tests/cubin/rdc_lib.cu))
$(eval $(call cubin_fixture,rdc2_app,-rdc=true $(CUBIN_G_SM90) $(CUBIN_G_PTX90),tests/cubin/rdc_part.cu tests/cubin/rdc_lib.cu tests/cubin/rdc_host.cu))
$(eval $(call cubin_fixture,lineinfo.cubin,-cubin -lineinfo -arch=sm_90,$(CUBIN_KERNELS)))
$(eval $(call cubin_fixture,loc.ptx,-ptx -lineinfo -arch=sm_90,$(CUBIN_KERNELS)))

# PTX embedded in cubins (test_embedded.c): ptxas on PTX with .loc lines, and the NVRTC and
# nvJitLink cubins gen_rtc makes with the toolkit's libraries (a fixture that cannot be built is
# left missing, like nvcc's, and its tests fail saying so).
CUBIN_RTC_LIBDIR := $(CUDA_HOME)/lib64
$(CUBIN_FIX)/ptxas_loc.cubin: $(CUBIN_FIX)/loc.ptx
	@echo "PTXAS $@"
	@$(PTXAS) -O2 -fmad=false -arch sm_90 -o $@ $< >$@.log 2>&1 || { echo "fixture $@ failed: see $@.log"; rm -f $@; }
$(CUBIN_FIX)/nofma.cubin: tests/cubin/nofma.ptx
	@mkdir -p $(@D)
	@echo "PTXAS $@"
	@$(PTXAS) -fmad=false -arch sm_90 -o $@ $< >$@.log 2>&1 || { echo "fixture $@ failed: see $@.log"; rm -f $@; }
$(CUBIN_FIX)/llvm_style.cubin: tests/cubin/llvm_style.ptx
	@mkdir -p $(@D)
	@echo "PTXAS $@"
	@$(PTXAS) -arch sm_90a -o $@ $< >$@.log 2>&1 || { echo "fixture $@ failed: see $@.log"; rm -f $@; }
$(CUBIN_FIX)/ptxas_o2.cubin: $(CUBIN_FIX)/loc.ptx
	@echo "PTXAS $@"
	@$(PTXAS) -O2 -lineinfo -arch sm_90 -o $@ $< >$@.log 2>&1 || { echo "fixture $@ failed: see $@.log"; rm -f $@; }
# Cubins that keep their PTX but not ptxas's options, as Triton's bundled ptxas makes them: the
# note renamed (objcopy does not read CUDA ELF files).
DROP_TKINFO = perl -0777 -pe 's/\.note\.nv\.tkinfo\0/.note.nv.tkinfX\0/g'
$(CUBIN_FIX)/int_loc.cubin: tests/cubin/int_loc.ptx
	@mkdir -p $(@D)
	@echo "PTXAS $@"
	@$(PTXAS) -lineinfo -arch sm_90 -o $@ $< >$@.log 2>&1 || { echo "fixture $@ failed: see $@.log"; rm -f $@; }
$(CUBIN_FIX)/notk_int.cubin: $(CUBIN_FIX)/int_loc.cubin
	@$(DROP_TKINFO) $< > $@
$(CUBIN_FIX)/fadd_loc.cubin: tests/cubin/fadd_loc.ptx
	@mkdir -p $(@D)
	@echo "PTXAS $@"
	@$(PTXAS) -lineinfo -arch sm_90 -o $@ $< >$@.log 2>&1 || { echo "fixture $@ failed: see $@.log"; rm -f $@; }
$(CUBIN_FIX)/notk_fadd.cubin: $(CUBIN_FIX)/fadd_loc.cubin
	@$(DROP_TKINFO) $< > $@
$(CUBIN_FIX)/xla_tma.cubin: tests/cubin/xla_tma.ptx
	@mkdir -p $(@D)
	@echo "PTXAS $@"
	@$(PTXAS) -warn-spills -lineinfo -arch sm_90a -o $@ $< >$@.log 2>&1 || { echo "fixture $@ failed: see $@.log"; rm -f $@; }
$(CUBIN_FIX)/notk_mul.cubin: $(CUBIN_FIX)/nofma.cubin
	@$(DROP_TKINFO) $< > $@
# the same PTX assembled with ptxas's default (-fmad=true), the note dropped
$(CUBIN_FIX)/fma_loc.cubin: tests/cubin/nofma.ptx
	@mkdir -p $(@D)
	@echo "PTXAS $@"
	@$(PTXAS) -lineinfo -arch sm_90 -o $@ $< >$@.log 2>&1 || { echo "fixture $@ failed: see $@.log"; rm -f $@; }
$(CUBIN_FIX)/notk_fused.cubin: $(CUBIN_FIX)/fma_loc.cubin
	@$(DROP_TKINFO) $< > $@
$(CUBIN_FIX)/notk_float.cubin: $(CUBIN_FIX)/lineinfo.cubin
	@$(DROP_TKINFO) $< > $@
$(BUILD)/tests/gen_rtc: tests/cubin/gen_rtc.c
	@mkdir -p $(@D)
	@$(CC) -std=gnu11 -O2 -Wall -Wextra -Werror -I$(CUDA_HOME)/include -o $@ $< \
	  -L$(CUBIN_RTC_LIBDIR) -lnvrtc -lnvJitLink -Wl,-rpath,$(CUBIN_RTC_LIBDIR) \
	  >$@.log 2>&1 || { echo "gen_rtc failed to build: see $@.log"; rm -f $@; }
CUBIN_RTC := $(addprefix $(CUBIN_FIX)/,nvrtc_lineinfo.cubin nvrtc_arch.cubin nvrtc_arch.ptx \
	nvjitlink.cubin nvjitlink2.cubin)
$(CUBIN_FIX)/nvrtc_lineinfo.cubin: $(BUILD)/tests/gen_rtc
	@mkdir -p $(@D)
	@echo "GEN_RTC $(@D)"
	@$(BUILD)/tests/gen_rtc $(@D) >$@.log 2>&1 || { echo "fixture $@ failed: see $@.log"; rm -f $(CUBIN_RTC); }
$(filter-out %/nvrtc_lineinfo.cubin,$(CUBIN_RTC)): $(CUBIN_FIX)/nvrtc_lineinfo.cubin
CUBIN_FIXTURES += $(CUBIN_FIX)/ptxas_loc.cubin $(CUBIN_FIX)/ptxas_o2.cubin $(CUBIN_FIX)/nofma.cubin \
	$(CUBIN_FIX)/llvm_style.cubin $(CUBIN_FIX)/notk_int.cubin $(CUBIN_FIX)/notk_float.cubin $(CUBIN_FIX)/notk_fadd.cubin \
	$(CUBIN_FIX)/notk_mul.cubin $(CUBIN_FIX)/notk_fused.cubin $(CUBIN_FIX)/xla_tma.cubin \
	$(CUBIN_RTC)
.PHONY: cubin-fixtures
cubin-fixtures: $(CUBIN_FIXTURES)

TEST_CUBIN_SRCS := $(filter-out tests/cubin/gen_rtc.c,$(wildcard tests/cubin/*.c))
$(BUILD)/tests/test_cubin: $(call objs,$(TEST_CUBIN_SRCS)) $(CUBIN_LIB) $(PTX_LIB) | $(CUBIN_FIXTURES) \
		$(BUILD)/bin/cubpf $(BUILD)/probes/kcount.bpf.o $(BUILD)/probes/memtrace.bpf.o
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $(call objs,$(TEST_CUBIN_SRCS)) $(PTX_LIB) $(CUBIN_LIB) $(DEP_LIBS) -lcmocka $(LDLIBS)
TEST_BINS += $(BUILD)/tests/test_cubin

# Benchmark: read and decompress every fatbin of a file, against a bare zstd loop.
$(BUILD)/bench/cubin_bench: $(call objs,tests/bench/cubin_bench.c) $(CUBIN_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(DEP_LIBS) $(LDLIBS)
BENCH_BINS += $(BUILD)/bench/cubin_bench
