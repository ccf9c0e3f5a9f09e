/*
 * Helpers shared by the unit tests: register a suite in one line, and run a
 * program capturing its output and exit status (for golden and end-to-end tests).
 */
#ifndef TESTUTIL_H
#define TESTUTIL_H

#include <CUnit/CUnit.h>
#include <stddef.h>
#include <sys/types.h>  // pid_t

typedef struct {
    const char *name;
    void (*fn)(void);
} TestCase;

/* Every suite's registration function (the list the Makefile generates). */
#define SUITE(name) void name(void);
#include "suites.inc"
#undef SUITE

/* Adds a suite named NAME holding the tests of CASES (ended by {NULL, NULL}). */
void test_add_suite(const char *name, const TestCase *cases);

/* Runs `sh -c COMMAND`, returns its exit status (or -1) and, when OUT is not
 * NULL, a malloc'd copy of everything it wrote to stdout and stderr. */
int test_run(const char *command, char **out);

/* Reads everything a forked child PID writes to the pipe end FD (until every
 * writer has closed it), closes FD and reaps the child; returns its exit
 * status (-1 if it died) and, when OUT is not NULL, a malloc'd copy of the
 * output. For tests that run code in a child so that its exit, signals or
 * output cannot disturb the runner. */
int test_child_output(pid_t pid, int fd, char **out);

/* fork() with the child's stdout and stderr going into a pipe: returns 0 in
 * the child, and in the parent the child's pid, with *FD the pipe's read end
 * for test_child_output. Buffered output is flushed first, so the child
 * cannot write the runner's again. A failure ends the test. */
pid_t test_fork_capturing(int *fd);

/* Splits TEXT in place at spaces into ARGV[FIRST..), at most MAX entries in
 * all, NULL-terminated; returns the new count. */
int test_split_args(char *text, char **argv, int first, int max);

/* A python that can import MODULES (say "torch" or "json, struct"): the one
 * in the environment variable ENV if set, else DEFAULT; NULL if it cannot. */
const char *test_python_with(const char *env, const char *fallback, const char *modules);

/* Reads a whole file into a malloc'd NUL-terminated buffer; NULL if unreadable. */
char *test_read_file(const char *path, size_t *len);

/* Fills DIR (SIZE bytes) with a fresh mkdtemp(TEMPLATE) directory; a failure
 * ends the test (CU_ASSERT_FATAL). */
void test_make_tmpdir(char *dir, size_t size, const char *template);

/* Removes DIR and everything in it. */
void test_remove_tmpdir(const char *dir);

/* DIR/NAME in one of 8 static buffers used in turn, so a few such paths can be
 * alive at once (say, the arguments of one call). */
char *test_tmp_path(const char *dir, const char *name);

/* Shows each line of TEXT (a test script's verdicts) on stderr, indented
 * under the test's name; nothing for NULL. */
void test_show_lines(const char *text);

/* How many entries of DIR have names starting with PREFIX (a writer's
 * temporary files: "w.safetensors.tmp"). */
int test_count_prefixed(const char *dir, const char *prefix);

/* Path of the ddpc under test (DDPC from the environment, else build/ddpc). */
const char *test_ddpc(void);

/* One build of tests/mpi/pg_helper.c (against build/libddprt.a) in a
 * directory of its own; a test file keeps one in a static so it builds once. */
typedef struct TestMpiHelper {
    int tried;
    char dir[64];
    char path[128];
    struct TestMpiHelper *next; /* the list of directories removed at exit */
} TestMpiHelper;

/* Builds the helper into a fresh mkdtemp(DIR_TEMPLATE) on the first call for
 * BUILT (a failed build is a failed assertion, its output on stderr); its
 * path, or NULL (said why) when mpicc, mpirun or build/libddprt.a is missing. */
const char *test_mpi_helper(TestMpiHelper *built, const char *dir_template);

/* Path of Debian's python3 with torch, or NULL when torch is not importable. */
const char *test_python_with_torch(void);

/* While set, fsync of a directory fails with EIO in this program (the
 * tests' own fsync, which the runtime links to here), as a failing disk
 * fails the sync that makes a rename durable; a forked run inherits it. */
extern int test_fail_directory_sync;

#endif
