/*
 * README.md's troubleshooting section against the code (tests/docs/).
 *
 * tests/docs/check_messages.py lists every message a user can meet (the
 * runtime's DDP_ERR formats and error lines, ddpc's diagnostics) and fails
 * when one is missing from the README or a README row names a message the
 * code no longer has. The other two tests make sure the check itself bites:
 * a README with one row deleted, and one with a row for a message that does
 * not exist, must both fail.
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

void suite_docs(void)
{
    static const TestCase cases[] = {
        {"README.md's troubleshooting section holds every message, and only those", test_readme_lists_every_message},
        {"the check fails when a message's row is deleted", test_a_deleted_row_fails},
        {"the check fails on a row for a message the code does not have", test_a_stale_row_fails},
        {NULL, NULL},
    };
    test_add_suite("docs [python]", cases);
}
