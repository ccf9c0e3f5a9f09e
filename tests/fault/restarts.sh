#!/usr/bin/env bash
# Restarts (--max-restarts) bit for bit:
#   tests/fault/restarts.sh NET.net STEPS
# Builds NET for the CPU and trains STEPS steps on 2 ranks (--nproc-per-node
# 2, under mpirun) in one go: the reference. Then again with --save (a
# checkpoint every 10 steps) and --max-restarts 2, killing rank 1 with
# SIGKILL twice: once after the first checkpoint, once after a checkpoint
# of the restarted ranks, the program's file replaced (as a rebuild does)
# before the second kill. The run must finish (status 0) with the very
# bytes of the reference (cmp), having said and logged each restart with
# its cause, and resumed each time from a checkpoint past step 0, the
# second time running the program as it started (through a link in
# TMPDIR, gone after). Last, with --max-restarts 1 and the same two kills, the run
# must give up after one restart (status 1), saying so; a rank's bad
# input (status 2) must not be restarted; nor a stop asked for (SIGTERM to
# the launcher, once a checkpoint exists to restart from): status 75. mpirun
# killed (SIGKILL) under --max-restarts 1: the ranks it leaves are killed,
# and the restarted run ends as the reference. A SIGTERM as mpirun starts
# stops the run: status 75.
set -euo pipefail
net=$1 steps=$2
. "$(cd "$(dirname "$0")" && pwd)/preamble.sh"  # ddpc, python, here, d, pid, rank_pid; cleans up on exit
"$python" "$here/small_data.py" "$d/data" 1024 128
"$ddpc" "$net" --target cpu -o "$d/prog"
"$d/prog" --data "$d/data" --max-steps 0 --seed 5 --export "$d/w0.safetensors" --quiet
common=(--data "$d/data" --init "$d/w0.safetensors" --epochs 1000 --max-steps "$steps" --nproc-per-node 2)
"$d/prog" "${common[@]}" --quiet --export "$d/ref.safetensors" > "$d/ref.out" 2>&1 || { cat "$d/ref.out"; exit 1; }
echo "$(basename "$net"): 2 ranks, $steps steps in one go: the reference"

newest_step() { # the step of the newest checkpoint in $1, 0 if none
    local f
    f=$(ls "$1" 2> /dev/null | grep -o 'checkpoint-.*-[0-9]*\.safetensors$' | sort | tail -1)
    [ -n "$f" ] && echo "$f" | sed 's/.*-0*\([0-9][0-9]*\)\.safetensors$/\1/' || echo 0
}
kill_rank1_after() { # kill_rank1_after CKDIR STEP: SIGKILL to rank 1 once a checkpoint of STEP or later exists
    local until=$((SECONDS + 120)) pid=""
    while [ "$(newest_step "$1")" -lt "$2" ] && [ $SECONDS -lt $until ]; do sleep 0.02; done
    while [ -z "$pid" ] && [ $SECONDS -lt $until ]; do pid=$(rank_pid "$d/prog" 1); sleep 0.02; done
    if [ -n "$pid" ]; then kill -9 "$pid"; else echo "no rank 1 to kill after step $2 (the run ended?)"; fi
}
run_with_kills() { # run_with_kills MAX_RESTARTS OUT [replace]: the run, rank 1 killed twice; its status
    local ck="$d/ck_$1"
    mkdir -p "$d/tmp"  # TMPDIR: where a restart of a replaced program links it, and must unlink it
    TMPDIR="$d/tmp" "$d/prog" "${common[@]}" --save "$ck" --save-every 10 --max-restarts "$1" --log "$d/log_$1.jsonl" \
        --export "$d/out_$1.safetensors" > "$2" 2>&1 &
    local run=$! until=$((SECONDS + 120))
    kill_rank1_after "$ck" 10
    # then after a checkpoint of the restarted ranks, newer than any of the
    # killed ones': rank 0 may still write one as rank 1 dies, and the
    # launcher says it restarts once every rank it started has ended
    while ! grep -q "restarting all " "$2" && kill -0 $run 2> /dev/null && [ $SECONDS -lt $until ]; do
        sleep 0.02
    done
    local next=$(($(newest_step "$ck") + 10))
    while [ "$(newest_step "$ck")" -lt $next ] && [ $SECONDS -lt $until ]; do sleep 0.02; done
    if [ "${3:-}" = replace ]; then  # the restarted ranks run; the launcher's file goes
        cp "$d/prog" "$d/prog.new"
        mv -f "$d/prog.new" "$d/prog"
    fi
    kill_rank1_after "$ck" $next
    local rc=0
    wait $run || rc=$?
    return $rc
}

status=0 rc=0
run_with_kills 2 "$d/two.out" replace || rc=$?
restarts=$(grep -c '"event": "restart"' "$d/log_2.jsonl" || true)
if [ "$rc" = 0 ] && cmp -s "$d/ref.safetensors" "$d/out_2.safetensors" && [ "$restarts" = 2 ] &&
    grep -q '"restart": 2, "cause": "rank 1 was killed by signal SIGKILL"' "$d/log_2.jsonl" &&
    grep -q "restarting all 2 ranks from the newest checkpoint in .* (restart 2 of 2): rank 1 was killed by signal SIGKILL" \
        "$d/two.out" && [ "$(grep -c "resuming from .*: step [1-9]" "$d/two.out")" = 2 ] &&
    grep -q "this program's file was replaced or removed since it started: its ranks run the program as it started" \
        "$d/two.out" && [ -z "$(ls "$d/tmp")" ]; then
    echo "$(basename "$net"): rank 1 killed twice, --max-restarts 2, the file replaced before the second: finished," \
        "identical to the reference, 2 restarts logged"
else
    echo "$(basename "$net"): rank 1 killed twice, --max-restarts 2: status $rc, $restarts restarts logged: DIFFERENT"
    cat "$d/two.out"
    status=1
fi
rc=0
run_with_kills 1 "$d/one.out" || rc=$?
if [ "$rc" = 1 ] && grep -q "rank 1 was killed by signal SIGKILL after 1 restart: giving up (--max-restarts 1)" "$d/one.out"; then
    echo "$(basename "$net"): rank 1 killed twice, --max-restarts 1: gave up after one restart, status 1"
else
    echo "$(basename "$net"): rank 1 killed twice, --max-restarts 1: status $rc: DIFFERENT"
    cat "$d/one.out"
    status=1
fi
# bad input is not restarted: it would be refused again
rc=0
"$d/prog" --data "$d/absent" --max-steps 5 --nproc-per-node 2 --save "$d/ck_bad" --max-restarts 2 --quiet > "$d/bad.out" 2>&1 ||
    rc=$?
if [ "$rc" = 2 ] && ! grep -q "restarting" "$d/bad.out"; then
    echo "$(basename "$net"): bad --data under --max-restarts 2: status 2, not restarted"
else
    echo "$(basename "$net"): bad --data under --max-restarts 2: status $rc: DIFFERENT"
    cat "$d/bad.out"
    status=1
fi
# a stop asked for is not restarted: no rank failed, the user wants the run
# to end. --max-steps far past the stop, so that the stop lands before the
# end even on a loaded machine, and a restart would show (it would train on,
# and end with status 0, in seconds).
rc=0
"$d/prog" --data "$d/data" --init "$d/w0.safetensors" --epochs 1000 --max-steps $((steps * 50)) --nproc-per-node 2 \
    --save "$d/ck_stop" --save-every 10 --max-restarts 2 > "$d/stop.out" 2>&1 &
run=$!
until=$((SECONDS + 120))
while [ "$(newest_step "$d/ck_stop")" -lt 10 ] && kill -0 $run 2> /dev/null && [ $SECONDS -lt $until ]; do sleep 0.02; done
kill -TERM $run 2> /dev/null || true
wait $run || rc=$?
if [ "$rc" = 75 ] && grep -q "stopped after step [0-9]* (epoch .*) on SIG[A-Z0-9]*: saved " "$d/stop.out" &&
    ! grep -q "restarting" "$d/stop.out"; then
    echo "$(basename "$net"): SIGTERM under --max-restarts 2: status 75, not restarted"
else
    echo "$(basename "$net"): SIGTERM under --max-restarts 2: status $rc: DIFFERENT"
    cat "$d/stop.out"
    status=1
fi
# mpirun itself killed once a checkpoint exists: its ranks, no longer its
# descendants, would train on (holding --save's lock and the store's port)
# beside the restarted ones, which --save's lock refuses (status 2). They
# are killed, and the restart ends as the reference.
rc=0
"$d/prog" "${common[@]}" --save "$d/ck_mpirun" --save-every 10 --max-restarts 1 --export "$d/out_mpirun.safetensors" \
    > "$d/mpirun.out" 2>&1 &
run=$!
until=$((SECONDS + 120))
while [ "$(newest_step "$d/ck_mpirun")" -lt 10 ] && kill -0 $run 2> /dev/null && [ $SECONDS -lt $until ]; do sleep 0.02; done
pkill -KILL -x -P $run mpirun || echo "no mpirun to kill (the run ended?)"
wait $run || rc=$?
# (an MPI whose ranks end on their own as mpirun dies leaves none to kill:
# "mpirun left N of its processes running" is not required)
if [ "$rc" = 0 ] && cmp -s "$d/ref.safetensors" "$d/out_mpirun.safetensors" &&
    grep -q "(restart 1 of 1): mpirun was killed by signal SIGKILL" "$d/mpirun.out"; then
    echo "$(basename "$net"): mpirun killed, --max-restarts 1: finished, identical to the reference" \
        "($(grep -o "mpirun left [0-9]* of its processes running" "$d/mpirun.out" || echo "it left no process running"))"
else
    echo "$(basename "$net"): mpirun killed, --max-restarts 1: status $rc: DIFFERENT"
    cat "$d/mpirun.out"
    status=1
fi
# a stop asked as soon as mpirun is there, before its job has started
# (mpirun drops a SIGUSR1 then, or dies of one that comes before its own
# handler): passed on until the ranks take it, status 75, not trained to
# the end (status 0) nor said as mpirun's failure (status 1)
rc=0
"$d/prog" --data "$d/data" --init "$d/w0.safetensors" --epochs 1000 --max-steps $((steps * 50)) --nproc-per-node 2 \
    --save "$d/ck_early" --max-restarts 2 > "$d/early.out" 2>&1 &
run=$!
until=$((SECONDS + 60))
until pgrep -x -P $run mpirun > /dev/null || [ $SECONDS -ge $until ]; do sleep 0.002; done
kill -TERM $run 2> /dev/null || true
wait $run || rc=$?
if [ "$rc" = 75 ] && ! grep -q "restarting" "$d/early.out"; then
    echo "$(basename "$net"): SIGTERM as mpirun starts: status 75"
else
    echo "$(basename "$net"): SIGTERM as mpirun starts: status $rc: DIFFERENT"
    cat "$d/early.out"
    status=1
fi
exit $status
