/*
 * fuzz_cifar.c: libFuzzer harness for CIFAR's binary records,
 * ddp_cifar_parse (runtime/cifar.c), which reads whatever file --data
 * points at.
 *
 * The first byte chooses the format (bit 0: CIFAR-100; bit 1: its coarse
 * labels); the rest is the file, parsed twice into one set, as two batch
 * files are. Beyond "no crash, no sanitizer report" it checks what the
 * trainer relies on: a parse succeeds exactly when the file is whole records
 * with every label inside the format's classes; it then appends that many
 * samples, whose labels and pixels are the records', and the set's class
 * count covers every label; a failure leaves the set as it was. Built with
 * ASan and UBSan (make fuzz):
 *
 *   mkdir -p build/fuzz-cifar-corpus && build/fuzz_cifar -max_total_time=600 build/fuzz-cifar-corpus
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cifar.h"       // ddp_cifar_parse, DDP_CIFAR_PIXELS
#include "fuzz_check.h"  // CHECK

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const int hundred = data[0] & 1, coarse = hundred && (data[0] & 2);
    const uint8_t *file = data + 1;
    const size_t len = size - 1;
    const size_t record = (size_t)(hundred ? 2 : 1) + DDP_CIFAR_PIXELS;
    const int classes = !hundred ? 10 : coarse ? 20 : 100, at = hundred && !coarse ? 1 : 0;
    int whole = len > 0 && len % record == 0;
    for (size_t r = 0; whole && r < len / record; r++)
        whole = file[r * record + (size_t)at] < classes;

    DdpDataSet set;
    memset(&set, 0, sizeof set);
    for (int pass = 0; pass < 2; pass++) {
        const int64_t before = set.n;
        DdpStatus st = ddp_cifar_parse(file, len, hundred, coarse, "fuzz", &set);
        CHECK((st == DDP_OK) == whole);
        if (st != DDP_OK) {
            CHECK(set.n == before);
            break;
        }
        CHECK(set.n == before + (int64_t)(len / record));
        CHECK(set.channels == 3 && set.rows == 32 && set.cols == 32);
        for (size_t r = 0; r < len / record; r++) {
            const int32_t label = set.labels[before + (int64_t)r];
            CHECK(label == file[r * record + (size_t)at] && label < set.num_classes && set.num_classes <= classes);
            CHECK(memcmp(set.pixels + ((size_t)before + r) * DDP_CIFAR_PIXELS, file + r * record + record -
                         DDP_CIFAR_PIXELS, DDP_CIFAR_PIXELS) == 0);
        }
    }
    ddp_data_free(&set);
    return 0;
}
