#!/usr/bin/env bash
# The GPU checks, on a GPU node that has the driver, nvcc and (maybe) PyTorch
# with its nvidia-* wheels, and nothing else of ours: no flex, bison, MPI,
# CUnit or zlib headers. Everything is built beforehand by `make gpu-kit`
# into .gpu/, which travels with the repository:
#
#   bash tests/gpu/run.sh [--out DIR] [--kit DIR] [--dry-run] [--timing-only] [--rounds N]
#
#   0. libraries: cuDNN, cuBLAS, NCCL (and NVRTC, which cuDNN loads) are looked
#      for in LD_LIBRARY_PATH, the CUDA toolkit and Python's nvidia-* wheels,
#      LD_LIBRARY_PATH is set to where they are, and `ldd` names anything a
#      kit program still misses. A program that cannot start for a library's
#      or the driver's sake is rebuilt here from its .cu with this node's nvcc
#      (ddpc --rebuild, the recorded line pointed at this node's kit and nvcc,
#      linked through a folder of libX.so -> libX.so.N links), all at once;
#   1. one training step of every example and parity net, GPU against the CPU
#      build's (kit: same initial weights, same first batch of 64), by
#      tests/gpu/compare.c's norms (the error's against the update's, over all
#      tensors and each tensor at 10 times the tolerance):
#      - FP32 within 1e-3 of the update. cuDNN and cuBLAS sum in other orders
#        than the CPU build, which changes each sum by float32 roundings,
#        about 1e-6 of it (a ReLU input within a rounding of 0 may also flip,
#        one term of a weight gradient's sum: compare.c), far under 1e-3; the
#        first H200 run (2026-12-04) measured at most 6.3e-3 in a tensor
#        (fashion_resnet's flip; the limit 1e-2) and 8.2e-5 over all.
#      - --precision tf32 against the CPU's FP32 step within 3e-2: TF32
#        rounds each operand to 10 mantissa bits (u = 2^-11); through the
#        forward pass and the cancelling sums of softmax minus one-hot the
#        first H200 run measured up to ~5e-2 element-wise (mlp_sgd's
#        784-input linear1, the rest ~5e-4); a CPU emulation of mlp_sgd's step
#        gives linear1's 4.8e-2 element-wise and norm-wise 7.6e-3 in linear1,
#        5e-3 over all tensors (1.3e-2 if TF32 truncated instead of
#        rounding), and that H200 run measured just that, 7.6e-3 and 5.1e-3
#        (then with the libraries' own TF32 conversion).
#      - For the kit's precision_nets (mnist, resnet), tf32 and bf16 against
#        the CPU's step in the same precision instead: both builds now round
#        the operands by runtime/precision.h's rule, so what is left is the
#        order of sums and the operands that sit on a rounding boundary (on
#        the CPU against PyTorch float64 rounding alike, at most 3.8e-3 of
#        the update element-wise: tests/unit/test_parity.c); within 1e-2:
#        the first H100 run (2026-12-05) measured at most 2.5e-4 over all
#        tensors and 8.5e-3 in a tensor (resnet's bf16; the limit 1e-1),
#        NCHW and channels-last alike. And the GPU's step in each must be at
#        least twice as far from the CPU's FP32 step (that run: 28 to 182
#        times), so a GPU that rounds nothing fails.
#      Nets trained with Adam or AdamW are compared through their SGD twin
#      (the kit builds NAME_sgd): Adam's first step is nearly lr * sign(g),
#      so a rounding difference in a gradient near zero becomes a whole
#      step's difference, while SGD's first step is lr * g, the gradient
#      itself; the Adam programs themselves must take a step; and, after
#      every other net's step, mnist.net, fashion_resnet.net and
#      tests/layout/channels_last.net (three channels, on the kit's
#      data_channels_last/) channels-last (ddpc --layout nhwc, the default
#      for a tf32 or bf16 net on GPUs), built here from the kit's sources
#      (kit.txt's nhwc_nets; the checks say which);
#   2. mnist.net trains one epoch on the kit's 10,000 samples: samples/s, and
#      test_acc within 0.05 of the CPU build's; the CPU build's weights after
#      that epoch, evaluated on the GPU (--eval-only), score the CPU's
#      test_acc to within 2 of the 2,000 test samples; 20 shuffled steps of
#      mnist and resnet, and mnist's steps 151-160 resumed from the CPU's
#      checkpoint at 150 (the epoch's short last batch of 16, epoch 2's
#      order), against the CPU build's within 3e-3 of the update; 160 steps
#      from the start, for information (float drift, not a check);
#   3. NCCL with one rank through a real communicator (tests/mpi/nccl_helper.c
#      `one`), and the program with --backend nccl through env:// and
#      --nproc-per-node 1;
#   4. checkpoints: stopped at step 30 and resumed to 60, the exported weights
#      are byte for byte those of 60 steps at once; so are those of a run
#      whose algorithms cuDNN's timings chose (DDP_CUDNN_BENCHMARK=1),
#      resumed from its checkpoint at 30 with them, and so are those of a
#      run given --conv-algorithms FILE against the run that timed and wrote
#      FILE; the steps replayed from their CUDA graphs (mnist past a short
#      last batch, resnet with --no-sync-every 2) byte for byte those made
#      call by call; the training set held on the GPU (mnist,
#      fashion_resnet's crops) byte for byte the batches copied from the host;
#   5. the data { } block on the GPU: fashion_resnet.net's crops, flips and
#      normalize made on the GPU of the raw bytes (DDP_AUGMENT_ON=device, the
#      default) and by the host's loader (DDP_AUGMENT_ON=host): 3 steps, the
#      same bytes, and --eval-only's test loss the same; (after the
#      channels-last checks) the start-up memory check's estimate covers
#      what each run that says so took of the GPU;
#   6. (after every other net's step) timing, for information
#      (tests/gpu/timing.sh says what): ddpc six ways (FP32, tf32, bf16,
#      timed algorithms, nondeterministic ones allowed, no CUDA graph)
#      against PyTorch on the same GPU, where python3 has torch with CUDA
#      and numpy (PYTHON: another python), eager three ways and
#      torch.compile two, for mnist.net at batch 64 and 512 and resnet.net
#      at 64, in N interleaved rounds (--rounds N, default 1), a TIMING
#      line per net and round and one of the medians and ratios (only a
#      program that fails is FAILED, never a speed); where ncu is found,
#      the kernel times of a window of mnist's and of resnet's launches,
#      into OUT/ncu.NAME.csv. --timing-only times without the checks 1-5
#      (the kit's and the libraries' checks still come first).
#
# --dry-run does all that needs no GPU: the kit is there, built from these
# sources, at most 48 MiB and complete; no kit binary needs a library a GPU
# node lacks (readelf: only libc, libstdc++, libgomp, libz.so.1, CUDA's);
# the libraries are found and `ldd` is satisfied; the programs answer --help;
# the compare tool reads the references (a checkpoint too); a net's own data
# (data_NAME/) is whole, IDX, as many labels as images; where nvcc is found,
# the fallback rebuilds mnist here and the channels-last sources (kit.txt's
# nhwc_nets) build and answer --help; the script parses (bash -n).
#
# Each step runs under `timeout`, and the whole under 330 s (GPU_RUN_SECONDS).
# DIR (default: a new /tmp/ddpc-gpu.*) receives summary.txt (one OK, FAILED
# or SKIPPED line per check, with its numbers; INFO and TIMING lines inform),
# log.txt (every command and its output), work.tgz (the work folder's text)
# and, where ncu ran, ncu.mnist.csv and ncu.resnet.csv. Exit 0 only if no
# check failed.
set -u
cd "$(dirname "$0")/../.." || exit 2
root=$PWD
kit=$root/.gpu out='' dry=0 timing_only=0 rounds=1
while [ $# -gt 0 ]; do
    case $1 in
    --out) out=${2:?--out needs a folder}; shift 2 ;;
    --out=*) out=${1#--out=}; shift ;;
    --kit) kit=${2:?--kit needs a folder}; shift 2 ;;
    --kit=*) kit=${1#--kit=}; shift ;;
    --dry-run) dry=1; shift ;;
    --timing-only) timing_only=1; shift ;;
    --rounds) rounds=${2:?--rounds needs a number}; shift 2 ;;
    --rounds=*) rounds=${1#--rounds=}; shift ;;
    -h | --help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown option '$1' (--out DIR, --kit DIR, --dry-run, --timing-only, --rounds N)" >&2; exit 2 ;;
    esac
done
[[ $rounds =~ ^[1-9][0-9]?$ ]] || { echo "run.sh: --rounds '$rounds': a number of rounds from 1 to 99" >&2; exit 2; }
[ -n "$out" ] || out=$(mktemp -d /tmp/ddpc-gpu.XXXXXX)
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
# The work (programs' outputs, exports, checkpoints, rebuilt programs) stays
# out of OUT, which keeps only the summary, the log and work.tgz of the text:
# whoever fetches OUT may take only a few files.
work=$(mktemp -d /tmp/ddpc-gpu-work.XXXXXX) log=$out/log.txt summary=$out/summary.txt
: > "$log"
: > "$summary"
limit=${GPU_RUN_SECONDS:-330}
# The programs run at their defaults, and each check sets what it tests: a
# caller's DDP_* setting would change what they run (DDP_ALLOW_TF32, the
# older spelling of --precision tf32, would make every FP32 check a tf32
# one; DDP_CUDNN_BENCHMARK or DDP_ALLOW_NONDETERMINISTIC would let separate
# runs choose other algorithms, which the byte-for-byte checks compare;
# DDP_SYNC_LAUNCHES or DDP_DEBUG would turn the CUDA graphs off), and so
# would NVIDIA_TF32_OVERRIDE=0 (the tf32 and bf16 steps on FP32 math: other
# algorithms, sums and timings).
for setting in "${!DDP_@}" NVIDIA_TF32_OVERRIDE; do
    [ -n "${!setting+set}" ] || continue
    echo "run.sh: $setting unset (was '${!setting}')" >> "$log"
    unset "$setting"
done
max_bytes=$((48 * 1024 * 1024))
passed=0 failed=0 skipped=0

say() { echo "$*" | tee -a "$summary" "$log"; }
check() { # check NAME STATUS [DETAIL]
    if [ "$2" -eq 0 ]; then passed=$((passed + 1)); say "OK       $1${3:+  ($3)}"
    else failed=$((failed + 1)); say "FAILED   $1${3:+  ($3)}"; fi
}
skip() { skipped=$((skipped + 1)); say "SKIPPED  $1  ($2)"; }
finish() {
    say "$passed passed, $failed failed, $skipped skipped in ${SECONDS}s; log: $log"
    tar czf "$out/work.tgz" -C "$work" --exclude='*.st' --exclude='*.w1' --exclude=ck --exclude=rebuild \
        --exclude=links . 2>> "$log"
    rm -rf "$work" # its text is in work.tgz; its programs and weights need not outlive the run
    [ "$failed" -eq 0 ]
    exit
}
# step FILE SECONDS CMD...: CMD under timeout (at most the time left), its
# output in work/FILE and the log; returns CMD's status (124: out of time).
step() {
    local file=$work/$1 want=$2 left=$((limit - SECONDS))
    shift 2
    echo "+ $*" >> "$log"
    if [ "$left" -le 5 ]; then
        echo "run.sh: no time left for this step" | tee "$file" >> "$log"
        return 124
    fi
    [ "$want" -le "$left" ] || want=$left
    local began=$SECONDS
    timeout -k 5 "$want" "$@" > "$file" 2>&1
    local rc=$?
    cat "$file" >> "$log"
    echo "+ (status $rc, $((SECONDS - began)) s)" >> "$log" # how long each step takes, for the next time limits
    [ "$rc" -ne 124 ] || echo "run.sh: timed out after ${want}s" | tee -a "$file" >> "$log"
    return "$rc"
}
why() { # the last line of the first of the work FILEs that has one
    local f
    for f; do [ -s "$work/$f" ] && { tail -1 "$work/$f"; return; }; done
}
kv() { sed -n "s/^$1 //p" "$kit/kit.txt" 2>/dev/null | head -1; } # a value of kit.txt
# compare's error over all tensors, of the update, in the work FILE
all_tensors() { sed -n 's/^compare: .* all tensors \([0-9.e+-]*\) of the update.*/\1/p' "$work/$1" 2> /dev/null; }
# ddpc's samples/s in the output FILE: its last epoch line's (the "done" line
# averages every epoch, the first with the start-up: cuDNN's plans, the
# first allocations)
rate_of() { grep '^epoch ' "$work/$1" 2> /dev/null | tail -1 | grep -o '[0-9.]* samples/s' | cut -d' ' -f1; }

# ---- the kit ----------------------------------------------------------------
say "run.sh: kit $kit, out $out$([ "$dry" = 1 ] && echo ', dry run')"
if [ ! -f "$kit/kit.txt" ]; then
    check "kit present" 1 "no $kit/kit.txt: run make gpu-kit where the CUDA toolkit is"
    finish
fi
kit=$(cd "$kit" && pwd)
digest=$(bash tests/gpu/digest.sh 2>> "$log")
[ "$(kv digest)" = "$digest" ]
check "kit built from these sources" $? "kit $(kv digest), sources $digest; built $(kv built), CUDA $(kv cuda)"
bytes=$(du -sb "$kit" | cut -f1)
largest=$(find "$kit" -type f -printf '%s %P\n' | sort -n | tail -1)
[ "$bytes" -le "$max_bytes" ]
check "kit size" $? "$((bytes / 1024)) KiB of at most $((max_bytes / 1024)); largest file: ${largest#* } ($((${largest%% *} / 1024)) KiB)"

read -r -a nets <<< "$(kv nets)"
read -r -a nhwc_nets <<< "$(kv nhwc_nets)"
missing=()
for f in bin/ddpc bin/compare bin/nccl_helper obj/nccl_helper.o obj/nccl_helper.link lib/ddpc/libddprt_cuda.a \
         include/ddpc/kernel.h ref/mnist.{epoch,epoch.st,eval,w20,w160,ck150} ref/resnet.w20 \
         torch/{mnist,resnet}.py fallback data/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz; do
    [ -e "$kit/$f" ] || missing+=("$f")
done
for name in "${nets[@]}"; do
    # an Adam net (one with an SGD twin) has no .w1: its step is compared through the twin's
    one_step=ref/$name.w1
    [[ " $(kv precision_nets) " != *" $name "* ]] || one_step+=" ref/$name.tf32.w1 ref/$name.bf16.w1"
    [[ " ${nets[*]} " != *" ${name}_sgd "* ]] || one_step=
    for f in "gpu/$name" "gpu/$name.cu" "ref/$name.w0" $one_step; do
        [ -e "$kit/$f" ] || missing+=("$f")
    done
    grep -q '^// ddpc-build: ' "$kit/gpu/$name.cu" 2> /dev/null || missing+=("gpu/$name.cu's ddpc-build line")
done
# A channels-last net that is not one of the kit's programs has its own data
# (data_NAME) and references; the others train on the kit's data.
own_net() { [[ " ${nets[*]} " != *" $1 "* ]]; }
own_data() { if own_net "$1"; then echo "$kit/data_$1"; else echo "$kit/data"; fi; }
for name in "${nhwc_nets[@]}"; do # sources only: built on the node
    f=gpu/${name}_nhwc.cu
    grep -q '^// ddpc-build: ' "$kit/$f" 2> /dev/null && grep -q 'stored channels-last (NHWC)' "$kit/$f" ||
        missing+=("$f (channels-last, with its ddpc-build line)")
    if own_net "$name"; then
        for f in "ref/$name".{w0,w1} "data_$name"/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz; do
            [ -e "$kit/$f" ] || missing+=("$f")
        done
    fi
done
[ "${#nets[@]}" -gt 0 ] && [ "${#nhwc_nets[@]}" -gt 0 ] && [ "${#missing[@]}" -eq 0 ]
check "kit complete" $? "${#nets[@]} nets, ${#nhwc_nets[@]} channels-last sources${missing:+; missing: ${missing[*]}}"

# What a kit binary may need: the C and C++ runtimes, OpenMP, zlib's runtime
# (libz.so.1: zlib1g comes with every system, and the kit carries a copy) and
# CUDA's libraries. Never MPI, BLAS or an unversioned development name.
command -v readelf > /dev/null || check "readelf (binutils) present, to read what kit binaries need" 1
allowed='^(ld-linux-x86-64\.so\.2|lib(c|m|dl|pthread|rt|gcc_s|stdc\+\+|gomp|z|cuda|cudart|cudnn|cublas|cublasLt|nccl|nvrtc)\.so\.[0-9]+)$'
elves=() needed=() bad=()
while IFS= read -r f; do
    [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
    elves+=("$f")
    for lib in $(readelf -d "$f" 2> /dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
        if [[ $lib =~ $allowed ]]; then needed+=("$lib"); else bad+=("${f#"$kit"/} needs $lib"); fi
    done
done < <(find "$kit" -type f -perm -u+x ! -name '*.so*')
mpi_syms=$(nm "$kit/lib/ddpc/libddprt_cuda.a" 2> /dev/null | grep -cE ' U (MPI_|PMPI_|ompi_)')
[ "$mpi_syms" -eq 0 ] || bad+=("libddprt_cuda.a calls MPI ($mpi_syms symbols)")
[ "${#elves[@]}" -gt 0 ] && [ "${#bad[@]}" -eq 0 ]
check "kit binaries need no MPI, BLAS or development library" $? \
    "${#elves[@]} binaries$([ "${#bad[@]}" -gt 0 ] && printf '; %s' "${bad[@]}")"

# ---- the libraries --------------------------------------------------------------
# Where to look, in order: LD_LIBRARY_PATH as given, the CUDA toolkit, then
# every nvidia-* wheel (nvidia/*/lib, nvidia/cu13/lib) and torch/lib on
# python3's path; ldconfig's cache after those, the kit's fallback/ last.
nvcc=$(command -v nvcc || true)
for d in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
    [ -n "$nvcc" ] || { [ -n "$d" ] && [ -x "$d/bin/nvcc" ] && nvcc=$d/bin/nvcc; }
done
candidates=()
IFS=: read -r -a given <<< "${LD_LIBRARY_PATH:-}"
candidates+=("${given[@]}")
for d in ${nvcc:+"$(dirname "$(dirname "$nvcc")")"} "${CUDA_HOME:-}" /usr/local/cuda; do
    [ -n "$d" ] && candidates+=("$d/lib64" "$d/targets/x86_64-linux/lib" "$d/lib")
done
py=${PYTHON:-python3} # the python whose torch and nvidia-* wheels to use
for py in "$py" python3 python; do
    command -v "$py" > /dev/null || continue
    while IFS= read -r p; do
        [ -d "$p" ] || continue
        for d in "$p"/nvidia/*/lib "$p"/nvidia/*/*/lib "$p"/torch/lib; do [ -d "$d" ] && candidates+=("$d"); done
    done < <(timeout 20 "$py" -c 'import sys; print("\n".join(sys.path))' 2>> "$log")
    break
done
locate() { # locate SONAME: the first candidate holding it, else ldconfig's, else fallback/
    local d
    for d in "${candidates[@]}"; do [ -n "$d" ] && [ -e "$d/$1" ] && { echo "$d"; return; }; done
    d=$(ldconfig -p 2> /dev/null | awk -v l="$1" '$1 == l && /x86-64/ && !p {p = $NF} END {print p}')
    [ -n "$d" ] && { dirname "$d"; return; }
    [ -e "$kit/fallback/$1" ] && echo "$kit/fallback"
}
wanted=$(printf '%s\n' "${needed[@]}" | sort -u)
for lib in $wanted; do # libcublas.so.N loads libcublasLt.so.N; cuDNN loads NVRTC
    case $lib in libcublas.so.*) wanted+=$'\n'"libcublasLt.so.${lib#libcublas.so.}" ;; esac
done
nvrtc=$(for d in "${candidates[@]}"; do ls "$d"/libnvrtc.so.[0-9]* 2> /dev/null; done | head -1)
[ -n "$nvrtc" ] && wanted+=$'\n'"$(basename "$nvrtc")"
dirs=() unfound=() found_at=()
for lib in $wanted; do
    d=$(locate "$lib")
    if [ -z "$d" ]; then unfound+=("$lib"); continue; fi
    case $lib in
    libcudnn* | libcublas* | libnccl* | libnvrtc* | libz* | libgomp*) found_at+=("$lib: $d") ;;
    *) continue ;; # the C and C++ runtimes: the loader's own, which must not come first
    esac
    [[ " ${dirs[*]} " == *" $d "* ]] || [ "$d" = "$kit/fallback" ] || dirs+=("$d")
done
export LD_LIBRARY_PATH
own_library_path=${LD_LIBRARY_PATH:-} # PyTorch runs with its own libraries, not ours
LD_LIBRARY_PATH=$(IFS=:; echo "${dirs[*]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}:$kit/fallback
LD_LIBRARY_PATH=${LD_LIBRARY_PATH#:}
printf '%s\n' "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" "${found_at[@]}" > "$work/libraries.txt"
cat "$work/libraries.txt" >> "$log"
lddmiss=()
for f in "${elves[@]}"; do
    for lib in $(ldd "$f" 2> /dev/null | awk '/not found/ {print $1}'); do lddmiss+=("${f#"$kit"/}: $lib"); done
done
[ "${#unfound[@]}" -eq 0 ] && [ "${#lddmiss[@]}" -eq 0 ]
check "libraries found (LD_LIBRARY_PATH in work/libraries.txt)" $? \
    "$(printf '%s; ' "${found_at[@]}")${unfound:+not found anywhere: ${unfound[*]}; }$([ "${#lddmiss[@]}" -gt 0 ] && printf 'ldd: %s; ' "${lddmiss[@]}")"

# ---- the fallback: rebuild on this node ---------------------------------------------
declare -A prog
for name in "${nets[@]}"; do prog[$name]=$kit/gpu/$name; done
helper=$kit/bin/nccl_helper rebuilt=0
links=$work/links
make_links() { # libX.so -> the real libX.so.N, for the linker; -I of their headers in links/includes
    mkdir -p "$links"
    local lib d
    : > "$links/includes"
    for lib in $(printf "%s\n" $wanted | grep -E "^lib(cudnn|cublas|cublasLt|nccl)\\.so") libz.so.1 libgomp.so.1; do
        d=$(locate "$lib")
        [ -n "$d" ] || continue
        ln -sfn "$d/$lib" "$links/${lib%%.so*}.so"
        # a wheel keeps its headers beside its lib/ (nvidia/cudnn/include)
        [ -d "$d/../include" ] && printf ' -I%s' "$(cd "$d/../include" && pwd)" >> "$links/includes"
    done
}
# rebuild NAME: work/rebuild/NAME from the kit's NAME.cu, its ddpc-build line
# pointed at this node's kit, nvcc, headers and libraries: the libraries the
# line names by full path become work/links' names, its RUNPATH goes (the
# run sets LD_LIBRARY_PATH), and the headers found beside them come first.
rebuild() {
    local name=$1 d=$work/rebuild includes
    includes=$(cat "$links/includes" 2> /dev/null)
    mkdir -p "$d"
    cp "$kit/gpu/$name.cu" "$d/$name.cu" &&
        sed -i -E "1,20{/^\/\/ ddpc-build: /{s#$(kv kit | sed 's/[][\\.*^$+?(){}|#]/\\&/g')/#$kit/#g; s#^// ddpc-build: [^ ]*#// ddpc-build: $nvcc$includes#; s#-Xlinker [^ ]*/lib(cudnn|cublasLt|cublas|nccl)\.so[.0-9]*#-Xlinker $links/lib\1.so#g; s# -Xlinker -rpath=[^ ]*##}}" "$d/$name.cu" &&
        "$kit/bin/ddpc" --rebuild "$d/$name.cu" --verbose
}
relink_helper() {
    local line
    # shellcheck disable=SC2086 # the recorded words, split as they were written
    line=$(sed "s|@KIT@|$kit|g; s|@OUT@|$work/rebuild/nccl_helper|" "$kit/obj/nccl_helper.link") &&
        "$nvcc" $line -L"$links"
}
rebuild_all() { # every program and the helper, in parallel; those that build replace the kit's
    [ "$rebuilt" = 0 ] || return 0
    rebuilt=1
    if [ -z "$nvcc" ]; then say "run.sh: no nvcc here: cannot rebuild"; return 1; fi
    make_links
    mkdir -p "$work/rebuild"
    local name pids=() status=0
    for name in "${nets[@]}"; do step "rebuild.$name" 200 bash -c "$(declare -f rebuild kv); rebuild $name" & pids+=($!); done
    step rebuild.nccl_helper 200 bash -c "$(declare -f relink_helper); relink_helper" & pids+=($!)
    for p in "${pids[@]}"; do wait "$p" || status=1; done
    for name in "${nets[@]}"; do [ -x "$work/rebuild/$name" ] && prog[$name]=$work/rebuild/$name; done
    [ -x "$work/rebuild/nccl_helper" ] && helper=$work/rebuild/nccl_helper
    return $status
}
export kit work links nvcc log limit
library_failure() { # the output FILE says the program could not start for a library's or driver's sake
    grep -qE 'error while loading shared libraries|cannot open shared object|undefined symbol|version .* not found|InsufficientDriver|driver version is insufficient|UnsupportedPtxVersion|NoKernelImage|no kernel image' "$1"
}
# gpu FILE SECONDS NAME ARGS...: the program of NAME; rebuilt once on a library failure
gpu() {
    local file=$1 secs=$2 name=$3
    shift 3
    step "$file" "$secs" "${prog[$name]}" "$@" && return 0
    local rc=$?
    if library_failure "$work/$file" && [ "$rebuilt" = 0 ]; then
        say "run.sh: $name could not start (work/$file); rebuilding every program with $nvcc"
        rebuild_all
        check "fallback: programs rebuilt on this node" $? "$(ls "$work/rebuild" 2> /dev/null | grep -cv '\.cu$') of $((${#nets[@]} + 1))"
        step "$file" "$secs" "${prog[$name]}" "$@"
        return
    fi
    return "$rc"
}

# ---- the dry run: what can be checked without a GPU --------------------------------
if [ "$dry" = 1 ]; then
    bash -n "$0" && bash -n tests/gpu/timing.sh && bash -n tests/gpu/kit.sh && bash -n tests/gpu/digest.sh
    check "scripts parse (bash -n)" $?
    status=0
    for name in "${nets[@]}"; do
        step "$name.help" 20 "${prog[$name]}" --help && grep -q "^usage: " "$work/$name.help" || status=1
    done
    step ddpc.version 10 "$kit/bin/ddpc" --version || status=1
    check "kit programs start and answer --help" $status
    step compare.self 20 "$kit/bin/compare" "$kit/ref/mnist.w0" "$kit/ref/mnist.w1" "$kit/ref/mnist.w1" 1e-3 &&
        step compare.ck 20 "$kit/bin/compare" "$kit/ref/mnist.ck150" "$kit/ref/mnist.w160" "$kit/ref/mnist.w160" 1e-3
    check "compare reads the references (and the checkpoint)" $? "$(why compare.ck compare.self)"
    # a net's own data, read on the node only: whole, IDX images and labels, as many of each
    bad=()
    for name in "${nhwc_nets[@]}"; do
        own_net "$name" || continue
        step "compare.$name" 20 "$kit/bin/compare" "$kit/ref/$name.w0" "$kit/ref/$name.w1" "$kit/ref/$name.w1" 1e-3 ||
            bad+=("compare.$name: $(why "compare.$name")")
        for kind in train t10k; do
            images=$kit/data_$name/$kind-images-idx3-ubyte.gz labels=$kit/data_$name/$kind-labels-idx1-ubyte.gz
            head=$(gzip -dc "$images" 2> /dev/null | head -c 8 | od -An -tx1 | tr -d ' \n')
            count=$(gzip -dc "$labels" 2> /dev/null | head -c 8 | od -An -tx1 | tr -d ' \n' | sed -n 's/^00000801//p')
            gzip -t "$images" "$labels" 2> /dev/null && [[ $head == 0000080[34]* ]] && [ "${head:8}" = "$count" ] ||
                bad+=("data_$name/$kind: images header ${head:-none}, labels count ${count:-none}")
        done
    done
    check "a net's own data and references read (data_NAME: IDX, as many labels as images)" "${#bad[@]}" \
        "${bad[*]-}"
    if [ -n "$nvcc" ]; then
        make_links
        # rebuilt_and_answers NAME: the kit's NAME.cu rebuilt here, every
        # library it needs found (ldd), and its usage line printed; else
        # returns 1, the reason the last line of work/rebuild.NAME{.ldd,.help,}
        rebuilt_and_answers() {
            local name=$1 program=$work/rebuild/$1
            step "rebuild.$name" 200 bash -c "$(declare -f rebuild kv); rebuild $name" &&
                { ldd "$program" | grep 'not found' > "$work/rebuild.$name.ldd"; [ ! -s "$work/rebuild.$name.ldd" ]; } &&
                step "rebuild.$name.help" 20 "$program" --help && grep -q "^usage: " "$work/rebuild.$name.help"
        }
        rebuilt_and_answers mnist
        status=$?
        check "fallback: mnist rebuilt here from its .cu (ddpc --rebuild, links in work/links)" $status \
            "$([ "$status" = 0 ] || why rebuild.mnist.ldd rebuild.mnist.help rebuild.mnist)"
        bad=()
        for name in "${nhwc_nets[@]}"; do # what the GPU run builds, found wanting here
            rebuilt_and_answers "${name}_nhwc" ||
                bad+=("${name}_nhwc: $(why "rebuild.${name}_nhwc.ldd" "rebuild.${name}_nhwc.help" "rebuild.${name}_nhwc")")
        done
        check "the channels-last sources build here (ddpc --rebuild) and answer --help" "${#bad[@]}" "${bad[*]-}"
    else
        skip "fallback: rebuilding a program" "no nvcc here"
    fi
    skip "every check on the GPU" "dry run"
    finish
fi

# ---- on the GPU ------------------------------------------------------------------
step gpus 20 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader ||
    step gpus 20 nvidia-smi -L
say "run.sh: $(head -1 "$work/gpus")"
data=$kit/data batch=$(kv batch)
# PyTorch runs with its own libraries (the path as it was), not the ones found for ours.
torch_probe() { # 0 where PyTorch runs on the GPU here; an INFO line names its versions
    step torch.probe 60 env LD_LIBRARY_PATH="$own_library_path" "$py" -c \
        'import sys, numpy, torch; print("PyTorch", torch.__version__, "(CUDA", torch.version.cuda, "cuDNN", str(torch.backends.cudnn.version()) + ")", "in", sys.executable); sys.exit(0 if torch.cuda.is_available() else 1)'
    local status=$?
    [ "$status" != 0 ] || say "INFO     $(why torch.probe)"
    return "$status"
}
if [ "$timing_only" = 1 ]; then
    # shellcheck source=tests/gpu/timing.sh
    . tests/gpu/timing.sh
    finish
fi

same_precision=1e-2 # a tf32 or bf16 step against the CPU build's in the same precision (above)
compare_net() { # one step of NAME on the GPU against the CPU build's
    local name=$1 one
    if [ -e "$kit/gpu/${name}_sgd" ]; then # Adam: it must take a step; compared through NAME_sgd
        gpu "$name.step" 60 "$name" --data "$data" --init "$kit/ref/$name.w0" --max-steps 1 --no-shuffle \
            --batch-size "$batch" --export "$work/$name.gpu.w1" --quiet
        check "$name: one Adam step on the GPU (compared through ${name}_sgd)" $? "$(why "$name.step")"
        return
    fi
    one=(--data "$data" --init "$kit/ref/$name.w0" --max-steps 1 --no-shuffle --batch-size "$batch" --quiet)
    gpu "$name.step" 60 "$name" "${one[@]}" --export "$work/$name.gpu.w1" &&
        step "$name.fp32" 20 "$kit/bin/compare" "$kit/ref/$name.w0" "$kit/ref/$name.w1" "$work/$name.gpu.w1" 1e-3
    check "$name: GPU step = CPU step (FP32, 1e-3 of the update)" $? "$(why "$name.fp32" "$name.step")"
    if [[ " $(kv precision_nets) " != *" $name "* ]]; then # no CPU tf32 step in the kit: against FP32's
        gpu "$name.tf32step" 60 "$name" "${one[@]}" --precision tf32 --export "$work/$name.tf32.w1" &&
            step "$name.tf32" 20 "$kit/bin/compare" "$kit/ref/$name.w0" "$kit/ref/$name.w1" "$work/$name.tf32.w1" 3e-2
        check "$name: GPU step in tf32 = CPU step in FP32 (3e-2 of the update)" $? "$(why "$name.tf32" "$name.tf32step")"
        return
    fi
    local p same fp32
    for p in tf32 bf16; do # against the CPU build's step in the same precision, and further from FP32's
        gpu "$name.${p}step" 60 "$name" "${one[@]}" --precision "$p" --export "$work/$name.$p.w1" &&
            step "$name.$p" 20 "$kit/bin/compare" "$kit/ref/$name.w0" "$kit/ref/$name.$p.w1" "$work/$name.$p.w1" "$same_precision"
        check "$name: GPU step = CPU step (--precision $p on both, $same_precision of the update)" $? \
            "$(why "$name.$p" "$name.${p}step")"
        [ -s "$work/$name.$p.w1" ] || continue # no step: reported above
        step "$name.$p.fp32" 20 "$kit/bin/compare" "$kit/ref/$name.w0" "$kit/ref/$name.w1" "$work/$name.$p.w1" 1
        same=$(all_tensors "$name.$p") fp32=$(all_tensors "$name.$p.fp32")
        awk -v s="$same" -v f="$fp32" 'BEGIN { exit !(s != "" && f != "" && f + 0 >= 2 * s) }'
        check "$name: the GPU's $p step at least twice as far from the CPU's FP32 step as from its $p step" $? \
            "${same:-?} and ${fp32:-?} of the update, all tensors"
    done
}
compare_net mnist

# One epoch: its test_acc within 0.05 of the CPU build's. One epoch of 157
# steps early in the warm-up ends a few hundredths apart from float noise
# alone: the CPU build itself, with other convolution kernels as valid in
# float32, scores 0.694 (DDP_CPU_CONV=own) and 0.6885 (=onednn) against its
# default's 0.675, and the first H200 run 0.640. A bug that only shows after
# many steps (momentum, the sampler, the short last batch) is for the
# multi-step checks below, which compare weights.
gpu epoch 120 mnist --data "$data" --epochs 1 --log "$work/epoch.jsonl"
status=$?
acc=$(grep -o 'test_acc [0-9.]*' "$work/epoch" | tail -1 | cut -d' ' -f2)
rate=$(rate_of epoch)
cpu_acc=$(cut -d' ' -f2 "$kit/ref/mnist.epoch")
[ "$status" -eq 0 ] && [ -n "$acc" ] && awk -v a="$acc" -v c="$cpu_acc" 'BEGIN {d = a - c; exit !(d <= 0.05 && d >= -0.05)}'
check "mnist.net: one epoch on the GPU (test_acc within 0.05 of the CPU build's)" $? \
    "test_acc ${acc:-?} (CPU build ${cpu_acc:-?}), ${rate:-?} samples/s; $(why epoch)"

# The CPU build's weights after its epoch, evaluated on the GPU: the same
# test_acc, but for a tie in argmax (two logits within a rounding) that may
# go the other way on one or two of the 2,000 samples.
gpu eval.mnist 60 mnist --data "$data" --eval-only --init "$kit/ref/mnist.epoch.st"
status=$?
eval_acc=$(grep -o 'test_acc [0-9.]*' "$work/eval.mnist" | tail -1 | cut -d' ' -f2)
cpu_eval=$(cut -d' ' -f2 "$kit/ref/mnist.eval")
[ "$status" -eq 0 ] && [ -n "$eval_acc" ] &&
    awk -v a="$eval_acc" -v c="$cpu_eval" 'BEGIN {d = (a - c) * 2000; exit !(d <= 2.001 && d >= -2.001)}'
check "mnist.net: --eval-only of the CPU build's epoch weights on the GPU (test_acc within 2/2000 of the CPU's)" $? \
    "test_acc ${eval_acc:-?} (CPU build ${cpu_eval:-?})$([ "$status" -eq 0 ] || echo "; $(why eval.mnist)")"

# Several steps, shuffled, against the CPU build's (kit: ref/NAME.w20,
# mnist.w160, mnist.ck150): momentum past its first step (the one-step
# checks take only momentum's first-step path, unshuffled), the sampler's
# shuffled order, and the epoch's last batch (157 steps of 64 make 10,048:
# step 157 has 16 samples) and epoch 2's new order. At 3e-3 of the update
# (3e-2 a tensor), three times one step's: the float differences between
# machines grow with the steps (a ReLU flip's term in one step is carried
# by momentum into the next ones). What the CPU build measures against itself with other
# convolution kernels (DDP_CPU_CONV=own or onednn against its default), as
# worst tensor / all tensors: mnist 20 steps 4e-4 / 1.4e-4; resnet 20 steps
# 1.2e-2 / 3.8e-4 (over the 1e-2 a tensor would have at 1e-3: probably a
# ReLU input within a rounding of 0 at step 3); mnist 151-160 from
# the step-150 checkpoint 1.2e-3 / 5.6e-4; mnist 160 steps from the start
# 0.3 / 0.2, hence information only. The H200, the first time (2026-12-04):
# mnist 20 steps 7.1e-5 / 2.4e-5; resnet 20 steps 9.1e-3 / 2.9e-4 (bn3.bias;
# the same in a second run); 151-160 1.2e-3 / 5.6e-4; 160 steps 0.25 / 0.20.
# A bug in these paths is off by a whole step or more: 0.1 to 1 of the
# update, still 30 times over 3e-3.
multi=3e-3
for name in mnist resnet; do
    gpu "$name.s20" 60 "$name" --data "$data" --init "$kit/ref/$name.w0" --max-steps 20 --batch-size "$batch" \
        --export "$work/$name.w20.st" --quiet &&
        step "$name.s20.cmp" 20 "$kit/bin/compare" "$kit/ref/$name.w0" "$kit/ref/$name.w20" "$work/$name.w20.st" "$multi"
    check "$name: 20 shuffled steps on the GPU = on the CPU (momentum past step 1; FP32, $multi of the update)" $? \
        "$(why "$name.s20.cmp" "$name.s20")"
done
# Resumed from the CPU's checkpoint (weights, momentum, step 150; a copy, so
# that nothing is written beside the kit): 10 steps, 157 and 158-160 among them.
cp "$kit/ref/mnist.ck150" "$work/mnist.ck150.st" &&
    gpu mnist.r150 60 mnist --data "$data" --resume "$work/mnist.ck150.st" --max-steps 160 --batch-size "$batch" \
        --export "$work/mnist.r160.st" --quiet &&
    step mnist.r150.cmp 20 "$kit/bin/compare" "$kit/ref/mnist.ck150" "$kit/ref/mnist.w160" "$work/mnist.r160.st" "$multi"
check "mnist: steps 151-160 on the GPU from the CPU's checkpoint = on the CPU (short last batch, epoch 2; FP32, $multi)" $? \
    "$(why mnist.r150.cmp mnist.r150)"
# 160 steps from the start: how far the float drift has gone, for
# information (the program must run; compare's verdict does not count).
gpu mnist.s160 60 mnist --data "$data" --init "$kit/ref/mnist.w0" --max-steps 160 --batch-size "$batch" \
    --export "$work/mnist.w160.st" --quiet
status=$?
if [ "$status" -ne 0 ]; then
    check "mnist: 160 steps from the start on the GPU" "$status" "$(why mnist.s160)"
else
    step mnist.s160.cmp 20 "$kit/bin/compare" "$kit/ref/mnist.w0" "$kit/ref/mnist.w160" "$work/mnist.w160.st" "$multi"
    status=$?
    if [ "$status" -le 1 ]; then # 1: over the tolerance, which here informs
        say "INFO     mnist: 160 steps from the start on the GPU against the CPU's (float drift): $(why mnist.s160.cmp)"
    else
        check "mnist: 160 steps from the start on the GPU, compared" "$status" "$(why mnist.s160.cmp)"
    fi
fi

export NCCL_DEBUG=${NCCL_DEBUG:-WARN} # NCCL's own reason for a failure, into the log
step nccl.one 60 "$helper" one && grep -q "rank 0: PASS one" "$work/nccl.one"
check "NCCL, one rank, a real communicator (nccl_helper one)" $? "$(grep -m1 'rank 0' "$work/nccl.one" 2> /dev/null)"
RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29517 \
    gpu nccl.env 60 mnist --data "$data" --max-steps 50 --init-method env:// --backend nccl --quiet
check "NCCL backend, world size 1, env://" $? "$(why nccl.env)"
gpu nccl.nproc 60 mnist --data "$data" --max-steps 50 --nproc-per-node 1 --backend nccl --quiet
check "NCCL backend, world size 1, --nproc-per-node 1" $? "$(why nccl.nproc)"

# A steady step queues its work and goes on (device_calls.h): from the third
# step on no stream synchronisation and no allocation in any step, with the
# NCCL path's stop vote (tests/distributed/steady_step.sh checks the CPU
# build's count of the same calls).
steady_field() { sed -n "s/.*\"$1\": \([0-9]*\).*/\1/p"; }
gpu steady 60 mnist --data "$data" --max-steps 40 --log-every 1 --log "$work/steady.jsonl" --nproc-per-node 1 \
    --backend nccl --quiet &&
    steady_rows=$(grep -c '"event": "rank_times"' "$work/steady.jsonl") && [ "$steady_rows" -ge 38 ] &&
    steady_bad=$(grep '"event": "rank_times"' "$work/steady.jsonl" | while read -r row; do
        st=$(echo "$row" | steady_field step) sy=$(echo "$row" | steady_field device_syncs)
        al=$(echo "$row" | steady_field device_allocs) wa=$(echo "$row" | steady_field host_waits)
        [ "$st" -lt 3 ] || [ "$sy$al" = 00 ] || echo "step $st: $sy syncs, $al allocations, $wa waits"
        # the stop vote's wait, once a step (and the staging buffer's where batches are copied,
        # not from the set held on the GPU, the default here): a count that counts nothing fails
        [ "$st" -lt 2 ] || [ "$wa" -ge 1 ] || echo "step $st: no host wait counted"
    done | head -3) && [ -z "$steady_bad" ]
check "a steady step on the GPU: no sync, no allocation (steps 3-40, NCCL)" $? \
    "${steady_bad:-$(grep '"event": "rank_times"' "$work/steady.jsonl" 2> /dev/null | tail -1 | grep -o '"device_syncs.*')}"

gpu whole 60 mnist --data "$data" --max-steps 60 --export "$work/whole.st" --quiet &&
    gpu stop 60 mnist --data "$data" --max-steps 30 --save "$work/ck" --quiet &&
    gpu resume 60 mnist --data "$data" --max-steps 60 --save "$work/ck" --resume --export "$work/resumed.st" --quiet &&
    cmp "$work/whole.st" "$work/resumed.st" >> "$log" 2>&1
check "checkpoint: stopped at 30, resumed to 60 = 60 at once, byte for byte" $? "$(why resume stop whole)"

# cuDNN's timed algorithms (DDP_CUDNN_BENCHMARK=1) kept in the checkpoints
# and taken again on resuming (conv_choices.h): steps 31-60 resumed from the
# timed run's checkpoint at 30, by the heuristics' default (which may choose
# otherwise unless it takes the record), are the timed run's own, byte for
# byte, and its checkpoint at 60 keeps the same record, which says the
# record was taken.
conv_choices_of() { grep -ao '"conv_choices": *"[^"]*"' "$1" 2> /dev/null; }
timed_record=
DDP_CUDNN_BENCHMARK=1 gpu timed 90 mnist --data "$data" --max-steps 60 --save "$work/ckt" --save-every 30 \
    --export "$work/timed.st" --quiet &&
    timed_record=$(conv_choices_of "$work/ckt/checkpoint-mnist-000000030.safetensors") && [ -n "$timed_record" ] &&
    gpu timed.resume 90 mnist --data "$data" --max-steps 60 --save "$work/ckt2" --save-every 30 \
        --resume "$work/ckt/checkpoint-mnist-000000030.safetensors" --export "$work/timed.resumed.st" &&
    ! grep -q "not taken" "$work/timed.resume" &&
    [ "$(conv_choices_of "$work/ckt2/checkpoint-mnist-000000060.safetensors")" = "$timed_record" ] &&
    cmp "$work/timed.st" "$work/timed.resumed.st" >> "$log" 2>&1
check "checkpoint: cuDNN's timed algorithms kept and taken again on resuming, byte for byte" $? \
    "$(grep -h "not taken" "$work/timed.resume" 2> /dev/null | head -1); record at 30: ${timed_record:0:120}; $(why timed.resume timed)"

# --conv-algorithms FILE (conv_choices_file.h): a run that finds no FILE
# times cuDNN's algorithms and writes them there; a later run given FILE,
# by the heuristics' default otherwise (which may choose other algorithms),
# takes them (its checkpoint keeps FILE's record, word for word), says so,
# and makes the first run's bytes.
algos_record=
gpu algos.write 90 mnist --data "$data" --max-steps 60 --conv-algorithms "$work/algos" \
    --export "$work/algos.written.st" &&
    grep -q "timed algorithms written to --conv-algorithms" "$work/algos.write" && [ -s "$work/algos" ] &&
    gpu algos.take 90 mnist --data "$data" --max-steps 60 --conv-algorithms "$work/algos" \
        --save "$work/cka" --save-every 60 --export "$work/algos.taken.st" &&
    grep -q "convs: cuDNN's algorithms of --conv-algorithms" "$work/algos.take" &&
    algos_record=$(conv_choices_of "$work/cka/checkpoint-mnist-000000060.safetensors" |
        sed 's/^"conv_choices": *"//; s/"$//') &&
    [ -n "$algos_record" ] && [ "$algos_record" = "$(cat "$work/algos")" ] &&
    cmp "$work/algos.written.st" "$work/algos.taken.st" >> "$log" 2>&1
check "--conv-algorithms: timed and written by one run, taken by the next, byte for byte" $? \
    "$(grep -h "conv-algorithms" "$work/algos.write" "$work/algos.take" 2> /dev/null | head -2 | tr '\n' ' ')$(why algos.take algos.write)"

# The step replayed from its CUDA graph (step_graphs.h: one per batch shape,
# lr, step and epoch read from device memory) against the same calls made
# one by one (--no-cuda-graph): the same kernels and algorithms, so the same
# bytes. mnist.net at batch 96 through two epochs' short last batches (16:
# its own graph, captured on the second) into epoch 3 (a new order, a new
# lr schedule epoch); resnet.net
# (batchnorm, whose running statistics are broadcast before every step) on
# a real NCCL communicator with --no-sync-every 2 (accumulating and syncing
# steps, and the short batch, a graph each: captures with the bucket
# all-reduces, after earlier collectives the watchdog still holds). The
# graphs must have been made and used: the start-up line says so, the last
# lines count them (mnist: full and short batch; resnet: accumulating,
# syncing and the short last batch, each seen twice by step 110), and no
# capture was refused. mnist's products took their bias and relu in the
# libraries' epilogues (ddp_conv_forward_bias, ddp_linear_forward_bias): both
# convs in cuDNN's, both linear layers in cuBLASLt's at each batch size,
# none refused (every parameter on 16 bytes). The last lines say so.
graph_pair() { # graph_pair NAME GRAPHS ARGS...: the two runs, the graphs the first made, then cmp
    local name=$1 graphs=$2
    shift 2
    gpu "graph.$name" 90 "$name" --data "$data" --export "$work/graph.$name.st" "$@" &&
        gpu "nograph.$name" 90 "$name" --data "$data" --export "$work/nograph.$name.st" --no-cuda-graph "$@" &&
        grep -q "steps: one CUDA graph per batch shape" "$work/graph.$name" &&
        grep -q "steps: $graphs CUDA graphs made" "$work/graph.$name" &&
        ! grep -q "without a CUDA graph" "$work/graph.$name" &&
        grep -q "steps: call by call" "$work/nograph.$name" &&
        cmp "$work/graph.$name.st" "$work/nograph.$name.st" >> "$log" 2>&1
}
graph_pair mnist 2 --batch-size 96 --max-steps 220
check "mnist.net: steps from 2 CUDA graphs = call by call, 220 steps at batch 96 (a short last batch), byte for byte" \
    $? "$(grep -h "without a CUDA graph" "$work/graph.mnist" 2> /dev/null || why graph.mnist nograph.mnist)"
grep -Eq "products: bias \(and relu\) in cuDNN's epilogue for 2 convs, cuBLASLt's for [1-9][0-9]* linear shapes?; refused: none" \
    "$work/graph.mnist"
check "mnist.net: both convs' and both linear layers' bias and relu in cuDNN's and cuBLASLt's epilogues, none refused" \
    $? "$(grep -h "^products:" "$work/graph.mnist" 2> /dev/null || echo "no products: line")"
graph_pair resnet 3 --batch-size 96 --max-steps 110 --no-sync-every 2 --nproc-per-node 1 --backend nccl
check "resnet.net on NCCL: steps from 3 CUDA graphs = call by call, 110 steps, --no-sync-every 2, byte for byte" \
    $? "$(grep -h "without a CUDA graph" "$work/graph.resnet" 2> /dev/null || why graph.resnet nograph.resnet)"

# The training set held on the GPU (resident.h: the kit's 10,000 samples fit a
# quarter of free memory many times, so by default) against each batch
# gathered by the host's loader and copied (DDP_DATA_RESIDENT=0), on a copy
# stream of its own through two landing buffers (batch_upload.h): the same
# samples in the same order, so the same bytes; mnist.net past the epoch's
# short last batch into epoch 2 (the order copied again), and
# fashion_resnet.net, whose crops and flips are drawn from the indices the
# gather carries.
resident_pair() { # resident_pair NAME ARGS...
    local name=$1
    shift
    gpu "resident.$name" 90 "$name" --data "$data" --export "$work/resident.$name.st" "$@" &&
        DDP_DATA_RESIDENT=0 gpu "copied.$name" 90 "$name" --data "$data" --export "$work/copied.$name.st" "$@" &&
        grep -q "data: the training set held on the device" "$work/resident.$name" &&
        grep -q "data: each training batch copied from the host on a stream of its own" "$work/copied.$name" &&
        cmp "$work/resident.$name.st" "$work/copied.$name.st" >> "$log" 2>&1
}
resident_pair mnist --batch-size 96 --max-steps 120
check "mnist.net: the training set held on the GPU = batches copied on a stream of their own, 120 steps, byte for byte" $? \
    "$(grep -h "^data:" "$work/resident.mnist" 2> /dev/null || why resident.mnist copied.mnist)"
resident_pair fashion_resnet --max-steps 6 --batch-size "$batch"
check "fashion_resnet.net: the training set held on the GPU = batches copied from the host, 6 steps, byte for byte" \
    $? "$(why resident.fashion_resnet copied.fashion_resnet)"

# The data { } block made on the GPU of the raw bytes (augment_device_cuda.cu)
# against the loader's floats made on the host: the same input, so the same
# bytes; and evaluation (normalize only; the test set's last batch is short).
three=(--data "$data" --max-steps 3 --batch-size "$batch")
DDP_AUGMENT_ON=host gpu augment.host 60 fashion_resnet "${three[@]}" --export "$work/augment.host.st" &&
    DDP_AUGMENT_ON=device gpu augment.device 60 fashion_resnet "${three[@]}" --export "$work/augment.device.st" &&
    grep -q "training only, on the host" "$work/augment.host" &&
    grep -q "training only, on the device" "$work/augment.device" &&
    cmp "$work/augment.host.st" "$work/augment.device.st" >> "$log" 2>&1
check "fashion_resnet.net: crops, flips, normalize on the GPU = on the host, 3 steps, byte for byte" $? \
    "$(why augment.device augment.host)"
for where in host device; do
    DDP_AUGMENT_ON=$where gpu "eval.$where" 60 fashion_resnet --data "$data" --eval-only \
        --init "$work/augment.host.st" --log "$work/eval.$where.jsonl" --quiet
done
loss_host=$(grep -o '"test_loss": [^,]*' "$work/eval.host.jsonl" 2> /dev/null)
loss_device=$(grep -o '"test_loss": [^,]*' "$work/eval.device.jsonl" 2> /dev/null)
[ -n "$loss_host" ] && [ "$loss_host" = "$loss_device" ]
check "fashion_resnet.net: --eval-only, input made on the GPU = on the host" $? \
    "host ${loss_host:-?}, device ${loss_device:-?}; $(why eval.device eval.host)"

# The remaining nets' steps last: the issue's other checks come first, should time run out.
for name in "${nets[@]}"; do [ "$name" = mnist ] || compare_net "$name"; done

# Channels-last programs (ddpc --layout nhwc: what a net in tf32 or bf16
# gets on GPUs), built here from the kit's sources (the kit has no room for
# more programs), after every NCHW check, so that a short time limit costs
# these: mnist.net's, fashion_resnet.net's and channels_last.net's FP32
# steps against the CPU's (1e-3), mnist.net's tf32 and bf16 steps against
# the CPU's in the same precision (same_precision, 1e-2) and the NCHW program's on this GPU
# (1e-2), fashion_resnet.net's tf32 step against the CPU's FP32 one (3e-2),
# and two runs of mnist.net across a short last batch (batch 96), byte for
# byte. The first two nets' data has one channel, the same floats in either
# layout; channels_last.net's (data_channels_last) has three, which its program
# permutes on the way in (input_forward).
nhwc_step() { # nhwc_step NAME FILE ARGS...: one step of NAME_nhwc from the kit's NAME.w0
    local name=$1 file=$2
    shift 2
    step "$file" 60 "$work/rebuild/${name}_nhwc" --data "$(own_data "$name")" --init "$kit/ref/$name.w0" --max-steps 1 --no-shuffle \
        --batch-size "$batch" --quiet "$@"
}
if [ -z "$nvcc" ]; then
    skip "channels-last programs on the GPU" "no nvcc here to build them"
else
    make_links
    pids=()
    for name in "${nhwc_nets[@]}"; do
        step "rebuild.${name}_nhwc" 200 bash -c "$(declare -f rebuild kv); rebuild ${name}_nhwc" & pids+=($!)
    done
    for name in "${nhwc_nets[@]}"; do
        wait "${pids[0]}"
        check "$name.net channels-last: built here from the kit's source" $? "$(why "rebuild.${name}_nhwc")"
        pids=("${pids[@]:1}")
    done
    for name in "${nhwc_nets[@]}"; do
        if [ ! -x "$work/rebuild/${name}_nhwc" ]; then
            skip "$name.net channels-last on the GPU" "not built (above)"
            continue
        fi
        nhwc_step "$name" "${name}_nhwc.step" --export "$work/${name}_nhwc.w1" &&
            step "${name}_nhwc.fp32" 20 "$kit/bin/compare" "$kit/ref/$name.w0" "$kit/ref/$name.w1" "$work/${name}_nhwc.w1" 1e-3
        check "$name.net channels-last: GPU step = CPU step (FP32, 1e-3 of the update)" $? \
            "$(why "${name}_nhwc.fp32" "${name}_nhwc.step")"
    done
    if [ -x "$work/rebuild/fashion_resnet_nhwc" ]; then
        nhwc_step fashion_resnet fashion_resnet_nhwc.tf32step --precision tf32 --export "$work/fashion_resnet_nhwc.tf32.w1" &&
            step fashion_resnet_nhwc.tf32 20 "$kit/bin/compare" "$kit/ref/fashion_resnet.w0" "$kit/ref/fashion_resnet.w1" \
                "$work/fashion_resnet_nhwc.tf32.w1" 3e-2
        check "fashion_resnet.net channels-last: GPU step in tf32 = CPU step in FP32 (3e-2 of the update)" $? \
            "$(why fashion_resnet_nhwc.tf32 fashion_resnet_nhwc.tf32step)"
    fi
    if [ -x "$work/rebuild/mnist_nhwc" ]; then
        for p in tf32 bf16; do
            nhwc_step mnist "mnist_nhwc.${p}step" --precision "$p" --export "$work/mnist_nhwc.$p.w1" &&
                step "mnist_nhwc.$p" 20 "$kit/bin/compare" "$kit/ref/mnist.w0" "$kit/ref/mnist.$p.w1" \
                    "$work/mnist_nhwc.$p.w1" "$same_precision"
            check "mnist.net channels-last: GPU step = CPU step (--precision $p on both, $same_precision of the update)" $? \
                "$(why "mnist_nhwc.$p" "mnist_nhwc.${p}step")"
            if [ -s "$work/mnist.$p.w1" ] && [ -s "$work/mnist_nhwc.$p.w1" ]; then
                step "mnist_nhwc.$p.nchw" 20 "$kit/bin/compare" "$kit/ref/mnist.w0" "$work/mnist.$p.w1" \
                    "$work/mnist_nhwc.$p.w1" 1e-2
                check "mnist.net: the GPU's $p step channels-last = NCHW (1e-2 of the update)" $? \
                    "$(why "mnist_nhwc.$p.nchw")"
            else
                skip "mnist.net: the GPU's $p step channels-last = NCHW" "a step missing (above)"
            fi
        done
        for run in 1 2; do
            step "mnist_nhwc.run$run" 90 "$work/rebuild/mnist_nhwc" --data "$data" --batch-size 96 --max-steps 110 \
                --precision tf32 --export "$work/mnist_nhwc.run$run.st" || break
        done &&
            step mnist_nhwc.cmp 10 cmp "$work/mnist_nhwc.run1.st" "$work/mnist_nhwc.run2.st"
        check "mnist.net channels-last: two runs of 110 steps at batch 96 (a short last batch), tf32, byte for byte" $? \
            "$(why mnist_nhwc.cmp mnist_nhwc.run2 mnist_nhwc.run1)"
    fi
fi

# The start-up memory check's estimate (trainer.c: check_memory: the net's
# state, activations and the layers' scratch, the libraries' workspaces and
# modules, NCCL's buffers, the training set held on the GPU) against what
# each run that says it took of the GPU: its free memory before start-up
# less its free memory after training (lazily loaded modules, NCCL's buffers
# and the CUDA graphs included). A run that took more than the estimate
# means a batch the check lets through can still fail mid-run. The runs
# without --quiet say it: mnist's epoch, the CUDA graph checks (NCCL among
# them) and the channels-last tf32 runs (rounded copies, the KRSC weights).
# The margin left also measures device_rules.c's LIBRARY_ALLOWANCE.
memory_runs=$(grep -H "^memory: the run took" "$work"/* 2> /dev/null |
    sed -n 's|^.*/\([^/:]*\):memory: the run took \(-\{0,1\}[0-9.]*\) GiB of the GPU; the start-up check estimated \([0-9.]*\) GiB$|\1 \2 \3|p')
[ -n "$memory_runs" ] && echo "$memory_runs" | awk '{ if ($2 > $3) exit 1 }'
check "the start-up memory estimate covers what each run took of the GPU" $? \
    "$(echo "$memory_runs" | awk 'NF == 3 { printf "%s%s %s of %s GiB", n++ ? "; " : "", $1, $2, $3 } END { if (!n) printf "no run said" }')"

# ---- timing (issue 15): information only ---------------------------------------------
# After every check, so that timing never takes their time.
# shellcheck source=tests/gpu/timing.sh
. tests/gpu/timing.sh
finish
