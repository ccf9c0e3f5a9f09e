#!/usr/bin/env bash
# A run stopped at once, or a rank ended by a signal, must be said in
# README's words, with status 1:
#   tests/fault/signal_faults.sh nproc-kill|nproc-term|nproc-stuck|single-term|pair-int
# nproc-kill:  a CPU build's --nproc-per-node 2 (which runs mpirun); rank 1
#              is killed with SIGKILL: "rank 1 was killed by signal SIGKILL";
# nproc-term:  the same launcher gets SIGTERM and SIGINT together: the first
#              it takes asks the ranks to stop after their step, the second
#              ends them at once: "stopped by SIGTERM" (or SIGINT);
# nproc-stuck: the same launcher over an mpirun stuck starting its ranks,
#              as one is that cannot start them all: deaf to every signal,
#              and so is its rank, in a session of its own (Open MPI puts
#              each rank in a group of its own), holding the pipe of
#              mpirun's stderr open. SIGINT, SIGTERM, SIGINT, one at a
#              time: the third kills the rank, then mpirun, "stopped by
#              SIGINT", and nothing of the run is left. A process the
#              launcher's shell started before it (exec) is not mpirun's
#              and stays;
# single-term: one rank, no launcher, gets SIGTERM and SIGINT together:
#              "stopped at once by a second SIGINT while training at epoch"
#              (or SIGTERM);
# pair-int:    README's "a second Ctrl-C", to one rank: rank 0 of two,
#              under the user's mpirun, gets SIGINT, says it stops after its
#              step, and gets a second SIGINT: "stopped at once by a second
#              SIGINT" (with "rank 0:" before "error:").
# "Together": the process is stopped (SIGSTOP) while both are sent, and
# takes them when continued. Sent back to back to a running process, a step
# could end between them, and the run with it, when this shell is preempted
# there. Two of one kind would merge while pending, hence two kinds, taken
# in an order that is the kernel's, hence either name. pair-int sends one
# kind twice, the second once rank 0 has said it took the first: rank 1 is
# stopped meanwhile, so rank 0 cannot end its step (its collectives wait
# for rank 1) before the second comes; that is a hung run, where a second
# Ctrl-C is what a user reaches for. (tests/fault/graceful_stop.sh checks a
# single signal.)
# Prints the run's output and a verdict line with the exit status.
set -euo pipefail
mode=$1
. "$(cd "$(dirname "$0")" && pwd)/preamble.sh"  # ddpc, python, here, d, pid, rank_pid, mpirun2, with_sigint; cleans up on exit
# single-term's rank is to be stopped while training, not evaluating: its
# epoch (32,768 samples, several seconds on one thread) outlasts the wait
# before the signals. The other cases say nothing of the phase; pair-int
# takes the same data only to spend its time training.
case $mode in
single-*|pair-*) train=32768 ;;
*) train=1024 ;;
esac
"$python" "$here/small_data.py" "$d/data" "$train" 128
"$ddpc" examples/mnist.net --target cpu -o "$d/prog" >/dev/null
flags=(--data "$d/data" --batch-size 512 --epochs 1000)
export OMP_NUM_THREADS=1
case $mode in
nproc-kill|nproc-term) "$d/prog" "${flags[@]}" --nproc-per-node 2 --timeout 8 > "$d/out.txt" 2>&1 & ;;
nproc-stuck)
    mkdir "$d/bin"
    # its rank is named after the program, for the cleanup's pkill, and
    # keeps mpirun's stderr open, the launcher's pipe
    cat > "$d/bin/mpirun" << EOF
#!/usr/bin/env bash
trap '' TERM USR1 INT HUP
setsid bash -c 'trap "" TERM; echo \$\$ > "$d/rank.pid"; exec -a "$d/prog rank" sleep 1000' < /dev/null > /dev/null &
exec -a "$d/prog mpirun" sleep 1000  # deaf still: an ignored signal stays ignored across exec
EOF
    chmod +x "$d/bin/mpirun"
    # the launcher is exec'd by a shell that started a bystander first: its
    # child, not mpirun's (named for the cleanup too)
    PATH="$d/bin:$PATH" bash -c '(exec -a "$2 bystander" sleep 1000) & echo $! > "$1/bystander.pid"; shift; exec "$@"' \
        _ "$d" "$d/prog" "${flags[@]}" --nproc-per-node 2 > "$d/out.txt" 2>&1 & ;;
single-term) "${with_sigint[@]}" "$d/prog" "${flags[@]}" > "$d/out.txt" 2>&1 & ;;
pair-int)
    # --timeout: rank 0 waits for the stopped rank 1 no longer than this
    "${mpirun2[@]}" "$d/prog" "${flags[@]}" --timeout 30 > "$d/out.txt" 2>&1 & ;;
*) echo "signal_faults: unknown mode $mode"; exit 2 ;;
esac
pid=$!
# failed WHY: the signals could not be given as this script means to
failed() {
    cat "$d/out.txt"
    echo "signal_faults: $mode: $1"
    exit 1
}
victim=
for _ in $(seq 300); do
    case $mode in
    nproc-kill) victim=$(rank_pid "$d/prog" 1) ;;
    pair-int) victim=$(rank_pid "$d/prog" 0) ;;
    *) victim=$pid ;;
    esac
    [ "$mode" = nproc-stuck ] && [ -s "$d/rank.pid" ] && break
    [ -n "$victim" ] && grep -q "steps per epoch" "$d/out.txt" && break
    kill -0 "$pid" 2> /dev/null || break
    sleep 0.1
done
[ -n "$victim" ] || failed "the rank never started"
sleep 1
case $mode in
nproc-kill) kill -KILL "$victim" 2> /dev/null || failed "rank 1 ended before its SIGKILL" ;;
nproc-term|single-term)
    kill -STOP "$victim" 2> /dev/null || failed "the run ended before its signals"
    kill -TERM "$victim"
    kill -INT "$victim"
    kill -CONT "$victim" ;;
pair-int)
    peer=$(rank_pid "$d/prog" 1)
    [ -n "$peer" ] && kill -STOP "$peer" 2> /dev/null || failed "rank 1 ended before its SIGSTOP"
    kill -INT "$victim" 2> /dev/null || failed "rank 0 ended before its first SIGINT"
    took_first="rank 0: SIGINT: stopping after this step"
    # (well within --timeout, which would end rank 0 otherwise)
    for _ in $(seq 150); do
        grep -q "$took_first" "$d/out.txt" && break
        kill -0 "$victim" 2> /dev/null || failed "rank 0 ended after its first SIGINT, before the second"
        sleep 0.1
    done
    grep -q "$took_first" "$d/out.txt" ||
        failed "rank 0 never said that it took the first SIGINT"
    kill -INT "$victim" 2> /dev/null || failed "rank 0 ended before its second SIGINT" ;;
nproc-stuck)
    kill -INT "$pid"
    for _ in $(seq 50); do
        grep -q "the ranks stop after their step" "$d/out.txt" && break
        sleep 0.1
    done
    kill -TERM "$pid"
    sleep 0.5
    kill -INT "$pid" 2> /dev/null || failed "the launcher ended before the third signal"
    for _ in $(seq 100); do
        kill -0 "$pid" 2> /dev/null || break
        sleep 0.1
    done
    ! kill -0 "$pid" 2> /dev/null || failed "the launcher still runs 10 s after the third signal"
    # killed: gone, or a zombie (init reaps it, if it reaps, in a moment)
    running() { local s; s=$(sed 's/.*) //' "/proc/$1/stat" 2> /dev/null | cut -c1); [ -n "$s" ] && [ "$s" != Z ]; }
    for _ in $(seq 50); do
        running "$(cat "$d/rank.pid")" || break
        sleep 0.1
    done
    ! running "$(cat "$d/rank.pid")" || failed "the stuck mpirun's rank outlived the launcher by 5 s"
    kill -0 "$(cat "$d/bystander.pid")" 2> /dev/null || failed "the launcher killed a process not mpirun's" ;;
esac
status=0
wait "$pid" || status=$?
pid=
cat "$d/out.txt"
echo "signal_faults: $mode: exit status $status"
