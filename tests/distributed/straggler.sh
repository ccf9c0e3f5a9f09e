#!/usr/bin/env bash
# Each rank's time per step, gathered into the log, and a slow rank named:
#   tests/distributed/straggler.sh
# mnist.net on 2 ranks (--nproc-per-node 2), --log-every 10 for 30 steps,
# with rank 1, then rank 0, slowed on purpose by 40 ms in each data phase
# (DDP_TEST_DATA_DELAY, for tests only): every gathering must log a record
# per rank with its data wait (40 ms or more on the slowed rank) and name
# the slowed rank as the straggler, which the output says too; a run resumed
# with rank 1 slowed gives the all-reduce time rank 0 waited per step of its
# own, not of the steps before the resume. On one rank
# the records are written, and no straggler. A failed check prints
# DIFFERENT; exits 1 if any failed.
set -euo pipefail
ddpc=${DDPC:-build/ddpc} python=${PYTHON:-/usr/bin/python3}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
"$python" tests/fault/small_data.py "$d/data" 2048 64
"$ddpc" examples/mnist.net --target cpu -o "$d/prog" > /dev/null
common=(--data "$d/data" --batch-size 16 --max-steps 30 --log-every 10)
status=0
for slow in 1 0; do
    log="$d/slow$slow.jsonl"
    DDP_TEST_DATA_DELAY="$slow:40" OMP_NUM_THREADS=1 "$d/prog" "${common[@]}" --nproc-per-node 2 --log "$log" \
        > "$d/out.txt" 2>&1 || { cat "$d/out.txt"; echo "rank $slow slowed: the run failed: DIFFERENT"; exit 1; }
    "$python" - "$log" "$slow" << 'EOF' || status=1
import json, sys
records = [json.loads(line) for line in open(sys.argv[1])]
slow = int(sys.argv[2])
times = [r for r in records if r["event"] == "rank_times"]
ranks = [r for r in records if r["event"] == "ranks"]
steps = sorted({r["step"] for r in times})
ok = steps == [10, 20, 30] and len(times) == 6 and [r["step"] for r in ranks] == steps
ok = ok and all(r["data_ms"] >= 40 for r in times if r["rank"] == slow)
ok = ok and all(r.get("straggler") == slow for r in ranks)
print(f"rank {slow} slowed by 40 ms per data phase: gathered at steps {steps}, straggler "
      f"{[r.get('straggler') for r in ranks]}, its data wait "
      f"{[round(r['data_ms'], 1) for r in times if r['rank'] == slow]} ms"
      + ("" if ok else ": DIFFERENT"))
sys.exit(0 if ok else 1)
EOF
    grep -q "^rank $slow is behind: " "$d/out.txt" || { echo "rank $slow slowed: not said on the output: DIFFERENT"; status=1; }
done
# A resumed run's "all-reduce not hidden by backward" is per step it
# trained: rank 1 slowed by 40 ms in each of the 5 steps after a resume at
# step 25 keeps rank 0 waiting about that long in each (20 ms or more),
# where a figure over all 30 steps would be a sixth of it.
resumed=(--data "$d/data" --batch-size 16 --nproc-per-node 2 --save "$d/ck")
OMP_NUM_THREADS=1 "$d/prog" "${resumed[@]}" --max-steps 25 --quiet
DDP_TEST_DATA_DELAY=1:40 OMP_NUM_THREADS=1 "$d/prog" "${resumed[@]}" --max-steps 30 --resume > "$d/resumed.txt" 2>&1 ||
    { cat "$d/resumed.txt"; echo "resumed: the run failed: DIFFERENT"; exit 1; }
ms=$(sed -n 's/.*all-reduce not hidden by backward: \([0-9.]*\) ms per step$/\1/p' "$d/resumed.txt")
if [ -n "$ms" ] && awk -v ms="$ms" 'BEGIN { exit !(ms >= 20) }'; then
    echo "resumed at step 25, rank 1 slowed: all-reduce not hidden $ms ms per step of this run's 5"
else
    echo "resumed at step 25, rank 1 slowed: all-reduce not hidden '$ms' ms per step, not 20 or more: DIFFERENT"
    cat "$d/resumed.txt"
    status=1
fi
# one rank: its own records, nobody to lag behind
"$d/prog" "${common[@]}" --log "$d/one.jsonl" --quiet
if [ "$(grep -c '"event": "rank_times", "step": [0-9]*, "rank": 0' "$d/one.jsonl")" = 3 ] &&
    ! grep -q '"straggler"' "$d/one.jsonl"; then
    echo "one rank: its times logged 3 times, no straggler"
else
    echo "one rank: DIFFERENT"
    cat "$d/one.jsonl"
    status=1
fi
exit $status
