#!/usr/bin/env bash
# Checkpoints are never worse than what they replace, with real nets:
#   tests/fault/checkpoint_guard.sh
# Prints one "guard: NAME ok" or "guard: NAME FAILED" line per case, and the
# output of a failed case; exits 1 if any failed.
#  nan      the issue's commands: a run resumed with --lr 1e30 and
#           --save-every 1 goes NaN; it must fail (exit 1) saying so, and
#           leave only finite checkpoints, from which --resume works (the
#           weights are exported, which refuses NaN)
#  shared   mnist and mlp in one --save directory: each resumes its own
#  forgot   a --save directory holding the net's checkpoints, no --resume:
#           exit 2 on one rank and on two (rank 1 told by rank 0), nothing
#           written
#  nan2     the NaN run on two ranks: both stop at the same save, each saying so
set -uo pipefail
ddpc=${DDPC:-build/ddpc} python=${PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
"$python" "$here/small_data.py" "$d/data" 256 64 >/dev/null
"$ddpc" examples/mnist.net --target cpu -o "$d/m" >/dev/null || exit 1
"$ddpc" examples/mlp.net --target cpu -o "$d/mlp" >/dev/null || exit 1
export OMP_NUM_THREADS=1
failed=0
verdict() { # NAME STATUS LOG
    if [ "$2" -eq 0 ]; then echo "guard: $1 ok"; else echo "guard: $1 FAILED"; cat "$3"; failed=1; fi
}
mpi() { timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 "$@"; }

cd "$d"
{
    ./m --data data --max-steps 3 --save ck --save-every 1 &&
    { ./m --data data --max-steps 40 --save ck --save-every 1 --resume --lr 1e30; test $? -eq 1; } &&
    ./m --data data --max-steps 3 --save ck --resume --export w.safetensors
} > nan.txt 2>&1
ok=$?
grep -q "m: error: not saving the checkpoint of step .*training has diverged; the newest good one is ck/" nan.txt &&
    grep -q "resuming from ck/" nan.txt || ok=1
verdict nan "$ok" nan.txt

{
    ./m --data data --max-steps 3 --save sh --save-every 1 &&
    ./mlp --data data --max-steps 5 --save sh --save-every 1 &&
    ./m --data data --max-steps 4 --save sh --resume &&
    ./mlp --data data --max-steps 6 --save sh --resume
} > shared.txt 2>&1
ok=$?
grep -q "resuming from sh/checkpoint-.*000000003.safetensors: step 3" shared.txt &&
    grep -q "resuming from sh/checkpoint-.*000000005.safetensors: step 5" shared.txt || ok=1
verdict shared "$ok" shared.txt

{
    ./m --data data --max-steps 2 --save fg --quiet &&
    { ./m --data data --max-steps 4 --save fg; test $? -eq 2; } &&
    if command -v mpirun >/dev/null; then
        mpi ./m --data data --max-steps 4 --save fg --timeout 20; rc=$?
        echo "two ranks: exit $rc"; test "$rc" -eq 2
    fi &&
    test "$(ls fg/*.safetensors | wc -l)" -eq 1
} > forgot.txt 2>&1
ok=$?
grep -q "m: error: --save fg already holds checkpoints of net 'mnist' (the newest: fg/checkpoint-" forgot.txt || ok=1
if command -v mpirun >/dev/null; then
    grep -q "m: rank 0: error: --save fg already holds checkpoints" forgot.txt &&
        grep -q "m: rank 1: error: rank 0 refused the --save directory (it says why)" forgot.txt || ok=1
fi
verdict forgot "$ok" forgot.txt

if command -v mpirun >/dev/null; then
    {
        mpi ./m --data data --batch-size 16 --max-steps 3 --save n2 --save-every 1 &&
        mpi ./m --data data --batch-size 16 --max-steps 40 --save n2 --save-every 1 --resume --lr 1e30 --timeout 20
        rc=$?; echo "two ranks: exit $rc"; test "$rc" -eq 1
    } > nan2.txt 2>&1
    ok=$?
    grep -q "m: rank 0: error: not saving the checkpoint of step " nan2.txt &&
        grep -q "m: rank 1: error: not saving the checkpoint of step " nan2.txt || ok=1
    verdict nan2 "$ok" nan2.txt
fi
exit $failed
