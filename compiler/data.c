/*
 * data.c: the `data { }` block: what happens to a sample between the data
 * set and the net.
 *
 *   data {
 *     normalize mean=0.49,0.48,0.45 std=0.25,0.24,0.26   (one value, or one per channel)
 *     random_crop 32 pad=4            (or 32x28; padding zero, or `reflect`)
 *     flip horizontal                 (or vertical; p=0.5 as torchvision's)
 *     resize 36                       (image files: the shorter side; or 36x36)
 *     center_crop 32                  (image files; or 32x28)
 *   }
 *
 * The order is torchvision's usual one whatever order the lines come in:
 * resize and center_crop as an image file is read, then the random crop,
 * the flips, on pixel / 255, then normalize. The crop and
 * the flips happen in training only, drawn from (seed, epoch, sample index)
 * so that no world size or batch split changes them (runtime/augment.h);
 * normalize happens to every sample, test and --predict inputs included.
 *
 * What needs the net's input shape (the channels normalize counts, the
 * crop's size) is checked by data_check_input once the file is read, since
 * the block may come before the layers.
 */
#include "ddpc.h"

#include <float.h>  // FLT_TRUE_MIN, FLT_MAX: normalize computes in float
#include <math.h>
#include <string.h>

#include "augment.h"       // DDP_AUGMENT_MOST_PAD: the widest crop and padding the runtime takes
#include "image_resize.h"  // DDP_IMAGE_MOST_SIDE: the largest image side the runtime takes

typedef enum { DATA_NORMALIZE, DATA_RANDOM_CROP, DATA_FLIP, DATA_RESIZE, DATA_CENTER_CROP, DATA_WORDS } DataWord;
static const char *const data_words[DATA_WORDS] = {"normalize", "random_crop", "flip", "resize", "center_crop"};
static const char *const flip_words[] = {"horizontal", "vertical"};

/* mean=0.5 or mean=0.49,0.48,0.45: the values into a new array, *N of them;
 * false (reported) when one is not a number in [LO, HI]. */
static bool real_list(Sema *s, const Value *v, const char *what, double lo, double hi, double **out, int64_t *n)
{
    const Value *first = v->kind == VAL_LIST ? v->items : v;
    int64_t count = 0;
    for (const Value *x = first; x; x = v->kind == VAL_LIST ? x->next : NULL)
        count++;
    double *values = arena_alloc(s->arena, sizeof *values * (size_t)count);
    int64_t i = 0;
    bool ok = true;
    for (const Value *x = first; x; x = v->kind == VAL_LIST ? x->next : NULL)
        ok = sema_value_real(s, x, what, lo, hi, &values[i++]) && ok;
    *out = values;
    *n = count;
    return ok;
}

// normalize = 'normalize' 'mean=' reals 'std=' reals
static void check_normalize(Sema *s, const Stmt *st, DataConfig *d)
{
    Arg *mean = sema_take_key(s, st, "mean"), *std = sema_take_key(s, st, "std");
    static const char *const keys[] = {"mean", "std"};
    sema_report_unused(s, st, keys, DDPC_COUNT(keys));
    if (!mean || !std) {
        diag_at(s->diag, SEV_ERROR, st->word_loc, "normalize needs mean= and std=, one value or one per channel, "
                "as in 'normalize mean=0.5 std=0.25'");
        return;
    }
    double *m, *sd;
    int64_t n_mean, n_std;
    bool ok = real_list(s, mean->val, "mean", -1e6, 1e6, &m, &n_mean);
    ok = real_list(s, std->val, "std", 0, 1e6, &sd, &n_std) && ok;
    for (int64_t i = 0; ok && i < n_std; i++)
        if (!((float)sd[i] > 0)) { /* normalize divides in float */
            diag_at(s->diag, SEV_ERROR, std->loc, "std must be above 0 in float (%.2g or more): normalize divides by it",
                    (double)FLT_TRUE_MIN);
            ok = false;
        }
    if (ok && n_mean != n_std) {
        diag_at(s->diag, SEV_ERROR, std->loc, "normalize has %lld mean%s but %lld std%s; give as many of each",
                (long long)n_mean, n_mean == 1 ? "" : "s", (long long)n_std, n_std == 1 ? "" : "s");
        ok = false;
    }
    /* pixels are 0 to 1 (bytes / 255), and the program divides in float, by
     * the std rounded to float: a quotient past float's largest at 0 or 1
     * would give the net inf there, and a NaN loss at the first step; each
     * channel's said */
    const bool counted = ok;
    for (int64_t i = 0; counted && i < n_std; i++)
        if (!isfinite((0.0f - (float)m[i]) / (float)sd[i]) || !isfinite((1.0f - (float)m[i]) / (float)sd[i])) {
            diag_at(s->diag, SEV_ERROR, std->loc, "normalize mean=%g std=%g: (x - mean) / std passes the largest "
                    "float (%.2g) for pixel values of 0 or 1, and the net would see inf", m[i], sd[i],
                    (double)FLT_MAX);
            ok = false;
        }
    if (!ok)
        return;
    d->mean = m;
    d->std = sd;
    d->n_channels = n_mean;
    d->normalize_loc = st->loc;
}

/* A size: N or HxW, each from 1 to MOST, of WORD's statement ST (as in
 * EXAMPLE); *SQUARE says which form it had. False (reported) when missing or bad. */
static bool size_arg(Sema *s, const Stmt *st, const Arg *size, const char *word, const char *example, int64_t most,
                     int64_t *h, int64_t *w, bool *square)
{
    *h = *w = 0;
    *square = size && size->val->kind == VAL_INT;
    if (!size)
        diag_at(s->diag, SEV_ERROR, st->word_loc, "%s needs a size, as in '%s'", word, example);
    else if (*square) {
        if (sema_value_int(s, size->val, arena_printf(s->arena, "%s's size", word), 1, most, h))
            *w = *h;
    } else if (size->val->kind == VAL_DIMS && size->val->ndims == 2 && !size->val->overflow &&
               size->val->dims[0] >= 1 && size->val->dims[0] <= most && size->val->dims[1] >= 1 &&
               size->val->dims[1] <= most) {
        *h = size->val->dims[0];
        *w = size->val->dims[1];
    } else
        diag_at(s->diag, SEV_ERROR, size->loc, "%s's size is a number or height x width (32, or 32x28) between 1 "
                "and %lld, not '%s'", word, (long long)most, diag_quote(s->arena, size->val->text));
    return *h > 0;
}

// random_crop = 'random_crop' (INT | HxW) ('pad=' INT)? ('zero' | 'reflect')?
static void check_random_crop(Sema *s, const Stmt *st, DataConfig *d)
{
    Arg *size = sema_take_positional(s, st);
    Arg *mode = sema_take_positional(s, st);
    Arg *pad = sema_take_key(s, st, "pad");
    static const char *const keys[] = {"pad"};
    sema_report_unused(s, st, keys, DDPC_COUNT(keys));
    int64_t h, w, p = 0;
    bool square;
    enum { MOST = DDP_AUGMENT_MOST_PAD };
    size_arg(s, st, size, "random_crop", "random_crop 32 pad=4", MOST, &h, &w, &square);
    if (pad && !sema_value_int(s, pad->val, "pad", 0, MOST, &p))
        h = 0;
    PadMode pad_mode = PAD_ZERO;
    if (mode && mode->val->kind == VAL_WORD && strcmp(mode->val->text, "reflect") == 0)
        pad_mode = PAD_REFLECT;
    else if (mode && (mode->val->kind != VAL_WORD || strcmp(mode->val->text, "zero") != 0)) {
        diag_at(s->diag, SEV_ERROR, mode->loc, "random_crop pads with 'zero' (the default) or 'reflect', not '%s'",
                diag_quote(s->arena, mode->val->text));
        h = 0;
    }
    if (h == 0 || w == 0)
        return;
    d->crop_h = h;
    d->crop_w = w;
    d->pad = p;
    d->pad_mode = pad_mode;
    d->crop_loc = st->loc;
}

// flip = 'flip' ('horizontal' | 'vertical') ('p=' REAL)?
static void check_flip(Sema *s, const Stmt *st, DataConfig *d, bool seen[DDPC_COUNT(flip_words)])
{
    Arg *which = sema_take_positional(s, st);
    Arg *p = sema_take_key(s, st, "p");
    static const char *const keys[] = {"p"};
    sema_report_unused(s, st, keys, DDPC_COUNT(keys));
    int k = -1;
    for (int i = 0; which && which->val->kind == VAL_WORD && i < DDPC_COUNT(flip_words); i++)
        if (strcmp(which->val->text, flip_words[i]) == 0)
            k = i;
    if (k < 0) {
        diag_at(s->diag, SEV_ERROR, which ? which->loc : st->word_loc, "flip needs a direction: 'flip horizontal' "
                "(left-right) or 'flip vertical'");
        return;
    }
    if (seen[k])
        diag_at(s->diag, SEV_ERROR, which->loc, "'flip %s' given twice in data { }", flip_words[k]);
    seen[k] = true;
    double prob = 0.5;
    if (p && !sema_value_real(s, p->val, "p", 0, 1, &prob))
        return;
    if (prob == 0)
        diag_at(s->diag, SEV_WARNING, p->loc, "flip %s with p=0 never flips; ignored", flip_words[k]);
    *(k == 0 ? &d->flip_h : &d->flip_v) = prob;
    d->flip_loc[k] = st->loc;
}

// resize = 'resize' (INT | HxW);  center_crop = 'center_crop' (INT | HxW)
static void check_fitting(Sema *s, const Stmt *st, DataConfig *d, DataWord word)
{
    Arg *size = sema_take_positional(s, st);
    sema_report_unused(s, st, NULL, 0);
    int64_t h, w;
    bool square;
    if (word == DATA_RESIZE) {
        if (!size_arg(s, st, size, "resize", "resize 36 (the shorter side) or resize 32x32", DDP_IMAGE_MOST_SIDE, &h,
                      &w, &square))
            return;
        if (square) /* torchvision's Resize(36): the shorter side */
            d->resize_shorter = h;
        else {
            d->resize_h = h;
            d->resize_w = w;
        }
        d->resize_loc = st->loc;
    } else if (size_arg(s, st, size, "center_crop", "center_crop 32", DDP_IMAGE_MOST_SIDE, &h, &w, &square)) {
        d->center_h = h;
        d->center_w = w;
        d->center_loc = st->loc;
    }
}

bool data_has_fitting(const DataConfig *d)
{
    return d->resize_h > 0 || d->resize_shorter > 0 || d->center_h > 0;
}

bool data_has_draws(const DataConfig *d)
{
    return d->crop_h > 0 || d->flip_h > 0 || d->flip_v > 0;
}

bool data_any(const DataConfig *d)
{
    return d->mean || data_has_draws(d) || data_has_fitting(d);
}

void data_check(Sema *s, const Stmt *block)
{
    DataConfig *d = &s->net->data;
    bool seen[DATA_WORDS] = {false}, flips[DDPC_COUNT(flip_words)] = {false};
    for (const Stmt *st = block; st; st = st->next) {
        if (st->is_error)
            continue;
        int k = -1;
        for (int i = 0; i < DATA_WORDS; i++)
            if (strcmp(st->word, data_words[i]) == 0)
                k = i;
        if (k < 0) {
            const char *near = ddp_suggest_nearest(st->word, data_words, DDPC_COUNT(data_words));
            if (near)
                diag_at(s->diag, SEV_ERROR, st->word_loc, "unknown data option '%s'; did you mean '%s'?",
                        diag_quote(s->arena, st->word), near);
            else if (layer_kind_find(st->word))
                diag_at(s->diag, SEV_ERROR, st->word_loc, "layer '%s' inside data { }; layers go outside it",
                        st->word);
            else
                diag_at(s->diag, SEV_ERROR, st->word_loc, "unknown data option '%s'; expected normalize, "
                        "random_crop, flip, resize or center_crop", diag_quote(s->arena, st->word));
            continue;
        }
        if (st->label)
            diag_at(s->diag, SEV_ERROR, st->label_loc, "data options cannot be named");
        if (st->has_block)
            diag_at(s->diag, SEV_ERROR, st->open_loc, "%s takes no block", st->word);
        if (seen[k] && k != DATA_FLIP) /* flip: once per direction, check_flip says */
            diag_at(s->diag, SEV_ERROR, st->word_loc, "'%s' given twice in data { }", st->word);
        seen[k] = true;
        switch ((DataWord)k) {
        case DATA_NORMALIZE: check_normalize(s, st, d); break;
        case DATA_RANDOM_CROP: check_random_crop(s, st, d); break;
        case DATA_FLIP: check_flip(s, st, d, flips); break;
        case DATA_RESIZE:
        case DATA_CENTER_CROP: check_fitting(s, st, d, (DataWord)k); break;
        case DATA_WORDS:
            break;
        }
    }
}

/* resize and center_crop against the input: they make images (grey or RGB)
 * of the input's size. */
static void check_fitting_input(Sema *s, DataConfig *d, Shape input)
{
    if (!data_has_fitting(d))
        return;
    Loc where = d->center_h ? d->center_loc : d->resize_loc;
    const char *word = d->center_h ? "center_crop" : "resize";
    int64_t h = input.rank == 3 ? input.d[1] : 0, w = input.rank == 3 ? input.d[2] : 0;
    if (input.rank != 3 || (input.d[0] != 1 && input.d[0] != 3))
        diag_at(s->diag, SEV_ERROR, where, "%s makes images of 1 channel (grey) or 3 (RGB), but the input is %s",
                word, shape_str(s->arena, input));
    else if (d->center_h && (d->center_h != h || d->center_w != w))
        diag_at(s->diag, SEV_ERROR, where, "center_crop %lldx%lld must be the input's %lldx%lld: the net sees the "
                "crop", (long long)d->center_h, (long long)d->center_w, (long long)h, (long long)w);
    else if (!d->center_h && d->resize_shorter)
        diag_at(s->diag, SEV_ERROR, where, "resize %lld sets the shorter side only, so images of other shapes "
                "come out of other sizes; add 'center_crop %lldx%lld', or resize to %lldx%lld",
                (long long)d->resize_shorter, (long long)h, (long long)w, (long long)h, (long long)w);
    else if (!d->center_h && (d->resize_h != h || d->resize_w != w))
        diag_at(s->diag, SEV_ERROR, where, "resize %lldx%lld must be the input's %lldx%lld, or be followed by "
                "center_crop %lldx%lld", (long long)d->resize_h, (long long)d->resize_w, (long long)h, (long long)w,
                (long long)h, (long long)w);
    else
        return;
    d->resize_h = d->resize_w = d->resize_shorter = d->center_h = d->center_w = 0;
}

void data_check_input(Sema *s, Shape input)
{
    DataConfig *d = &s->net->data;
    if (input.rank == 0)
        return;
    int64_t channels = input.rank == 3 ? input.d[0] : 1;
    if (d->mean && d->n_channels != 1 && d->n_channels != channels) {
        diag_at(s->diag, SEV_ERROR, d->normalize_loc, "normalize has %lld means and stds, but the input %s has %lld "
                "channel%s; give one value for all, or one per channel", (long long)d->n_channels,
                shape_str(s->arena, input), (long long)channels, channels == 1 ? "" : "s");
        d->mean = d->std = NULL;
    } else if (d->mean && d->n_channels == 1 && channels > 1) {
        double *mean = arena_alloc(s->arena, sizeof *mean * (size_t)channels);
        double *std = arena_alloc(s->arena, sizeof *std * (size_t)channels);
        for (int64_t c = 0; c < channels; c++) {
            mean[c] = d->mean[0];
            std[c] = d->std[0];
        }
        d->mean = mean;
        d->std = std;
        d->n_channels = channels;
    }
    check_fitting_input(s, d, input);
    if (data_has_draws(d) && input.rank != 3) {
        Loc where = d->crop_h ? d->crop_loc : d->flip_loc[d->flip_h > 0 ? 0 : 1];
        diag_at(s->diag, SEV_ERROR, where, "%s needs images (input CxHxW), but the input is %s features",
                d->crop_h ? "random_crop" : "flip", shape_str(s->arena, input));
        d->crop_h = d->crop_w = 0;
        d->flip_h = d->flip_v = 0;
        return;
    }
    if (!d->crop_h)
        return;
    int64_t h = input.d[1], w = input.d[2];
    /* What the net sees is the crop: the data's images are the input's size,
     * padded, and the window of the input's size moves over them. */
    if (d->crop_h != h || d->crop_w != w)
        diag_at(s->diag, SEV_ERROR, d->crop_loc, "random_crop %lldx%lld must be the input's %lldx%lld: the net sees "
                "the crop (pad= pads the sample before it is taken)", (long long)d->crop_h, (long long)d->crop_w,
                (long long)h, (long long)w);
    else if (d->pad_mode == PAD_REFLECT && (d->pad >= h || d->pad >= w))
        diag_at(s->diag, SEV_ERROR, d->crop_loc, "reflect padding needs pad= below the image's %lldx%lld, not %lld",
                (long long)h, (long long)w, (long long)d->pad);
    else if (d->pad == 0)
        diag_at(s->diag, SEV_WARNING, d->crop_loc, "random_crop %lldx%lld of %lldx%lld images with no pad= "
                "always takes the whole image; ignored", (long long)h, (long long)w, (long long)h, (long long)w);
    else
        return;
    d->crop_h = d->crop_w = 0;
}

/* A size as the data { } block takes it: "32", or "32x28". */
static void print_size(FILE *out, int64_t h, int64_t w)
{
    if (h == w)
        fprintf(out, "%lld", (long long)h);
    else
        fprintf(out, "%lldx%lld", (long long)h, (long long)w);
}

/* Normalize's per-channel values: "0.4914,0.4822,0.4465", or one value where
 * every channel has it (data_check_input gave one value to every channel). */
static void print_channels(FILE *out, const double *v, int64_t n)
{
    bool same = true;
    for (int64_t c = 1; c < n; c++)
        same &= v[c] == v[0];
    for (int64_t c = 0; c < (same ? 1 : n); c++)
        fprintf(out, "%s%g", c ? "," : "", v[c]);
}

/* `ddpc --summary`'s line for the block: its words (numbers to 6 digits), in
 * the order the program applies them (runtime/augment.h); nothing without
 * one. */
void data_summary(FILE *out, const DataConfig *d)
{
    if (!data_any(d))
        return;
    const char *sep = "";
    fprintf(out, "data:         ");
    if (d->resize_shorter > 0 || d->resize_h > 0) {
        /* resize N is the shorter side's, resize HxW both sides' */
        fprintf(out, "resize ");
        if (d->resize_shorter > 0)
            fprintf(out, "%lld", (long long)d->resize_shorter);
        else
            fprintf(out, "%lldx%lld", (long long)d->resize_h, (long long)d->resize_w);
        sep = ", ";
    }
    if (d->center_h > 0) {
        fprintf(out, "%scenter_crop ", sep);
        print_size(out, d->center_h, d->center_w);
        sep = ", ";
    }
    if (d->crop_h > 0) {
        fprintf(out, "%srandom_crop ", sep);
        print_size(out, d->crop_h, d->crop_w);
        fprintf(out, " pad=%lld%s", (long long)d->pad, d->pad_mode == PAD_REFLECT ? " reflect" : "");
        sep = ", ";
    }
    const double flips[DDPC_COUNT(flip_words)] = {d->flip_h, d->flip_v};
    for (int k = 0; k < DDPC_COUNT(flip_words); k++)
        if (flips[k] > 0) {
            fprintf(out, "%sflip %s p=%g", sep, flip_words[k], flips[k]);
            sep = ", ";
        }
    if (d->mean) {
        fprintf(out, "%snormalize mean=", sep);
        print_channels(out, d->mean, d->n_channels);
        fprintf(out, " std=");
        print_channels(out, d->std, d->n_channels);
    }
    /* the draws apply in training only; resize, center_crop and normalize to every sample */
    const bool flips_any = d->flip_h > 0 || d->flip_v > 0;
    if (d->crop_h > 0 || flips_any)
        fprintf(out, " (%s%s%s in training only)", d->crop_h > 0 ? "random_crop" : "",
                d->crop_h > 0 && flips_any ? " and " : "", flips_any ? "flip" : "");
    fprintf(out, "\n");
}
