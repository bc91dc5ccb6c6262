# snn.c: the two commands of the quick start, on a fresh Debian machine.
#
#   make train    # installs what is missing, builds, trains the spiking CNN on Fashion-MNIST
#   make test     # installs what is missing, builds, runs every test (ctest)
#   make docs     # installs Doxygen if missing, builds the API reference: build-docs/html/
#
# Extra arguments: make train ARGS="--epochs 2 --T 2"; make test CMAKE_FLAGS="-DSNN_CUDA=OFF".
# The build itself is CMake (see CMakeLists.txt); this file only strings the steps together.
# `make train` is the main job: snn-train's own defaults (app/train_options.c), nothing added.
BUILD ?= build
CMAKE_FLAGS ?=
ARGS ?=
JOBS ?= $(shell nproc)

.PHONY: deps build train test docs clean

deps:
	@tools/install_deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) > /dev/null
	@cmake --build $(BUILD) -j $(JOBS)

train: build
	$(BUILD)/bin/snn-train $(ARGS)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(shell nproc)

docs:
	@SNN_WITH_DOCS=1 tools/install_deps.sh
	doxygen docs/Doxyfile
	@echo "snn.c: the API reference is in build-docs/html/index.html"

clean:
	rm -rf $(BUILD) build-docs
