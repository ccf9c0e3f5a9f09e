#!/usr/bin/env bash
# Under the user's mpirun, told MASTER_ADDR and MASTER_PORT, the ranks'
# whereabouts get a store (whereabouts.h) that only names a hung rank: one
# that cannot be had must cost a note, never the run, even with --timeout 4.
#   tests/fault/store_unusable.sh taken|rank0|rank1|ports|half
# taken: another program holds the port, listening and never answering:
#   rank 0 cannot serve there, and each rank notes it.
# rank0: rank 0 alone is given the variables (a node that mpirun -x did not
#   reach), on a free port: it serves, then lets the store go, and notes
#   that 1 of 2 ranks were given them.
# rank1: rank 1 alone is given them, with the other program's port, where a
#   rank that connected would wait in vain: rank 1 notes the same.
# ports: the ranks are given different ports: each notes it.
# half: rank 0 is given MASTER_ADDR alone, rank 1 MASTER_PORT alone: each
#   notes the half it lacks.
# A rank given no variables notes nothing. Both ranks must train to the end
# and the run exit 0. Prints the run's output and a verdict line; exits 1
# if the verdict fails.
set -euo pipefail
mode=$1
. "$(cd "$(dirname "$0")" && pwd)/preamble.sh"  # ddpc, python, here, d, pid, mpirun_user; cleans up on exit
unset MASTER_ADDR MASTER_PORT  # given below, rank by rank
"$python" "$here/small_data.py" "$d/data" 256 64
"$ddpc" examples/mnist.net --target cpu -o "$d/prog" > /dev/null
args=("$d/prog" --data "$d/data" --batch-size 16 --epochs 1 --timeout 4)
# the other program: a listener that accepts nobody (the cleanup kills it);
# and a port free now
"$python" -c 'import socket, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
f = socket.socket(); f.bind(("127.0.0.1", 0)); free = f.getsockname()[1]; f.close()
print(s.getsockname()[1], free, flush=True)
time.sleep(600)' > "$d/ports" &
pid=$!
for _ in $(seq 100); do
    [ -s "$d/ports" ] && break
    sleep 0.1
done
[ -s "$d/ports" ] || { echo "store_unusable: FAIL: the listener gave no port"; exit 1; }
read -r held free < "$d/ports"
# run ADDR0 PORT0 ADDR1 PORT1: two ranks under mpirun, rank R given
# MASTER_ADDR=ADDR_R where ADDR_R is not "-", and MASTER_PORT=PORT_R where
# PORT_R is not "-"
run() {
    local given0=() given1=()
    [ "$1" = - ] || given0+=(MASTER_ADDR="$1")
    [ "$2" = - ] || given0+=(MASTER_PORT="$2")
    [ "$3" = - ] || given1+=(MASTER_ADDR="$3")
    [ "$4" = - ] || given1+=(MASTER_PORT="$4")
    OMP_NUM_THREADS=1 "${mpirun_user[@]}" -np 1 env "${given0[@]}" "${args[@]}" : \
        -np 1 env "${given1[@]}" "${args[@]}" > "$d/out.txt" 2>&1
}
note="note: a hang will not name the rank at fault:"
status=0 silent=
case $mode in
taken)
    run 127.0.0.1 "$held" 127.0.0.1 "$held" || status=$?
    expected=("rank 0: $note cannot serve the store on 127.0.0.1:$held: port $held is in use"
              "rank 1: $note rank 0 cannot serve the store on port $held") ;;
rank0)
    run 127.0.0.1 "$free" - - || status=$?
    expected=("rank 0: $note 1 of 2 ranks were given MASTER_ADDR and MASTER_PORT") silent=1 ;;
rank1)
    run - - 127.0.0.1 "$held" || status=$?
    expected=("rank 1: $note 1 of 2 ranks were given MASTER_ADDR and MASTER_PORT") silent=0 ;;
ports)
    run 127.0.0.1 "$free" 127.0.0.1 "$held" || status=$?
    expected=("rank 0: $note the ranks were given different MASTER_PORTs"
              "rank 1: $note the ranks were given different MASTER_PORTs") ;;
half)
    run 127.0.0.1 - - "$free" || status=$?
    expected=("rank 0: $note MASTER_ADDR=127.0.0.1 is set but MASTER_PORT is not"
              "rank 1: $note MASTER_PORT=$free is set but MASTER_ADDR is not") ;;
*) echo "store_unusable: unknown mode $mode"; exit 2 ;;
esac
cat "$d/out.txt"
ok=1
[ "$status" = 0 ] || ok=0
for line in "${expected[@]}"; do
    grep -qF "$line" "$d/out.txt" || { echo "store_unusable: missing: $line"; ok=0; }
done
if [ -n "$silent" ] && grep -q "rank $silent: note" "$d/out.txt"; then
    echo "store_unusable: rank $silent, given no address, noted something"
    ok=0
fi
grep -q "^done  8 steps" "$d/out.txt" || ok=0  # trained to the end
if [ $ok = 1 ]; then
    echo "store_unusable: $mode: trained to the end, status 0, the note said: ok"
else
    echo "store_unusable: $mode: FAIL (status $status)"
    exit 1
fi
