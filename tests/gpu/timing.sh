# shellcheck shell=bash disable=SC2154 # run.sh sets work, kit, data, py, ...
# tests/gpu/timing.sh: run.sh's part 6, timing for information (issue 15).
# Sourced by run.sh (after its checks, or alone with --timing-only), never
# run by itself. From run.sh it takes kit, work, out, data, py,
# own_library_path, nvcc, prog, rounds, limit and the helpers step, gpu, check,
# say, skip, why, rate_of and torch_probe (tests/gpu/timing_stubs.sh
# stands in for all of them to test this file without a GPU). No test
# asserts a wall-clock time: a program that fails is FAILED, one out of time
# SKIPPED, a speed never FAILED.
#
# 1. ROUNDS rounds (run.sh --rounds, default 1): in each, for mnist.net at
#    batch 64 and 512 and resnet.net at 64, ddpc six ways (2 epochs of the
#    kit's 10,000 samples, the second's samples/s: rate_of) then PyTorch
#    eager three ways (bench/torch_train.py's 500 steps, data on the GPU),
#    one TIMING line per net and round. Interleaved, so that a machine slower
#    in one round slows both sides' figures of that round, and the medians
#    (4.) compare like with like. A net takes about 30 s of a round
#    (net_seconds: ddpc's six runs a few seconds, PyTorch's three about 7 s
#    each, its import and warm-up included), so a round about 90 s; torch.compile
#    and ncu about 150 s more: give GPU_RUN_SECONDS about 100 a round and
#    180 more. Once too little is left for the next net, one SKIPPED line
#    says so and the rounds end. (run.sh's log gives each step's seconds.)
#    - ddpc: FP32 (its default: cuDNN's heuristics' first deterministic
#      algorithm), --precision tf32, --precision bf16, FP32 with cuDNN's
#      algorithms timed at start-up (DDP_CUDNN_BENCHMARK=1), FP32 with
#      nondeterministic algorithms allowed (DDP_ALLOW_NONDETERMINISTIC=1: what
#      determinism costs; PyTorch allows them by default), FP32 without the
#      step's CUDA graph (--no-cuda-graph).
#    - PyTorch eager: as it comes (TF32 convolutions, FP32 products), plain
#      FP32 (--no-tf32), and plain FP32 with cudnn.benchmark (its algorithms
#      timed, as ddpc's DDP_CUDNN_BENCHMARK).
# 2. torch.compile, once per net after the rounds (compiling takes the
#    longest), in PyTorch's default precision: its default mode and
#    reduce-overhead (CUDA graphs, as ddpc's step); a mode's first failure
#    ends that mode.
# 3. ncu, where found: the GPU time of a window of kernel launches past
#    start-up (ncu_window) of mnist.net and of resnet.net, each at its
#    default, into OUT/ncu.NAME.csv, with a table of the 15 longest in total.
#    Caches are left as the step leaves them (--cache-control none): under
#    ncu's default, which flushes them before each kernel, a step's 36
#    launches of mnist.net summed to 285 to 287 us in the first H100 run,
#    against the 227 us a step of its samples/s.
# 4. Two lines per net: the medians of every figure over the rounds that
#    gave one, and the ratios of ddpc against the best PyTorch in each
#    precision: FP32 (the faster of eager FP32 and eager FP32 with
#    cudnn.benchmark) against ddpc's FP32, timed and nondeterministic; and
#    PyTorch's default precision (TF32 convolutions: the fastest of eager and
#    the two compiled modes) against ddpc's tf32.

torch_rate() { sed -n 's/^torch: samples\/s \([0-9.]*\) .*/\1/p' "$work/$1" 2> /dev/null | tail -1; }
ran() { # ran LABEL FILE STATUS: 0 if the run ended well; else FAILED (SKIPPED when out of time)
    case $3 in
    0) return 0 ;;
    124 | 137) skip "$1" "out of time: $(why "$2")" ;;
    *) check "$1" "$3" "$(why "$2")" ;;
    esac
    return 1
}
torch_run() { # torch_run FILE NAME BATCH [FLAGS...]: bench/torch_train.py, 500 steps on the GPU
    local file=$1 name=$2 b=$3
    shift 3
    step "$file" 90 env LD_LIBRARY_PATH="$own_library_path" "$py" bench/torch_train.py \
        --module "$kit/torch/$name.py" --device cuda --steps 500 --batch "$b" --data "$data" "$@"
}
number() { if [[ $1 =~ ^[0-9.e+]+$ ]]; then printf '%.0f' "$1"; else printf '?'; fi; }
ratio() { awk -v d="$1" -v e="$2" 'BEGIN { if (d + 0 > 0 && e + 0 > 0) printf "%.2f", d / e; else printf "?" }'; }
median() { printf '%s\n' "$@" | grep . | sort -g | awk '{ v[NR] = $1 } END { if (NR) printf "%.1f\n", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# figures ARRAY [PREFIX]: ddpc's six and PyTorch eager's three figures,
# labelled, from ARRAY[PREFIX MODE] (a round's rates, or the medians)
figures() {
    local -n of=$1
    local p=${2:-}
    echo "ddpc fp32 $(number "${of[${p}fp32]:-}"), tf32 $(number "${of[${p}tf32]:-}"), bf16 $(number "${of[${p}bf16]:-}")," \
        "fp32 timed algorithms $(number "${of[${p}bench]:-}"), fp32 nondeterministic $(number "${of[${p}nondet]:-}")," \
        "fp32 without CUDA graph $(number "${of[${p}nograph]:-}");" \
        "torch eager $(number "${of[${p}torch_eager]:-}") (tf32 convs), fp32 $(number "${of[${p}torch_fp32]:-}")," \
        "fp32 cudnn.benchmark $(number "${of[${p}torch_fp32bench]:-}")"
}
best() { # best LABEL=RATE...: the fastest as "RATE LABEL"
    local kv top='' label=''
    for kv; do
        [ -n "${kv#*=}" ] || continue
        if [ -z "$top" ] || awk -v a="${kv#*=}" -v b="$top" 'BEGIN { exit !(a + 0 > b + 0) }'; then top=${kv#*=} label=${kv%%=*}; fi
    done
    [ -n "$top" ] && echo "$top $label"
}

timings=("mnist 64" "mnist 512" "resnet 64")
modes=(fp32 tf32 bf16 bench nondet nograph)
declare -A mode_env=([fp32]='' [tf32]='' [bf16]='' [bench]=DDP_CUDNN_BENCHMARK=1 [nondet]=DDP_ALLOW_NONDETERMINISTIC=1 [nograph]='')
declare -A mode_flags=([fp32]='' [tf32]="--precision tf32" [bf16]="--precision bf16" [bench]='' [nondet]='' [nograph]=--no-cuda-graph)
torch_modes=(eager fp32 fp32bench)
declare -A torch_flags=([eager]='' [fp32]=--no-tf32 [fp32bench]="--no-tf32 --cudnn-benchmark")
declare -A rates=() # rates[ROUND.NAME.BATCH.MODE], ddpc's modes and torch_MODE
torch_probe
probe=$?
case $probe in
0) ;;
124) skip "timing: PyTorch" "its probe ran out of time: $(why torch.probe)" ;;
*) skip "timing: PyTorch" "no python3 with torch, numpy and CUDA here: $(why torch.probe)" ;;
esac
net_seconds=30 # a net's runs in a round (above): with less left, the rounds end

for ((round = 1; round <= rounds; round++)); do
    for nb in "${timings[@]}"; do
        read -r name b <<< "$nb"
        at=$round.$name.$b
        if [ $((limit - SECONDS)) -lt "$net_seconds" ]; then
            skip "timing: round $round from $name.net, batch $b on" "out of time (GPU_RUN_SECONDS=$limit)"
            break 2
        fi
        for m in "${modes[@]}"; do
            file=time.$name.b$b.$m.r$round
            # not in a subshell: gpu may rebuild the programs, for the runs after this one too
            [ -z "${mode_env[$m]}" ] || export "${mode_env[$m]?}"
            # shellcheck disable=SC2086 # the flags are words
            gpu "$file" 90 "$name" --data "$data" --epochs 2 --batch-size "$b" ${mode_flags[$m]}
            status=$?
            unset DDP_CUDNN_BENCHMARK DDP_ALLOW_NONDETERMINISTIC
            ran "timing: ddpc $name.net, batch $b, $m, 2 epochs on the GPU (round $round)" "$file" "$status" &&
                rates[$at.$m]=$(rate_of "$file")
        done
        if [ "$probe" = 0 ]; then
            for t in "${torch_modes[@]}"; do
                file=torch.$name.b$b.$t.r$round
                # shellcheck disable=SC2086
                torch_run "$file" "$name" "$b" ${torch_flags[$t]}
                ran "timing: PyTorch eager ($t), $name.net, batch $b (round $round)" "$file" $? &&
                    rates[$at.torch_$t]=$(torch_rate "$file")
            done
        fi
        say "TIMING  round $round/$rounds  $name b$b  samples/s: $(figures rates "$at.")"
    done
done

declare -A compiled=() # compiled[NAME.BATCH.MODE]
if [ "$probe" = 0 ]; then
    for mode in default reduce-overhead; do
        for nb in "${timings[@]}"; do
            read -r name b <<< "$nb"
            file=torch.$name.b$b.compiled.$mode
            if ! torch_run "$file" "$name" "$b" --compile "$mode"; then
                skip "timing: PyTorch compiled ($mode)" "torch.compile on $name.net, batch $b: $(why "$file")"
                break
            fi
            compiled[$name.$b.$mode]=$(torch_rate "$file")
        done
    done
fi

ncu_table() { # ncu_table CSV: the 15 kernels of the longest total time: name, count, total and mean us
    awk '
    function fields(line, f,    n, i, c, q, cur) { # a CSV line into f[1..n]: quoted fields, "" inside
        n = 0; cur = ""; q = 0
        for (i = 1; i <= length(line); i++) {
            c = substr(line, i, 1)
            if (q && c == "\"" && substr(line, i + 1, 1) == "\"") { cur = cur c; i++ }
            else if (c == "\"") q = !q
            else if (!q && c == ",") { f[++n] = cur; cur = "" }
            else cur = cur c
        }
        f[++n] = cur
        return n
    }
    {
        n = fields($0, f)
        if (!name) { # the header: the columns by name
            for (i = 1; i <= n; i++) {
                if (f[i] == "Kernel Name") name = i
                if (f[i] == "Metric Name") metric = i
                if (f[i] == "Metric Unit") unit = i
                if (f[i] == "Metric Value") value = i
            }
            if (!metric || !unit || !value) name = 0
            next
        }
        if (f[metric] != "gpu__time_duration.sum") next
        v = f[value]; gsub(/,/, "", v)
        u = f[unit]
        scale = u ~ /^(nsecond|ns)$/ ? 1e-3 : u ~ /^(usecond|us)$/ ? 1 : u ~ /^(msecond|ms)$/ ? 1e3 : u ~ /^(second|s)$/ ? 1e6 : -1
        if (scale < 0) next
        total[f[name]] += v * scale; count[f[name]]++
    }
    END { for (k in total) printf "%.3f\t%d\t%s\n", total[k], count[k], k }' "$1" |
        LC_ALL=C sort -t "$(printf '\t')" -k1,1nr | head -15 |
        awk -F '\t' 'NR == 1 { printf "%-70s %5s %10s %9s\n", "kernel (its name'"'"'s first 70 characters)", "count", "total us", "mean us" }
                     { printf "%-70.70s %5d %10.1f %9.2f\n", $3, $2, $1, $1 / $2 }'
}
ncu_bin=$(command -v ncu 2> /dev/null)
if [ -z "$ncu_bin" ]; then # the newest of those installed
    for c in ${nvcc:+"${nvcc%/*}/ncu"} /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu; do
        [ -x "$c" ] && ncu_bin=$c
    done
fi
# Launches to skip and to profile, past the start-up (the first steps plan,
# time and capture): mnist.net makes 36 a step (the first H100 run's
# ncu.csv), so 301-420 is 3 1/3 steps from the ninth on; resnet.net makes
# more, its batchnorms' kernels and cuDNN's (not yet counted: its first
# ncu.resnet.csv will say), so its window starts and spans further.
declare -A ncu_window=([mnist]="300 120" [resnet]="1000 300")
for name in mnist resnet; do
    if [ -z "$ncu_bin" ]; then
        skip "ncu: kernel times" "no ncu on PATH, beside nvcc, in /usr/local/cuda/bin or /opt/nvidia/nsight-compute"
        break
    fi
    read -r ncu_skip ncu_count <<< "${ncu_window[$name]}"
    step "ncu.$name" 90 "$ncu_bin" --clock-control none --cache-control none --metrics gpu__time_duration.sum \
        --launch-skip "$ncu_skip" \
        --launch-count "$ncu_count" --csv "${prog[$name]}" --data "$data" --max-steps 30 --quiet
    status=$?
    grep '^"' "$work/ncu.$name" > "$out/ncu.$name.csv" 2> /dev/null
    table=$(ncu_table "$out/ncu.$name.csv")
    if [ "$status" -eq 0 ] && [ -n "$table" ]; then
        say "ncu: $name.net, kernel launches $((ncu_skip + 1))-$((ncu_skip + ncu_count)) of 30 steps, gpu__time_duration.sum" \
            "($ncu_bin; every row in ncu.$name.csv):"
        while IFS= read -r line; do say "  $line"; done <<< "$table"
    else
        rm -f "$out/ncu.$name.csv"
        skip "ncu: $name's kernel times" "ncu ended $status: $(grep -m1 -E '==ERROR==|ERR_' "$work/ncu.$name" || why "ncu.$name")"
    fi
done

for nb in "${timings[@]}"; do
    read -r name b <<< "$nb"
    declare -A med=()
    for m in "${modes[@]}" "${torch_modes[@]/#/torch_}"; do
        values=()
        for ((round = 1; round <= rounds; round++)); do values+=("${rates[$round.$name.$b.$m]:-}"); done
        med[$m]=$(median "${values[@]}")
    done
    # the rounds that gave ddpc's FP32 figure: fewer than asked where time ran out
    counted=0
    for ((round = 1; round <= rounds; round++)); do [ -z "${rates[$round.$name.$b.fp32]:-}" ] || counted=$((counted + 1)); done
    c=${compiled[$name.$b.default]:-} r=${compiled[$name.$b.reduce-overhead]:-}
    say "TIMING  median of $counted round$([ "$counted" = 1 ] || echo s)  $name b$b  samples/s: $(figures med);" \
        "compiled (one run) $(number "$c"), reduce-overhead $(number "$r")"
    fp32_peer=$(best "eager FP32=${med[torch_fp32]}" "eager FP32 cudnn.benchmark=${med[torch_fp32bench]}") ||
        fp32_peer="? none"
    tf32_peer=$(best "eager=${med[torch_eager]}" "compiled=$c" "compiled reduce-overhead=$r") || tf32_peer="? none"
    say "TIMING  ratios  $name b$b:" \
        "FP32 against the best PyTorch FP32, $(number "${fp32_peer%% *}") (${fp32_peer#* }):" \
        "ddpc $(ratio "${med[fp32]}" "${fp32_peer%% *}"), timed algorithms $(ratio "${med[bench]}" "${fp32_peer%% *}")," \
        "nondeterministic $(ratio "${med[nondet]}" "${fp32_peer%% *}");" \
        "tf32 against the best PyTorch at its defaults (TF32 convs), $(number "${tf32_peer%% *}") (${tf32_peer#* }):" \
        "$(ratio "${med[tf32]}" "${tf32_peer%% *}"), against eager $(ratio "${med[tf32]}" "${med[torch_eager]}")"
    unset med
done
