/* Helpers shared by the unit tests (see testutil.h). */
#include "testutil.h"
#include "config.h"  // DDPC_IMAGE_LIBS, DDPC_CPU_LIBS: what make links a CPU program with

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>  // SYS_fsync: the system's, under the fsync below
#include <sys/wait.h>
#include <unistd.h>

int test_fail_directory_sync;

int fsync(int fd)
{
    struct stat st;
    if (test_fail_directory_sync && fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        errno = EIO;
        return -1;
    }
    return (int)syscall(SYS_fsync, fd);
}

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

int test_child_output(pid_t pid, int fd, char **out)
{
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    ssize_t got;
    while (buf && (got = read(fd, buf + len, cap - len - 1)) > 0) {
        len += (size_t)got;
        if (cap - len < 2) {
            char *bigger = realloc(buf, cap *= 2);
            if (!bigger)
                free(buf);
            buf = bigger;
        }
    }
    close(fd);
    if (buf)
        buf[len] = '\0';
    int status;
    waitpid(pid, &status, 0);
    if (out)
        *out = buf;
    else
        free(buf);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

pid_t test_fork_capturing(int *fd)
{
    int fds[2];
    CU_ASSERT_FATAL(pipe(fds) == 0);
    fflush(NULL);
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], STDOUT_FILENO);
        dup2(fds[1], STDERR_FILENO);
        close(fds[1]);
        return 0;
    }
    close(fds[1]);
    *fd = fds[0];
    return pid;
}

int test_split_args(char *text, char **argv, int first, int max)
{
    int argc = first;
    char *save = NULL;
    for (char *tok = strtok_r(text, " ", &save); tok && argc < max - 1; tok = strtok_r(NULL, " ", &save))
        argv[argc++] = tok;
    argv[argc] = NULL;
    return argc;
}

const char *test_python_with(const char *env, const char *fallback, const char *modules)
{
    const char *p = getenv(env);
    if (!p || !*p)
        p = fallback;
    char *cmd = NULL;
    int ok = asprintf(&cmd, "'%s' -c 'import %s' >/dev/null 2>&1", p, modules) >= 0 && test_run(cmd, NULL) == 0;
    free(cmd);
    return ok ? p : NULL;
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

void test_make_tmpdir(char *dir, size_t size, const char *template)
{
    snprintf(dir, size, "%s", template);
    CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
}

void test_remove_tmpdir(const char *dir)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    test_run(cmd, NULL);
}

char *test_tmp_path(const char *dir, const char *name)
{
    static char path[8][256];
    static int next;
    char *p = path[next++ % 8];
    snprintf(p, sizeof path[0], "%s/%s", dir, name);
    return p;
}

void test_show_lines(const char *text)
{
    for (const char *line = text; line && *line;) {
        size_t len = strcspn(line, "\n");
        fprintf(stderr, "\n    %.*s", (int)len, line);
        line += len + (line[len] == '\n');
    }
}

int test_count_prefixed(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    if (d)
        closedir(d);
    return n;
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
        python = test_python_with("PYTHON", "/usr/bin/python3", "torch");
    }
    return python;
}

/* Every helper directory made, removed at exit (one handler for them all). */
static TestMpiHelper *helper_dirs;

static void remove_helper_dirs(void)
{
    for (TestMpiHelper *h = helper_dirs; h; h = h->next) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf %s", h->dir);
        test_run(cmd, NULL);
    }
}

const char *test_mpi_helper(TestMpiHelper *built, const char *dir_template)
{
    if (built->tried)
        return built->path[0] ? built->path : NULL;
    built->tried = 1;
    if (test_run("command -v mpicc && command -v mpirun && test -f build/libddprt.a", NULL) != 0) {
        fputs("\n  (skipped: no mpicc/mpirun, or no build/libddprt.a)", stderr);
        return NULL;
    }
    snprintf(built->dir, sizeof built->dir, "%s", dir_template);
    if (!mkdtemp(built->dir))
        return NULL;
    if (!helper_dirs)
        atexit(remove_helper_dirs);
    built->next = helper_dirs;
    helper_dirs = built;
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "mpicc -std=c11 -D_GNU_SOURCE -O1 -g -fopenmp -Wall -Wextra -Werror -DDDP_HAVE_MPI -Iruntime "
             "tests/mpi/pg_helper.c build/libddprt.a "
             /* distributed.c's, which the helper calls too, as a CPU program links them */
             "$(for a in " DDPC_IMAGE_LIBS "; do printf 'build/%%s ' $a; done) " DDPC_CPU_LIBS " -lpthread -lm "
             "-o %s/pg_helper",
             built->dir);
    int rc = test_run(cmd, &out);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc != 0)
        fprintf(stderr, "\n%s\n", out ? out : "");
    else
        snprintf(built->path, sizeof built->path, "%s/pg_helper", built->dir);
    free(out);
    return built->path[0] ? built->path : NULL;
}
