#!/usr/bin/env bash
# A global batch under mpirun (CPU):
#   tests/distributed/global_batch.sh NET.net STEPS GLOBAL "RANKS" [FLAGS...]
# From the same initial weights, --global-batch GLOBAL on each rank count of
# RANKS ("1 2 4"; 1 runs without mpirun, on every thread of the machine, the
# others one OpenMP thread a rank): each rank takes GLOBAL / ranks samples a
# step, so every run takes the same steps, and their exported weights must
# be the same bytes (cmp) as the first's. The start-up line and the first
# log record must state both figures. A net whose train block says `batch
# GLOBAL global` runs without the flag. Then a rank count that does not divide GLOBAL (the smallest
# above 1) must be refused with status 2, naming the divisors. One line per
# run; FLAGS go to every run.
set -euo pipefail
. "$(dirname "$0")/ranks.sh"  # run_on_ranks
net=$1 steps=$2 global=$3 rank_counts=$4
shift 4
ddpc=${DDPC:-build/ddpc}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
"$ddpc" "$net" --target cpu -o "$d/prog"
"$d/prog" --max-steps 0 --seed 5 --export "$d/w0.safetensors" --quiet "$@"
# a net whose train block says `batch GLOBAL global` needs no flag
set_by=(--global-batch "$global")
grep -Eq "^ *batch +$global +global" "$net" && set_by=()
common=(--init "$d/w0.safetensors" --max-steps "$steps" "${set_by[@]}" "$@")
run() { # run RANKS OUT FLAGS...: the program on RANKS ranks, its output into OUT
    local ranks=$1 out=$2
    shift 2
    run_on_ranks "$ranks" "$d/prog" "${common[@]}" "$@" > "$out" 2>&1
}
status=0 first=""
name=$(basename "$net")
for ranks in $rank_counts; do
    weights="$d/w_$ranks.safetensors"
    run "$ranks" "$d/out_$ranks" --export "$weights" --log "$d/log_$ranks.jsonl" || { cat "$d/out_$ranks"; exit 1; }
    if ! grep -q "batch $((global / ranks)) per rank ($global global, as set)" "$d/out_$ranks"; then
        echo "$name on $ranks ranks: the start-up line does not state batch $((global / ranks)) per rank, $global global"
        cat "$d/out_$ranks"
        status=1
    fi
    start=$(head -1 "$d/log_$ranks.jsonl")
    per_rank=$((global / ranks))
    if ! grep -q "\"world_size\": $ranks, \"batch_per_rank\": $per_rank, \"global_batch\": $global, \"global_batch_set\": true" \
        <<< "$start"; then
        echo "$name on $ranks ranks: the first log record does not state batch $per_rank per rank, $global global: $start"
        status=1
    fi
    if [ -z "$first" ]; then
        first=$weights
        echo "$name --global-batch $global on $ranks rank(s), $steps steps: the reference"
    elif cmp -s "$first" "$weights"; then
        echo "$name --global-batch $global on $ranks ranks ($per_rank each), $steps steps: identical"
    else
        echo "$name --global-batch $global on $ranks ranks ($per_rank each), $steps steps: DIFFERENT"
        status=1
    fi
done
# the smallest rank count above 1 that does not divide the global batch
bad=2
while [ $((global % bad)) = 0 ]; do bad=$((bad + 1)); done
set +e
run "$bad" "$d/bad"
rc=$?
set -e
if grep -q "the global batch $global does not divide among $bad ranks: run on 1, 2" "$d/bad" && [ "$rc" = 2 ]; then
    echo "$name --global-batch $global on $bad ranks: refused, status 2, the divisors named"
else
    echo "$name --global-batch $global on $bad ranks: NOT REFUSED as it should be (status $rc)"
    cat "$d/bad"
    status=1
fi
exit $status
