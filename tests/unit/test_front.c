/*
 * Unit tests of the front end: scanner, parser, sema (shapes, names, counts),
 * messages and suggestions, and hostile input that must neither crash nor hang.
 * They call the compiler's functions directly, but for a few runs of the ddpc
 * command (hostile files, --flag=value); test_golden.c checks the ddpc
 * command's output as users see it.
 */
#include "testutil.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ddpc.h"
#include "planned_net.h"  // planned_net: a source planned, for its hash
#include "net.tab.h"  // token kinds
#include "net.lex.h"  // net_lex, net__scan_bytes

/* One compilation of SRC, with its messages captured as text. */
typedef struct {
    Arena arena;
    Diag diag;
    Ast ast;
    Net net;
    bool ok;
    char *messages;
    size_t messages_len;
} Compiled;

static void compile(Compiled *c, const char *src, size_t len)
{
    memset(c, 0, sizeof *c);
    FILE *out = open_memstream(&c->messages, &c->messages_len);
    diag_init(&c->diag, "t.net", src, len, out);
    parse_net(&c->arena, &c->diag, src, len, &c->ast);
    c->ok = sema_net(&c->arena, &c->diag, &c->ast, "t.net", &c->net);
    diag_flush(&c->diag);
    fclose(out);
}

static void compile_str(Compiled *c, const char *src) { compile(c, src, strlen(src)); }

static void release(Compiled *c)
{
    diag_free(&c->diag);
    arena_free(&c->arena);
    free(c->messages);
}

static const Node *find_node(const Net *net, const char *name)
{
    for (int i = 0; i < net->n_nodes; i++)
        if (strcmp(net->nodes[i].name, name) == 0)
            return &net->nodes[i];
    return NULL;
}

static const Param *find_param(const Net *net, const char *name)
{
    for (int i = 0; i < net->n_params; i++)
        if (strcmp(net->params[i].name, name) == 0)
            return &net->params[i];
    return NULL;
}

static char *example(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "examples/%s", name);
    char *src = test_read_file(path, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(src);
    return src;
}

//
// Scanner
//

typedef struct {
    int kind;
    int line, col, end_col;
} Tok;

static int scan_all(const char *src, Tok *toks, int max)
{
    Arena a = {0};
    Diag d;
    diag_init(&d, "t.net", src, strlen(src), NULL);
    ParseState *st = arena_alloc(&a, sizeof *st);
    st->arena = &a;
    st->diag = &d;
    st->line = st->column = 1;
    yyscan_t scanner;
    net_lex_init_extra(st, &scanner);
    YY_BUFFER_STATE buf = net__scan_bytes(src, (int)strlen(src), scanner);
    int n = 0;
    NET_STYPE val;
    Loc loc;
    int kind;
    while ((kind = net_lex(&val, &loc, scanner)) != 0 && n < max)
        toks[n++] = (Tok){kind, loc.first_line, loc.first_column, loc.last_column};
    net__delete_buffer(buf, scanner);
    net_lex_destroy(scanner);
    diag_free(&d);
    arena_free(&a);
    return n;
}

static void test_scanner_tokens(void)
{
    Tok t[32];
    int n = scan_all("conv 1->32 k5 # comment\n  maxpool 2;input 1x28x28 lr=5e-4 bucket 25MB @", t, 32);
    int kinds[] = {NAME, INT, ARROW, INT, NAME, NEWLINE, NAME, INT, ';', NAME, DIMS, NAME, EQUALS, FLOAT, NAME, SIZE, BAD_CHAR};
    CU_ASSERT_EQUAL_FATAL(n, (int)(sizeof kinds / sizeof kinds[0]));
    for (int i = 0; i < n; i++)
        CU_ASSERT_EQUAL(t[i].kind, kinds[i]);
    /* positions: `1->32` is INT(6) ARROW(7-8) INT(9-10) on line 1 */
    CU_ASSERT_EQUAL(t[1].col, 6);
    CU_ASSERT_EQUAL(t[2].col, 7);
    CU_ASSERT_EQUAL(t[2].end_col, 9);
    CU_ASSERT_EQUAL(t[6].line, 2);
    CU_ASSERT_EQUAL(t[6].col, 3);
    CU_ASSERT_EQUAL(t[6].end_col, 10);
}

static void test_scanner_crlf_and_comments(void)
{
    Tok t[16];
    int n = scan_all("relu\r\n// c\r\ntanh", t, 16);
    CU_ASSERT_EQUAL_FATAL(n, 4);
    CU_ASSERT_EQUAL(t[0].kind, NAME);
    CU_ASSERT_EQUAL(t[1].kind, NEWLINE);
    CU_ASSERT_EQUAL(t[2].kind, NEWLINE);
    CU_ASSERT_EQUAL(t[3].kind, NAME);
    CU_ASSERT_EQUAL(t[3].line, 3);
    CU_ASSERT_EQUAL(t[3].col, 1);
    /* a UTF-8 byte-order mark first is not text; anywhere else it is */
    n = scan_all("\xEF\xBB\xBFrelu \xEF\xBB\xBF", t, 16);
    CU_ASSERT_EQUAL_FATAL(n, 2);
    CU_ASSERT(t[0].kind == NAME && t[0].line == 1 && t[0].col == 1);
    CU_ASSERT(t[1].kind == BAD_CHAR && t[1].col == 6);
}

//
// Parser
//

static void test_parser_statements(void)
{
    Compiled c;
    compile_str(&c, "stem: conv 3->8 k3 p=same\ntrain { optimizer adam betas=0.8,0.99; seed 7 }\n");
    const Stmt *s = c.ast.stmts;
    CU_ASSERT_EQUAL_FATAL(c.ast.syntax_errors, 0);
    CU_ASSERT_STRING_EQUAL(s->label, "stem");
    CU_ASSERT_STRING_EQUAL(s->word, "conv");
    const Arg *a = s->args;
    CU_ASSERT_EQUAL(a->val->kind, VAL_ARROW);
    CU_ASSERT_EQUAL(a->val->dims[0], 3);
    CU_ASSERT_EQUAL(a->val->dims[1], 8);
    CU_ASSERT_EQUAL(a->loc.first_column, 12);
    CU_ASSERT_EQUAL(a->loc.last_column, 16);
    CU_ASSERT_STRING_EQUAL(a->next->val->text, "k3");
    CU_ASSERT_STRING_EQUAL(a->next->next->key, "p");
    CU_ASSERT_STRING_EQUAL(a->next->next->val->text, "same");
    const Stmt *t = s->next;
    CU_ASSERT_TRUE_FATAL(t->has_block);
    CU_ASSERT_STRING_EQUAL(t->body->word, "optimizer");
    const Value *betas = t->body->args->next->val;
    CU_ASSERT_EQUAL(betas->kind, VAL_LIST);
    CU_ASSERT_DOUBLE_EQUAL(betas->items->f, 0.8, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(betas->items->next->f, 0.99, 1e-12);
    CU_ASSERT_STRING_EQUAL(t->body->next->word, "seed");
    release(&c);
}

static void test_parser_recovers_and_reports_all(void)
{
    Compiled c;
    compile_str(&c, "input 4\nrelu @\nlinear 3 = 2\ntanh\nlinear 2\nloss mse\n");
    CU_ASSERT_FALSE(c.ok);
    CU_ASSERT_EQUAL(c.ast.syntax_errors, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(c.messages, "t.net:2:6: error: unexpected character '@'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(c.messages, "t.net:3:10: error: unexpected '='"));
    /* the statements around the broken ones survive */
    int words = 0;
    for (const Stmt *s = c.ast.stmts; s; s = s->next)
        words += !s->is_error;
    CU_ASSERT_EQUAL(words, 4);
    release(&c);
}

//
// Sema: shapes, names, counts
//

static void test_mnist_counts_and_names(void)
{
    char *src = example("mnist.net");
    Compiled c;
    compile_str(&c, src);
    CU_ASSERT_TRUE_FATAL(c.ok);
    const Net *net = &c.net;
    CU_ASSERT_STRING_EQUAL(net->name, "mnist");
    CU_ASSERT_EQUAL(net->total_params, 184586); /* as PyTorch counts the tutorial CNN */
    CU_ASSERT_EQUAL(net->num_classes, 10);
    static const char *const names[] = {"conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias",
                                        "linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias"};
    CU_ASSERT_EQUAL_FATAL(net->n_params, 8);
    for (int i = 0; i < 8; i++)
        CU_ASSERT_STRING_EQUAL(net->params[i].name, names[i]);
    const Param *w = find_param(net, "conv2.weight");
    CU_ASSERT_EQUAL(w->ndim, 4);
    CU_ASSERT_EQUAL(w->shape[0], 64);
    CU_ASSERT_EQUAL(w->shape[1], 32);
    CU_ASSERT_EQUAL(w->shape[2], 5);
    CU_ASSERT_EQUAL(w->numel, 51200);
    const Node *conv1 = find_node(net, "conv1");
    CU_ASSERT_EQUAL(conv1->out_shape.d[0], 32);
    CU_ASSERT_EQUAL(conv1->out_shape.d[1], 24);
    CU_ASSERT_EQUAL(conv1->flops, 2 * 32 * 24 * 24 * 25 + 32 * 24 * 24);
    const Node *flat = find_node(net, "flatten1");
    CU_ASSERT_EQUAL(flat->out_shape.rank, 1);
    CU_ASSERT_EQUAL(flat->out_shape.d[0], 1024);
    const TrainConfig *t = &net->train;
    CU_ASSERT_EQUAL(t->batch, 64);
    CU_ASSERT_EQUAL(t->optimizer, OPT_SGD);
    CU_ASSERT_DOUBLE_EQUAL(t->momentum, 0.9, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(t->weight_decay, 5e-4, 1e-15);
    CU_ASSERT_EQUAL(t->schedule, SCHED_COSINE);
    CU_ASSERT_EQUAL(t->warmup, 200);
    CU_ASSERT_EQUAL(t->bucket_cap_bytes, 25 * 1024 * 1024);
    CU_ASSERT_EQUAL(t->first_bucket_bytes, 1024 * 1024);
    release(&c);
    free(src);
}

static void test_resnet_batchnorm_and_residual(void)
{
    char *src = example("resnet.net");
    Compiled c;
    compile_str(&c, src);
    CU_ASSERT_TRUE_FATAL(c.ok);
    const Net *net = &c.net;
    CU_ASSERT_PTR_NOT_NULL(find_param(net, "stem.weight"));
    CU_ASSERT_PTR_NULL(find_param(net, "stem.bias")); /* nobias */
    const Param *rm = find_param(net, "bn2.running_mean");
    CU_ASSERT_PTR_NOT_NULL_FATAL(rm);
    CU_ASSERT_FALSE(rm->trainable);
    const Param *nbt = find_param(net, "bn1.num_batches_tracked");
    CU_ASSERT_PTR_NOT_NULL_FATAL(nbt);
    CU_ASSERT_TRUE(nbt->is_int64);
    CU_ASSERT_EQUAL(nbt->ndim, 0);
    CU_ASSERT_EQUAL(nbt->numel, 1);
    const Node *res1 = find_node(net, "res1");
    CU_ASSERT_EQUAL_FATAL(res1->op, OP_RESIDUAL_ADD);
    /* the join adds the body's output to the block's input */
    const Node *relu1 = find_node(net, "relu1");
    CU_ASSERT_EQUAL(res1->skip, relu1->out);
    CU_ASSERT_EQUAL(res1->in, find_node(net, "bn3")->out);
    CU_ASSERT_EQUAL(find_node(net, "conv2")->depth, 1);
    CU_ASSERT_TRUE(find_node(net, "bn6")->sync);
    CU_ASSERT_EQUAL(find_node(net, "conv4")->out_shape.d[1], 14);
    CU_ASSERT_EQUAL(find_node(net, "global_avgpool1")->out_shape.rank, 1);
    CU_ASSERT_TRUE(net->train.nesterov);
    CU_ASSERT_EQUAL(net->train.bucket_cap_bytes, 1024 * 1024);
    /* 16*9 + (16*16*9)*2 + 16*32*9 + (32*32*9)*2 + 330 weights, + 2*C per batchnorm */
    CU_ASSERT_EQUAL(net->total_params, 144 + 4608 + 4608 + 18432 + 330 + 2 * (16 * 3 + 32 * 3));
    release(&c);
    free(src);
}

static void test_shape_rules(void)
{
    Compiled c;
    compile_str(&c, "input 3x32x31\n"
                    "conv 8 k3 s2 p1\n"       /* 8x16x16 */
                    "maxpool k3 s2 p1\n"      /* 8x8x8 */
                    "avgpool 3\n"             /* 8x2x2 */
                    "conv 8->4 k1 groups=4\n" /* 4x2x2 */
                    "flatten\nlinear 16->5 nobias\nloss nll\n");
    CU_ASSERT_TRUE_FATAL(c.ok);
    const Net *net = &c.net;
    const Node *conv1 = find_node(net, "conv1");
    CU_ASSERT_EQUAL(conv1->out_shape.d[1], 16);
    CU_ASSERT_EQUAL(conv1->out_shape.d[2], 16);
    CU_ASSERT_EQUAL(find_node(net, "maxpool1")->out_shape.d[1], 8);
    CU_ASSERT_EQUAL(find_node(net, "avgpool1")->out_shape.d[2], 2);
    const Param *g = find_param(net, "conv2.weight");
    CU_ASSERT_EQUAL(g->shape[1], 2); /* in/groups */
    CU_ASSERT_PTR_NULL(find_param(net, "linear1.bias"));
    CU_ASSERT_EQUAL(net->num_classes, 5);
    /* nll without log_softmax warns but compiles */
    CU_ASSERT_PTR_NOT_NULL(strstr(c.messages, "warning: nll expects log-probabilities"));
    release(&c);
}

static void test_units_and_defaults(void)
{
    Compiled c;
    compile_str(&c, "input 4\nbatchnorm sync=off\nbatchnorm sync=on eps=1e-3\nlinear 2\nloss mse\n");
    CU_ASSERT_TRUE_FATAL(c.ok);
    CU_ASSERT_FALSE(find_node(&c.net, "bn1")->sync);
    CU_ASSERT_TRUE(find_node(&c.net, "bn2")->sync);
    CU_ASSERT_DOUBLE_EQUAL(find_node(&c.net, "bn2")->eps, 1e-3, 1e-15);
    release(&c);
    compile_str(&c, "input 4\nlinear 2\nloss mse\ntrain { bucket 512KB; optimizer adamw }\n");
    CU_ASSERT_TRUE_FATAL(c.ok);
    CU_ASSERT_EQUAL(c.net.train.bucket_cap_bytes, 512 * 1024);
    CU_ASSERT_DOUBLE_EQUAL(c.net.train.lr, 1e-3, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(c.net.train.weight_decay, 0.01, 1e-15); /* AdamW's default */
    CU_ASSERT_EQUAL(c.net.train.epochs, 10);
    CU_ASSERT_STRING_EQUAL(c.net.name, "t");
    release(&c);
}

/* Booleans are true/false, on/off, yes/no or 1/0 (README's rules): each
 * spelling sets the option as its pair does; another word is an error. */
static void test_boolean_spellings(void)
{
    Compiled c;
    compile_str(&c, "input 4\nbatchnorm sync=yes\nbatchnorm sync=no\nbatchnorm sync=1\nbatchnorm sync=0\n"
                    "batchnorm sync=true\nbatchnorm sync=false\nlinear 2\nloss mse\n");
    CU_ASSERT_TRUE_FATAL(c.ok);
    static const char *const bn[] = {"bn1", "bn2", "bn3", "bn4", "bn5", "bn6"};
    for (int i = 0; i < 6; i++)
        CU_ASSERT_EQUAL(find_node(&c.net, bn[i])->sync, i % 2 == 0);
    release(&c);
    compile_str(&c, "input 4\nbatchnorm sync=maybe\nlinear 2\nloss mse\n");
    CU_ASSERT_FALSE(c.ok);
    CU_ASSERT_PTR_NOT_NULL(strstr(c.messages, "sync must be true or false (on/off, yes/no, 1/0), not 'maybe'"));
    release(&c);
}

static void test_names_numbered_by_kind(void)
{
    Compiled c;
    compile_str(&c, "input 4\nfirst: linear 8\nrelu\nlinear 8\nrelu\nlinear 2\nloss mse\n");
    CU_ASSERT_TRUE_FATAL(c.ok);
    /* the named layer keeps its place in the count: the others are linear2, linear3 */
    CU_ASSERT_PTR_NOT_NULL(find_param(&c.net, "first.weight"));
    CU_ASSERT_PTR_NOT_NULL(find_param(&c.net, "linear2.weight"));
    CU_ASSERT_PTR_NOT_NULL(find_param(&c.net, "linear3.bias"));
    CU_ASSERT_PTR_NOT_NULL(find_node(&c.net, "relu2"));
    release(&c);
}

/* Names the generated code would spell twice are refused, once per pair, at
 * the later label, whichever of the two is the longer; names that only look
 * alike are not: a product with a bias names its kernels after the bias, a
 * residual has no kernel after an activation, a scratch's offset is no
 * buffer's. */
static void test_generated_names_meet(void)
{
    static const struct {
        const char *src, *message; /* NULL: accepted */
    } cases[] = {
        {"input 4\nl_bias_sigmoid: sigmoid\nl: linear 8\nsigmoid\nlinear 2\nloss mse\n",
         "t.net:3:1: error: layer name 'l' and the sigmoid 'l_bias_sigmoid' at line 2 would both name "
         "l_bias_sigmoid_forward in the generated code; choose another name"},
        {"input 1x4x4\nx: conv 2 k1 nobias\nx_relu: relu\nrelu\nflatten\nlinear 2\nloss mse\n",
         "t.net:3:1: error: layer name 'x_relu' and the conv 'x' at line 2 would both name x_relu_forward"},
        {"input 1x4x4\nbatchnorm\nbn1_sums: relu\nflatten\nlinear 2\nloss mse\n",
         "t.net:3:1: error: layer name 'bn1_sums' and the batchnorm 'bn1' at line 2 would both name bn1_sums_forward"},
        {"input 4\nloss_forward: relu\nlinear 2\nl: loss mse\n",
         "t.net:2:1: error: layer name 'loss_forward' would name loss_forward_backward, which the generated code keeps "
         "for the loss"},
        {"input 4\nstem: linear 8\nstem_relu: relu\nstem_bn: batchnorm\nlinear 2\nloss mse\n", NULL},
        {"input 4\nblock1: residual { block1_relu: relu; block1_linear: linear 4 }\nlinear 2\nloss mse\n", NULL},
        {"input 4\nloss: relu\nlinear 2\nl: loss mse\n", NULL},
        /* maxpool1_argmax_at is the scratch's offset; the relu's are maxpool1_argmax_out, _out_at */
        {"input 1x4x4\nmaxpool 2\nmaxpool1_argmax: relu\nflatten\nlinear 2\nloss mse\n", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Compiled c;
        compile_str(&c, cases[i].src);
        CU_ASSERT_EQUAL(c.ok, cases[i].message == NULL);
        CU_ASSERT_EQUAL(c.diag.errors, cases[i].message != NULL);
        bool said = !cases[i].message || strstr(c.messages, cases[i].message);
        if (!said || c.ok != (cases[i].message == NULL))
            fprintf(stderr, "\ncase %zu: %s", i, c.messages);
        CU_ASSERT(said);
        release(&c);
    }
}

static void test_torch_counts_the_same(void)
{
    const char *python = test_python_with_torch();
    if (!python) {
        fputs("\n  (skipped: no python3 with torch)", stderr);
        return;
    }
    /* The tutorial's module, written independently of ddpc, counted by PyTorch. */
    char *cmd, *out = NULL;
    CU_ASSERT_FATAL(asprintf(&cmd, "%s -c \"import torch.nn as nn\n"
                                   "m = nn.Sequential(nn.Conv2d(1,32,5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32,64,5),\n"
                                   "  nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(1024,128), nn.ReLU(), nn.Linear(128,10))\n"
                                   "print(sum(p.numel() for p in m.parameters()))\"",
                             python) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, &out), 0);
    char *src = example("mnist.net");
    Compiled c;
    compile_str(&c, src);
    CU_ASSERT_EQUAL(atoll(out), c.net.total_params);
    release(&c);
    free(src);
    free(out);
    free(cmd);
}

/* everything.net holds every op kind, so that this test, the goldens and
 * the gradient check see each; and each row of op_facts.c is whole for it. */
static void test_op_facts_cover_every_kind(void)
{
    char *src = test_read_file("tests/golden/good/everything.net", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(src);
    Compiled c;
    compile_str(&c, src);
    CU_ASSERT_TRUE_FATAL(c.ok);
    const Net *net = &c.net;
    bool seen[OP_COUNT] = {false};
    for (int i = 0; i < net->n_nodes; i++) {
        const Node *n = &net->nodes[i];
        const OpFacts *f = op_facts(n->op); /* aborts if the row is out of its place */
        CU_ASSERT_EQUAL(f->op, n->op);
        seen[n->op] = true;
        for (int k = 0; k < OP_MAX_SCRATCH; k++) {
            int64_t per_sample, fixed;
            op_scratch_floats(n, k, &per_sample, &fixed);
            bool has = f->scratch[k].size != SCRATCH_NONE;
            CU_ASSERT_EQUAL(has, per_sample > 0 || fixed > 0);
            if (has && (!f->scratch[k].name || !f->scratch[k].type))
                CU_FAIL("a scratch without a name or type");
        }
        if (f->activation)
            CU_ASSERT_EQUAL(f->output, OUT_NEW);
        for (int k = 0; k < n->n_params; k++) /* each parameter says how it starts */
            CU_ASSERT_NOT_EQUAL(f->init[net->params[n->first_param + k].role], INIT_NONE);
    }
    for (int k = 0; k < OP_COUNT; k++)
        if (!seen[k]) {
            fprintf(stderr, "everything.net has no node of op kind %d\n", k);
            CU_FAIL("everything.net misses an op kind");
        }
    /* fan-in from the weight, as PyTorch: in / groups x k x k, or in */
    CU_ASSERT_EQUAL(op_fan_in(net, find_node(net, "stem")), 3 * 3 * 3);
    CU_ASSERT_EQUAL(op_fan_in(net, find_node(net, "conv2")), 16 / 4 * 3 * 3);
    CU_ASSERT_EQUAL(op_fan_in(net, find_node(net, "head")), 32);
    release(&c);
    free(src);
}

//
// Messages and suggestions
//

static void test_suggestions(void)
{
    static const char *const words[] = {"relu", "conv", "linear", "leaky_relu", "batchnorm"};
    CU_ASSERT_STRING_EQUAL(ddp_suggest_nearest("relu6", words, 5), "relu");
    CU_ASSERT_STRING_EQUAL(ddp_suggest_nearest("lienar", words, 5), "linear"); /* transposition */
    CU_ASSERT_STRING_EQUAL(ddp_suggest_nearest("batchnrom", words, 5), "batchnorm");
    CU_ASSERT_PTR_NULL(ddp_suggest_nearest("x", words, 5));
    CU_ASSERT_PTR_NULL(ddp_suggest_nearest("transformer", words, 5));
}

static void test_caret_under_span_with_tabs(void)
{
    Compiled c;
    compile_str(&c, "input 1x8x8\n\tconv\t3->4 k3\nflatten\nlinear 2\nloss mse\n");
    CU_ASSERT_FALSE(c.ok);
    CU_ASSERT_PTR_NOT_NULL(strstr(c.messages, "t.net:2:7: error: conv expects 3 input channels, but input gives 1 (1x8x8)\n"
                                              "    \tconv\t3->4 k3\n"
                                              "    \t    \t^~~~\n"));
    release(&c);
}

static void test_long_line_is_windowed(void)
{
    size_t n = 200000;
    char *src = malloc(n + 64);
    strcpy(src, "input 4\nlinear 2 ");
    size_t len = strlen(src);
    memset(src + len, 'a', n);
    strcpy(src + len + n, "\n@\nloss mse\n");
    Compiled c;
    compile_str(&c, src);
    CU_ASSERT_FALSE(c.ok);
    CU_ASSERT_PTR_NOT_NULL(strstr(c.messages, "unexpected character '@'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(c.messages, "unexpected 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...' after linear"));
    /* no message line is longer than the quoting window plus its decorations */
    for (char *line = c.messages, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        size_t l = next ? (size_t)(next - line) : strlen(line);
        CU_ASSERT(l < 300);
        next = next ? next + 1 : NULL;
    }
    release(&c);
    free(src);
}

static void test_error_limit(void)
{
    char *src = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&src, &len);
    fputs("input 4\n", f);
    for (int i = 0; i < 500; i++)
        fputs("bogus\n", f);
    fputs("linear 2\nloss mse\n", f);
    fclose(f);
    Compiled c;
    compile(&c, src, len);
    CU_ASSERT_EQUAL(c.diag.errors, 500);
    CU_ASSERT_PTR_NOT_NULL(strstr(c.messages, "t.net: error: too many errors (500 in all); the first 50 are shown"));
    release(&c);
    free(src);
}

/* Broken lines one after another: each is counted (bison alone would stay
 * quiet until 3 tokens after an error were shifted, dropping every other
 * line's message), and 100,000 of them read in linear time and print the
 * first 50 and the count. */
static void test_consecutive_syntax_errors(void)
{
    const int n = 100000;
    char *src = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&src, &len);
    fputs("input 4\n", f);
    for (int i = 0; i < n; i++)
        fputs(i % 2 ? "relu @\n" : "@ relu\n", f);
    fputs("linear 2\nloss mse\n", f);
    fclose(f);
    Compiled c;
    compile(&c, src, len);
    CU_ASSERT_FALSE(c.ok);
    CU_ASSERT_EQUAL(c.ast.syntax_errors, n);
    CU_ASSERT_EQUAL(c.diag.errors, n);
    CU_ASSERT_PTR_NOT_NULL(strstr(c.messages, "t.net:2:1: error: unexpected character '@'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(c.messages, "t.net:3:6: error: unexpected character '@'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(c.messages, "t.net:51:6: error: unexpected character '@'"));
    CU_ASSERT_PTR_NULL(strstr(c.messages, "t.net:52:"));
    CU_ASSERT_PTR_NOT_NULL(strstr(c.messages, "t.net: error: too many errors (100000 in all); the first 50 are shown"));
    release(&c);
    free(src);
}

//
// Hostile input: never a crash, never a hang, always a verdict
//

static void test_deep_nesting(void)
{
    static const int depths[] = {500, PARSE_MAX_NESTING - 1, PARSE_MAX_NESTING, 20000};
    for (size_t k = 0; k < sizeof depths / sizeof depths[0]; k++) {
        const int depth = depths[k];
        char *src = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&src, &len);
        fputs("input 4\n", f);
        for (int i = 0; i < depth; i++)
            fputs("residual {\n", f);
        fputs("relu\n", f);
        for (int i = 0; i < depth; i++)
            fputs("}\n", f);
        fputs("linear 2\nloss mse\n", f);
        fclose(f);
        Compiled c;
        compile(&c, src, len);
        if (depth < PARSE_MAX_NESTING) {
            CU_ASSERT_TRUE(c.ok); /* deep, but legal */
            CU_ASSERT_EQUAL(c.net.nodes[c.net.n_nodes - 3].op, OP_RESIDUAL_ADD);
        } else {
            CU_ASSERT_FALSE(c.ok);
            CU_ASSERT_PTR_NOT_NULL(strstr(c.messages, "nest"));
        }
        if (depth == PARSE_MAX_NESTING) /* the deepest legal one is the message's number */
            CU_ASSERT_PTR_NOT_NULL(strstr(c.messages, "residual blocks nest more than 999 deep"));
        release(&c);
        free(src);
    }
}

/* A statement of 200,000 arguments, and an option of 200,000 values: read
 * in time linear in their count, then refused, the first written first (the
 * goldens pin the order of a list's values: betas=, mean=). Lists walked at
 * each append took minutes for such a line; the watchdog would stop it. */
static void test_many_arguments(void)
{
    const int n = 200000;
    char *src = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&src, &len);
    fputs("input 4\nlinear 2", f);
    for (int i = 0; i < n; i++)
        fprintf(f, " x%d=1", i);
    fputs(" mean=0", f);
    for (int i = 1; i < n; i++)
        fprintf(f, ",%d", i);
    fputs("\nloss mse\n", f);
    fclose(f);
    Compiled c;
    compile(&c, src, len);
    CU_ASSERT_FALSE(c.ok);
    /* the first unknown option is the first written */
    const char *first = strstr(c.messages, "has no option");
    CU_ASSERT_PTR_NOT_NULL(first);
    CU_ASSERT(first && strncmp(first, "has no option 'x0'", 18) == 0);
    release(&c);
    free(src);
}

static void test_garbage_and_overflow(void)
{
    /* random bytes, NULs included, from a fixed seed */
    unsigned seed = 12345;
    for (int round = 0; round < 200; round++) {
        size_t len = (size_t)(rand_r(&seed) % 4096);
        char *buf = malloc(len + 1);
        for (size_t i = 0; i < len; i++)
            buf[i] = (char)(rand_r(&seed) & 0xff);
        Compiled c;
        compile(&c, buf, len);
        CU_ASSERT_FALSE(c.ok);
        CU_ASSERT(c.diag.errors > 0);
        release(&c);
        free(buf);
    }
    Compiled c;
    compile_str(&c, "input 99999999999999999999x1x1\nlinear 184467440737095516160\nloss mse\n"
                    "train { batch 1e999; seed 99999999999999999999; bucket 1e300MB }\n");
    CU_ASSERT_FALSE(c.ok);
    CU_ASSERT(c.diag.errors >= 4);
    release(&c);
    /* each size is legal; their product is not */
    compile_str(&c, "input 1073741824x1073741824x4\nconv 1073741824 k1\nflatten\nlinear 2\nloss mse\n");
    CU_ASSERT_FALSE(c.ok);
    CU_ASSERT(strstr(c.messages, "too large") || strstr(c.messages, "at most 2147483647"));
    release(&c);
}

static void test_ddpc_binary_survives_hostile_files(void)
{
    /* The same through the command, as users meet it: exit 2 and a message. */
    char *out = NULL, *cmd;
    CU_ASSERT_FATAL(asprintf(&cmd, "head -c 100000 /dev/urandom > /tmp/ddpc_garbage.net; %s --check /tmp/ddpc_garbage.net",
                             test_ddpc()) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, &out), 2);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "error:"));
    free(out);
    free(cmd);
    CU_ASSERT_FATAL(asprintf(&cmd, "%s --check /nonexistent.net", test_ddpc()) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, &out), 2);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "cannot read '/nonexistent.net'"));
    free(out);
    free(cmd);
    CU_ASSERT_FATAL(asprintf(&cmd, "%s --frobnicate x.net; %s", test_ddpc(), test_ddpc()) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, &out), 2);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "unknown option '--frobnicate'"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "no input file"));
    free(out);
    free(cmd);
}

/* Every ddpc flag taking a value also takes --flag=value (README): the
 * same output as --flag value. */
static void test_ddpc_flag_equals_value(void)
{
    char *cmd, *joined = NULL, *spaced = NULL;
    CU_ASSERT_FATAL(asprintf(&cmd, "%s examples/mnist.net --target=cpu --emit=plan", test_ddpc()) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, &joined), 0);
    free(cmd);
    CU_ASSERT_FATAL(asprintf(&cmd, "%s examples/mnist.net --target cpu --emit plan", test_ddpc()) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, &spaced), 0);
    free(cmd);
    CU_ASSERT_FATAL(joined && spaced);
    CU_ASSERT_PTR_NOT_NULL(strstr(spaced, "bucket plan of net mnist: "));
    CU_ASSERT_STRING_EQUAL(joined, spaced);
    free(joined);
    free(spaced);
}

/* What ddpc prints is its output: every kind of it, sent to a full disk
 * (/dev/full), ends with a message and exit status 1, not a truncated copy
 * and 0; a closed stdout that is never written to is no failure. */
static void test_ddpc_full_stdout(void)
{
    static const char *const runs[] = {
        "examples/mnist.net --target cpu --emit cu", "examples/mnist.net --emit torch",
        "examples/mnist.net --target cpu --emit plan", "examples/mnist.net --emit plan --world 1,2 --link 10",
        "examples/mnist.net --summary", "--help", "--version", "--doctor"};
    if (access("/dev/full", W_OK) != 0) {
        fputs("\n  (skipped: no /dev/full)", stderr);
        return;
    }
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        char *cmd, *out = NULL;
        CU_ASSERT_FATAL(asprintf(&cmd, "%s %s > /dev/full", test_ddpc(), runs[i]) > 0);
        int rc = test_run(cmd, &out);
        bool said = out && strstr(out, "ddpc: error: cannot write to standard output: No space left on device\n");
        CU_assertImplementation(rc == 1 && said, __LINE__, runs[i], __FILE__, "", CU_FALSE);
        if (rc != 1 || !said)
            fprintf(stderr, "\n  ddpc %s > /dev/full: exit %d, output:\n%s", runs[i], rc, out ? out : "");
        free(out);
        free(cmd);
    }
    char *cmd, *out = NULL;
    CU_ASSERT_FATAL(asprintf(&cmd, "%s --check examples/mnist.net >&-", test_ddpc()) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, &out), 0);
    free(out);
    free(cmd);
}

/* Where the caller ignores SIGPIPE, a pipe whose reader has gone is a
 * failed write like any other: the message, and exit status 1. (With
 * SIGPIPE's default, the signal ends ddpc quietly, as any filter.) */
static void test_ddpc_closed_pipe(void)
{
    int fd;
    pid_t pid = test_fork_capturing(&fd);
    if (pid == 0) {
        int dead[2];
        if (pipe(dead) != 0)
            _exit(99);
        close(dead[0]); /* no reader, ever: every write fails with EPIPE */
        dup2(dead[1], STDOUT_FILENO);
        close(dead[1]);
        signal(SIGPIPE, SIG_IGN); /* kept across exec */
        execl(test_ddpc(), "ddpc", "examples/mnist.net", "--target", "cpu", "--emit", "cu", (char *)NULL);
        _exit(98);
    }
    char *out = NULL;
    CU_ASSERT_EQUAL(test_child_output(pid, fd, &out), 1);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "ddpc: error: cannot write to standard output: Broken pipe\n"));
    free(out);
}

/* The program tells the trainer the fewest values per channel a sample
 * gives its batchnorms, synchronised and not (DdpNet.batchnorm_values_*):
 * a 2x2 plane, and a flat input's one. */
static void test_batchnorm_values_emitted(void)
{
    char *cmd, *out = NULL;
    CU_ASSERT_FATAL(asprintf(&cmd, "printf 'net bnx\\ninput 1x4x4\\nconv 1->3 k3; batchnorm; relu\\nflatten\\n"
                             "linear 8; batchnorm sync=off\\nlinear 10\\nloss cross_entropy\\n' > /tmp/ddpc_bnx_$$.net && "
                             "%s /tmp/ddpc_bnx_$$.net --emit cu --target cpu; s=$?; rm -f /tmp/ddpc_bnx_$$.net; exit $s",
                             test_ddpc()) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "\n    4, 1,  // a batchnorm's fewest values per channel a sample: "
                                              "synchronised, sync=off\n};"));
    free(out);
    free(cmd);
}

/* The hash of SRC's net (planned_net), what a checkpoint is compared by;
 * NULL when SRC does not compile. */
static char *net_hash(const char *src)
{
    PlannedNet c;
    char *hash = planned_net(&c, src) && c.plan.hash ? strdup(c.plan.hash) : NULL;
    planned_net_release(&c);
    return hash;
}

/* What a checkpoint holds to is the net's layers: their ops, attributes,
 * shapes and parameter names. The train block (lr, momentum, schedule) and
 * the data block may change between a save and a resume, as --lr may, and
 * take effect; a layer's change makes another net, whose checkpoints are
 * refused ("a checkpoint of another version of net"). */
static void test_hash_is_the_layers(void)
{
    const char *layers = "net t\ninput 1x8x8\nconv 1->4 k3\nrelu\nflatten\ndropout 0.5\nlinear 10\n"
                         "loss cross_entropy\n";
    char src[1024];
    snprintf(src, sizeof src, "%strain {\n batch 8\n optimizer sgd lr=0.1 momentum=0.9\n}\n", layers);
    char *base = net_hash(src);
    CU_ASSERT_PTR_NOT_NULL_FATAL(base);
    const char *same[] = {
        "train {\n batch 16\n epochs 3\n optimizer adamw lr=0.001\n schedule cosine warmup=5\n seed 4\n}\n",
        "train {\n batch 8\n optimizer sgd lr=0.1 momentum=0.9\n}\ndata {\n normalize mean=0.5 std=0.2\n}\n",
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        snprintf(src, sizeof src, "%s%s", layers, same[i]);
        char *h = net_hash(src);
        CU_ASSERT(h && strcmp(h, base) == 0);
        free(h);
    }
    const char *other[] = {"dropout 0.5", "dropout 0.4", "conv 1->4 k3", "conv 1->4 k3 p1", "relu\n", "gelu\n"};
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i += 2) {
        char changed[512];
        const char *at = strstr(layers, other[i]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(at);
        snprintf(changed, sizeof changed, "%.*s%s%s", (int)(at - layers), layers, other[i + 1],
                 at + strlen(other[i]));
        snprintf(src, sizeof src, "%strain {\n batch 8\n optimizer sgd lr=0.1 momentum=0.9\n}\n", changed);
        char *h = net_hash(src);
        CU_ASSERT(h && strcmp(h, base) != 0);
        free(h);
    }
    free(base);
}

void suite_front(void)
{
    static const TestCase cases[] = {
        {"scanner: tokens and their columns", test_scanner_tokens},
        {"scanner: CRLF and comments", test_scanner_crlf_and_comments},
        {"parser: labels, arguments, lists, blocks", test_parser_statements},
        {"parser: recovers and reports every broken line", test_parser_recovers_and_reports_all},
        {"sema: mnist.net counts 184,586 and names like PyTorch", test_mnist_counts_and_names},
        {"sema: batchnorm buffers, residual joins", test_resnet_batchnorm_and_residual},
        {"sema: stride, padding, pools, groups", test_shape_rules},
        {"sema: size units and optimizer defaults", test_units_and_defaults},
        {"sema: booleans spelt true/false, on/off, yes/no, 1/0", test_boolean_spellings},
        {"sema: unnamed layers numbered per kind", test_names_numbered_by_kind},
        {"sema: names the generated code would spell twice are refused, look-alikes not", test_generated_names_meet},
        {"sema: PyTorch counts the same parameters", test_torch_counts_the_same},
        {"op facts: everything.net has every kind, each row whole", test_op_facts_cover_every_kind},
        {"diag: did-you-mean", test_suggestions},
        {"diag: caret under the span, tabs kept", test_caret_under_span_with_tabs},
        {"diag: 200,000-character line quoted in a window", test_long_line_is_windowed},
        {"diag: error limit", test_error_limit},
        {"parser: 100,000 broken lines in a row, each counted, 50 shown", test_consecutive_syntax_errors},
        {"hostile: 999-deep nesting works, deeper is refused, saying how deep is legal", test_deep_nesting},
        {"hostile: 200,000 arguments on a line are read in linear time", test_many_arguments},
        {"hostile: random bytes and overflowing numbers", test_garbage_and_overflow},
        {"hostile: ddpc command exits 2 with a message", test_ddpc_binary_survives_hostile_files},
        {"ddpc command: --flag=value as --flag value", test_ddpc_flag_equals_value},
        {"ddpc command: a full stdout is a failure, named, exit 1", test_ddpc_full_stdout},
        {"ddpc command: a closed pipe with SIGPIPE ignored is a failure, named, exit 1", test_ddpc_closed_pipe},
        {"ddpc command: the program carries its batchnorms' fewest values per channel", test_batchnorm_values_emitted},
        {"the net's hash, which checkpoints hold to: its layers, not train { } or data { }", test_hash_is_the_layers},
        {NULL, NULL},
    };
    test_add_suite("front [python]", cases);
}
