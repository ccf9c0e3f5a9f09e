# The job's samples/s in a ddpc log (JSON lines) past its first WARM steps:
# per rank, the rates of its rank_times windows (one each --log-every
# steps; WARM a multiple of it, so that every window counted is whole)
# combined over their time, equal steps each, then the ranks' added up.
# What PyTorch's timed loop in bench/torch_train.py holds, which leaves out
# its first 5 steps likewise: a step's data, forward, backward, all-reduce
# and optimizer time.
#   awk -v warm=5 -f bench/steady_rate.awk LOG
/"event": "rank_times"/ {
    match($0, /"step": [0-9]+/); step = substr($0, RSTART + 8, RLENGTH - 8) + 0
    match($0, /"rank": [0-9]+/); rank = substr($0, RSTART + 8, RLENGTH - 8) + 0
    match($0, /"samples_per_s": [0-9.e+]+/); rate = substr($0, RSTART + 17, RLENGTH - 17) + 0
    if (step > warm && rate > 0) { inv[rank] += 1 / rate; n[rank]++ }
}
END { for (r in n) total += n[r] / inv[r]; if (total > 0) printf "%.1f\n", total }
