#!/usr/bin/env bash
# A stop asked for, then the command the run prints, end bit for bit as a run
# never stopped:
#   tests/fault/graceful_stop.sh single|hup|nproc|mpirun|rank1|term1|nosave
# single: one process gets SIGTERM (Slurm's time limit, Kubernetes);
# hup:    one process gets SIGHUP (its terminal or ssh session closed);
# nproc:  --nproc-per-node 2 (its ranks under mpirun) gets SIGINT (Ctrl-C),
#         and once more when rank 0 says the ranks stopped, as an impatient
#         user presses it again while mpirun winds down: still a stop;
# mpirun: the user's own mpirun -np 2 gets SIGUSR1 (Slurm's --signal=USR1@90),
#         which it forwards to the ranks;
# rank1:  under mpirun -np 2, rank 1 alone gets SIGUSR1: the ranks must agree
#         (through their collectives) to stop after the same step;
# term1:  under --nproc-per-node 2, rank 1 alone gets SIGTERM from this
#         script, as from Slurm's time limit: not from its launcher (its
#         parent), so it asks, and does not stop the rank at once;
# nosave: one process gets SIGTERM with no --save: it keeps nothing, says
#         so, and still exits 75 (what a job script's requeue tests); no
#         reference, nothing to resume.
# The signal comes once a first checkpoint exists (--save-every 20), well
# inside the run: seconds of steps remain (10 epochs of 64 or 128), so a
# script preempted on a busy machine still signals a run that trains. The
# run must exit 75, say after which step it stopped and
# what it saved, log {"event": "stop"}, and print how to resume; that
# command (run under the same mpirun for mpirun) must finish with status 0
# and export the very bytes of the reference run (cmp).
# Prints a verdict line per check; exits 1 if any failed.
set -euo pipefail
mode=$1
. "$(cd "$(dirname "$0")" && pwd)/preamble.sh"  # ddpc, python, here, d, pid, rank_pid, mpirun2, with_sigint; cleans up on exit
"$python" "$here/small_data.py" "$d/data" 2048 128
"$ddpc" examples/mnist.net --target cpu -o "$d/prog" > /dev/null
# Run from $d, so that the printed command's relative paths hold.
cd "$d"
# --timeout: ranks that failed to agree would wait for each other; not long
epochs=10
flags=(--data data --batch-size 16 --epochs $epochs --seed 3 --timeout 30 --export out.safetensors)
case $mode in
single|hup|nosave) launch=() ;;
nproc|term1) launch=(); flags+=(--nproc-per-node 2) ;;
mpirun|rank1) launch=("${mpirun2[@]}") ;;
*) echo "graceful_stop: unknown mode $mode"; exit 2 ;;
esac
export OMP_NUM_THREADS=1
status=0
check() { # check WHAT COND...: a verdict line
    local what=$1
    shift
    if "$@"; then echo "graceful_stop: $mode: $what: ok"; else echo "graceful_stop: $mode: $what: FAILED"; status=1; fi
}
wait_until() { # wait_until PID COMMAND...: until COMMAND succeeds, PID has ended, or 120 s have passed
    local pid=$1 until=$((SECONDS + 120))
    shift
    while ! "$@" > /dev/null 2>&1 && [ $SECONDS -lt $until ] && kill -0 "$pid" 2> /dev/null; do
        sleep 0.05
    done
}
has_checkpoint() { ls ck/*.safetensors; }
stop_run() { # stop_run SIGNAL PID [again]: sends SIGNAL to PID (with again, once more when the ranks
    # say they stopped), waits for the run ($run), which must end with status 75
    kill -"$1" "$2" 2> /dev/null || { cat stop.txt; echo "graceful_stop: $mode: the run ended before its SIG$1: FAILED"; exit 1; }
    local second=""
    if [ "${3:-}" = again ]; then
        wait_until "$run" grep -q "stopped after step" stop.txt
        kill -"$1" "$2" 2> /dev/null && second=sent  # (mpirun takes a second or two to wind down)
    fi
    local rc=0
    wait "$run" || rc=$?
    check "exit status 75 (got $rc)" [ "$rc" = 75 ]
    if [ "$second" = sent ]; then
        check "a second SIG$1 once the ranks stopped only says so" \
            grep -q "the ranks have stopped and are ending (another signal ends them at once)" stop.txt
    elif [ "${3:-}" = again ]; then
        echo "graceful_stop: $mode: the run ended before a second SIG$1: not tested this time"
    fi
}

if [ "$mode" = nosave ]; then
    # Signalled once the log shows a step-20 evaluation: inside training,
    # with no checkpoint to wait for.
    "$d/prog" "${flags[@]}" --eval-every 20 --log log.jsonl > stop.txt 2>&1 &
    run=$!
    wait_until $run grep -q '"event": "eval"' log.jsonl
    stop_run TERM $run
    check "says it kept nothing" \
        grep -Eq "^prog: stopped after step [0-9]+ \(epoch [0-9]+ of $epochs\) on SIGTERM: nothing saved \(no --save DIR\)$" stop.txt
    check "logs the stop, with no checkpoint" grep -Eq '^\{"event": "stop", "signal": "SIGTERM", "step": [0-9]+\}$' log.jsonl
    check "prints no command to resume" test -z "$(sed -n '/to resume/p' stop.txt)"
    check "stopped before the end (no export)" test ! -e out.safetensors
    [ $status = 0 ] || { echo "--- the stopped run:"; cat stop.txt; }
    exit $status
fi

"${launch[@]}" "$d/prog" "${flags[@]}" > ref.txt 2>&1 || { cat ref.txt; echo "graceful_stop: $mode: the reference failed"; exit 1; }
mv out.safetensors ref.safetensors

# The stopped run, which takes a SIGINT in mode nproc.
"${with_sigint[@]}" "${launch[@]}" "$d/prog" "${flags[@]}" --save ck --save-every 20 --log log.jsonl \
    > stop.txt 2>&1 &
run=$!
wait_until $run has_checkpoint
again=
case $mode in
single) signal=TERM target=$run ;;
hup) signal=HUP target=$run ;;
nproc) signal=INT target=$run again=again ;;
mpirun) signal=USR1 target=$run ;;
rank1) signal=USR1 target=$(rank_pid "$d/prog" 1) ;;
term1) signal=TERM target=$(rank_pid "$d/prog" 1) ;;
esac
stop_run $signal "$target" $again
check "says after which step it stopped, and the checkpoint" \
    grep -Eq "^prog: stopped after step [0-9]+ \(epoch [0-9]+ of $epochs\) on SIG[A-Z0-9]+: saved ck/checkpoint-" stop.txt
check "logs the stop" grep -q '"event": "stop", "signal": "SIG' log.jsonl
check "stopped before the end (no export yet)" test ! -e out.safetensors
resume=$(sed -n 's/^prog: to resume.*: //p' stop.txt)
check "prints the command that resumes it" test -n "$resume"
if [ -n "$resume" ]; then
    rc=0
    eval "${launch[*]} $resume" > resume.txt 2>&1 || rc=$?
    check "the printed command resumes it (status $rc)" [ "$rc" = 0 ]
    stopped_at=$(sed -n 's/^prog: stopped after step \([0-9]*\) .*/\1/p' stop.txt)
    check "resumed from the stop's checkpoint (step ${stopped_at:-?})" \
        grep -Eq "^resuming from ck/checkpoint-mnist-0*${stopped_at:-x}\.safetensors: step ${stopped_at:-x}$" resume.txt
    check "ends bit for bit as the run never stopped" cmp -s ref.safetensors out.safetensors
fi
[ $status = 0 ] || { echo "--- the stopped run:"; cat stop.txt; echo "--- the resumed run:"; cat resume.txt 2> /dev/null; }
exit $status
