#!/usr/bin/env bash
# --eval-only and --predict on compiled nets (CPU):
#   tests/distributed/eval_only.sh
# For mlp.net, and mlp.net ending in log_softmax and nll (the scores the loss
# reads are then a log_softmax's): 20 steps on Fashion-MNIST, the weights
# exported, then
#  - --eval-only on 1, 2 and 3 ranks. 10,000 test samples do not divide by
#    3: DistributedSampler pads the ranks' shares with samples seen twice,
#    which evaluation must leave out. Every run must count 10,000 samples
#    and log the same confusion matrix, accuracy and loss as one rank, and
#    the accuracy and loss must be the training run's own at its end;
#  - --predict on the test images: the first class of each, against its
#    label, must give that accuracy again.
# Then mlp.net saved by 2 ranks (--save) is evaluated from its checkpoint on
# 1 rank (--eval-only --resume), another world size, with training's
# accuracy, and --export writes the checkpoint's weights; 2 ranks asked to
# stop an evaluation stop together, after the batch they agree on; and
# --predict under mpirun is refused.
# One line per check; "DIFFERENT" or a non-zero status is a failure.
set -euo pipefail
here=$(dirname "$0")
. "$here/ranks.sh"  # run_on_ranks
ddpc=${DDPC:-build/ddpc}
data=/usr/share/datasets/fashion-mnist
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
status=0
say() { # say WHAT VERDICT: one line, and the failure counted
    echo "$1: $2"
    [ "$2" = same ] || status=1
}
last_acc() { grep -E '"event": "(eval|epoch|eval_only)"' "$1" | grep -o '"test_acc": [0-9.]*' | tail -1; }
last_loss() { grep -E '"event": "(eval|epoch|eval_only)"' "$1" | grep -o '"test_loss": [0-9.e+-]*' | tail -1; }

# The share of the test images whose first predicted class is their label.
predicted_acc() { # predicted_acc PREDICTIONS.jsonl
    /usr/bin/python3 - "$1" "$data/t10k-labels-idx1-ubyte.gz" << 'PY'
import gzip, json, sys
labels = gzip.open(sys.argv[2]).read()[8:]
lines = [json.loads(l) for l in open(sys.argv[1])]
assert [l["input"] for l in lines] == list(range(len(labels)))
right = sum(l["classes"][0] == labels[l["input"]] for l in lines)
print('"test_acc": %s' % repr(right / len(labels)).rstrip("0").rstrip("."))
PY
}

cp "$here/../../examples/mlp.net" "$d/mlp.net"
sed 's/^loss cross_entropy$/log_softmax\nloss nll/' "$d/mlp.net" > "$d/mlp_nll.net"
grep -q '^loss nll' "$d/mlp_nll.net"
for net in mlp mlp_nll; do
    "$ddpc" "$d/$net.net" --target cpu -o "$d/$net"
    "$d/$net" --max-steps 20 --log "$d/$net.jsonl" --export "$d/$net.safetensors" --quiet
    trained=$(last_acc "$d/$net.jsonl") trained_loss=$(last_loss "$d/$net.jsonl")
    for ranks in 1 2 3; do
        run_on_ranks "$ranks" "$d/$net" --eval-only --init "$d/$net.safetensors" --log "$d/eval$ranks.jsonl" --quiet
        record=$(grep '"event": "eval_only"' "$d/eval$ranks.jsonl")
        matrix=$(echo "$record" | grep -o '"confusion": .*')
        acc=$(echo "$record" | grep -o '"test_acc": [0-9.]*')
        loss=$(last_loss "$d/eval$ranks.jsonl")
        samples=$(echo "$record" | grep -o '"samples": [0-9]*')
        [ "$ranks" = 1 ] && one_matrix=$matrix
        verdict=same
        [ "$samples" = '"samples": 10000' ] && [ "$matrix" = "$one_matrix" ] && [ "$acc" = "$trained" ] &&
            [ -n "$loss" ] && [ "$loss" = "$trained_loss" ] || verdict=DIFFERENT
        say "$net --eval-only on $ranks rank(s): $samples, $acc, $loss (training's: $trained, $trained_loss), matrix" \
            $verdict
    done
    gunzip -c "$data/t10k-images-idx3-ubyte.gz" > "$d/images"
    "$d/$net" --predict "$d/images" --init "$d/$net.safetensors" --json --top 3 > "$d/predictions.jsonl"
    acc=$(predicted_acc "$d/predictions.jsonl")
    verdict=same
    [ "$acc" = "$trained" ] || verdict=DIFFERENT
    say "$net --predict: first classes right $acc (training's: $trained)" $verdict
done

run_on_ranks 2 "$d/mlp" --max-steps 20 --save "$d/saved" --log "$d/saved.jsonl" --quiet
"$d/mlp" --eval-only --resume --save "$d/saved" --log "$d/resumed.jsonl" --export "$d/resumed.safetensors" --quiet
verdict=same
[ "$(last_acc "$d/resumed.jsonl")" = "$(last_acc "$d/saved.jsonl")" ] && [ -s "$d/resumed.safetensors" ] ||
    verdict=DIFFERENT
say "a 2-rank checkpoint evaluated on 1 rank: $(last_acc "$d/resumed.jsonl") (training's: $(last_acc "$d/saved.jsonl")), exported" $verdict

# A stop asked of both ranks as their second batch of 128 begins: on MPI a
# barrier after each batch carries the votes, agreed at the next, so both
# end after their third batch, 768 samples in all, with a stop's status
export DDP_TEST_STOP_AFTER=2
rc=0
run_on_ranks 2 "$d/mlp" --eval-only --init "$d/mlp.safetensors" > "$d/out" 2>&1 || rc=$?
unset DDP_TEST_STOP_AFTER
verdict=same
[ "$rc" = 75 ] && grep -q "stopped the evaluation on SIGUSR1 after 768 of the 10000 test samples" "$d/out" ||
    verdict=DIFFERENT
say "--eval-only on 2 ranks stopped as their second batch began: status $rc, ended after their third" $verdict
# the same under --nproc-per-node, of a checkpoint: the launcher does not
# offer to resume what would start again
export DDP_TEST_STOP_AFTER=2
rc=0
OMP_NUM_THREADS=1 "$d/mlp" --eval-only --resume --save "$d/saved" --nproc-per-node 2 > "$d/out" 2>&1 || rc=$?
unset DDP_TEST_STOP_AFTER
verdict=same
[ "$rc" = 75 ] && grep -q "stopped the evaluation on SIGUSR1 after 768 of" "$d/out" && ! grep -q "to resume" "$d/out" ||
    verdict=DIFFERENT
say "--eval-only under --nproc-per-node stopped: status $rc, no advice to resume" $verdict

# --predict under mpirun: refused on every rank, status 2
rc=0
run_on_ranks 2 "$d/mlp" --predict "$d/images" --init "$d/mlp.safetensors" > "$d/out" 2>&1 || rc=$?
verdict=same
[ "$rc" = 2 ] && grep -q -- "--predict runs on one rank: start it without mpirun" "$d/out" || verdict=DIFFERENT
say "--predict on 2 ranks refused (status $rc)" $verdict
exit $status
