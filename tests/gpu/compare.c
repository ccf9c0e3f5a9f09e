/*
 * compare.c: the weights of a GPU run against the CPU build's, for
 * tests/gpu/run.sh. A C program (not tools/compare_weights.py) because the GPU
 * machine need not have Python with numpy; the measure is the same:
 *
 *   compare INITIAL CPU GPU TOLERANCE
 *
 * per float tensor, max |gpu - cpu| <= TOLERANCE * max |cpu - initial| + 2^-23 max |cpu|
 * (the update's scale, plus a float32 ulp). Prints a line per tensor and
 * "compare: OK" or "compare: FAILED"; exit 0 or 1 (2: unreadable files).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: compare INITIAL CPU GPU TOLERANCE\n");
        return 2;
    }
    DdpSafetensors *f[3];
    for (int i = 0; i < 3; i++)
        if (ddp_safetensors_open(argv[i + 1], &f[i]) != DDP_OK) {
            fprintf(stderr, "compare: %s\n", ddp_error_message());
            return 2;
        }
    double tol = atof(argv[4]), worst = 0;
    int failed = 0;
    for (int k = 0; k < ddp_safetensors_count(f[1]); k++) {
        const DdpTensor *cpu = ddp_safetensors_tensor(f[1], k);
        const DdpTensor *w0 = ddp_safetensors_find(f[0], cpu->name), *gpu = ddp_safetensors_find(f[2], cpu->name);
        if (!w0 || !gpu || gpu->nbytes != cpu->nbytes) {
            printf("%-28s missing or of another size in a file\n", cpu->name);
            failed++;
            continue;
        }
        if (cpu->dtype != DDP_DTYPE_F32) {
            int same = memcmp(cpu->data, gpu->data, cpu->nbytes) == 0;
            printf("%-28s %s\n", cpu->name, same ? "equal" : "DIFFERENT");
            failed += !same;
            continue;
        }
        const float *a = cpu->data, *b = gpu->data, *i0 = w0->data;
        size_t n = cpu->nbytes / sizeof(float);
        double update = 0, error = 0, scale = 0;
        for (size_t j = 0; j < n; j++) {
            update = fmax(update, fabs((double)a[j] - i0[j]));
            error = fmax(error, fabs((double)a[j] - b[j]));
            scale = fmax(scale, fabs((double)a[j]));
        }
        double ratio = update > 0 ? error / update : 0;
        int ok = error <= tol * update + scale * 0x1p-23;
        worst = fmax(worst, ratio);
        printf("%-28s update %.3e error %.3e ratio %.2e%s\n", cpu->name, update, error, ratio, ok ? "" : "  <-- over");
        failed += !ok;
    }
    printf("compare: %s worst %.2e of the update (tolerance %g)\n", failed ? "FAILED" : "OK", worst, tol);
    for (int i = 0; i < 3; i++)
        ddp_safetensors_close(f[i]);
    return failed ? 1 : 0;
}
