#!/usr/bin/env bash
# A rank that stops or dies is named by the others, with where it was:
#   tests/fault/hang_named.sh stop|kill LAUNCH RANKS VICTIM
# LAUNCH: nproc (--nproc-per-node RANKS, which gives the ranks a store for
# their whereabouts) or mpirun (the user's own mpirun -np RANKS, told
# MASTER_ADDR and MASTER_PORT). Once training runs, rank VICTIM gets SIGSTOP
# (stop) or SIGKILL (kill).
# stop: every other rank's collective times out (--timeout 4), and each must
#   say "rank VICTIM was last seen N s ago in PLACE (step S), and has been
#   silent since" (or, when mpirun's SIGCONT woke the victim to end it
#   before this rank read, "rank VICTIM is in PLACE (step S), for N s now"),
#   N at least 3 s, and name no rank but VICTIM; when VICTIM is 0, which
#   serves the store, each must say that rank 0 does not answer. Under the
#   user's mpirun the first rank whose timeout ends it ends the job: mpirun
#   stops the others at once and wakes the victim (SIGCONT) to end it. On a
#   busy machine, where the ranks began their waits tens of milliseconds
#   apart, another rank then says the launcher ended it ("stopping: the
#   launcher ended this rank"), or, reading the ranks' whereabouts after the
#   victim woke and moved on, that every other rank is where it is (taken
#   only where the victim itself printed a line: it woke): reasons too,
#   naming no rank. There at least one rank must name VICTIM, and no error
#   line of a rank but the victim any other rank.
# kill: the launcher (ours, or mpirun) ends the run at once, naming VICTIM.
# Prints the run's output and a verdict line; exits 1 if the verdict fails.
set -euo pipefail
what=$1 launch=$2 ranks=$3 victim=$4
. "$(cd "$(dirname "$0")" && pwd)/preamble.sh"  # ddpc, python, here, d, pid, rank_pid, mpirun_user; cleans up on exit
"$python" "$here/small_data.py" "$d/data" 4096 64
"$ddpc" examples/mnist.net --target cpu -o "$d/prog" > /dev/null
flags=(--data "$d/data" --batch-size 16 --epochs 100 --timeout 4)
case $launch in
nproc) OMP_NUM_THREADS=1 "$d/prog" "${flags[@]}" --nproc-per-node "$ranks" > "$d/out.txt" 2>&1 & ;;
mpirun)
    port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    OMP_NUM_THREADS=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "${mpirun_user[@]}" -np "$ranks" "$d/prog" "${flags[@]}" \
        > "$d/out.txt" 2>&1 & ;;
*) echo "hang_named: unknown launch $launch"; exit 2 ;;
esac
pid=$!
target=
for _ in $(seq 300); do
    target=$(rank_pid "$d/prog" "$victim")
    [ -n "$target" ] && grep -q "steps per epoch" "$d/out.txt" && break
    sleep 0.1
done
[ -n "$target" ] || { cat "$d/out.txt"; echo "hang_named: rank $victim never started"; exit 1; }
sleep 1
started=$SECONDS
if [ "$what" = stop ]; then kill -STOP "$target"; else kill -KILL "$target"; fi
rc=0
wait "$pid" || rc=$?
pid=
took=$((SECONDS - started))
cat "$d/out.txt"
ok=1
[ "$rc" != 0 ] || ok=0
[ "$took" -le 30 ] || ok=0
if [ "$what" = kill ]; then
    grep -Eq "rank $victim (was killed by signal SIGKILL|with PID [0-9]+ on node .* exited on signal 9)" "$d/out.txt" || ok=0
else
    named=0
    for r in $(seq 0 $((ranks - 1))); do
        [ "$r" = "$victim" ] && continue
        line=$(grep "^prog: rank $r: error: .* did not finish within 4 s" "$d/out.txt" || true)
        if [ "$launch" = mpirun ]; then # mpirun ended the job first (above)
            if [ -z "$line" ] && grep -q "^prog: rank $r: stopping: the launcher ended this rank" "$d/out.txt"; then
                continue
            fi
            if echo "$line" | grep -q ": every other rank is in " && grep -q "^prog: rank $victim: " "$d/out.txt"; then
                continue
            fi
        fi
        named=$((named + 1))
        if [ "$victim" = 0 ]; then
            echo "$line" | grep -q "the store that rank 0 serves, which holds where the ranks were, did not answer" || ok=0
            continue
        fi
        # silent since; or, read after mpirun's SIGCONT (its way of ending a
        # job) woke the victim, elsewhere for as long; in a place a rank
        # notes: a phase, a layer of backward, a bucket's all-reduce
        place="(start-up|the data phase|forward|backward|backward, past [a-z0-9_]+|the gradient all-reduce|the gradient all-reduce, bucket [0-9]+|the optimizer step|between steps|evaluation|a checkpoint)"
        age=$(echo "$line" | sed -E -n -e "s/.*: rank $victim was last seen ([0-9.]*) s ago in $place \(step [0-9]*\), and has been silent since.*/\1/p" \
            -e "s/.*: rank $victim is in $place \(step [0-9]*\), for ([0-9.]*) s now.*/\2/p")
        [ -n "$age" ] && [ "${age%.*}" -ge 3 ] || ok=0
    done
    [ "$named" -ge 1 ] || ok=0
    # no error line of another rank (the timeouts above among them) names a rank but the victim
    others=$(grep -E "^prog: rank [0-9]+: error:" "$d/out.txt" | grep -v "^prog: rank $victim: " || true)
    [ -z "$(echo "$others" | grep -Eo "rank [0-9]+ (was|is) " | grep -v "rank $victim ")" ] || ok=0
fi
verdict=$([ $ok = 1 ] && echo "named" || echo "NOT NAMED")
echo "hang_named: $what rank $victim of $ranks under $launch: status $rc after ${took} s: $verdict"
[ $ok = 1 ]
