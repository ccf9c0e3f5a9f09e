/*
 * build.c: turns OUT.cu into the program OUT.
 *
 * The command is decided once and written at the top of OUT.cu (the
 * "ddpc-build:" line), so that `ddpc --rebuild OUT.cu` after a hand edit runs
 * what built it, and a reader sees how. It names the runtime's headers and
 * library by absolute path, the tools make found when ddpc was built
 * (config.h), and for CUDA the cuDNN, cuBLAS and NCCL found now, with the
 * RUNPATH that finds them again where the program runs (toolchain.c). A rebuild puts the program beside the .cu it was given (F.cu
 * builds F), whatever names the line holds, so a source saved from
 * `--emit cu`, or moved, rebuilds where it lies.
 *
 * The runtime is found from where ddpc itself is (/proc/self/exe), in one of
 * two layouts: installed, PREFIX/bin/ddpc with PREFIX/include/ddpc/ (the
 * headers) and PREFIX/lib/ddpc/ (libddprt.a, libddprt_cuda.a); or the source
 * tree, ROOT/build/ddpc with ROOT/runtime/ and the libraries beside ddpc.
 * DDPC_HOME names PREFIX or ROOT instead (ROOT's libraries then in ROOT/build).
 *
 * The compiler writes the program to a temporary name, renamed over OUT once
 * it is whole (output.c): two runs with one -o never leave a torn program.
 *
 * Both targets compile the same text as C++: nvcc does for .cu files, and a
 * host compiler does with -x c++, so what compiles for one compiles for the other.
 */
#include "ddpc.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"  // DDPC_NVCC, DDPC_CUDA_LIBS, DDPC_MPI_LIBS, DDPC_CPU_CXX, DDPC_CPU_LIBS, DDPC_IMAGE_LIBS (written by make)

typedef struct {
    char include[PATH_MAX + 16]; /* the runtime's headers */
    char lib[PATH_MAX + 16];     /* libddprt.a, libddprt_cuda.a */
} Runtime;

static bool is_file(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* The runtime under ROOT in either layout; SOURCE_LIB is where a source
 * tree's libraries are. */
static bool runtime_at(const char *root, const char *source_lib, Runtime *rt)
{
    char probe[PATH_MAX + 32];
    snprintf(probe, sizeof probe, "%s/include/ddpc/kernel.h", root);
    if (is_file(probe)) {
        snprintf(rt->include, sizeof rt->include, "%s/include/ddpc", root);
        snprintf(rt->lib, sizeof rt->lib, "%s/lib/ddpc", root);
        return true;
    }
    snprintf(probe, sizeof probe, "%s/runtime/kernel.h", root);
    if (is_file(probe)) {
        snprintf(rt->include, sizeof rt->include, "%s/runtime", root);
        snprintf(rt->lib, sizeof rt->lib, "%s", source_lib);
        return true;
    }
    return false;
}

/* DDPC_HOME, else the layouts around ddpc's own path; false (reported) when
 * neither holds the runtime. */
static bool find_runtime(Runtime *rt)
{
    const char *env = getenv("DDPC_HOME");
    if (env && *env) {
        char lib[PATH_MAX + 8];
        snprintf(lib, sizeof lib, "%s/build", env);
        if (runtime_at(env, lib, rt))
            return true;
        fprintf(stderr, "ddpc: error: DDPC_HOME=%s holds neither include/ddpc/kernel.h (an installed ddpc) "
                        "nor runtime/kernel.h (a source tree)\n", env);
        return false;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    char *slash = n > 0 ? (exe[n] = '\0', strrchr(exe, '/')) : NULL;
    if (!slash) {
        fputs("ddpc: error: cannot tell where ddpc is (/proc/self/exe); set DDPC_HOME to where it is installed\n", stderr);
        return false;
    }
    *slash = '\0'; /* bin/ or build/ */
    char bin[PATH_MAX];
    snprintf(bin, sizeof bin, "%s", exe);
    slash = strrchr(exe, '/');
    if (slash) {
        *slash = '\0';
        if (runtime_at(exe[0] ? exe : "/", bin, rt))
            return true;
    }
    fprintf(stderr, "ddpc: error: cannot find the runtime beside %s/ddpc: neither ../include/ddpc/kernel.h "
                    "(make install) nor ../runtime/kernel.h (the source tree); set DDPC_HOME\n", bin);
    return false;
}

bool build_target_available(const char *target)
{
    return strcmp(target, "cpu") == 0 || DDPC_NVCC[0] != '\0';
}

const char *build_default_target(void)
{
    if (!DDPC_NVCC[0])
        return "cpu";
    if (toolchain_gpu_visible())
        return "cuda";
    fputs("ddpc: note: no GPU is visible here: building for the CPU (--target cuda builds for GPUs anyway)\n", stderr);
    return "cpu";
}

/* PATH made absolute by its directory (the file itself may not exist yet). */
static const char *absolute(Arena *a, const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    char *dir = slash ? arena_strndup(a, path, slash == path ? 1 : (size_t)(slash - path)) : ".";
    char dir_abs[PATH_MAX];
    if (!realpath(dir, dir_abs))
        return path;
    return arena_printf(a, "%s/%s", strcmp(dir_abs, "/") == 0 ? "" : dir_abs, base);
}

/* The runtime library TARGET links, or NULL (reported). */
static const char *runtime_library(Arena *a, const Runtime *rt, const char *target)
{
    const char *lib = arena_printf(a, "%s/%s", rt->lib, strcmp(target, "cuda") == 0 ? "libddprt_cuda.a" : "libddprt.a");
    if (is_file(lib))
        return lib;
    fprintf(stderr, "ddpc: error: the runtime library for --target %s is missing: %s%s\n", target, lib,
            strcmp(target, "cuda") == 0 ? " (make builds it where it finds nvcc, cuDNN and NCCL)" : "");
    return NULL;
}

/* Whether the runtime library LIB calls the function NAME (or one whose
 * name starts so), UNREADABLE when LIB cannot be read. Its objects' symbol
 * tables name every function they call, each name after a NUL. */
static bool runtime_calls(const char *lib, const char *name, bool unreadable)
{
    char needle[64];
    size_t len = (size_t)snprintf(needle, sizeof needle, "%c%s", '\0', name);
    FILE *f = fopen(lib, "rb");
    if (!f)
        return unreadable;
    char buf[1 << 16];
    size_t keep = 0, got;
    bool found = false;
    while (!found && (got = fread(buf + keep, 1, sizeof buf - keep, f)) > 0) {
        size_t n = keep + got;
        found = memmem(buf, n, needle, len) != NULL;
        keep = len - 1; /* a match across two reads */
        memmove(buf, buf + n - keep, keep);
    }
    fclose(f);
    return found;
}

/* Whether the runtime library LIB calls MPI: it does when make compiled it
 * with DDP_HAVE_MPI, which config.h alone cannot tell (the library may come
 * from another build, or a make run before MPI was installed). Nothing else
 * in the runtime starts a name with "MPI_Init" (MPI_Init_thread,
 * MPI_Initialized). A program links MPI exactly when its runtime needs it, so a
 * GPU node without MPI runs a program built without it. */
static bool runtime_uses_mpi(const char *lib)
{
    return runtime_calls(lib, "MPI_Init", DDPC_MPI_LIBS[0] != '\0');
}

void build_doctor(FILE *out)
{
    Runtime rt;
    Arena a = {0};
    const char *lib = NULL;
    if (DDPC_NVCC[0] && find_runtime(&rt)) {
        lib = arena_printf(&a, "%s/libddprt_cuda.a", rt.lib);
        if (!is_file(lib))
            lib = NULL;
    }
    toolchain_doctor(out, lib, lib && runtime_uses_mpi(lib));
    arena_free(&a);
}

/* The static image libraries make put beside RT's libraries (libpng16.a,
 * libjpeg.a), as " PATH PATH", where the runtime library LIB decodes
 * images (it calls libpng); else "". A program links its runtime's copies,
 * so that it runs where they are not installed. */
static const char *image_libraries(Arena *a, const Runtime *rt, const char *lib)
{
    const char *out = "";
    char names[] = DDPC_IMAGE_LIBS;
    if (!runtime_calls(lib, "png_create_read_struct", names[0] != '\0'))
        return out;
    for (char *save = NULL, *name = strtok_r(names, " ", &save); name; name = strtok_r(NULL, " ", &save))
        out = arena_printf(a, "%s %s/%s", out, rt->lib, name);
    return out;
}

char *build_command(Arena *a, const char *target, const char *arch, const char *cu_path, const char *out_path)
{
    Runtime rt;
    if (!find_runtime(&rt))
        return NULL;
    const char *lib = runtime_library(a, &rt, target);
    if (!lib)
        return NULL;
    const char *images = image_libraries(a, &rt, lib);
    const char *cu_abs = absolute(a, cu_path), *out_abs = absolute(a, out_path);
    if (strcmp(target, "cuda") == 0) {
        const char *include = "";
        const char *gpu_libs = toolchain_cuda_link(a, &include);
        return arena_printf(a, "%s -std=c++17 -O3 %s -Xcompiler -Wall,-Wextra -I%s %s%s -o %s %s %s%s %s%s%s", DDPC_NVCC,
                            toolchain_arch_flags(a, arch), rt.include, include, cu_abs, out_abs, lib, gpu_libs,
                            images, DDPC_CUDA_LIBS, runtime_uses_mpi(lib) ? " " : "",
                            runtime_uses_mpi(lib) ? DDPC_MPI_LIBS : "");
    }
    return arena_printf(a, "%s " DDPC_CPU_CXXFLAGS " -I%s %s -x none -o %s %s%s %s", DDPC_CPU_CXX, rt.include, cu_abs,
                        out_abs, lib, images, DDPC_CPU_LIBS);
}

/* COMMAND with its source (the last word not an option and ending in .cu)
 * replaced by CU and the word after -o by OUT; NULL (reported) when it lacks
 * either. Words are split at spaces, as the recorded line writes them. */
static char *retarget(Arena *a, const char *command, const char *cu, const char *out, const char *shown)
{
    char *words = arena_strndup(a, command, strlen(command));
    int most = 1;
    for (const char *c = command; *c; c++)
        most += *c == ' ';
    const char **word = arena_alloc(a, sizeof *word * (size_t)most);
    int n = 0;
    for (char *save = NULL, *w = strtok_r(words, " ", &save); w; w = strtok_r(NULL, " ", &save))
        word[n++] = w;
    int source = -1, output = -1;
    for (int i = 0; i < n; i++) {
        size_t len = strlen(word[i]);
        if (strcmp(word[i], "-o") == 0 && i + 1 < n)
            output = ++i;
        else if (word[i][0] != '-' && len > 3 && strcmp(word[i] + len - 3, ".cu") == 0)
            source = i;
    }
    if (source < 0 || output < 0) {
        fprintf(stderr, "%s: error: the '// ddpc-build:' line names no %s\n", shown, source < 0 ? "source (F.cu)" : "-o OUT");
        return NULL;
    }
    word[source] = cu;
    word[output] = out;
    char *text = arena_printf(a, "%s", word[0]);
    for (int i = 1; i < n; i++)
        text = arena_printf(a, "%s %s", text, word[i]);
    return text;
}

int build_run(Arena *a, const char *command, const char *cu, const char *out, bool verbose)
{
    char *tmp = output_temp_name(a, out);
    char *run = tmp ? retarget(a, command, cu, tmp, cu) : NULL;
    if (!run) /* the directory cannot take the program, or the build line is unusable */
        return 2;
    if (verbose)
        fprintf(stderr, "ddpc: %s\nddpc: then renames %s to %s\n", run, tmp, out);
    int status = system(run);
    if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        unlink(tmp);
        fprintf(stderr, "ddpc: error: the build failed; the command was:\n    %s\n", run);
        return 1;
    }
    return output_rename(tmp, out) ? 0 : 1;
}

/* What no build may write over, with its name for messages: the net INPUT
 * (NULL: none), either target's runtime library, and ddpc itself, which a
 * program written over it would replace, newer than its sources, so that
 * make would not build it again (NULL where /proc does not say). */
enum { NOT_OUTPUTS = 4 };
static void not_outputs(Arena *a, const Runtime *rt, const char *input, const char *files[NOT_OUTPUTS],
                        const char *what[NOT_OUTPUTS])
{
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    files[0] = input;
    files[1] = arena_printf(a, "%s/libddprt.a", rt->lib);
    files[2] = arena_printf(a, "%s/libddprt_cuda.a", rt->lib);
    files[3] = len > 0 ? arena_strndup(a, self, (size_t)len) : NULL;
    what[0] = "the input";
    what[1] = what[2] = "the runtime library";
    what[3] = "ddpc itself";
}

/* The index of the first of FILES[0..N) (NULL ones skipped) that PATH is
 * (by inode: links followed), or -1. */
static int same_file_in(const char *path, const char *const *files, int n)
{
    for (int i = 0; i < n; i++)
        if (files[i] && output_same_file(path, files[i]))
            return i;
    return -1;
}

bool build_check_outputs(Arena *a, const char *out, const char *input, const char *target, const char **prog,
                         const char **cu)
{
    const char *who = arena_printf(a, "-o %s", out);
    struct stat sb;
    if (stat(out, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "ddpc: error: %s: is a directory; name the program to write (-o %s/NAME)\n", who,
                strcmp(out, "/") == 0 ? "" : out);
        return false;
    }
    const char *cu_named = arena_printf(a, "%s.cu", out);
    *prog = output_target(a, who, out);
    *cu = *prog ? output_target(a, arena_printf(a, "%s (its source %s)", who, cu_named), cu_named) : NULL;
    if (!*cu)
        return false;
    if (strcmp(*prog, *cu) == 0 || output_same_file(*prog, *cu)) { /* OUT a link to OUT.cu */
        fprintf(stderr, "ddpc: error: %s: it and its source %s are one file; name another output\n", who, cu_named);
        return false;
    }
    Runtime rt;
    if (!find_runtime(&rt) || !runtime_library(a, &rt, target))
        return false;
    const char *inputs[NOT_OUTPUTS], *what[NOT_OUTPUTS];
    not_outputs(a, &rt, input, inputs, what);
    int i = same_file_in(out, inputs, NOT_OUTPUTS);
    if (i >= 0) {
        fprintf(stderr, "ddpc: error: %s: that is %s %s; name another output\n", who, what[i], inputs[i]);
        return false;
    }
    if ((i = same_file_in(cu_named, inputs, NOT_OUTPUTS)) >= 0) {
        fprintf(stderr, "ddpc: error: %s: its source %s would overwrite %s %s; name another output\n", who, cu_named,
                what[i], inputs[i]);
        return false;
    }
    return true;
}

int build_rebuild(const char *cu_path, bool verbose)
{
    size_t len = strlen(cu_path);
    if (len <= 3 || strcmp(cu_path + len - 3, ".cu") != 0) {
        fprintf(stderr, "ddpc: error: --rebuild %s: the source's name must end in .cu (F.cu builds the program F)\n",
                cu_path);
        return 2;
    }
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
    Arena a = {0};
    const char *out = arena_strndup(&a, cu_path, len - 3);
    const char *who = arena_printf(&a, "--rebuild %s (the program %s)", cu_path, out);
    struct stat sb;
    int rc = 2;
    Runtime rt;
    if (stat(out, &sb) == 0 && S_ISDIR(sb.st_mode))
        fprintf(stderr, "ddpc: error: %s: is a directory\n", who);
    else if ((out = output_target(&a, who, out)) != NULL && find_runtime(&rt)) {
        const char *kept[NOT_OUTPUTS + 1], *what[NOT_OUTPUTS + 1];
        not_outputs(&a, &rt, NULL, kept, what);
        kept[NOT_OUTPUTS] = cu_path; /* F a link to F.cu */
        what[NOT_OUTPUTS] = "its source";
        int i = same_file_in(out, kept, NOT_OUTPUTS + 1);
        if (i >= 0)
            fprintf(stderr, "ddpc: error: %s: that is %s %s; move or rename the source (F.cu builds the program F)\n",
                    who, what[i], kept[i]);
        else
            rc = build_run(&a, command, absolute(&a, cu_path), absolute(&a, out), verbose);
    }
    arena_free(&a);
    return rc;
}
