/*
 * main.c: the ddpc command line.
 *
 *   ddpc FILE.net [-o OUT] [--target cuda|cpu] [--arch sm_90] [--layout nchw|nhwc|auto] [--check] [--summary]
 *                 [--emit cu|torch|plan [--world N,... --link GBPS [--tflops T] [--hop-us US]]]
 *                 [--rebuild FILE.cu] [--verbose] [--version] [--doctor] [--help]
 *
 * Reads the file, runs the front end (parse, sema) and then what the flags
 * ask for. Every user mistake, in the flags, in the file or in an output
 * path, ends with a message and exit status 2; a build that fails, 1; 0
 * means everything asked for was done.
 */
#include "ddpc.h"
#include "exact_sum.h"  // DdpExact: a CPU program's gradient, as its all-reduce sends it
#include "numbers.h"    // ddp_parse_int, ddp_parse_real: numbers read as the programs read theirs
#include "topology.h"   // DDP_MAX_RANKS: the largest world a program runs, and so plans for

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>  // unlink

enum { EXIT_USAGE = 2, MAX_NET_FILE = 64 * 1024 * 1024, MAX_WORLDS = 16 };

/* Scaling on paper's assumptions where the command line gives none, per
 * target: what one rank achieves in training (a GPU of the H100's class at
 * about half its plain float32 rate, which kernels that are not all large
 * GEMMs rarely pass; a rank of two AVX2 cores, the order of what
 * tests/distributed/scaling_on_paper.sh measures a CPU's forward achieving),
 * and one ring hop's latency (NCCL across a network; MPI through shared
 * memory). */
static const struct {
    const char *target;
    double tflops, hop_us;
    double flops_per_exact_part; /* the CPU's order-free gradient sums: a part
                                  * costs 2 to 6 operations (README, "the
                                  * price"), about 4 FLOPs' time on the whole;
                                  * every part is counted, though the zeros a
                                  * ReLU leaves cost none where they are
                                  * listed (gemm_cpu.c: SPARSE_AT_MOST): an
                                  * estimate from above */
} scaling_defaults[] = {{"cuda", 30, 5, 0}, {"cpu", 0.05, 1, 4}};

typedef struct {
    const char *file;
    const char *out;
    const char *target;
    const char *arch;
    const char *emit;
    const char *rebuild;
    const char *world, *link, *tflops, *hop_us; /* scaling on paper */
    const char *layout_word;
    LayoutRequest layout;
    bool check, summary, verbose;
    enum { ANSWER_NONE, ANSWER_VERSION, ANSWER_DOCTOR, ANSWER_HELP } answer; /* printed, and nothing else done */
} Options;

static const char usage[] =
    "usage: ddpc FILE.net [-o OUT] [--target cuda|cpu] [--arch sm_90] [--layout L] [--check] [--summary]\n"
    "                     [--emit cu|torch|plan [--world N,... --link GBPS [--tflops T] [--hop-us US]]]\n"
    "                     [--rebuild FILE.cu] [--verbose] [--version] [--doctor] [--help]\n"
    "\n"
    "Compiles a .net model description into a data-parallel training program.\n"
    "\n"
    "  -o OUT            write the program OUT, and its source OUT.cu beside it\n"
    "  --target T        cuda (GPUs: cuDNN, cuBLAS, NCCL) or cpu (OpenMP, MPI)\n"
    "  --arch sm_XX      the one GPU architecture to build for (default: the GPUs\n"
    "                    visible here, else those the runtime is built for, and\n"
    "                    PTX: --doctor lists them)\n"
    "  --layout L        how C x H x W values lie in memory: nchw, nhwc (channels-\n"
    "                    last) or auto (the default: nhwc on GPUs for a net with\n"
    "                    convs whose train { } says precision tf32 or bf16, else\n"
    "                    nchw)\n"
    "  --check           check the file and report errors; write nothing\n"
    "  --summary         print the layer table (shapes, parameters, MFLOPs),\n"
    "                    the training settings, the layout and the data { } block\n"
    "  --emit KIND       print the generated CUDA C (cu), the PyTorch module (torch)\n"
    "                    or the gradient bucket plan and each GPU launch's threads\n"
    "                    and work per thread (plan)\n"
    "  --world N,...     with --emit plan: predict the step at N ranks (scaling on\n"
    "                    paper): each bucket's ring all-reduce, the exposed\n"
    "                    communication, the scaling efficiency\n"
    "  --link GBPS       with --world: each rank's link, in Gb/s\n"
    "  --tflops T        with --world: what one rank achieves, in TFLOP/s\n"
    "                    (default: 30 for cuda, 0.05 for cpu)\n"
    "  --hop-us US       with --world: a ring hop's latency (default: 5 for cuda,\n"
    "                    1 for cpu)\n"
    "  --rebuild F.cu    rebuild the program F from its (hand-edited) source F.cu,\n"
    "                    with the build line recorded in it\n"
    "  --verbose         say what is being run\n"
    "  --version         print the version, and the CUDA libraries' versions\n"
    "  --doctor          say which nvcc, cuDNN, cuBLAS, NCCL and MPI programs are\n"
    "                    built with, where each was found, and for which GPUs\n"
    "  --help            print this help\n"
    "\n"
    "Exit status: 0 done; 1 the build failed (the C++ or CUDA compiler, or writing\n"
    "its output); 2 bad usage, errors in the file, or an output ddpc may not write\n"
    "(a directory, a device, a FIFO, one of the build's inputs).\n"
    "\n"
    "Without --target, ddpc builds for CUDA when nvcc was found and a GPU is visible,\n"
    "else for the CPU (saying so when nvcc was found).\n"
    "\n"
    "cuDNN and NCCL are looked for in $CUDNN_HOME and $NCCL_HOME, then $CUDA_HOME and\n"
    "the CUDA toolkit ddpc was built with, then the system, then the nvidia pip wheels\n"
    "of the python3 on PATH; CUDA programs find them again through their RUNPATH.\n";

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("ddpc: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs(" (try 'ddpc --help')\n", stderr);
    return EXIT_USAGE;
}

/* Matches `--name VALUE` and `--name=VALUE`; advances *I past the value. */
static bool flag_value(int argc, char **argv, int *i, const char *name, const char **value, int *rc)
{
    size_t n = strlen(name);
    const char *arg = argv[*i];
    if (strncmp(arg, name, n) != 0)
        return false;
    if (arg[n] == '=') {
        *value = arg + n + 1;
        return true;
    }
    if (arg[n] != '\0')
        return false;
    if (*i + 1 >= argc) {
        *rc = usage_error("%s needs a value", name);
        return true;
    }
    *value = argv[++*i];
    return true;
}

/* --version: ddpc's, then the CUDA libraries' (--doctor says where). */
static void print_version(void)
{
    printf("ddpc %s\n", DDPC_VERSION);
    if (!build_target_available("cuda")) {
        puts("CUDA: nvcc not found when ddpc was built (--target cpu only)");
        return;
    }
    const Toolchain *tc = toolchain_get();
    for (int i = 0; i < TOOL_LIBS; i++)
        printf("%s%s %s", i ? ", " : "", tc->libs[i].name, tc->libs[i].found ? tc->libs[i].version : "not found");
    puts(" (ddpc --doctor says where)");
}

static int parse_options(int argc, char **argv, Options *o)
{
    static const char *const known[] = {"-o", "--target", "--arch", "--check", "--summary", "--emit",
                                        "--rebuild", "--verbose", "--version", "--doctor", "--help",
                                        "--world",   "--link",    "--tflops",  "--hop-us", "--layout"};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        int rc = 0;
        if (flag_value(argc, argv, &i, "-o", &o->out, &rc) || flag_value(argc, argv, &i, "--target", &o->target, &rc) ||
            flag_value(argc, argv, &i, "--arch", &o->arch, &rc) || flag_value(argc, argv, &i, "--emit", &o->emit, &rc) ||
            flag_value(argc, argv, &i, "--layout", &o->layout_word, &rc) ||
            flag_value(argc, argv, &i, "--rebuild", &o->rebuild, &rc) ||
            flag_value(argc, argv, &i, "--world", &o->world, &rc) || flag_value(argc, argv, &i, "--link", &o->link, &rc) ||
            flag_value(argc, argv, &i, "--tflops", &o->tflops, &rc) ||
            flag_value(argc, argv, &i, "--hop-us", &o->hop_us, &rc)) {
            if (rc)
                return rc;
        } else if (strcmp(arg, "--check") == 0)
            o->check = true;
        else if (strcmp(arg, "--summary") == 0)
            o->summary = true;
        else if (strcmp(arg, "--verbose") == 0)
            o->verbose = true;
        /* each of these is the whole run: the flags after it are not read */
        else if (strcmp(arg, "--version") == 0) {
            o->answer = ANSWER_VERSION;
            return 0;
        } else if (strcmp(arg, "--doctor") == 0) {
            o->answer = ANSWER_DOCTOR;
            return 0;
        } else if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            o->answer = ANSWER_HELP;
            return 0;
        } else if (arg[0] == '-' && arg[1] != '\0') {
            const char *near = ddp_suggest_nearest(arg, known, DDPC_COUNT(known));
            if (near) {
                fprintf(stderr, "ddpc: error: unknown option '%s'; did you mean '%s'?\n", arg, near);
                return EXIT_USAGE;
            }
            return usage_error("unknown option '%s'", arg);
        } else if (o->file)
            return usage_error("more than one input file ('%s')", arg);
        else
            o->file = arg;
    }
    if (o->target && strcmp(o->target, "cuda") != 0 && strcmp(o->target, "cpu") != 0)
        return usage_error("--target must be cuda or cpu, not '%s'", o->target);
    if (o->layout_word) {
        static const char *const words[] = {[LAYOUT_AUTO] = "auto", [LAYOUT_NCHW] = "nchw", [LAYOUT_NHWC] = "nhwc"};
        const int n_words = DDPC_COUNT(words);
        int k = 0;
        while (k < n_words && strcmp(o->layout_word, words[k]) != 0)
            k++;
        if (k == n_words)
            return usage_error("--layout must be nchw, nhwc or auto, not '%s'", o->layout_word);
        o->layout = (LayoutRequest)k;
    }
    if (o->emit && strcmp(o->emit, "cu") != 0 && strcmp(o->emit, "torch") != 0 && strcmp(o->emit, "plan") != 0)
        return usage_error("--emit must be cu, torch or plan, not '%s'", o->emit);
    /* -o names the program, never the printed module or plan: `--emit torch
     * -o net.py` would build a program over net.py */
    if (o->out && o->emit && strcmp(o->emit, "cu") != 0)
        return usage_error("--emit %s prints to standard output, and -o %s would build the program there as well: "
                           "leave out -o (write the %s with > FILE)", o->emit, o->out,
                           strcmp(o->emit, "torch") == 0 ? "module" : "plan");
    if (o->arch && (strncmp(o->arch, "sm_", 3) != 0 || strspn(o->arch + 3, "0123456789") != strlen(o->arch + 3) ||
                    !o->arch[3]))
        return usage_error("--arch must look like sm_90, not '%s'", o->arch);
    if (!o->file && !o->rebuild)
        return usage_error("%s", "no input file");
    /* The names go into the generated program's comments and its build
     * line, where a newline would end a comment in the middle. */
    const char *names[] = {o->file, o->out, o->rebuild}, *what[] = {"the input file's", "-o's", "--rebuild's"};
    for (int k = 0; k < 3; k++)
        for (const char *c = names[k]; c && *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                return usage_error("%s name holds a control character (byte 0x%02x), which the generated program's "
                                   "comments cannot hold; rename it", what[k], (unsigned char)*c);
    bool scaling_flag = o->link || o->tflops || o->hop_us;
    if ((o->world || scaling_flag) && !(o->emit && strcmp(o->emit, "plan") == 0))
        return usage_error("%s", "--world, --link, --tflops and --hop-us go with --emit plan");
    if (scaling_flag && !o->world)
        return usage_error("%s", "--link, --tflops and --hop-us go with --world");
    if (o->world && !o->link)
        return usage_error("%s", "--world needs --link GBPS (each rank's link, in Gb/s)");
    return 0;
}

/* A finite number for FLAG, from MIN (above 0) to MAX, read as the
 * programs read theirs (numbers.h: decimal only, so 0x10 is no 16). */
static bool positive_number(const char *flag, const char *text, double min, double max, double *value)
{
    double v;
    if (!ddp_parse_real(text, &v) || !(v >= min) || v > max) {
        usage_error("%s must be a number from %.6g to %.6g, not '%s'", flag, min, max, text);
        return false;
    }
    *value = v;
    return true;
}

/* --world N,... --link GBPS [--tflops T] [--hop-us US] into M; false (reported) if bad. */
static bool scaling_options(Arena *a, const Options *o, const char *target, ScalingModel *m)
{
    int64_t *worlds = arena_alloc(a, sizeof *worlds * MAX_WORLDS);
    int n = 0;
    for (const char *p = o->world;; p++) {
        const size_t len = strcspn(p, ",");
        char item[24]; /* any int64, and then some: a longer one is refused */
        int64_t w = 0;
        if (len < sizeof item) {
            memcpy(item, p, len);
            item[len] = '\0';
        }
        if (len >= sizeof item || !ddp_parse_int(item, &w) || w < 1 || w > DDP_MAX_RANKS || n == MAX_WORLDS) {
            usage_error("--world takes up to %d rank counts from 1 to %d, separated by commas, not '%s'", MAX_WORLDS,
                        DDP_MAX_RANKS, o->world);
            return false;
        }
        worlds[n++] = w;
        p += len;
        if (!*p)
            break;
    }
    *m = (ScalingModel){.worlds = worlds, .n_worlds = n, .target = target};
    m->bytes_per_gradient = strcmp(target, "cuda") == 0 ? (int)sizeof(float) : (int)sizeof(DdpExact);
    for (int i = 0; i < DDPC_COUNT(scaling_defaults); i++)
        if (strcmp(scaling_defaults[i].target, target) == 0) {
            m->tflops = scaling_defaults[i].tflops;
            m->link.hop_latency_s = scaling_defaults[i].hop_us * 1e-6;
            m->flops_per_exact_part = scaling_defaults[i].flops_per_exact_part;
        }
    double hop_us = m->link.hop_latency_s * 1e6;
    /* bounds far beyond any machine's, that keep the table's figures to a
     * readable width (1e-300 Gb/s printed cells of 300 digits) */
    if (!positive_number("--link", o->link, 1e-3, 1e6, &m->link.gbit_per_s) ||
        (o->tflops && !positive_number("--tflops", o->tflops, 1e-6, 1e6, &m->tflops)) ||
        (o->hop_us && !positive_number("--hop-us", o->hop_us, 1e-3, 1e6, &hop_us)))
        return false;
    m->link.hop_latency_s = hop_us * 1e-6;
    return true;
}

static void print_plan(FILE *out, const Net *net, const Plan *plan)
{
    const TrainConfig *t = &net->train;
    int64_t trained = 0; /* the parameters' elements, without the floats that align them (buckets.h) */
    for (int i = 0; i < net->n_params; i++)
        if (net->params[i].trainable)
            trained += net->params[i].numel;
    fprintf(out, "bucket plan of net %s: %d bucket%s over %lld parameters (%.2f MB), cap %.6g MB, first bucket %.6g MB\n",
            net->name, plan->n_buckets, plan->n_buckets == 1 ? "" : "s", (long long)trained,
            (double)trained * 4 / (1 << 20), (double)t->bucket_cap_bytes / (1 << 20),
            (double)t->first_bucket_bytes / (1 << 20));
    fprintf(out, "buckets fill in reverse parameter order; each is all-reduced once its last gradient is ready\n\n");
    fprintf(out, "bucket  offset      floats       bytes  parameters\n");
    for (int b = 0; b < plan->n_buckets; b++) {
        const DdpBucket *k = &plan->buckets[b];
        fprintf(out, "%6d  %6lld  %10lld  %10lld ", b, (long long)k->offset, (long long)k->count, (long long)k->count * 4);
        for (int j = k->first; j < k->first + k->n_params; j++)
            fprintf(out, " %s", net->params[plan->bucket_param[j]].name);
        fputc('\n', out);
    }
}

/* --emit and -o: plan, then print, or write and build the program. */
static int generate(Arena *a, const Net *net, const Options *o, const char *target, const char *arch)
{
    const char *prog = NULL, *cu = NULL;
    const char *input = strcmp(o->file, "-") == 0 ? NULL : o->file;
    if (o->out && !build_check_outputs(a, o->out, input, target, &prog, &cu))
        return EXIT_USAGE;
    if (o->emit && strcmp(o->emit, "torch") == 0) { /* the module needs no plan */
        if (!emit_torch(stdout, net))
            return EXIT_USAGE;
        if (!o->out)
            return 0;
    }
    ScalingModel scaling = {0};
    if (o->world && !scaling_options(a, o, target, &scaling))
        return EXIT_USAGE;
    Plan plan;
    plan_net(a, net, plan_channels_last(net, strcmp(target, "cuda") == 0, o->layout), &plan);
    if (o->emit && strcmp(o->emit, "plan") == 0) {
        print_plan(stdout, net, &plan);
        if (o->world) /* the step at scale, in place of one GPU's launches */
            scaling_print(a, stdout, net, &plan, &scaling);
        else {
            fputc('\n', stdout);
            if (!emit_launch_table(stdout, net, &plan))
                return 1;
        }
    }
    else if (o->emit && strcmp(o->emit, "cu") == 0) {
        /* a copy on stdout: --rebuild builds it beside wherever it is saved */
        const char *out = prog ? prog : net->name;
        char *command = build_command(a, target, arch, cu ? cu : arena_printf(a, "%s.cu", out), out);
        if (!command)
            return 1;
        emit_cu(stdout, net, &plan, command);
    }
    if (!o->out)
        return 0;
    char *tmp = NULL;
    FILE *f = output_open(a, cu, &tmp);
    if (!f)
        return EXIT_USAGE;
    char *command = build_command(a, target, arch, cu, prog);
    if (!command) {
        fclose(f);
        unlink(tmp);
        return 1;
    }
    emit_cu(f, net, &plan, command);
    if (!output_close(f, tmp, cu))
        return 1;
    /* The program is built from this run's own copy of the source, which
     * takes its name only once the program has taken its own: two runs with
     * one -o each build the program of the source they wrote (which pair is
     * left is the later run's, unless both finish at the same moment). */
    int rc = build_run(a, command, tmp, cu, prog, o->verbose);
    /* the source takes its name even when the build failed: it is there to
     * read, to fix by hand and to --rebuild */
    if (!output_rename(tmp, cu))
        return 1;
    if (rc == 0)
        return 0;
    /* the compiler's messages name the copy it read */
    fprintf(stderr, "ddpc: the source is %s (the compiler's messages call it %s, its name while it built)\n", cu, tmp);
    /* A program left by an earlier run (another net, other settings) was
     * not built from this source, and beside it would pass for its build:
     * the sources beside OUT are always OUT's, or there is no OUT. Removed
     * only after the source took its name, so that a run that builds OUT
     * meanwhile, program then source, leaves its own pair or a source
     * alone, never a program beside a source it was not built from. */
    if (unlink(prog) == 0)
        fprintf(stderr, "ddpc: removed the old program %s, which was not built from this %s\n", prog, cu);
    else if (errno != ENOENT)
        fprintf(stderr, "ddpc: error: cannot remove the old program '%s', which was not built from this %s: %s\n",
                prog, cu, strerror(errno));
    return rc;
}

/* Reads the whole file ("-" is standard input). NUL bytes are kept. */
static char *read_source(const char *path, size_t *len)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "ddpc: error: cannot read '%s': %s\n", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
        if (n > MAX_NET_FILE) {
            fprintf(stderr, "%s: error: file too large to be a net (over %d MB)\n", path, MAX_NET_FILE >> 20);
            free(buf);
            buf = NULL;
            break;
        }
        if (n == cap) {
            char *bigger = realloc(buf, cap * 2);
            if (!bigger) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    if (buf && ferror(f)) {
        fprintf(stderr, "ddpc: error: cannot read '%s': %s\n", path, strerror(errno));
        free(buf);
        buf = NULL;
    }
    if (f != stdin)
        fclose(f);
    *len = n;
    return buf;
}

/* Everything but the check of standard output that ends main. */
static int run(int argc, char **argv)
{
    Options o = {0};
    int rc = parse_options(argc, argv, &o);
    if (rc)
        return rc;
    switch (o.answer) {
    case ANSWER_VERSION:
        print_version();
        return 0;
    case ANSWER_DOCTOR:
        build_doctor(stdout);
        return 0;
    case ANSWER_HELP:
        fputs(usage, stdout);
        return 0;
    case ANSWER_NONE:
        break;
    }
    if (o.rebuild) {
        if (o.file || o.out || o.emit || o.check || o.summary || o.layout_word)
            return usage_error("%s", "--rebuild takes only the .cu file (and --verbose)");
        return build_rebuild(o.rebuild, o.verbose);
    }
    bool builds = o.out || (o.emit && strcmp(o.emit, "cu") == 0);
    /* --arch names a GPU: without --target it asks for a GPU build (or
     * plan) whether or not one is visible here, as on a login node */
    const char *target = o.target                                      ? o.target
                         : o.arch && build_target_available("cuda") ? "cuda"
                         : builds                                    ? build_default_target()
                                                                     : "cpu";
    if (builds && !build_target_available(target)) {
        fprintf(stderr, "ddpc: error: --target cuda needs nvcc, which was not found when ddpc was built; "
                        "use --target cpu\n");
        return EXIT_USAGE;
    }
    if (o.arch && strcmp(target, "cuda") != 0) /* else it would be dropped unsaid */
        return usage_error("--arch %s names a GPU to build for, and this run's target is the CPU (%s): %s", o.arch,
                           o.target ? "--target cpu" : "nvcc was not found when ddpc was built",
                           o.target ? "add --target cuda, or drop --arch" : "drop --arch, or install CUDA");
    if (builds && strcmp(target, "cuda") == 0 && o.arch) { /* an sm_ this nvcc knows nothing of */
        Arena words = {0};
        const char *known = toolchain_nvcc_refuses(&words, atoi(o.arch + 3));
        if (known)
            fprintf(stderr, "ddpc: error: --arch %s: nvcc cannot build it; it builds sm_ followed by one of: %s\n", o.arch,
                    known);
        arena_free(&words);
        if (known)
            return EXIT_USAGE;
    }
    if (builds && strcmp(target, "cuda") == 0 && o.arch && !toolchain_runtime_loads_on(atoi(o.arch + 3))) {
        Arena words = {0};
        fprintf(stderr, "ddpc: error: --arch %s: the GPU runtime's kernels are built for %s (make's CUDA_ARCHS), "
                        "none of which loads on an %s GPU: build ddpc with make CUDA_ARCHS=\"%s\"\n",
                o.arch, toolchain_runtime_archs(&words, 0), o.arch, toolchain_runtime_archs(&words, atoi(o.arch + 3)));
        arena_free(&words);
        return EXIT_USAGE;
    }
    if (builds && strcmp(target, "cuda") == 0 && !toolchain_cuda_ready())
        return EXIT_USAGE;

    size_t len = 0;
    char *src = read_source(o.file, &len);
    if (!src)
        return EXIT_USAGE;
    const char *shown = strcmp(o.file, "-") == 0 ? "<stdin>" : o.file;

    Arena arena = {0};
    Diag diag;
    diag_init(&diag, shown, src, len, stderr);
    Ast ast;
    Net net;
    parse_net(&arena, &diag, src, len, &ast);
    bool ok = sema_net(&arena, &diag, &ast, shown, &net);
    diag_flush(&diag);
    int status = ok ? 0 : EXIT_USAGE;
    if (ok && o.summary)
        summary_print(stdout, &net, o.layout);
    if (ok && !o.check && (o.emit || o.out))
        status = generate(&arena, &net, &o, target, o.arch);
    else if (ok && !o.check && !o.summary) /* a forgotten -o must not pass for a build */
        fprintf(stderr, "ddpc: %s: no errors; nothing written (-o OUT builds the program)\n", shown);

    diag_free(&diag);
    arena_free(&arena);
    free(src);
    return status;
}

/* What ddpc prints (--emit, --summary, --help, --version, --doctor) is its
 * output as much as OUT is: a full disk or a closed descriptor must not
 * leave a truncated copy behind exit status 0. stdio keeps a failed write's
 * error (ferror) and the last buffer goes out with fflush, so this one
 * check covers every print. A pipe whose reader has gone (`| head`) ends
 * ddpc by SIGPIPE before any of this, quietly, as it ends any filter; where
 * the caller ignores SIGPIPE the write fails with EPIPE and is reported
 * here like any other failed write, as coreutils report it. */
int main(int argc, char **argv)
{
    int status = run(argc, argv);
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout))
        return status;
    /* no errno: a write failed earlier, its buffer dropped, and the last flush had nothing left */
    fprintf(stderr, "ddpc: error: cannot write to standard output: %s\n", errno ? strerror(errno) : "a write failed");
    return status ? status : 1;
}
