#!/usr/bin/env bash
# One of two ranks fails; the other must end too, saying why, within its
# --timeout, never hang:
#   tests/fault/rank_faults.sh kill|stop
# kill: rank 1 is killed with SIGKILL (mpirun sees it die and ends rank 0);
# stop: rank 1 is frozen with SIGSTOP, a hang that nobody reports, so rank
#       0's own deadline on its collective must fire (--timeout 8).
# Prints the run's output, the seconds it took, and a verdict line.
set -euo pipefail
fault=$1
. "$(cd "$(dirname "$0")" && pwd)/preamble.sh"  # ddpc, python, here, d, pid, rank_pid, mpirun2; cleans up on exit
timeout_s=8
# The survivor is to be stopped while training, not evaluating: an epoch
# (32,768 samples, several seconds) outlasts the wait before the fault.
"$python" "$here/small_data.py" "$d/data" 32768 128
"$ddpc" examples/mnist.net --target cpu -o "$d/prog"
start=$(date +%s.%N)
OMP_NUM_THREADS=1 "${mpirun2[@]}" "$d/prog" --data "$d/data" --batch-size 16 --epochs 1000 --timeout "$timeout_s" \
    > "$d/out.txt" 2>&1 &
pid=$!
# rank 1: the child of mpirun whose environment says so, once training runs
victim=
for _ in $(seq 200); do
    victim=$(rank_pid "$d/prog" 1)
    [ -n "$victim" ] && grep -q "steps per epoch" "$d/out.txt" && break
    sleep 0.1
done
[ -n "$victim" ] || { cat "$d/out.txt"; echo "rank_faults: rank 1 never started"; exit 1; }
sleep 1
case $fault in
kill) kill -KILL "$victim" ;;
stop) kill -STOP "$victim" ;;
*) echo "rank_faults: unknown fault $fault"; exit 2 ;;
esac
faulted=$(date +%s.%N)
status=0
wait "$pid" || status=$?
pid=
took=$(awk -v a="$(date +%s.%N)" -v b="$faulted" 'BEGIN { printf "%.1f", a - b }')
cat "$d/out.txt"
echo "rank_faults: $fault: exit status $status after ${took} s (timeout ${timeout_s} s)"
