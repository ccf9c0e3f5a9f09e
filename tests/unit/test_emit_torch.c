/*
 * Tests of `ddpc --emit torch` and of tools/torch_ref.py, the PyTorch side of
 * the parity tests.
 *
 * The emitted module is checked against the IR it came from, not against
 * pinned text: each net of examples/ and tests/golden/good/ (and a net of
 * awkward names) is compiled in-process, its module imported by python3-torch,
 * and the module's state_dict (names, shapes, order, parameter and buffer
 * totals) must be the IR's params exactly; a training step and an eval pass
 * must run. The dropout mask must equal runtime/dropout_mask.h's, computed
 * here in C, bit for bit; the data { } transform runtime/augment.c's, and
 * load_image (PIL's decoding, resize, center_crop) runtime/image_decode.c's
 * on twelve kinds of PNG and JPEG that PIL writes (CMYK among them) (load_image_py lists them). torch_ref.py must read weights the runtime writes,
 * write weights the runtime reads, and its --grad-only must agree with the
 * step it takes.
 *
 * Every check that needs torch is skipped, with a note, where torch is missing.
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "augment.h"       // ddp_augment_batch, ddp_augment_check: the program's data { }
#include "ddpc.h"          // parse_net, sema_net, emit_torch
#include "dropout_mask.h"  // ddp_dropout_layer_key, ddp_dropout_keep, ddp_dropout_threshold
#include "image_decode.h"  // ddp_image_load_sample: the program's image files
#include "safetensors.h"   // ddp_safetensors_write, _open, _expect
#include "testutil.h"

static char tmpdir[64];

static void make_tmpdir(void) { test_make_tmpdir(tmpdir, sizeof tmpdir, "/tmp/ddp_torch_XXXXXX"); }

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(text, f);
    fclose(f);
}

/* The python3 with torch, or NULL after saying the test is skipped. */
static const char *torch_python(void)
{
    const char *py = test_python_with_torch();
    if (!py)
        fprintf(stderr, "\n(skipped: no python3 with torch)");
    return py;
}

/* Runs COMMAND; on a non-zero exit, fails and shows what it printed. */
static int run_ok(const char *command)
{
    char *out = NULL;
    int rc = test_run(command, &out);
    if (rc != 0)
        fprintf(stderr, "\n$ %s\nexit %d:\n%s", command, rc, out ? out : "");
    CU_ASSERT_EQUAL(rc, 0);
    free(out);
    return rc;
}

/* One compilation, as ddpc does it. */
typedef struct {
    Arena arena;
    Diag diag;
    Ast ast;
    Net net;
    bool ok;
} Compiled;

static bool compile(Compiled *c, const char *path, const char *src)
{
    memset(c, 0, sizeof *c);
    diag_init(&c->diag, path, src, strlen(src), NULL);
    parse_net(&c->arena, &c->diag, src, strlen(src), &c->ast);
    c->ok = sema_net(&c->arena, &c->diag, &c->ast, path, &c->net);
    return c->ok;
}

static void release(Compiled *c)
{
    diag_free(&c->diag);
    arena_free(&c->arena);
}

static void emit_to(const Net *net, const char *path)
{
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    emit_torch(f, net);
    fclose(f);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* The .net files every emitter must handle: examples/ and tests/golden/good/. */
static int net_files(char paths[][256], int max)
{
    static const char *const dirs[] = {"examples", "tests/golden/good"};
    int n = 0;
    for (int d = 0; d < 2; d++) {
        DIR *dir = opendir(dirs[d]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
        struct dirent *e;
        while ((e = readdir(dir)) && n < max)
            if (ends_with(e->d_name, ".net"))
                snprintf(paths[n++], 256, "%s/%s", dirs[d], e->d_name);
        closedir(dir);
    }
    return n;
}

//
// The module against the IR
//

/* Imports each module named on the command line and writes MODULE.got: its
 * state_dict, totals, and what a training step and an eval pass give. */
static const char check_modules_py[] =
    "import importlib.util, math, sys\n"
    "import torch\n"
    "for path in sys.argv[1:]:\n"
    "    spec = importlib.util.spec_from_file_location('m', path)\n"
    "    mod = importlib.util.module_from_spec(spec)\n"
    "    spec.loader.exec_module(mod)\n"
    "    torch.manual_seed(0)\n"
    "    net = mod.Net()\n"
    "    params = dict(net.named_parameters())\n"
    "    lines = []\n"
    "    for k, v in net.state_dict().items():\n"
    "        lines.append('%s [%s] %s %s' % (k, ','.join(map(str, v.shape)), 'param' if k in params else 'buffer',\n"
    "                     'int64' if v.dtype == torch.int64 else 'float'))\n"
    "    lines.append('trainable %d' % sum(p.numel() for p in net.parameters()))\n"
    "    lines.append('buffers %d' % sum(b.numel() for b in net.buffers()))\n"
    "    x = torch.rand(3, *mod.INPUT_SHAPE)\n"
    "    y = torch.arange(3) % mod.NUM_CLASSES\n"
    "    opt = mod.make_optimizer(net)\n"
    "    sched = mod.make_scheduler(opt, 5)\n"
    "    net.set_dropout_context(mod.TRAIN['seed'], 0)\n"
    "    out = net(x, torch.arange(3))\n"
    "    loss = mod.loss_fn(out, y)\n"
    "    opt.zero_grad()\n"
    "    loss.backward()\n"
    "    opt.step()\n"
    "    sched.step()\n"
    "    lines.append('output [%s] loss %s' % (','.join(map(str, out.shape)),\n"
    "                 'finite' if math.isfinite(loss.item()) else 'not finite'))\n"
    "    lines.append('gradients ' + ('all' if all(p.grad is not None for p in params.values()) else 'missing'))\n"
    "    net.eval()\n"
    "    lines.append('eval [%s]' % ','.join(map(str, net(x).shape)))\n"
    "    lines.append('class ' + mod.Net.__name__)\n"
    "    open(path + '.got', 'w').write('\\n'.join(lines) + '\\n')\n";

/* What check_modules_py must write for NET, whose class should be CLS (NULL:
 * any). */
static char *expected_report(const Net *net, const char *cls)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    for (int i = 0; i < net->n_params; i++) {
        const Param *p = &net->params[i];
        fprintf(f, "%s [", p->name);
        for (int d = 0; d < p->ndim; d++)
            fprintf(f, "%s%lld", d ? "," : "", (long long)p->shape[d]);
        fprintf(f, "] %s %s\n", p->trainable ? "param" : "buffer", p->is_int64 ? "int64" : "float");
    }
    fprintf(f, "trainable %lld\nbuffers %lld\n", (long long)net->total_params, (long long)net->total_buffers);
    fprintf(f, "output [3,%lld] loss finite\ngradients all\neval [3,%lld]\n", (long long)net->num_classes,
            (long long)net->num_classes);
    if (cls)
        fprintf(f, "class %s\n", cls);
    fclose(f);
    return text;
}

/* Compares line by line, so that a failure names the first line that differs
 * (a "class" line is left out of GOT when EXPECTED has none). */
static void compare_report(const char *what, const char *expected, const char *got)
{
    const char *e = expected, *g = got;
    int line = 1;
    while (*e && *g) {
        size_t el = strcspn(e, "\n"), gl = strcspn(g, "\n");
        if (el != gl || memcmp(e, g, el) != 0)
            break;
        e += el + (e[el] == '\n');
        g += gl + (g[gl] == '\n');
        line++;
    }
    bool same = !*e && (!*g || strncmp(g, "class ", 6) == 0);
    if (!same)
        fprintf(stderr, "\n%s: line %d differs:\n  expected: %.*s\n  got:      %.*s", what, line,
                (int)strcspn(e, "\n"), e, (int)strcspn(g, "\n"), g);
    CU_ASSERT(same);
}

/* Awkward layer names: Python keywords, nn.Module's own attributes, a leading
 * underscore, nested and empty residual blocks, a batchnorm of features, a
 * file stem that is not an identifier (the class name comes from it). */
static const char awkward_net[] =
    "input 2x6x6\n"
    "forward: conv 2->4 k3\n"
    "class: relu\n"
    "_x: batchnorm\n"
    "set_dropout_context: dropout 0.3\n"
    "residual { }\n"
    "type: residual { residual { tanh } ; sigmoid }\n"
    "residual { residual {} }\n"
    "flatten\n"
    "None: dropout 0.25\n"
    "linear 8; batchnorm momentum=0.2\n"
    "head: linear 3\n"
    "loss mse\n";

static const char *known_class(const char *path)
{
    static const char *const table[][2] = {
        {"mnist.net", "Mnist"}, {"mlp.net", "Mlp"}, {"resnet.net", "Resnet"}, {"everything.net", "Everything"},
        {"minimal.net", "Minimal"}, {"crlf_and_semicolons.net", "Semi"}, {"my-odd.net", "MyOdd"},
        {"fashion_resnet.net", "FashionResnet"}, {"cifar10.net", "Cifar10"}, {"augment.net", "Augment"},
    };
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(base, table[i][0]) == 0)
            return table[i][1];
    return NULL;
}

static void test_state_dict_matches_ir(void)
{
    const char *py = torch_python();
    if (!py)
        return;
    make_tmpdir();
    char paths[64][256];
    int n = net_files(paths, 63);
    CU_ASSERT_FATAL(n >= 3);
    snprintf(paths[n++], 256, "%s", test_tmp_path(tmpdir, "my-odd.net"));
    write_text(paths[n - 1], awkward_net);

    Compiled c[64];
    char *command = NULL;
    size_t command_len = 0;
    FILE *cmd = open_memstream(&command, &command_len);
    fprintf(cmd, "%s %s", py, test_tmp_path(tmpdir, "check_modules.py"));
    write_text(test_tmp_path(tmpdir, "check_modules.py"), check_modules_py);
    for (int i = 0; i < n; i++) {
        char *src = test_read_file(paths[i], NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(src);
        CU_ASSERT_FATAL(compile(&c[i], paths[i], src));
        free(src);
        char name[32];
        snprintf(name, sizeof name, "net%d.py", i);
        emit_to(&c[i].net, test_tmp_path(tmpdir, name));
        fprintf(cmd, " %s", test_tmp_path(tmpdir, name));
    }
    fclose(cmd);
    run_ok(command);
    free(command);

    /* Tidy Python: no unused import, no undefined name (where pyflakes is installed). */
    char probe[300];
    snprintf(probe, sizeof probe, "%s -c 'import pyflakes' >/dev/null 2>&1", py);
    if (test_run(probe, NULL) == 0) {
        char flakes[300];
        snprintf(flakes, sizeof flakes, "%s -m pyflakes %s/net*.py", py, tmpdir);
        run_ok(flakes);
    }

    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "net%d.py.got", i);
        char *got = test_read_file(test_tmp_path(tmpdir, name), NULL);
        char *expected = expected_report(&c[i].net, known_class(paths[i]));
        compare_report(paths[i], expected, got ? got : "(no report)\n");
        if (ends_with(paths[i], "examples/mnist.net"))
            CU_ASSERT_EQUAL(c[i].net.total_params, 184586); /* the DDP tutorial's count */
        free(got);
        free(expected);
        release(&c[i]);
    }
    test_remove_tmpdir(tmpdir);
}

/* The command line prints what the function writes. */
static void test_command_line(void)
{
    make_tmpdir();
    char paths[64][256];
    int n = net_files(paths, 64);
    for (int i = 0; i < n; i++) {
        char *src = test_read_file(paths[i], NULL);
        Compiled c;
        CU_ASSERT_FATAL(src && compile(&c, paths[i], src));
        emit_to(&c.net, test_tmp_path(tmpdir, "direct.py"));
        release(&c);
        free(src);
        char *command = NULL, *out = NULL;
        CU_ASSERT_FATAL(asprintf(&command, "%s %s --emit torch", test_ddpc(), paths[i]) > 0);
        int rc = test_run(command, &out);
        char *direct = test_read_file(test_tmp_path(tmpdir, "direct.py"), NULL);
        CU_ASSERT_EQUAL(rc, 0);
        bool same = out && direct && strcmp(out, direct) == 0;
        if (!same)
            fprintf(stderr, "\n%s: output differs from emit_torch's:\n%.400s", command, out ? out : "");
        CU_ASSERT(same);
        free(command);
        free(out);
        free(direct);
    }
    test_remove_tmpdir(tmpdir);
}

/* A layer named 'training' with a module cannot be one in PyTorch
 * (nn.Module's mode flag): refused with nothing written, and ddpc exits 2;
 * a layer of that name without a module (global_avgpool, done inline in
 * forward) is no attribute, and fine. */
static void test_training_name(void)
{
    static const char *const nets[] = {"input 784\ntraining: linear 10\nloss cross_entropy\n",
                                       "input 1x4x4\ntraining: global_avgpool\nlinear 10\nloss cross_entropy\n"};
    for (int i = 0; i < 2; i++) {
        Compiled c;
        CU_ASSERT_FATAL(compile(&c, "training.net", nets[i]));
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        CU_ASSERT_EQUAL(emit_torch(f, &c.net), i == 1);
        fclose(f);
        CU_ASSERT_EQUAL(len == 0, i == 0);
        free(text);
        release(&c);
    }
    char *out = NULL;
    char *command = NULL;
    CU_ASSERT_FATAL(asprintf(&command, "printf 'input 784\\ntraining: linear 10\\nloss cross_entropy\\n' | %s - "
                             "--emit torch", test_ddpc()) > 0);
    CU_ASSERT_EQUAL(test_run(command, &out), 2);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "ddpc: error: --emit torch: <stdin>:2: a layer named 'training' would "
                                              "be a PyTorch module of that name"));
    free(out);
    free(command);
    /* -o names a program, never the module: `-o net.py` is refused, and the
     * user's net.py stays as it was */
    CU_ASSERT_FATAL(asprintf(&command, "d=$(mktemp -d); trap 'rm -rf $d' EXIT; echo mine > $d/net.py; "
                             "%s examples/mlp.net --emit torch -o $d/net.py; echo status=$?; cat $d/net.py",
                             test_ddpc()) > 0);
    CU_ASSERT_EQUAL(test_run(command, &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "would build the program there as well: leave out -o (write the module "
                                              "with > FILE)"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "status=2\nmine\n"));
    free(out);
    free(command);
}

/* A net with every part of the module: the transform, HashDropout,
 * load_image, batchnorm, math for the cosine schedule. */
static const char every_part_net[] =
    "net every_part\n"
    "data { normalize mean=0.5 std=0.25; random_crop 8 pad=1; flip horizontal }\n"
    "input 1x8x8\n"
    "conv 4 k3 p1; batchnorm; relu\n"
    "dropout 0.5\n"
    "flatten\n"
    "linear 3\n"
    "loss cross_entropy\n"
    "train { schedule cosine warmup=2 }\n";

/* argv: ddpc, the every-part net, a directory. Reads what the every-part
 * module binds at its top level; then, for each of those names, each Python
 * builtin and keyword a class name could spell (a capital first, letters and
 * digits: the class of `net NAME` is NAME itself), and some names in the
 * .net's own spelling (f, none, TRAIN...), writes that net, has ddpc emit
 * its module, imports it and takes a training step, transform and dropout
 * included. The class must hide no name the module binds or uses; a
 * HashDropout missing its sample ids must still raise ValueError. Prints
 * 'NAME -> CLASS' per net, and a line per failure (exit 1). */
static const char class_names_py[] =
    "import ast, builtins, importlib.util, keyword, os, re, subprocess, sys\n"
    "import torch\n"
    "ddpc, net_path, out = sys.argv[1:4]\n"
    "src = open(net_path).read()\n"
    "def emit(name):\n"
    "    path = os.path.join(out, 'cls_%d.py' % emit.count)\n"
    "    emit.count += 1\n"
    "    text = src.replace('net every_part\\n', 'net %s\\n' % name, 1)\n"
    "    r = subprocess.run([ddpc, '-', '--emit', 'torch'], input=text, capture_output=True, text=True)\n"
    "    if r.returncode != 0:\n"
    "        raise RuntimeError('ddpc exit %d: %s' % (r.returncode, r.stderr))\n"
    "    open(path, 'w').write(r.stdout)\n"
    "    return path\n"
    "emit.count = 0\n"
    "def load(path):\n"
    "    spec = importlib.util.spec_from_file_location('m', path)\n"
    "    mod = importlib.util.module_from_spec(spec)\n"
    "    spec.loader.exec_module(mod)\n"
    "    return mod\n"
    "def top_level(path):\n"
    "    names = set()\n"
    "    for node in ast.parse(open(path).read()).body:\n"
    "        if isinstance(node, (ast.Import, ast.ImportFrom)):\n"
    "            names |= {a.asname or a.name.split('.')[0] for a in node.names}\n"
    "        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):\n"
    "            names.add(node.name)\n"
    "        elif isinstance(node, ast.Assign):\n"
    "            names |= {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}\n"
    "    return names\n"
    "base = top_level(emit('every_part')) - {'EveryPart', 'Net'}\n"
    "reserved = base | set(dir(builtins)) | set(keyword.kwlist)\n"
    "names = sorted({n for n in reserved if re.fullmatch('[A-Z][A-Za-z0-9]*', n)} |\n"
    "               {'f', 'none', 'true', 'false', 'TRAIN', 'value_error', 'hash_dropout', 'net', 'every_part'})\n"
    "failed = 0\n"
    "for name in names:\n"
    "    try:\n"
    "        mod = load(emit(name))\n"
    "        cls = mod.Net.__name__\n"
    "        print(name, '->', cls)\n"
    "        if cls in reserved or getattr(mod, cls) is not mod.Net:\n"
    "            raise RuntimeError('class %s hides a name' % cls)\n"
    "        torch.manual_seed(0)\n"
    "        net = mod.Net()\n"
    "        net.set_dropout_context(mod.TRAIN['seed'], 0)\n"
    "        x = mod.transform(torch.rand(2, *mod.INPUT_SHAPE), torch.arange(2), mod.TRAIN['seed'], 0)\n"
    "        loss = mod.loss_fn(net(x, torch.arange(2)), torch.arange(2) % mod.NUM_CLASSES)\n"
    "        opt = mod.make_optimizer(net)\n"
    "        sched = mod.make_scheduler(opt, 3)\n"
    "        opt.zero_grad()\n"
    "        loss.backward()\n"
    "        opt.step()\n"
    "        sched.step()\n"
    "        try:\n"
    "            net(x)\n"
    "            raise RuntimeError('no sample ids in training, and no error')\n"
    "        except ValueError:\n"
    "            pass\n"
    "    except Exception as e:\n"
    "        print('FAILED net %s: %s: %s' % (name, type(e).__name__, e))\n"
    "        failed += 1\n"
    "print('nets', len(names))\n"
    "sys.exit(1 if failed else 0)\n";

/* The class is named after the net, and must not hide what the module
 * binds (class F: torch.nn.functional; class TRAIN: the dict torch_ref.py
 * reads), a builtin (class ValueError: HashDropout's raise) or be a keyword
 * (class None: a syntax error). Such names get the prefix Net; others keep
 * their class (known_class pins the examples'). */
static void test_class_names(void)
{
    /* the file's name is the net's when there is no `net` line */
    Compiled c;
    CU_ASSERT_FATAL(compile(&c, "some/dir/f.net", "input 4\nlinear 2\nloss mse\n"));
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    emit_torch(f, &c.net);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\nclass NetF(nn.Module):\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\nNet = NetF "));
    free(text);
    release(&c);

    const char *py = torch_python();
    if (!py)
        return;
    make_tmpdir();
    write_text(test_tmp_path(tmpdir, "every_part.net"), every_part_net);
    write_text(test_tmp_path(tmpdir, "class_names.py"), class_names_py);
    char *command = NULL, *out = NULL;
    CU_ASSERT_FATAL(asprintf(&command, "%s %s %s %s %s", py, test_tmp_path(tmpdir, "class_names.py"), test_ddpc(),
                             test_tmp_path(tmpdir, "every_part.net"), tmpdir) > 0);
    int rc = test_run(command, &out);
    if (rc != 0)
        fprintf(stderr, "\n$ %s\nexit %d:\n%s", command, rc, out ? out : "");
    CU_ASSERT_EQUAL(rc, 0);
    static const char *const wanted[] = {
        "\nf -> NetF\n", "\nnone -> NetNone\n", "\ntrue -> NetTrue\n", "\nfalse -> NetFalse\n",
        "\nTRAIN -> NetTRAIN\n", "\nF -> NetF\n", "\nvalue_error -> NetValueError\n", "\nNone -> NetNone\n",
        "\nhash_dropout -> NetHashDropout\n", "\nnet -> Net\n", "\nevery_part -> EveryPart\n",
    };
    for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++) {
        bool found = out && strstr(out, wanted[i]);
        if (!found)
            fprintf(stderr, "\nclass names lack:%s", wanted[i]);
        CU_ASSERT(found);
    }
    /* the names a class could hide: Python's capital builtins alone are 60 or more */
    const char *count = out ? strstr(out, "\nnets ") : NULL;
    CU_ASSERT(count && atoi(count + 6) >= 70);
    free(command);
    free(out);
    test_remove_tmpdir(tmpdir);
}

/* What the module says for mnist.net, pinned where it matters to users. */
static void test_module_text(void)
{
    char *src = test_read_file("examples/mnist.net", NULL);
    Compiled c;
    CU_ASSERT_FATAL(src && compile(&c, "examples/mnist.net", src));
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    emit_torch(f, &c.net);
    fclose(f);
    static const char *const wanted[] = {
        "class Mnist(nn.Module):",
        "        self.conv1 = nn.Conv2d(1, 32, kernel_size=5)",
        "# mnist.net:4  conv 1->32 k5",
        "        self.maxpool1 = nn.MaxPool2d(kernel_size=2)",
        "        self.linear1 = nn.Linear(1024, 128)",
        "    def forward(self, x, sample_ids=None):",
        "        x = self.conv1(x) ",
        "Net = Mnist",
        "    return F.cross_entropy(output, labels.long())",
        "    return torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, dampening=0.0,\n"
        "                           weight_decay=0.0005, nesterov=False)",
        "def make_scheduler(optimizer, steps_per_epoch, epochs=10):",
        "    warmup, total = 200, epochs * steps_per_epoch",
        "SCHEDULE_INTERVAL = \"step\"",
        "INPUT_SHAPE = (1, 28, 28)",
        "NUM_CLASSES = 10",
        "TRAIN = {\"batch\": 64, \"batch_global\": False, \"epochs\": 10, \"seed\": 0, \"precision\": \"fp32\"}",
    };
    for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++) {
        bool found = strstr(text, wanted[i]) != NULL;
        if (!found)
            fprintf(stderr, "\nmodule lacks: %s", wanted[i]);
        CU_ASSERT(found);
    }
    /* No dropout in this net: no HashDropout class, no dead code. */
    CU_ASSERT_PTR_NULL(strstr(text, "class HashDropout"));
    free(text);
    release(&c);
    free(src);
}

//
// Dropout masks
//

/* A net with three dropouts, one of them named: the mask's layer number is
 * the ordinal among dropouts, whatever the name. */
static const char dropout_net[] =
    "net drops\n"
    "input 8\n"
    "dropout 0.5\n"
    "drop: dropout 0.3\n"
    "linear 4\n"
    "dropout p=0.1\n"
    "linear 2\n"
    "loss cross_entropy\n";

/* Each case line: seed layer epoch p numel samples; the script prints one
 * line of 0/1 per case (samples x elements, row-major), then the checks of
 * the module as a whole. */
static const char dropout_py[] =
    "import importlib.util, sys\n"
    "import torch\n"
    "spec = importlib.util.spec_from_file_location('m', sys.argv[1])\n"
    "mod = importlib.util.module_from_spec(spec)\n"
    "spec.loader.exec_module(mod)\n"
    "for line in open(sys.argv[2]):\n"
    "    seed, layer, epoch, p, numel, samples = line.split()\n"
    "    d = mod.HashDropout(float(p), int(layer))\n"
    "    d.seed, d.epoch = int(seed), int(epoch)\n"
    "    ids = torch.tensor([int(s) for s in samples.split(',')], dtype=torch.int64)\n"
    "    keep = d.keep_mask(ids, int(numel))\n"
    "    print(''.join('1' if b else '0' for b in keep.flatten().tolist()))\n"
    "net = mod.Net()\n"
    "print('layers', *[m.layer for m in net.modules() if isinstance(m, mod.HashDropout)])\n"
    "net.set_dropout_context(42, 3)\n"
    "ids = torch.tensor([5, 70000, 12])\n"
    "y = net.dropout1(torch.ones(3, 8), ids)\n"
    "print(''.join('1' if v else '0' for v in (y != 0).flatten().tolist()))\n"
    "print('scale', 'ok' if bool(((y == 0) | (y == 2)).all()) else 'wrong')\n"
    "net.eval()\n"
    "x = torch.rand(3, 8)\n"
    "print('eval', 'identity' if torch.equal(net.dropout1(x), x) else 'changed')\n";

static void mask_bits(FILE *f, uint64_t seed, uint32_t layer, int64_t epoch, double p, int numel,
                      const int64_t *samples, int n)
{
    uint32_t key = ddp_dropout_layer_key(seed, layer, epoch), threshold = ddp_dropout_threshold(p);
    for (int s = 0; s < n; s++)
        for (int e = 0; e < numel; e++)
            fputc(ddp_dropout_keep(key, samples[s], e, threshold) ? '1' : '0', f);
    fputc('\n', f);
}

static void test_dropout_mask(void)
{
    const char *py = torch_python();
    if (!py)
        return;
    make_tmpdir();
    Compiled c;
    CU_ASSERT_FATAL(compile(&c, "drops.net", dropout_net));
    emit_to(&c.net, test_tmp_path(tmpdir, "drops.py"));
    release(&c);

    static const uint64_t seeds[] = {0, 1, 1234, 0x00000001FFFFFFFFull, 0xDEADBEEFCAFEF00Dull, UINT64_MAX};
    static const struct {
        uint32_t layer;
        int64_t epoch;
        double p;
    } kinds[] = {{1, 0, 0.5}, {2, 7, 0.1}, {3, 1, 1.0 / 3}, {1000, ((int64_t)1 << 32) + 3, 0.9}, {1, 2, 0.0}};
    static const int64_t samples[] = {0, 1, 2, 63, 59999, ((int64_t)1 << 32) + 17, 9007199254740993LL, -1};
    enum { NUMEL = 37, NS = sizeof samples / sizeof samples[0] };

    char *expected = NULL;
    size_t expected_len = 0;
    FILE *want = open_memstream(&expected, &expected_len);
    FILE *cases = fopen(test_tmp_path(tmpdir, "cases.txt"), "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(cases);
    int kept = 0, total = 0;
    for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++)
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
            fprintf(cases, "%llu %u %lld %.17g %d ", (unsigned long long)seeds[s], kinds[k].layer,
                    (long long)kinds[k].epoch, kinds[k].p, NUMEL);
            for (int i = 0; i < NS; i++)
                fprintf(cases, "%s%lld", i ? "," : "", (long long)samples[i]);
            fputc('\n', cases);
            mask_bits(want, seeds[s], kinds[k].layer, kinds[k].epoch, kinds[k].p, NUMEL, samples, NS);
            if (kinds[k].p == 0.5) {
                uint32_t key = ddp_dropout_layer_key(seeds[s], 1, 0);
                for (int i = 0; i < NS; i++)
                    for (int e = 0; e < NUMEL; e++, total++)
                        kept += ddp_dropout_keep(key, samples[i], e, ddp_dropout_threshold(0.5));
            }
        }
    fclose(cases);
    fprintf(want, "layers 1 2 3\n");
    static const int64_t batch[] = {5, 70000, 12};
    mask_bits(want, 42, 1, 3, 0.5, 8, batch, 3);
    fprintf(want, "scale ok\neval identity\n");
    fclose(want);
    /* Not a degenerate mask: about half kept at p = 0.5. */
    CU_ASSERT(kept > total * 2 / 5 && kept < total * 3 / 5);

    write_text(test_tmp_path(tmpdir, "dropout.py"), dropout_py);
    char *command = NULL, *got = NULL;
    CU_ASSERT_FATAL(asprintf(&command, "%s %s %s %s", py, test_tmp_path(tmpdir, "dropout.py"), test_tmp_path(tmpdir, "drops.py"),
                             test_tmp_path(tmpdir, "cases.txt")) > 0);
    int rc = test_run(command, &got);
    CU_ASSERT_EQUAL(rc, 0);
    compare_report("HashDropout against dropout_mask.h", expected, got ? got : "");
    free(command);
    free(got);
    free(expected);
    test_remove_tmpdir(tmpdir);
}

//
// data { }: the module's transform against runtime/augment.c
//

static const char *const transform_nets[] = {
    "net zero\ninput 3x5x7\nflatten\nlinear 4\nloss cross_entropy\n"
    "data {\n  normalize mean=0.5,0.25,0.125 std=0.3,0.2,0.1\n  random_crop 5x7 pad=2\n"
    "  flip horizontal p=0.3\n  flip vertical p=0.7\n}\n",
    "net mirror\ninput 2x5x7\nflatten\nlinear 4\nloss cross_entropy\n"
    "data { random_crop 5x7 pad=4 reflect; flip horizontal }\n",
    "net features\ninput 12\nlinear 4\nloss cross_entropy\ndata { normalize mean=0.1 std=0.7 }\n",
    "net broadcast\ninput 3x5x7\nflatten\nlinear 4\nloss cross_entropy\ndata { normalize mean=0.5 std=0.25 }\n",
};

static const char transform_py[] =
    "import importlib.util, sys\n"
    "import numpy as np\n"
    "import torch\n"
    "spec = importlib.util.spec_from_file_location('m', sys.argv[1])\n"
    "mod = importlib.util.module_from_spec(spec)\n"
    "spec.loader.exec_module(mod)\n"
    "x = torch.from_numpy(np.fromfile(sys.argv[2], dtype=np.float32).reshape(-1, *mod.INPUT_SHAPE))\n"
    "ids = [int(v) for v in open(sys.argv[3]).read().split()]\n"
    "with open(sys.argv[5], 'wb') as out:\n"
    "    for line in open(sys.argv[4]):\n"
    "        seed, epoch, train = (int(v) for v in line.split())\n"
    "        y = mod.transform(x.clone(), ids, seed, epoch, train=bool(train))\n"
    "        out.write(y.to(torch.float32).contiguous().numpy().tobytes())\n";

/* The resize and center_crop of D, as emit_cu.c writes them. */
static DdpImageSizing image_sizing(const DataConfig *d)
{
    return (DdpImageSizing){(int)d->resize_h, (int)d->resize_w, (int)d->resize_shorter, (int)d->center_h,
                            (int)d->center_w};
}

/* The program's table for NET's data { } block, as emit_cu.c writes it. */
static DdpDataConfig program_table(const Net *net)
{
    const DataConfig *d = &net->data;
    return (DdpDataConfig){.channels = d->mean ? (int)d->n_channels : 0,
                           .mean = d->mean,
                           .std = d->std,
                           .crop_h = (int)d->crop_h,
                           .crop_w = (int)d->crop_w,
                           .pad = (int)d->pad,
                           .pad_mode = d->pad_mode == PAD_REFLECT ? DDP_PAD_REFLECT : DDP_PAD_ZERO,
                           .flip_h = d->flip_h,
                           .flip_v = d->flip_v,
                           .sizing = image_sizing(d)};
}

static void test_transform(void)
{
    const char *py = torch_python();
    if (!py)
        return;
    make_tmpdir();
    write_text(test_tmp_path(tmpdir, "transform.py"), transform_py);
    static const struct {
        uint64_t seed;
        int64_t epoch;
        int train;
    } cases[] = {{0, 0, 1}, {5, 1, 1}, {5, 2, 1}, {UINT64_MAX, ((int64_t)1 << 32) + 3, 1}, {5, 1, 0}};
    static const int64_t ids[] = {0, 1, 2, 3, 17, 63, 59999, ((int64_t)1 << 32) + 17, 9007199254740993LL,
                                  4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19};
    enum { N = sizeof ids / sizeof ids[0], CASES = sizeof cases / sizeof cases[0] };
    for (size_t k = 0; k < sizeof transform_nets / sizeof transform_nets[0]; k++) {
        Compiled c;
        CU_ASSERT_FATAL(compile(&c, "t.net", transform_nets[k]));
        emit_to(&c.net, test_tmp_path(tmpdir, "t.py"));
        if (k == 0) {
            /* p=0.3: draw < 0.3 * 2^32 = 1288490188.8 holds for draws up to 1288490188 */
            char *module = test_read_file(test_tmp_path(tmpdir, "t.py"), NULL);
            CU_ASSERT_PTR_NOT_NULL(module && strstr(module, "mirror = _hash32(key ^ 3) < 1288490189  #"));
            free(module);
        }
        DdpDataConfig table = program_table(&c.net);
        const Shape in = c.net.nodes[0].out_shape;
        int ch = in.rank == 3 ? (int)in.d[0] : 1, h = in.rank == 3 ? (int)in.d[1] : 1;
        int w = in.rank == 3 ? (int)in.d[2] : (int)in.d[0];
        size_t numel = (size_t)ch * h * w;
        CU_ASSERT_EQUAL_FATAL(ddp_augment_check(&table, ch, h, w), DDP_OK);

        float *x = malloc(sizeof(float) * numel * N), *y = malloc(sizeof(float) * numel * N);
        float *scratch = malloc(sizeof(float) * numel);
        CU_ASSERT_FATAL(x && y && scratch);
        uint32_t state = 12345;
        for (size_t i = 0; i < numel * N; i++) {
            state = state * 1664525u + 1013904223u;
            x[i] = (float)(state >> 24) / 255.0f; /* pixel / 255, as the loader gives them */
        }
        FILE *f = fopen(test_tmp_path(tmpdir, "x.bin"), "wb");
        CU_ASSERT_FATAL(f && fwrite(x, sizeof(float), numel * N, f) == numel * N);
        fclose(f);
        f = fopen(test_tmp_path(tmpdir, "ids.txt"), "w");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        for (int i = 0; i < N; i++)
            fprintf(f, "%lld\n", (long long)ids[i]);
        fclose(f);
        char *expected = NULL;
        size_t expected_len = 0;
        FILE *want = open_memstream(&expected, &expected_len);
        FILE *lines = fopen(test_tmp_path(tmpdir, "cases.txt"), "w");
        CU_ASSERT_PTR_NOT_NULL_FATAL(lines);
        int changed = 0, to_change = 0;
        for (int i = 0; i < CASES; i++) {
            to_change += cases[i].train || table.channels > 0;
            memcpy(y, x, sizeof(float) * numel * N);
            ddp_augment_batch(&table, cases[i].seed, cases[i].train ? cases[i].epoch : -1, ids, N, ch, h, w, y,
                              scratch);
            changed += memcmp(x, y, sizeof(float) * numel * N) != 0;
            fwrite(y, sizeof(float), numel * N, want);
            fprintf(lines, "%llu %lld %d\n", (unsigned long long)cases[i].seed, (long long)cases[i].epoch,
                    cases[i].train);
        }
        fclose(want);
        fclose(lines);
        CU_ASSERT_EQUAL(changed, to_change); /* not a transform that does nothing */

        char *command = NULL;
        CU_ASSERT_FATAL(asprintf(&command, "%s %s %s %s %s %s %s", py, test_tmp_path(tmpdir, "transform.py"),
                                 test_tmp_path(tmpdir, "t.py"), test_tmp_path(tmpdir, "x.bin"),
                                 test_tmp_path(tmpdir, "ids.txt"), test_tmp_path(tmpdir, "cases.txt"),
                                 test_tmp_path(tmpdir, "y.bin")) > 0);
        if (run_ok(command) == 0) {
            size_t got_len = 0;
            char *got = test_read_file(test_tmp_path(tmpdir, "y.bin"), &got_len);
            CU_ASSERT_EQUAL(got_len, expected_len);
            size_t first = 0;
            while (got && first < got_len && first < expected_len && got[first] == expected[first])
                first++;
            if (!got || got_len != expected_len || first != expected_len)
                fprintf(stderr, "\n%s: transform differs from augment.c from float %zu (case %zu, sample %zu)",
                        c.net.name, first / 4, first / 4 / (numel * N), first / 4 % (numel * N) / numel);
            CU_ASSERT(got && got_len == expected_len && first == expected_len);
            free(got);
        }
        free(command);
        free(expected);
        free(x);
        free(y);
        free(scratch);
        release(&c);
    }
    test_remove_tmpdir(tmpdir);
}

static const char *const image_nets[] = {
    "net rgb\ninput 3x20x20\nflatten\nlinear 4\nloss cross_entropy\ndata { resize 24; center_crop 20 }\n",
    "net grey\ninput 1x16x12\nflatten\nlinear 4\nloss cross_entropy\ndata { resize 16x12 }\n",
    "net padded\ninput 3x30x26\nflatten\nlinear 4\nloss cross_entropy\ndata { center_crop 30x26 }\n",
    "net wide\ninput 1x9x13\nflatten\nlinear 4\nloss cross_entropy\ndata { resize 9; center_crop 9x13 }\n",
};

/* Writes images of every kind into argv[2] with PIL, and for each the
 * module's load_image as raw bytes beside it (NAME.want); prints the names.
 * Where torchvision is installed, load_image must also equal its Resize and
 * CenterCrop (argv[4..8]: resize HxW, resize N, center_crop HxW; 0: none)
 * on the image PIL converted, and the last line says how many were compared
 * ("torchvision N"; N is 0 without torchvision). */
static const char load_image_py[] =
    "import importlib.util, io, os, sys\n"
    "import numpy as np\n"
    "from PIL import Image\n"
    "spec = importlib.util.spec_from_file_location('m', sys.argv[1])\n"
    "mod = importlib.util.module_from_spec(spec)\n"
    "spec.loader.exec_module(mod)\n"
    "out = sys.argv[2]\n"
    "rng = np.random.default_rng(int(sys.argv[3]))\n"
    "def rgb(h, w):\n"
    "    # smooth plus noise: something a JPEG codes with all its stages\n"
    "    y, x = np.mgrid[0:h, 0:w]\n"
    "    base = np.stack([x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1), (x + y) * 127 // max(h + w - 2, 1)], -1)\n"
    "    return np.clip(base + rng.integers(-40, 41, (h, w, 3)), 0, 255).astype(np.uint8)\n"
    "kinds = [\n"
    "    ('rgb.png', lambda a: Image.fromarray(a), {}),\n"
    "    ('rgba.png', lambda a: Image.fromarray(np.dstack([a, a[:, :, :1]])), {}),\n"
    "    ('grey.png', lambda a: Image.fromarray(a[:, :, 1]), {}),\n"
    "    ('grey16.png', lambda a: Image.fromarray(a[:, :, 1].astype(np.uint16) * 3), {}),\n"
    "    ('grey_alpha.png', lambda a: Image.fromarray(np.dstack([a[:, :, 1], a[:, :, 2]]), 'LA'), {}),\n"
    "    ('palette.png', lambda a: Image.fromarray(a).quantize(37), {}),\n"
    "    ('bits.png', lambda a: Image.fromarray(a[:, :, 0]).convert('1'), {}),\n"
    "    ('rgb.jpg', lambda a: Image.fromarray(a), {'quality': 90}),\n"
    "    ('rgb444.JPEG', lambda a: Image.fromarray(a), {'quality': 75, 'subsampling': 0}),\n"
    "    ('grey.jpg', lambda a: Image.fromarray(a[:, :, 0]), {}),\n"
    "    ('progressive.jpg', lambda a: Image.fromarray(a), {'progressive': True}),\n"
    "    ('cmyk.jpg', lambda a: Image.fromarray(np.dstack([a, 255 - a[:, :, 1]]), 'CMYK'), {}),\n"
    "]\n"
    "try:\n"
    "    import torchvision.transforms as T\n"
    "except ImportError:\n"
    "    T = None\n"
    "rh, rw, shorter, ch, cw = (int(v) for v in sys.argv[4:9])\n"
    "steps = ([T.Resize(shorter)] if shorter else [T.Resize((rh, rw))] if rh else []) if T else []\n"
    "steps += [T.CenterCrop((ch, cw))] if T and ch else []\n"
    "compared = 0\n"
    "for i, (name, make, options) in enumerate(kinds):\n"
    "    for size in ((int(rng.integers(5, 45)), int(rng.integers(5, 45))), (33, 41), (8, 8)):\n"
    "        path = os.path.join(out, f'{i}_{size[0]}x{size[1]}_{name}')\n"
    "        make(rgb(*size)).save(path, **options)\n"
    "        x = mod.load_image(path)\n"
    "        x.numpy().tofile(path + '.want')\n"
    "        if T:\n"
    "            img = Image.open(path).convert('L' if x.shape[0] == 1 else 'RGB')\n"
    "            ref = np.ascontiguousarray(np.array(T.Compose(steps)(img) if steps else img).reshape(x.shape[1], x.shape[2], -1).transpose(2, 0, 1))\n"
    "            if not np.array_equal(ref, x.numpy()):\n"
    "                sys.exit(f'{path}: load_image differs from torchvision')\n"
    "            compared += 1\n"
    "        print(path)\n"
    "print('torchvision', compared)\n";

static void test_load_image(void)
{
    const char *py = test_python_with("PYTHON", "/usr/bin/python3", "torch, PIL, numpy");
    if (!py) {
        fprintf(stderr, "\n(skipped: no python3 with torch, PIL and numpy)");
        return;
    }
    if (!ddp_image_support()) {
        fprintf(stderr, "\n(skipped: built without libpng and libjpeg)");
        return;
    }
    make_tmpdir();
    write_text(test_tmp_path(tmpdir, "load_image.py"), load_image_py);
    int compared = 0, by_torchvision = 0, by_torchvision_total = 0;
    for (size_t k = 0; k < sizeof image_nets / sizeof image_nets[0]; k++) {
        Compiled c;
        CU_ASSERT_FATAL(compile(&c, "t.net", image_nets[k]));
        emit_to(&c.net, test_tmp_path(tmpdir, "t.py"));
        const DataConfig *d = &c.net.data;
        const Shape in = c.net.nodes[0].out_shape;
        DdpImageFit fit = {(int)in.d[0], (int)in.d[1], (int)in.d[2], 0, image_sizing(d)};
        size_t bytes = (size_t)in.d[0] * in.d[1] * in.d[2];
        char *command = NULL, *list = NULL;
        const DdpImageSizing z = fit.sizing;
        CU_ASSERT_FATAL(asprintf(&command, "%s %s %s %s %zu %d %d %d %d %d", py, test_tmp_path(tmpdir, "load_image.py"),
                                 test_tmp_path(tmpdir, "t.py"), tmpdir, k, z.resize_h, z.resize_w, z.resize_shorter,
                                 z.center_h, z.center_w) > 0);
        int rc = test_run(command, &list);
        if (rc != 0)
            fprintf(stderr, "\n$ %s\nexit %d:\n%s", command, rc, list ? list : "");
        CU_ASSERT_EQUAL(rc, 0);
        uint8_t *mine = malloc(bytes);
        CU_ASSERT_PTR_NOT_NULL_FATAL(mine);
        for (char *path = rc == 0 ? strtok(list, "\n") : NULL; path; path = strtok(NULL, "\n")) {
            if (sscanf(path, "torchvision %d", &by_torchvision) == 1) {
                by_torchvision_total += by_torchvision;
                continue;
            }
            char want_path[512];
            snprintf(want_path, sizeof want_path, "%s.want", path);
            size_t len = 0;
            char *want = test_read_file(want_path, &len);
            DdpStatus status = ddp_image_load_sample(path, &fit, mine);
            size_t first = 0;
            while (status == DDP_OK && want && first < bytes && first < len && (uint8_t)want[first] == mine[first])
                first++;
            int same = status == DDP_OK && want && len == bytes && first == bytes;
            if (!same)
                fprintf(stderr, "\n%s (net %s): %s", path, c.net.name,
                        status != DDP_OK ? ddp_error_message()
                        : len != bytes   ? "PIL's sample is of another size"
                                         : "differs from PIL's");
            if (!same && status == DDP_OK && len == bytes)
                fprintf(stderr, " from byte %zu (channel %zu, row %zu, column %zu): %d here, %d in PIL", first,
                        first / (size_t)(in.d[1] * in.d[2]), first / (size_t)in.d[2] % (size_t)in.d[1],
                        first % (size_t)in.d[2], mine[first], (uint8_t)want[first]);
            CU_ASSERT(same);
            compared++;
            free(want);
        }
        free(mine);
        free(list);
        free(command);
        release(&c);
    }
    CU_ASSERT_EQUAL(compared, 4 * 12 * 3); /* every net, kind and size */
    if (by_torchvision_total == 0)
        fprintf(stderr, "\n(torchvision missing: load_image compared with runtime/image_decode.c only)");
    else
        CU_ASSERT_EQUAL(by_torchvision_total, compared);
    test_remove_tmpdir(tmpdir);
}

//
// tools/torch_ref.py
//

static const char tiny_net[] =
    "net tiny\n"
    "input 1x6x6\n"
    "conv 1->3 k3; batchnorm; relu\n"
    "dropout 0.25\n"
    "flatten\n"
    "linear 3\n"
    "loss cross_entropy\n"
    "train { batch 8; epochs 2; optimizer sgd lr=0.1; seed 7 }\n";

enum { TINY_N = 20, TINY_SIDE = 6 };

/* The tiny data set, where torchvision keeps FashionMNIST: images raw,
 * labels gzipped, so both readers are exercised. */
static void write_tiny_idx(void)
{
    char dir[300];
    snprintf(dir, sizeof dir, "mkdir -p '%s/data/FashionMNIST/raw'", tmpdir);
    CU_ASSERT_EQUAL_FATAL(test_run(dir, NULL), 0);
    unsigned char head[16] = {0, 0, 8, 3, 0, 0, 0, TINY_N, 0, 0, 0, TINY_SIDE, 0, 0, 0, TINY_SIDE};
    FILE *f = fopen(test_tmp_path(tmpdir, "data/FashionMNIST/raw/train-images-idx3-ubyte"), "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fwrite(head, 1, 16, f);
    for (int i = 0; i < TINY_N * TINY_SIDE * TINY_SIDE; i++)
        fputc((i * 37 + i / 7) % 256, f);
    fclose(f);
    gzFile gz = gzopen(test_tmp_path(tmpdir, "data/FashionMNIST/raw/train-labels-idx1-ubyte.gz"), "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(gz);
    unsigned char lhead[8] = {0, 0, 8, 1, 0, 0, 0, TINY_N};
    gzwrite(gz, lhead, 8);
    for (int i = 0; i < TINY_N; i++) {
        unsigned char label = (unsigned char)(i % 3);
        gzwrite(gz, &label, 1);
    }
    gzclose(gz);
}

/* Initial weights as the program would --export them: F32, step counts I64. */
static float *init_values;

static void write_init(const Net *net, const char *path)
{
    int64_t floats = 0;
    for (int i = 0; i < net->n_params; i++)
        floats += net->params[i].numel;
    size_t n = net->n_params > 0 ? (size_t)net->n_params : 1;
    init_values = calloc(floats > 0 ? (size_t)floats : 1, sizeof *init_values);
    static int64_t step_count = 5;
    DdpTensor *t = calloc(n, sizeof *t);
    CU_ASSERT_FATAL(init_values && t);
    float *v = init_values;
    for (int i = 0; i < net->n_params; i++) {
        const Param *p = &net->params[i];
        t[i] = (DdpTensor){.name = p->name, .dtype = p->is_int64 ? DDP_DTYPE_I64 : DDP_DTYPE_F32, .ndim = p->ndim};
        for (int d = 0; d < p->ndim; d++)
            t[i].shape[d] = p->shape[d];
        if (p->is_int64) {
            t[i].data = &step_count;
            continue;
        }
        for (int64_t k = 0; k < p->numel; k++)
            v[k] = p->role == PARAM_RUNNING_VAR ? 1.0f + 0.1f * (float)k
                                                : 0.3f * (float)sin(0.7 * (double)k + (double)i);
        t[i].data = v;
        v += p->numel;
    }
    CU_ASSERT_EQUAL(ddp_safetensors_write(path, t, net->n_params, NULL, 0), DDP_OK);
    free(t);
}

static int torch_ref(const char *py, const char *args)
{
    char *command = NULL;
    if (asprintf(&command, "%s tools/torch_ref.py --module %s --data %s/data --quiet %s", py,
                 test_tmp_path(tmpdir, "tiny.py"), tmpdir, args) < 0)
        return -1;
    int rc = run_ok(command);
    free(command);
    return rc;
}

/* Opens a file torch_ref wrote with the runtime's reader. */
static DdpSafetensors *open_st(const char *name)
{
    DdpSafetensors *f = NULL;
    DdpStatus st = ddp_safetensors_open(test_tmp_path(tmpdir, name), &f);
    if (st != DDP_OK)
        fprintf(stderr, "\n%s", ddp_error_message());
    CU_ASSERT_EQUAL_FATAL(st, DDP_OK);
    return f;
}

static const void *expect(DdpSafetensors *f, const Param *p, DdpDtype dtype)
{
    const void *data = NULL;
    DdpStatus st = ddp_safetensors_expect(f, p->name, dtype, p->shape, p->ndim, &data);
    if (st != DDP_OK)
        fprintf(stderr, "\n%s", ddp_error_message());
    CU_ASSERT_EQUAL(st, DDP_OK);
    return data;
}

static void test_torch_ref(void)
{
    const char *py = torch_python();
    if (!py)
        return;
    make_tmpdir();
    Compiled c;
    CU_ASSERT_FATAL(compile(&c, "tiny.net", tiny_net));
    const Net *net = &c.net;
    emit_to(net, test_tmp_path(tmpdir, "tiny.py"));
    write_tiny_idx();
    write_init(net, test_tmp_path(tmpdir, "init.safetensors"));

    /* --steps 0: the weights come back as they went in, in the runtime's format. */
    char args[1024];
    snprintf(args, sizeof args, "--init %s --steps 0 --out %s", test_tmp_path(tmpdir, "init.safetensors"),
             test_tmp_path(tmpdir, "copy.safetensors"));
    if (torch_ref(py, args) == 0) {
        DdpSafetensors *f = open_st("copy.safetensors");
        const float *v = init_values;
        for (int i = 0; i < net->n_params; i++) {
            const Param *p = &net->params[i];
            const void *data = expect(f, p, p->is_int64 ? DDP_DTYPE_I64 : DDP_DTYPE_F32);
            if (!data)
                continue;
            if (p->is_int64) {
                CU_ASSERT_EQUAL(*(const int64_t *)data, 5);
            } else {
                CU_ASSERT(memcmp(data, v, (size_t)p->numel * sizeof *v) == 0);
                v += p->numel;
            }
        }
        CU_ASSERT_EQUAL(ddp_safetensors_check_unused(f), DDP_OK);
        ddp_safetensors_close(f);
    }

    /* One plain SGD step in float64 against --grad-only on the same batch:
     * w1 = w0 - lr * g, with lr 0.1 and the same dropout mask. */
    snprintf(args, sizeof args, "--init %s --steps 1 --no-shuffle --dtype float64 --out %s",
             test_tmp_path(tmpdir, "init.safetensors"), test_tmp_path(tmpdir, "step1.safetensors"));
    int rc1 = torch_ref(py, args);
    snprintf(args, sizeof args, "--init %s --grad-only --no-shuffle --dtype float64 --out %s",
             test_tmp_path(tmpdir, "init.safetensors"), test_tmp_path(tmpdir, "grad.safetensors"));
    int rc2 = torch_ref(py, args);
    if (rc1 == 0 && rc2 == 0) {
        DdpSafetensors *w1 = open_st("step1.safetensors"), *g = open_st("grad.safetensors");
        CU_ASSERT_STRING_EQUAL(ddp_safetensors_meta(w1, "steps"), "1");
        const float *w0 = init_values;
        double worst = 0;
        int trainable = 0;
        for (int i = 0; i < net->n_params; i++) {
            const Param *p = &net->params[i];
            const void *after = expect(w1, p, p->is_int64 ? DDP_DTYPE_I64 : DDP_DTYPE_F64);
            if (p->is_int64) {
                CU_ASSERT(after && *(const int64_t *)after == 6);
                continue;
            }
            if (p->trainable) {
                trainable++;
                const double *grad = expect(g, p, DDP_DTYPE_F64);
                for (int64_t k = 0; after && grad && k < p->numel; k++) {
                    double implied = ((double)w0[k] - ((const double *)after)[k]) / 0.1;
                    double err = fabs(implied - grad[k]) / (1e-9 + fabs(grad[k]));
                    worst = err > worst ? err : worst;
                }
            }
            w0 += p->numel;
        }
        CU_ASSERT(worst < 1e-6);
        if (worst >= 1e-6)
            fprintf(stderr, "\nstep vs --grad-only: relative error %g", worst);
        CU_ASSERT_EQUAL(ddp_safetensors_count(g), trainable);
        CU_ASSERT_PTR_NOT_NULL(ddp_safetensors_meta(g, "loss"));
        ddp_safetensors_close(w1);
        ddp_safetensors_close(g);
    }

    /* Five shuffled steps cross an epoch (3 steps of 8, 8, 4 samples). */
    snprintf(args, sizeof args, "--init %s --steps 5 --out %s", test_tmp_path(tmpdir, "init.safetensors"),
             test_tmp_path(tmpdir, "after.safetensors"));
    if (torch_ref(py, args) == 0) {
        DdpSafetensors *f = open_st("after.safetensors");
        const float *w0 = init_values;
        int changed = 0, finite = 1;
        for (int i = 0; i < net->n_params; i++) {
            const Param *p = &net->params[i];
            const void *data = expect(f, p, p->is_int64 ? DDP_DTYPE_I64 : DDP_DTYPE_F32);
            if (p->is_int64) {
                CU_ASSERT(data && *(const int64_t *)data == 10);
                continue;
            }
            for (int64_t k = 0; data && k < p->numel; k++) {
                float v = ((const float *)data)[k];
                finite &= isfinite(v) != 0;
                changed += v != w0[k];
            }
            w0 += p->numel;
        }
        CU_ASSERT(finite);
        CU_ASSERT(changed > 0);
        ddp_safetensors_close(f);
    }

    /* --steps past the run's end (6 steps: 2 epochs of 3) stops there, as
     * the program's --max-steps does: 6 steps counted, and the weights of
     * the whole run, not a 9th step's on a schedule past its end. */
    snprintf(args, sizeof args, "--init %s --steps 9 --out %s", test_tmp_path(tmpdir, "init.safetensors"),
             test_tmp_path(tmpdir, "past.safetensors"));
    int rc_past = torch_ref(py, args);
    snprintf(args, sizeof args, "--init %s --out %s", test_tmp_path(tmpdir, "init.safetensors"),
             test_tmp_path(tmpdir, "whole.safetensors"));
    if (rc_past == 0 && torch_ref(py, args) == 0) {
        DdpSafetensors *past = open_st("past.safetensors"), *whole = open_st("whole.safetensors");
        CU_ASSERT_STRING_EQUAL(ddp_safetensors_meta(past, "steps"), "6");
        for (int i = 0; i < net->n_params; i++) {
            const Param *p = &net->params[i];
            const DdpDtype dtype = p->is_int64 ? DDP_DTYPE_I64 : DDP_DTYPE_F32;
            const size_t bytes = (size_t)p->numel * (p->is_int64 ? sizeof(int64_t) : sizeof(float));
            const void *a = expect(past, p, dtype), *b = expect(whole, p, dtype);
            if (p->is_int64)
                CU_ASSERT(a && *(const int64_t *)a == 11);
            CU_ASSERT(a && b && memcmp(a, b, bytes) == 0);
        }
        ddp_safetensors_close(past);
        ddp_safetensors_close(whole);
    }

    /* Weights of another net are refused, naming what is missing. */
    char *command = NULL, *out = NULL;
    CU_ASSERT_FATAL(asprintf(&command, "%s tools/torch_ref.py --module %s --data %s/data --init %s --out %s", py,
                             test_tmp_path(tmpdir, "tiny.py"), tmpdir, test_tmp_path(tmpdir, "grad.safetensors"),
                             test_tmp_path(tmpdir, "x.safetensors")) > 0);
    CU_ASSERT_EQUAL(test_run(command, &out), 2);
    CU_ASSERT(out && strstr(out, "missing bn1.running_mean"));
    free(command);
    free(out);

    free(init_values);
    init_values = NULL;
    release(&c);
    test_remove_tmpdir(tmpdir);
}

void suite_emit_torch(void)
{
    static const TestCase cases[] = {
        {"the module's state_dict is the IR's params; a step runs", test_state_dict_matches_ir},
        {"ddpc --emit torch prints what emit_torch writes", test_command_line},
        {"a layer named 'training' (a module) is refused, before a line is written; -o with --emit torch is "
         "refused, the file it names kept", test_training_name},
        {"the class hides no name the module binds, no builtin, is no keyword (net f, none, TRAIN)", test_class_names},
        {"the module reads as the net: layers, loss, optimizer, schedule", test_module_text},
        {"HashDropout drops what runtime/dropout_mask.h drops", test_dropout_mask},
        {"transform (data { }) computes what runtime/augment.c does, bit for bit", test_transform},
        {"load_image reads PNG and JPEG files as runtime/image_decode.c does (PIL), bit for bit", test_load_image},
        {"torch_ref.py: runtime weights in and out, a step agrees with --grad-only, --steps stops at the run's end",
         test_torch_ref},
        {NULL, NULL},
    };
    test_add_suite("emit_torch [python]", cases);
}
