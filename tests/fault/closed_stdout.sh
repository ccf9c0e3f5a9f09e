#!/usr/bin/env bash
# A standard output whose reader has ended (`./train | head -1`) does not end
# the run: tests/fault/closed_stdout.sh
#  - one process piped into head -1 trains to its end (status 0), says once
#    on stderr that its reports are lost, saves its last checkpoint, keeps
#    every epoch in --log, and exports the very bytes of a run whose output
#    went to /dev/null (cmp);
#  - under --nproc-per-node 2, the same: status 0, last checkpoint saved;
#  - --predict and --eval-only, which have nothing to save, end as any filter
#    does in a pipe whose reader is gone (closed before they start, so that
#    their short output cannot race it): killed by SIGPIPE (status 141),
#    saying nothing; --eval-only's
#    result sent to a full disk (/dev/full) is a failure, said, status 1, as
#    is --help's.
# Prints a verdict line per check; exits 1 if any failed.
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/preamble.sh"  # ddpc, python, here, d; cleans up on exit
"$python" "$here/small_data.py" "$d/data" 512 64
"$ddpc" examples/mnist.net --target cpu -o "$d/prog" > /dev/null
cd "$d"
export OMP_NUM_THREADS=1
epochs=3
flags=(--data data --batch-size 32 --epochs $epochs --seed 5)
last_step=$((epochs * 512 / 32))
status=0
check() { # check WHAT COND...: a verdict line
    local what=$1
    shift
    if "$@"; then echo "closed_stdout: $what: ok"; else echo "closed_stdout: $what: FAILED"; status=1; fi
}
last_checkpoint() { [ -e "$1/checkpoint-mnist-$(printf %09d $last_step).safetensors" ]; }
# into_closed_pipe CMD...: runs CMD with its standard output a pipe whose
# reader is gone before it starts (where head -1 would race a short
# output); its status as the shell gives it (128 + a signal's number)
into_closed_pipe() {
    "$python" -c 'import os, subprocess, sys
r, w = os.pipe()
os.close(r)
status = subprocess.call(sys.argv[1:], stdout=w)  # SIGPIPE as the shell starts programs
sys.exit(128 - status if status < 0 else status)' "$@"
}

./prog "${flags[@]}" --export reference.safetensors > /dev/null

# head -1 takes the first line (the run's description) and ends: every
# report after it meets a closed pipe
set +e
./prog "${flags[@]}" --save ck --log log.jsonl --export out.safetensors 2> err.txt | head -1 > first.txt
rc=${PIPESTATUS[0]}
set -e
check "one process: trained to its end, status 0 (got $rc)" [ "$rc" = 0 ]
check "one process: head read the description" grep -q '^mnist: 512 train' first.txt
check "one process: said once that the reports are lost" \
    [ "$(grep -c 'warning: cannot write the reports to standard output (Broken pipe): the run goes on' err.txt)" = 1 ]
check "one process: saved its last checkpoint (step $last_step)" last_checkpoint ck
check "one process: --log kept every epoch" [ "$(grep -c '"event": "epoch"' log.jsonl)" = $epochs ]
check "one process: the weights of a run never piped (cmp)" cmp -s out.safetensors reference.safetensors
[ $status = 0 ] || cat err.txt

set +e
./prog "${flags[@]}" --save ck2 --nproc-per-node 2 2> err2.txt | head -1 > /dev/null
rc=${PIPESTATUS[0]}
set -e
check "--nproc-per-node 2: trained to its end, status 0 (got $rc)" [ "$rc" = 0 ]
check "--nproc-per-node 2: saved its last checkpoint (step $((last_step / 2)))" \
    [ -e "ck2/checkpoint-mnist-$(printf %09d $((last_step / 2))).safetensors" ]
[ $status = 0 ] || cat err2.txt

set +e
into_closed_pipe ./prog --init out.safetensors --predict data/t10k-images-idx3-ubyte 2> err3.txt
rc=$?
set -e
check "--predict: ended by SIGPIPE as a filter (status 141, got $rc)" [ "$rc" = 141 ]
check "--predict: said nothing" [ ! -s err3.txt ]

# --eval-only's printed result is its product: a reader gone ends it as a
# filter; a full disk is a failure, said
set +e
into_closed_pipe ./prog --data data --eval-only --init out.safetensors 2> err4.txt
rc=$?
./prog --data data --eval-only --init out.safetensors > /dev/full 2> err5.txt
rc_full=$?
set -e
check "--eval-only: ended by SIGPIPE as a filter (status 141, got $rc)" [ "$rc" = 141 ]
check "--eval-only: said nothing" [ ! -s err4.txt ]
check "--eval-only to a full disk: status 1 (got $rc_full)" [ "$rc_full" = 1 ]
check "--eval-only to a full disk: said" \
    grep -q "error: cannot write the evaluation's results to standard output (No space left on device)" err5.txt
says_run_goes_on() { grep -q "the run goes on" err5.txt; }
check "--eval-only to a full disk: no word of a run going on" eval '! says_run_goes_on'
set +e
./prog --help > /dev/full 2> err6.txt
rc=$?
set -e
help_failed() { [ "$rc" = 1 ] && grep -q "error: cannot write the help to standard output (No space left" err6.txt; }
check "--help to a full disk: status 1 (got $rc), said" help_failed
exit $status
