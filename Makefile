# ember: two commands get a newcomer from a fresh Debian 12 machine to a result.
#   make demo   install packages, build Release, run the main job on a synthetic model
#   make test   install packages, build, run every test through CTest
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps configure build demo test bench asan clean

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@scripts/demo.sh $(BUILD)/ember

test: build
	@ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

bench: build
	@scripts/bench.sh $(BUILD)

# Unit tests under AddressSanitizer + UndefinedBehaviorSanitizer (CI runs this too).
# Built RelWithDebInfo (-O2, line tables only: -g1) so the model tests stay quick, but fully
# instrumented; with the precompiled headers and unity batches of the Release build (EMBER_PCH,
# EMBER_UNITY in CMakeLists.txt; -Winvalid-pch with -Werror shows GCC uses the headers with
# -fsanitize). Tests named Slow* are skipped here only, and the Python suite (it drives
# the binary through torch, ~90 s, and its C++ paths are the ones the unit tests cover), and
# doc_commands (label docs: it checks the docs against the binary, which the Release run does).
asan: deps
	@cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEMBER_SANITIZE=ON -DEMBER_BENCH=OFF $(CMAKE_FLAGS) >/dev/null
	@cmake --build build-asan -j $(JOBS)
	@ctest --test-dir build-asan --output-on-failure -j $(JOBS) -LE 'slow|python|docs' -E 'Slow\.'

clean:
	rm -rf $(BUILD) build-asan
