# tl: run and differentiate JSON computation graphs.
#   make          build ./tl, build/libtl.a and, where nvcc is, ./tl-cuda.so
#   make CUDA=0   the same without the CUDA plugin
#   make gpu-bundle  build/gpu-bundle: tl, the plugin, libraries, fixtures and
#                 run.sh, the GPU check and benchmark for a bare GPU machine
#   make demo     install missing packages, build, run `tl grad` on an example
#   make check    install missing packages, build, run every test
#   make bench    benchmarks (ratios measured side by side)

CC      ?= cc
TL_VERSION := $(shell sed -n 's/^\#define TL_VERSION "\(.*\)"/\1/p' cli/cli.h)
CFLAGS  ?= -O2 -g
# Floating point as written: no contraction into FMA (the same bits on
# every CPU), `omp declare simd` math functions (backends/cpu/vmath.h), no
# errno from libm (so sqrt vectorises; results are the same).  GCC's -O2
# vectorises only loops of a known trip count unless told otherwise.
FPFLAGS := -ffp-contract=off -fopenmp-simd -fno-math-errno
VECFLAGS := $(if $(shell $(CC) --version 2>/dev/null | grep -i "free software"),-fvect-cost-model=dynamic)
STRICT  := -std=c11 -Wall -Wextra -Werror $(FPFLAGS)
WARN    := $(STRICT) $(VECFLAGS)
CPPFLAGS += -I.
# The pthreads OpenBLAS, each call on one thread (openblas_set_num_threads):
# tl shares matrix products out over its own threads in a fixed cut
# (bit-identical for any thread count).  Not the serial build: it keeps its
# work buffers without locks, and two threads calling gemm at once get
# wrong results (a batched product differed run to run with 2 threads).
# Falls back to the default OpenBLAS.
comma   := ,
BLAS_DIR := /usr/lib/x86_64-linux-gnu/openblas-pthread
# The tl program links it statically: its entry points are there at the
# first product, where loading the shared library took 1.5-2 ms (12000
# symbols to bind), and a start costs 0.1-0.2 ms more (its constructor and
# relocations).  -u pulls in what backends/cpu/blas.c refers to weakly.
# Other programs on libtl.a load the shared library when the first product
# needs it, from this path first (no run path: every other library would be
# looked for there too, at every start).
BLAS_LIB := $(wildcard $(BLAS_DIR)/libopenblas.so.0)
CPPFLAGS += $(if $(BLAS_LIB),-DTL_BLAS_LIB='"$(BLAS_LIB)"')
BLAS_STATIC := $(wildcard $(BLAS_DIR)/libopenblas.a)
# It is linked from a copy of the archive without OpenBLAS's constructor
# and destructor (gotoblas_init, gotoblas_quit: the .init_array and
# .fini_array of its memory.o, the only ones 0.3.21 has; any other
# member's are kept, and only an archive without a memory.o loses all
# of them), and started by
# backends/cpu/blas.c at the first product instead: a run with no product,
# and `tl --version`, no longer pays for its start at every start
# (processor detection, its tables, its fork handler: 0.45 ms and 23 page
# faults of a 2.5 ms process on the Zen 5 VM) nor for its shutdown.
BLAS_LAZY := $(if $(BLAS_STATIC),build/libopenblas-lazy.a)
BLAS_LINK := $(if $(BLAS_STATIC),-Wl$(comma)-u$(comma)cblas_sgemm$(comma)-u$(comma)cblas_dgemm$(comma)-u$(comma)openblas_set_num_threads$(comma)-u$(comma)openblas_get_config$(comma)-u$(comma)openblas_get_corename$(comma)-u$(comma)gotoblas_init $(BLAS_LAZY))
LDLIBS  := -lcjson -lprotobuf-c -ldeflate -lz -lsleef -lm -ldl -lpthread
# The tl program starts faster (a tiny graph's whole process, 21 runs on
# the Zen 5 VM: 6.4 -> 5.0 ms): it takes protobuf-c, libdeflate and zlib
# from the static archives their -dev packages ship (cJSON's and SLEEF's
# ship none), each shared library costing its loading and symbol binding
# at every start (-0.5 ms), and it is linked at a fixed address (-no-pie):
# no 13,600 relative relocations to apply and no pages they dirty at every
# start (-0.9 ms).  Its code gives up address randomisation for that; the
# library's objects stay position-independent, for programs on libtl.a.
# Its mmap calls, OpenBLAS's among them, go through cli/blas_buffers.c
# (--wrap=mmap), which asks for huge pages for OpenBLAS's work buffers
# where the process found them cheaper.
WRAP_MMAP := -Wl$(comma)--wrap=mmap
LIB_DIR := /usr/lib/x86_64-linux-gnu
TL_STATIC := $(foreach l,protobuf-c deflate z,$(if $(wildcard $(LIB_DIR)/lib$(l).a),$(l)))
TL_LDLIBS := -no-pie $(WRAP_MMAP) -lcjson $(if $(TL_STATIC),-Wl$(comma)-Bstatic $(addprefix -l,$(TL_STATIC)) -Wl$(comma)-Bdynamic) \
             $(addprefix -l,$(filter-out $(TL_STATIC),protobuf-c deflate z)) -lm -ldl -lpthread
# How OpenBLAS is reached is decided from what is installed when make
# parses this file, so the decision is kept in build/blas.flags: a binary
# or object built under another decision (libopenblas.a installed since,
# or removed) is rebuilt, never reused.  `make demo` and `make check`
# install packages first and only then start the make that builds.
BLAS_FLAGS := $(BLAS_LINK) $(filter -DTL_BLAS_LIB%,$(CPPFLAGS)) $(TL_LDLIBS)
SAN     := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all

LIB_SRC := $(wildcard backends/*.c backends/cpu/*.c formats/*.c graph/*.c exec/*.c)
# ONNX models are read with protobuf-c over the onnx.proto Debian ships
# (libonnx-dev): the C code is generated into build/gen at build time and
# compiled into the library like its sources (never committed).
ONNX_PROTO ?= /usr/include/onnx/onnx.proto
PB_SRC  := build/gen/onnx.pb-c.c
CPPFLAGS += -Ibuild/gen
CLI_SRC := $(wildcard cli/*.c)
TEST_SRC := $(wildcard tests/test_*.c)

OBJ      := $(LIB_SRC:%.c=build/obj/%.o) build/obj/$(PB_SRC:.c=.o)
CLI_OBJ  := $(CLI_SRC:%.c=build/obj/%.o)
SAN_OBJ  := $(LIB_SRC:%.c=build/san/%.o) build/san/$(PB_SRC:.c=.o)
TESTS    := $(TEST_SRC:tests/%.c=build/tests/%)

# ---- the CUDA plugin: ./tl-cuda.so, loaded by tl at run time (backends/cuda) ----
# nvcc from CUDA_HOME, else PATH, else /usr/local/cuda; CUDA=0 skips it.
# cudart is linked statically, cuBLAS dynamically through an rpath to the
# toolkit's libraries (and $ORIGIN); tl itself never links CUDA.  Only the
# plugin's entry point is exported (plugin.map).  --fmad=false keeps every
# multiply and add rounded on its own, as the CPU's scalar formulas are.
CUDA ?= 1
ifneq ($(CUDA),0)
NVCC := $(firstword $(if $(CUDA_HOME),$(wildcard $(CUDA_HOME)/bin/nvcc)) \
          $(shell command -v nvcc 2>/dev/null) $(wildcard /usr/local/cuda/bin/nvcc))
endif
ifneq ($(NVCC),)
CUDA_DIR := $(patsubst %/bin/nvcc,%,$(NVCC))
CUDA_LIB := $(firstword $(wildcard $(CUDA_DIR)/lib64 $(CUDA_DIR)/lib))
PLUGIN   := tl-cuda.so
else
PLUGIN   := plugin-skipped
endif
GENCODE  ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=[sm_90,compute_90]
NVFLAGS  := -std=c++17 -O2 --fmad=false $(GENCODE) -Werror all-warnings \
            -Xcompiler -Wall,-Wextra,-Werror,-fPIC,-fvisibility=hidden
CUDA_SRC := $(wildcard backends/cuda/*.cu)
# the library code the plugin needs, built into it
CUDA_C_SRC := backends/status.c backends/ops.c backends/tensor.c backends/cpu/cpu_bcast.c \
              backends/cuda/pool.c
CUDA_OBJ := $(CUDA_SRC:%.cu=build/cuda/%.o) $(CUDA_C_SRC:%.c=build/cuda/%.o)

.PHONY: FORCE all deps demo check test clang-check memcheck bench clean install uninstall examples ci-regression gpu-bundle plugin-skipped
all: tl $(PLUGIN)

deps:
	@bash .ci/deps.sh

# Before the first compile, the packages a build needs (.ci/deps.sh --check:
# a fresh machine's plain `make` names what is missing and `make deps`,
# rather than failing on a header); checked once, then remembered.
build/prereq.ok: .ci/deps.sh
	@CC='$(CC)' bash .ci/deps.sh --check
	@mkdir -p build && touch $@

$(OBJ) $(CLI_OBJ) $(SAN_OBJ): | build/prereq.ok

build/blas.flags: FORCE
	@mkdir -p build
	@echo '$(BLAS_FLAGS)' | cmp -s - $@ || echo '$(BLAS_FLAGS)' > $@

build/obj/backends/cpu/blas.o build/san/backends/cpu/blas.o: build/blas.flags

ifneq ($(BLAS_LAZY),)
$(BLAS_LAZY): $(BLAS_STATIC)
	@mkdir -p $(dir $@)
	@echo "  AR      $@ (OpenBLAS, started at the first product)"
	@rm -rf $@.d && mkdir -p $@.d && \
	  if (cd $@.d && ar x $(abspath $<) memory.o && \
	      objcopy --remove-section=.init_array --remove-section=.fini_array memory.o) 2>/dev/null; then \
	    cp $< $@.tmp && ar r $@.tmp $@.d/memory.o; \
	  else \
	    echo "  (no memory.o in $<: every constructor of the archive left out)"; \
	    objcopy --remove-section=.init_array --remove-section=.fini_array $< $@.tmp; \
	  fi && rm -rf $@.d && mv $@.tmp $@
endif

build/gen/onnx.pb-c.c build/gen/onnx.pb-c.h &: $(wildcard $(ONNX_PROTO)) | build/prereq.ok
	@mkdir -p build/gen
	@echo "  PROTOC  $<"
	@protoc-c --proto_path=$(dir $<) --c_out=build/gen $<
	@touch build/gen/onnx.pb-c.h

# generated code: compiled without -Werror (its style is protobuf-c's)
build/obj/build/gen/%.o: build/gen/%.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) -std=c11 $(CFLAGS) $(CPPFLAGS) -c $< -o $@

build/san/build/gen/%.o: build/gen/%.c
	@mkdir -p $(dir $@)
	@echo "  CC san  $<"
	@$(CC) -std=c11 -O1 -g $(SAN) $(CPPFLAGS) -c $< -o $@

build/fuzz/obj/build/gen/%.o: build/gen/%.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -std=c11 -O1 -g $(FUZZ_SAN) -fsanitize=fuzzer-no-link $(CPPFLAGS) -c $< -o $@

# the sources that include the generated header wait for it
$(patsubst %.c,build/obj/%.o,$(wildcard formats/onnx*.c graph/onnx*.c)) \
$(patsubst %.c,build/san/%.o,$(wildcard formats/onnx*.c graph/onnx*.c)) \
$(patsubst %.c,build/fuzz/obj/%.o,$(wildcard formats/onnx*.c graph/onnx*.c)): build/gen/onnx.pb-c.h

build/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(WARN) $(CFLAGS) $(CPPFLAGS) -MMD -MP -c $< -o $@

build/san/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC san  $<"
	@$(CC) $(WARN) -O1 -g $(SAN) $(CPPFLAGS) -MMD -MP -c $< -o $@

# The sanitized library maps every .npy and .npz input, however small,
# read-only (the release maps those of 1 MiB and more): the unit tests and
# the sanitized pass of the end-to-end cases then fault on any write into
# an input or its archive.
build/san/formats/npy.o: CPPFLAGS += -DTL_NPY_MAP_MIN=1
build/san/formats/npz.o: CPPFLAGS += -DTL_NPZ_MAP_MIN=1
# and cuts the raw data of every ONNX weight of 16 bytes and more out of the
# protobuf before parsing it, each read straight into its tensor (the
# release: from 64 KiB), so the end-to-end cases' small models take that path
build/san/formats/onnx.o: CPPFLAGS += -DTL_ONNX_STRIP_MIN=16

# libtl.a is one relocatable object whose global symbols are the library's
# (tl_*) and the few the command line shares with it (LIB_SHARED); the rest
# (cpu_*, bw_*, the ONNX protobuf's onnx__*: 329 names) are made local, so
# a program that links libtl cannot clash with them or replace one of them
# by a function of its own name
LIB_SHARED := cpu_blas_describe cpu_blas_facts_get cpu_blas_kernels_asked cpu_nthreads cpu_parallel
build/libtl.a: $(OBJ)
	@rm -f $@ build/libtl.o
	@ld -r -o build/libtl.o $^
	@objcopy --wildcard --keep-global-symbol='tl_*' $(LIB_SHARED:%=--keep-global-symbol=%) build/libtl.o
	@ar rcs $@ build/libtl.o

build/libtl-san.a: $(SAN_OBJ)
	@ar rcs $@ $^

tl: $(CLI_OBJ) build/libtl.a build/blas.flags $(BLAS_LAZY)
	$(CC) $(CFLAGS) -o $@ $(CLI_OBJ) build/libtl.a $(BLAS_LINK) $(TL_LDLIBS)

# the command line built with the sanitizers, for a second pass of the
# end-to-end cases; at a fixed address too: a position-independent tl-san
# applies 447,000 relative relocations at every start (50 ms a process on
# the Zen 5 VM; the hostile cases took 72 s instead of 56)
build/tl-san: $(CLI_SRC:%.c=build/san/%.o) build/libtl-san.a build/blas.flags $(BLAS_LAZY)
	$(CC) $(SAN) -no-pie -o $@ $(filter-out build/blas.flags $(BLAS_LAZY),$^) $(BLAS_LINK) $(WRAP_MMAP) $(LDLIBS)

build/tests/%: tests/%.c $(wildcard tests/*.h) build/libtl-san.a
	@mkdir -p $(dir $@)
	$(CC) $(WARN) -O1 -g $(SAN) $(CPPFLAGS) -o $@ $< build/libtl-san.a -lcriterion $(LDLIBS)
# the regression suite includes the fuzz harnesses
build/tests/test_fuzz_regressions: $(wildcard tests/fuzz/*.c tests/fuzz/*.h)
# the end-to-end suite holds the commands to the option table
build/tests/test_cli: cli/options.h

build/cuda/%.o: %.cu
	@mkdir -p $(dir $@)
	@echo "  NVCC    $<"
	@$(NVCC) $(NVFLAGS) $(CPPFLAGS) -MMD -MP -c $< -o $@

build/cuda/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC pic  $<"
	@$(CC) $(WARN) $(CFLAGS) -fPIC -fvisibility=hidden $(CPPFLAGS) -MMD -MP -c $< -o $@

tl-cuda.so: $(CUDA_OBJ) backends/cuda/plugin.map
	@echo "  LINK    $@"
	@$(NVCC) -shared $(GENCODE) -o $@ $(CUDA_OBJ) -L$(CUDA_LIB) -lcublas \
	  -Xlinker --version-script=backends/cuda/plugin.map -Xlinker --no-undefined \
	  -Xlinker -rpath='$$ORIGIN' -Xlinker -rpath=$(CUDA_LIB)

plugin-skipped:
	@echo "tl-cuda.so: skipped ($(if $(filter 0,$(CUDA)),CUDA=0,no nvcc in CUDA_HOME, PATH or /usr/local/cuda)); tl runs on the CPU"

-include $(CUDA_OBJ:.o=.d)

# the CUDA backend's device-neutral code on the host (every machine)
build/tests/test_cuda_host: tests/test_cuda_host.c $(wildcard tests/*.h backends/cuda/*.h) \
                            backends/cuda/pool.c build/libtl-san.a
	@mkdir -p $(dir $@)
	$(CC) $(WARN) -O1 -g $(SAN) $(CPPFLAGS) -o $@ $< backends/cuda/pool.c build/libtl-san.a -lcriterion $(LDLIBS)

# ---- make gpu-bundle: the GPU check for a bare GPU machine (tests/gpu) ----
# tl and the checker are linked to find their libraries beside them, and
# those libraries theirs (an old-style RPATH applies to all of them).
BUNDLE_LDLIBS := -lcjson -lprotobuf-c -ldeflate -lz -lsleef -lm -ldl -lpthread \
                 -Wl,-rpath,'$$ORIGIN',--disable-new-dtags

# (OpenBLAS not linked in: the bundle would carry it twice, in tl
# and gpu_check both; they load the one beside them at the first product)
build/gpu/tl: $(CLI_OBJ) build/libtl.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $(CLI_OBJ) build/libtl.a $(WRAP_MMAP) $(BUNDLE_LDLIBS)

build/gpu/gpu_check: tests/gpu/gpu_check.c build/libtl.a
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) $(CPPFLAGS) -o $@ $< build/libtl.a $(BUNDLE_LDLIBS)

ifeq ($(PLUGIN),tl-cuda.so)
gpu-bundle: build/gpu/tl build/gpu/gpu_check tl-cuda.so tests/gpu/run.sh tests/gpu/bundle.sh
	@NVCC=$(NVCC) BLAS_LIB=$(BLAS_LIB) bash tests/gpu/bundle.sh build/gpu-bundle build/gpu/tl build/gpu/gpu_check tl-cuda.so
else
gpu-bundle:
	@echo "make gpu-bundle needs nvcc (CUDA_HOME, PATH or /usr/local/cuda) to build the plugin" >&2; exit 1
endif

# packages first, then a make that parses this file anew and so builds
# against what is installed now
demo: deps
	@$(MAKE) --no-print-directory -j$(JOBS) tl
	./tl grad examples/mlp.json -i examples/mlp_inputs.npz

# ---- examples: a C program on libtl, and the many-runs CI check ----
examples: build/examples/embed

build/examples/embed: examples/embed.c build/libtl.a $(wildcard exec/*.h backends/*.h formats/*.h graph/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) -I. -Iexec -o $@ examples/embed.c build/libtl.a $(LDLIBS)

ci-regression: tl
	bash examples/ci-regression.sh

# ---- install: the binary, the plugin when built, the manual, bash
# completion, and libtl.a with its headers and a pkg-config file ----
PREFIX  ?= /usr/local
DESTDIR ?=
# the library's interface: tl.h, installed as include/tl/tl.h, and the
# headers it includes, in their folders (the compiler lists them; the
# internal ones stay out)
INC_HEADERS = $(filter-out exec/tl.h,$(filter %.h %.def,$(shell $(CC) $(CPPFLAGS) -MM exec/tl.h)))
install: tl build/libtl.a
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig \
	  $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man5 $(DESTDIR)$(PREFIX)/share/man/man7 \
	  $(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/include/tl
	install -m 755 tl $(DESTDIR)$(PREFIX)/bin/tl
	if [ -f tl-cuda.so ]; then install -d $(DESTDIR)$(PREFIX)/lib/tl && \
	  install -m 755 tl-cuda.so $(DESTDIR)$(PREFIX)/lib/tl/tl-cuda.so; fi
	install -m 644 build/libtl.a $(DESTDIR)$(PREFIX)/lib/libtl.a
	for h in $(INC_HEADERS); do install -D -m 644 $$h $(DESTDIR)$(PREFIX)/include/tl/$$h; done
	install -m 644 exec/tl.h $(DESTDIR)$(PREFIX)/include/tl/tl.h
	for m in man/*.1; do install -m 644 $$m $(DESTDIR)$(PREFIX)/share/man/man1/; done
	for m in $(wildcard man/*.5); do install -m 644 $$m $(DESTDIR)$(PREFIX)/share/man/man5/; done
	for m in $(wildcard man/*.7); do install -m 644 $$m $(DESTDIR)$(PREFIX)/share/man/man7/; done
	install -m 644 cli/completion.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/tl
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$${prefix}/lib' 'includedir=$${prefix}/include' '' \
	  'Name: tl' 'Description: run and differentiate computation graphs' 'Version: $(TL_VERSION)' \
	  'Libs: -L$${libdir} -ltl -lcjson -lprotobuf-c -ldeflate -lz -lsleef -lm -ldl -lpthread' 'Cflags: -I$${includedir}/tl' \
	  > $(DESTDIR)$(PREFIX)/lib/pkgconfig/tl.pc

uninstall:
	rm -rf $(DESTDIR)$(PREFIX)/bin/tl $(DESTDIR)$(PREFIX)/lib/tl $(DESTDIR)$(PREFIX)/lib/libtl.a \
	  $(DESTDIR)$(PREFIX)/include/tl $(DESTDIR)$(PREFIX)/lib/pkgconfig/tl.pc \
	  $(DESTDIR)$(PREFIX)/share/bash-completion/completions/tl \
	  $(addprefix $(DESTDIR)$(PREFIX)/share/man/man1/,$(notdir $(wildcard man/*.1))) \
	  $(addprefix $(DESTDIR)$(PREFIX)/share/man/man5/,$(notdir $(wildcard man/*.5))) \
	  $(addprefix $(DESTDIR)$(PREFIX)/share/man/man7/,$(notdir $(wildcard man/*.7)))
	@# the folders install made, where nothing else is left in them
	@for d in lib/pkgconfig share/man/man1 share/man/man5 share/man/man7 share/man \
	  share/bash-completion/completions share/bash-completion share lib bin include; do \
	  rmdir $(DESTDIR)$(PREFIX)/$$d 2>/dev/null || true; done

# A stand-in CUDA plugin over the guarded test device, for the end-to-end
# device cases (tests/cli/devices.txt): built from the library's sources as
# position-independent code, exporting only its entry point.
build/tests/fake-cuda.so: tests/fake_cuda.c tests/testdev.h $(LIB_SRC) $(PB_SRC) $(wildcard backends/*.h backends/cpu/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(WARN) -O1 -g -fPIC -shared -fvisibility=hidden $(CPPFLAGS) -o $@ tests/fake_cuda.c $(LIB_SRC) $(PB_SRC) $(LDLIBS)

# Every test binary runs from the repository root (fixtures are relative);
# the end-to-end tests drive ./tl itself.  The unit tests run two binaries
# at a time (tests/units.sh), the longest first; the end-to-end cases then
# keep both cores busy on their own.
UNIT_FIRST := $(foreach t,test_onnx test_hvp test_vmath test_loader,$(filter build/tests/$(t),$(TESTS)))
UNITS := $(UNIT_FIRST) $(filter-out build/tests/test_cli $(UNIT_FIRST),$(TESTS))
test: tl build/tl-san $(TESTS) build/tests/fake-cuda.so build/examples/embed $(PLUGIN) \
      build/gpu/tl build/gpu/gpu_check
	@TL=./tl bash tests/units.sh $(UNITS)
	@echo "== build/tests/test_cli"; TL=./tl build/tests/test_cli --jobs 2
	@echo "== tests/docs.sh (the commands README.md and examples/README.md show)"; TL=./tl bash tests/docs.sh
	@echo "== build/tests/test_cli with the sanitized tl (build/tl-san)"
	@TL=build/tl-san build/tests/test_cli --jobs 2
	@echo "== the GPU bundle's checker, its CPU control (tests/gpu/run.sh step 2)"
	@build/gpu/gpu_check --device cpu tests/fixtures/ops tests/fixtures/flow >build/gpu/control.log || \
	  { cat build/gpu/control.log; exit 1; }; tail -1 build/gpu/control.log
	@build/gpu/gpu_check --device cpu --fallback tests/fixtures/nn >build/gpu/control.log || \
	  { cat build/gpu/control.log; exit 1; }; tail -1 build/gpu/control.log

clang-check: build/gen/onnx.pb-c.h
	@if command -v clang >/dev/null; then \
	  for f in $(LIB_SRC) $(CLI_SRC) backends/cuda/pool.c tests/gpu/gpu_check.c tests/test_cuda_host.c; do \
	    clang $(STRICT) $(CPPFLAGS) -fsyntax-only $$f || exit 1; done; \
	  echo "clang: warning-free"; fi

# End-to-end cases once more, the release tl under valgrind memcheck: any
# leak or memory error fails the case (exit 97).  Valgrind costs about a
# second a process whatever the process does, so `make check` takes the
# first case of every file and every 4th after it (MEMCHECK_EVERY; the
# sanitized tl, ASan + LSan + UBSan, has run every case just before);
# `make memcheck MEMCHECK_EVERY=1` runs them all (about 18 minutes on 2
# cores).  A copy of the binary, so a rebuild during the run cannot pull it
# away; absolute paths, so cases that run tl from another folder find it.
MEMCHECK_EVERY ?= 4
VALGRIND := valgrind -q --suppressions=$(CURDIR)/tests/valgrind.supp --leak-check=full --show-leak-kinds=definite,indirect \
            --errors-for-leak-kinds=definite,indirect --error-exitcode=97
memcheck: tl build/tests/test_cli
	@cp tl build/tl-memcheck
	@echo "== build/tests/test_cli under valgrind memcheck"
	@TL="$(VALGRIND) $(CURDIR)/build/tl-memcheck" TL_MEMCHECK=1 TL_CLI_TIMEOUT=300 TL_CLI_EVERY=$(MEMCHECK_EVERY) \
	  build/tests/test_cli --jobs 2

# The build on every core first (the tests themselves run in their own
# order, each binary with its own jobs); then the checks.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
check: deps
	$(MAKE) -j$(JOBS) tl build/tl-san $(TESTS) build/tests/fake-cuda.so build/examples/embed $(PLUGIN)
	$(MAKE) clang-check
	$(MAKE) test
	$(MAKE) memcheck

bench: tl
	@bash tests/bench/run.sh

clean:
	rm -rf build tl

-include $(OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(SAN_OBJ:.o=.d) $(CLI_SRC:%.c=build/san/%.d)

# ---- fuzzing: libFuzzer harnesses in tests/fuzz/ (see tests/fuzz/README.md) ----
#   make fuzz                       build build/fuzz/fuzz_* and run each for FUZZ_SECONDS
#   make fuzz FUZZ_NAMES=npz FUZZ_SECONDS=600 FUZZ_ARGS=-jobs=2
#   make fuzz-build                 build only
# Runs start from a scratch copy of tests/fuzz/corpus/NAME (plus
# tests/fuzz/regressions/NAME) in build/fuzz/work/NAME; crashes go to
# build/fuzz/artifacts/NAME/.  The committed corpus is never written.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_NAMES   ?= graph npy npz literal program onnx results
FUZZ_ARGS    ?=
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS  := -std=c11 -Wall -Wextra -O1 -g -ffp-contract=off -fopenmp-simd -fno-math-errno $(FUZZ_SAN)
FUZZ_OBJ     := $(LIB_SRC:%.c=build/fuzz/obj/%.o) build/fuzz/obj/$(PB_SRC:.c=.o)
FUZZ_ALL     := graph npy npz literal program onnx results
FUZZ_BINS    := $(FUZZ_ALL:%=build/fuzz/fuzz_%)
FUZZ_MAXLEN_graph   := 8192
FUZZ_MAXLEN_npy     := 4096
FUZZ_MAXLEN_npz     := 32768
FUZZ_MAXLEN_literal := 2048
FUZZ_MAXLEN_program := 4096
FUZZ_MAXLEN_onnx    := 8192
FUZZ_MAXLEN_results := 8192
FUZZ_ENV := OPENBLAS_NUM_THREADS=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

.PHONY: fuzz fuzz-build
fuzz-build: $(FUZZ_BINS)

# the fuzz build maps every archive, as make test's library does, and
# reads a model's raw data of 16 bytes and more apart (formats/onnx.c)
build/fuzz/obj/formats/npz.o: CPPFLAGS += -DTL_NPZ_MAP_MIN=1
build/fuzz/obj/formats/onnx.o: CPPFLAGS += -DTL_ONNX_STRIP_MIN=16
build/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link $(CPPFLAGS) -MMD -MP -c $< -o $@

build/fuzz/libtl-fuzz.a: $(FUZZ_OBJ)
	@ar rcs $@ $^

build/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_common.h build/fuzz/libtl-fuzz.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $(CPPFLAGS) -o $@ $< build/fuzz/libtl-fuzz.a $(LDLIBS)

fuzz_run = echo "== fuzz_$(1) for $(FUZZ_SECONDS)s"; \
	rm -rf build/fuzz/work/$(1); mkdir -p build/fuzz/work/$(1) build/fuzz/artifacts/$(1); \
	cp tests/fuzz/corpus/$(1)/* build/fuzz/work/$(1)/; \
	if [ -d tests/fuzz/regressions/$(1) ]; then cp tests/fuzz/regressions/$(1)/* build/fuzz/work/$(1)/ 2>/dev/null || true; fi; \
	$(FUZZ_ENV) build/fuzz/fuzz_$(1) $(if $(wildcard tests/fuzz/$(1).dict),-dict=tests/fuzz/$(1).dict) \
	  -max_len=$(FUZZ_MAXLEN_$(1)) -timeout=10 -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	  -artifact_prefix=build/fuzz/artifacts/$(1)/ $(FUZZ_ARGS) build/fuzz/work/$(1) \
	  || { echo "fuzz_$(1): FAILED, reproducer in build/fuzz/artifacts/$(1)/"; fail=1; }

# Every harness runs even when an earlier one finds something; the target
# fails at the end if any did.
fuzz: $(FUZZ_NAMES:%=build/fuzz/fuzz_%)
	@fail=0; $(foreach n,$(FUZZ_NAMES),$(call fuzz_run,$(n));) exit $$fail

-include $(FUZZ_OBJ:.o=.d)
