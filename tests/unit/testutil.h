/*
 * Helpers shared by the unit tests: register a suite in one line, and run a
 * program capturing its output and exit status (for golden and end-to-end tests).
 */
#ifndef TESTUTIL_H
#define TESTUTIL_H

#include <CUnit/CUnit.h>
#include <stddef.h>

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

/* Reads a whole file into a malloc'd NUL-terminated buffer; NULL if unreadable. */
char *test_read_file(const char *path, size_t *len);

/* Path of the ddpc under test (DDPC from the environment, else build/ddpc). */
const char *test_ddpc(void);

/* Path of Debian's python3 with torch, or NULL when torch is not importable. */
const char *test_python_with_torch(void);

#endif
