/*
 * emit_torch.c: `ddpc FILE.net --emit torch`, the net as a PyTorch module.
 *
 * The module is the net's second, independent implementation: the parity
 * tests train it with PyTorch (tools/torch_ref.py) and compare with the
 * program ddpc generates, and a user can load the weights that program
 * exports straight into it. So it is written for two readers:
 *
 *   - PyTorch, which must compute exactly what the .net means: every layer
 *     is the stock nn module with the options ddpc resolved (Conv2d's padding,
 *     BatchNorm's eps...), the loss, optimizer and schedule are PyTorch's own,
 *     and the one thing PyTorch has no module for, ddpc's dropout mask (a
 *     hash of seed, layer, epoch, sample and element: runtime/dropout_mask.h),
 *     is a small module in the emitted file that computes the same bits;
 *   - a person, who should see the net they wrote: one line per layer in
 *     __init__ and in forward, each commented with its .net line, names the
 *     same as the .net's (the state_dict keys are ddpc's parameter names), no
 *     helper that this net does not use.
 *
 * Residual blocks stay flat: their body's layers are attributes of the net
 * itself (conv2, not res1.conv2), because ddpc's parameter names are flat.
 * forward saves the block's input and adds it back at the block's end.
 *
 * Everything comes from the checked Net; nothing is re-derived. Floats are
 * printed in the shortest form that reads back as the same double, so the
 * module's dropout threshold and hyper-parameters equal the program's bit
 * for bit.
 */
#include "ddpc.h"

#include <stdlib.h>
#include <string.h>

/* A line of code and its comment, gathered so a block's comments can be
 * aligned in one column. */
typedef struct {
    const char *code;
    const char *comment; /* NULL: none */
} Line;

typedef struct {
    FILE *out;
    const Net *net;
    Arena a;
    const char *file;    /* the .net's base name, safe in a comment */
    Line *lines;
    int n_lines, cap;
} Emitter;

/* Python keywords: not usable as attribute names in `self.NAME`. */
static const char *const python_keywords[] = {
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
};

/* What nn.Module (torch 1.13 to 2.x) and the emitted class define: a layer so
 * named cannot be read back as `self.NAME`, which finds the method instead. */
static const char *const module_attributes[] = {
    "T_destination", "add_module", "apply", "bfloat16", "buffers", "call_super_init", "children",
    "compile", "cpu", "cuda", "double", "dump_patches", "eval", "extra_repr", "float", "forward",
    "get_buffer", "get_extra_state", "get_parameter", "get_submodule", "half", "ipu", "load_state_dict",
    "modules", "mtia", "named_buffers", "named_children", "named_modules", "named_parameters",
    "parameters", "register_backward_hook", "register_buffer", "register_forward_hook",
    "register_forward_pre_hook", "register_full_backward_hook", "register_full_backward_pre_hook",
    "register_load_state_dict_post_hook", "register_load_state_dict_pre_hook", "register_module",
    "register_parameter", "register_state_dict_post_hook", "register_state_dict_pre_hook",
    "requires_grad_", "set_extra_state", "set_submodule", "share_memory", "state_dict", "to",
    "to_empty", "train", "type", "xpu", "zero_grad",
    "set_dropout_context", /* ours */
};

/* Names come from the grammar ([A-Za-z_][A-Za-z0-9_]*), so they are Python
 * identifiers; a few are still not usable as `self.NAME`. Such a layer is
 * registered and read through self._modules, which state_dict() walks the
 * same way, so its parameters keep their names. */
static bool plain_attribute(const char *name)
{
    return name[0] != '_' && !ddpc_word_in(name, python_keywords, DDPC_COUNT(python_keywords)) &&
           !ddpc_word_in(name, module_attributes, DDPC_COUNT(module_attributes));
}

static const char *attr(Emitter *e, const char *name)
{
    return plain_attribute(name) ? arena_printf(&e->a, "self.%s", name)
                                 : arena_printf(&e->a, "self._modules[\"%s\"]", name);
}

/* Bytes that could break a Python comment or docstring (a line end, a quote,
 * a backslash escape, invalid UTF-8) become '?'. */
static const char *comment_safe(Arena *a, const char *s)
{
    size_t n = strlen(s);
    char *t = arena_strndup(a, s, n);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)t[i] < 32 || (unsigned char)t[i] >= 127 || t[i] == '"' || t[i] == '\\')
            t[i] = '?';
    return t;
}

/* The shortest decimal that reads back as V, as Python's repr prints it,
 * with a point or exponent so it reads as a float. */
static const char *py_float(Arena *a, double v)
{
    char buf[48];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    if (!strpbrk(buf, ".eEn"))
        strcat(buf, ".0");
    return arena_strndup(a, buf, strlen(buf));
}

/* What the emitted file binds at its top level (emit_header, emit_hash32,
 * emit_hash_dropout, emit_transform, emit_load_image, emit_class, emit_loss,
 * emit_optimizer), imports included: a class of one of these names would
 * hide it (class F hides torch.nn.functional, class TRAIN the dict that
 * tools/torch_ref.py reads). Net, the alias the class gets, is left out:
 * `Net = Net` hides nothing. test_emit_torch reads a module with every part
 * and fails on a top-level name a class could hide that is missing here. */
static const char *const module_globals[] = {
    "torch", "nn", "F", "math", "INPUT_SHAPE", "NUM_CLASSES", "TRAIN", "SCHEDULE_INTERVAL", "NORMALIZE_MEAN",
    "NORMALIZE_STD", "_M32", "_mul32", "_hash32", "_layer_key", "transform", "HashDropout", "load_image", "loss_fn",
    "make_optimizer", "make_scheduler",
};

/* Python's builtins that a class name can spell (it starts with a capital),
 * up to Python 3.13: a class of that name hides the builtin from the module,
 * as class ValueError would from HashDropout's raise. True, False and None
 * are keywords (python_keywords): a class of that name is a syntax error. */
static const char *const python_capital_builtins[] = {
    "ArithmeticError", "AssertionError", "AttributeError", "BaseException", "BaseExceptionGroup",
    "BlockingIOError", "BrokenPipeError", "BufferError", "BytesWarning", "ChildProcessError", "ConnectionAbortedError",
    "ConnectionError", "ConnectionRefusedError", "ConnectionResetError", "DeprecationWarning", "EOFError", "Ellipsis",
    "EncodingWarning", "EnvironmentError", "Exception", "ExceptionGroup", "FileExistsError", "FileNotFoundError",
    "FloatingPointError", "FutureWarning", "GeneratorExit", "IOError", "ImportError", "ImportWarning",
    "IndentationError", "IndexError", "InterruptedError", "IsADirectoryError", "KeyError", "KeyboardInterrupt",
    "LookupError", "MemoryError", "ModuleNotFoundError", "NameError", "NotADirectoryError", "NotImplemented",
    "NotImplementedError", "OSError", "OverflowError", "PendingDeprecationWarning", "PermissionError",
    "ProcessLookupError", "PythonFinalizationError", "RecursionError", "ReferenceError", "ResourceWarning",
    "RuntimeError", "RuntimeWarning", "StopAsyncIteration", "StopIteration", "SyntaxError", "SyntaxWarning",
    "SystemError", "SystemExit", "TabError", "TimeoutError", "TypeError", "UnboundLocalError", "UnicodeDecodeError",
    "UnicodeEncodeError", "UnicodeError", "UnicodeTranslateError", "UnicodeWarning", "UserWarning", "ValueError",
    "Warning", "ZeroDivisionError",
};

/* `net my_net` -> MyNet. A name that is not a class name of its own (empty,
 * a digit first, a keyword, a builtin, a name the file binds) gets the
 * prefix Net, which nothing above starts with: NetF, NetNone, NetTRAIN. */
static const char *class_name(Arena *a, const char *name)
{
    size_t n = strlen(name);
    char *s = arena_alloc(a, n + 8);
    size_t k = 0;
    bool up = true;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum) {
            up = true;
            continue;
        }
        s[k++] = up && c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c;
        up = false;
    }
    s[k] = '\0';
    if (k == 0 || (s[0] >= '0' && s[0] <= '9') || ddpc_word_in(s, python_keywords, DDPC_COUNT(python_keywords)) ||
        ddpc_word_in(s, module_globals, DDPC_COUNT(module_globals)) ||
        ddpc_word_in(s, python_capital_builtins, DDPC_COUNT(python_capital_builtins)))
        return arena_printf(a, "Net%s", s);
    return s;
}

static void add_line(Emitter *e, const char *code, const char *comment)
{
    if (e->n_lines == e->cap) {
        e->cap = e->cap ? 2 * e->cap : 32;
        Line *bigger = realloc(e->lines, (size_t)e->cap * sizeof *bigger);
        if (!bigger) {
            fputs("ddpc: internal error: out of memory\n", stderr);
            abort();
        }
        e->lines = bigger;
    }
    e->lines[e->n_lines++] = (Line){code, comment};
}

/* Prints the gathered lines at INDENT, comments aligned one column past the
 * longest code line (lines too long to share the column keep theirs). */
static void flush_lines(Emitter *e, int indent)
{
    int width = 0;
    for (int i = 0; i < e->n_lines; i++) {
        int len = (int)strlen(e->lines[i].code);
        if (e->lines[i].comment && len > width && len <= 64)
            width = len;
    }
    for (int i = 0; i < e->n_lines; i++) {
        const Line *l = &e->lines[i];
        if (!l->comment)
            fprintf(e->out, "%*s%s\n", indent, "", l->code);
        else if (!*l->code)
            fprintf(e->out, "%*s# %s\n", indent, "", l->comment);
        else
            fprintf(e->out, "%*s%-*s  # %s\n", indent, "", width, l->code, l->comment);
    }
    e->n_lines = 0;
}

/* "mnist.net:4  conv 1->32 k5": where a line of Python came from. */
static const char *origin(Emitter *e, const Node *n)
{
    const char *text = n->text ? n->text : n->kind_word;
    return arena_printf(&e->a, "%s:%d  %s", e->file, n->line, text);
}

/* The nn module a node becomes, or NULL for the ops forward does inline. */
static const char *module_for(Emitter *e, const Node *n)
{
    Arena *a = &e->a;
    switch (n->op) {
    case OP_CONV: {
        const char *opts = arena_printf(a, "kernel_size=%lld", (long long)n->kernel);
        if (n->stride != 1)
            opts = arena_printf(a, "%s, stride=%lld", opts, (long long)n->stride);
        if (n->pad)
            opts = arena_printf(a, "%s, padding=%lld", opts, (long long)n->pad);
        if (n->groups != 1)
            opts = arena_printf(a, "%s, groups=%lld", opts, (long long)n->groups);
        if (!n->bias)
            opts = arena_printf(a, "%s, bias=False", opts);
        return arena_printf(a, "nn.Conv2d(%lld, %lld, %s)", (long long)n->in_ch, (long long)n->out_ch, opts);
    }
    case OP_LINEAR:
        return arena_printf(a, "nn.Linear(%lld, %lld%s)", (long long)n->in_ch, (long long)n->out_ch,
                            n->bias ? "" : ", bias=False");
    case OP_MAXPOOL:
    case OP_AVGPOOL: {
        /* PyTorch's stride defaults to the window, as ddpc's does. AvgPool2d
         * keeps its default count_include_pad=True: padded zeros count. */
        const char *opts = arena_printf(a, "kernel_size=%lld", (long long)n->kernel);
        if (n->stride != n->kernel)
            opts = arena_printf(a, "%s, stride=%lld", opts, (long long)n->stride);
        if (n->pad)
            opts = arena_printf(a, "%s, padding=%lld", opts, (long long)n->pad);
        return arena_printf(a, "nn.%s(%s)", n->op == OP_MAXPOOL ? "MaxPool2d" : "AvgPool2d", opts);
    }
    case OP_BATCHNORM: {
        const char *opts = "";
        if (n->eps != 1e-5)
            opts = arena_printf(a, ", eps=%s", py_float(a, n->eps));
        if (n->momentum != 0.1)
            opts = arena_printf(a, "%s, momentum=%s", opts, py_float(a, n->momentum));
        return arena_printf(a, "nn.BatchNorm%dd(%lld%s)", n->in_shape.rank == 3 ? 2 : 1, (long long)n->out_ch, opts);
    }
    case OP_FLATTEN: return "nn.Flatten()";
    case OP_RELU: return "nn.ReLU()";
    case OP_LEAKY_RELU: return arena_printf(a, "nn.LeakyReLU(%s)", py_float(a, n->slope));
    case OP_SIGMOID: return "nn.Sigmoid()";
    case OP_TANH: return "nn.Tanh()";
    case OP_GELU: return n->gelu_tanh ? "nn.GELU(approximate=\"tanh\")" : "nn.GELU()";
    case OP_LOG_SOFTMAX: return "nn.LogSoftmax(dim=1)";
    case OP_DROPOUT: return arena_printf(a, "HashDropout(%s, layer=%d)", py_float(a, n->p), n->dropout_layer);
    case OP_INPUT:
    case OP_GLOBAL_AVGPOOL:
    case OP_RESIDUAL_ADD:
    case OP_LOSS:
    case OP_COUNT: break; /* forward does these inline */
    }
    return NULL;
}

static bool has_op(const Net *net, OpKind op)
{
    for (int i = 0; i < net->n_nodes; i++)
        if (net->nodes[i].op == op)
            return true;
    return false;
}

static const Node *loss_node(const Net *net)
{
    for (int i = 0; i < net->n_nodes; i++)
        if (net->nodes[i].op == OP_LOSS)
            return &net->nodes[i];
    return NULL;
}

/* For each node, the residual blocks whose body starts there, outermost
 * first: first_open[i] and then next_open[join] (-1 ends the list). A body
 * starts right after the node that made the block's input, so an empty body
 * starts at its own join. Linear in the net's size, for 10,000-layer nets. */
static void find_openings(Emitter *e, int **first_open, int **next_open)
{
    const Net *net = e->net;
    int *maker = arena_alloc(&e->a, sizeof(int) * (size_t)(net->n_values + 1));
    int *first = arena_alloc(&e->a, sizeof(int) * (size_t)(net->n_nodes + 1));
    int *next = arena_alloc(&e->a, sizeof(int) * (size_t)(net->n_nodes + 1));
    for (int v = 0; v < net->n_values; v++)
        maker[v] = -1;
    for (int i = 0; i < net->n_nodes; i++) {
        first[i] = next[i] = -1;
        if (net->nodes[i].out >= 0 && net->nodes[i].out < net->n_values)
            maker[net->nodes[i].out] = i;
    }
    /* Joins in order, each pushed on its start's list: an outer block's join
     * comes after its inner ones', so it ends up first. */
    for (int j = 0; j < net->n_nodes; j++) {
        const Node *r = &net->nodes[j];
        if (r->op != OP_RESIDUAL_ADD || r->skip < 0 || r->skip >= net->n_values || maker[r->skip] < 0)
            continue;
        int start = maker[r->skip] + 1;
        next[j] = first[start];
        first[start] = j;
    }
    *first_open = first;
    *next_open = next;
}

static void emit_header(Emitter *e)
{
    const Net *net = e->net;
    const char *file = comment_safe(&e->a, net->file);
    fprintf(e->out,
            "# The PyTorch module of %s, written by ddpc %s (`ddpc %s --emit torch`).\n"
            "#\n"
            "# The same net as the training program ddpc builds from %s: state_dict()\n"
            "# keys are ddpc's parameter names, so weights move between the two through\n"
            "# safetensors files (the program's --init and --export). Each line names the\n"
            "# .net line it comes from. Regenerate it rather than edit it.\n"
            "#\n"
            "# One training step as the generated program takes it, on one rank:\n"
            "#\n"
            "#   model = Net()\n"
            "#   optimizer = make_optimizer(model)\n"
            "#   scheduler = make_scheduler(optimizer, steps_per_epoch)\n"
            "#   for epoch in range(TRAIN[\"epochs\"]):\n"
            "#       model.set_dropout_context(TRAIN[\"seed\"], epoch)\n"
            "#       for x, labels, sample_ids in batches:  # sample_ids: indices in the data set\n"
            "%s"
            "#           loss = loss_fn(model(x, sample_ids), labels)\n"
            "#           optimizer.zero_grad()\n"
            "#           loss.backward()\n"
            "#           optimizer.step()\n"
            "#           if SCHEDULE_INTERVAL == \"step\":\n"
            "#               scheduler.step()\n"
            "#       if SCHEDULE_INTERVAL == \"epoch\":\n"
            "#           scheduler.step()\n",
            file, DDPC_VERSION, file, file,
            data_any(&net->data)
                ? "#           x = transform(x, sample_ids, TRAIN[\"seed\"], epoch)  # data { }; train=False to test\n"
                : "");
    if (has_op(net, OP_BATCHNORM))
        fprintf(e->out,
                "#\n"
                "# BatchNorm: with several ranks, the program synchronises batch statistics\n"
                "# across them as nn.SyncBatchNorm does, except for layers marked sync=off;\n"
                "# with one rank, as here, the two are the same.\n");
    /* math only for the cosine schedule: no unused import. */
    fprintf(e->out, "\n%simport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n",
            net->train.schedule == SCHED_COSINE ? "import math\n\n" : "");

    const Shape *in = net->n_nodes ? &net->nodes[0].out_shape : NULL;
    if (in && in->rank == 3)
        fprintf(e->out, "INPUT_SHAPE = (%lld, %lld, %lld)  # one sample: C x H x W\n", (long long)in->d[0],
                (long long)in->d[1], (long long)in->d[2]);
    else if (in && in->rank == 1)
        fprintf(e->out, "INPUT_SHAPE = (%lld,)  # one sample: features\n", (long long)in->d[0]);
    fprintf(e->out, "NUM_CLASSES = %lld\n", (long long)net->num_classes);
    fprintf(e->out,
            "TRAIN = {\"batch\": %lld, \"batch_global\": %s, \"epochs\": %lld, \"seed\": %llu, \"precision\": \"%s\"}"
            "  # the train { } block;\n# batch_global: batch is all ranks' together (batch / world size each), else "
            "each rank's;\n# precision: the program rounds its convs' and linear layers' operands to it (fp32: none; "
            "tools/torch_ref.py --precision does too)\n",
            (long long)net->train.batch, net->train.batch_global ? "True" : "False", (long long)net->train.epochs,
            (unsigned long long)net->train.seed, ddp_precision_name(net->train.precision));
    fprintf(e->out, "SCHEDULE_INTERVAL = \"%s\"  # scheduler.step() after every optimizer step, or every epoch\n",
            net->train.schedule == SCHED_STEP ? "epoch" : "step");
}

/* The hash of the dropout masks and the data { } block's draws. */
static void emit_hash32(Emitter *e)
{
    fputs("\n"
          "\n"
          "# ddpc's random draws (runtime/dropout_mask.h) are hashes of what they are for\n"
          "# (seed, layer, epoch, sample index, element), so every rank count and batch\n"
          "# split draws the same. The hash works on 32-bit values held in int64\n"
          "# tensors; each multiplication is split in 16-bit halves so that no product\n"
          "# exceeds 2^49 and the low 32 bits come out exact.\n"
          "_M32 = 0xFFFFFFFF\n"
          "\n"
          "\n"
          "def _mul32(x, c):\n"
          "    \"\"\"x * c mod 2^32, for 32-bit x and c.\"\"\"\n"
          "    return (x * (c & 0xFFFF) + (((x * (c >> 16)) & 0xFFFF) << 16)) & _M32\n"
          "\n"
          "\n"
          "def _hash32(x):\n"
          "    \"\"\"ddp_hash32 (lowbias32) of Python ints or int64 tensors holding 32-bit values.\"\"\"\n"
          "    x = x ^ (x >> 16)\n"
          "    x = _mul32(x, 0x7FEB352D)\n"
          "    x = x ^ (x >> 15)\n"
          "    x = _mul32(x, 0x846CA68B)\n"
          "    return x ^ (x >> 16)\n"
          "\n"
          "\n"
          "def _layer_key(seed, layer, epoch):\n"
          "    \"\"\"ddp_dropout_layer_key: the part of a draw's key shared by a layer and epoch.\"\"\"\n"
          "    seed &= 0xFFFFFFFFFFFFFFFF\n"
          "    key = _hash32((seed & _M32) ^ (seed >> 32) ^ _hash32(layer & _M32))\n"
          "    return _hash32(key ^ (epoch & _M32))\n",
          e->out);
}

/* An integer T with draw < T exactly when draw < p * 2^32, as augment.c
 * compares (in double, where p * 2^32 is exact). */
static uint64_t flip_threshold(double p)
{
    double t = p * 4294967296.0;
    uint64_t floor_t = (uint64_t)t;
    return (double)floor_t == t ? floor_t : floor_t + 1;
}

/* The data { } block as a function of a batch: runtime/augment.c's work. */
static void emit_transform(Emitter *e)
{
    const Net *net = e->net;
    const DataConfig *d = &net->data;
    Arena *a = &e->a;
    const Shape in = net->nodes[0].out_shape;
    bool images = in.rank == 3;
    fputs("\n\n# data { }: what the program does to a batch on its way to the net\n", e->out);
    if (data_has_draws(&net->data))
        fputs("# (runtime/augment.h). In training, drawn from (seed, epoch, sample index) as\n"
              "# the program draws them: the crop, then the flips.\n",
              e->out);
    else
        fputs("# (runtime/augment.h).\n", e->out);
    if (d->mean)
        fprintf(e->out, "# Then%s normalize: (x - mean) / std per channel in float32,\n"
                        "# as torchvision's Normalize.\n", data_has_draws(&net->data) ? ", for every sample," : "");
    if (d->mean)
        for (int k = 0; k < 2; k++) {
            fprintf(e->out, "NORMALIZE_%s = (", k ? "STD" : "MEAN");
            for (int64_t c = 0; c < d->n_channels; c++)
                fprintf(e->out, "%s%s", c ? ", " : "", py_float(a, (k ? d->std : d->mean)[c]));
            fprintf(e->out, "%s)  # %s:%d\n", d->n_channels == 1 ? "," : "", e->file, d->normalize_loc.first_line);
        }
    fprintf(e->out,
            "\n\n"
            "def transform(x, sample_ids, seed, epoch, train=True):\n"
            "    \"\"\"x: a batch [N, *INPUT_SHAPE] of pixel / 255 in float32; sample_ids: the samples'\n"
            "    indices in the data set; seed and epoch: the program's --seed and epoch count.\n"
            "    train=False for test and --predict inputs%s.\"\"\"\n",
            data_has_draws(&net->data) ? ", which are only normalized" : " (the same here)");
    if (data_has_draws(&net->data)) {
        int64_t h = in.d[1], w = in.d[2];
        fputs("    if train:\n"
              "        # a sample's draw k is hash(key ^ k): 1 and 2 the crop's row and column, 3 and 4\n"
              "        # the flips (augment.h's DDP_DRAW_*); its key is dropout's for layer 0, which no dropout has\n"
              "        ids = torch.as_tensor(sample_ids, dtype=torch.int64, device=x.device).reshape(-1) & _M32\n"
              "        key = _hash32(ids ^ _layer_key(seed, 0, epoch))\n",
              e->out);
        if (d->crop_h) {
            int64_t p = d->pad;
            fprintf(e->out,
                    "        # random_crop %lldx%lld pad=%lld%s (%s:%d)\n"
                    "        padded = F.pad(x, (%lld, %lld, %lld, %lld)%s)\n"
                    "        top = (_hash32(key ^ 1) %% %lld).tolist()\n"
                    "        left = (_hash32(key ^ 2) %% %lld).tolist()\n"
                    "        x = torch.stack([padded[i, :, t:t + %lld, l:l + %lld] for i, (t, l) in enumerate(zip(top, left))])\n",
                    (long long)d->crop_h, (long long)d->crop_w, (long long)p,
                    d->pad_mode == PAD_REFLECT ? " reflect" : "", e->file, d->crop_loc.first_line, (long long)p,
                    (long long)p, (long long)p, (long long)p, d->pad_mode == PAD_REFLECT ? ", mode=\"reflect\"" : "",
                    (long long)(h + 2 * p - d->crop_h + 1), (long long)(w + 2 * p - d->crop_w + 1),
                    (long long)d->crop_h, (long long)d->crop_w);
        }
        /* left-right: draw 3, the width's dimension; upside down: draw 4, the height's */
        static const struct {
            const char *name, *word;
            int draw, dim;
        } flips[] = {{"mirror", "horizontal", 3, 3}, {"upside_down", "vertical", 4, 2}};
        for (int k = 0; k < 2; k++) {
            double p = k ? d->flip_v : d->flip_h;
            if (p > 0)
                fprintf(e->out,
                        "        %s = _hash32(key ^ %d) < %llu  # flip %s p=%s of 2^32 (%s:%d)\n"
                        "        x = torch.where(%s.reshape(-1, 1, 1, 1), x.flip(%d), x)\n",
                        flips[k].name, flips[k].draw, (unsigned long long)flip_threshold(p), flips[k].word,
                        py_float(a, p), e->file, d->flip_loc[k].first_line, flips[k].name, flips[k].dim);
        }
    }
    if (d->mean) {
        const char *shape = images ? "1, -1, 1, 1" : "1, -1";
        fprintf(e->out,
                "    mean = torch.tensor(NORMALIZE_MEAN, dtype=torch.float32, device=x.device).reshape(%s)\n"
                "    std = torch.tensor(NORMALIZE_STD, dtype=torch.float32, device=x.device).reshape(%s)\n"
                "    return (x - mean) / std\n",
                shape, shape);
    } else
        fputs("    return x\n", e->out);
}

/* load_image: an image file as the program reads it (runtime/image_decode.h),
 * resize and center_crop included; for inputs of 1 or 3 channels. */
static void emit_load_image(Emitter *e)
{
    const Shape in = e->net->nodes[0].out_shape;
    const DataConfig *d = &e->net->data;
    if (in.rank != 3 || (in.d[0] != 1 && in.d[0] != 3))
        return;
    const char *mode = in.d[0] == 1 ? "L" : "RGB";
    fprintf(e->out,
            "\n\n"
            "def load_image(path):\n"
            "    \"\"\"An image file (PNG, JPEG) as the program reads it from an image folder or\n"
            "    --predict: PIL's decoding, convert(\"%s\")%s;\n"
            "    a uint8 tensor [C, H, W]. transform takes it divided by 255, as ToTensor gives it.\"\"\"\n"
            "    from PIL import Image\n"
            "\n"
            "    img = Image.open(path).convert(\"%s\")\n",
            mode, data_has_fitting(d) ? ", then data { }'s resize and center_crop" : "", mode);
    long long n = (long long)d->resize_shorter;
    if (n)
        fprintf(e->out,
                "    # resize %lld (%s:%d): torchvision's Resize(%lld), the shorter side to %lld\n"
                "    w, h = img.size\n"
                "    short, long = min(w, h), max(w, h)\n"
                "    size = (%lld, int(%lld * long / short)) if w <= h else (int(%lld * long / short), %lld)\n"
                "    if size != img.size:\n"
                "        img = img.resize(size, Image.BILINEAR)\n",
                n, e->file, d->resize_loc.first_line, n, n, n, n, n, n);
    else if (d->resize_h)
        fprintf(e->out,
                "    # resize %lldx%lld (%s:%d): torchvision's Resize((%lld, %lld))\n"
                "    if img.size != (%lld, %lld):\n"
                "        img = img.resize((%lld, %lld), Image.BILINEAR)\n",
                (long long)d->resize_h, (long long)d->resize_w, e->file, d->resize_loc.first_line,
                (long long)d->resize_h, (long long)d->resize_w, (long long)d->resize_w, (long long)d->resize_h,
                (long long)d->resize_w, (long long)d->resize_h);
    fprintf(e->out,
            "    x = torch.frombuffer(bytearray(img.tobytes()), dtype=torch.uint8)\n"
            "    x = x.reshape(img.size[1], img.size[0], %lld).permute(2, 0, 1).contiguous()\n",
            (long long)in.d[0]);
    if (d->center_h)
        fprintf(e->out,
                "    # center_crop %lldx%lld (%s:%d): torchvision's CenterCrop, zero padding first\n"
                "    # where the image is smaller, then the crop at round((side - crop) / 2)\n"
                "    ch, cw = %lld, %lld\n"
                "    h, w = x.shape[1], x.shape[2]\n"
                "    if ch > h or cw > w:\n"
                "        pad_w, pad_h = max(cw - w, 0), max(ch - h, 0)\n"
                "        x = F.pad(x, (pad_w // 2, (pad_w + 1) // 2, pad_h // 2, (pad_h + 1) // 2))\n"
                "        h, w = x.shape[1], x.shape[2]\n"
                "    top, left = int(round((h - ch) / 2.0)), int(round((w - cw) / 2.0))\n"
                "    x = x[:, top:top + ch, left:left + cw]\n",
                (long long)d->center_h, (long long)d->center_w, e->file, d->center_loc.first_line,
                (long long)d->center_h, (long long)d->center_w);
    fputs("    return x\n", e->out);
}

static void emit_hash_dropout(Emitter *e)
{
    fputs("\n"
          "\n"
          "class HashDropout(nn.Module):\n"
          "    \"\"\"Dropout keeping element e of sample s when\n"
          "    hash(hash(layer_key(seed, layer, epoch) ^ s) ^ e) >= floor(p * 2^32),\n"
          "    kept values scaled by 1 / (1 - p); the identity in eval mode. forward needs\n"
          "    the batch's sample indices in the data set; seed and epoch are set by\n"
          "    Net.set_dropout_context.\"\"\"\n"
          "\n"
          "    def __init__(self, p, layer):\n"
          "        super().__init__()\n"
          "        self.p, self.layer = p, layer\n"
          "        self.threshold = int(p * 4294967296.0)\n"
          "        self.seed, self.epoch = 0, 0\n"
          "\n"
          "    def extra_repr(self):\n"
          "        return f\"p={self.p}, layer={self.layer}\"\n"
          "\n"
          "    def keep_mask(self, sample_ids, numel):\n"
          "        \"\"\"[len(sample_ids), numel] bools: which elements of each sample are kept.\"\"\"\n"
          "        key = _layer_key(self.seed, self.layer, self.epoch)\n"
          "        s = torch.as_tensor(sample_ids, dtype=torch.int64).reshape(-1, 1) & _M32\n"
          "        e = torch.arange(numel, dtype=torch.int64, device=s.device).reshape(1, -1)\n"
          "        return _hash32(_hash32(s ^ key) ^ e) >= self.threshold\n"
          "\n"
          "    def forward(self, x, sample_ids=None):\n"
          "        if not self.training or self.p == 0:\n"
          "            return x\n"
          "        if sample_ids is None:\n"
          "            raise ValueError(\"HashDropout needs the batch's sample indices in training mode: \"\n"
          "                             \"model(x, sample_ids)\")\n"
          "        sample_ids = torch.as_tensor(sample_ids, device=x.device)\n"
          "        if sample_ids.numel() != x.shape[0]:\n"
          "            raise ValueError(f\"{sample_ids.numel()} sample ids for a batch of {x.shape[0]}\")\n"
          "        keep = self.keep_mask(sample_ids, x.shape[1:].numel()).reshape(x.shape)\n"
          "        return x * keep.to(x.dtype) * (1.0 / (1.0 - self.p))\n",
          e->out);
}

static void emit_class(Emitter *e, const char *cls)
{
    const Net *net = e->net;
    Arena *a = &e->a;
    bool dropout = has_op(net, OP_DROPOUT);
    int *first_open, *next_open;
    find_openings(e, &first_open, &next_open);
    fprintf(e->out,
            "\n\nclass %s(nn.Module):\n"
            "    \"\"\"net %s: %s trainable parameters, %s in buffers; input [N, %s], output [N, %lld].\"\"\"\n"
            "\n"
            "    def __init__(self):\n"
            "        super().__init__()\n",
            cls, comment_safe(a, net->name), summary_grouped(a, net->total_params), summary_grouped(a, net->total_buffers),
            net->n_nodes && net->nodes[0].out_shape.rank == 3
                ? arena_printf(a, "%lld, %lld, %lld", (long long)net->nodes[0].out_shape.d[0],
                               (long long)net->nodes[0].out_shape.d[1], (long long)net->nodes[0].out_shape.d[2])
                : arena_printf(a, "%lld", net->n_nodes ? (long long)net->nodes[0].out_shape.d[0] : 0LL),
            (long long)net->num_classes);

    /* __init__: the layers with a module, in order; a residual's body is
     * introduced by a comment, since its layers are the net's own. */
    for (int i = 0; i < net->n_nodes; i++) {
        const Node *n = &net->nodes[i];
        for (int j = first_open[i]; j >= 0; j = next_open[j])
            add_line(e, "", arena_printf(a, "residual %s (%s:%d), y = x + body(x); its body:", net->nodes[j].name,
                                         e->file, net->nodes[j].line));
        const char *module = module_for(e, n);
        if (!module)
            continue;
        const char *comment = origin(e, n);
        if (n->op == OP_BATCHNORM && !n->sync)
            comment = arena_printf(a, "%s  (per-rank statistics)", comment);
        add_line(e, arena_printf(a, "%s = %s", attr(e, n->name), module), comment);
    }
    flush_lines(e, 8);

    fprintf(e->out,
            "\n"
            "    def set_dropout_context(self, seed, epoch):\n"
            "        \"\"\"Seed and epoch of the dropout masks, as the program's --seed and epoch count%s.\"\"\"\n",
            dropout ? "" : " (this net has no dropout: nothing to set)");
    if (dropout)
        fputs("        for m in self.modules():\n"
              "            if isinstance(m, HashDropout):\n"
              "                m.seed, m.epoch = seed, epoch\n",
              e->out);

    fprintf(e->out,
            "\n"
            "    def forward(self, x, sample_ids=None):\n"
            "        \"\"\"x: [N, *INPUT_SHAPE]; sample_ids: the samples' indices in the data set,\n"
            "        %s. Returns what the loss takes: [N, %lld].\"\"\"\n",
            dropout ? "which the dropout masks need in training mode" : "unused (no dropout)",
            (long long)net->num_classes);
    for (int i = 0; i < net->n_nodes; i++) {
        const Node *n = &net->nodes[i];
        for (int j = first_open[i]; j >= 0; j = next_open[j])
            add_line(e, arena_printf(a, "%s_in = x", net->nodes[j].name),
                     arena_printf(a, "%s:%d  %s: residual {", e->file, net->nodes[j].line, net->nodes[j].name));
        switch (n->op) {
        case OP_INPUT:
            add_line(e, "", origin(e, n));
            break;
        case OP_LOSS: break; /* loss_fn */
        case OP_GLOBAL_AVGPOOL: add_line(e, "x = x.mean(dim=(2, 3))", origin(e, n)); break;
        case OP_RESIDUAL_ADD:
            add_line(e, arena_printf(a, "x = %s_in + x", n->name),
                     arena_printf(a, "%s:%d  } %s: x + body(x)", e->file, n->line, n->name));
            break;
        case OP_DROPOUT: add_line(e, arena_printf(a, "x = %s(x, sample_ids)", attr(e, n->name)), origin(e, n)); break;
        case OP_CONV:
        case OP_MAXPOOL:
        case OP_AVGPOOL:
        case OP_LINEAR:
        case OP_FLATTEN:
        case OP_RELU:
        case OP_LEAKY_RELU:
        case OP_SIGMOID:
        case OP_TANH:
        case OP_GELU:
        case OP_BATCHNORM:
        case OP_LOG_SOFTMAX:
        case OP_COUNT:
            if (module_for(e, n))
                add_line(e, arena_printf(a, "x = %s(x)", attr(e, n->name)), origin(e, n));
            break;
        }
    }
    add_line(e, "return x", NULL);
    flush_lines(e, 8);
    if (strcmp(cls, "Net") != 0)
        fprintf(e->out, "\n\nNet = %s  # the generic name tools import\n", cls);
}

static void emit_loss(Emitter *e)
{
    const Node *n = loss_node(e->net);
    LossKind kind = n ? n->loss : LOSS_CROSS_ENTROPY;
    const char *where = n ? origin(e, n) : "no loss";
    fputs("\n\n"
          "def loss_fn(output, labels):\n",
          e->out);
    switch (kind) {
    case LOSS_CROSS_ENTROPY:
        fprintf(e->out,
                "    \"\"\"%s: log_softmax and nll, mean over the batch.\"\"\"\n"
                "    return F.cross_entropy(output, labels.long())\n",
                where);
        break;
    case LOSS_NLL:
        fprintf(e->out,
                "    \"\"\"%s: output holds log-probabilities; mean over the batch.\"\"\"\n"
                "    return F.nll_loss(output, labels.long())\n",
                where);
        break;
    case LOSS_MSE:
        fprintf(e->out,
                "    \"\"\"%s: against one-hot labels, mean over every element.\"\"\"\n"
                "    target = F.one_hot(labels.long(), NUM_CLASSES).to(output.dtype)\n"
                "    return F.mse_loss(output, target)\n",
                where);
        break;
    }
}

static void emit_optimizer(Emitter *e)
{
    const TrainConfig *t = &e->net->train;
    Arena *a = &e->a;
    fprintf(e->out,
            "\n\n"
            "def make_optimizer(model, lr=%s):\n"
            "    \"\"\"The train { } block's optimizer over model.parameters(); lr: the base rate.\"\"\"\n",
            py_float(a, t->lr));
    if (t->optimizer == OPT_SGD)
        fprintf(e->out,
                "    return torch.optim.SGD(model.parameters(), lr=lr, momentum=%s, dampening=%s,\n"
                "                           weight_decay=%s, nesterov=%s)\n",
                py_float(a, t->momentum), py_float(a, t->dampening), py_float(a, t->weight_decay),
                t->nesterov ? "True" : "False");
    else
        fprintf(e->out,
                "    return torch.optim.%s(model.parameters(), lr=lr, betas=(%s, %s), eps=%s,\n"
                "                            weight_decay=%s)\n",
                t->optimizer == OPT_ADAM ? "Adam" : "AdamW", py_float(a, t->beta1), py_float(a, t->beta2),
                py_float(a, t->eps), py_float(a, t->weight_decay));

    fprintf(e->out,
            "\n\n"
            "def make_scheduler(optimizer, steps_per_epoch, epochs=%lld):\n",
            (long long)t->epochs);
    switch (t->schedule) {
    case SCHED_CONSTANT:
        fputs("    \"\"\"schedule constant: the base rate throughout. Step it after every optimizer step\n"
              "    (SCHEDULE_INTERVAL), like the others; it never changes the rate.\"\"\"\n"
              "    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)\n",
              e->out);
        break;
    case SCHED_STEP:
        fprintf(e->out,
                "    \"\"\"schedule step every=%lld gamma=%s: step it once per epoch (SCHEDULE_INTERVAL),\n"
                "    after the epoch's last optimizer step.\"\"\"\n"
                "    return torch.optim.lr_scheduler.StepLR(optimizer, step_size=%lld, gamma=%s)\n",
                (long long)t->step_every, py_float(a, t->gamma), (long long)t->step_every, py_float(a, t->gamma));
        break;
    case SCHED_COSINE:
        fprintf(e->out,
                "    \"\"\"schedule cosine warmup=%lld: step it after every optimizer step (SCHEDULE_INTERVAL).\n"
                "    Optimizer step s (from 0) runs at the base rate times (s + 1) / warmup while\n"
                "    s < warmup, then a cosine from 1 to 0 over the remaining steps of the run.\"\"\"\n"
                "    warmup, total = %lld, epochs * steps_per_epoch\n"
                "\n"
                "    def factor(step):\n"
                "        if step < warmup:\n"
                "            return (step + 1) / warmup\n"
                "        return 0.5 * (1.0 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))\n"
                "\n"
                "    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)\n",
                (long long)t->warmup, (long long)t->warmup);
        break;
    }
}

bool emit_torch(FILE *out, const Net *net)
{
    Emitter e = {.out = out, .net = net};
    /* nn.Module keeps its mode in self.training, so no child module can have
     * that name (model.train() would assign a bool to it): refused, before a
     * line is written, rather than written as a module that cannot be made */
    for (int i = 0; i < net->n_nodes; i++)
        if (strcmp(net->nodes[i].name, "training") == 0 && module_for(&e, &net->nodes[i])) {
            fprintf(stderr, "ddpc: error: --emit torch: %s:%d: a layer named 'training' would be a PyTorch module of "
                            "that name, which nn.Module keeps for its train/eval mode; rename the layer\n",
                    net->file, net->nodes[i].line);
            arena_free(&e.a);
            return false;
        }
    const char *base = strrchr(net->file, '/');
    e.file = comment_safe(&e.a, base ? base + 1 : net->file);
    const char *cls = class_name(&e.a, net->name);

    emit_header(&e);
    if (has_op(net, OP_DROPOUT) || data_has_draws(&net->data))
        emit_hash32(&e);
    if (has_op(net, OP_DROPOUT))
        emit_hash_dropout(&e);
    if (data_any(&net->data))
        emit_transform(&e);
    emit_load_image(&e);
    emit_class(&e, cls);
    emit_loss(&e);
    emit_optimizer(&e);
    free(e.lines);
    arena_free(&e.a);
    return true;
}
