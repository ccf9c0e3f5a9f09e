#!/usr/bin/env bash
# Data parallel on the CPU against PyTorch DDP, in the same run:
#   ddpc's mnist.net, 2 ranks under mpirun (1 OpenMP thread each), batch 64 per rank;
#   PyTorch DDP (gloo), 2 processes (1 thread each), batch 64 per rank, the same
#   net (ddpc --emit torch), the training set preloaded as tensors.
# Reports samples/s of each and the ratio against the faster PyTorch, Debian's
# (/usr/bin/python3) or the newest from PyPI (`make bench-deps`), or else
# only the PyTorch of PYTHON when set (goal: ddpc at least 2.0x); each is
# named by its version and its python's path, whatever it is. Both
# run with their default buckets, which are the same: a 25 MB cap, the first
# bucket 1 MB, so the 0.7 MB of float32 parameters make one bucket on each
# side (ddpc ran at a 0.1 MB cap, three buckets, before: on 2 cores that
# cost it speed, README says how much). Round 1 also measures the all-reduce time left
# exposed per step (not hidden behind backward) at that 0.1 MB cap, with
# overlap and without (DDP_OVERLAP=0): three buckets, 2.8 MB of gradients
# (two doubles each). Both rates leave out the first 5 steps: PyTorch's timed
# loop starts after them (bench/torch_train.py), and ddpc runs 5 more steps
# and takes its rate from the log's rank_times past them
# (bench/steady_rate.awk). Each run of either side, every round, checks that
# it exited 0 (ddpc's last check, that all ranks hold the same weights,
# comes after its last report) and that its loss is finite (and below 3,
# where ln 10 is a uniform guess's): a run that fails is said at once, left
# out of the medians, and makes the verdict FAILED, naming it. The two programs run in turn ROUNDS times (3) and the ratio is of
# the medians: on a shared 2-core machine one run of either varies by 10%.
# ddpc runs first in odd rounds and PyTorch first in even rounds, so that
# neither side always gets the machine as the other leaves it (warmer
# caches and clocks, or a hotter chip).
# Prints OK/FAILED lines; never fails the build.
#   [ROUNDS=N] bash bench/ddp_cpu.sh [STEPS]
set -u
cd "$(dirname "$0")/.." || exit 0
warmup=5 rounds=${ROUNDS:-3}
steps=$(((${1:-200} + warmup - 1) / warmup * warmup)) # whole windows of the log (steady_rate.awk)
python=${PYTHON:-/usr/bin/python3}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
build/ddpc examples/mnist.net --target cpu -o "$d/mnist" > /dev/null || { echo "ddp_cpu: FAILED: build"; exit 0; }
build/ddpc examples/mnist.net --emit torch > "$d/mnist.py"

run_ours() { # DDP_OVERLAP=0|1 run_ours LOG [FLAG...]: the program's flags after its own
    local log=$1
    shift
    rm -f "$log" # no figure of an earlier run's log is read as this one's
    OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x OMP_NUM_THREADS -x DDP_OVERLAP \
        "$d/mnist" --max-steps $((steps + warmup)) --log-every "$warmup" --log "$log" "$@" > "$log.out" 2>&1
}
field() { grep -o "\"$2\": *[-0-9.e]*" "$1" | tail -1 | sed 's/.*: *//'; }

loss_ok() { awk -v x="$1" 'BEGIN { exit !(x == x + 0 && x < 3) }'; }
# the median of a list's figures, leaving out its failed runs ("-")
median() { grep -vx -- - | sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

# The peers: $python's PyTorch (Debian's unless PYTHON is set) and, where
# `make bench-deps` installed it and PYTHON is not set, the newest from
# PyPI; the ratio is against the faster of the two (medians). Each is
# named by what it is, "torch VERSION (PYTHON)", not by where it should
# have come from.
peers=python
newest=/opt/ddpc-bench/bin/python
if [ -z "${PYTHON:-}" ] && [ -x "$newest" ] && "$newest" -c 'import torch' 2> /dev/null; then
    peers="python newest"
else
    echo "ddp_cpu: the newest PyTorch is missing (make bench-deps installs it) or PYTHON is set: comparing with $python only"
fi
peer_python() { [ "$1" = newest ] && echo "$newest" || echo "$python"; }
declare -A label
for peer in $peers; do
    version=$("$(peer_python "$peer")" -c 'import torch; print(torch.__version__.split("+")[0])' 2> /dev/null)
    label[$peer]="torch ${version:-?} ($(peer_python "$peer"))"
done

# A failed run: said with the end of its output, and named in the verdict.
failed=""
failed_run() { # failed_run WHAT OUTPUT
    echo "ddp_cpu: FAILED: $1"
    tail -n 20 "$2" | sed 's/^/    /'
    failed="$failed; $1"
}

# A round's ddpc run and its peers' runs: each appends its rate, or "-", to its list.
ours_round() {
    DDP_OVERLAP=1 run_ours "$d/ours.jsonl"
    rc=$?
    ours=$(awk -v warm="$warmup" -f bench/steady_rate.awk "$d/ours.jsonl")
    loss=$(field "$d/ours.jsonl" loss)
    if [ "$rc" != 0 ] || [ -z "$ours" ] || ! loss_ok "$loss"; then
        failed_run "round $round, ddpc: exit status $rc, loss '$loss', rate '$ours'" "$d/ours.jsonl.out"
        ours=-
    fi
    all_ours="$all_ours $ours"
}
peers_round() {
    for peer in $peers; do
        "$(peer_python "$peer")" bench/torch_train.py --module "$d/mnist.py" --ranks 2 --threads 1 \
            --steps "$steps" > "$d/torch.out" 2>&1
        rc=$?
        torch_line=$(grep '^torch:' "$d/torch.out")
        theirs=$(echo "$torch_line" | sed 's/.*samples\/s \([0-9.]*\).*/\1/')
        torch_loss=$(echo "$torch_line" | sed 's/.*final_loss \([-0-9.na]*\).*/\1/')
        if [ "$rc" != 0 ] || [ -z "$theirs" ] || ! loss_ok "$torch_loss"; then
            failed_run "round $round, PyTorch, ${label[$peer]}: exit status $rc, final loss '$torch_loss', rate '$theirs'" "$d/torch.out"
            theirs=-
        fi
        eval "all_$peer=\"\$all_$peer $theirs\""
    done
}

all_ours="" all_python="" all_newest="" exposed="?" serial="?"
for round in $(seq "$rounds"); do
    if [ $((round % 2)) = 1 ]; then
        ours_round
        peers_round
    else
        peers_round
        ours_round
    fi
    if [ "$round" = 1 ]; then
        for overlap in 1 0; do
            DDP_OVERLAP=$overlap run_ours "$d/overlap$overlap.jsonl" --bucket-cap-mb 0.1
            rc=$?
            ms=$(grep -o 'backward: [0-9.]* ms' "$d/overlap$overlap.jsonl.out" | grep -o '[0-9.]*' | head -1)
            if [ "$rc" != 0 ] || [ -z "$ms" ]; then
                failed_run "round 1, ddpc at a 0.1 MB bucket cap, DDP_OVERLAP=$overlap: exit status $rc, exposed all-reduce '$ms'" \
                    "$d/overlap$overlap.jsonl.out"
                ms="?"
            fi
            [ "$overlap" = 1 ] && exposed=$ms || serial=$ms
        done
    fi
done

rates() { for v in "$@"; do [ "$v" = - ] && echo -n " -" || printf ' %.0f' "$v"; done; } # a failed run as "-"
ours=$(echo $all_ours | tr ' ' '\n' | median)
best="" best_peer=""
for peer in $peers; do
    eval "runs=\$all_$peer"
    m=$(echo $runs | tr ' ' '\n' | median)
    echo "ddp_cpu: PyTorch DDP (gloo), ${label[$peer]}: rounds$(rates $runs), median ${m:--} samples/s"
    [ -n "$m" ] || continue
    if [ -z "$best" ] || awk -v a="$m" -v b="$best" 'BEGIN { exit !(a > b) }'; then best=$m best_peer=$peer; fi
done
if [ -n "$ours" ] && [ -n "$best" ]; then
    ratio=$(awk -v a="$ours" -v b="$best" 'BEGIN { printf "%.2f", a / b }')
    verdict=$(awk -v r="$ratio" 'BEGIN { print (r >= 2.0) ? "OK" : "FAILED" }')
else
    ratio=- best_peer="" verdict=FAILED
fi
[ -z "$failed" ] || verdict=FAILED
echo "ddp_cpu: $verdict: ddpc ${ours:--} samples/s, the faster PyTorch DDP${best_peer:+, ${label[$best_peer]},} ${best:--} samples/s (medians of $rounds): ratio $ratio (goal >= 2.0)${failed:+; failed: ${failed#; }}"
# Each round's own ratio too, against that peer's run of the same round: the
# runs of a round follow each other, so a slow spell of the shared machine
# weighs on both.
if [ -n "$best_peer" ]; then
    eval "runs=\$all_$best_peer"
    round_ratios=$(paste <(echo $all_ours | tr ' ' '\n') <(echo $runs | tr ' ' '\n') |
        awk '{ if ($1 == "-" || $2 == "-") print "-"; else printf "%.2f\n", $1 / $2 }')
    echo "ddp_cpu: each round (ddpc first in odd ones, PyTorch in even): ddpc$(rates $all_ours); ratios $(echo $round_ratios) (median $(echo "$round_ratios" | median))"
fi
echo "ddp_cpu: all-reduce exposed per step at a 0.1 MB bucket cap: ${exposed} ms with overlap, ${serial} ms without (3 buckets, 2.8 MB of gradients)"
