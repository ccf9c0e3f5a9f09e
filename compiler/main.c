/*
 * main.c: the ddpc command line.
 *
 *   ddpc FILE.net [-o OUT] [--target cuda|cpu] [--arch sm_90] [--check] [--summary]
 *                 [--emit cu|torch|plan] [--rebuild FILE.cu] [--verbose] [--version] [--help]
 *
 * Reads the file, runs the front end (parse, sema) and then what the flags
 * ask for. Every user mistake, in the flags or in the file, ends with a
 * message and exit status 2; 0 means everything asked for was done.
 */
#include "ddpc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum { EXIT_USAGE = 2, MAX_NET_FILE = 64 * 1024 * 1024 };

typedef struct {
    const char *file;
    const char *out;
    const char *target;
    const char *arch;
    const char *emit;
    const char *rebuild;
    bool check, summary, verbose;
} Options;

static const char usage[] =
    "usage: ddpc FILE.net [-o OUT] [--target cuda|cpu] [--arch sm_90] [--check] [--summary]\n"
    "                     [--emit cu|torch|plan] [--rebuild FILE.cu] [--verbose] [--version] [--help]\n"
    "\n"
    "Compiles a .net model description into a data-parallel training program.\n"
    "\n"
    "  -o OUT            write the program OUT, and its source OUT.cu beside it\n"
    "  --target T        cuda (GPUs: cuDNN, cuBLAS, NCCL) or cpu (OpenMP, OpenBLAS, MPI)\n"
    "  --arch sm_XX      the GPU architecture to build for (default sm_90)\n"
    "  --check           check the file and report errors; write nothing\n"
    "  --summary         print the layer table: shapes, parameters, MFLOPs\n"
    "  --emit KIND       print the generated CUDA C (cu), the PyTorch module (torch)\n"
    "                    or the gradient bucket plan (plan)\n"
    "  --rebuild F.cu    rebuild a program from its (hand-edited) source\n"
    "  --verbose         say what is being run\n"
    "  --version         print the version\n"
    "  --help            print this help\n"
    "\n"
    "Exit status: 0 done, 2 bad usage or errors in the file.\n";

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

static int parse_options(int argc, char **argv, Options *o)
{
    static const char *const known[] = {"-o", "--target", "--arch", "--check", "--summary", "--emit",
                                        "--rebuild", "--verbose", "--version", "--help"};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        int rc = 0;
        if (flag_value(argc, argv, &i, "-o", &o->out, &rc) || flag_value(argc, argv, &i, "--target", &o->target, &rc) ||
            flag_value(argc, argv, &i, "--arch", &o->arch, &rc) || flag_value(argc, argv, &i, "--emit", &o->emit, &rc) ||
            flag_value(argc, argv, &i, "--rebuild", &o->rebuild, &rc)) {
            if (rc)
                return rc;
        } else if (strcmp(arg, "--check") == 0)
            o->check = true;
        else if (strcmp(arg, "--summary") == 0)
            o->summary = true;
        else if (strcmp(arg, "--verbose") == 0)
            o->verbose = true;
        else if (strcmp(arg, "--version") == 0) {
            printf("ddpc %s\n", DDPC_VERSION);
            exit(0);
        } else if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            fputs(usage, stdout);
            exit(0);
        } else if (arg[0] == '-' && arg[1] != '\0') {
            const char *near = suggest_nearest(arg, known, 10);
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
    if (o->emit && strcmp(o->emit, "cu") != 0 && strcmp(o->emit, "torch") != 0 && strcmp(o->emit, "plan") != 0)
        return usage_error("--emit must be cu, torch or plan, not '%s'", o->emit);
    if (o->arch && (strncmp(o->arch, "sm_", 3) != 0 || strspn(o->arch + 3, "0123456789") != strlen(o->arch + 3) ||
                    !o->arch[3]))
        return usage_error("--arch must look like sm_90, not '%s'", o->arch);
    if (!o->file && !o->rebuild)
        return usage_error("%s", "no input file");
    return 0;
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

int main(int argc, char **argv)
{
    Options o = {0};
    int rc = parse_options(argc, argv, &o);
    if (rc)
        return rc;
    if (o.rebuild || o.out || o.emit) {
        fputs("ddpc: error: code generation (-o, --emit, --rebuild) is not part of this version yet; "
              "--check and --summary are\n", stderr);
        return EXIT_USAGE;
    }

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
    if (ok && o.summary)
        summary_print(stdout, &net);

    diag_free(&diag);
    arena_free(&arena);
    free(src);
    return ok ? 0 : EXIT_USAGE;
}
