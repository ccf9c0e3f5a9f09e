/*
 * README.md's troubleshooting section against the code (tests/docs/).
 *
 * tests/docs/check_messages.py lists every message a user can meet (the
 * runtime's DDP_ERR formats and error lines, ddpc's diagnostics) and fails
 * when one is missing from the README or a README row names a message the
 * code no longer has. The other two tests make sure the check itself bites:
 * a README with one row deleted, and one with a row for a message that does
 * not exist, must both fail.
 *
 * README's "How ranks meet" lists, in three sentences, the flags that must
 * have the same value on every rank, those that must be given to every rank
 * or to none, and those that may differ; runtime/flags.c's table says the
 * same of each flag (ddp_flags_agreement), and the ranks compare by the
 * table. The last tests check that every flag is in the list its row says,
 * in no other, and that the lists name no flag the table lacks; a new row
 * left out of README, or a flag moved to another list, fails them. And
 * README's copy of `./mnist_train --help` must be the program's.
 */
#include "testutil.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flags.h"  // ddp_flags_agreement, ddp_flags_name

static const char *python(void)
{
    const char *p = getenv("PYTHON");
    return p && *p ? p : "python3";
}

static int have_python(void)
{
    char *cmd;
    if (asprintf(&cmd, "command -v %s >/dev/null", python()) < 0)
        return 0;
    int ok = test_run(cmd, NULL) == 0;
    free(cmd);
    if (!ok)
        fputs("\n  (skipped: no python3)", stderr);
    return ok;
}

/* Runs the check on README.md changed by the shell command EDIT (reading
 * README.md, writing to stdout; NULL: unchanged); its exit status, output in *OUT. */
static int check(const char *edit, char **out)
{
    char dir[64], *cmd;
    test_make_tmpdir(dir, sizeof dir, "/tmp/ddpc_docs_XXXXXX");
    const char *readme = test_tmp_path(dir, "README.md");
    CU_ASSERT_FATAL(asprintf(&cmd, "%s > %s && %s tests/docs/check_messages.py %s", edit ? edit : "cat README.md",
                             readme, python(), readme) > 0);
    int rc = test_run(cmd, out);
    free(cmd);
    test_remove_tmpdir(dir);
    return rc;
}

static void test_readme_lists_every_message(void)
{
    if (!have_python())
        return;
    char *out = NULL;
    int rc = check(NULL, &out);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "OK"));
    if (rc != 0)
        fprintf(stderr, "\n%s\n", out ? out : "");
    free(out);
}

static void test_a_deleted_row_fails(void)
{
    if (!have_python())
        return;
    char *out = NULL;
    CU_ASSERT_NOT_EQUAL(check("grep -v 'the store at <HOST:PORT> closed the connection' README.md", &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "closed the connection (did rank 0 stop?)\" is not in"));
    free(out);
}

static void test_a_stale_row_fails(void)
{
    if (!have_python())
        return;
    char *out = NULL;
    CU_ASSERT_NOT_EQUAL(check("sed '/^| `loss is /a | `the flux capacitor overheated` | x | y |' README.md", &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "`the flux capacitor overheated` matches no message"));
    free(out);
}

/* README's three lists, each found by the words of its sentence (the
 * sentence holding them, from the '.' before to the '.' after, with README's
 * line breaks read as spaces): the `--flag`s it names are the list. */
static const struct {
    DdpAgree agree;
    const char *words;
} agreement_lists[] = {
    {DDP_AGREE_VALUE, "must have the same value on every rank"},
    {DDP_AGREE_GIVEN, "must be given to every rank or to none"},
    {DDP_AGREE_LOCAL, "Only these may differ from rank to rank"},
};
#define AGREEMENT_LISTS (sizeof agreement_lists / sizeof agreement_lists[0])
#define LIST_MAX 128
#define NAME_MAX_LEN 64

typedef struct {
    char names[LIST_MAX][NAME_MAX_LEN];
    int count;
} FlagList;

typedef struct {
    char text[16384];
    size_t used;
    int count;
} Problems;

static void problem(Problems *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (p->used < sizeof p->text) {
        int n = vsnprintf(p->text + p->used, sizeof p->text - p->used, fmt, ap);
        p->used += n > 0 ? (size_t)n : 0;
        if (p->used + 1 < sizeof p->text)
            p->text[p->used++] = '\n', p->text[p->used] = '\0';
        else
            p->used = sizeof p->text; /* full: later problems are counted only */
    }
    va_end(ap);
    p->count++;
}

static int list_has(const FlagList *list, const char *name)
{
    for (int i = 0; i < list->count; i++)
        if (strcmp(list->names[i], name) == 0)
            return 1;
    return 0;
}

static const char *agree_name(DdpAgree a)
{
    switch (a) {
    case DDP_AGREE_VALUE: return "DDP_AGREE_VALUE";
    case DDP_AGREE_GIVEN: return "DDP_AGREE_GIVEN";
    case DDP_AGREE_LOCAL: return "DDP_AGREE_LOCAL";
    default: return "DDP_AGREE_UNSET";
    }
}

/* TEXT with every run of white space one space, malloc'd. */
static char *one_line(const char *text)
{
    char *out = malloc(strlen(text) + 1), *o = out;
    CU_ASSERT_FATAL(out != NULL);
    for (const char *c = text; *c; c++)
        if (!isspace((unsigned char)*c))
            *o++ = *c;
        else if (o > out && o[-1] != ' ')
            *o++ = ' ';
    *o = '\0';
    return out;
}

/* The `--flag`s of the sentence of TEXT (one line) that holds WORDS, into LIST. */
static void read_list(const char *text, const char *words, FlagList *list, Problems *p)
{
    list->count = 0;
    const char *at = strstr(text, words);
    if (!at) {
        problem(p, "README.md: no sentence says \"%s\" (the list of flags it heads is gone or reworded)", words);
        return;
    }
    if (strstr(at + 1, words))
        problem(p, "README.md: more than one sentence says \"%s\"", words);
    const char *start = at, *end = at;
    while (start > text && !(start - text >= 2 && start[-2] == '.' && start[-1] == ' '))
        start--;
    while (*end && !(end[0] == '.' && (end[1] == ' ' || end[1] == '\0')))
        end++;
    for (const char *q = start; q < end; q++) {
        if (*q != '`')
            continue;
        const char *close = memchr(q + 1, '`', (size_t)(end - q - 1));
        if (!close)
            break;
        if (q[1] == '-' && q[2] == '-') {
            size_t n = strspn(q + 3, "abcdefghijklmnopqrstuvwxyz0123456789-");
            if (n > 0 && n < NAME_MAX_LEN && q + 3 + n <= close && list->count < LIST_MAX) {
                char name[NAME_MAX_LEN];
                memcpy(name, q + 3, n);
                name[n] = '\0';
                if (!list_has(list, name))
                    snprintf(list->names[list->count++], NAME_MAX_LEN, "%s", name);
            }
        }
        q = close;
    }
    if (list->count == 0)
        problem(p, "README.md: the sentence that says \"%s\" names no `--flag`", words);
}

/* Compares README's lists in README_TEXT with runtime/flags.c's table; the
 * problems, one line each, into *P; their count. */
static int agreement_problems(const char *readme_text, Problems *p)
{
    static FlagList lists[AGREEMENT_LISTS];
    char *text = one_line(readme_text);
    p->used = 0, p->count = 0, p->text[0] = '\0';
    for (size_t l = 0; l < AGREEMENT_LISTS; l++)
        read_list(text, agreement_lists[l].words, &lists[l], p);
    free(text);

    for (size_t l = 0; l < AGREEMENT_LISTS; l++)
        for (int i = 0; i < lists[l].count; i++) {
            int known = 0;
            for (int id = 0; id < DDP_FLAG_COUNT; id++)
                known |= strcmp(ddp_flags_name((DdpFlagId)id), lists[l].names[i]) == 0;
            if (!known)
                problem(p, "README.md: the list of flags that \"%s\" names --%s, which runtime/flags.c does not have",
                        agreement_lists[l].words, lists[l].names[i]);
        }
    for (int id = 0; id < DDP_FLAG_COUNT; id++) {
        const char *name = ddp_flags_name((DdpFlagId)id);
        DdpAgree agree = ddp_flags_agreement((DdpFlagId)id);
        int listed = 0;
        for (size_t l = 0; l < AGREEMENT_LISTS; l++) {
            int in = list_has(&lists[l], name), belongs = agree == agreement_lists[l].agree;
            listed |= belongs;
            if (in && !belongs)
                problem(p, "README.md: --%s is in the list of flags that \"%s\", but its row in runtime/flags.c says %s",
                        name, agreement_lists[l].words, agree_name(agree));
            else if (!in && belongs)
                problem(p, "README.md: --%s (%s in runtime/flags.c) is missing from the list of flags that \"%s\"",
                        name, agree_name(agree), agreement_lists[l].words);
        }
        if (!listed)
            problem(p, "runtime/flags.c: --%s's row says %s, which no README list is for", name, agree_name(agree));
    }
    return p->count;
}

/* README.md as it is, or NULL (a failed assertion). */
static char *readme(void)
{
    char *text = test_read_file("README.md", NULL);
    CU_ASSERT_PTR_NOT_NULL(text);
    return text;
}

/* TEXT with INSERT put right after the first WORDS (which must be there), malloc'd. */
static char *inserted_after(const char *text, const char *words, const char *insert)
{
    const char *at = strstr(text, words);
    CU_ASSERT_PTR_NOT_NULL_FATAL(at);
    at += strlen(words);
    char *out;
    CU_ASSERT_FATAL(asprintf(&out, "%.*s%s%s", (int)(at - text), text, insert, at) > 0);
    return out;
}

/* TEXT with every FROM replaced by TO, malloc'd. */
static char *replaced(const char *text, const char *from, const char *to)
{
    size_t n = 0;
    for (const char *q = strstr(text, from); q; q = strstr(q + strlen(from), from))
        n++;
    char *out = malloc(strlen(text) + n * strlen(to) + 1), *o = out;
    CU_ASSERT_FATAL(out != NULL);
    for (const char *q = text, *hit; ; q = hit + strlen(from)) {
        hit = strstr(q, from);
        size_t keep = hit ? (size_t)(hit - q) : strlen(q);
        memcpy(o, q, keep), o += keep;
        if (!hit)
            break;
        memcpy(o, to, strlen(to)), o += strlen(to);
    }
    *o = '\0';
    return out;
}

static void test_readme_agreement_lists_match_flags(void)
{
    char *text = readme();
    if (!text)
        return;
    static Problems p;
    CU_ASSERT_EQUAL(agreement_problems(text, &p), 0);
    if (p.count)
        fprintf(stderr, "\n%s", p.text);
    free(text);
}

/* The check on README edited so, must report a problem holding WANT. */
static void expect_problem(char *edited, const char *want)
{
    static Problems p;
    CU_ASSERT_NOT_EQUAL(agreement_problems(edited, &p), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(p.text, want));
    if (!strstr(p.text, want))
        fprintf(stderr, "\n  wanted \"%s\" among:\n%s", want, p.text);
    free(edited);
}

static void test_agreement_check_bites(void)
{
    char *file = readme();
    if (!file)
        return;
    char *text = one_line(file); /* so that each list's words are found across README's line breaks */
    free(file);
    /* a flag that may differ, listed as one that must match too */
    expect_problem(inserted_after(text, agreement_lists[0].words, " `--workers`"),
                   "--workers is in the list of flags that \"must have the same value on every rank\", but its row "
                   "in runtime/flags.c says DDP_AGREE_LOCAL");
    /* a flag left out: as a new row in flags.c that README does not list */
    expect_problem(replaced(text, "`--json`", "`json`"),
                   "--json (DDP_AGREE_LOCAL in runtime/flags.c) is missing from the list of flags that \"Only these");
    /* a flag the table does not have */
    expect_problem(inserted_after(text, agreement_lists[2].words, " `--flux-capacitor`,"),
                   "names --flux-capacitor, which runtime/flags.c does not have");
    /* a list whose sentence is gone */
    expect_problem(replaced(text, agreement_lists[1].words, "must be given"),
                   "no sentence says \"must be given to every rank or to none\"");
    free(text);
}

/* README's copy of `./mnist_train --help` (tests/docs/check_help.py) is
 * the program's: every flag, default and limit the same, line for line; and
 * the check fails on a README whose copy has one default changed. */
static void test_readme_help_is_the_programs(void)
{
    if (!have_python())
        return;
    char dir[64], *cmd, *out = NULL;
    test_make_tmpdir(dir, sizeof dir, "/tmp/ddpc_help_XXXXXX");
    CU_ASSERT_FATAL(asprintf(&cmd, "%s examples/mnist.net --target cpu -o %s/mnist_train > /dev/null && "
                                   "(cd %s && ./mnist_train --help > help.txt) && "
                                   "%s tests/docs/check_help.py README.md %s/help.txt; echo same=$?; "
                                   "sed 's/(default 600)/(default 60)/' README.md > %s/README.md; "
                                   "%s tests/docs/check_help.py %s/README.md %s/help.txt; echo changed=$?",
                             test_ddpc(), dir, dir, python(), dir, dir, python(), dir, dir) > 0);
    test_run(cmd, &out);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "lines: OK\nsame=0\n"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "of the help differs:\n  README:  ") && strstr(out, "changed=1\n"));
    if (!out || !strstr(out, "same=0"))
        fprintf(stderr, "\n%s\n", out ? out : "");
    free(out);
    free(cmd);
    test_remove_tmpdir(dir);
}

void suite_docs(void)
{
    static const TestCase cases[] = {
        {"README.md's troubleshooting section holds every message, and only those", test_readme_lists_every_message},
        {"the check fails when a message's row is deleted", test_a_deleted_row_fails},
        {"the check fails on a row for a message the code does not have", test_a_stale_row_fails},
        {"README's copy of ./mnist_train --help is the program's, line for line", test_readme_help_is_the_programs},
        {"README.md's lists of flags that must match across ranks, or may differ, are runtime/flags.c's",
         test_readme_agreement_lists_match_flags},
        {"that check fails on a flag listed twice, left out, or unknown, and on a list gone", test_agreement_check_bites},
        {NULL, NULL},
    };
    test_add_suite("docs [python]", cases);
}
