#!/usr/bin/env bash
# A steady training step makes no device synchronisation and no allocation:
#   tests/distributed/steady_step.sh
# Each rank's log counts the device calls made inside its steps (device_calls.h:
# "device_syncs", "host_waits", "device_allocs" in each rank_times record).
# The CPU build counts the calls a GPU build makes, at the same places, so
# these runs check the step a GPU would take. Runs, --log-every 1 (a record
# per step), 8 steps:
#   mnist.net and resnet.net (batchnorm) on 1 rank;
#   resnet.net on 2 ranks (--nproc-per-node 2) with --no-sync-every 2 and
#   --eval-every 3 (evaluations and reports are outside the steps);
#   mlp.net on 2 ranks with the last batch short (the step's sizes change);
#   the 2-rank runs where mpirun is found (said when not).
# Must hold, from the third step on: 0 syncs, 0 allocations, at most one
# host wait (for the staging buffer a step or two back) a batch, so two an
# optimizer step under --no-sync-every 2; and on the
# first step some allocation (the products' scratch grows then), so that a
# count that stopped counting would fail. A failed check prints DIFFERENT;
# exits 1 if any failed.
set -euo pipefail
ddpc=${DDPC:-build/ddpc} python=${PYTHON:-/usr/bin/python3}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
"$python" tests/fault/small_data.py "$d/data" 1000 64
# 1000 samples at 2 x 64 a step: 7 full steps and a short eighth
status=0
check() { # check NAME LOG BATCHES_A_STEP
    "$python" - "$1" "$2" "$3" << 'PYEOF' || status=1
import json, sys
name, path, batches = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = [r for r in map(json.loads, open(path)) if r.get("event") == "rank_times"]
bad = []
if not rows:
    bad.append("no rank_times records")
if not any(r["step"] == 1 and r["device_allocs"] > 0 for r in rows):
    bad.append("no allocation counted in the first step")
for r in rows:
    if r["step"] >= 3 and (r["device_syncs"] or r["device_allocs"] or r["host_waits"] > batches):
        bad.append("rank %d step %d: %d syncs, %d allocations, %d waits" %
                   (r["rank"], r["step"], r["device_syncs"], r["device_allocs"], r["host_waits"]))
steps = sorted({r["step"] for r in rows})
print("%s: %d steps logged, from the third on %s%s" % (name, len(steps), "no sync and no allocation",
      ": DIFFERENT (" + "; ".join(bad) + ")" if bad else ""))
sys.exit(1 if bad else 0)
PYEOF
}
for net in mnist resnet mlp; do
    "$ddpc" "examples/$net.net" --target cpu -o "$d/$net" > /dev/null
done
run() { # run NAME NET BATCHES_A_STEP ARGS...
    local name=$1 net=$2 batches=$3
    shift 3
    if "$d/$net" --data "$d/data" --max-steps 8 --log-every 1 --log "$d/$name.jsonl" --quiet "$@" > "$d/out.txt" 2>&1; then
        check "$name" "$d/$name.jsonl" "$batches"
    else
        cat "$d/out.txt"
        echo "$name: the run failed: DIFFERENT"
        status=1
    fi
}
run "mnist.net, 1 rank" mnist 1
run "resnet.net, 1 rank" resnet 1
if command -v mpirun > /dev/null; then
    run "resnet.net, 2 ranks, --no-sync-every 2, --eval-every 3" resnet 2 --nproc-per-node 2 --no-sync-every 2 \
        --eval-every 3
    run "mlp.net, 2 ranks, a short last batch" mlp 1 --nproc-per-node 2 --batch-size 64 --epochs 1
else
    echo "2 ranks: skipped (no mpirun)"
fi
exit $status
