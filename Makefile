# citegate: the two commands a newcomer needs are `make run` and `make test`.
# Both install missing Debian packages first (apt-get, only when missing).

BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
COV_BUILD  ?= build-cov
SECONDS    ?= 600
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
ARGS       ?=

# Libraries and tools the build needs, and those the tests add (see
# docs/dependencies.md). `make build` and `make run` install the first list only.
BUILD_PACKAGES := build-essential cmake pkg-config python3 ca-certificates \
            libuv1-dev libnghttp2-dev libmbedtls-dev node-llhttp libjsmn-dev \
            libsqlite3-dev libpq-dev libcmocka-dev
TEST_PACKAGES := postgresql openssl curl clang libclang-rt-14-dev llvm-14 nodejs nghttp2-client \
            python3-yaml prometheus chromium strace
# `make bench` and `make bench-versus`: nginx-light, haproxy, h2o and
# nghttp2-proxy (nghttpx) are the peers bench/versus measures citegate beside;
# openssl makes the certificate of --tls-upstream; linux-perf counts system
# calls (--syscalls) and profiles (--profile).
BENCH_PACKAGES := $(BUILD_PACKAGES) nginx-light haproxy h2o nghttp2-proxy openssl linux-perf
# `make image` (docker/image.sh): build the image without a Docker daemon.
IMAGE_PACKAGES := podman runc mmdebstrap uidmap curl

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps deps-build deps-bench deps-image build run test test-unit test-asan test-fuzz \
        bench bench-versus fuzz fuzz-long fuzz-coverage image clean

all: build

deps: PACKAGES = $(BUILD_PACKAGES) $(TEST_PACKAGES)
deps-build: PACKAGES = $(BUILD_PACKAGES)
deps-bench: PACKAGES = $(BENCH_PACKAGES)
deps-image: PACKAGES = $(IMAGE_PACKAGES)
deps deps-build deps-bench deps-image:
	@missing=$$(for p in $(PACKAGES); do \
	    dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; \
	  done); \
	if [ -n "$$missing" ]; then \
	  echo "installing:" $$missing; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: deps-build $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

run: build
	./$(BUILD)/citegate $(ARGS)

test: deps test-unit test-asan test-fuzz

test-unit: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCITEGATE_SANITIZE=ON -DCITEGATE_FAULTS=ON
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS)

# Short libFuzzer runs over the checked-in corpus (see tests/fuzz/README.md).
test-fuzz: deps
	CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCITEGATE_FUZZ=ON
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	cd $(FUZZ_BUILD) && ctest --output-on-failure -L fuzz -j $(JOBS)

fuzz: test-fuzz

# Every target, core and shell, for SECONDS each (two at a time), then a
# summary table in $(FUZZ_BUILD)/fuzz-long.md (tests/fuzz/README.md).
fuzz-long: deps
	CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCITEGATE_FUZZ=ON
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	python3 tests/fuzz/fuzz_long.py --build $(FUZZ_BUILD) --seconds $(SECONDS) --jobs 2 \
	  --out $(FUZZ_BUILD)/fuzz-long.md

# Line coverage of src/io/ by the shell drivers' corpora (and by the corpora
# a fuzz-long run grew, when there is one), from llvm-cov.
fuzz-coverage: deps
	CC=clang cmake -S . -B $(COV_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCITEGATE_FUZZ=ON \
	  -DCITEGATE_FUZZ_COVERAGE=ON
	cmake --build $(COV_BUILD) -j $(JOBS) --target fuzz_h1_server fuzz_h2_server fuzz_up_h1 fuzz_up_h2
	python3 tests/fuzz/coverage.py --build $(COV_BUILD) --long $(FUZZ_BUILD) --out $(COV_BUILD)/coverage.md

bench: deps-bench build
	./$(BUILD)/bench/core

# citegate beside nginx, HAProxy, h2o and nghttpx on one paced upstream
# (bench/README.md "versus"):
# minutes, 2 CPUs; a benchmark, not part of `make test`.
bench-versus: deps-bench build
	./bench/versus $(ARGS)

# Builds docker/Dockerfile with podman from a Debian base made by mmdebstrap,
# runs it and checks it: the demo, `citegate health`, at most 25 MB, no shell,
# exactly the shared objects its loader maps, start-up (docker/README.md
# "Building the image here"). Not part of `make test` (it takes a minute or
# more and ~1 GB of disk): .ci/run runs it after the suite.
image: deps-image
	bash docker/image.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) $(COV_BUILD)
