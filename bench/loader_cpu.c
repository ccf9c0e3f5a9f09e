/*
 * loader_cpu.c: how many samples a second the loader makes (loader.h), for
 * bench/loader.sh.
 *
 *   build/loader_cpu DIR WORKERS BATCH EPOCHS [C H W MEAN STD PAD [RESIZE]]
 *
 * Reads DIR's training set as the program does (ddp_data_load: the files
 * decoded), then makes EPOCHS epochs of batches of BATCH with WORKERS
 * threads (0: on this thread, as --workers 0), taking each batch as the
 * trainer would and handing it straight back: the loader alone, as fast as
 * it goes. With C H W..., the batches go through a data { } block of
 * normalize (one mean and std for every channel), a random crop padded by
 * PAD (reflect) and a left-right flip; else through none. An image folder's
 * files are decoded into C x H x W samples (ddp_data_gather on the loader's
 * threads), after RESIZE (the shorter side) and a center crop of H x W when
 * given. Prints one line:
 * the load time and the samples per second, with a check that the last
 * batch equals one made on this thread (OK or FAILED).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"      // ddp_now
#include "data_load.h"  // ddp_data_load
#include "loader.h"

int main(int argc, char **argv)
{
    if (argc != 5 && argc != 11 && argc != 12) {
        fprintf(stderr, "usage: loader_cpu DIR WORKERS BATCH EPOCHS [C H W MEAN STD PAD [RESIZE]]\n");
        return 2;
    }
    int workers = atoi(argv[2]);
    int64_t batch = atoll(argv[3]), epochs = atoll(argv[4]);
    double load_start = ddp_now();
    DdpDataSet set;
    DdpDataOptions options = {0};
    if (argc >= 11)
        options.fit = (DdpImageFit){.channels = atoi(argv[5]), .rows = atoi(argv[6]), .cols = atoi(argv[7])};
    if (argc == 12) {
        options.fit.sizing.resize_shorter = atoi(argv[11]);
        options.fit.sizing.center_h = options.fit.rows;
        options.fit.sizing.center_w = options.fit.cols;
    }
    if (ddp_data_load(argv[1], 1, &options, &set) != DDP_OK) {
        fprintf(stderr, "loader_cpu: %s\n", ddp_error_message());
        return 2;
    }
    double load_s = ddp_now() - load_start;
    double mean[64], stdev[64];
    DdpDataConfig data = {0};
    if (argc >= 11) {
        int c = atoi(argv[5]);
        for (int i = 0; i < c && i < 64; i++) {
            mean[i] = atof(argv[8]);
            stdev[i] = atof(argv[9]);
        }
        data = (DdpDataConfig){.channels = c, .mean = mean, .std = stdev, .crop_h = atoi(argv[6]),
                               .crop_w = atoi(argv[7]), .pad = atoi(argv[10]), .pad_mode = DDP_PAD_REFLECT,
                               .flip_h = 0.5};
    }
    DdpLoaderSpec spec = {.set = &set, .data = &data, .seed = 1, .channels = set.channels, .rows = set.rows,
                          .cols = set.cols, .batch = batch};
    size_t sample = (size_t)set.channels * set.rows * set.cols;
    spec.layout = ddp_batch_layout(batch, (int64_t)sample, 0); /* the floats made on the host, as a CPU build's */
    if (ddp_augment_check(&data, set.channels, set.rows, set.cols) != DDP_OK) {
        fprintf(stderr, "loader_cpu: %s\n", ddp_error_message());
        return 2;
    }
    int64_t *order = malloc((size_t)set.n * sizeof *order);
    void *own = malloc(spec.layout.bytes), *last = NULL;
    float *scratch = malloc(sample * sizeof(float));
    DdpLoader *loader = NULL;
    if (!order || !own || !scratch || (workers > 0 && ddp_loader_create(&loader, workers, workers + 2, &spec) != DDP_OK)) {
        fprintf(stderr, "loader_cpu: cannot start: %s\n", ddp_error_message());
        return 1;
    }
    for (int64_t i = 0; i < set.n; i++)
        order[i] = (i * 7919) % set.n; /* a fixed shuffle when 7919 is prime to n */
    int64_t batches = (set.n + batch - 1) / batch, made = 0;
    double waited = 0, start = ddp_now();
    int ok = 1;
    for (int64_t epoch = 0; epoch < epochs && ok; epoch++) {
        if (loader)
            ddp_loader_start(loader, epoch, order, set.n, 0);
        for (int64_t b = 0; b < batches && ok; b++) {
            int n = (int)(set.n - b * batch < batch ? set.n - b * batch : batch);
            if (loader) {
                int got = 0;
                ok = ddp_loader_take(loader, b, &last, &got, &waited) == DDP_OK && got == n;
                if (ok && !(epoch == epochs - 1 && b == batches - 1))
                    ddp_loader_release(loader, b);
            } else
                ok = ddp_loader_make(&spec, epoch, order + b * batch, n, last = own, scratch) == DDP_OK;
            made += n;
        }
    }
    double seconds = ddp_now() - start;
    /* the last batch again, made here */
    int64_t b = batches - 1;
    int n = (int)(set.n - b * batch);
    void *check = malloc(spec.layout.bytes);
    ok = ok && check && ddp_loader_make(&spec, epochs - 1, order + b * batch, n, check, scratch) == DDP_OK &&
         memcmp(check, last, (size_t)n * sizeof(int64_t)) == 0 &&
         memcmp((char *)check + spec.layout.x, (char *)last + spec.layout.x, (size_t)n * sample * sizeof(float)) == 0 &&
         memcmp((char *)check + spec.layout.labels, (char *)last + spec.layout.labels, (size_t)n * sizeof(int32_t)) == 0;
    printf("%s: %lld samples of %dx%dx%d %s, loaded in %.2f s; --workers %d, batch %lld, %s: %.0f samples/s  %s\n",
           argv[1], (long long)set.n, set.channels, set.rows, set.cols, set.format, load_s, workers, (long long)batch,
           argc == 12   ? "resize, center crop, normalize, crop and flip"
           : argc == 11 ? "normalize, crop and flip"
                        : "no data { }",
           (double)made / seconds, ok ? "OK" : "FAILED");
    ddp_loader_destroy(loader);
    ddp_data_free(&set);
    free(order);
    free(own);
    free(check);
    free(scratch);
    return ok ? 0 : 1;
}
