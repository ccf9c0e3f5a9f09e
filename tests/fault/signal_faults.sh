#!/usr/bin/env bash
# A run stopped at once, or a rank ended by a signal, must be said in
# README's words, with status 1:
#   tests/fault/signal_faults.sh nproc-kill|nproc-term|single-term|single-int
# nproc-kill:  a CPU build's --nproc-per-node 2 (which runs mpirun); rank 1
#              is killed with SIGKILL: "rank 1 was killed by signal SIGKILL";
# nproc-term:  the same launcher gets SIGTERM, then SIGINT: the first asks
#              the ranks to stop after their step, the second ends them at
#              once: "stopped by SIGTERM" (or SIGINT);
# single-term, single-int: one rank, no launcher, gets SIGTERM then SIGINT
#              (SIGINT then SIGTERM): "stopped at once by a second SIGINT
#              while ..." (or SIGTERM).
# The two signals go back to back: two of one kind could merge into one
# while pending, two kinds cannot, and the kernel may deliver them in either
# order, hence either name. A step outlasts the gap between them
# (tests/fault/graceful_stop.sh checks a single signal).
# Prints the run's output and a verdict line with the exit status.
set -euo pipefail
mode=$1
. "$(cd "$(dirname "$0")" && pwd)/preamble.sh"  # ddpc, python, here, d, pid, rank_pid; cleans up on exit
# A single rank is to be stopped while training, not evaluating: its epoch
# (32,768 samples, several seconds on one thread) outlasts the wait before
# the signal. The launcher's cases say nothing of the phase.
case $mode in
single-*) train=32768 ;;
*) train=1024 ;;
esac
"$python" "$here/small_data.py" "$d/data" "$train" 128
"$ddpc" examples/mnist.net --target cpu -o "$d/prog" >/dev/null
case $mode in
nproc-kill|nproc-term) OMP_NUM_THREADS=1 "$d/prog" --nproc-per-node 2 --data "$d/data" --batch-size 512 --epochs 1000 \
                --timeout 8 > "$d/out.txt" 2>&1 & ;;
# A background job of a script starts with SIGINT ignored, which the program
# keeps (as nohup's users expect): these get the default back first.
single-term|single-int) OMP_NUM_THREADS=1 "$python" -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execv(sys.argv[1], sys.argv[1:])' "$d/prog" --data "$d/data" --batch-size 512 --epochs 1000 > "$d/out.txt" 2>&1 & ;;
*) echo "signal_faults: unknown mode $mode"; exit 2 ;;
esac
pid=$!
victim=
for _ in $(seq 300); do
    if [ "$mode" != nproc-kill ]; then
        victim=$pid
    else
        victim=$(rank_pid "$d/prog" 1)
    fi
    [ -n "$victim" ] && grep -q "steps per epoch" "$d/out.txt" && break
    sleep 0.1
done
[ -n "$victim" ] || { cat "$d/out.txt"; echo "signal_faults: the rank never started"; exit 1; }
sleep 1
case $mode in
nproc-kill) kill -KILL "$victim" ;;
nproc-term|single-term) kill -TERM "$victim"; kill -INT "$victim" ;;
single-int) kill -INT "$victim"; kill -TERM "$victim" ;;
esac
status=0
wait "$pid" || status=$?
pid=
cat "$d/out.txt"
echo "signal_faults: $mode: exit status $status"
