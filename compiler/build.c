/*
 * build.c: turns OUT.cu into the program OUT.
 *
 * The command is decided once and written at the top of OUT.cu (the
 * "ddpc-build:" line), so that `ddpc --rebuild OUT.cu` after a hand edit runs
 * exactly what built it, and a reader sees how. It uses absolute paths to the
 * runtime's headers and libraries, found beside the ddpc binary (ddpc lives
 * in build/, the headers in runtime/; DDPC_HOME overrides the repository
 * root), and the tools make found when ddpc was built (config.h).
 *
 * Both targets compile the same text as C++: nvcc does for .cu files, and a
 * host compiler does with -x c++, so what compiles for one compiles for the other.
 */
#include "ddpc.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"  // DDPC_NVCC, DDPC_CUDA_LIBS, DDPC_CPU_CXX, DDPC_CPU_LIBS (written by make)

/* The repository root: DDPC_HOME, else the parent of the directory holding ddpc. */
static bool find_home(char *home, size_t size)
{
    const char *env = getenv("DDPC_HOME");
    if (env && *env) {
        snprintf(home, size, "%s", env);
        return true;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return false;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return false;
    *slash = '\0'; /* build/ */
    slash = strrchr(exe, '/');
    if (!slash)
        return false;
    *slash = '\0';
    snprintf(home, size, "%s", exe);
    return true;
}

bool build_target_available(const char *target)
{
    return strcmp(target, "cpu") == 0 || DDPC_NVCC[0] != '\0';
}

const char *build_default_target(void) { return DDPC_NVCC[0] ? "cuda" : "cpu"; }

char *build_command(Arena *a, const char *target, const char *arch, const char *cu_path, const char *out_path)
{
    char home[PATH_MAX];
    if (!find_home(home, sizeof home)) {
        fputs("ddpc: error: cannot find the runtime library (set DDPC_HOME to the ddpc directory)\n", stderr);
        return NULL;
    }
    char cu_abs[PATH_MAX];
    if (!realpath(cu_path, cu_abs))
        snprintf(cu_abs, sizeof cu_abs, "%s", cu_path);
    /* OUT may not exist yet: resolve its directory */
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", out_path);
    char *slash = strrchr(dir, '/');
    const char *base = slash ? slash + 1 : out_path;
    if (slash)
        *slash = '\0';
    char dir_abs[PATH_MAX];
    if (!realpath(slash ? (dir[0] ? dir : "/") : ".", dir_abs))
        snprintf(dir_abs, sizeof dir_abs, "%s", slash ? dir : ".");
    const char *out_abs = arena_printf(a, "%s/%s", strcmp(dir_abs, "/") == 0 ? "" : dir_abs, base);

    if (strcmp(target, "cuda") == 0) {
        const char *sm = arch + 3; /* "sm_90" -> "90" */
        return arena_printf(a,
                            "%s -std=c++17 -O3 -gencode arch=compute_%s,code=sm_%s -gencode arch=compute_%s,code=compute_%s "
                            "-Xcompiler -Wall,-Wextra -I%s/runtime %s -o %s %s/build/libddprt_cuda.a %s",
                            DDPC_NVCC, sm, sm, sm, sm, home, cu_abs, out_abs, home, DDPC_CUDA_LIBS);
    }
    /* -fno-trapping-math: a float comparison may then run where its result
     * is not used, so the kernels' selects (relu, the max of a pooling
     * window) vectorise: an MNIST step took 11% less time. It changes no
     * value, only whether FE_INVALID is raised, which nothing here reads:
     * nothing is reassociated, and g++ contracts a * b + c into an FMA with
     * or without it (in the vector loop and its scalar tail alike, so the
     * thread count still changes nothing). */
    return arena_printf(a, "%s -x c++ -std=c++17 -O3 -march=native -fno-trapping-math -fopenmp -Wall -Wextra -I%s/runtime %s "
                        "-x none -o %s %s/build/libddprt.a %s",
                        DDPC_CPU_CXX, home, cu_abs, out_abs, home, DDPC_CPU_LIBS);
}

int build_run(const char *command, bool verbose)
{
    if (verbose)
        fprintf(stderr, "ddpc: %s\n", command);
    int status = system(command);
    if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "ddpc: error: the build failed; the command was:\n    %s\n", command);
        return 1;
    }
    return 0;
}

int build_rebuild(const char *cu_path, bool verbose)
{
    FILE *f = fopen(cu_path, "r");
    if (!f) {
        fprintf(stderr, "ddpc: error: cannot read '%s': %s\n", cu_path, strerror(errno));
        return 2;
    }
    char line[8192];
    const char *tag = "// ddpc-build: ";
    char *command = NULL;
    for (int i = 0; i < 20 && fgets(line, sizeof line, f); i++) {
        if (strncmp(line, tag, strlen(tag)) == 0) {
            command = line + strlen(tag);
            command[strcspn(command, "\r\n")] = '\0';
            break;
        }
    }
    fclose(f);
    if (!command || !*command) {
        fprintf(stderr, "%s: error: no '%s' line in the first 20 lines; was this file written by ddpc -o?\n", cu_path,
                "// ddpc-build:");
        return 2;
    }
    return build_run(command, verbose);
}
