# tl: run and differentiate JSON computation graphs.
#   make          build ./tl and build/libtl.a
#   make demo     install missing packages, build, run `tl grad` on an example
#   make check    install missing packages, build, run every test
#   make bench    benchmarks (ratios measured side by side)

CC      ?= cc
CFLAGS  ?= -O2 -g
WARN    := -std=c11 -Wall -Wextra -Werror
CPPFLAGS += -I.
LDLIBS  := -lcjson -lz -lopenblas -lm
SAN     := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all

LIB_SRC := $(wildcard backends/*.c backends/cpu/*.c formats/*.c graph/*.c exec/*.c)
CLI_SRC := $(wildcard cli/*.c)
TEST_SRC := $(wildcard tests/test_*.c)

OBJ      := $(LIB_SRC:%.c=build/obj/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=build/obj/%.o)
SAN_OBJ  := $(LIB_SRC:%.c=build/san/%.o)
TESTS    := $(TEST_SRC:tests/%.c=build/tests/%)

.PHONY: all deps demo check test clang-check bench clean
all: tl

deps:
	@bash .ci/deps.sh

build/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) $(CPPFLAGS) -MMD -MP -c $< -o $@

build/san/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(WARN) -O1 -g $(SAN) $(CPPFLAGS) -MMD -MP -c $< -o $@

build/libtl.a: $(OBJ)
	ar rcs $@ $^

build/libtl-san.a: $(SAN_OBJ)
	ar rcs $@ $^

tl: $(CLI_OBJ) build/libtl.a
	$(CC) $(CFLAGS) -o $@ $(CLI_OBJ) build/libtl.a $(LDLIBS)

build/tests/%: tests/%.c build/libtl-san.a
	@mkdir -p $(dir $@)
	$(CC) $(WARN) -O1 -g $(SAN) $(CPPFLAGS) -o $@ $< build/libtl-san.a -lcriterion $(LDLIBS)

demo: deps tl
	./tl grad examples/mlp.json -i examples/mlp_inputs.npz

# Every test binary runs from the repository root (fixtures are relative);
# the end-to-end tests drive ./tl itself.
test: tl $(TESTS)
	@set -e; for t in $(TESTS); do echo "== $$t"; TL=./tl $$t --jobs 2; done

clang-check:
	@if command -v clang >/dev/null; then \
	  for f in $(LIB_SRC) $(CLI_SRC); do clang $(WARN) $(CPPFLAGS) -fsyntax-only $$f || exit 1; done; \
	  echo "clang: warning-free"; fi

check: deps
	$(MAKE) clang-check
	$(MAKE) test

bench: tl
	@bash tests/bench/run.sh

clean:
	rm -rf build tl

-include $(OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(SAN_OBJ:.o=.d)
