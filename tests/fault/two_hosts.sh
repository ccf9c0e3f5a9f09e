#!/usr/bin/env bash
# two_hosts.sh: two "hosts" (network namespaces joined by a veth pair), one
# rank on each, and then the link between them cut.
#
#   tests/fault/two_hosts.sh        (as root; DDPC, LIBDDPRT, CC, MPIRUN and
#                                    TWO_HOSTS_DATA override where things are)
#
# The namespaces are this test's own (names with its pid), each with its
# loopback up and one end of the veth, 10.231.N.1 in A and .2 in B; whatever
# happens (a failure, a timeout, ^C) the trap kills every process left in them
# and deletes them, which deletes the veth too. Checks, one line each:
#
#   train        mpirun in A starts rank 1 in B through an rsh agent that runs
#                Open MPI's daemon with `ip netns exec B` (the daemon reaches
#                back over the veth; Open MPI's TCP is held to that subnet).
#                5 steps of examples/mnist.net; both ranks exit 0, rank 0
#                reports the run. Each rank writes its output to a file of its
#                own, as a host would, so rank 1's words survive a cut link.
#   store        tests/fault/store_peer.c: rank 0 serves the start-up store
#                (runtime/store*.c) on tcp://10.231.N.1:PORT in A, rank 1 in B
#                gets the 128-byte "nccl_id" from it, as a GPU build does.
#   cut          a long training run, and a store pair waiting on keys nobody
#                sets; once rank 0's progress line (DDP_PROGRESS_TTY=1) shows
#                step 20, B's end of the veth goes down. Rank 0 of the
#                training must exit 1 saying which collective did not finish,
#                within --timeout (+5 s); rank 1 likewise. The run evaluates
#                only at its epoch's end, 1,875 steps of 16 samples a rank
#                away, so that the cut finds both ranks stepping: a rank cut
#                off while it evaluates meets its first collective only after
#                the evaluation, and its --timeout starts there. The store's
#                rank 1 must fail naming the store, within its timeout plus
#                the client's 5 s grace (store.c, REPLY_GRACE_S: the server's
#                own TIMEOUT reply cannot arrive).
#                Whether mpirun then ends by itself is reported, not checked:
#                it cannot reach the daemon in B to stop the job, and with
#                Open MPI's default OOB keepalive (300 s) it waits; the test
#                ends it.
#   keepalive    the same cut under mpirun with a short OOB keepalive
#                (--mca oob_tcp_keepalive_time 2 ...): mpirun notices the lost
#                daemon and ends the job within seconds, and rank 0 says it was
#                ended by the launcher.
#
# Prints "PASS name: ..." / "FAIL name: ..." per check and "info: ..." lines
# with what was measured; exits 0 only if every check passed, 77 (skipped,
# with the reason) when not root, when `ip netns` does not work, or when
# mpirun, cc or the Fashion-MNIST files are missing.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
ddpc=${DDPC:-$root/build/ddpc} lib=${LIBDDPRT:-$root/build/libddprt.a}
cc=${CC:-cc} mpirun=${MPIRUN:-mpirun}
data=${TWO_HOSTS_DATA:-/usr/share/datasets/fashion-mnist}
train_timeout=${TWO_HOSTS_TIMEOUT:-20} store_timeout=${TWO_HOSTS_STORE_TIMEOUT:-5}
store_grace=5 # store.c's REPLY_GRACE_S

skip() { echo "two_hosts: skipped: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "not root (network namespaces need it)"
command -v ip > /dev/null || skip "no ip command (iproute2)"
command -v "$mpirun" > /dev/null || skip "no mpirun (Open MPI)"
command -v "$cc" > /dev/null || skip "no C compiler ($cc)"
[ -e "$data" ] || skip "no Fashion-MNIST at $data"
for f in "$ddpc" "$lib"; do
    [ -e "$f" ] || { echo "two_hosts: FAIL: $f is missing: run make first"; exit 1; }
done

A=ddp2h_a_$$ B=ddp2h_b_$$
net=10.231.$(($$ % 250)) # namespaces are private, so any subnet works; this one names the run
ipA=$net.1 ipB=$net.2 port=29500
d=$(mktemp -d /tmp/two_hosts.XXXXXX)
made=()

kill_ns() { # every process still in namespace $1: they are this test's
    local pids
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        pids=$(ip netns pids "$1" 2> /dev/null)
        [ -n "$pids" ] || return 0
        # shellcheck disable=SC2086 # one pid a word
        kill -KILL $pids 2> /dev/null
        sleep 0.2
    done
}
cleanup() {
    trap - EXIT INT TERM HUP
    for ns in "${made[@]}"; do kill_ns "$ns"; done
    for ns in "${made[@]}"; do ip netns del "$ns" 2> /dev/null; done
    rm -rf "$d"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

ip netns add "$A" 2> "$d/err" || skip "ip netns does not work here: $(head -1 "$d/err")"
made+=("$A")
ip netns add "$B" 2> "$d/err" || skip "ip netns does not work here: $(head -1 "$d/err")"
made+=("$B")
set -e
ip -n "$A" link add veth0 type veth peer name veth1 netns "$B"
ip -n "$A" addr add "$ipA/24" dev veth0
ip -n "$B" addr add "$ipB/24" dev veth1
for ns in "$A" "$B"; do ip -n "$ns" link set lo up; done
ip -n "$A" link set veth0 up
ip -n "$B" link set veth1 up
set +e

failed=0 checks=0
pass() { checks=$((checks + 1)); echo "PASS $1: $2"; }
fail() { checks=$((checks + 1)); failed=$((failed + 1)); echo "FAIL $1: $2"; }
info() { echo "info: $*"; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
within() { awk -v t="$1" -v l="$2" 'BEGIN { exit !(t <= l) }'; }
# until_file FILE PATTERN SECONDS: waits until FILE holds PATTERN (grep -E)
until_file() {
    local end=$(($(date +%s) + $3))
    while [ "$(date +%s)" -le $end ]; do
        grep -qE "$2" "$1" 2> /dev/null && return 0
        sleep 0.2
    done
    return 1
}
# the last line of FILE matching PATTERN, for messages
said() { tr '\r' '\n' < "$1" 2> /dev/null | sed 's/\x1b\[K//g' | grep -E "$2" | tail -1; }

# ---- what runs on the hosts -------------------------------------------------------
"$ddpc" "$root/examples/mnist.net" --target cpu -o "$d/mnist" > "$d/ddpc.txt" 2>&1 ||
    { cat "$d/ddpc.txt"; echo "two_hosts: FAIL: ddpc could not build examples/mnist.net"; exit 1; }
"$cc" -std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror -I"$root/runtime" "$root/tests/fault/store_peer.c" \
    "$lib" -lpthread -lm -o "$d/store_peer" > "$d/cc.txt" 2>&1 ||
    { cat "$d/cc.txt"; echo "two_hosts: FAIL: could not build tests/fault/store_peer.c"; exit 1; }
[ "$data" = /usr/share/datasets/fashion-mnist ] && data_flag=() || data_flag=(--data "$data")

# A rank on its host: output into a file of its own; then its exit status and
# the time, in a file that appears whole (renamed into place: the test reads
# it as soon as it exists). NAME gets the MPI rank appended when mpirun
# started it.
cat > "$d/rank.sh" << 'EOF'
#!/bin/sh
d=$1 name=$2$OMPI_COMM_WORLD_RANK
shift 2
readlink /proc/self/ns/net > "$d/$name.netns"
"$@" > "$d/$name.log" 2>&1
rc=$?
echo "$rc $(date +%s.%N)" > "$d/$name.end.part" && mv "$d/$name.end.part" "$d/$name.end"
exit $rc
EOF
# Open MPI's rsh agent: "HOST COMMAND..." runs COMMAND on that host's namespace.
cat > "$d/agent.sh" << EOF
#!/bin/sh
host=\$1
shift
echo "\$host \$*" >> "$d/agent.log"
case \$host in
$ipA) ns=$A ;;
$ipB) ns=$B ;;
*) echo "agent.sh: no host \$host here" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" sh -c "\$*"
EOF
chmod +x "$d/rank.sh" "$d/agent.sh"

# mpirun in A, one rank per host, over the veth only. First argument: its time limit.
mpi_run() {
    local limit=$1
    shift
    ip netns exec "$A" env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        timeout -k 3 "$limit" "$mpirun" --mca plm_rsh_agent "$d/agent.sh" -H "$ipA,$ipB" -np 2 --bind-to none \
        --mca btl tcp,self --mca btl_tcp_if_include "$net.0/24" --mca oob_tcp_if_include "$net.0/24" \
        -x OMP_NUM_THREADS=1 "$@"
}
end_of() { cat "$d/$1.end" 2> /dev/null; } # "STATUS TIME" once a rank has ended

# ---- training across the two hosts ---------------------------------------------------
mpi_run 60 "$d/rank.sh" "$d" train.rank "$d/mnist" "${data_flag[@]}" --max-steps 5 --timeout "$train_timeout" \
    > "$d/train.mpirun.txt" 2>&1
rc=$?
nsA=$(ip netns exec "$A" readlink /proc/self/ns/net) nsB=$(ip netns exec "$B" readlink /proc/self/ns/net)
if [ "$(cat "$d/train.rank0.netns" 2> /dev/null)" = "$nsA" ] && [ "$(cat "$d/train.rank1.netns" 2> /dev/null)" = "$nsB" ] &&
    grep -q "^$ipB .*orted" "$d/agent.log" 2> /dev/null; then
    pass hosts "rank 0 ran in $A ($ipA), rank 1 in $B ($ipB), its daemon started by the rsh agent"
else
    fail hosts "ranks' namespaces: rank 0 $(cat "$d/train.rank0.netns" 2> /dev/null), rank 1 $(cat "$d/train.rank1.netns" 2> /dev/null); A $nsA, B $nsB"
fi
done_line=$(said "$d/train.rank0.log" "^done ")
if [ $rc -eq 0 ] && [ "$(end_of train.rank0 | cut -d' ' -f1)" = 0 ] && [ "$(end_of train.rank1 | cut -d' ' -f1)" = 0 ] &&
    grep -q "^done  5 steps" "$d/train.rank0.log" && grep -q "weights identical on all 2 ranks" "$d/train.rank0.log"; then
    pass train "5 steps across the hosts, both ranks exit 0; rank 0: $done_line"
else
    fail train "mpirun exit $rc, ranks $(end_of train.rank0 | cut -d' ' -f1)/$(end_of train.rank1 | cut -d' ' -f1)"
    for f in train.mpirun.txt train.rank0.log train.rank1.log; do sed "s/^/  $f: /" "$d/$f" 2> /dev/null | tail -15; done
fi

# ---- the store across the two hosts -------------------------------------------------
ip netns exec "$A" timeout 30 "$d/store_peer" 0 "tcp://$ipA:$port" "$store_timeout" exchange > "$d/store0.txt" 2>&1 &
s0=$!
ip netns exec "$B" timeout 30 "$d/store_peer" 1 "tcp://$ipA:$port" "$store_timeout" exchange > "$d/store1.txt" 2>&1
rc1=$?
wait $s0
rc0=$?
if [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] && grep -q "rank 1: got nccl_id (128 bytes), identical" "$d/store1.txt"; then
    pass store "tcp://$ipA:$port served in $A; rank 1 in $B: $(said "$d/store1.txt" "got nccl_id" | sed 's/^store_peer: //')"
else
    fail store "exit $rc0/$rc1"
    sed 's/^/  /' "$d/store0.txt" "$d/store1.txt"
fi

# ---- the link cut --------------------------------------------------------------------
mpi_run $((train_timeout + 40)) -x DDP_PROGRESS_TTY=1 "$d/rank.sh" "$d" cut.rank "$d/mnist" "${data_flag[@]}" \
    --max-steps 1000000 --batch-size 16 --timeout "$train_timeout" > "$d/cut.mpirun.txt" 2>&1 &
mp=$!
ready=1
until_file "$d/cut.rank0.log" "\] ([2-9][0-9]|[0-9]{3,})/" 40 || ready=0 # "epoch 1/10 [###...] 20/1875"
# the store pair once training runs, so that its wait starts just before the cut
ip netns exec "$A" "$d/rank.sh" "$d" store.rank0 "$d/store_peer" 0 "tcp://$ipA:$((port + 1))" "$store_timeout" cut &
ip netns exec "$B" "$d/rank.sh" "$d" store.rank1 "$d/store_peer" 1 "tcp://$ipA:$((port + 1))" "$store_timeout" cut &
until_file "$d/store.rank1.log" "ready" 5 || ready=0
until_file "$d/store.rank0.log" "ready" 1 || ready=0
if [ $ready -eq 0 ]; then
    fail cut "never ready to cut: training or the store did not start"
    for f in cut.mpirun.txt cut.rank0.log cut.rank1.log store.rank0.log store.rank1.log; do
        tr '\r' '\n' < "$d/$f" 2> /dev/null | sed "s/\x1b\[K//g; s/^/  $f: /" | tail -10 # rank 0's progress bars
    done
else
    sleep 0.3 # rank 1's GET on its way to the server
    t0=$(now)
    ip -n "$B" link set veth1 down
    info "link cut at step $(said "$d/cut.rank0.log" "\] [0-9]+/" | sed 's|.*\] \([0-9]*\)/.*|\1|') of training (or a little after): ip -n $B link set veth1 down"
    limit=$((train_timeout + 5)) slimit=$((store_timeout + store_grace + 3))
    end=$(($(date +%s) + train_timeout + 15))
    while [ "$(date +%s)" -le $end ]; do
        [ -e "$d/cut.rank0.end" ] && [ -e "$d/cut.rank1.end" ] && [ -e "$d/store.rank1.end" ] && break
        sleep 0.2
    done

    # the training: each rank on its own, after its --timeout
    for r in 0 1; do
        msg=$(said "$d/cut.rank$r.log" "error|stopping")
        if [ -e "$d/cut.rank$r.end" ]; then
            read -r st t < "$d/cut.rank$r.end"
            took=$(secs "$t0" "$t")
            if [ "$st" = 1 ] && within "$took" "$limit" &&
                echo "$msg" | grep -q "rank $r: error: all-reduce.* did not finish within $train_timeout s"; then
                pass cut "training rank $r exits 1 after ${took} s (--timeout $train_timeout, limit ${limit} s): $msg"
            else
                fail cut "training rank $r: exit $st after ${took} s (limit ${limit} s): ${msg:-no message}"
            fi
        else
            fail cut "training rank $r still running $(secs "$t0" "$(now)") s after the cut (--timeout $train_timeout): ${msg:-no message}; $(tail -c 300 "$d/cut.rank$r.log" | tr '\r\n' '  ')"
        fi
    done
    # mpirun: reported, not checked (see the top)
    r0_end=$(end_of cut.rank0 | cut -d' ' -f2)
    since="rank 0 ended"
    [ -n "$r0_end" ] || { r0_end=$t0 since="the cut"; }
    for _ in $(seq 25); do kill -0 $mp 2> /dev/null || break; sleep 0.2; done
    if kill -0 $mp 2> /dev/null; then
        info "mpirun still running $(secs "$r0_end" "$(now)") s after $since (it cannot reach the daemon in $B to stop the job); ended by the test"
    else
        wait $mp
        info "mpirun exit $? $(secs "$r0_end" "$(now)") s after $since"
    fi
    grep -v "^\s*$" "$d/cut.mpirun.txt" | head -4 | sed 's/^/  mpirun: /'

    # the store: rank 1's GET across the cut link; rank 0's wait for rank 1
    for r in 1 0; do
        until_file "$d/store.rank$r.end" . $((slimit + 12)) # rank 0 drains up to min(timeout, 10 s) on close
        msg=$(said "$d/store.rank$r.log" "failed after|FAIL")
        if [ -e "$d/store.rank$r.end" ]; then
            read -r st t < "$d/store.rank$r.end"
            took=$(echo "$msg" | sed -n 's/.*failed after \([0-9.]*\) s.*/\1/p')
            if [ "$st" = 0 ] && [ -n "$took" ] && within "$took" "$slimit" && echo "$msg" | grep -q "$ipA:$((port + 1))"; then
                pass cut "store rank $r's wait (begun 0.3 s before the cut) fails after ${took} s (timeout $store_timeout s + ${store_grace} s grace, limit ${slimit} s); exit $(secs "$t0" "$t") s after the cut: ${msg#*: failed after * s: }"
            else
                fail cut "store rank $r: exit $st: ${msg:-no message}"
            fi
        else
            fail cut "store rank $r still waiting $(secs "$t0" "$(now)") s after the cut (timeout $store_timeout s): ${msg:-no message}"
        fi
    done
fi
kill_ns "$A"
kill_ns "$B"
wait 2> /dev/null

# ---- the same cut, with mpirun watching its daemons ------------------------------------
ip -n "$B" link set veth1 up
mpi_run 60 --mca oob_tcp_keepalive_time 2 --mca oob_tcp_keepalive_intvl 1 --mca oob_tcp_keepalive_probes 3 \
    "$d/mnist" "${data_flag[@]}" --max-steps 1000000 --eval-every 20 --timeout 60 > "$d/ka.mpirun.txt" 2>&1 &
mp=$!
if until_file "$d/ka.mpirun.txt" "step 20 " 40; then
    t0=$(now)
    ip -n "$B" link set veth1 down
    for _ in $(seq 150); do kill -0 $mp 2> /dev/null || break; sleep 0.2; done
    took=$(secs "$t0" "$(now)")
    if kill -0 $mp 2> /dev/null; then
        fail keepalive "mpirun still running ${took} s after the cut"
    else
        wait $mp
        rc=$?
        msg=$(said "$d/ka.mpirun.txt" "rank 0: (stopping|error)")
        if [ $rc -ne 0 ] && grep -q "ORTE has lost communication with a remote daemon" "$d/ka.mpirun.txt" &&
            echo "$msg" | grep -q "rank 0: stopping: the launcher ended this rank"; then
            pass keepalive "mpirun exits $rc ${took} s after the cut (ORTE has lost communication with a remote daemon); $msg"
        else
            fail keepalive "mpirun exit $rc after ${took} s; rank 0: ${msg:-said nothing}"
            tr '\r' '\n' < "$d/ka.mpirun.txt" | grep -v "^\s*$" | tail -15 | sed 's/^/  /'
        fi
    fi
else
    fail keepalive "training never reached step 20"
    tr '\r' '\n' < "$d/ka.mpirun.txt" | tail -15 | sed 's/^/  /'
fi

echo "two_hosts: $checks checks, $failed failed"
[ $failed -eq 0 ]
