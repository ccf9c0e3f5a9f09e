#!/usr/bin/env bash
# Checkpoints that move between world sizes (CPU):
#   tests/distributed/resume_world.sh NET.net GLOBAL STOP END "W1:W2 ..." [FLAGS...]
# From the same initial weights, on a training set of 240 samples (every
# world size up to 4 divides it, and 10 steps of GLOBAL 24 make an epoch):
# one rank trains END steps at --global-batch GLOBAL, never stopping: the
# reference. Then for each pair W1:W2, W1 ranks train STOP steps with --save
# (a checkpoint at STOP; mid-epoch where STOP is not a multiple of the
# epoch), and W2 ranks resume from it to END. Their exported weights must be
# the reference's bytes (cmp). Last, a resume with another global batch must
# be refused with status 2, naming both. The resumed run's epoch records
# (--log) must give the reference's loss for each epoch it ended, the steps
# before the checkpoint included, to the rounding of the sums' order (the
# ranks sum their parts apart). One line per run; FLAGS go to
# every run. Ranks run under mpirun, one OpenMP thread each; one rank alone.
set -euo pipefail
. "$(dirname "$0")/ranks.sh"  # run_on_ranks
net=$1 global=$2 stop=$3 end=$4 pairs=$5
shift 5
ddpc=${DDPC:-build/ddpc} python=${PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
"$python" "$here/../fault/small_data.py" "$d/data" 240 32
"$ddpc" "$net" --target cpu -o "$d/prog"
"$d/prog" --data "$d/data" --max-steps 0 --seed 5 --export "$d/w0.safetensors" --quiet "$@"
common=(--data "$d/data" --init "$d/w0.safetensors" --global-batch "$global" "$@")
run() { # run RANKS OUT FLAGS...: the program on RANKS ranks, its output into OUT
    local ranks=$1 out=$2
    shift 2
    run_on_ranks "$ranks" "$d/prog" "${common[@]}" "$@" > "$out" 2>&1
}
name=$(basename "$net")
run 1 "$d/ref.out" --max-steps "$end" --export "$d/ref.safetensors" --log "$d/ref.jsonl" --quiet || { cat "$d/ref.out"; exit 1; }
echo "$name: 1 rank, $end steps at --global-batch $global without stopping: the reference"
status=0
for pair in $pairs; do
    from=${pair%:*} to=${pair#*:}
    rm -rf "$d/ck"
    run "$from" "$d/first.out" --max-steps "$stop" --save "$d/ck" --save-every "$stop" --quiet || { cat "$d/first.out"; exit 1; }
    rm -f "$d/resumed.jsonl"
    run "$to" "$d/second.out" --max-steps "$end" --save "$d/ck" --resume --export "$d/resumed.safetensors" \
        --log "$d/resumed.jsonl" || { cat "$d/second.out"; exit 1; }
    said="resuming from .*: step $stop, made on $from rank.* x $((global / from)), now $to x $((global / to))"
    if [ "$from" != "$to" ] && ! grep -q "$said" "$d/second.out"; then
        echo "$name: $from rank(s) to step $stop, then $to: the resumed run did not say both world sizes"
        cat "$d/second.out"
        status=1
    fi
    if cmp -s "$d/ref.safetensors" "$d/resumed.safetensors"; then
        echo "$name: $from rank(s) to step $stop, then $to to step $end: identical"
    else
        echo "$name: $from rank(s) to step $stop, then $to to step $end: DIFFERENT"
        "$python" "$here/../../tools/compare_weights.py" "$d/w0.safetensors" "$d/resumed.safetensors" \
            "$d/ref.safetensors" --steps "$end" --tol 0 2>&1 | tail -3 || true
        status=1
    fi
    if ! "$python" - "$d/ref.jsonl" "$d/resumed.jsonl" <<'PY'
import json, sys
def epoch_losses(path):
    records = [json.loads(line) for line in open(path)]
    return {r["step"]: r["loss"] for r in records if r.get("event") == "epoch"}
ref, resumed = (epoch_losses(p) for p in sys.argv[1:3])
if not resumed:
    sys.exit("the resumed run logged no epoch")
for step, loss in sorted(resumed.items()):
    if abs(loss - ref[step]) > 1e-12 * abs(ref[step]):
        sys.exit(f"epoch ending at step {step}: loss {loss!r} resumed, {ref[step]!r} in the reference")
PY
    then
        echo "$name: $from rank(s) to step $stop, then $to: the resumed run's epoch loss is NOT the reference's"
        status=1
    fi
done
# another global batch: refused, naming both
set +e
run 1 "$d/bad.out" --max-steps "$end" --save "$d/ck" --resume --global-batch $((global * 2))
rc=$?
set -e
if [ "$rc" = 2 ] && grep -q "made with a global batch of $global (.*this run has $((global * 2)) " "$d/bad.out"; then
    echo "$name: a resume at --global-batch $((global * 2)): refused, status 2, both named"
else
    echo "$name: a resume at --global-batch $((global * 2)): NOT REFUSED as it should be (status $rc)"
    cat "$d/bad.out"
    status=1
fi
exit $status
