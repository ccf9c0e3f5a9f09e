#!/usr/bin/env bash
# --eval-only on several ranks (CPU):
#   tests/distributed/eval_only.sh
# mlp.net trained 20 steps on Fashion-MNIST, its weights exported, then
# evaluated with --eval-only on 1, 2 and 3 ranks. 10,000 test samples do not
# divide by 3: DistributedSampler pads the ranks' shares with samples seen
# twice, which the matrix must leave out. Every run must count 10,000
# samples and log the same confusion matrix and accuracy as one rank, and the
# accuracy must be the training run's own at its end. One line
# per run; "DIFFERENT" or a non-zero status is a failure.
set -euo pipefail
here=$(dirname "$0")
. "$here/ranks.sh"  # run_on_ranks
ddpc=${DDPC:-build/ddpc}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
"$ddpc" "$here/../../examples/mlp.net" --target cpu -o "$d/prog"
"$d/prog" --max-steps 20 --log "$d/train.jsonl" --export "$d/w.safetensors" --quiet
trained=$(grep -E '"event": "(eval|epoch)"' "$d/train.jsonl" | grep -o '"test_acc": [0-9.]*' | tail -1)
status=0
for ranks in 1 2 3; do
    run_on_ranks "$ranks" "$d/prog" --eval-only --init "$d/w.safetensors" --log "$d/eval$ranks.jsonl" --quiet
    record=$(grep '"event": "eval_only"' "$d/eval$ranks.jsonl")
    matrix=$(echo "$record" | grep -o '"confusion": .*')
    acc=$(echo "$record" | grep -o '"test_acc": [0-9.]*')
    samples=$(echo "$record" | grep -o '"samples": [0-9]*')
    [ "$ranks" = 1 ] && { one_matrix=$matrix; one_acc=$acc; }
    verdict=same
    if [ "$samples" != '"samples": 10000' ] || [ "$matrix" != "$one_matrix" ] || [ "$acc" != "$one_acc" ] ||
        [ "$acc" != "$trained" ]; then
        verdict=DIFFERENT
        status=1
    fi
    echo "$ranks rank(s): $samples, $acc (training's last: $trained), matrix $verdict"
done
exit $status
