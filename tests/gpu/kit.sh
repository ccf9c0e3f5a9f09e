#!/usr/bin/env bash
# kit.sh KIT: the rest of `make gpu-kit`, once make has installed ddpc and the
# runtime (built without MPI) into KIT (bin/ddpc, include/ddpc/, lib/ddpc/).
# Builds here, where the tools are, what tests/gpu/run.sh needs on a GPU node
# that has only the driver, nvcc and PyTorch's nvidia-* wheels:
#
#   gpu/NAME, gpu/NAME.cu   the CUDA program of every example and parity net,
#                           with the ddpc-build line that rebuilds it;
#                           NAME_sgd for a net trained with Adam or AdamW: the
#                           same net with plain SGD, whose first step is the
#                           gradient itself (Adam's is nearly sign(g), which
#                           turns a rounding difference in a gradient near
#                           zero into a whole step's difference)
#   gpu/mnist_nhwc.cu, fashion_resnet_nhwc.cu  those nets' CUDA sources
#                           channels-last (--layout nhwc, what a tf32 or bf16
#                           net gets on GPUs), which run.sh builds on the
#                           node: no room for more programs in the kit
#                           (kit.txt's nhwc_nets names every such source)
#   gpu/channels_last_nhwc.cu  tests/layout/channels_last.net's, alike: a
#                           net of three channels, whose channels-last
#                           program permutes its data on the way in
#                           (input_forward), which the one-channel nets'
#                           never does, and runs what the examples leave
#                           out of one (dropout, a generated bias and tanh,
#                           pools that overlap and pad, a permuting flatten)
#   data_channels_last/, ref/channels_last.w0, .w1  its data (a net that
#                           is not one of the kit's nets has its own
#                           data_NAME/): 3x10x10 IDX images, each
#                           channel a 10x10 crop of a Fashion-MNIST image at
#                           its own place (512 training, 128 test samples,
#                           labels the class mod 5); the CPU build's (NCHW)
#                           initial weights and its step on the first batch
#   ref/NAME.w0, NAME.w1    the CPU build's initial weights and its weights
#                           after one step on the kit's first batch (no .w1
#                           for a net trained with Adam or AdamW: its step
#                           is compared through NAME_sgd's, and its 2.3 MiB
#                           would not fit the kit beside the files below)
#   ref/NAME.tf32.w1, NAME.bf16.w1  that one step in --precision tf32 and
#                           bf16, for the nets kit.txt's precision_nets names
#                           (mnist, resnet: every net's would not fit)
#   ref/mnist.w20, resnet.w20  after 20 steps from NAME.w0, shuffled: momentum
#                           past its first step, the sampler's order
#   ref/mnist.w160          after 160 steps from mnist.w0: across the end of
#                           the first epoch (157 steps, the last of 16
#                           samples) into the second, shuffled anew
#   ref/mnist.ck150         the checkpoint of that run at step 150 (weights,
#                           momentum, step), for a GPU run of steps 151-160
#                           only: the short last batch and epoch 2's order
#                           with 10 steps of float drift, not 160
#   ref/mnist.epoch         the CPU build's test_acc after one epoch
#   ref/mnist.epoch.st      its weights after that epoch
#   ref/mnist.eval          the CPU build's test_acc of mnist.epoch.st
#                           (--eval-only)
#   bin/compare, bin/nccl_helper (and obj/nccl_helper.o to relink it)
#                           no MPI, no libz at run time
#   data/                   Fashion-MNIST, the first 10,000 training and
#                           2,000 test samples, IDX gzipped
#   torch/NAME.py           ddpc NAME.net --emit torch, for PyTorch's samples/s
#   fallback/               libz.so.1 and libgomp.so.1, searched last on the
#                           node, for a node without them
#   kit.txt                 what built the kit and from which sources
#
# Fails if the kit ends over 48 MiB (it travels with the repository).
# Environment: NVCC (make's), DATA (default /usr/share/datasets/fashion-mnist).
set -euo pipefail
cd "$(dirname "$0")/../.."
kit=${1:?usage: kit.sh KIT}
kit=$(cd "$kit" && pwd)
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
cuda_home=$(dirname "$(dirname "$nvcc")")
data=${DATA:-/usr/share/datasets/fashion-mnist}
ddpc=$kit/bin/ddpc
batch=64 # the batch of the one-step comparison (tests/gpu/run.sh uses it too)
max_bytes=$((48 * 1024 * 1024))
precision_nets="mnist resnet" # kit.txt names them for run.sh
# Channels-last sources, built on the node (kit.txt names them for run.sh).
# A net here that is not among the nets above (channels_last) needs its own
# steps below: its .net copied into $tmp, its data_NAME/ and ref/NAME.w0, .w1.
nhwc_nets="mnist fashion_resnet channels_last"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$kit"/{gpu,ref,data,data_channels_last,torch,obj,fallback}

# The runtime's archives travel without their debug information (three
# quarters of libddprt.a's bytes): the node links them only to rebuild a
# program or the tools, and the kit must fit what a device run carries.
strip --strip-debug "$kit"/lib/ddpc/libddprt*.a

# The data: a prefix of each file, headers rewritten to the new counts.
python3 - "$data" "$kit/data" <<'EOF'
import gzip, os, struct, sys
src, dst = sys.argv[1:]
def find(name):
    for d in (src, os.path.join(src, "raw"), os.path.join(src, "FashionMNIST", "raw")):
        for n in (name, name + ".gz"):
            if os.path.isfile(os.path.join(d, n)):
                return os.path.join(d, n)
    sys.exit(f"kit.sh: no {name}[.gz] in {src}")
for name, count in (("train-images-idx3-ubyte", 10000), ("train-labels-idx1-ubyte", 10000),
                    ("t10k-images-idx3-ubyte", 2000), ("t10k-labels-idx1-ubyte", 2000)):
    path = find(name)
    raw = (gzip.open if open(path, "rb").read(2) == b"\x1f\x8b" else open)(path, "rb").read()
    dims = raw[3]
    shape = struct.unpack(">%dI" % dims, raw[4:4 + 4 * dims])
    item = 1
    for d in shape[1:]:
        item *= d
    head = raw[:4] + struct.pack(">%dI" % dims, count, *shape[1:])
    body = raw[4 + 4 * dims:4 + 4 * dims + count * item]
    with gzip.GzipFile(os.path.join(dst, name + ".gz"), "wb", compresslevel=9, mtime=0) as f:
        f.write(head + body)
EOF

# The nets: examples and parity nets, and an SGD twin of each Adam/AdamW one;
# those for other images than the kit's data (cifar10.net) are left out.
nets=()
for net in examples/*.net tests/parity/*.net; do
    name=$(basename "$net" .net)
    if ! grep -Eq '^input +(1x28x28|784)( |$)' "$net"; then
        echo "kit.sh: $name: its input is not the kit's 1x28x28 images: left out"
        continue
    fi
    cp "$net" "$tmp/$name.net"
    nets+=("$name")
    if grep -Eq 'optimizer +adamw? ' "$net"; then
        sed -E 's/optimizer +adamw? [^;}]*/optimizer sgd lr=0.05 /' "$net" > "$tmp/${name}_sgd.net"
        nets+=("${name}_sgd")
    fi
done

# For the H200 the checks run on (sm_90, and its PTX): five architectures
# would take 44 of the kit's 48 MiB; with no GPU visible here either way, so
# that a kit made where a GPU is visible is no different (-arch=native).
for name in "${nets[@]}"; do
    CUDA_VISIBLE_DEVICES= "$ddpc" "$tmp/$name.net" --target cuda --arch sm_90 -o "$kit/gpu/$name" \
        > "$tmp/$name.cuda.log" 2>&1 ||
        { cat "$tmp/$name.cuda.log"; exit 1; }
    if grep -q warning "$tmp/$name.cuda.log"; then
        cat "$tmp/$name.cuda.log"; echo "kit.sh: $name: warnings building for CUDA"; exit 1
    fi
    # the runtime's debug information (a third of each program) and the host
    # symbols no run needs (a fifth of the rest; the kernels' names, which ncu
    # shows, are in the device code) do not travel: the kit must fit what a
    # device run carries
    strip --strip-unneeded "$kit/gpu/$name"
    "$ddpc" "$tmp/$name.net" --target cpu -o "$tmp/$name.cpu" > /dev/null
    "$tmp/$name.cpu" --data "$kit/data" --max-steps 0 --export "$kit/ref/$name.w0" --quiet
    if [ ! -e "$tmp/${name}_sgd.net" ]; then # an Adam net's step is compared through its SGD twin's
        "$tmp/$name.cpu" --data "$kit/data" --init "$kit/ref/$name.w0" --max-steps 1 --no-shuffle \
            --batch-size "$batch" --export "$kit/ref/$name.w1" --quiet
        # the GPU's steps in tf32 and bf16 compared with the CPU's, rounding alike:
        # for the nets the timings run (every net's would put the kit over its size)
        if [[ " $precision_nets " == *" $name "* ]]; then
            for precision in tf32 bf16; do
                "$tmp/$name.cpu" --data "$kit/data" --init "$kit/ref/$name.w0" --max-steps 1 --no-shuffle \
                    --batch-size "$batch" --precision "$precision" --export "$kit/ref/$name.$precision.w1" --quiet
            done
        fi
    fi
done
# Several steps, shuffled (tests/gpu/run.sh runs the same on the GPU): 20 of
# mnist and resnet (plain SGD with momentum, both); 160 of mnist, across the
# end of the epoch, and its checkpoint at step 150 to resume from.
for name in mnist resnet; do
    "$tmp/$name.cpu" --data "$kit/data" --init "$kit/ref/$name.w0" --max-steps 20 \
        --batch-size "$batch" --export "$kit/ref/$name.w20" --quiet
done
"$tmp/mnist.cpu" --data "$kit/data" --init "$kit/ref/mnist.w0" --max-steps 160 --batch-size "$batch" \
    --save "$tmp/ck" --save-every 150 --export "$kit/ref/mnist.w160" --quiet
cp "$tmp/ck/checkpoint-mnist-000000150.safetensors" "$kit/ref/mnist.ck150"
# One epoch of mnist.net on the CPU: the accuracy the GPU's epoch should reach,
# and its weights, which the GPU's --eval-only must score as the CPU does.
"$tmp/mnist.cpu" --data "$kit/data" --epochs 1 --export "$kit/ref/mnist.epoch.st" > "$tmp/epoch.txt" 2>&1 ||
    { cat "$tmp/epoch.txt"; exit 1; }
grep -o 'test_acc [0-9.]*' "$tmp/epoch.txt" | tail -1 > "$kit/ref/mnist.epoch" || true # none: said below
"$tmp/mnist.cpu" --data "$kit/data" --eval-only --init "$kit/ref/mnist.epoch.st" > "$tmp/eval.txt" 2>&1 ||
    { cat "$tmp/eval.txt"; exit 1; }
grep -o 'test_acc [0-9.]*' "$tmp/eval.txt" | tail -1 > "$kit/ref/mnist.eval" || true
if [ ! -s "$kit/ref/mnist.epoch" ] || [ ! -s "$kit/ref/mnist.eval" ]; then
    echo "kit.sh: no test_acc in mnist's epoch or in its evaluation ($tmp/epoch.txt, eval.txt):"
    cat "$tmp/epoch.txt" "$tmp/eval.txt"
    exit 1
fi
for net in examples/*.net; do
    "$ddpc" "$net" --emit torch > "$kit/torch/$(basename "$net" .net).py"
done

cp tests/layout/channels_last.net "$tmp/channels_last.net"
for name in $nhwc_nets; do
    CUDA_VISIBLE_DEVICES= "$ddpc" "$tmp/$name.net" --target cuda --arch sm_90 --layout nhwc --emit cu \
        > "$kit/gpu/${name}_nhwc.cu"
done
# channels_last.net's data (from the kit's own Fashion-MNIST, so nothing new
# is read) and the CPU's NCHW step, which the GPU's channels-last one must
# take: the CPU's two layouts take the same steps to the bit (tests/unit/test_layout.c)
python3 - "$kit/data" "$kit/data_channels_last" <<'EOF'
import gzip, os, struct, sys
src, dst = sys.argv[1:]
offsets = ((9, 9), (2, 14), (14, 2))  # each channel's crop: its top row, left column
for kind, count in (("train", 512), ("t10k", 128)):
    raw = gzip.open(os.path.join(src, kind + "-images-idx3-ubyte.gz")).read()
    labels = gzip.open(os.path.join(src, kind + "-labels-idx1-ubyte.gz")).read()[8:8 + count]
    body = bytearray()
    for i in range(count):
        image = raw[16 + 784 * i:16 + 784 * (i + 1)]
        for top, left in offsets:
            for row in range(top, top + 10):
                body += image[28 * row + left:28 * row + left + 10]
    for name, data in ((kind + "-images-idx3-ubyte", struct.pack(">5I", 0x804, count, 3, 10, 10) + bytes(body)),
                       (kind + "-labels-idx1-ubyte", struct.pack(">2I", 0x801, count) + bytes(b % 5 for b in labels))):
        with gzip.GzipFile(os.path.join(dst, name + ".gz"), "wb", compresslevel=9, mtime=0) as f:
            f.write(data)
EOF
"$ddpc" "$tmp/channels_last.net" --target cpu -o "$tmp/channels_last.cpu" > /dev/null
"$tmp/channels_last.cpu" --data "$kit/data_channels_last" --max-steps 0 --export "$kit/ref/channels_last.w0" --quiet
"$tmp/channels_last.cpu" --data "$kit/data_channels_last" --init "$kit/ref/channels_last.w0" --max-steps 1 --no-shuffle \
    --batch-size "$batch" --export "$kit/ref/channels_last.w1" --quiet

# The tools: compare needs only the safetensors reader; the NCCL helper the
# CUDA runtime (no MPI there: its `one` mode needs none).
cc -std=c11 -D_GNU_SOURCE -O2 -Iruntime tests/gpu/compare.c -o "$kit/bin/compare" "$kit/lib/ddpc/libddprt.a" \
    -Wl,-Bstatic -lz -Wl,-Bdynamic -lm -fopenmp
cc -std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror -Iruntime -I"$cuda_home/include" \
    -c tests/mpi/nccl_helper.c -o "$kit/obj/nccl_helper.o"
# The link line, for run.sh to relink on the node (@KIT@, @OUT@ filled in there).
nccl_link="-o @OUT@ @KIT@/obj/nccl_helper.o @KIT@/lib/ddpc/libddprt_cuda.a -lcudnn -lcublas -lnccl -lgomp -lpthread"
echo "$nccl_link" > "$kit/obj/nccl_helper.link"
link=${nccl_link//@KIT@/$kit}
"$nvcc" ${link//@OUT@/$kit/bin/nccl_helper} > /dev/null

# The node may lack these two (they come with zlib1g and gcc): copies, searched last.
for lib in libz.so.1 libgomp.so.1; do
    path=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ && !p {p = $NF} END {print p}')
    if [ -n "$path" ]; then cp -L "$path" "$kit/fallback/$lib"; fi
done

bytes=$(du -sb "$kit" | cut -f1)
{
    echo "digest $(bash tests/gpu/digest.sh)"
    echo "kit $kit"
    echo "nvcc $nvcc"
    echo "cuda $("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
    echo "batch $batch"
    echo "nets ${nets[*]}"
    echo "precision_nets $precision_nets"
    echo "nhwc_nets $nhwc_nets"
    echo "bytes $bytes"
    echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m)"
} > "$kit/kit.txt"
echo "kit.sh: $kit: ${#nets[@]} nets, $((bytes / 1024)) KiB (at most $((max_bytes / 1024)))"
[ "$bytes" -le "$max_bytes" ] || { echo "kit.sh: the kit is over 48 MiB"; exit 1; }
