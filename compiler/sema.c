/*
 * sema.c: from what the user wrote (AST) to what it means (Net).
 *
 * The top-level statements are walked once, in order, carrying the value
 * (tensor) the next layer consumes. Each layer word is looked up in
 * layers.c's table, whose check function reads the arguments and works out
 * the output shape; `residual { }` lowers its body against the same input and
 * then joins with an OP_RESIDUAL_ADD node; `train { }` goes to train.c.
 *
 * Errors never stop the walk: a layer whose input is unknown (after a syntax
 * error or a bad layer above it) still has its arguments checked, but shape
 * checks are skipped, so one mistake gives one message, not a cascade.
 *
 * Names: a layer is named by its label (`stem: conv ...`) or by its kind and
 * its ordinal among layers of that kind (the third conv is conv3, named or
 * not, so naming one layer renames no other). Names are checked unique with a
 * hash table, which keeps a 10,000-layer net linear; then each label against
 * the names the generated code derives from it and from the others (see
 * check_generated_names).
 */
#include "ddpc.h"

#include <float.h>  // FLT_TRUE_MIN: the least float, below which a real the net sets reads as 0
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "net_name.h"  // ddp_net_name_byte: the bytes a net's name holds, as checkpoints' file names take it
#include "numbers.h"   // ddp_parse_u64: a seed as the program's --seed reads it

enum { NAME_TABLE_MIN = 64 };

typedef struct {
    const char **keys;
    int *nodes;
    int cap, used;
} NameTable;

/* The suffixes of a kind's names in the generated code (gen_name_suffixes),
 * and their heads: each one's part before a later '_' (_bias of
 * _bias_relu_forward, _out of _out_at). LONGEST_NAME_SUFFIX bounds a
 * suffix, and so a head: a label is looked up by its last parts only, which
 * keeps a long label's check linear. */
typedef struct {
    const char *suffix[MAX_NAME_SUFFIXES];
    const char *head[MAX_NAME_SUFFIXES];
    int n_suffixes, n_heads;
} NameSuffixes;

typedef struct {
    int node;
    Loc loc;
} Label;

typedef struct {
    Sema s;
    NameTable names;
    Label *labels;          /* in the order named: a residual's after its body's */
    int n_labels, labels_cap;
    int kind_counts[OP_COUNT];
    int current;            /* value the next layer consumes; -1 before input */
    bool seen_input, seen_loss, seen_net, seen_train, seen_data, seen_layer;
    const Stmt *last_layer;
    int depth;
} Walk;

//
// Helpers for layers.c and train.c
//

int64_t checked_mul(int64_t a, int64_t b)
{
    int64_t r;
    if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r) || r > ((int64_t)1 << 62))
        return -1;
    return r;
}

int64_t checked_add(int64_t a, int64_t b)
{
    int64_t r;
    if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &r) || r > ((int64_t)1 << 62))
        return -1;
    return r;
}

int64_t shape_numel(Shape sh)
{
    int64_t n = 1;
    for (int i = 0; i < sh.rank; i++)
        n = checked_mul(n, sh.d[i]);
    return sh.rank ? n : -1;
}

const char *shape_str(Arena *a, Shape sh)
{
    switch (sh.rank) {
    case 1: return arena_printf(a, "%lld", (long long)sh.d[0]);
    case 3: return arena_printf(a, "%lldx%lldx%lld", (long long)sh.d[0], (long long)sh.d[1], (long long)sh.d[2]);
    default: return "?";
    }
}

Arg *sema_take_positional(Sema *s, const Stmt *st)
{
    (void)s;
    for (Arg *a = st->args; a; a = a->next)
        if (!a->key && !a->used) {
            a->used = true;
            return a;
        }
    return NULL;
}

Arg *sema_take_key(Sema *s, const Stmt *st, const char *key)
{
    Arg *found = NULL;
    for (Arg *a = st->args; a; a = a->next) {
        if (!a->key || strcmp(a->key, key) != 0)
            continue;
        if (found) {
            diag_at(s->diag, SEV_ERROR, a->key_loc, "'%s' given twice", key);
            a->used = true;
            continue;
        }
        a->used = true;
        found = a;
    }
    return found;
}

void sema_report_unused(Sema *s, const Stmt *st, const char *const *keys, int n_keys)
{
    for (Arg *a = st->args; a; a = a->next) {
        if (a->used)
            continue;
        a->used = true;
        if (a->key) {
            const char *near = ddp_suggest_nearest(a->key, keys, n_keys);
            if (near)
                diag_at(s->diag, SEV_ERROR, a->key_loc, "%s has no option '%s'; did you mean '%s'?", st->word,
                        diag_quote(s->arena, a->key), near);
            else
                diag_at(s->diag, SEV_ERROR, a->key_loc, "%s has no option '%s'", st->word,
                        diag_quote(s->arena, a->key));
        } else {
            const char *near = a->val->kind == VAL_WORD ? ddp_suggest_nearest(a->val->text, keys, n_keys) : NULL;
            if (near && strcmp(near, a->val->text) == 0) /* an option's name, without its value */
                diag_at(s->diag, SEV_ERROR, a->loc, "%s's option '%s' needs a value: %s=VALUE", st->word,
                        diag_quote(s->arena, a->val->text), diag_quote(s->arena, a->val->text));
            else if (near)
                diag_at(s->diag, SEV_ERROR, a->loc, "unexpected '%s' after %s; did you mean '%s'?",
                        diag_quote(s->arena, a->val->text), st->word, near);
            else
                diag_at(s->diag, SEV_ERROR, a->loc, "unexpected '%s' after %s", diag_quote(s->arena, a->val->text),
                        st->word);
        }
    }
}

/* A list (`k=5,5`) where one value goes: the list as written, since "not a
 * whole number" would blame the numbers in it. */
static bool refuse_list(Sema *s, const Value *v, const char *what)
{
    if (v->kind != VAL_LIST)
        return false;
    diag_at(s->diag, SEV_ERROR, v->loc, "%s takes one value, not the list '%s'", what, diag_quote(s->arena, v->text));
    return true;
}

/* Whether V is one whole number (said where not): sema_value_int's and
 * sema_value_u64's first check. */
static bool one_whole_number(Sema *s, const Value *v, const char *what)
{
    if (refuse_list(s, v, what))
        return false;
    if (v->kind != VAL_INT) {
        diag_at(s->diag, SEV_ERROR, v->loc, "%s must be a whole number, not '%s'", what, diag_quote(s->arena, v->text));
        return false;
    }
    return true;
}

bool sema_value_int(Sema *s, const Value *v, const char *what, int64_t lo, int64_t hi, int64_t *out)
{
    if (!one_whole_number(s, v, what))
        return false;
    if (v->overflow || v->i < lo || v->i > hi) {
        diag_at(s->diag, SEV_ERROR, v->loc, "%s must be between %lld and %lld, not %s", what, (long long)lo,
                (long long)hi, diag_quote(s->arena, v->text));
        return false;
    }
    *out = v->i;
    return true;
}

bool sema_value_u64(Sema *s, const Value *v, const char *what, uint64_t hi, uint64_t *out)
{
    if (!one_whole_number(s, v, what))
        return false;
    uint64_t u; /* the text, as the scanner's int64 overflows past 2^63-1 */
    if (!ddp_parse_u64(v->text, &u) || u > hi) {
        diag_at(s->diag, SEV_ERROR, v->loc, "%s must be between %d and %llu, not %s", what, 0, (unsigned long long)hi,
                diag_quote(s->arena, v->text));
        return false;
    }
    *out = u;
    return true;
}

/* Whether a number's significand, as written, has a digit other than 0. */
static bool written_nonzero(const char *text)
{
    for (; *text && *text != 'e' && *text != 'E'; text++)
        if (*text >= '1' && *text <= '9')
            return true;
    return false;
}

bool sema_value_real(Sema *s, const Value *v, const char *what, double lo, double hi, double *out)
{
    if (refuse_list(s, v, what))
        return false;
    if (v->kind != VAL_INT && v->kind != VAL_FLOAT) {
        diag_at(s->diag, SEV_ERROR, v->loc, "%s must be a number, not '%s'", what, diag_quote(s->arena, v->text));
        return false;
    }
    if (v->overflow || !(v->f >= lo && v->f <= hi)) {
        diag_at(s->diag, SEV_ERROR, v->loc, "%s must be between %g and %g, not %s", what, lo, hi,
                diag_quote(s->arena, v->text));
        return false;
    }
    /* Every real the net sets is a float in the program, which would run
     * with 0 for what no float holds (1e-50; 1e-400, which is 0 even as a
     * double): refused, as the program's own flags refuse it (flags.c). */
    if ((float)v->f == 0 && written_nonzero(v->text)) {
        diag_at(s->diag, SEV_ERROR, v->loc, "%s must be 0 or at least %.2g, the least a float holds (the program "
                "computes in float), not %s", what, (double)FLT_TRUE_MIN, diag_quote(s->arena, v->text));
        return false;
    }
    *out = v->f;
    return true;
}

/* `nesterov`, `nesterov=true`, `sync=off`... */
bool sema_value_bool(Sema *s, const Arg *a, bool *out)
{
    if (!a->key) {
        *out = true;
        return true;
    }
    static const char *const yes[] = {"true", "on", "yes", "1"}, *const no[] = {"false", "off", "no", "0"};
    const bool said_yes = ddpc_word_in(a->val->text, yes, DDPC_COUNT(yes));
    if (said_yes || ddpc_word_in(a->val->text, no, DDPC_COUNT(no))) {
        *out = said_yes;
        return true;
    }
    diag_at(s->diag, SEV_ERROR, a->val->loc, "%s must be true or false (on/off, yes/no, 1/0), not '%s'", a->key,
            diag_quote(s->arena, a->val->text));
    return false;
}

static void *grow(void *p, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return p;
    int cap2 = *cap ? *cap * 2 : 16;
    while (cap2 < need)
        cap2 *= 2;
    void *q = realloc(p, (size_t)cap2 * elem);
    if (!q) {
        fputs("ddpc: internal error: out of memory\n", stderr);
        abort();
    }
    *cap = cap2;
    return q;
}

void sema_add_param(Sema *s, Node *n, ParamRole role, int ndim, const int64_t *shape)
{
    Net *net = s->net;
    net->params = grow(net->params, &s->params_cap, net->n_params + 1, sizeof *net->params);
    if (n->n_params == 0)
        n->first_param = net->n_params;
    Param *p = &net->params[net->n_params++];
    memset(p, 0, sizeof *p);
    p->name = arena_printf(s->arena, "%s.%s", n->name, gen_param_word(role));
    p->node = (int)(n - net->nodes);
    p->role = role;
    p->trainable = role == PARAM_WEIGHT || role == PARAM_BIAS;
    p->is_int64 = role == PARAM_NUM_BATCHES_TRACKED;
    p->ndim = ndim;
    p->numel = 1;
    for (int i = 0; i < ndim; i++) {
        p->shape[i] = shape[i];
        p->numel = checked_mul(p->numel, shape[i]);
    }
    n->n_params++;
    if (p->trainable)
        n->params = checked_add(n->params, p->numel);
}

//
// Names
//

static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Returns the node already holding NAME, or -1 after recording it for NODE. */
static int names_claim(Walk *w, const char *name, int node)
{
    NameTable *t = &w->names;
    if (2 * (t->used + 1) > t->cap) {
        int cap = t->cap ? t->cap * 2 : NAME_TABLE_MIN;
        const char **keys = calloc((size_t)cap, sizeof *keys);
        int *nodes = calloc((size_t)cap, sizeof *nodes);
        if (!keys || !nodes) {
            fputs("ddpc: internal error: out of memory\n", stderr);
            abort();
        }
        for (int i = 0; i < t->cap; i++) {
            if (!t->keys[i])
                continue;
            size_t j = hash_name(t->keys[i]) & (size_t)(cap - 1);
            while (keys[j])
                j = (j + 1) & (size_t)(cap - 1);
            keys[j] = t->keys[i];
            nodes[j] = t->nodes[i];
        }
        free(t->keys);
        free(t->nodes);
        t->keys = keys;
        t->nodes = nodes;
        t->cap = cap;
    }
    size_t j = hash_name(name) & (size_t)(t->cap - 1);
    while (t->keys[j]) {
        if (strcmp(t->keys[j], name) == 0)
            return t->nodes[j];
        j = (j + 1) & (size_t)(t->cap - 1);
    }
    t->keys[j] = name;
    t->nodes[j] = node;
    t->used++;
    return -1;
}

/* The node holding NAME, or -1. */
static int names_find(const NameTable *t, const char *name)
{
    if (!t->cap)
        return -1;
    size_t j = hash_name(name) & (size_t)(t->cap - 1);
    while (t->keys[j]) {
        if (strcmp(t->keys[j], name) == 0)
            return t->nodes[j];
        j = (j + 1) & (size_t)(t->cap - 1);
    }
    return -1;
}

/* ORDINAL: the layer's place among layers of its kind, from 1. */
static void name_node(Walk *w, const Stmt *st, Node *n, const char *prefix, int ordinal)
{
    Sema *s = &w->s;
    const char *name = st->label ? st->label : arena_printf(s->arena, "%s%d", prefix, ordinal);
    if (n->op == OP_LOSS && !st->label)
        name = "loss";
    n->name = name;
    n->labeled = st->label != NULL;
    /* the generated code names kernels and buffers after layers: ddp_ is the
     * runtime's, d_ its gradients' (d_conv1_out, d_conv1_weight: a layer d_conv1
     * next to a conv1 would clash) */
    size_t gradient = strlen(GEN_GRADIENT_PREFIX);
    int reserved = !st->label ? 0 : strncasecmp(st->label, "ddp_", 4) == 0 ? 4
                   : strncmp(st->label, GEN_GRADIENT_PREFIX, gradient) == 0 ? (int)gradient : 0;
    if (reserved)
        diag_at(s->diag, SEV_ERROR, st->label_loc, "layer names starting with '%.*s' are reserved", reserved, st->label);
    int self = (int)(n - s->net->nodes);
    if (st->label) {
        w->labels = grow(w->labels, &w->labels_cap, w->n_labels + 1, sizeof *w->labels);
        w->labels[w->n_labels++] = (Label){self, st->label_loc};
    }
    int other = names_claim(w, name, self);
    if (other < 0)
        return;
    const Node *o = &s->net->nodes[other];
    if (st->label)
        diag_at(s->diag, SEV_ERROR, st->label_loc, "layer name '%s' is already used by the %s at line %d",
                diag_quote(s->arena, name), o->kind_word, o->line);
    else
        diag_at(s->diag, SEV_ERROR, st->word_loc,
                "this %s would be named '%s', which the %s at line %d already uses; name one of them", st->word,
                name, o->kind_word, o->line);
}

//
// Names in the generated code
//
// The generated code names what belongs to a layer after it, as
// gen_names.c spells it: its output conv1_out, parameters conv1_weight,
// scratch maxpool1_argmax, their offsets conv1_out_at, kernels
// relu1_forward, bn1_sums_backward, and a product's kernels after the bias
// and activation they add, conv1_bias_relu_forward (gradients too, as
// d_conv1_out: no name may start with d_); gen_name_suffixes lists what
// those names add to a kind's, from the same functions. Two layers
// whose names differ by the head of such a suffix can name one thing twice:
// a linear l with its sigmoid fused has the kernel l_bias_sigmoid_forward,
// and so has a sigmoid named l_bias_sigmoid, which the host compiler then
// refuses. So each label is checked against the names that differ from it by
// such a head, by the layers' kinds rather than by what the plan makes of
// them (which activation fuses, which layout): a label refused here may have
// been safe in this net's program, but one accepted is safe in every
// program of the net. Names made of a kind and its ordinal (conv1) end in a
// digit, which no suffix does, so two of those never meet.
//

static void add_head(const char **out, int *n, const char *head)
{
    if (*n == MAX_NAME_SUFFIXES) {
        fputs("ddpc: internal error: sema.c: more name suffixes than MAX_NAME_SUFFIXES\n", stderr);
        abort();
    }
    out[(*n)++] = head;
}

/* N's suffixes, made once per kind and bias (MADE and READY: 2 per kind). */
static const NameSuffixes *suffixes_of(Walk *w, NameSuffixes *made, bool *ready, const Node *n)
{
    int k = 2 * (int)n->op + n->bias;
    NameSuffixes *x = &made[k];
    if (ready[k])
        return x;
    ready[k] = true;
    x->n_suffixes = gen_name_suffixes(w->s.arena, n->op, n->bias, x->suffix, MAX_NAME_SUFFIXES);
    x->n_heads = 0;
    for (int i = 0; i < x->n_suffixes; i++)
        for (const char *u = strchr(x->suffix[i] + 1, '_'); u; u = strchr(u + 1, '_')) {
            size_t len = (size_t)(u - x->suffix[i]);
            bool seen = false;
            for (int h = 0; h < x->n_heads && !seen; h++)
                seen = strlen(x->head[h]) == len && strncmp(x->head[h], x->suffix[i], len) == 0;
            if (!seen)
                add_head(x->head, &x->n_heads, arena_strndup(w->s.arena, x->suffix[i], len));
        }
    return x;
}

static bool suffix_in(const NameSuffixes *x, const char *suffix)
{
    for (int i = 0; i < x->n_suffixes; i++)
        if (strcmp(x->suffix[i], suffix) == 0)
            return true;
    return false;
}

/* Of two layers' names, one the other followed by TAIL: the suffix of the
 * shorter's kind that is TAIL followed by one of the longer's kind, if any.
 * The shorter name followed by it is a name of both. */
static const char *meeting_suffix(const NameSuffixes *shorter, const char *tail, const NameSuffixes *longer)
{
    size_t n = strlen(tail);
    for (int i = 0; i < shorter->n_suffixes; i++)
        if (strncmp(shorter->suffix[i], tail, n) == 0 && shorter->suffix[i][n] &&
            suffix_in(longer, shorter->suffix[i] + n))
            return shorter->suffix[i];
    return NULL;
}

static void *checked_realloc(void *p, size_t size)
{
    void *q = realloc(p, size);
    if (!q) {
        fputs("ddpc: internal error: out of memory\n", stderr);
        abort();
    }
    return q;
}

/* Refuses each label one of whose generated names is another layer's, or
 * the generated code's own; a pair of labels is reported once, at the one
 * named later. */
static void check_generated_names(Walk *w)
{
    if (w->n_labels == 0)
        return;
    Sema *s = &w->s;
    const Node *nodes = s->net->nodes;
    NameSuffixes *made = checked_realloc(NULL, 2 * OP_COUNT * sizeof *made);
    bool ready[2 * OP_COUNT] = {false};
    int *label_of = checked_realloc(NULL, sizeof *label_of * (size_t)s->net->n_nodes);
    size_t cap = 0;
    char *key = NULL; /* a name looked up: this one's start, or this one and a head */
    for (int i = 0; i < s->net->n_nodes; i++)
        label_of[i] = -1;
    for (int i = 0; i < w->n_labels; i++)
        label_of[w->labels[i].node] = i;
    for (int i = 0; i < w->n_labels; i++) {
        const Node *n = &nodes[w->labels[i].node];
        if (names_find(&w->names, n->name) != w->labels[i].node)
            continue; /* a name used twice, already reported */
        const NameSuffixes *mine = suffixes_of(w, made, ready, n);
        size_t len = strlen(n->name);
        if (len + LONGEST_NAME_SUFFIX + 1 > cap) /* the name and a head, or a start of the name */
            key = checked_realloc(key, cap = len + LONGEST_NAME_SUFFIX + 1);
        int other = -1;
        const char *shorter = NULL, *suffix = NULL;
        /* another name is this one and a head of its suffixes (l, l_bias_sigmoid) */
        for (int h = 0; h < mine->n_heads && !suffix; h++) {
            memcpy(key, n->name, len);
            strcpy(key + len, mine->head[h]);
            int j = names_find(&w->names, key);
            if (j >= 0 && (label_of[j] < 0 || label_of[j] < i)) {
                suffix = meeting_suffix(mine, mine->head[h], suffixes_of(w, made, ready, &nodes[j]));
                other = j;
                shorter = n->name;
            }
        }
        /* this name is another's and a head of that one's suffixes (no
         * longer than LONGEST_NAME_SUFFIX) */
        for (size_t p = len > LONGEST_NAME_SUFFIX ? len - LONGEST_NAME_SUFFIX : 1; p < len && !suffix; p++) {
            if (n->name[p] != '_')
                continue;
            memcpy(key, n->name, p);
            key[p] = '\0';
            int j = names_find(&w->names, key);
            if (j >= 0 && (label_of[j] < 0 || label_of[j] < i)) {
                suffix = meeting_suffix(suffixes_of(w, made, ready, &nodes[j]), n->name + p, mine);
                other = j;
                shorter = nodes[j].name;
            }
        }
        if (suffix) {
            diag_at(s->diag, SEV_ERROR, w->labels[i].loc,
                    "layer name '%s' and the %s '%s' at line %d would both name %s%s in the generated code; choose "
                    "another name", diag_quote(s->arena, n->name), nodes[other].kind_word,
                    diag_quote(s->arena, nodes[other].name), nodes[other].line, diag_quote(s->arena, shorter), suffix);
            continue;
        }
        for (int k = 0; k < GEN_LOSS_KERNEL_COUNT; k++) {
            const char *own = gen_name_loss_kernel((GenLossKernel)k);
            if (strncmp(own, n->name, len) == 0 && own[len] && suffix_in(mine, own + len)) {
                diag_at(s->diag, SEV_ERROR, w->labels[i].loc,
                        "layer name '%s' would name %s, which the generated code keeps for the loss; choose another "
                        "name", diag_quote(s->arena, n->name), own);
                break;
            }
        }
    }
    free(key);
    free(label_of);
    free(made);
}

//
// Nodes and values
//

static int new_value(Walk *w, Shape sh)
{
    Net *net = w->s.net;
    net->values = grow(net->values, &w->s.values_cap, net->n_values + 1, sizeof *net->values);
    net->values[net->n_values] = sh;
    return net->n_values++;
}

/* The statement's source text (one line at most, blanks squeezed), kept for
 * the comments of the generated code. */
static const char *statement_text(Arena *a, Diag *d, const Stmt *st)
{
    const char *line;
    size_t len;
    if (!diag_line(d, st->loc.first_line, &line, &len) || st->loc.first_column < 1 ||
        (size_t)st->loc.first_column > len + 1)
        return st->word;
    size_t from = (size_t)st->loc.first_column - 1, to = len;
    if (st->loc.last_line == st->loc.first_line && (size_t)st->loc.last_column - 1 < len)
        to = (size_t)st->loc.last_column - 1;
    char *text = arena_alloc(a, to - from + 1);
    size_t k = 0;
    for (size_t i = from; i < to; i++) {
        char ch = line[i] == '\t' ? ' ' : line[i];
        if (ch == ' ' && (k == 0 || text[k - 1] == ' '))
            continue;
        text[k++] = (unsigned char)ch >= 32 && (unsigned char)ch < 127 ? ch : '?';
    }
    while (k > 0 && text[k - 1] == ' ')
        k--;
    text[k] = '\0';
    return text;
}

static Node *new_node(Walk *w, OpKind op, const Stmt *st, const char *kind_word)
{
    Net *net = w->s.net;
    net->nodes = grow(net->nodes, &w->s.nodes_cap, net->n_nodes + 1, sizeof *net->nodes);
    Node *n = &net->nodes[net->n_nodes++];
    memset(n, 0, sizeof *n);
    n->op = op;
    n->kind_word = kind_word;
    n->loc = st->loc;
    n->line = st->loc.first_line;
    n->depth = w->depth;
    n->in = w->current;
    n->skip = -1;
    n->out = -1;
    n->in_shape = w->current >= 0 ? net->values[w->current] : (Shape){0, {0, 0, 0}};
    n->text = statement_text(w->s.arena, w->s.diag, st);
    return n;
}

/* Ends a node: its output becomes the current value. An output shape that
 * overflowed, or whose check failed, is left unknown. */
static void finish_node(Walk *w, Node *n)
{
    Sema *s = &w->s;
    if (n->out_shape.rank && shape_numel(n->out_shape) < 0) {
        diag_at(s->diag, SEV_ERROR, n->loc, "%s gives a sample too large to represent (more than 2^62 values)",
                n->kind_word);
        n->out_shape.rank = 0;
    }
    if (n->params < 0 || n->flops < 0) {
        diag_at(s->diag, SEV_ERROR, n->loc, "%s is too large to represent (more than 2^62 parameters or FLOPs)",
                n->kind_word);
        n->params = n->flops = 0;
    }
    /* cuDNN, cuBLAS and BLAS take sizes as 32-bit ints: a sample or a weight
     * beyond that would be cut to a wrong size in the generated calls. */
    int64_t values = n->out_shape.rank ? shape_numel(n->out_shape) : 0;
    if (values > INT32_MAX) {
        diag_at(s->diag, SEV_ERROR, n->loc, "%s gives %lld values per sample; the libraries that run it take at "
                "most 2147483647 (2^31-1)", n->kind_word, (long long)values);
        n->out_shape.rank = 0;
    }
    if (n->params > INT32_MAX)
        diag_at(s->diag, SEV_ERROR, n->loc, "%s has %lld parameters; a layer can have at most 2147483647 (2^31-1)",
                n->kind_word, (long long)n->params);
    n->out = new_value(w, n->out_shape);
    w->current = n->out;
    s->net->total_params = checked_add(s->net->total_params, n->params);
    s->net->total_flops = checked_add(s->net->total_flops, n->flops);
}

//
// Statements
//

static void lower_statements(Walk *w, const Stmt *list, bool top_level);

/* A block on a statement that takes none would be thrown away unread. */
static void refuse_block(Sema *s, const Stmt *st)
{
    if (st->has_block)
        diag_at(s->diag, SEV_ERROR, st->open_loc, "%s takes no block", st->word);
}

static void lower_residual(Walk *w, const Stmt *st)
{
    Sema *s = &w->s;
    if (!st->has_block) {
        diag_at(s->diag, SEV_ERROR, st->word_loc, "residual needs a block: residual { ... }");
        return;
    }
    if (w->depth + 1 >= PARSE_MAX_NESTING) {
        diag_at(s->diag, SEV_ERROR, st->word_loc, "residual blocks nest more than %d deep", PARSE_MAX_NESTING - 1);
        return;
    }
    sema_report_unused(s, st, NULL, 0);
    /* The join node is created after the body, but numbered now, so that
     * residuals number in the order they open. */
    int ordinal = ++w->kind_counts[OP_RESIDUAL_ADD];
    int skip = w->current;
    Shape in_shape = skip >= 0 ? s->net->values[skip] : (Shape){0, {0, 0, 0}};
    w->depth++;
    lower_statements(w, st->body, false);
    w->depth--;
    Node *n = new_node(w, OP_RESIDUAL_ADD, st, "residual");
    name_node(w, st, n, "res", ordinal);
    n->skip = skip;
    /* An unclosed block swallowed the rest of the file: its shape says nothing. */
    if (in_shape.rank && n->in_shape.rank && !st->unclosed) {
        if (memcmp(&in_shape, &n->in_shape, sizeof in_shape) != 0)
            diag_at(s->diag, SEV_ERROR, st->word_loc,
                    "residual body changes the shape from %s to %s; y = x + body(x) needs them equal",
                    shape_str(s->arena, in_shape), shape_str(s->arena, n->in_shape));
        else {
            n->out_shape = in_shape;
            n->flops = shape_numel(in_shape);
        }
    }
    finish_node(w, n);
}

static void lower_input(Walk *w, const Stmt *st)
{
    Sema *s = &w->s;
    refuse_block(s, st);
    if (w->seen_layer) {
        diag_at(s->diag, SEV_ERROR, st->word_loc, "'input' must be the first layer");
        return;
    }
    w->seen_input = true;
    w->seen_layer = true;
    Node *n = new_node(w, OP_INPUT, st, "input");
    n->name = "input";
    names_claim(w, "input", (int)(n - s->net->nodes));
    Arg *a = sema_take_positional(s, st);
    if (!a)
        diag_at(s->diag, SEV_ERROR, st->word_loc, "input needs the shape of one sample, e.g. 'input 1x28x28' or 'input 784'");
    else if (a->val->kind == VAL_INT && !a->val->overflow && a->val->i >= 1 && a->val->i <= (1 << 30))
        n->out_shape = (Shape){1, {a->val->i, 0, 0}};
    else if (a->val->kind == VAL_DIMS && a->val->ndims == 3) {
        bool ok = !a->val->overflow;
        for (int i = 0; i < 3; i++)
            ok = ok && a->val->dims[i] >= 1 && a->val->dims[i] <= (1 << 30);
        if (ok)
            n->out_shape = (Shape){3, {a->val->dims[0], a->val->dims[1], a->val->dims[2]}};
        else
            diag_at(s->diag, SEV_ERROR, a->loc, "input sizes must be between 1 and 2^30");
    } else if (a->val->kind == VAL_DIMS && a->val->ndims == 2) {
        /* 1xHxW is advice only where H and W are sizes: 1x0x10 is refused too */
        bool sizes = !a->val->overflow;
        for (int i = 0; i < 2; i++)
            sizes = sizes && a->val->dims[i] >= 1 && a->val->dims[i] <= (1 << 30);
        if (sizes)
            diag_at(s->diag, SEV_ERROR, a->loc, "input takes channels x height x width; write 1x%s for one channel",
                    diag_quote(s->arena, a->val->text));
        else
            diag_at(s->diag, SEV_ERROR, a->loc,
                    "input takes channels x height x width, each between 1 and 2^30, not '%s'",
                    diag_quote(s->arena, a->val->text));
    } else if (a->val->kind == VAL_INT)
        diag_at(s->diag, SEV_ERROR, a->loc, "input sizes must be between 1 and 2^30");
    else
        diag_at(s->diag, SEV_ERROR, a->loc, "input takes CxHxW (e.g. 1x28x28) or a feature count (e.g. 784), not '%s'",
                diag_quote(s->arena, a->val->text));
    sema_report_unused(s, st, NULL, 0);
    finish_node(w, n);
}

static void lower_net_name(Walk *w, const Stmt *st)
{
    Sema *s = &w->s;
    refuse_block(s, st);
    if (w->seen_net) {
        diag_at(s->diag, SEV_ERROR, st->word_loc, "'net' given twice");
        return;
    }
    w->seen_net = true;
    Arg *a = sema_take_positional(s, st);
    if (!a || a->val->kind != VAL_WORD)
        diag_at(s->diag, SEV_ERROR, a ? a->loc : st->word_loc, "net needs a name: net NAME");
    else
        s->net->name = a->val->text;
    sema_report_unused(s, st, NULL, 0);
}

static const char *const statement_words[] = {"net", "input", "train", "data", "residual"};

static void report_unknown_word(Walk *w, const Stmt *st, bool top_level)
{
    Sema *s = &w->s;
    enum { STATEMENT_WORDS = DDPC_COUNT(statement_words) };
    const char *candidates[64];
    int n = layer_words(candidates, 64 - STATEMENT_WORDS);
    for (int i = 0; i < STATEMENT_WORDS; i++)
        candidates[n++] = statement_words[i];
    const char *near = ddp_suggest_nearest(st->word, candidates, n);
    const char *what = top_level ? "layer" : "layer in residual";
    if (near)
        diag_at(s->diag, SEV_ERROR, st->word_loc, "unknown %s '%s'; did you mean '%s'?", what,
                diag_quote(s->arena, st->word), near);
    else
        diag_at(s->diag, SEV_ERROR, st->word_loc, "unknown %s '%s'", what, diag_quote(s->arena, st->word));
}

static void lower_layer(Walk *w, const Stmt *st, const LayerKind *kind)
{
    Sema *s = &w->s;
    if (!w->seen_layer) {
        diag_at(s->diag, SEV_ERROR, st->word_loc,
                "the net must start with 'input', the shape of one sample (e.g. 'input 1x28x28')");
        w->seen_layer = true;
    }
    if (w->seen_loss)
        diag_at(s->diag, SEV_ERROR, st->word_loc, "'%s' after the loss; the loss must be the last layer", st->word);
    refuse_block(s, st);
    Node *n = new_node(w, kind->op, st, kind->word);
    name_node(w, st, n, kind->name_prefix, ++w->kind_counts[kind->op]);
    if (n->op == OP_DROPOUT)
        n->dropout_layer = w->kind_counts[OP_DROPOUT];
    kind->check(s, st, n);
    if (n->op == OP_LOSS) {
        w->seen_loss = true;
        if (n->in_shape.rank == 1)
            s->net->num_classes = n->in_shape.d[0];
    }
    w->last_layer = st;
    finish_node(w, n);
}

static void lower_statements(Walk *w, const Stmt *list, bool top_level)
{
    Sema *s = &w->s;
    for (const Stmt *st = list; st; st = st->next) {
        if (st->is_error) {
            w->current = new_value(w, (Shape){0, {0, 0, 0}}); /* unknown from here */
            continue;
        }
        if (st->label && (strcmp(st->word, "net") == 0 || strcmp(st->word, "train") == 0 ||
                          strcmp(st->word, "data") == 0 || strcmp(st->word, "input") == 0))
            diag_at(s->diag, SEV_ERROR, st->label_loc, "'%s' cannot be named", st->word);
        if (strcmp(st->word, "net") == 0 && top_level)
            lower_net_name(w, st);
        else if (strcmp(st->word, "train") == 0 && top_level) {
            if (w->seen_train)
                diag_at(s->diag, SEV_ERROR, st->word_loc, "a second train block; merge it into the first");
            w->seen_train = true;
            if (!st->has_block)
                diag_at(s->diag, SEV_ERROR, st->word_loc, "train needs a block: train { batch 64 ... }");
            sema_report_unused(s, st, NULL, 0);
            train_check(s, st->body);
        } else if (strcmp(st->word, "data") == 0 && top_level) {
            if (w->seen_data)
                diag_at(s->diag, SEV_ERROR, st->word_loc, "a second data block; merge it into the first");
            w->seen_data = true;
            if (!st->has_block)
                diag_at(s->diag, SEV_ERROR, st->word_loc, "data needs a block: data { normalize ... }");
            sema_report_unused(s, st, NULL, 0);
            data_check(s, st->body);
        } else if (strcmp(st->word, "input") == 0 && top_level)
            lower_input(w, st);
        else if (strcmp(st->word, "residual") == 0) {
            if (w->seen_loss)
                diag_at(s->diag, SEV_ERROR, st->word_loc, "'residual' after the loss; the loss must be the last layer");
            lower_residual(w, st);
            w->last_layer = st;
        } else if (!top_level && (strcmp(st->word, "net") == 0 || strcmp(st->word, "train") == 0 ||
                                  strcmp(st->word, "data") == 0 || strcmp(st->word, "input") == 0 ||
                                  strcmp(st->word, "loss") == 0))
            diag_at(s->diag, SEV_ERROR, st->word_loc, "'%s' cannot be inside residual { }", st->word);
        else {
            const LayerKind *kind = layer_kind_find(st->word);
            if (kind)
                lower_layer(w, st, kind);
            else
                report_unknown_word(w, st, top_level);
        }
    }
}

static void *move_to_arena(Arena *a, void *heap, size_t count, size_t elem)
{
    void *p = arena_alloc(a, elem * (count + 1));
    if (count)
        memcpy(p, heap, elem * count);
    free(heap);
    return p;
}

/* The file's name without directories and extension: the net's default
 * name. It goes into the program's strings, messages and checkpoint file
 * names, so a byte other than those ddp_net_name_byte allows becomes '_'. */
static const char *file_stem(Arena *a, const char *file)
{
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    const char *dot = strrchr(base, '.');
    size_t n = dot && dot != base ? (size_t)(dot - base) : strlen(base);
    char *stem = arena_strndup(a, base, n);
    for (char *c = stem; *c; c++)
        if (!ddp_net_name_byte(*c))
            *c = '_';
    return stem;
}

bool sema_net(Arena *a, Diag *d, const Ast *ast, const char *file, Net *net)
{
    memset(net, 0, sizeof *net);
    net->file = file;
    net->name = file_stem(a, file);
    train_defaults(&net->train);

    Walk w;
    memset(&w, 0, sizeof w);
    w.s.arena = a;
    w.s.diag = d;
    w.s.net = net;
    w.current = -1;
    int errors_before = d->errors;

    lower_statements(&w, ast->stmts, true);
    check_generated_names(&w);
    data_check_input(&w.s, net->n_nodes && net->nodes[0].op == OP_INPUT ? net->nodes[0].out_shape : (Shape){0});

    if (!w.seen_layer && ast->syntax_errors == 0)
        diag_file(d, SEV_ERROR, "no layers: a net needs at least 'input' and 'loss'");
    else if (!w.seen_loss && ast->syntax_errors == 0 && w.last_layer)
        diag_at(d, SEV_ERROR, w.last_layer->loc, "the net has no loss; end it with one, e.g. 'loss cross_entropy'");
    else if (w.seen_loss && ast->syntax_errors == 0 && d->errors == errors_before && net->total_params == 0)
        /* as PyTorch's optimizers refuse an empty parameter list: nothing
         * to train, and no gradient for the loss to start (said only of a
         * net otherwise sound: a layer in error counts no weights) */
        diag_at(d, SEV_ERROR, w.last_layer->word_loc, "the net has nothing to train: no layer before the loss has "
                "weights; add one, e.g. 'linear 10'");

    /* Nodes, params and values were grown with realloc; move them into the
     * arena so the Net is freed with everything else. */
    net->nodes = move_to_arena(a, net->nodes, (size_t)net->n_nodes, sizeof *net->nodes);
    net->params = move_to_arena(a, net->params, (size_t)net->n_params, sizeof *net->params);
    net->values = move_to_arena(a, net->values, (size_t)net->n_values, sizeof *net->values);
    free(w.names.keys);
    free(w.names.nodes);
    free(w.labels);

    for (int i = 0; i < net->n_params; i++)
        if (!net->params[i].trainable)
            net->total_buffers = checked_add(net->total_buffers, net->params[i].numel);
    return d->errors == errors_before && ast->syntax_errors == 0;
}
