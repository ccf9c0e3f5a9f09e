/*
 * steps_digest_build.c: see steps_digest_build.h.
 */
#include "steps_digest_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"  // DDPC_CPU_CXX, DDPC_IMAGE_LIBS, DDPC_CPU_LIBS: what make builds a CPU program with
#include "ddpc.h"    // DDPC_CPU_CXXFLAGS: and the flags ddpc gives it
#include "testutil.h"

char *steps_digest_build(const char *source, const char *extra, const char *exe)
{
    const char *libs = getenv("CPU_LIBS"); /* as test_gradcheck.c: make's, else ddpc's own list */
    char *cmd = NULL;
    if (asprintf(&cmd,
                 DDPC_CPU_CXX " " DDPC_CPU_CXXFLAGS " %s -Werror -Iruntime -DDDP_NET_SOURCE=\\\"%s\\\" "
                 "tests/layout/steps_digest.cpp -x none -o %s build/libddprt.a %s",
                 extra, source, exe,
                 libs ? libs : "$(for a in " DDPC_IMAGE_LIBS "; do printf 'build/%s ' $a; done) " DDPC_CPU_LIBS) < 0)
        return NULL;
    return cmd;
}

void steps_digest_assert_same(int rc, const char *out, const char *what, const char *file, unsigned line)
{
    int same = rc == 0 && out && strstr(out, "digest params=") && strstr(out, "SAME");
    CU_assertImplementation(same, line, what, file, "", CU_FALSE);
    if (!same && out)
        fprintf(stderr, "\n%s\n", out);
}
