/*
 * train.c: the `train { }` block: batch, epochs, optimizer, schedule, bucket, seed,
 * precision.
 *
 *   train {
 *     batch 64                 (per rank; `batch 256 global`: the global batch)
 *     epochs 10
 *     optimizer sgd lr=0.01 momentum=0.9 weight_decay=5e-4
 *     schedule cosine warmup=200
 *     bucket 25MB
 *     seed 0
 *     precision bf16           (fp32, tf32 or bf16: runtime/precision.h)
 *   }
 *
 * Defaults are PyTorch's where it has them (Adam's betas 0.9,0.999 and eps
 * 1e-8, AdamW's weight decay 0.01, DDP's 25 MB buckets with a 1 MB first one,
 * or a first one of the cap where the cap is smaller)
 * and the DDP tutorial's otherwise (batch 64, 10 epochs, sgd lr 0.01, fp32).
 * A known option that the chosen optimizer or schedule does not use is a
 * warning (it is ignored); an unknown one is an error.
 */
#include "ddpc.h"

#include <string.h>

#include "flags.h"    // DDP_FLAGS_MAX_BATCH, _EPOCHS: the program's limits, which --batch-size and --epochs share
#include "numbers.h"  // DDP_SEED_MAX: the largest seed, .net's and --seed's

enum { MB = 1024 * 1024 };

void train_defaults(TrainConfig *t)
{
    memset(t, 0, sizeof *t);
    t->batch = 64;
    t->epochs = 10;
    t->optimizer = OPT_SGD;
    t->lr = 0.01;
    t->beta1 = 0.9;
    t->beta2 = 0.999;
    t->eps = 1e-8;
    t->schedule = SCHED_CONSTANT;
    t->gamma = 0.1;
    t->step_every = 1;
    t->bucket_cap_bytes = 25 * (int64_t)MB;
    t->first_bucket_bytes = 1 * (int64_t)MB;
    t->seed = 0;
    t->precision = DDP_PRECISION_FP32;
}

static const char *const train_words[] = {"batch", "epochs", "optimizer", "schedule", "bucket", "seed", "precision"};
static const char *const optimizer_words[] = {"sgd", "adam", "adamw"};
static const char *const schedule_words[] = {"constant", "step", "cosine"};
static const char *const sgd_keys[] = {"lr", "momentum", "dampening", "weight_decay", "nesterov"};
static const char *const adam_keys[] = {"lr", "betas", "eps", "weight_decay"};
static const char *const optimizer_keys[] = {"lr", "momentum", "dampening", "weight_decay", "nesterov", "betas", "eps"};
static const char *const schedule_keys[] = {"warmup", "every", "gamma"};

/* The statement's kind word (`sgd`, `cosine`) as an index into WORDS, or -1. */
static int kind_word(Sema *s, const Stmt *st, const char *const *words, int n, const char *what)
{
    Arg *a = sema_take_positional(s, st);
    if (!a || a->val->kind != VAL_WORD) {
        diag_at(s->diag, SEV_ERROR, a ? a->loc : st->word_loc, "%s needs a kind: %s, %s or %s", st->word, words[0],
                words[1], words[2]);
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (strcmp(a->val->text, words[i]) == 0)
            return i;
    const char *near = ddp_suggest_nearest(a->val->text, words, n);
    if (near)
        diag_at(s->diag, SEV_ERROR, a->loc, "unknown %s '%s'; did you mean '%s'?", what,
                diag_quote(s->arena, a->val->text), near);
    else
        diag_at(s->diag, SEV_ERROR, a->loc, "unknown %s '%s'; expected %s, %s or %s", what,
                diag_quote(s->arena, a->val->text), words[0], words[1], words[2]);
    return -1;
}

/* Options known to the language but not used by this kind: warn, ignore. */
static void warn_unused_known(Sema *s, const Stmt *st, const char *kind, const char *const *known, int n_known)
{
    for (Arg *a = st->args; a; a = a->next)
        if (!a->used && a->key && ddpc_word_in(a->key, known, n_known)) {
            a->used = true;
            diag_at(s->diag, SEV_WARNING, a->key_loc, "%s has no effect with %s; ignored", a->key, kind);
        }
}

static void real_option(Sema *s, const Stmt *st, const char *key, double lo, double hi, double *out)
{
    Arg *a = sema_take_key(s, st, key);
    if (a)
        sema_value_real(s, a->val, key, lo, hi, out);
}

/* A beta of Adam's: from 0 up to, not including, 1, as PyTorch's Adam
 * takes it; and below 1 as the float the program computes with, since its
 * bias correction divides by 1 - beta^t. */
static bool beta_option(Sema *s, const Value *v, const char *what, double *out)
{
    if (!sema_value_real(s, v, what, 0, 1, out))
        return false;
    if ((float)*out < 1.0f)
        return true;
    if (*out >= 1)
        diag_at(s->diag, SEV_ERROR, v->loc, "%s must be below 1, as PyTorch's Adam takes it (0 <= beta < 1), not %s",
                what, diag_quote(s->arena, v->text));
    else
        diag_at(s->diag, SEV_ERROR, v->loc, "%s must be below 1, as PyTorch's Adam takes it (0 <= beta < 1), and %s is "
                "1 as the float the program computes with", what, diag_quote(s->arena, v->text));
    return false;
}

static void check_optimizer(Sema *s, const Stmt *st, TrainConfig *t)
{
    int k = kind_word(s, st, optimizer_words, DDPC_COUNT(optimizer_words), "optimizer");
    if (k < 0) {
        for (Arg *a = st->args; a; a = a->next)
            a->used = true; /* options of an unknown optimizer: nothing more to say */
        return;
    }
    /* Start from this optimizer's defaults, whatever an earlier line set. */
    TrainConfig defaults;
    train_defaults(&defaults);
    t->momentum = defaults.momentum;
    t->dampening = defaults.dampening;
    t->nesterov = defaults.nesterov;
    t->beta1 = defaults.beta1;
    t->beta2 = defaults.beta2;
    t->eps = defaults.eps;
    t->optimizer = (OptimizerKind)k;
    t->lr = k == OPT_SGD ? 0.01 : 0.001;
    t->weight_decay = k == OPT_ADAMW ? 0.01 : 0;
    real_option(s, st, "lr", 0, 1e6, &t->lr);
    real_option(s, st, "weight_decay", 0, 1e6, &t->weight_decay);
    if (k == OPT_SGD) {
        real_option(s, st, "momentum", 0, 1e6, &t->momentum);
        real_option(s, st, "dampening", 0, 1e6, &t->dampening);
        Arg *a = sema_take_key(s, st, "nesterov");
        for (Arg *p = st->args; p; p = p->next)
            if (!a && !p->key && !p->used && p->val->kind == VAL_WORD && strcmp(p->val->text, "nesterov") == 0) {
                p->used = true;
                a = p;
            }
        if (a)
            sema_value_bool(s, a, &t->nesterov);
        if (a && t->nesterov && (t->momentum <= 0 || t->dampening != 0))
            diag_at(s->diag, SEV_ERROR, a->loc, "nesterov needs momentum > 0 and dampening 0 (as PyTorch's SGD)");
        warn_unused_known(s, st, "sgd", optimizer_keys, DDPC_COUNT(optimizer_keys));
        sema_report_unused(s, st, sgd_keys, DDPC_COUNT(sgd_keys));
    } else {
        real_option(s, st, "eps", 0, 1, &t->eps);
        Arg *b = sema_take_key(s, st, "betas");
        if (b) {
            const Value *v = b->val;
            if (v->kind != VAL_LIST || !v->items->next || v->items->next->next)
                diag_at(s->diag, SEV_ERROR, v->loc, "betas takes two numbers: betas=0.9,0.999");
            else if (beta_option(s, v->items, "beta1", &t->beta1))
                beta_option(s, v->items->next, "beta2", &t->beta2);
        }
        warn_unused_known(s, st, optimizer_words[k], optimizer_keys, DDPC_COUNT(optimizer_keys));
        sema_report_unused(s, st, adam_keys, DDPC_COUNT(adam_keys));
    }
}

static void check_schedule(Sema *s, const Stmt *st, TrainConfig *t)
{
    int k = kind_word(s, st, schedule_words, DDPC_COUNT(schedule_words), "schedule");
    if (k < 0) {
        for (Arg *a = st->args; a; a = a->next)
            a->used = true;
        return;
    }
    t->schedule = (ScheduleKind)k;
    Arg *a;
    if (k == SCHED_STEP) {
        if ((a = sema_take_key(s, st, "every")))
            sema_value_int(s, a->val, "every", 1, 1 << 30, &t->step_every);
        else
            diag_at(s->diag, SEV_ERROR, st->loc, "schedule step needs every=N (epochs between decays)");
        real_option(s, st, "gamma", 0, 1e6, &t->gamma);
    } else if (k == SCHED_COSINE) {
        if ((a = sema_take_key(s, st, "warmup")))
            sema_value_int(s, a->val, "warmup", 0, (int64_t)1 << 40, &t->warmup);
    }
    warn_unused_known(s, st, schedule_words[k], schedule_keys, DDPC_COUNT(schedule_keys));
    sema_report_unused(s, st, schedule_keys, DDPC_COUNT(schedule_keys));
}

/* batch 64 (per rank), or batch 256 global (the global batch, shared evenly
 * by the ranks: the program checks that the world size divides it). */
static void check_batch(Sema *s, const Stmt *st, TrainConfig *t)
{
    Arg *a = sema_take_positional(s, st);
    if (!a) {
        sema_report_unused(s, st, NULL, 0);
        diag_at(s->diag, SEV_ERROR, st->word_loc, "%s needs a number", st->word);
        return;
    }
    sema_value_int(s, a->val, "batch", 1, DDP_FLAGS_MAX_BATCH, &t->batch);
    Arg *scope = sema_take_positional(s, st);
    if (scope && (scope->val->kind != VAL_WORD || strcmp(scope->val->text, "global") != 0))
        diag_at(s->diag, SEV_ERROR, scope->loc, "batch takes a number and optionally 'global', not '%s'",
                diag_quote(s->arena, scope->val->text));
    t->batch_global = scope != NULL;
    sema_report_unused(s, st, NULL, 0);
}

/* bucket 25MB; a bare number is megabytes, as PyTorch's bucket_cap_mb. */
static void check_bucket(Sema *s, const Stmt *st, TrainConfig *t)
{
    Arg *a = sema_take_positional(s, st);
    sema_report_unused(s, st, NULL, 0);
    if (!a) {
        diag_at(s->diag, SEV_ERROR, st->word_loc, "bucket needs a size, e.g. 'bucket 25MB'");
        return;
    }
    const Value *v = a->val;
    double bytes = v->kind == VAL_SIZE ? v->f : v->kind == VAL_INT || v->kind == VAL_FLOAT ? v->f * MB : -1;
    if (v->kind != VAL_SIZE && v->kind != VAL_INT && v->kind != VAL_FLOAT)
        diag_at(s->diag, SEV_ERROR, a->loc, "bucket needs a size such as 25MB, not '%s'", diag_quote(s->arena, v->text));
    else if (v->overflow || !(bytes >= DDP_BUCKET_LEAST_BYTES && bytes <= (double)DDP_BUCKET_MOST_BYTES))
        diag_at(s->diag, SEV_ERROR, a->loc, "bucket size must be between %d bytes and %lldGB, not %s",
                DDP_BUCKET_LEAST_BYTES, (long long)(DDP_BUCKET_MOST_BYTES >> 30), diag_quote(s->arena, v->text));
    else {
        t->bucket_cap_bytes = (int64_t)bytes;
        t->first_bucket_bytes = ddp_first_bucket_bytes(t->bucket_cap_bytes);
    }
}

void train_check(Sema *s, const Stmt *block)
{
    TrainConfig *t = &s->net->train;
    bool seen[DDPC_COUNT(train_words)] = {false};
    const Arg *seed_arg = NULL; /* held to the epochs once both are read */
    for (const Stmt *st = block; st; st = st->next) {
        if (st->is_error)
            continue;
        int k = -1;
        for (int i = 0; i < DDPC_COUNT(train_words); i++)
            if (strcmp(st->word, train_words[i]) == 0)
                k = i;
        if (k < 0) {
            const char *near = ddp_suggest_nearest(st->word, train_words, DDPC_COUNT(train_words));
            if (!near && layer_kind_find(st->word))
                diag_at(s->diag, SEV_ERROR, st->word_loc, "layer '%s' inside train { }; layers go before it",
                        st->word);
            else if (near)
                diag_at(s->diag, SEV_ERROR, st->word_loc, "unknown train option '%s'; did you mean '%s'?",
                        diag_quote(s->arena, st->word), near);
            else
                diag_at(s->diag, SEV_ERROR, st->word_loc, "unknown train option '%s'", diag_quote(s->arena, st->word));
            continue;
        }
        if (seen[k])
            diag_at(s->diag, SEV_ERROR, st->word_loc, "'%s' given twice in train { }", st->word);
        seen[k] = true;
        if (st->label)
            diag_at(s->diag, SEV_ERROR, st->label_loc, "train options cannot be named");
        if (st->has_block)
            diag_at(s->diag, SEV_ERROR, st->open_loc, "%s takes no block", st->word);
        Arg *a;
        switch (k) {
        case 0: check_batch(s, st, t); break;
        case 1:
        case 5:
            a = sema_take_positional(s, st);
            sema_report_unused(s, st, NULL, 0);
            if (!a)
                diag_at(s->diag, SEV_ERROR, st->word_loc, "%s needs a number", st->word);
            else if (k == 1)
                sema_value_int(s, a->val, "epochs", 1, DDP_FLAGS_MAX_EPOCHS, &t->epochs);
            else { /* the range --seed takes, which overrides it */
                sema_value_u64(s, a->val, "seed", DDP_SEED_MAX, &t->seed);
                seed_arg = a;
            }
            break;
        case 2: check_optimizer(s, st, t); break;
        case 3: check_schedule(s, st, t); break;
        case 4: check_bucket(s, st, t); break;
        case 6: {
            int p = kind_word(s, st, ddp_precision_names, DDP_PRECISION_COUNT, "precision");
            sema_report_unused(s, st, NULL, 0);
            if (p >= 0)
                t->precision = (DdpPrecision)p;
            break;
        }
        }
    }
    /* a seed the program would refuse at its own epochs (it checks again
     * for --seed and --epochs, and where --no-shuffle makes any seed do) */
    if (seed_arg && t->seed > ddp_seed_most(t->epochs))
        diag_at(s->diag, SEV_ERROR, seed_arg->loc, "seed %llu: DistributedSampler shuffles epoch E by the seed plus "
                "E, which passes 2^64 - 1 within the net's %lld epochs; give a seed of at most %llu",
                (unsigned long long)t->seed, (long long)t->epochs, (unsigned long long)ddp_seed_most(t->epochs));
}
