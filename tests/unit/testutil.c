/* Helpers shared by the unit tests (see testutil.h). */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

void test_add_suite(const char *name, const TestCase *cases)
{
    CU_pSuite suite = CU_add_suite(name, NULL, NULL);
    if (!suite)
        return;
    for (const TestCase *c = cases; c->name; c++)
        CU_add_test(suite, c->name, c->fn);
}

/* Reads all of F into a malloc'd NUL-terminated buffer; NULL on failure. */
static char *read_stream(FILE *f, size_t *len)
{
    size_t cap = 4096, n = 0, got;
    char *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (cap - n < 2) {
            char *bigger = realloc(buf, cap * 2);
            if (!bigger) {
                free(buf);
                return NULL;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    if (buf)
        buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

int test_run(const char *command, char **out)
{
    char *wrapped = NULL;
    if (asprintf(&wrapped, "(%s) 2>&1", command) < 0)
        return -1;
    FILE *p = popen(wrapped, "r");
    free(wrapped);
    if (!p)
        return -1;
    char *buf = read_stream(p, NULL);
    int status = pclose(p);
    if (out)
        *out = buf;
    else
        free(buf);
    if (status == -1 || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}

char *test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = read_stream(f, len);
    fclose(f);
    return buf;
}

const char *test_ddpc(void)
{
    const char *p = getenv("DDPC");
    return p && *p ? p : "build/ddpc";
}

const char *test_python_with_torch(void)
{
    static int probed;
    static const char *python;
    if (!probed) {
        probed = 1;
        const char *p = getenv("PYTHON");
        if (!p || !*p)
            p = "/usr/bin/python3";
        char *cmd = NULL;
        if (asprintf(&cmd, "%s -c 'import torch' >/dev/null 2>&1", p) >= 0) {
            if (test_run(cmd, NULL) == 0)
                python = p;
            free(cmd);
        }
    }
    return python;
}
