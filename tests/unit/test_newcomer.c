/*
 * README.md run as a newcomer runs it (tests/docs/newcomer.py): every
 * transcript's commands print what README shows, every other command README
 * gives runs (or is skipped for a stated reason), and an edit that drifts
 * from the program fails. The last two tests make sure the check bites, on
 * excerpts of README small enough to run in seconds.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *python(void)
{
    const char *p = getenv("PYTHON");
    return p && *p ? p : "python3";
}

/* Runs the check on the file that the shell command MAKE writes to stdout,
 * with FLAGS; its exit status, output in *OUT. */
static int check(const char *make, const char *flags, char **out)
{
    char dir[64], *cmd;
    test_make_tmpdir(dir, sizeof dir, "/tmp/ddpc_newcomer_XXXXXX");
    const char *readme = test_tmp_path(dir, "README.md");
    CU_ASSERT_FATAL(asprintf(&cmd, "(%s) > %s && %s tests/docs/newcomer.py %s %s", make, readme, python(), readme,
                             flags) > 0);
    int rc = test_run(cmd, out);
    free(cmd);
    test_remove_tmpdir(dir);
    return rc;
}

static void test_readme_runs_as_written(void)
{
    char *out = NULL;
    int rc = check("cat README.md", "--verbose", &out);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "0 failed: OK"));
    if (rc != 0)
        fprintf(stderr, "\n%s\n", out ? out : "");
    free(out);
}

/* README's --summary transcript passes as it is, and fails with one figure changed. */
static void test_a_drifted_output_fails(void)
{
    const char *summary = "printf '\\n' && sed -n '/^    \\$ build\\/ddpc examples\\/mnist.net --summary/,"
                          "/^    \\$ build\\/ddpc examples\\/mnist.net --emit plan/p' README.md | sed '$d'";
    char *out = NULL, *drifted;
    CU_ASSERT_EQUAL(check(summary, "--excerpt", &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "1 commands run, 0 skipped, 0 failed: OK"));
    free(out);
    out = NULL;
    CU_ASSERT_FATAL(asprintf(&drifted, "%s | sed 's/184,586 trainable/184,587 trainable/'", summary) > 0);
    CU_ASSERT_NOT_EQUAL(check(drifted, "--excerpt", &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "184,587 trainable"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "1 failed"));
    free(out);
    free(drifted);
}

/* A command that no rule runs or skips must fail, and so must a command a
 * rule runs that exits with an error. */
static void test_an_unknown_or_failing_command_fails(void)
{
    char *out = NULL;
    const char *excerpt = "printf '\\n    ./OUT --frobnicate\\n\\nand\\n\\n    ddpc --rebuild OUT.cu\\n'";
    CU_ASSERT_NOT_EQUAL(check(excerpt, "--excerpt", &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "no rule in tests/docs/newcomer.py runs or skips `./OUT --frobnicate`"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "`ddpc --rebuild OUT.cu` exited"));
    free(out);
}

void suite_newcomer(void)
{
    static const TestCase cases[] = {
        {"README's commands run as written and print what README shows", test_readme_runs_as_written},
        {"a README transcript that drifts from the program's output fails the check", test_a_drifted_output_fails},
        {"a README command no rule knows, or one that fails, fails the check", test_an_unknown_or_failing_command_fails},
        {NULL, NULL},
    };
    test_add_suite("newcomer [python]", cases);
}
