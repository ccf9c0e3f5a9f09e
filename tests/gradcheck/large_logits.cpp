/*
 * large_logits.cpp: the cross-entropy loss and its gradient stay exact at
 * large logits, as PyTorch's: each log-probability is (x - m) - log(sum),
 * never x - (m + log(sum)), whose sum rounds away log(sum) at m's size.
 *
 * It includes a generated source whose loss is cross_entropy (DDP_NET_SOURCE,
 * its main renamed away) and calls its loss kernel on one sample whose
 * logits are 2^20 plus offsets of an eighth (exact in float at that size,
 * where floats lie an eighth apart above 2^20),
 * against the loss and softmax of the offsets alone, in double: the same
 * numbers, since softmax ignores a shift.
 *
 *   large_logits   prints "large_logits: OK" and exits 0, or says what differs.
 */
#define main ddp_generated_main
#include DDP_NET_SOURCE
#undef main

#include <cmath>
#include <cstdio>

int main()
{
    const int k = (int)net.num_classes, label = 1;
    float x[64], dx[64], rows[2];
    double offsets[64], sum = 0.0;
    if (k > 64)
        return 2;
    for (int j = 0; j < k; j++) {
        offsets[j] = (j % 5 - 2) / 8.0; /* -0.25 .. 0.25 */
        x[j] = (float)(1048576.0 + offsets[j]);
        sum += std::exp(offsets[j]);
    }
    const int32_t labels[1] = {label};
    loss_forward_backward(1, 1, x, labels, rows, dx);
    const double loss = std::log(sum) - offsets[label];
    bool ok = std::fabs(rows[0] - loss) <= 1e-6 * loss;
    printf("loss %.9g, expected %.9g\n", rows[0], loss);
    for (int j = 0; j < k; j++) {
        const double g = std::exp(offsets[j]) / sum - (j == label ? 1.0 : 0.0);
        if (std::fabs(dx[j] - g) > 1e-6) {
            printf("d loss / d x[%d]: %.9g, expected %.9g\n", j, dx[j], g);
            ok = false;
        }
    }
    printf("large_logits: %s\n", ok ? "OK" : "FAILED");
    return ok ? 0 : 1;
}
