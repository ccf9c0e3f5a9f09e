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
 * The line is a list of words, written as a POSIX shell would read them back
 * (shell_quote: a word with a space, a quote, a $ or a ; in it is
 * single-quoted), so a user can paste it into a shell; ddpc itself reads it
 * back word by word (shell_words) and runs the compiler with those words,
 * no shell between, so that nothing in a path is ever run as a command. A
 * path with a line break cannot be written on one line, and is refused.
 *
 * Both targets compile the same text as C++: nvcc does for .cu files, and a
 * host compiler does with -x c++, so what compiles for one compiles for the other.
 */
#include "ddpc.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
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

/* A command's words; NULL after the last when run (build_run). */
typedef struct {
    const char **word;
    int n, cap;
} Words;

static void words_add(Arena *a, Words *w, const char *word)
{
    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 32;
        const char **grown = arena_alloc(a, sizeof *grown * (size_t)w->cap);
        if (w->n)
            memcpy(grown, w->word, sizeof *grown * (size_t)w->n);
        w->word = grown;
    }
    w->word[w->n++] = word;
}

/* TEXT's words, split at spaces: flags and names that make (config.h) or
 * toolchain.c wrote, whose words hold none. A path from a user or from
 * where things lie goes in whole, with words_add. */
static void words_split(Arena *a, Words *w, const char *text)
{
    char *copy = arena_strndup(a, text, strlen(text));
    for (char *save = NULL, *word = strtok_r(copy, " ", &save); word; word = strtok_r(NULL, " ", &save))
        words_add(a, w, word);
}

/* WORD as a POSIX shell reads it back: as it is when it holds only
 * characters no shell treats specially (so today's plain lines read as they
 * did), else in single quotes, where only a single quote needs care: '\''. */
static const char *shell_quote(Arena *a, const char *word)
{
    static const char plain[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_@%+=:,./-";
    if (*word && !word[strspn(word, plain)])
        return word;
    size_t len = 2;
    for (const char *c = word; *c; c++)
        len += *c == '\'' ? 4 : 1;
    char *quoted = arena_alloc(a, len + 1), *q = quoted;
    *q++ = '\'';
    for (const char *c = word; *c; c++)
        if (*c == '\'') {
            memcpy(q, "'\\''", 4);
            q += 4;
        } else {
            *q++ = *c;
        }
    *q = '\'';
    return quoted;
}

/* W's words on one line, each quoted where it needs it. */
static char *shell_line(Arena *a, const Words *w)
{
    char *line = "";
    for (int i = 0; i < w->n; i++)
        line = arena_printf(a, "%s%s%s", line, i ? " " : "", shell_quote(a, w->word[i]));
    return line;
}

/* LINE's words, added to W, as a POSIX shell reads them: split at blanks
 * outside quotes; '...' as it stands, "..." too but for a \ before $ ` " \,
 * and a \ outside quotes keeps the character after it; a word that starts
 * with # starts a comment. What only a shell could do (expansions, globs,
 * redirections, pipes, lists) is refused: ddpc runs the words itself. False
 * (reported as SHOWN's) when LINE is not such a line. */
static bool shell_words(Arena *a, const char *line, Words *w, const char *shown)
{
    char *out = arena_alloc(a, 2 * strlen(line) + 2); /* the words, each NUL-ended */
    const char *c = line, *why = NULL;
    for (;;) {
        c += strspn(c, " \t");
        if (!*c || *c == '#')
            break;
        if (*c == '~') {
            why = "a ~ that starts a word (quote it)";
            break;
        }
        char *word = out;
        for (; !why && *c && *c != ' ' && *c != '\t'; c++) {
            if (*c == '\'') {
                const char *end = strchr(c + 1, '\'');
                if (!end) {
                    why = "a ' that nothing closes";
                } else {
                    memcpy(out, c + 1, (size_t)(end - c - 1));
                    out += end - c - 1;
                    c = end;
                }
            } else if (*c == '"') {
                for (c++; *c && *c != '"' && !why; c++) {
                    if (*c == '$' || *c == '`')
                        why = arena_printf(a, "a %c in double quotes (single-quote the word)", *c);
                    if (*c == '\\' && c[1] && strchr("$`\"\\", c[1]))
                        c++;
                    *out++ = *c;
                }
                if (!*c && !why)
                    why = "a \" that nothing closes";
            } else if (*c == '\\') {
                if (!c[1])
                    why = "a \\ that ends the line";
                else
                    *out++ = *++c;
            } else if (strchr("|&;<>()$`*?[", *c)) {
                why = arena_printf(a, "a %c outside quotes (quote it)", *c);
            } else {
                *out++ = *c;
            }
        }
        if (why)
            break;
        *out++ = '\0';
        words_add(a, w, word);
    }
    if (why)
        fprintf(stderr, "%s: error: the '// ddpc-build:' line needs a shell to run, which ddpc does not use: %s\n",
                shown, why);
    return !why;
}

/* Whether PATH can be written on the one-line '// ddpc-build:' comment:
 * false (reported, with WHO, the line break shown as \n, and FIX) when a
 * line break is in it. */
static bool fits_one_line(Arena *a, const char *who, const char *path, const char *fix)
{
    if (!path[strcspn(path, "\r\n")])
        return true;
    char *shown = arena_alloc(a, 2 * strlen(path) + 1), *s = shown;
    for (const char *c = path; *c; c++)
        if (*c == '\n' || *c == '\r')
            *s++ = '\\', *s++ = *c == '\n' ? 'n' : 'r';
        else
            *s++ = *c;
    fprintf(stderr, "ddpc: error: %s %s holds a line break, which the generated program's one-line '// ddpc-build:' "
                    "comment cannot hold; %s\n", who, shown, fix);
    return false;
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
 * libjpeg.a), added to W, where the runtime library LIB decodes images (it
 * calls libpng). A program links its runtime's copies, so that it runs
 * where they are not installed. */
static void image_libraries(Arena *a, Words *w, const Runtime *rt, const char *lib)
{
    char names[] = DDPC_IMAGE_LIBS;
    if (!runtime_calls(lib, "png_create_read_struct", names[0] != '\0'))
        return;
    for (char *save = NULL, *name = strtok_r(names, " ", &save); name; name = strtok_r(NULL, " ", &save))
        words_add(a, w, arena_printf(a, "%s/%s", rt->lib, name));
}

/* Whether the paths a build line names (the source CU, the program OUT,
 * RT's directories) fit on it; false (reported, as WHO's) when not. */
static bool line_holds_paths(Arena *a, const char *who, const Runtime *rt, const char *cu, const char *out)
{
    const char *where = arena_printf(a, "%s: its path", who), *elsewhere = "name a directory without one";
    const char *runtime = "the runtime's directory", *moved = "move it, or set DDPC_HOME to a copy without one";
    return fits_one_line(a, where, out, elsewhere) && fits_one_line(a, where, cu, elsewhere) &&
           fits_one_line(a, runtime, rt->include, moved) && fits_one_line(a, runtime, rt->lib, moved);
}

char *build_command(Arena *a, const char *target, const char *arch, const char *cu_path, const char *out_path)
{
    Runtime rt;
    if (!find_runtime(&rt))
        return NULL;
    const char *lib = runtime_library(a, &rt, target);
    if (!lib)
        return NULL;
    const char *cu_abs = absolute(a, cu_path), *out_abs = absolute(a, out_path);
    if (!line_holds_paths(a, arena_printf(a, "the program %s", out_path), &rt, cu_abs, out_abs))
        return NULL;
    Words w = {0};
    if (strcmp(target, "cuda") == 0) {
        const char *include = "";
        const char *gpu_libs = toolchain_cuda_link(a, &include);
        words_split(a, &w, DDPC_NVCC " -std=c++17 -O3");
        words_split(a, &w, toolchain_arch_flags(a, arch));
        words_split(a, &w, "-Xcompiler -Wall,-Wextra");
        words_add(a, &w, arena_printf(a, "-I%s", rt.include));
        words_split(a, &w, include);
        words_add(a, &w, cu_abs);
        words_add(a, &w, "-o");
        words_add(a, &w, out_abs);
        words_add(a, &w, lib);
        words_split(a, &w, gpu_libs);
        image_libraries(a, &w, &rt, lib);
        words_split(a, &w, DDPC_CUDA_LIBS);
        if (runtime_uses_mpi(lib))
            words_split(a, &w, DDPC_MPI_LIBS);
        return shell_line(a, &w);
    }
    words_split(a, &w, DDPC_CPU_CXX " " DDPC_CPU_CXXFLAGS);
    words_add(a, &w, arena_printf(a, "-I%s", rt.include));
    words_add(a, &w, cu_abs);
    words_split(a, &w, "-x none -o");
    words_add(a, &w, out_abs);
    words_add(a, &w, lib);
    image_libraries(a, &w, &rt, lib);
    words_split(a, &w, DDPC_CPU_LIBS);
    return shell_line(a, &w);
}

/* COMMAND's words (shell_words) with its source (the last word not an
 * option and ending in .cu) replaced by CU and the word after -o by OUT;
 * NULL (reported as SHOWN's) when it lacks either, or is not a line ddpc
 * can run. */
static Words *retarget(Arena *a, const char *command, const char *cu, const char *out, const char *shown)
{
    Words *w = arena_alloc(a, sizeof *w);
    if (!shell_words(a, command, w, shown))
        return NULL;
    int source = -1, output = -1;
    for (int i = 0; i < w->n; i++) {
        size_t len = strlen(w->word[i]);
        if (strcmp(w->word[i], "-o") == 0 && i + 1 < w->n)
            output = ++i;
        else if (w->word[i][0] != '-' && len > 3 && strcmp(w->word[i] + len - 3, ".cu") == 0)
            source = i;
    }
    if (source < 0 || output < 0) {
        fprintf(stderr, "%s: error: the '// ddpc-build:' line names no %s\n", shown, source < 0 ? "source (F.cu)" : "-o OUT");
        return NULL;
    }
    w->word[source] = cu;
    w->word[output] = out;
    return w;
}

/* Runs W's words (the first a program, found on PATH when it names no
 * directory) and waits for it, as system() would but with no shell: ddpc
 * ignores SIGINT and SIGQUIT meanwhile (a Ctrl-C stops the compiler, then
 * ddpc removes its temporary program), and the compiler gets them back as
 * ddpc had them. Whether it ran and exited 0. */
static bool run_words(Arena *a, Words *w)
{
    words_add(a, w, NULL);
    w->n--;
    struct sigaction ignore = {.sa_handler = SIG_IGN}, old_int, old_quit;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGINT, &ignore, &old_int);
    sigaction(SIGQUIT, &ignore, &old_quit);
    sigset_t restore;
    sigemptyset(&restore);
    if (old_int.sa_handler != SIG_IGN)
        sigaddset(&restore, SIGINT);
    if (old_quit.sa_handler != SIG_IGN)
        sigaddset(&restore, SIGQUIT);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setsigdefault(&attr, &restore);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
    pid_t pid;
    int err = posix_spawnp(&pid, w->word[0], NULL, &attr, (char *const *)w->word, environ);
    posix_spawnattr_destroy(&attr);
    int status = 0;
    while (err == 0 && waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            err = errno;
            break;
        }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
    if (err)
        fprintf(stderr, "ddpc: error: cannot run the compiler %s: %s\n", w->word[0], strerror(err));
    return !err && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int build_run(Arena *a, const char *command, const char *cu, const char *shown_cu, const char *out, bool verbose)
{
    char *tmp = output_temp_name(a, out);
    /* absolute, so that no name the compiler is given starts with '-' */
    Words *run = tmp ? retarget(a, command, absolute(a, cu), absolute(a, tmp), cu) : NULL;
    if (!run) /* the directory cannot take the program, or the build line is unusable */
        return 2;
    const char *line = shell_line(a, run);
    if (verbose)
        fprintf(stderr, "ddpc: %s\nddpc: then renames %s to %s\n", line, tmp, out);
    if (!run_words(a, run)) {
        unlink(tmp);
        /* the temporary names are gone once ddpc returns: the line to run
         * again (and the one the source records) names the files left */
        Words *kept = retarget(a, command, absolute(a, shown_cu), absolute(a, out), shown_cu);
        fprintf(stderr, "ddpc: error: the build failed; the command was:\n    %s\n", kept ? shell_line(a, kept) : line);
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
        /* the advice joins one slash to the directory as written less its
         * own (od/ gives od/NAME, / gives /NAME) */
        size_t dir_len = strlen(out);
        while (dir_len > 0 && out[dir_len - 1] == '/')
            dir_len--;
        fprintf(stderr, "ddpc: error: %s: is a directory; name the program to write (-o %.*s/NAME)\n", who,
                (int)dir_len, out);
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
    if (!find_runtime(&rt) || !runtime_library(a, &rt, target) ||
        !line_holds_paths(a, who, &rt, absolute(a, *cu), absolute(a, *prog)))
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
    char *line = NULL; /* whole, however long its quoted paths make it */
    size_t cap = 0;
    const char *tag = "// ddpc-build: ";
    char *command = NULL;
    for (int i = 0; i < 20 && getline(&line, &cap, f) >= 0; i++) {
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
        free(line);
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
            rc = build_run(&a, command, absolute(&a, cu_path), absolute(&a, cu_path), absolute(&a, out), verbose);
    }
    arena_free(&a);
    free(line);
    return rc;
}
