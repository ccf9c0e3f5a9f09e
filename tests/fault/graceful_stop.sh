#!/usr/bin/env bash
# A stop asked for, then the command the run prints, end bit for bit as a run
# never stopped:
#   tests/fault/graceful_stop.sh single|nproc|mpirun|rank1|term1
# single: one process gets SIGTERM (Slurm's time limit, Kubernetes);
# nproc:  --nproc-per-node 2 (its ranks under mpirun) gets SIGINT (Ctrl-C);
# mpirun: the user's own mpirun -np 2 gets SIGUSR1 (Slurm's --signal=USR1@90),
#         which it forwards to the ranks;
# rank1:  under mpirun -np 2, rank 1 alone gets SIGUSR1: the ranks must agree
#         (through their collectives) to stop after the same step;
# term1:  under --nproc-per-node 2, rank 1 alone gets SIGTERM from this
#         script, as from Slurm's time limit: not from its launcher (its
#         parent), so it asks, and does not stop the rank at once.
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
single) launch=() ;;
nproc|term1) launch=(); flags+=(--nproc-per-node 2) ;;
mpirun|rank1) launch=("${mpirun2[@]}") ;;
*) echo "graceful_stop: unknown mode $mode"; exit 2 ;;
esac
export OMP_NUM_THREADS=1
"${launch[@]}" "$d/prog" "${flags[@]}" > ref.txt 2>&1 || { cat ref.txt; echo "graceful_stop: $mode: the reference failed"; exit 1; }
mv out.safetensors ref.safetensors

# The stopped run, which takes a SIGINT in mode nproc.
"${with_sigint[@]}" "${launch[@]}" "$d/prog" "${flags[@]}" --save ck --save-every 20 --log log.jsonl \
    > stop.txt 2>&1 &
run=$!
until=$((SECONDS + 120))
while ! ls ck/*.safetensors > /dev/null 2>&1 && [ $SECONDS -lt $until ] && kill -0 $run 2> /dev/null; do
    sleep 0.05
done
case $mode in
single) signal=TERM target=$run ;;
nproc) signal=INT target=$run ;;
mpirun) signal=USR1 target=$run ;;
rank1) signal=USR1 target=$(rank_pid "$d/prog" 1) ;;
term1) signal=TERM target=$(rank_pid "$d/prog" 1) ;;
esac
[ -n "$target" ] && kill -$signal "$target" 2> /dev/null ||
    { cat stop.txt; echo "graceful_stop: $mode: the run ended before its SIG$signal: FAILED"; exit 1; }
rc=0
wait $run || rc=$?
status=0
check() { # check WHAT COND...: a verdict line
    local what=$1
    shift
    if "$@"; then echo "graceful_stop: $mode: $what: ok"; else echo "graceful_stop: $mode: $what: FAILED"; status=1; fi
}
check "exit status 75 (got $rc)" [ "$rc" = 75 ]
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
