#!/usr/bin/env bash
# An image folder, end to end (CPU):
#   PYTHON=/usr/bin/python3 tests/distributed/image_folder.sh
# Writes, with PIL, a folder of PNG and JPEG images of many sizes, grey and
# colour, in three classes (DIR/train/CLASS/, DIR/val/CLASS/), and trains a
# 3x32x32 net whose data { } block resizes the shorter side to 36 and
# center-crops 32, then crops at random and flips:
#  - through global_batch.sh: --global-batch 16 on 1 and 2 ranks, the same
#    bytes (files decoded on the loader's threads of each rank);
#  - --workers 0 and --workers 2 train to the same bytes;
#  - the first line names the format and the block;
#  - --predict of one JPEG prints its classes;
#  - --eval-only's table names each class by its folder ("1 dog");
#  - a PNG and a JPEG whose data are cut short (their headers whole) end the
#    run when their batch is made, with status 2, naming the file;
#  - a CMYK JPEG among the images is taken, and --predict of one prints
#    what it prints of PIL's RGB of it;
#  - a .webp among the images is refused at start-up with status 2.
# One line per check; "DIFFERENT" or a non-zero status is a failure.
set -euo pipefail
here=$(dirname "$0")
. "$here/expect_refused.sh"  # expect_refused
ddpc=${DDPC:-build/ddpc}
python=${PYTHON:-/usr/bin/python3}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
"$python" - "$d/photos" << 'PY'
import os, sys
import numpy as np
from PIL import Image
root = sys.argv[1]
rng = np.random.default_rng(11)
for split, n in (("train", 16), ("val", 4)):
    for k, name in enumerate(("cat", "dog", "frog")):
        os.makedirs(f"{root}/{split}/{name}")
        for i in range(n):
            h, w = int(rng.integers(24, 60)), int(rng.integers(24, 60))
            a = np.clip(rng.normal(60 + 60 * k, 50, (h, w, 3)), 0, 255).astype(np.uint8)
            img = Image.fromarray(a) if i % 3 else Image.fromarray(a[:, :, 0])
            img.save(f"{root}/{split}/{name}/{i:02d}." + ("png" if i % 2 else "jpg"))
PY
cat > "$d/photos.net" << 'NET'
net photos
input 3x32x32
conv 3->8 k3; relu; maxpool 2
conv 8->16 k3; batchnorm; relu; maxpool 2
flatten
linear 3
loss cross_entropy
data {
  resize 36
  center_crop 32
  random_crop 32 pad=2
  flip horizontal
  normalize mean=0.5 std=0.25
}
train {
  batch 16
  epochs 2
  optimizer sgd lr=0.05 momentum=0.9
  seed 3
}
NET
status=0
bash "$here/global_batch.sh" "$d/photos.net" 5 16 "1 2" --data "$d/photos" || status=1

"$ddpc" "$d/photos.net" --target cpu -o "$d/prog" > /dev/null
"$d/prog" --data "$d/photos" --max-steps 0 --export "$d/init.safetensors" --quiet
for workers in 0 2; do
    "$d/prog" --data "$d/photos" --init "$d/init.safetensors" --max-steps 5 --workers "$workers" \
        --export "$d/w$workers.safetensors" > "$d/workers$workers.out" 2>&1 || { cat "$d/workers$workers.out"; exit 1; }
done
if cmp -s "$d/w0.safetensors" "$d/w2.safetensors" && ! cmp -s "$d/init.safetensors" "$d/w2.safetensors"; then
    echo "--workers 0 and --workers 2: the same bytes after 5 steps"
else
    echo "--workers 0 and --workers 2: DIFFERENT after 5 steps (or no step changed the weights)"
    status=1
fi
if grep -q "48 train / 12 test samples of 3x32x32 image folder (PNG, JPEG)," "$d/workers2.out" &&
    grep -q "data { }: resize the shorter side to 36, center crop 32x32, random crop 32x32" "$d/workers2.out"; then
    echo "the first lines name the image folder and the block"
else
    echo "the first lines do not name the image folder and the block: DIFFERENT"
    head -3 "$d/workers2.out"
    status=1
fi

if "$d/prog" --init "$d/w2.safetensors" --predict "$d/photos/val/dog/00.jpg" --top 3 > "$d/predict.out" 2>&1 &&
    grep -Eq '^input 0: [0-2] [0-9.]+, [0-2] [0-9.]+, [0-2] [0-9.]+$' "$d/predict.out"; then
    echo "--predict of a JPEG: its 3 classes"
else
    echo "--predict of a JPEG: DIFFERENT"
    cat "$d/predict.out"
    status=1
fi

if "$d/prog" --data "$d/photos" --init "$d/w2.safetensors" --eval-only > "$d/eval.out" 2>&1 &&
    grep -Eq '^class   +samples  correct' "$d/eval.out" && grep -Eq '^1 dog +4  ' "$d/eval.out" &&
    grep -Eq '^2 frog +4  ' "$d/eval.out"; then
    echo "--eval-only's table names the classes by their folders"
else
    echo "--eval-only's table does not name the classes by their folders: DIFFERENT"
    cat "$d/eval.out"
    status=1
fi

cut=$d/photos/train/frog/05.png
head -c 60 "$cut" > "$d/cut.png" && mv "$d/cut.png" "$cut"
expect_refused "a PNG cut short, when its batch is made" "frog/05.png: not a readable PNG" \
    "$d/prog" --data "$d/photos" --epochs 1
rm "$cut"
cut=$d/photos/train/dog/00.jpg
head -c $(($(stat -c %s "$cut") / 2)) "$cut" > "$d/cut.jpg" && mv "$d/cut.jpg" "$cut"
expect_refused "a JPEG cut in half, when its batch is made" "dog/00.jpg: not a readable JPEG: Premature end" \
    "$d/prog" --data "$d/photos" --epochs 1
rm "$cut"
# a CMYK JPEG (ImageNet holds a few): read as PIL's convert("RGB") reads it
"$python" - "$d/cmyk.jpg" "$d/cmyk_as_rgb.png" << 'PY'
import sys
import numpy as np
from PIL import Image
inks = np.random.default_rng(5).integers(0, 256, (40, 44, 4), dtype=np.uint8)
Image.fromarray(inks, "CMYK").save(sys.argv[1], quality=90)
Image.open(sys.argv[1]).convert("RGB").save(sys.argv[2])
PY
cp "$d/cmyk.jpg" "$d/photos/val/cat/cmyk.jpg"
for f in cmyk.jpg cmyk_as_rgb.png; do
    "$d/prog" --init "$d/w2.safetensors" --predict "$d/$f" --top 3 > "$d/$f.predict" 2>&1 || cat "$d/$f.predict"
done
if "$d/prog" --data "$d/photos" --max-steps 1 --quiet && grep -q '^input 0: ' "$d/cmyk.jpg.predict" &&
    cmp -s "$d/cmyk.jpg.predict" "$d/cmyk_as_rgb.png.predict"; then
    echo "a CMYK JPEG: taken, and predicted as PIL's RGB of it"
else
    echo "a CMYK JPEG: refused, or predicted otherwise than PIL's RGB of it: DIFFERENT"
    cat "$d/cmyk.jpg.predict" "$d/cmyk_as_rgb.png.predict"
    status=1
fi
rm "$d/photos/val/cat/cmyk.jpg"
echo "RIFF....WEBP" > "$d/photos/train/cat/extra.webp"
expect_refused "a .webp among the images" "extra.webp: this loader reads PNG and JPEG images" \
    "$d/prog" --data "$d/photos" --max-steps 1
exit $status
