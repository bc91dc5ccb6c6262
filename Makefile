# snn.c: the two commands of the quick start, on a fresh Debian machine.
#
#   make train    # installs what is missing, builds, trains the spiking CNN on Fashion-MNIST
#   make test     # installs what is missing, builds, runs every test (ctest)
#   make docs     # the API reference with Doxygen (apt-get install doxygen): build-docs/html/
#
# Extra arguments: make train ARGS="--epochs 2 --T 2"; make test CMAKE_FLAGS="-DSNN_CUDA=OFF".
# The build itself is CMake (see CMakeLists.txt); this file only strings the steps together.
BUILD ?= build
CMAKE_FLAGS ?=
ARGS ?=
# The main job is snn-train's defaults with Adam at 3e-3: in 4 epochs on the 2-core CPU that
# reached 91.10% against 90.25% at the program's default 1e-3 (docs/results.md, "Main job").
# The program's own default stays 1e-3, which the documented GPU runs rely on. ARGS come after,
# so make train ARGS="--lr 1e-3" runs the program's defaults.
MAIN_JOB = --lr 3e-3
JOBS ?= $(shell nproc)

.PHONY: deps build train test docs clean

deps:
	@tools/install_deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) > /dev/null
	@cmake --build $(BUILD) -j $(JOBS)

train: build
	$(BUILD)/bin/snn-train $(MAIN_JOB) $(ARGS)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(shell nproc)

docs:
	doxygen docs/Doxyfile

clean:
	rm -rf $(BUILD) build-docs
