# The two commands of the README:
#   make demo   install what is missing, build (Release), run the default study
#               suite and render the figures into results/figures/ (QUICK=1: the
#               same steps at tiny sizes, as .ci/run does on a fresh clone)
#   make test   install what is missing, build with -Werror, pass every test
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: deps configure build demo test clean

deps:
	bash .ci/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DRPSIM_WERROR=ON $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	bash experiments/demo.sh $(BUILD) $(if $(QUICK),--quick)

# ctest runs $(JOBS) tests at once (one per core), so each test's OpenMP team is
# one thread: two threads each on two cores made the vs-CLI pair of Python
# tests take 263 s side by side instead of 72 s. Tests that check thread
# counts set theirs themselves.
test: build
	cd $(BUILD) && OMP_NUM_THREADS=1 ctest --output-on-failure -j $(JOBS) --timeout 1200

clean:
	rm -rf $(BUILD)
