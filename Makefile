# ddpc: the compiler (build/ddpc), the runtime library every generated
# program links (build/libddprt.a) and the tests.
#
#   make deps    install what the build and the tests need (Debian, as root)
#   make         build ddpc and the runtime; say which toolchains were found
#   make test    build and run every test; ends with the CUnit summary
#                (ONLY="NAME...": the suites whose name contains one of the NAMEs)
#   make fuzz    build the fuzzers (clang, libFuzzer + ASan + UBSan)
#   make bench   run the benchmarks (they report, they never fail the build)
#   make bench-deps  the newest PyTorch, in a venv, for the benchmarks (about 5 GB)
#   make memcheck       a short training run of every example under valgrind
#   make memcheck-asan  the same under ASan + UBSan
#   make gpu-kit  .gpu/: what tests/gpu/run.sh needs on a bare GPU node (ddpc and
#                 the runtime without MPI, every net's GPU program, the CPU's
#                 results to compare with, data, tools), built here
#   make install  ddpc, the runtime's headers and libraries under PREFIX
#                 (/usr/local; DESTDIR stages them for a package)
#
# What is missing disables a target with a line saying so; it never breaks the
# build. Our own code is compiled with -Werror; bison/flex output is not ours,
# so it gets the same warnings minus the few its skeletons always trip.

BUILD   ?= build
CC      ?= cc
PYTHON  ?= /usr/bin/python3   # Debian's python3: the one python3-torch installs into

WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
           -Wformat=2 -Wvla -Wundef
CFLAGS  ?= -O2 -g
# override: a CFLAGS given on make's command line (say, sanitizers) adds to these
override CFLAGS += -std=c11 -D_GNU_SOURCE -fopenmp -MMD -MP -Icompiler -Iruntime -I$(BUILD)
OURFLAGS := $(WARN) -Werror
GENFLAGS := $(WARN) -Wno-unused-function -Wno-sign-compare -Wno-unused-parameter \
            -Wno-missing-prototypes -Wno-shadow

# ---- what this machine has -------------------------------------------------
NVCC      := $(or $(shell command -v nvcc 2>/dev/null),$(wildcard /usr/local/cuda/bin/nvcc))
CUDA_HOME := $(if $(NVCC),$(patsubst %/bin/nvcc,%,$(NVCC)))
NCCL_H    := $(firstword $(wildcard $(CUDA_HOME)/include/nccl.h /usr/local/include/nccl.h /usr/include/nccl.h))
CUDNN_H   := $(firstword $(wildcard $(CUDA_HOME)/include/cudnn.h /usr/local/include/cudnn.h /usr/include/cudnn.h /usr/include/x86_64-linux-gnu/cudnn.h))
comma := ,
space := $(subst ,, )
# The GPUs that programs and the GPU runtime are built for when no GPU is
# visible (ddpc --arch picks one; a visible GPU, its own): the generations in
# use in clusters today (A100, A10/A40/RTX 30, L4/L40/RTX 40, H100/H200,
# B200), as machine code, and PTX of the newest, which later GPUs compile at
# load. Those this nvcc cannot build are left out (all are asked for when it
# cannot say, as ddpc does). ddpc reads the list from config.h; the runtime's
# kernels are built for the same, so that a program built without --arch
# runs wherever its own kernels do. Ascending: the last is the newest.
CUDA_ARCHS       ?= 80 86 89 90 100
ifneq ($(strip $(CUDA_ARCHS)),$(strip $(shell printf '%s\n' $(CUDA_ARCHS) | grep -x '[1-9][0-9]*' | sort -nu | tr '\n' ' ')))
$(error CUDA_ARCHS must be architecture numbers in ascending order, such as 80 86 89 90 100, not '$(CUDA_ARCHS)')
endif
ifeq ($(strip $(CUDA_ARCHS)),)
$(error CUDA_ARCHS must name at least one architecture, such as 90)
endif
CUDA_ARCHS_LISTED := $(if $(NVCC),$(patsubst compute_%,%,$(filter compute_%,$(shell $(NVCC) --list-gpu-arch 2>/dev/null))))
CUDA_ARCHS_BUILT  := $(if $(CUDA_ARCHS_LISTED),$(filter $(CUDA_ARCHS),$(CUDA_ARCHS_LISTED)),$(CUDA_ARCHS))
ifeq ($(and $(NVCC),$(CUDA_ARCHS_LISTED),$(if $(CUDA_ARCHS_BUILT),,none)),none)
$(error $(NVCC) builds none of CUDA_ARCHS ($(CUDA_ARCHS)); it builds $(CUDA_ARCHS_LISTED))
endif
CUDA_ARCH_FLAGS  := $(foreach a,$(CUDA_ARCHS_BUILT),-gencode arch=compute_$(a),code=sm_$(a)) \
                    $(if $(CUDA_ARCHS_BUILT),-gencode arch=compute_$(lastword $(CUDA_ARCHS_BUILT))$(comma)code=compute_$(lastword $(CUDA_ARCHS_BUILT)))
MPICC     := $(shell command -v mpicc 2>/dev/null)
MPI_CFLAGS := $(if $(MPICC),$(shell $(MPICC) --showme:compile 2>/dev/null) -DDDP_HAVE_MPI)
MPI_LIBS   := $(if $(MPICC),$(shell $(MPICC) --showme:link 2>/dev/null))
HAVE_CUNIT  := $(wildcard /usr/include/CUnit/CUnit.h)
HAVE_ZLIB   := $(wildcard /usr/include/zlib.h)
# oneDNN 2.x (libdnnl-dev): the CPU build's convolutions where it has a
# direct kernel for them (runtime/onednn_cpu.h); without it, the runtime's
# own. Version 3 changed the C API that onednn_cpu.c calls.
# (The probe has no '#' in it: make 4.3 keeps a '\#' inside $(shell) as is.)
HAVE_DNNL   := $(shell echo DNNL_VERSION_MAJOR | $(CC) -E -P -include oneapi/dnnl/dnnl_version.h -x c - 2> /dev/null | \
                 grep -qx 2 && echo 2.x)
DNNL_LIBS   := $(if $(HAVE_DNNL),-ldnnl)
# libpng and libjpeg-turbo (libpng-dev, libjpeg62-turbo-dev): image folders
# and --predict of image files (runtime/image_decode.h); without them the
# runtime says so when given one. Linked statically, so that a program
# built here runs on a GPU node that has neither: copies go beside the
# runtime's libraries ($(BUILD)/, PREFIX/lib/ddpc), where ddpc names them
# in a program's build line (compiler/build.c).
IMAGE_A     := $(abspath $(shell for a in libpng16.a libjpeg.a; do $(CC) -print-file-name=$$a; done | grep /))
HAVE_IMAGES := $(if $(and $(wildcard /usr/include/png.h),$(wildcard /usr/include/jpeglib.h)),$(word 2,$(IMAGE_A)))
IMAGE_LIBS  := $(if $(HAVE_IMAGES),$(IMAGE_A))
IMAGE_COPIES := $(addprefix $(BUILD)/,$(notdir $(IMAGE_LIBS)))
# What a CPU program links after libddprt.a and the image libraries; the
# unit tests, linked here, take the system's image libraries.
PROGRAM_LIBS := -lz -lm $(DNNL_LIBS) $(MPI_LIBS)
CPU_LIBS     := $(IMAGE_LIBS) $(PROGRAM_LIBS)
FLEX      := $(shell command -v flex 2>/dev/null)
BISON     := $(shell command -v bison 2>/dev/null)
CLANG     := $(shell command -v clang 2>/dev/null)

found = $(if $(2),found   $(1): $(2),missing $(1): $(3))

# ---- sources ---------------------------------------------------------------
COMPILER_SRC := $(wildcard compiler/*.c)
COMPILER_OBJ := $(COMPILER_SRC:%.c=$(BUILD)/%.o)
GRAMMAR_OBJ  := $(BUILD)/net.tab.o $(BUILD)/net.lex.o
FRONT_OBJ    := $(filter-out $(BUILD)/compiler/main.o,$(COMPILER_OBJ)) $(GRAMMAR_OBJ)

# The runtime: target-independent C, plus one device layer and one set of
# library ops per target (*_cpu.c here, *_cuda.cu for GPUs), same symbols.
RUNTIME_SRC  := $(wildcard runtime/*.c)
RUNTIME_OBJ  := $(RUNTIME_SRC:%.c=$(BUILD)/%.o)
RUNTIME_CUDA_OBJ := $(filter-out %_cpu.o,$(RUNTIME_OBJ)) \
                    $(patsubst %.cu,$(BUILD)/%.o,$(wildcard runtime/*.cu))

TEST_SRC     := $(wildcard tests/unit/*.c)
TEST_OBJ     := $(TEST_SRC:%.c=$(BUILD)/%.o)

.PHONY: all deps run test check fuzz bench bench-deps memcheck memcheck-asan install uninstall found clean gpu-kit FORCE
all: found $(BUILD)/ddpc $(BUILD)/libddprt.a $(if $(and $(NVCC),$(CUDNN_H),$(NCCL_H)),$(BUILD)/libddprt_cuda.a) \
     $(IMAGE_COPIES)

found:
	@echo "ddpc build: $(call found,nvcc,$(NVCC),CUDA target disabled)"
	@echo "ddpc build: $(call found,NCCL,$(NCCL_H),CUDA target disabled)"
	@echo "ddpc build: $(call found,cuDNN,$(CUDNN_H),CUDA target disabled)"
	@echo "ddpc build: $(call found,MPI,$(MPICC),CPU target limited to one rank)"
	@echo "ddpc build: $(call found,oneDNN,$(HAVE_DNNL),CPU convolutions on the runtime's own kernels only)"
	@echo "ddpc build: $(call found,libpng+libjpeg,$(IMAGE_LIBS),no image folders or image files; run make deps)"
	@echo "ddpc build: $(call found,CUnit,$(HAVE_CUNIT),make test disabled; run make deps)"
	@$(if $(and $(FLEX),$(BISON)),true,echo "ddpc build: flex/bison missing: run make deps" && false)

# ---- grammar: bison and flex output are build products ----------------------
# Each tool writes its .c and .h in one run: the .h is made by the .c's rule
# (a rule naming both would be two rules to make -j, running the tool twice
# at once over the same files), or, removed alone, by the tool again. The
# objects wait for both files, so that none compiles a .c being rewritten.
BISON_RUN = $(BISON) -Wall -Werror --defines=$(BUILD)/net.tab.h -o $(BUILD)/net.tab.c grammar/net.y
FLEX_RUN = $(FLEX) --header-file=$(BUILD)/net.lex.h -o $(BUILD)/net.lex.c grammar/net.l
$(BUILD)/net.tab.c: grammar/net.y
	@mkdir -p $(BUILD)
	$(BISON_RUN)
$(BUILD)/net.tab.h: $(BUILD)/net.tab.c
	@test -f $@ || $(BISON_RUN)

$(BUILD)/net.lex.c: grammar/net.l $(BUILD)/net.tab.h
	@mkdir -p $(BUILD)
	$(FLEX_RUN)
$(BUILD)/net.lex.h: $(BUILD)/net.lex.c
	@test -f $@ || $(FLEX_RUN)

$(BUILD)/net.tab.o: $(BUILD)/net.tab.c $(BUILD)/net.tab.h $(BUILD)/net.lex.h
	$(CC) $(CFLAGS) $(GENFLAGS) -c -o $@ $<
$(BUILD)/net.lex.o: $(BUILD)/net.lex.c $(BUILD)/net.lex.h $(BUILD)/net.tab.h
	$(CC) $(CFLAGS) $(GENFLAGS) -c -o $@ $<

# What ddpc needs to build programs: the tools found here, written down once.
# Written on every make but replaced only when it changes, so that a `make`
# before `make deps` does not leave ddpc building without what deps installed.
$(BUILD)/config.h: FORCE
	@mkdir -p $(BUILD)
	@{ echo '/* written by make: the tools ddpc builds programs with */'; \
	   echo '#define DDPC_NVCC "$(NVCC)"'; \
	   echo '#define DDPC_CUDA_ARCHS $(subst $(space),$(comma) ,$(strip $(CUDA_ARCHS)))'; \
	   echo '#define DDPC_CUDA_LIBS "-lgomp -lz -lm"'; \
	   echo '#define DDPC_IMAGE_LIBS "$(notdir $(IMAGE_LIBS))"'; \
	   echo '#define DDPC_MPI_LIBS "$(MPI_LIBS)"'; \
	   echo '#define DDPC_CPU_CXX "$(or $(shell command -v g++ 2>/dev/null),c++)"'; \
	   echo '#define DDPC_CPU_LIBS "$(PROGRAM_LIBS)"'; } > $@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi
FORCE:

# Our objects need the generated headers to exist before their first build.
$(BUILD)/%.o: %.c | $(BUILD)/net.tab.h $(BUILD)/net.lex.h $(BUILD)/config.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(OURFLAGS) $(MPI_CFLAGS) -c -o $@ $<

# ---- the compiler and the runtime -------------------------------------------
# ddpc plans buckets with the runtime's own planner, and suggests with the
# runtime's own "did you mean" (one rule, two users).
# ddpc shares with the programs it builds: the bucket plan, "did you mean",
# the reading of numbers (numbers.c), and the rule for which paths an output
# may be (dirs.c, with status.c's messages).
$(BUILD)/ddpc: $(COMPILER_OBJ) $(GRAMMAR_OBJ) $(BUILD)/runtime/buckets.o $(BUILD)/runtime/suggest.o $(BUILD)/runtime/numbers.o \
               $(BUILD)/runtime/dirs.o $(BUILD)/runtime/status.o
	$(CC) $(CFLAGS) -o $@ $^ -lm

# The CPU ops (their products, im2col, col2im, Winograd's transforms) are
# vectorised for this machine, as ddpc builds the generated programs
# (-march=native). Elsewhere -std=c11 keeps floating-point contraction off.
# No AVX-512 on x86-64: valgrind (make memcheck) cannot decode it; gemm_cpu.c
# and winograd_cpu.c build their 16-float code for AVX-512 themselves
# (gemm_cpu.h: DDP_CPU_WIDE_BEGIN) and run it only where the CPU (not
# valgrind's) has it.
NO_AVX512 := $(if $(filter x86_64,$(shell uname -m)),-mno-avx512f)
$(BUILD)/runtime/ops_cpu.o $(BUILD)/runtime/winograd_cpu.o $(BUILD)/runtime/gemm_cpu.o $(BUILD)/runtime/round_cpu.o: \
    override CFLAGS += -O3 -march=native $(NO_AVX512)
# Winograd's transforms and the products may fuse multiply-adds: each
# element goes through one expression (runtime/gemm_cpu.h), so one binary
# computes every sample and every rank the same way, which is all the
# invariance promises need.
$(BUILD)/runtime/winograd_cpu.o $(BUILD)/runtime/gemm_cpu.o: override CFLAGS += -ffp-contract=fast
# Winograd's loops that copy or zero a few vectors stay loops: GCC turned its
# tile loads into memmove calls, 5% of a resnet.net step. (A GCC flag: given
# only where the compiler takes it.)
NO_LOOP_CALLS := $(shell $(CC) -Werror -fno-tree-loop-distribute-patterns -x c -c -o /dev/null /dev/null 2>/dev/null && \
                   echo -fno-tree-loop-distribute-patterns)
$(BUILD)/runtime/winograd_cpu.o: override CFLAGS += $(NO_LOOP_CALLS)

$(BUILD)/runtime/onednn_cpu.o: override CFLAGS += $(if $(HAVE_DNNL),-DDDP_HAVE_DNNL)
$(BUILD)/runtime/image_decode.o $(BUILD)/tests/unit/test_image_folder.o: \
    override CFLAGS += $(if $(IMAGE_LIBS),-DDDP_HAVE_IMAGES)
# Their flags change with what make finds, and config.h with them: a make
# after make deps rebuilds them.
$(BUILD)/runtime/onednn_cpu.o $(BUILD)/runtime/image_decode.o $(BUILD)/tests/unit/test_image_folder.o: \
    $(BUILD)/config.h

$(IMAGE_COPIES): $(IMAGE_LIBS)
	@mkdir -p $(BUILD)
	cp $(filter %/$(notdir $@),$(IMAGE_LIBS)) $@

$(BUILD)/libddprt.a: $(RUNTIME_OBJ)
	@mkdir -p $(BUILD)
	rm -f $@ && ar rcs $@ $^

# The GPU runtime. nvcc is told nothing about -Wundef: CUDA's own headers trip it.
$(BUILD)/runtime/%.o: runtime/%.cu
	@mkdir -p $(dir $@)
	$(NVCC) -O2 -g -std=c++17 $(CUDA_ARCH_FLAGS) -Xcompiler -Wall,-Wextra,-Werror -Iruntime $(MPI_CFLAGS) -MMD -MP -c -o $@ $<

# The runtime's kernels are built again when their architectures change
# (CUDA_ARCHS, or what this nvcc builds).
$(BUILD)/cuda_arch_flags: FORCE
	@mkdir -p $(BUILD)
	@echo '$(CUDA_ARCH_FLAGS)' > $@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi
$(patsubst runtime/%.cu,$(BUILD)/runtime/%.o,$(wildcard runtime/*.cu)): $(BUILD)/cuda_arch_flags

$(BUILD)/libddprt_cuda.a: $(RUNTIME_CUDA_OBJ)
	rm -f $@ && ar rcs $@ $^

# ---- the main job ---------------------------------------------------------------
# Compile the tutorial's net and train it: on the GPUs if this machine has any,
# else on the CPU (ddpc's own choice of target). RUN_FLAGS passes flags to the
# program (e.g. --epochs 2).
run: all
	$(BUILD)/ddpc examples/mnist.net -o $(BUILD)/mnist_train
	$(BUILD)/mnist_train $(RUN_FLAGS)

# ---- tests -------------------------------------------------------------------
# Every `void suite_NAME(void)` at the start of a line in tests/unit/*.c is a
# CUnit suite; the runner's list is generated so no file needs editing to add one.
$(BUILD)/suites.inc: $(TEST_SRC)
	@mkdir -p $(BUILD)
	sed -n 's/^void \(suite_[a-z0-9_]*\)(void).*/SUITE(\1)/p' $(TEST_SRC) | sort > $@

$(TEST_OBJ): $(BUILD)/suites.inc

$(BUILD)/unit_tests: $(TEST_OBJ) $(FRONT_OBJ) $(BUILD)/libddprt.a
	$(CC) $(CFLAGS) -o $@ $(TEST_OBJ) $(FRONT_OBJ) $(BUILD)/libddprt.a -lcunit $(CPU_LIBS)

test: all $(BUILD)/unit_tests
	@$(if $(HAVE_CUNIT),true,echo "make test needs CUnit: run make deps" && false)
	DDPC=$(abspath $(BUILD)/ddpc) PYTHON=$(PYTHON) TB_PYTHON=$(TB_VENV)/bin/python CPU_LIBS="$(CPU_LIBS)" $(BUILD)/unit_tests $(ONLY)

# The fast tier, for the edit-build-check loop: the unit suites of the front
# end, the goldens, the data readers, the sampler, buckets, safetensors, the
# store, the topology and the ops; about 20 s on 2 cores. A suite that runs
# programs other than ddpc says which in its name in the runner's output
# ("distributed [mpirun, python, bash]"): here, front and safetensors
# cross-check one result with python, device_rules compiles one kernel
# with gcc and nvcc, and runner builds a runner of a made-up suite with cc;
# the rest run in the runner's own process or run ddpc.
# make test still runs every suite, these included.
CHECK_SUITES := front golden augment loader sampler buckets safetensors store ops cifar npy idx exact_sum outputs plan_scale confusion \
                rendezvous flags checkpoint progress scaling device_rules image_folder image_resize launch_table precision step_graphs resident batch_upload \
                runner cgroup_memory
check: all $(BUILD)/unit_tests
	@$(if $(HAVE_CUNIT),true,echo "make check needs CUnit: run make deps" && false)
	DDPC=$(abspath $(BUILD)/ddpc) $(BUILD)/unit_tests $(CHECK_SUITES)

# ---- fuzzing -------------------------------------------------------------------
FUZZ_FLAGS := -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
              -std=c11 -D_GNU_SOURCE -Icompiler -Iruntime -Itests/fuzz -I$(BUILD)
fuzz: $(BUILD)/fuzz_parse $(BUILD)/fuzz_store $(BUILD)/fuzz_safetensors $(BUILD)/fuzz_idx $(BUILD)/fuzz_cifar $(BUILD)/fuzz_npy \
      $(if $(IMAGE_LIBS),$(BUILD)/fuzz_image)
$(BUILD)/fuzz_parse: tests/fuzz/fuzz_parse.c $(filter-out compiler/main.c,$(COMPILER_SRC)) runtime/buckets.c runtime/suggest.c runtime/numbers.c \
                     runtime/dirs.c runtime/status.c \
                     $(BUILD)/net.tab.c $(BUILD)/net.lex.c | $(BUILD)/config.h
	@$(if $(CLANG),true,echo "make fuzz needs clang" && false)
	$(CLANG) $(FUZZ_FLAGS) -o $@ $^ -lm

$(BUILD)/fuzz_store: tests/fuzz/fuzz_store.c runtime/store_wire.c runtime/status.c
	@$(if $(CLANG),true,echo "make fuzz needs clang" && false)
	$(CLANG) $(FUZZ_FLAGS) -o $@ $^

$(BUILD)/fuzz_safetensors: tests/fuzz/fuzz_safetensors.c runtime/safetensors.c runtime/checkpoint.c runtime/weights.c runtime/conv_choices.c \
                           runtime/sampler.c runtime/json.c runtime/status.c runtime/dirs.c
	@$(if $(CLANG),true,echo "make fuzz needs clang" && false)
	@mkdir -p $(BUILD)
	$(CLANG) $(FUZZ_FLAGS) -o $@ $^ -lz -lm

# dataset.c decodes image files when gathering: these two take the decoder
# without libpng or libjpeg (it then refuses every image).
DATASET_SRC := runtime/dataset.c runtime/image_decode.c runtime/image_resize.c runtime/status.c
$(BUILD)/fuzz_idx: tests/fuzz/fuzz_idx.c runtime/idx.c $(DATASET_SRC)
	@$(if $(CLANG),true,echo "make fuzz needs clang" && false)
	@mkdir -p $(BUILD)
	$(CLANG) $(FUZZ_FLAGS) -o $@ $^ -lz -lm

$(BUILD)/fuzz_cifar: tests/fuzz/fuzz_cifar.c runtime/cifar.c $(DATASET_SRC)
	@$(if $(CLANG),true,echo "make fuzz needs clang" && false)
	@mkdir -p $(BUILD)
	$(CLANG) $(FUZZ_FLAGS) -o $@ $^ -lz -lm

$(BUILD)/fuzz_npy: tests/fuzz/fuzz_npy.c runtime/npy.c $(DATASET_SRC)
	@$(if $(CLANG),true,echo "make fuzz needs clang" && false)
	@mkdir -p $(BUILD)
	$(CLANG) $(FUZZ_FLAGS) -o $@ $^ -lz -lm

$(BUILD)/fuzz_image: tests/fuzz/fuzz_image.c $(DATASET_SRC)
	@$(if $(CLANG),true,echo "make fuzz needs clang" && false)
	@mkdir -p $(BUILD)
	$(CLANG) $(FUZZ_FLAGS) -DDDP_HAVE_IMAGES -o $@ $^ $(IMAGE_LIBS) -lz -lm

# ---- benchmarks ------------------------------------------------------------------
bench: all
	bash bench/run.sh

# ---- memory checks ------------------------------------------------------------------
memcheck: all
	DDPC=$(abspath $(BUILD)/ddpc) tests/memcheck/run.sh
memcheck-asan: all
	DDPC=$(abspath $(BUILD)/ddpc) tests/memcheck/run.sh --asan

# ---- the GPU kit ---------------------------------------------------------------
# A GPU node may have the driver, nvcc and PyTorch's nvidia-* wheels, and none
# of flex, bison, MPI, CUnit or zlib's headers: everything that needs them is
# built here, into one folder that travels with the repository. ddpc and the
# runtime are installed there without MPI (MPICC empty), so nothing in the kit
# needs libmpi; their objects stay in $(BUILD)/gpu-kit, out of the folder.
# For the H200 the checks run on alone (CUDA_ARCHS=90): the runtime's
# kernels for five architectures would not fit the kit's 48 MiB.
# tests/gpu/kit.sh builds the rest; tests/gpu/run.sh runs it on the node.
GPU_KIT := .gpu
gpu-kit:
	@$(if $(and $(NVCC),$(CUDNN_H),$(NCCL_H)),true,echo "make gpu-kit needs nvcc, cuDNN and NCCL" && false)
	rm -rf $(GPU_KIT)
	$(MAKE) --no-print-directory BUILD=$(BUILD)/gpu-kit MPICC= CUDA_ARCHS=90 PREFIX=$(abspath $(GPU_KIT)) DESTDIR= install
	NVCC=$(NVCC) bash tests/gpu/kit.sh $(GPU_KIT)

# ---- install -----------------------------------------------------------------
# PREFIX/bin/ddpc finds its runtime from its own path: the headers in
# PREFIX/include/ddpc, the libraries in PREFIX/lib/ddpc (compiler/build.c).
# DESTDIR stages the tree for a package; nothing in it records the prefix.
PREFIX ?= /usr/local
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/include/ddpc $(DESTDIR)$(PREFIX)/lib/ddpc
	install -m 755 $(BUILD)/ddpc $(DESTDIR)$(PREFIX)/bin/ddpc
	install -m 644 runtime/*.h $(DESTDIR)$(PREFIX)/include/ddpc/
	install -m 644 $(BUILD)/libddprt.a $(wildcard $(BUILD)/libddprt_cuda.a) $(IMAGE_COPIES) $(DESTDIR)$(PREFIX)/lib/ddpc/
uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/ddpc
	rm -rf $(DESTDIR)$(PREFIX)/include/ddpc $(DESTDIR)$(PREFIX)/lib/ddpc

# ---- dependencies (Debian, as root) -----------------------------------------------
# libopenblas0-pthread: the BLAS Debian's python3-torch (the parity suite's
# reference, and a benchmark peer) computes on, as its users have it. The
# package takes any libblas.so.3, and without this one it gets the reference
# BLAS, on which OPENBLAS_CORETYPE, and CI's second kernel, mean nothing.
# The CPU build itself links no BLAS. python3-pil, python3-torchvision: PIL
# and torchvision's Resize and CenterCrop, which the tests hold the image
# decoding, resize and center_crop to.
DEB_PACKAGES := build-essential flex bison libcunit1-dev zlib1g-dev \
                libopenmpi-dev openmpi-bin python3-torch python3-numpy libopenblas0-pthread \
                dataset-fashion-mnist clang libclang-rt-14-dev valgrind iproute2 python3-venv libdnnl-dev \
                libpng-dev libjpeg62-turbo-dev python3-pil python3-torchvision
# TensorBoard itself, to check that it reads what --tensorboard writes
# (tools/read_tensorboard.py); a venv keeps it away from Debian's python.
# Without PyPI the tests still run, and say that TensorBoard's reader was not.
TB_VENV := /opt/ddpc-tb
deps:
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(DEB_PACKAGES)
	-test -x $(TB_VENV)/bin/python || /usr/bin/python3 -m venv $(TB_VENV)
	-$(TB_VENV)/bin/pip install -q tensorboard==2.21.0

# The newest PyTorch from PyPI, for the benchmarks only (bench/cpu_nets.sh
# compares with it and with Debian's): about 5 GB with its CUDA libraries,
# so never part of deps or CI. The benchmarks say so when it is missing.
BENCH_VENV := /opt/ddpc-bench
bench-deps:
	test -x $(BENCH_VENV)/bin/python || /usr/bin/python3 -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install -q --upgrade torch numpy

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
