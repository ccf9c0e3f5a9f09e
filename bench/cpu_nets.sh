#!/usr/bin/env bash
# Training speed on the CPU, net by net, against PyTorch in the same run:
#   [ROUNDS=N] [NETS="a.net b.net"] bash bench/cpu_nets.sh
# For each net (every example and bench/wide.net, each at its own batch, a
# global one split between the ranks), two settings:
#   1 process   ddpc with one OpenMP thread per core; PyTorch with as many
#               threads (torch.set_num_threads);
#   2 ranks     ddpc under mpirun, 1 thread each; PyTorch DDP (gloo), 2
#               processes of 1 thread (bench/torch_train.py).
# The peers: Debian's PyTorch (/usr/bin/python3) and the newest from PyPI,
# which `make bench-deps` puts in /opt/ddpc-bench (said, and left out, when
# missing). PyTorch trains the module of `ddpc --emit torch` on the training
# set preloaded as tensors, 5 warm-up steps untimed, and without the net's
# data { } block, which ddpc applies on its loader thread (this favours
# PyTorch: bench/torch_train.py); ddpc's figure likewise leaves out its
# first 5 steps: it runs 5 more, --log-every 5, and takes each rank's
# samples/s over the windows after the first (the log's rank_times: a step's
# data, forward, backward, all-reduce and optimizer time, what PyTorch's
# timed loop holds), the ranks' added up. Every
# run of a round follows the others on the same machine, rounds (2) are
# interleaved, ddpc runs before the peers in odd rounds and after them in
# even rounds (so that neither side always gets the machine as the other
# leaves it: warmer caches and clocks, or a hotter chip), and every round's
# figures are printed; the table gives the
# medians and the ratio against the faster peer (goal: at least 1.0). Each
# run checks that it exited 0 (ddpc's last check, that all ranks hold the
# same weights, comes after its last report) and ended with a finite loss;
# a run that fails prints FAILED in its round's line with the end of its
# output, is left out of the medians, makes its net's row FAILED and is
# named after the table. Never fails the build.
set -u
cd "$(dirname "$0")/.." || exit 0
rounds=${ROUNDS:-2}
nets=${NETS:-$(ls examples/*.net) bench/wide.net}
cores=$(nproc)
debian=/usr/bin/python3 newest=/opt/ddpc-bench/bin/python
peers="debian"
if [ -x "$newest" ] && "$newest" -c 'import torch' 2> /dev/null; then
    peers="debian newest"
else
    echo "cpu_nets: the newest PyTorch is missing (make bench-deps installs it): comparing with Debian's only"
fi
version() { "$1" -c 'import torch; print(torch.__version__.split("+")[0])' 2> /dev/null; }
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
# The whole training set, and 64 test images: the evaluation at the end of a
# run takes no figure, only time. Nets of 3x32x32 images (cifar10.net) train
# on 10,000 random images in CIFAR-10's binary format instead: CIFAR-10 is not
# on our machines, and the pixels' values change no timing.
mkdir "$d/data" && /usr/bin/python3 tests/fault/small_data.py "$d/data" 60000 64 ||
    { echo "cpu_nets: FAILED: no Fashion-MNIST"; exit 0; }
data_for() { grep -q '^input[[:space:]]\+3x32x32' "$1" && echo "$d/cifar" || echo "$d/data"; }
for net in $nets; do
    [ "$(data_for "$net")" = "$d/cifar" ] && [ ! -d "$d/cifar" ] || continue
    mkdir -p "$d/cifar/cifar-10-batches-bin" && /usr/bin/python3 - "$d/cifar/cifar-10-batches-bin" << 'EOF' ||
import random
import sys
random.seed(1)
for name, count in (("data_batch_1.bin", 10000), ("test_batch.bin", 64)):
    with open(f"{sys.argv[1]}/{name}", "wb") as f:
        for _ in range(count):  # a record: the label byte, then 3072 pixel bytes
            f.write(bytes([random.randrange(10)]) + random.randbytes(3072))
EOF
        { echo "cpu_nets: FAILED: no CIFAR-like data"; exit 0; }
done

# steps of each net, timed after 5 of warm-up: about 3 to 20 s of training a
# run on a 2-core machine (cifar10.net's 5 steps of 512 take 10 to 15 s);
# multiples of WARMUP, so that every timed window of ddpc's log is whole
WARMUP=5
steps_for() {
    case $(basename "$1" .net) in
    mnist) echo 200 ;; mlp) echo 600 ;; resnet | fashion_resnet) echo 60 ;; cifar10) echo 5 ;; *) echo 20 ;;
    esac
}
field() { grep -o "\"$2\": *[-0-9.e]*" "$1" | tail -1 | sed 's/.*: *//'; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
finite() { awk -v x="$1" 'BEGIN { exit !(x == x + 0 && x < 1e30) }'; }

# The job's samples/s in ddpc's LOG past its first WARMUP steps.
steady_rate() { awk -v warm="$WARMUP" -f bench/steady_rate.awk "$1"; }
# A run's figure, or FAILED and why (its exit status, loss and rate) in
# $d/why, its output in $d/out.
ddpc_run() { # ddpc_run NAME SETTING STEPS DATA: prints samples/s, or fails
    local prog="$d/$1" log="$d/$1.jsonl" steps=$(($3 + WARMUP)) data=$4 rc loss rate
    rm -f "$log"
    if [ "$2" = 1p ]; then
        OMP_NUM_THREADS=$cores "$prog" --data "$data" --max-steps "$steps" --log-every "$WARMUP" --log "$log" \
            --quiet > "$d/out" 2>&1
    else
        OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x OMP_NUM_THREADS \
            "$prog" --data "$data" --max-steps "$steps" --log-every "$WARMUP" --log "$log" --quiet > "$d/out" 2>&1
    fi
    rc=$? loss=$(field "$log" loss) rate=$(steady_rate "$log")
    [ "$rc" = 0 ] && finite "$loss" && [ -n "$rate" ] && echo "$rate" && return 0
    echo "exit status $rc, loss '$loss', rate '$rate'" > "$d/why"
    return 1
}

torch_run() { # torch_run PYTHON NAME SETTING STEPS BATCH DATA: prints samples/s, or fails
    local line rc loss rate
    if [ "$3" = 1p ]; then
        "$1" bench/torch_train.py --module "$d/$2.py" --threads "$cores" --steps "$4" --batch "$5" --data "$6" > "$d/out" 2>&1
    else
        "$1" bench/torch_train.py --module "$d/$2.py" --ranks 2 --threads 1 --steps "$4" --batch "$5" --data "$6" > "$d/out" 2>&1
    fi
    rc=$? line=$(grep '^torch:' "$d/out")
    loss=$(echo "$line" | sed -n 's/.*final_loss \([-0-9.naif]*\).*/\1/p')
    rate=$(echo "$line" | sed -n 's/.*samples\/s \([0-9.]*\).*/\1/p')
    [ "$rc" = 0 ] && finite "$loss" && [ -n "$rate" ] && echo "$rate" && return 0
    echo "exit status $rc, final loss '$loss', rate '$rate'" > "$d/why"
    return 1
}

# After a round's line: each run of it that failed, why, and the end of its output.
failed="" why=""
failed_run() { # failed_run WHAT: a run failed; its why and output are in $d
    failed="$failed; $1"
    why="${why}cpu_nets: FAILED: $1: $(cat "$d/why")
$(tail -n 20 "$d/out" | sed 's/^/    /')
"
}

# A round's ddpc run, and its peers' runs, of $name at $setting (the loop's).
ours_run() {
    ours=$(ddpc_run "$name" "$setting" "$steps" "$data") || failed_run "round $round $name $setting, ddpc"
    echo "${ours:-FAILED}" >> "$d/$name.$setting.ddpc"
    # PyTorch's --batch is per rank: ddpc's, as its log says (a global batch
    # splits between the ranks), kept for the rounds where PyTorch runs first
    local b
    b=$(field "$d/$name.jsonl" batch_per_rank)
    [ -z "$ours" ] || [ -z "$b" ] || echo "$b" > "$d/$name.$setting.batch"
}
peers_run() {
    local python rank_batch
    rank_batch=$(cat "$d/$name.$setting.batch" 2> /dev/null) || rank_batch=$batch # else the net's
    for peer in $peers; do
        python=$debian
        [ "$peer" = newest ] && python=$newest
        theirs=$(torch_run "$python" "$name" "$setting" "$steps" "$rank_batch" "$data") ||
            failed_run "round $round $name $setting, PyTorch $(version "$python") ($python)"
        echo "${theirs:-FAILED}" >> "$d/$name.$setting.$peer"
        theirs_all="$theirs_all, $peer ${theirs:-FAILED}"
    done
}

settings="1p"
[ "$cores" -ge 2 ] && command -v mpirun > /dev/null && settings="1p 2r"
for net in $nets; do
    name=$(basename "$net" .net)
    build/ddpc "$net" --target cpu -o "$d/$name" > /dev/null || { echo "cpu_nets: FAILED: build of $net"; exit 0; }
    build/ddpc "$net" --emit torch > "$d/$name.py"
done

echo "cpu_nets: $cores cores; peers: Debian's PyTorch $(version $debian)$([ "$peers" != debian ] && echo ", PyPI's $(version $newest)")"
for round in $(seq "$rounds"); do
    for net in $nets; do
        name=$(basename "$net" .net) steps=$(steps_for "$net") data=$(data_for "$net")
        batch=$(sed -n 's/^[[:space:]]*batch[[:space:]]\+\([0-9]\+\).*/\1/p' "$net" | head -1)
        for setting in $settings; do
            why="" theirs_all=""
            if [ $((round % 2)) = 1 ]; then
                ours_run
                peers_run
                order=""
            else
                peers_run
                ours_run
                order=" (PyTorch first)"
            fi
            echo "round $round $name $setting$order: ddpc ${ours:-FAILED}$theirs_all"
            echo -n "$why"
        done
    done
done

echo
printf "%-15s %-9s %10s %14s %14s %8s\n" net setting ddpc "torch $(version $debian)" \
    "$([ "$peers" != debian ] && echo "torch $(version $newest)" || echo "-")" ratio
for net in $nets; do
    name=$(basename "$net" .net)
    for setting in $settings; do
        ours=$(grep -v FAILED "$d/$name.$setting.ddpc" | median)
        best="" cells="" verdict=""
        # a run that failed in any round fails the row, whatever the others' figures
        grep -qx FAILED "$d/$name.$setting".* && verdict=FAILED
        for peer in debian newest; do
            v=""
            [ -e "$d/$name.$setting.$peer" ] && v=$(grep -v FAILED "$d/$name.$setting.$peer" | median)
            cells="$cells ${v:--}"
            [ -n "$v" ] && best=$(awk -v a="${best:-0}" -v b="$v" 'BEGIN { print (b > a) ? b : a }')
        done
        if [ -n "$ours" ] && [ -n "$best" ]; then
            ratio=$(awk -v a="$ours" -v b="$best" 'BEGIN { printf "%.2f", a / b }')
            verdict=${verdict:-$(awk -v r="$ratio" 'BEGIN { print (r >= 1.0) ? "OK" : "FAILED" }')}
        else
            ratio="-" verdict="FAILED"
        fi
        set -- $cells
        printf "%-15s %-9s %10.0f %14s %14s %8s  %s\n" "$name" "$([ $setting = 1p ] && echo 1-process || echo 2-ranks)" \
            "${ours:-0}" "$1" "$2" "$ratio" "$verdict"
    done
done
echo "cpu_nets: samples/s, medians of $rounds rounds; ratio: ddpc over the faster PyTorch (goal >= 1.0)"
[ -z "$failed" ] || echo "cpu_nets: FAILED runs: ${failed#; }"
exit 0
