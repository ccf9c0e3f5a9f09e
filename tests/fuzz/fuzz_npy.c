/*
 * fuzz_npy.c: libFuzzer harness for NumPy's .npy files (runtime/npy.c),
 * which --data reads as x_train.npy and y_train.npy.
 *
 * The first byte chooses the layout given (0: none, 1: channels first, 2:
 * channels last); the rest is read as an images file and, when that
 * succeeds, also as its labels file. Beyond "no crash, no sanitizer report"
 * it checks what the trainer relies on: a header that is accepted announces
 * exactly the data the file holds; accepted images hold n x c x h x w
 * values, finite if floats; accepted labels are n, each below the class
 * count; a failure leaves nothing allocated. Built with ASan and UBSan
 * (make fuzz):
 *
 *   mkdir -p build/fuzz-npy-corpus && build/fuzz_npy -max_total_time=600 build/fuzz-npy-corpus
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_check.h"  // CHECK
#include "npy.h"         // ddp_npy_header, ddp_npy_images, ddp_npy_labels

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char layout = data[0] % 3 == 1 ? 'f' : data[0] % 3 == 2 ? 'l' : 0;
    const uint8_t *file = data + 1;
    const size_t len = size - 1;
    DdpNpyHeader h;
    if (ddp_npy_header(file, len, "fuzz", &h) == DDP_OK)
        CHECK(h.data_at <= len && h.count * (uint64_t)h.item_bytes == len - h.data_at);

    DdpDataSet set;
    memset(&set, 0, sizeof set);
    if (ddp_npy_images(file, len, "fuzz", layout, &set) != DDP_OK) {
        CHECK(!set.pixels && !set.values && set.n == 0);
        return 0;
    }
    const size_t values = (size_t)set.n * (size_t)set.channels * (size_t)set.rows * (size_t)set.cols;
    CHECK(set.n > 0 && (set.pixels != NULL) != (set.values != NULL));
    CHECK(values == (size_t)h.count);
    for (size_t i = 0; set.values && i < values; i++)
        CHECK(isfinite(set.values[i]));
    /* the same bytes as labels: accepted only as one integer per image */
    if (ddp_npy_labels(file, len, "fuzz", &set) == DDP_OK) {
        CHECK(set.labels != NULL);
        for (int64_t i = 0; i < set.n; i++)
            CHECK(set.labels[i] >= 0 && set.labels[i] < set.num_classes);
    } else {
        CHECK(set.labels == NULL);
    }
    ddp_data_free(&set);
    return 0;
}
