/*
 * data.c: the `data { }` block: what happens to a sample between the data
 * set and the net.
 *
 *   data {
 *     normalize mean=0.49,0.48,0.45 std=0.25,0.24,0.26   (one value, or one per channel)
 *     random_crop 32 pad=4            (or 32x28; padding zero, or `reflect`)
 *     flip horizontal                 (or vertical; p=0.5 as torchvision's)
 *   }
 *
 * The order is torchvision's usual one whatever order the lines come in:
 * the crop, then the flips, on pixel / 255, then normalize. The crop and
 * the flips happen in training only, drawn from (seed, epoch, sample index)
 * so that no world size or batch split changes them (runtime/augment.h);
 * normalize happens to every sample, test and --predict inputs included.
 *
 * What needs the net's input shape (the channels normalize counts, the
 * crop's size) is checked by data_check_input once the file is read, since
 * the block may come before the layers.
 */
#include "ddpc.h"

#include <math.h>
#include <string.h>

#include "augment.h"  // DDP_AUGMENT_MOST_PAD: the widest crop and padding the runtime takes

typedef enum { DATA_NORMALIZE, DATA_RANDOM_CROP, DATA_FLIP, DATA_RESIZE, DATA_CENTER_CROP, DATA_WORDS } DataWord;
static const char *const data_words[DATA_WORDS] = {"normalize", "random_crop", "flip", "resize", "center_crop"};
static const char *const flip_words[] = {"horizontal", "vertical"};

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

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
    sema_report_unused(s, st, keys, COUNT(keys));
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
            diag_at(s->diag, SEV_ERROR, std->loc,
                    "std must be above 0 in float (1.5e-45 or more): normalize divides by it");
            ok = false;
        }
    if (ok && n_mean != n_std) {
        diag_at(s->diag, SEV_ERROR, std->loc, "normalize has %lld mean%s but %lld std%s; give as many of each",
                (long long)n_mean, n_mean == 1 ? "" : "s", (long long)n_std, n_std == 1 ? "" : "s");
        ok = false;
    }
    if (!ok)
        return;
    d->mean = m;
    d->std = sd;
    d->n_channels = n_mean;
    d->normalize_loc = st->loc;
}

// random_crop = 'random_crop' (INT | HxW) ('pad=' INT)? ('zero' | 'reflect')?
static void check_random_crop(Sema *s, const Stmt *st, DataConfig *d)
{
    Arg *size = sema_take_positional(s, st);
    Arg *mode = sema_take_positional(s, st);
    Arg *pad = sema_take_key(s, st, "pad");
    static const char *const keys[] = {"pad"};
    sema_report_unused(s, st, keys, COUNT(keys));
    int64_t h = 0, w = 0, p = 0;
    enum { MOST = DDP_AUGMENT_MOST_PAD };
    if (!size)
        diag_at(s->diag, SEV_ERROR, st->word_loc, "random_crop needs the crop's size, as in 'random_crop 32 pad=4'");
    else if (size->val->kind == VAL_INT) {
        if (sema_value_int(s, size->val, "the crop's size", 1, MOST, &h))
            w = h;
    } else if (size->val->kind == VAL_DIMS && size->val->ndims == 2 && !size->val->overflow &&
               size->val->dims[0] >= 1 && size->val->dims[0] <= MOST && size->val->dims[1] >= 1 &&
               size->val->dims[1] <= MOST) {
        h = size->val->dims[0];
        w = size->val->dims[1];
    } else
        diag_at(s->diag, SEV_ERROR, size->loc, "the crop's size is a number or height x width (32, or 32x28) "
                "between 1 and %d, not '%s'", MOST, diag_quote(s->arena, size->val->text));
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
static void check_flip(Sema *s, const Stmt *st, DataConfig *d, bool seen[2])
{
    Arg *which = sema_take_positional(s, st);
    Arg *p = sema_take_key(s, st, "p");
    static const char *const keys[] = {"p"};
    sema_report_unused(s, st, keys, COUNT(keys));
    int k = -1;
    for (int i = 0; which && which->val->kind == VAL_WORD && i < COUNT(flip_words); i++)
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

bool data_has_draws(const DataConfig *d)
{
    return d->crop_h > 0 || d->flip_h > 0 || d->flip_v > 0;
}

bool data_any(const DataConfig *d)
{
    return d->mean || data_has_draws(d);
}

void data_check(Sema *s, const Stmt *block)
{
    DataConfig *d = &s->net->data;
    bool seen[DATA_WORDS] = {false}, flips[2] = {false};
    for (const Stmt *st = block; st; st = st->next) {
        if (st->is_error)
            continue;
        int k = -1;
        for (int i = 0; i < DATA_WORDS; i++)
            if (strcmp(st->word, data_words[i]) == 0)
                k = i;
        if (k < 0) {
            const char *near = ddp_suggest_nearest(st->word, data_words, COUNT(data_words));
            if (near)
                diag_at(s->diag, SEV_ERROR, st->word_loc, "unknown data option '%s'; did you mean '%s'?",
                        diag_quote(s->arena, st->word), near);
            else if (layer_kind_find(st->word))
                diag_at(s->diag, SEV_ERROR, st->word_loc, "layer '%s' inside data { }; layers go outside it",
                        st->word);
            else
                diag_at(s->diag, SEV_ERROR, st->word_loc, "unknown data option '%s'; expected normalize, "
                        "random_crop or flip", diag_quote(s->arena, st->word));
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
        case DATA_CENTER_CROP:
        case DATA_WORDS:
            /* torchvision's Resize and CenterCrop fit images of many sizes
             * to one; every format --data reads has one size already. */
            for (Arg *a = st->args; a; a = a->next)
                a->used = true; /* their arguments: nothing more to say */
            diag_at(s->diag, SEV_ERROR, st->word_loc, "%s is for image folders of many sizes, which --data does "
                    "not read yet; the formats it reads hold images of one size", st->word);
            break;
        }
    }
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
