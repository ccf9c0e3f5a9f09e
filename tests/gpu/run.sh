#!/usr/bin/env bash
# The GPU checks, on a GPU node that has the driver, nvcc and (maybe) PyTorch
# with its nvidia-* wheels, and nothing else of ours: no flex, bison, MPI,
# CUnit or zlib headers. Everything is built beforehand by `make gpu-kit`
# into .gpu/, which travels with the repository:
#
#   bash tests/gpu/run.sh [--out DIR] [--kit DIR] [--dry-run]
#
#   0. libraries: cuDNN, cuBLAS, NCCL (and NVRTC, which cuDNN loads) are looked
#      for in LD_LIBRARY_PATH, the CUDA toolkit and Python's nvidia-* wheels,
#      LD_LIBRARY_PATH is set to where they are, and `ldd` names anything a
#      kit program still misses. A program that cannot start for a library's
#      or the driver's sake is rebuilt here from its .cu with this node's nvcc
#      (ddpc --rebuild, the recorded line pointed at this node's kit and nvcc,
#      linked through a folder of libX.so -> libX.so.N links), all at once;
#   1. one training step of every example and parity net, GPU against the CPU
#      build's (kit: same initial weights, same first batch of 64): within
#      1e-3 of the update in FP32 (cuDNN and cuBLAS sum in other orders), and
#      within 3e-2 with DDP_ALLOW_TF32=1 (TF32 keeps 10 mantissa bits). Nets
#      trained with Adam or AdamW are compared through their SGD twin (the kit
#      builds NAME_sgd): Adam's first step is nearly lr * sign(g), so a
#      rounding difference in a gradient near zero becomes a whole step's
#      difference, while SGD's first step is lr * g, the gradient itself; the
#      Adam programs themselves must take a step;
#   2. mnist.net trains one epoch on the kit's 10,000 samples: samples/s, and
#      test_acc within 0.03 of the CPU build's;
#   3. NCCL with one rank through a real communicator (tests/mpi/nccl_helper.c
#      `one`), and the program with --backend nccl through env:// and
#      --nproc-per-node 1;
#   4. checkpoints: stopped at step 30 and resumed to 60, the exported weights
#      are byte for byte those of 60 steps at once;
#   5. the data { } block on the GPU: fashion_resnet.net's crops, flips and
#      normalize made on the GPU of the raw bytes (DDP_AUGMENT_ON=device, the
#      default) and by the host's loader (DDP_AUGMENT_ON=host): 3 steps, the
#      same bytes, and --eval-only's test loss the same;
#   6. where python3 has torch with CUDA (and numpy), the same net in PyTorch
#      on the same GPU, for samples/s beside ddpc's (PYTHON: another python).
#
# --dry-run does all that needs no GPU: the kit is there, built from these
# sources, at most 48 MiB and complete; no kit binary needs a library a GPU
# node lacks (readelf: only libc, libstdc++, libgomp, libz.so.1, CUDA's);
# the libraries are found and `ldd` is satisfied; the programs answer --help;
# the compare tool reads the references; the fallback rebuilds mnist here
# when nvcc is found; the script parses (bash -n).
#
# Each step runs under `timeout`, and the whole under 330 s (GPU_RUN_SECONDS).
# DIR (default: a new /tmp/ddpc-gpu.*) receives summary.txt (one OK, FAILED
# or SKIPPED line per check, with its numbers), log.txt (every command and
# its output) and work/. Exit 0 only if no check failed.
set -u
cd "$(dirname "$0")/../.." || exit 2
root=$PWD
kit=$root/.gpu out= dry=0
while [ $# -gt 0 ]; do
    case $1 in
    --out) out=${2:?--out needs a folder}; shift 2 ;;
    --out=*) out=${1#--out=}; shift ;;
    --kit) kit=${2:?--kit needs a folder}; shift 2 ;;
    --kit=*) kit=${1#--kit=}; shift ;;
    --dry-run) dry=1; shift ;;
    -h | --help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown option '$1' (--out DIR, --kit DIR, --dry-run)" >&2; exit 2 ;;
    esac
done
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
    timeout -k 5 "$want" "$@" > "$file" 2>&1
    local rc=$?
    cat "$file" >> "$log"
    [ "$rc" -ne 124 ] || echo "run.sh: timed out after ${want}s" | tee -a "$file" >> "$log"
    return "$rc"
}
why() { # the last line of the first of the work FILEs that has one
    local f
    for f; do [ -s "$work/$f" ] && { tail -1 "$work/$f"; return; }; done
}
kv() { sed -n "s/^$1 //p" "$kit/kit.txt" 2>/dev/null | head -1; } # a value of kit.txt

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
missing=()
for f in bin/ddpc bin/compare bin/nccl_helper obj/nccl_helper.o obj/nccl_helper.link lib/ddpc/libddprt_cuda.a \
         include/ddpc/kernel.h ref/mnist.epoch torch/mnist.py fallback \
         data/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz; do
    [ -e "$kit/$f" ] || missing+=("$f")
done
for name in "${nets[@]}"; do
    for f in "gpu/$name" "gpu/$name.cu" "ref/$name.w0" "ref/$name.w1"; do
        [ -e "$kit/$f" ] || missing+=("$f")
    done
    grep -q '^// ddpc-build: ' "$kit/gpu/$name.cu" 2> /dev/null || missing+=("gpu/$name.cu's ddpc-build line")
done
[ "${#nets[@]}" -gt 0 ] && [ "${#missing[@]}" -eq 0 ]
check "kit complete" $? "${#nets[@]} nets${missing:+; missing: ${missing[*]}}"

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
        sed -i -E "1,20{/^\/\/ ddpc-build: /{s#$(kv kit | sed 's/[][\\.*^$+?(){}|#]/\\&/g')/#$kit/#g; s#^// ddpc-build: [^ ]*#// ddpc-build: $nvcc$includes#; s#-Xlinker [^ ]*/lib(cudnn|cublas|nccl)\.so[.0-9]*#-Xlinker $links/lib\1.so#g; s# -Xlinker -rpath=[^ ]*##}}" "$d/$name.cu" &&
        "$kit/bin/ddpc" --rebuild "$d/$name.cu" --verbose
}
relink_helper() {
    local line
    line=$(sed "s|@KIT@|$kit|g; s|@OUT@|$work/rebuild/nccl_helper|" "$kit/obj/nccl_helper.link") &&
        # shellcheck disable=SC2086 # the recorded words
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
    bash -n "$0" && bash -n tests/gpu/kit.sh && bash -n tests/gpu/digest.sh
    check "scripts parse (bash -n)" $?
    status=0
    for name in "${nets[@]}"; do
        step "$name.help" 20 "${prog[$name]}" --help && grep -q "^usage: " "$work/$name.help" || status=1
    done
    step ddpc.version 10 "$kit/bin/ddpc" --version || status=1
    check "kit programs start and answer --help" $status
    step compare.self 20 "$kit/bin/compare" "$kit/ref/mnist.w0" "$kit/ref/mnist.w1" "$kit/ref/mnist.w1" 1e-3
    check "compare reads the references" $? "$(tail -1 "$work/compare.self")"
    if [ -n "$nvcc" ]; then
        make_links
        step rebuild.mnist 200 bash -c "$(declare -f rebuild kv); rebuild mnist" &&
            ! ldd "$work/rebuild/mnist" | grep -q 'not found' &&
            step rebuild.mnist.help 20 "$work/rebuild/mnist" --help
        check "fallback: mnist rebuilt here from its .cu (ddpc --rebuild, links in work/links)" $?
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

compare_net() { # one step of NAME on the GPU against the CPU build's
    local name=$1
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
    DDP_ALLOW_TF32=1 gpu "$name.tf32step" 60 "$name" "${one[@]}" --export "$work/$name.tf32.w1" &&
        step "$name.tf32" 20 "$kit/bin/compare" "$kit/ref/$name.w0" "$kit/ref/$name.w1" "$work/$name.tf32.w1" 3e-2
    check "$name: GPU step = CPU step (TF32, 3e-2 of the update)" $? "$(why "$name.tf32" "$name.tf32step")"
}
compare_net mnist

gpu epoch 120 mnist --data "$data" --epochs 1 --log "$work/epoch.jsonl"
status=$?
acc=$(grep -o 'test_acc [0-9.]*' "$work/epoch" | tail -1 | cut -d' ' -f2)
rate=$(grep -o '[0-9.]* samples/s' "$work/epoch" | tail -1 | cut -d' ' -f1)
cpu_acc=$(cut -d' ' -f2 "$kit/ref/mnist.epoch")
[ "$status" -eq 0 ] && [ -n "$acc" ] && awk -v a="$acc" -v c="$cpu_acc" 'BEGIN {d = a - c; exit !(d <= 0.03 && d >= -0.03)}'
check "mnist.net: one epoch on the GPU" $? "test_acc ${acc:-?} (CPU build ${cpu_acc:-?}), ${rate:-?} samples/s; $(why epoch)"

export NCCL_DEBUG=${NCCL_DEBUG:-WARN} # NCCL's own reason for a failure, into the log
step nccl.one 60 "$helper" one && grep -q "rank 0: PASS one" "$work/nccl.one"
check "NCCL, one rank, a real communicator (nccl_helper one)" $? "$(grep -m1 'rank 0' "$work/nccl.one" 2> /dev/null)"
RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29517 \
    gpu nccl.env 60 mnist --data "$data" --max-steps 50 --init-method env:// --backend nccl --quiet
check "NCCL backend, world size 1, env://" $? "$(why nccl.env)"
gpu nccl.nproc 60 mnist --data "$data" --max-steps 50 --nproc-per-node 1 --backend nccl --quiet
check "NCCL backend, world size 1, --nproc-per-node 1" $? "$(why nccl.nproc)"

gpu whole 60 mnist --data "$data" --max-steps 60 --export "$work/whole.st" --quiet &&
    gpu stop 60 mnist --data "$data" --max-steps 30 --save "$work/ck" --quiet &&
    gpu resume 60 mnist --data "$data" --max-steps 60 --save "$work/ck" --resume --export "$work/resumed.st" --quiet &&
    cmp "$work/whole.st" "$work/resumed.st" >> "$log" 2>&1
check "checkpoint: stopped at 30, resumed to 60 = 60 at once, byte for byte" $? "$(why resume stop whole)"

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

# PyTorch runs with its own libraries (the path as it was), not the ones found for ours.
step torch.probe 60 env LD_LIBRARY_PATH="$own_library_path" "$py" -c \
    'import sys, numpy, torch; sys.exit(0 if torch.cuda.is_available() else 1)'
probe=$?
if [ "$probe" = 0 ]; then
    step torch 120 env LD_LIBRARY_PATH="$own_library_path" "$py" bench/torch_train.py \
        --module "$kit/torch/mnist.py" --device cuda --steps 500 --data "$data"
    check "PyTorch on the same GPU (mnist.net)" $? "$(tail -1 "$work/torch"); ddpc ${rate:-?} samples/s"
elif [ "$probe" = 124 ]; then
    check "PyTorch on the same GPU" 1 "out of time"
else
    skip "PyTorch on the same GPU" "no python3 with torch, numpy and CUDA here: $(why torch.probe)"
fi

# The remaining nets' steps last: the issue's other checks come first, should time run out.
for name in "${nets[@]}"; do [ "$name" = mnist ] || compare_net "$name"; done
finish
