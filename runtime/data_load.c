/*
 * data_load.c: which reader a --data directory needs (data_load.h).
 */
#include "data_load.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cifar.h"  // ddp_cifar_find, ddp_cifar_load
#include "idx.h"    // ddp_idx_load
#include "image_folder.h"  // ddp_image_folder_find, ddp_image_folder_load, ddp_image_file_load
#include "npy.h"    // ddp_npy_find, ddp_npy_load

/* DDP_BAD_INPUT when OPTIONS' resize or center_crop would apply to PATH,
 * which holds FORMAT, not image files: its images have one size already. */
static DdpStatus no_fitting(const DdpDataOptions *options, const char *path, const char *format)
{
    const DdpImageSizing *z = &options->fit.sizing;
    if (!ddp_image_sizing_any(z))
        return DDP_OK;
    int resize = z->resize_h || z->resize_shorter;
    const char *what = resize && z->center_h ? "resize and center_crop" : resize ? "resize" : "center_crop";
    return DDP_ERR(DDP_BAD_INPUT, "the .net's data { } has %s, which fit image files of many sizes to the input, "
                   "but %s holds data of one size (%s); compile the net without %s for this data", what, path, format,
                   what);
}

/* NOTE: why a CIFAR file's name in DIR is no file (ddp_cifar_find), or "". */
static DdpStatus no_cifar100(const char *dir, const char *note)
{
    return DDP_ERR(DDP_BAD_INPUT, "--coarse-labels picks CIFAR-100's 20 superclasses, but %s holds no CIFAR-100 "
                   "files (train.bin and test.bin)%s", dir, note);
}

DdpStatus ddp_data_load(const char *dir, int train, const DdpDataOptions *options, DdpDataSet *out)
{
    memset(out, 0, sizeof *out);
    if (!dir)
        dir = DDP_DATA_DEFAULT_DIR;
    if (options->channels_first && options->channels_last)
        return DDP_ERR(DDP_BAD_INPUT, "--channels-first and --channels-last: give one");
    DdpCifarFiles cifar;
    /* a name of CIFAR's or NumPy's first file taken by a folder: said where
     * that format, or any, is not found */
    char cifar_note[4200], npy_note[4200] = "", elsewhere[8400];
    int cifar_found = ddp_cifar_find(dir, &cifar, cifar_note, sizeof cifar_note);
    int npy_found = !cifar_found && ddp_npy_find(dir, npy_note, sizeof npy_note);
    snprintf(elsewhere, sizeof elsewhere, "%s%s", cifar_note, npy_note);
    if ((options->channels_first || options->channels_last) && !npy_found) {
        free(cifar.dir);
        return DDP_ERR(DDP_BAD_INPUT, "--channels-%s says how x_train.npy holds its images, but %s holds no NumPy "
                       "files (x_train.npy)%s", options->channels_first ? "first" : "last", dir, npy_note);
    }
    if (!cifar_found && !npy_found && ddp_image_folder_find(dir)) {
        if (options->coarse_labels)
            return no_cifar100(dir, cifar_note);
        return ddp_image_folder_load(dir, train, &options->fit, out);
    }
    /* the other formats: the files first (so that a message names what is
     * missing), then whether the block asks what they cannot give */
    DdpStatus status = cifar_found              ? ddp_cifar_load(&cifar, train, options->coarse_labels, out)
                       : options->coarse_labels ? no_cifar100(dir, cifar_note)
                       : npy_found              ? ddp_npy_load(dir, train, options, out)
                                                : ddp_idx_load(dir, train, elsewhere, out);
    if (status == DDP_OK && (status = no_fitting(options, dir, out->format)) != DDP_OK)
        ddp_data_free(out);
    return status;
}

/* Nonzero when PATH starts as a .npy file does. */
static int is_npy(const char *path)
{
    static const char magic[] = "\x93NUMPY";
    char head[sizeof magic - 1];
    FILE *f = fopen(path, "rb");
    int yes = f && fread(head, 1, sizeof head, f) == sizeof head && memcmp(head, magic, sizeof head) == 0;
    if (f)
        fclose(f);
    return yes;
}

DdpStatus ddp_data_load_inputs(const char *path, const DdpDataOptions *options, DdpDataSet *out)
{
    memset(out, 0, sizeof *out);
    if (!ddp_data_is_file(path))
        return DDP_ERR(DDP_BAD_INPUT, "--predict %s: not a file", path);
    if (ddp_image_name(path) == DDP_IMAGE_READ)
        return ddp_image_file_load(path, &options->fit, out);
    if (ddp_image_name(path) == DDP_IMAGE_NOT_READ)
        return DDP_ERR(DDP_BAD_INPUT, "%s: this loader reads PNG and JPEG images (.png, .jpg, .jpeg); convert this "
                       "one", path);
    DdpStatus status;
    if (is_npy(path)) {
        char layout = options->channels_first ? 'f' : options->channels_last ? 'l' : 0;
        uint8_t *bytes = NULL;
        size_t len = 0;
        out->images_path = strdup(path);
        status = out->images_path ? ddp_data_read_file(path, DDP_NPY_MAX_BYTES, "one .npy file", &bytes, &len)
                                  : DDP_ERR(DDP_FAIL, "out of memory");
        if (status == DDP_OK)
            status = ddp_npy_images(bytes, len, path, layout, out);
        free(bytes);
    } else
        status = ddp_idx_images(path, out);
    if (status == DDP_OK && !(out->labels = calloc((size_t)out->n + 1, sizeof *out->labels)))
        status = DDP_ERR(DDP_FAIL, "out of memory");
    if (status == DDP_OK)
        status = no_fitting(options, path, out->format);
    if (status != DDP_OK)
        ddp_data_free(out);
    return status;
}
