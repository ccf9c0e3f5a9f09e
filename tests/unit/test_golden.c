/*
 * Golden tests: ddpc's output pinned exactly (the jq tests/jq.test habit).
 *
 *   tests/golden/bad/NAME.net    -> NAME.expected: `ddpc --check NAME.net`'s messages; exit 2
 *   tests/golden/good/NAME.net   -> NAME.summary:  `ddpc --summary NAME.net`; exit 0
 *   examples/NAME.net            -> tests/golden/good/NAME.summary
 *   tests/golden/plan/NAME.net   -> NAME.plan:     `ddpc --emit plan NAME.net` (buckets by cap)
 *   examples/, tests/parity/, tests/gradcheck/, tests/golden/good/ NAME.net
 *                                -> tests/golden/cu/NAME.cu: `ddpc --emit cu --target cpu`,
 *                                   less its "// ddpc-build:" line (this machine's paths)
 *   tests/layout/NAME.net        -> tests/golden/nhwc/NAME.cu: the same, channels-last
 *                                   (`--layout nhwc`)
 *
 * tests/golden/update.sh rewrites the pinned files from the current ddpc;
 * a change to them is a change to what users see, reviewed in the diff.
 *
 * The pinned programs also hold sema's check of names to what the emitter
 * writes: every name a program derives from a layer's is that name followed
 * by a suffix gen_name_suffixes gives for the layer (so the emitter spelt
 * it as gen_names.c spells it), and no other name of the program could be
 * spelt by a layer's name and such a suffix, but the loss kernels
 * (gen_name_loss_kernel).
 */
#include "testutil.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "ddpc.h"  // parse_net, sema_net, gen_name_suffixes, gen_name_loss_kernel

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* The line of a generated program that names this machine's compiler and
 * paths; the goldens leave it out (update.sh drops it the same way). */
static const char build_line[] = "// ddpc-build: ";

/* Removes, in place, every line of TEXT that starts with build_line. */
static void drop_build_lines(char *text)
{
    char *to = text;
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) + 1 : strlen(line);
        if (strncmp(line, build_line, sizeof build_line - 1) != 0) {
            memmove(to, line, len);
            to += len;
        }
        line += len;
    }
    *to = '\0';
}

/* Shows, on stderr, the first line where GOT and EXPECTED (or a missing
 * file) part, and update.sh's name. */
static void show_first_difference(const char *name, const char *got, const char *expected)
{
    if (!expected) {
        fprintf(stderr, "\n--- %s: no pinned file (run tests/golden/update.sh)\n", name);
        return;
    }
    int line = 1;
    const char *g = got, *x = expected;
    for (; *g && *g == *x; g++, x++)
        line += *g == '\n';
    while (g > got && g[-1] != '\n') /* back to the line's start in both */
        g--, x--;
    fprintf(stderr, "\n--- %s: line %d differs (tests/golden/update.sh re-pins; review the diff)\n"
                    "    got:      %.*s\n    expected: %.*s\n",
            name, line, (int)strcspn(g, "\n"), g, (int)strcspn(x, "\n"), x);
}

/* Runs ddpc FLAG on every .net of DIR (from inside DIR, so messages name the
 * bare file) and compares with DIR/EXPECT_DIR/NAME.EXT, less the build line
 * when DROP_BUILD_LINE. Returns how many ran. */
static int check_dir_as(const char *dir, const char *flag, const char *expect_dir, const char *ext, int want_rc,
                        int drop_build_line)
{
    DIR *d = opendir(dir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!ends_with(e->d_name, ".net"))
            continue;
        char *cmd, *expect_path, *out = NULL;
        int stem = (int)(strlen(e->d_name) - 4);
        if (asprintf(&cmd, "cd %s && %s %s %s", dir, test_ddpc(), flag, e->d_name) < 0 ||
            asprintf(&expect_path, "%s/%s/%.*s.%s", dir, expect_dir, stem, e->d_name, ext) < 0)
            CU_FAIL_FATAL("out of memory");
        int rc = test_run(cmd, &out);
        if (out && drop_build_line)
            drop_build_lines(out);
        char *expected = test_read_file(expect_path, NULL);
        char what[512];
        snprintf(what, sizeof what, "%s/%s: exit status %d, expected %d", dir, e->d_name, rc, want_rc);
        CU_assertImplementation(rc == want_rc, __LINE__, what, __FILE__, "", CU_FALSE);
        snprintf(what, sizeof what, "%s/%s: output differs from %s", dir, e->d_name, expect_path);
        int same = expected && out && strcmp(expected, out) == 0;
        CU_assertImplementation(same, __LINE__, what, __FILE__, "", CU_FALSE);
        if (!same && out && drop_build_line) /* a whole program is too long to show */
            show_first_difference(e->d_name, out, expected);
        else if (!same && out)
            fprintf(stderr, "\n--- %s: got:\n%s--- expected:\n%s", e->d_name, out, expected ? expected : "(missing)\n");
        free(cmd);
        free(expect_path);
        free(out);
        free(expected);
        count++;
    }
    closedir(d);
    return count;
}

static int check_dir(const char *dir, const char *flag, const char *expect_dir, const char *ext, int want_rc)
{
    return check_dir_as(dir, flag, expect_dir, ext, want_rc, 0);
}

static void test_bad_files(void)
{
    int n = check_dir("tests/golden/bad", "--check", ".", "expected", 2);
    CU_ASSERT(n >= 40);
}

static void test_good_summaries(void)
{
    int n = check_dir("tests/golden/good", "--summary", ".", "summary", 0);
    CU_ASSERT(n >= 3);
}

static void test_example_summaries(void)
{
    int n = check_dir("examples", "--summary", "../tests/golden/good", "summary", 0);
    CU_ASSERT(n >= 3);
}

static void test_bucket_plans(void)
{
    int n = check_dir("tests/golden/plan", "--emit plan", ".", "plan", 0);
    CU_ASSERT(n >= 3);
}

/* The generated program of every example, parity, gradcheck and good net, pinned,
 * so that each change to the emitted code shows in review. */
static void test_generated_programs(void)
{
    const char *flag = "--emit cu --target cpu";
    int n = check_dir_as("examples", flag, "../tests/golden/cu", "cu", 0, 1) +
            check_dir_as("tests/parity", flag, "../golden/cu", "cu", 0, 1) +
            check_dir_as("tests/gradcheck", flag, "../golden/cu", "cu", 0, 1) +
            check_dir_as("tests/golden/good", flag, "../cu", "cu", 0, 1);
    CU_ASSERT(n >= 11);
    /* and no pinned program of a net that is gone */
    int pinned = 0;
    DIR *d = opendir("tests/golden/cu");
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    for (struct dirent *e; (e = readdir(d));)
        pinned += ends_with(e->d_name, ".cu");
    closedir(d);
    CU_ASSERT_EQUAL(pinned, n);
}

/* The channels-last kernels' text, pinned as the NCHW ones are. */
static void test_channels_last_programs(void)
{
    int n = check_dir_as("tests/layout", "--emit cu --target cpu --layout nhwc", "../golden/nhwc", "cu", 0, 1);
    CU_ASSERT(n >= 1);
}

/* One source for both targets: the CUDA program's text is the CPU one's but
 * for its build line (in one layout: --layout auto may choose NHWC for a
 * GPU, for tf32 and bf16, not for resnet.net's fp32). */
static void test_one_source_for_both_targets(void)
{
    if (access("build/libddprt_cuda.a", F_OK) != 0) { /* built without nvcc, cuDNN or NCCL */
        fputs("\n  (skipped: no build/libddprt_cuda.a)", stderr);
        return;
    }
    char *cpu = NULL, *cuda = NULL, *cmd;
    if (asprintf(&cmd, "%s examples/resnet.net --emit cu --target cpu", test_ddpc()) < 0)
        CU_FAIL_FATAL("out of memory");
    CU_ASSERT_EQUAL(test_run(cmd, &cpu), 0);
    free(cmd);
    if (asprintf(&cmd, "%s examples/resnet.net --emit cu --target cuda", test_ddpc()) < 0)
        CU_FAIL_FATAL("out of memory");
    CU_ASSERT_EQUAL(test_run(cmd, &cuda), 0);
    free(cmd);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cpu);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cuda);
    CU_ASSERT_PTR_NOT_NULL(strstr(cpu, build_line));
    CU_ASSERT_PTR_NOT_NULL(strstr(cuda, build_line));
    drop_build_lines(cpu);
    drop_build_lines(cuda);
    CU_ASSERT_STRING_EQUAL(cpu, cuda);
    free(cpu);
    free(cuda);
}

//
// The generated programs' names against sema's check of labels
//

static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static bool ident_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' || (c >= '0' && c <= '9');
}

/* The identifiers of C source TEXT outside comments, strings and numbers,
 * sorted, each once (copies: free each, then the array). */
static char **identifiers(const char *text, int *count)
{
    int n = 0, cap = 1024;
    char **ids = malloc(sizeof *ids * (size_t)cap);
    const char *p = text;
    while (*p) {
        if (p[0] == '/' && p[1] == '/') {
            p += strcspn(p, "\n");
        } else if (p[0] == '/' && p[1] == '*') {
            const char *end = strstr(p + 2, "*/");
            p = end ? end + 2 : p + strlen(p);
        } else if (*p == '"' || *p == '\'') {
            char quote = *p++;
            while (*p && *p != quote)
                p += p[0] == '\\' && p[1] ? 2 : 1;
            p += *p != 0;
        } else if (ident_char(*p)) {
            const char *start = p;
            while (ident_char(*p))
                p++;
            if (*start >= '0' && *start <= '9')
                continue; /* a number, 1e-5f among them */
            if (n == cap)
                ids = realloc(ids, sizeof *ids * (size_t)(cap *= 2));
            ids[n++] = strndup(start, (size_t)(p - start));
        } else {
            p++;
        }
    }
    qsort(ids, (size_t)n, sizeof *ids, compare_strings);
    int unique = 0;
    for (int i = 0; i < n; i++) {
        if (unique == 0 || strcmp(ids[unique - 1], ids[i]) != 0)
            ids[unique++] = ids[i];
        else
            free(ids[i]);
    }
    *count = unique;
    return ids;
}

static bool in_list(const char *word, const char *const *list, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(list[i], word) == 0)
            return true;
    return false;
}

/* Whether a label could be the LEN bytes of NAME (identifier bytes): not
 * empty, no digit first, no reserved prefix. */
static bool could_be_label(const char *name, size_t len)
{
    return len > 0 && !(name[0] >= '0' && name[0] <= '9') && !(len >= 4 && strncasecmp(name, "ddp_", 4) == 0) &&
           !(len >= 2 && strncmp(name, "d_", 2) == 0);
}

/* Checks PROGRAM (a pinned generated source) against the names of NET_PATH's
 * layers; returns how many of its names were a layer's. */
static int check_program_names(const char *program_path, const char *net_path)
{
    char *src = test_read_file(net_path, NULL), *program = test_read_file(program_path, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(src);
    CU_ASSERT_PTR_NOT_NULL_FATAL(program);
    Arena arena = {0};
    Diag diag;
    Ast ast;
    Net net;
    diag_init(&diag, net_path, src, strlen(src), NULL);
    parse_net(&arena, &diag, src, strlen(src), &ast);
    CU_ASSERT_FATAL(sema_net(&arena, &diag, &ast, net_path, &net));

    /* every suffix of every kind, for names that are no layer's */
    const char *every[2 * OP_COUNT * MAX_NAME_SUFFIXES];
    int n_every = 0;
    for (int op = 0; op < OP_COUNT; op++)
        for (int bias = 0; bias < 2; bias++)
            n_every += gen_name_suffixes(&arena, (OpKind)op, bias, every + n_every, MAX_NAME_SUFFIXES);
    const char *fixed[GEN_LOSS_KERNEL_COUNT];
    int n_fixed = GEN_LOSS_KERNEL_COUNT;
    for (int k = 0; k < n_fixed; k++)
        fixed[k] = gen_name_loss_kernel((GenLossKernel)k);

    int n_ids, derived = 0;
    char **ids = identifiers(program, &n_ids);
    const size_t gp = strlen(GEN_GRADIENT_PREFIX); /* d_, before a gradient's name */
    for (int i = 0; i < n_ids; i++) {
        const char *id = ids[i];
        if (in_list(id, fixed, n_fixed))
            continue;
        /* a layer's name (after d_, a gradient's), then a suffix of its kind */
        const char *name = strncmp(id, GEN_GRADIENT_PREFIX, gp) == 0 ? id + gp : id;
        bool layer = false, known = false;
        for (int k = 0; k < net.n_nodes && !known; k++) {
            const Node *nd = &net.nodes[k];
            size_t len = strlen(nd->name);
            if (strncmp(name, nd->name, len) != 0 || name[len] != '_')
                continue;
            layer = true;
            const char *suffixes[MAX_NAME_SUFFIXES];
            int n = gen_name_suffixes(&arena, nd->op, nd->bias, suffixes, MAX_NAME_SUFFIXES);
            known = in_list(name + len, suffixes, n);
        }
        if (layer) {
            derived++;
            if (!known)
                fprintf(stderr, "\n%s: %s: a layer's name and a suffix gen_name_suffixes does not give", program_path,
                        id);
            CU_ASSERT(known);
            continue;
        }
        /* a name of the program's own: no label may spell it (nor, after d_,
         * a gradient's name) */
        for (int k = 0; k < n_every; k++) {
            size_t len = strlen(id), n = strlen(every[k]);
            if (len > n && strcmp(id + len - n, every[k]) == 0 &&
                (could_be_label(id, len - n) ||
                 (strncmp(id, GEN_GRADIENT_PREFIX, gp) == 0 && len - n > gp && could_be_label(id + gp, len - n - gp)))) {
                fprintf(stderr, "\n%s: %s: a label %.*s would spell it; gen_name_loss_kernel should name it",
                        program_path, id, (int)(len - n), id);
                CU_FAIL("a program's own name a label could spell");
                break;
            }
        }
    }
    for (int i = 0; i < n_ids; i++)
        free(ids[i]);
    free(ids);
    free(program);
    free(src);
    diag_free(&diag);
    arena_free(&arena);
    return derived;
}

static void test_program_names_are_checked(void)
{
    static const struct {
        const char *pinned, *from;
    } dirs[] = {{"tests/golden/cu", "examples"},          {"tests/golden/cu", "tests/parity"},
                {"tests/golden/cu", "tests/gradcheck"},   {"tests/golden/cu", "tests/golden/good"},
                {"tests/golden/nhwc", "tests/layout"}};
    int programs = 0, derived = 0;
    for (size_t d = 0; d < sizeof dirs / sizeof dirs[0]; d++) {
        DIR *dir = opendir(dirs[d].from);
        CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
        for (struct dirent *e; (e = readdir(dir));) {
            if (!ends_with(e->d_name, ".net"))
                continue;
            char net_path[512], program_path[512];
            snprintf(net_path, sizeof net_path, "%s/%s", dirs[d].from, e->d_name);
            snprintf(program_path, sizeof program_path, "%s/%.*s.cu", dirs[d].pinned, (int)strlen(e->d_name) - 4,
                     e->d_name);
            derived += check_program_names(program_path, net_path);
            programs++;
        }
        closedir(dir);
    }
    CU_ASSERT(programs >= 20);
    CU_ASSERT(derived >= 1000);
}

void suite_golden(void)
{
    static const TestCase cases[] = {
        {"bad .net files give their pinned messages and exit 2", test_bad_files},
        {"good .net files give their pinned summaries", test_good_summaries},
        {"examples give their pinned summaries", test_example_summaries},
        {"bucket plans for several caps are pinned", test_bucket_plans},
        {"generated programs are pinned (tests/golden/cu)", test_generated_programs},
        {"channels-last programs are pinned (tests/golden/nhwc)", test_channels_last_programs},
        {"one generated source for the CPU and the GPU", test_one_source_for_both_targets},
        {"every name a program derives from a layer's is one sema checks labels against",
         test_program_names_are_checked},
        {NULL, NULL},
    };
    test_add_suite("golden", cases);
}
