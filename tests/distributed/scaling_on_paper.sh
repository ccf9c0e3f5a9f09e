#!/usr/bin/env bash
# Scaling on paper against the clock: tests/distributed/scaling_on_paper.sh
# `ddpc --emit plan --world N` predicts samples/s from FLOPs, buckets and a
# link; here its CPU figures meet measured runs of mnist.net, resnet.net and
# mlp.net at 1 rank and at 2 ranks (--nproc-per-node 2), 90 steps each, the
# last 30 timed (--log-every 30: each rank's times in the log).
#
# The rate a rank achieves is the one input taken from the run: each run's
# own forward time (FLOPs of the summary over the measured forward ms) gives
# --tflops, since no FLOP count says what a CPU achieves. Everything else is
# the model's: backward (twice a conv's or linear's forward, and the CPU's
# order-free gradient parts), the ring all-reduce over shared memory taken as
# a 40 Gb/s link, its overlap with backward, and what it leaves out (the
# optimizer, the data loader). Must hold: measured samples/s within a factor
# of FACTOR (2) of the prediction, either way. A failed check prints
# DIFFERENT; exits 1 if any failed.
set -euo pipefail
ddpc=${DDPC:-build/ddpc} python=${PYTHON:-/usr/bin/python3}
factor=${FACTOR:-2} link_gbps=40
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
"$python" tests/fault/small_data.py "$d/data" 12288 64
status=0
for net in mnist resnet mlp; do
    "$ddpc" "examples/$net.net" --target cpu -o "$d/$net" > /dev/null
    mflops=$("$ddpc" "examples/$net.net" --summary | sed -n 's/^forward: *\([0-9.]*\) MFLOPs per sample.*/\1/p')
    for world in 1 2; do
        log="$d/$net$world.jsonl"
        launch=()
        [ "$world" = 1 ] || launch=(--nproc-per-node "$world")
        "$d/$net" --data "$d/data" --max-steps 90 --log-every 30 --log "$log" --quiet "${launch[@]}" > "$d/out.txt" 2>&1 ||
            { cat "$d/out.txt"; echo "$net on $world rank(s): the run failed: DIFFERENT"; status=1; continue; }
        # the last gathering: each rank's forward ms and samples/s
        read -r batch forward_ms measured < <("$python" - "$log" << 'EOF' || echo "0 0 0"
import json, sys
records = [json.loads(line) for line in open(sys.argv[1])]
batch = next(r["batch_per_rank"] for r in records if r["event"] == "start")
last = max(r["step"] for r in records if r["event"] == "rank_times")
rows = [r for r in records if r["event"] == "rank_times" and r["step"] == last]
print(batch, sum(r["forward_ms"] for r in rows) / len(rows), sum(r["samples_per_s"] for r in rows))
EOF
        )
        [ "$forward_ms" != 0 ] || { echo "$net on $world rank(s): no step times in its log: DIFFERENT"; status=1; continue; }
        tflops=$(awk -v m="$mflops" -v b="$batch" -v f="$forward_ms" 'BEGIN { printf "%.6g", m * 1e6 * b / (f / 1e3) / 1e12 }')
        predicted=$("$ddpc" "examples/$net.net" --emit plan --target cpu --world "$world" --link "$link_gbps" \
            --tflops "$tflops" | awk -v w="$world" '/^ world +step_ms/ { table = 1 } table && $1 == w { p = $5 } END { print p }')
        awk -v n="$net" -v w="$world" -v t="$tflops" -v p="$predicted" -v m="$measured" -v f="$factor" 'BEGIN {
            ok = p > 0 && m >= p / f && m <= p * f
            verdict = ok ? "" : (": DIFFERENT (outside a factor of " f ")")
            printf "%s on %d rank(s), %.4g TFLOP/s a rank as its forward measured: predicted %.0f samples/s, measured %.0f (%.2fx)%s\n",
                n, w, t, p, m, (p > 0 ? m / p : 0), verdict
            exit !ok }' || status=1
    done
done
exit $status
