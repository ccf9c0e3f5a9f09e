#!/usr/bin/env bash
# Memory check of the generated CPU programs and the runtime they link:
#   tests/memcheck/run.sh [--asan] [NET.net ...]      (default: every examples/*.net)
#
# Each net is compiled with ddpc --target cpu, rebuilt from the `// ddpc-build:`
# line of its OUT.cu for the checker, and trained twice on a cut of
# Fashion-MNIST, 20 training and 60 test samples, in batches of 8, on one
# thread: an epoch is 3 steps, the last a partial batch, and so is the last
# batch of the evaluation over the (short) test set. valgrind runs 3 steps, one
# epoch and one evaluation (mnist.net takes 2.6 s a step there and 10 s an
# evaluation); ASan runs 20, so the epoch turnover, the schedule's steps and
# the end of a whole training run (mlp.net's 5 epochs, resnet.net's 3) run too:
#   export   --export W.safetensors --log A.jsonl   (seeded initialisation)
#   init     --init W.safetensors --log B.jsonl     (reads back what export wrote)
#
# valgrind (default): memcheck with --leak-check=full. The recorded build line
#   says -march=native, which on an AVX-512 machine emits EVEX instructions
#   valgrind 3.19 stops on (SIGILL); the checked program is built with
#   -march=x86-64-v3 (AVX2) and -g instead, everything else as recorded.
#   tests/memcheck/*.supp are passed to valgrind.
# --asan: the runtime is built afresh with -fsanitize=address,undefined in a
#   build directory of its own, and the program from the recorded build line
#   plus the same flags (LeakSanitizer on, UBSan reports counted, not fatal).
#
# Prints one row per run: errors (memory errors; with --asan, ASan errors and
# UBSan runtime errors), bytes definitely / indirectly / possibly lost
# (LeakSanitizer's direct / indirect; it has no "possibly"), bytes suppressed,
# seconds. Exits 1 on any error, any definite or indirect leak, a run that
# failed or wrote nothing; the checker's full report is printed for such a run.
# Exits 77 (the automake "skipped") when valgrind is not installed.
#
# Environment: DDPC (build/ddpc), MEMCHECK_DATA (a directory of MNIST-format
# files to use instead of the cut; nets of 3x32x32 images always get the
# generated CIFAR-format records), FASHION_MNIST (where the cut is taken from,
# /usr/share/datasets/fashion-mnist), MEMCHECK_THREADS (1: OpenMP
# threads; more runs the per-thread splits of the parallel loops too, and
# starts libgomp's worker pool, whose noise libgomp.supp names), MEMCHECK_KEEP=1
# keeps the work directory, MEMCHECK_STEPS the steps of each run.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
ddpc=${DDPC:-$root/build/ddpc}
mode=valgrind
if [[ ${1:-} == --asan ]]; then
    mode=asan
    shift
fi
nets=("$@")
[[ ${#nets[@]} -gt 0 ]] || nets=("$root"/examples/*.net)

threads=${MEMCHECK_THREADS:-1}
export OMP_NUM_THREADS=$threads
batch=8

d=$(mktemp -d "${TMPDIR:-/tmp}/ddpc-memcheck.XXXXXX")
if [[ ${MEMCHECK_KEEP:-0} == 1 ]]; then
    echo "memcheck: work directory $d (kept)"
else
    trap 'rm -rf "$d"' EXIT
fi

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# ---- the checker ---------------------------------------------------------------
if [[ $mode == valgrind ]]; then
    if ! command -v valgrind > /dev/null; then
        echo "memcheck: valgrind is not installed (Debian: apt-get install valgrind); nothing checked"
        exit 77
    fi
    supp=()
    for f in "$root"/tests/memcheck/*.supp; do
        [[ -e $f ]] && supp+=(--suppressions="$f")
    done
    steps=${MEMCHECK_STEPS:-3}
    checker=(valgrind --leak-check=full --show-leak-kinds=definite,indirect,possible
             --errors-for-leak-kinds=definite,indirect --error-exitcode=99 --num-callers=30 "${supp[@]}")
    echo "memcheck: $(valgrind --version), OMP_NUM_THREADS=$threads, $steps steps of batch $batch"
else
    asan_flags="-g -fsanitize=address,undefined -fno-omit-frame-pointer"
    asan_build=$d/asan-build
    t0=$(now)
    # CFLAGS from the environment: the Makefile appends its own (-std, -I...)
    # to it, which a CFLAGS given on make's command line would replace (and so
    # would one an outer make passes down in MAKEFLAGS, hence env -u).
    if ! env -u MAKEFLAGS -u MAKEOVERRIDES -u MFLAGS CFLAGS="-O1 $asan_flags" \
        make -s -C "$root" -j2 BUILD="$asan_build" "$asan_build/libddprt.a" > "$d/asan-build.log" 2>&1; then
        cat "$d/asan-build.log"
        echo "memcheck: building the runtime with ASan+UBSan failed"
        exit 1
    fi
    echo "memcheck: runtime built with -O1 $asan_flags in $(since "$t0") s"
    export ASAN_OPTIONS=detect_leaks=1:exitcode=99:strict_string_checks=1:detect_stack_use_after_return=1
    export UBSAN_OPTIONS=print_stacktrace=1
    checker=()
    steps=${MEMCHECK_STEPS:-20}
    echo "memcheck: ASan+UBSan ($(cc --version | head -1)), OMP_NUM_THREADS=$threads, $steps steps of batch $batch"
fi

# ---- the data: the first samples of each Fashion-MNIST set ----------------
# An IDX file is a big-endian header (magic 0x00000803 for images, 0x00000801
# for labels, the count, then rows and cols for images) and one byte per pixel
# or label. The cut keeps the header with the count replaced; the training set
# is written gzipped and the test set raw, so both readers of idx.c run.
# (head stops reading early, so these pipes run without pipefail.)
idx_cat() { if [[ $1 == *.gz ]]; then gzip -dc "$1"; else cat "$1"; fi; }
idx_find() {
    local f
    for f in "$1/$2" "$1/$2.gz"; do
        [[ -f $f ]] && { echo "$f"; return 0; }
    done
    echo "memcheck: no $2[.gz] in $1 (install Debian's dataset-fashion-mnist, or set MEMCHECK_DATA)" >&2
    return 1
}
idx_head() { local -; set +o pipefail; idx_cat "$1" | head -c "$2" | od -An -v -tu1; }
be32() { local b; for b in $(($1 >> 24 & 255)) $(($1 >> 16 & 255)) $(($1 >> 8 & 255)) $(($1 & 255)); do
    printf "\\x$(printf %02x "$b")"; done; }
idx_cut() { # SRC MAGIC HEADER_BYTES ITEM_BYTES SAMPLES > the first SAMPLES items
    local -
    set +o pipefail
    local h
    read -ra h <<< "$(idx_head "$1" 4)"
    if [[ $((h[2] * 256 + h[3])) != "$2" || ${h[0]}${h[1]} != 00 ]]; then
        printf 'memcheck: %s: not an IDX file of magic 0x%08x\n' "$1" "$2" >&2
        return 1
    fi
    be32 "$2"
    be32 "$5"
    idx_cat "$1" | tail -c +9 | head -c $(($3 - 8 + $5 * $4))
}
if [[ -n ${MEMCHECK_DATA:-} ]]; then
    data=$MEMCHECK_DATA
else
    src=${FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
    data=$d/data
    mkdir -p "$data"
    for set in train:20 t10k:60; do
        samples=${set#*:} set=${set%:*}
        images=$(idx_find "$src" "$set-images-idx3-ubyte")
        labels=$(idx_find "$src" "$set-labels-idx1-ubyte")
        read -ra h <<< "$(idx_head "$images" 16)"
        pixels=$(((h[8] << 24 | h[9] << 16 | h[10] << 8 | h[11]) * (h[12] << 24 | h[13] << 16 | h[14] << 8 | h[15])))
        idx_cut "$images" $((0x803)) 16 "$pixels" "$samples" > "$data/$set-images-idx3-ubyte"
        idx_cut "$labels" $((0x801)) 8 1 "$samples" > "$data/$set-labels-idx1-ubyte"
    done
    gzip -n "$data"/train-*
fi
# For nets of 3x32x32 images (cifar10.net), CIFAR-10's binary format: a
# label byte (0 to 9) and 3,072 pixel bytes a record, pixels of a fixed
# pattern (what is read, not what it shows, is under check).
cifar=$d/cifar
mkdir -p "$cifar"
cifar_records() { # COUNT
    local i
    for ((i = 0; i < $1; i++)); do
        printf "\\x$(printf %02x $((i % 10)))"
        head -c 3072 /dev/zero | tr '\0' "\\$(printf %03o $((i * 37 % 256)))"
    done
}
cifar_records 20 > "$cifar/data_batch_1.bin"
cifar_records 60 > "$cifar/test_batch.bin"

# ---- one run: ERRORS DEFINITE INDIRECT POSSIBLE from its report ------------------
valgrind_numbers() {
    local log=$1 errors leaks
    errors=$(sed -n 's/.*ERROR SUMMARY: \([0-9,]*\) errors.*/\1/p' "$log" | tr -d ,)
    # leak records count as errors under --errors-for-leak-kinds: take them out
    leaks=$(grep -c 'are \(definitely\|indirectly\) lost in loss record' "$log" || true)
    lost() { sed -n "s/.*$1 lost: \([0-9,]*\) bytes.*/\1/p" "$log" | tr -d , | head -1; }
    echo "$((${errors:-1} - leaks)) $(lost definitely | grep . || echo 0) $(lost indirectly | grep . || echo 0)" \
         "$(lost possibly | grep . || echo 0) $(sed -n 's/.*suppressed: \([0-9,]*\) bytes.*/\1/p' "$log" | tr -d , | grep . || echo 0)"
}
asan_numbers() {
    local log=$1
    local errors direct indirect
    errors=$(($(grep -c 'ERROR: AddressSanitizer' "$log" || true) + $(grep -c 'runtime error:' "$log" || true)))
    direct=$(sed -n 's/^Direct leak of \([0-9]*\) byte.*/\1/p' "$log" | awk '{ s += $1 } END { print s + 0 }')
    indirect=$(sed -n 's/^Indirect leak of \([0-9]*\) byte.*/\1/p' "$log" | awk '{ s += $1 } END { print s + 0 }')
    echo "$errors $direct $indirect - -"
}

failed=0
printf '%-12s %-7s %6s %10s %10s %10s %10s %7s\n' example run errors definite indirect possible suppressed seconds
run_one() { # NAME KIND PROGRAM ARGS...
    local name=$1 kind=$2 log=$d/$1.$2.log t0 rc=0 numbers
    shift 2
    t0=$(now)
    "${checker[@]}" "$@" > "$log" 2>&1 || rc=$?
    local secs
    secs=$(since "$t0")
    if [[ $mode == valgrind ]]; then numbers=$(valgrind_numbers "$log"); else numbers=$(asan_numbers "$log"); fi
    read -r errors definite indirect possible suppressed <<< "$numbers"
    local bad=""
    [[ $errors == 0 && $definite == 0 && $indirect == 0 ]] || bad="errors or leaks"
    [[ $rc == 0 ]] || bad="${bad:+$bad, }exit status $rc"
    grep -q '"event": "epoch"' "$d/$name.$kind.jsonl" 2> /dev/null || bad="${bad:+$bad, }no epoch in --log"
    printf '%-12s %-7s %6s %10s %10s %10s %10s %7s%s\n' "$name" "$kind" "$errors" "$definite" "$indirect" "$possible" \
        "$suppressed" "$secs" "${bad:+  FAILED: $bad}"
    if [[ -n $bad ]]; then
        failed=1
        sed 's/^/    | /' "$log"
    fi
}

for net in "${nets[@]}"; do
    name=$(basename "$net" .net)
    prog=$d/$name
    t0=$(now)
    "$ddpc" "$net" --target cpu -o "$prog"
    line=$(sed -n 's|^// ddpc-build: ||p' "$prog.cu")
    [[ $line == *" -o $prog "* ]] || { echo "memcheck: $prog.cu: no build line naming -o $prog"; exit 1; }
    line=${line/ -o "$prog" / -o $prog.checked }
    if [[ $mode == valgrind ]]; then
        line="${line/-march=native/-march=x86-64-v3} -g"
    else
        lib=$(grep -o '[^ ]*/build/libddprt\.a' <<< "$line")
        line="${line/ "$lib" / $asan_build/libddprt.a } $asan_flags"
    fi
    echo "$line" > "$prog.build"
    bash -c "$line"
    printf '%-12s %-7s %6s %10s %10s %10s %10s %7s\n' "$name" build - - - - - "$(since "$t0")"
    net_data=$data
    grep -Eq '^[[:space:]]*input[[:space:]]+3x32x32' "$net" && net_data=$cifar
    common=(--data "$net_data" --max-steps "$steps" --batch-size "$batch")
    run_one "$name" export "$prog.checked" "${common[@]}" --export "$d/$name.safetensors" --log "$d/$name.export.jsonl"
    [[ -s $d/$name.safetensors ]] || { echo "memcheck: $name: --export wrote nothing"; failed=1; continue; }
    run_one "$name" init "$prog.checked" "${common[@]}" --init "$d/$name.safetensors" --log "$d/$name.init.jsonl"
done

if [[ $failed == 0 ]]; then echo "memcheck ($mode): OK"; else echo "memcheck ($mode): FAILED"; fi
exit "$failed"
