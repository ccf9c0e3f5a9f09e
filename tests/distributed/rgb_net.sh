# Sourced by the data-format scripts (cifar_data.sh, npy_data.sh): a small
# conv net for 3x32x32 images, with batchnorm (statistics of the global
# batch), on stdout.
#   rgb_net CLASSES
rgb_net() {
    cat << NET
net rgb_small
input 3x32x32
conv 3->8 k3; relu; maxpool 2
conv 8->16 k3; batchnorm; relu; maxpool 2
flatten
linear $1
loss cross_entropy
train {
  batch 16
  epochs 1
  optimizer sgd lr=0.05 momentum=0.9
  seed 3
}
NET
}
