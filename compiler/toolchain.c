/*
 * toolchain.c: where cuDNN, cuBLAS, cuBLASLt and NCCL are, and which GPUs to build for.
 *
 * Users build on a login node without a GPU and run on GPU nodes. Their
 * libraries come from a CUDA install, from the system's packages, or from
 * the pip wheels PyTorch installs (site-packages/nvidia/cudnn/lib/
 * libcudnn.so.9: versioned names only, no libcudnn.so for -lcudnn). Each
 * library is looked for, header and library together, in this order:
 *
 *   1. its own variable (CUDNN_HOME, NCCL_HOME): what the user said wins, and
 *      a variable naming a place without the library is an error, not a hint
 *      to look elsewhere (a silent fallback would link what they meant to avoid);
 *   2. CUDA_HOME, or where it is not set the toolkit whose nvcc ddpc was
 *      built with (the versions nvcc itself was installed with): CUDA_HOME
 *      says which CUDA the user means, so it replaces the toolkit rather
 *      than adding to it (a cluster's CUDA module often lacks cuDNN, which
 *      then comes from the wheels);
 *   3. the system's directories (Debian's and NVIDIA's packages);
 *   4. the pip wheels of the python3 on PATH (an activated venv or conda
 *      environment): SITE/nvidia/NAME/{include,lib} for each directory SITE
 *      of its sys.path and each NAME, the library's own first. sys.path is
 *      read rather than `import nvidia`: nothing is imported, a half-installed
 *      namespace still counts, and cuBLAS of the CUDA 13 wheels
 *      (nvidia/cu13/lib) is found by the same scan as nvidia/cublas/lib.
 *
 * The library is linked by its full path (the unversioned name if there is
 * one, else libcudnn.so.9), so no symlink is needed and two directories
 * holding one library cannot be confused by -L order. Its directory goes into
 * the program's RUNPATH unless the dynamic loader searches it anyway, so the
 * program starts on a GPU node without LD_LIBRARY_PATH.
 *
 * Everything here is found once per run and kept.
 */
#include "ddpc.h"

#include <dirent.h>
#include <dlfcn.h>  // dlopen: ask the CUDA driver, if any, for GPUs
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"  // DDPC_NVCC, DDPC_CUDA_ARCHS, DDPC_CUDA_LIBS, DDPC_MPI_LIBS (written by make)

#if defined(__x86_64__)
#define MULTIARCH "x86_64-linux-gnu"
#elif defined(__aarch64__)
#define MULTIARCH "aarch64-linux-gnu"
#elif defined(__powerpc64__)
#define MULTIARCH "powerpc64le-linux-gnu"
#else
#define MULTIARCH "unknown-linux-gnu"
#endif

/* One library's facts: its names, where its version is written, and who installs it. */
typedef struct {
    const char *name;           /* as users spell it: cuDNN */
    const char *lib;            /* libLIB.so */
    const char *header;         /* the header the runtime includes */
    const char *version_header; /* where the version macros are */
    const char *version_macro[3];
    const char *home;           /* its own variable, or NULL */
    const char *wheel;          /* the pip package, less the CUDA major */
} LibSpec;

static const LibSpec lib_specs[TOOL_LIBS] = {
    {"cuDNN", "cudnn", "cudnn.h", "cudnn_version.h", {"CUDNN_MAJOR", "CUDNN_MINOR", "CUDNN_PATCHLEVEL"}, "CUDNN_HOME",
     "nvidia-cudnn-cu"},
    {"cuBLAS", "cublas", "cublas_v2.h", "cublas_api.h", {"CUBLAS_VER_MAJOR", "CUBLAS_VER_MINOR", "CUBLAS_VER_PATCH"},
     NULL, "nvidia-cublas-cu"},
    /* the linear layers' fused bias and relu (runtime/lt_linear.h); shipped
     * beside cuBLAS, with its version */
    {"cuBLASLt", "cublasLt", "cublasLt.h", "cublas_api.h",
     {"CUBLAS_VER_MAJOR", "CUBLAS_VER_MINOR", "CUBLAS_VER_PATCH"}, NULL, "nvidia-cublas-cu"},
    {"NCCL", "nccl", "nccl.h", "nccl.h", {"NCCL_MAJOR", "NCCL_MINOR", "NCCL_PATCH"}, "NCCL_HOME", "nvidia-nccl-cu"},
};

/* Directories the compiler or the dynamic loader searches by itself: no -I,
 * no RUNPATH for them (-I/usr/include would even break #include_next). */
static const char *const system_include[] = {"/usr/include", "/usr/include/" MULTIARCH, "/usr/local/include"};
static const char *const system_lib[] = {"/usr/lib/" MULTIARCH, "/lib/" MULTIARCH, "/usr/lib64", "/usr/lib",
                                         "/lib64", "/lib", "/usr/local/lib"};

enum { MAX_DIRS = 8, MAX_SITES = 32 };

/* A place to look: a label for messages, and the directories it offers. */
typedef struct {
    char label[PATH_MAX + 64];
    char include[MAX_DIRS][PATH_MAX];
    char lib[MAX_DIRS][PATH_MAX];
    int n_include, n_lib;
    bool strict; /* named by the user: the search ends here */
} Place;

/* snprintf where cutting a too long path short is the intended outcome
 * (such a path then names no file, and is reported as not found). */
__attribute__((format(printf, 3, 4))) static void fill(char *out, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, size, fmt, ap);
    va_end(ap);
}

static bool is_file(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static bool is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* The first line of COMMAND's output holding NEEDLE, copied into LINE; false if none. */
static bool command_line_with(const char *command, const char *needle, char *line, size_t size)
{
    FILE *p = popen(command, "r");
    if (!p)
        return false;
    bool found = false;
    char buf[4096];
    while (fgets(buf, sizeof buf, p))
        if (!found && strstr(buf, needle)) {
            buf[strcspn(buf, "\r\n")] = '\0';
            fill(line, size, "%s", buf);
            found = true;
        }
    pclose(p);
    return found;
}

/* The value of `#define MACRO N` in FILE, or -1. */
static long header_macro(const char *file, const char *macro)
{
    FILE *f = fopen(file, "r");
    if (!f)
        return -1;
    char line[512], name[128];
    long value = -1, v;
    while (value < 0 && fgets(line, sizeof line, f))
        if (sscanf(line, " # define %127s %ld", name, &v) == 2 && strcmp(name, macro) == 0)
            value = v;
    fclose(f);
    return value;
}

/* Appends DIR followed by SUFFIX to DIRS. */
static void add_dir(char (*dirs)[PATH_MAX], int *n, const char *dir, const char *suffix)
{
    if (*n < MAX_DIRS)
        fill(dirs[(*n)++], PATH_MAX, "%s%s", dir, suffix);
}

/* A prefix laid out as CUDA's and the NVIDIA tarballs are: include/, lib64/ or lib/. */
static void prefix_place(Place *p, const char *prefix)
{
    p->n_include = p->n_lib = 0;
    add_dir(p->include, &p->n_include, prefix, "/include");
    add_dir(p->lib, &p->n_lib, prefix, "/lib64");
    add_dir(p->lib, &p->n_lib, prefix, "/lib");
    add_dir(p->lib, &p->n_lib, prefix, "/lib/" MULTIARCH);
}

/* The toolkit ddpc was built with: DDPC_NVCC less /bin/nvcc ("" without nvcc). */
static const char *toolkit_root(void)
{
    static char root[PATH_MAX];
    if (!root[0] && DDPC_NVCC[0] != '\0') {
        fill(root, sizeof root, "%s", DDPC_NVCC);
        char *slash = strrchr(root, '/');
        if (slash)
            *slash = '\0';
        slash = strrchr(root, '/');
        if (slash && strcmp(slash, "/bin") == 0)
            *slash = '\0';
    }
    return root;
}

/* The directories of the python3 on PATH's sys.path; -1 when there is no python3. */
static int python_sites(char (*sites)[PATH_MAX], int max)
{
    FILE *p = popen("python3 -c 'import sys; print(\"\\n\".join(sys.path))' 2>/dev/null", "r");
    if (!p)
        return -1;
    int n = 0;
    char line[PATH_MAX];
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '/' && n < max)
            fill(sites[n++], PATH_MAX, "%s", line);
    }
    int status = pclose(p);
    return status == 0 ? n : -1;
}

/* The file DIR/libLIB.so, else DIR/libLIB.so.MAJOR, else the newest
 * DIR/libLIB.so.N (by name); false if none. */
static bool library_in(const char *dir, const char *lib, long major, char *out, size_t size)
{
    fill(out, size, "%s/lib%s.so", dir, lib);
    if (is_file(out))
        return true;
    if (major >= 0) {
        fill(out, size, "%s/lib%s.so.%ld", dir, lib, major);
        if (is_file(out))
            return true;
    }
    DIR *d = opendir(dir);
    if (!d)
        return false;
    char prefix[64], best[NAME_MAX + 1] = "";
    fill(prefix, sizeof prefix, "lib%s.so.", lib);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        const char *rest = e->d_name + strlen(prefix);
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 && *rest >= '0' && *rest <= '9' &&
            strspn(rest, "0123456789.") == strlen(rest) && strcmp(e->d_name, best) > 0)
            fill(best, sizeof best, "%s", e->d_name);
    }
    closedir(d);
    if (!best[0])
        return false;
    fill(out, size, "%s/%s", dir, best);
    return is_file(out);
}

/* Looks for SPEC in PLACE; fills L when both header and library are there,
 * else appends what was missing to L->looked. */
static bool look_in(const LibSpec *spec, const Place *place, const char *where, ToolLib *l)
{
    const char *inc = NULL;
    char path[PATH_MAX * 2];
    for (int i = 0; i < place->n_include && !inc; i++) {
        fill(path, sizeof path, "%s/%s", place->include[i], spec->header);
        if (is_file(path))
            inc = place->include[i];
    }
    long major = -1;
    if (inc) {
        fill(path, sizeof path, "%s/%s", inc, spec->version_header);
        major = header_macro(path, spec->version_macro[0]);
    }
    const char *libdir = NULL;
    char file[PATH_MAX * 2];
    for (int i = 0; i < place->n_lib && !libdir; i++)
        if (library_in(place->lib[i], spec->lib, major, file, sizeof file))
            libdir = place->lib[i];
    if (!inc || !libdir) {
        char missing[128];
        if (!inc && !libdir)
            fill(missing, sizeof missing, "%s, lib%s.so*", spec->header, spec->lib);
        else if (!inc)
            fill(missing, sizeof missing, "%s", spec->header);
        else
            fill(missing, sizeof missing, "lib%s.so*", spec->lib);
        size_t n = strlen(l->looked);
        fill(l->looked + n, sizeof l->looked - n, "%s%s (no %s)", n ? "; " : "", place->label, missing);
        return false;
    }
    l->found = true;
    l->where = where;
    fill(l->lib, sizeof l->lib, "%s", file);
    fill(l->libdir, sizeof l->libdir, "%s", libdir);
    fill(l->include, sizeof l->include, "%s", inc);
    long minor = header_macro(path, spec->version_macro[1]), patch = header_macro(path, spec->version_macro[2]);
    if (major >= 0 && minor >= 0 && patch >= 0)
        fill(l->version, sizeof l->version, "%ld.%ld.%ld", major, minor, patch);
    else
        fill(l->version, sizeof l->version, "version unknown");
    return true;
}

/* The pip wheels: SITE/nvidia/NAME/ for each NAME, the library's own name first. */
static bool look_in_wheels(const LibSpec *spec, char (*sites)[PATH_MAX], int n_sites, ToolLib *l)
{
    static Place place; /* large: kept off the stack */
    int wheels = 0;
    for (int s = 0; s < n_sites; s++) {
        char nvidia[PATH_MAX + 8];
        fill(nvidia, sizeof nvidia, "%s/nvidia", sites[s]);
        DIR *d = opendir(nvidia);
        if (!d)
            continue;
        char names[64][NAME_MAX + 1];
        int n = 0;
        fill(names[n++], sizeof names[0], "%s", spec->lib);
        for (struct dirent *e; (e = readdir(d)) != NULL && n < 64;)
            if (e->d_name[0] != '.' && strcmp(e->d_name, spec->lib) != 0)
                fill(names[n++], sizeof names[0], "%s", e->d_name);
        closedir(d);
        for (int i = 0; i < n; i++) {
            char root[PATH_MAX * 2];
            fill(root, sizeof root, "%s/%s", nvidia, names[i]);
            if (!is_dir(root))
                continue;
            wheels++;
            prefix_place(&place, root);
            fill(place.label, sizeof place.label, "pip wheel %s", root);
            ToolLib quiet = {0};
            if (look_in(spec, &place, "a pip wheel of python3", &quiet)) {
                *l = quiet;
                l->name = spec->name;
                return true;
            }
        }
    }
    size_t n = strlen(l->looked);
    fill(l->looked + n, sizeof l->looked - n, "%spython3's site-packages (%s)", n ? "; " : "",
             wheels ? "no nvidia/*/ wheel holds it" : "no nvidia/ wheels");
    return false;
}

static void find_lib(const LibSpec *spec, ToolLib *l)
{
    static Place place;
    memset(l, 0, sizeof *l);
    l->name = spec->name;
    const char *home = spec->home ? getenv(spec->home) : NULL;
    if (home && *home) {
        prefix_place(&place, home);
        fill(place.label, sizeof place.label, "%s=%s", spec->home, home);
        look_in(spec, &place, spec->home, l);
        return;
    }
    const char *cuda_home = getenv("CUDA_HOME");
    if (cuda_home && *cuda_home) {
        prefix_place(&place, cuda_home);
        fill(place.label, sizeof place.label, "CUDA_HOME=%s", cuda_home);
        if (look_in(spec, &place, "CUDA_HOME", l))
            return;
    } else if (toolkit_root()[0]) {
        prefix_place(&place, toolkit_root());
        fill(place.label, sizeof place.label, "the CUDA toolkit %s", toolkit_root());
        if (look_in(spec, &place, "the CUDA toolkit", l))
            return;
    }
    place.n_include = place.n_lib = 0;
    for (int i = 0; i < DDPC_COUNT(system_include); i++)
        add_dir(place.include, &place.n_include, system_include[i], "");
    for (size_t i = 0; i < 4; i++) /* /usr/lib/MULTIARCH, /lib/MULTIARCH, /usr/lib64, /usr/lib */
        add_dir(place.lib, &place.n_lib, system_lib[i], "");
    add_dir(place.lib, &place.n_lib, "/usr/local/lib", "");
    fill(place.label, sizeof place.label, "the system's /usr/include, /usr/lib/%s", MULTIARCH);
    if (look_in(spec, &place, "the system", l))
        return;
    static char sites[MAX_SITES][PATH_MAX];
    static int n_sites = -2;
    if (n_sites == -2)
        n_sites = python_sites(sites, MAX_SITES);
    if (n_sites < 0) {
        size_t n = strlen(l->looked);
        fill(l->looked + n, sizeof l->looked - n, "%spip wheels (no python3 on PATH)", n ? "; " : "");
        return;
    }
    look_in_wheels(spec, sites, n_sites, l);
}

/* What cuInit says: whether the CUDA driver sees a GPU, as the program would
 * (it honours CUDA_VISIBLE_DEVICES). Asked of the driver itself rather than
 * guessed from /dev/nvidia0 (absent under WSL, present in containers whose
 * driver is too old) or nvidia-smi (a process, and not always installed);
 * loaded with dlopen so ddpc needs no CUDA library to start. Left loaded:
 * unloading a driver after cuInit is not something it promises to survive. */
bool toolchain_gpu_visible(void)
{
    static int visible = -1;
    if (visible < 0) {
        visible = 0;
        void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (cuda) {
            int (*init)(unsigned) = (int (*)(unsigned))dlsym(cuda, "cuInit");
            int (*count)(int *) = (int (*)(int *))dlsym(cuda, "cuDeviceGetCount");
            int n = 0;
            visible = init && count && init(0) == 0 && count(&n) == 0 && n > 0;
        }
    }
    return visible;
}

const Toolchain *toolchain_get(void)
{
    static Toolchain tc;
    static bool done;
    if (done)
        return &tc;
    done = true;
    for (int i = 0; i < TOOL_LIBS; i++)
        find_lib(&lib_specs[i], &tc.libs[i]);
    return &tc;
}

/* nvcc's release ("13.0.88") or "". */
static const char *nvcc_version(void)
{
    static char version[64];
    static bool done;
    if (!done && DDPC_NVCC[0] != '\0') {
        done = true;
        char cmd[PATH_MAX + 32], line[256];
        fill(cmd, sizeof cmd, "%s --version 2>/dev/null", DDPC_NVCC);
        const char *v = command_line_with(cmd, "release ", line, sizeof line) ? strstr(line, ", V") : NULL;
        if (v)
            fill(version, sizeof version, "%s", v + 3);
    }
    return version;
}

/* The pip package that installs SPEC for this CUDA: nvidia-cudnn-cu13. */
static const char *wheel_name(const LibSpec *spec)
{
    static char name[TOOL_LIBS][64];
    int major = atoi(nvcc_version());
    int i = (int)(spec - lib_specs);
    fill(name[i], sizeof name[i], "%s%d", spec->wheel, major > 0 ? major : 13);
    if (major >= 13 && strncmp(spec->lib, "cublas", 6) == 0) /* CUDA 13's toolkit wheels dropped the suffix */
        fill(name[i], sizeof name[i], "nvidia-cublas");
    return name[i];
}

/* What to do about a missing SPEC. */
static const char *missing_hint(const LibSpec *spec, char *buf, size_t size)
{
    if (spec->home)
        fill(buf, size, "set %s to where it is installed, or pip install %s into the active python3", spec->home,
                 wheel_name(spec));
    else
        fill(buf, size, "set CUDA_HOME to a CUDA toolkit that has it, or pip install %s into the active python3",
                 wheel_name(spec));
    return buf;
}

bool toolchain_cuda_ready(void)
{
    const Toolchain *tc = toolchain_get();
    bool ok = true;
    for (int i = 0; i < TOOL_LIBS; i++) {
        const ToolLib *l = &tc->libs[i];
        /* toolchain_cuda_link's flags are words joined by spaces, which
         * build.c splits */
        const char *paths[] = {l->include, l->lib, l->libdir};
        for (int k = 0; l->found && k < 3; k++)
            if (paths[k][strcspn(paths[k], " \t")]) {
                fprintf(stderr, "ddpc: error: %s holds a space, which the program's build line cannot carry: make "
                        "the CUDA libraries reachable by a path without one (a link, or CUDA_HOME, CUDNN_HOME, "
                        "NCCL_HOME there)\n", paths[k]);
                return false; /* the first: the libraries often share it */
            }
        if (l->found)
            continue;
        char hint[256];
        fprintf(stderr, "ddpc: error: --target cuda needs %s (%s and lib%s.so*), which is in none of: %s; %s, "
                        "or use --target cpu\n",
                l->name, lib_specs[i].header, lib_specs[i].lib, l->looked, missing_hint(&lib_specs[i], hint, sizeof hint));
        ok = false;
    }
    return ok;
}

/* The architectures this nvcc can build (compute_XX from --list-gpu-arch),
 * as a NULL-ended list of numbers; NULL when nvcc cannot say. */
static const int *nvcc_archs(void)
{
    static int archs[64];
    static int n = -1;
    if (n < 0 && DDPC_NVCC[0] != '\0') {
        n = 0;
        char cmd[PATH_MAX + 32], word[64];
        fill(cmd, sizeof cmd, "%s --list-gpu-arch 2>/dev/null", DDPC_NVCC);
        FILE *p = popen(cmd, "r");
        while (p && n < 63 && fscanf(p, "%63s", word) == 1)
            if (strncmp(word, "compute_", 8) == 0 && atoi(word + 8) > 0)
                archs[n++] = atoi(word + 8);
        if (p)
            pclose(p);
    }
    return n > 0 ? archs : NULL;
}

/* The GPUs a program is built for by default, as machine code, plus PTX of
 * the newest so that later GPUs compile it at load: the Makefile's
 * CUDA_ARCHS, which the GPU runtime is built for too (a program's kernels
 * and the runtime's must load on the same GPUs). */
static const int default_archs[] = {DDPC_CUDA_ARCHS};
enum { N_DEFAULT_ARCHS = DDPC_COUNT(default_archs) };

static bool nvcc_builds(int arch)
{
    const int *have = nvcc_archs();
    if (!have) /* nvcc did not say: ask for all, and let it say what it lacks */
        return true;
    for (int i = 0; have[i]; i++)
        if (have[i] == arch)
            return true;
    return false;
}

const char *toolchain_nvcc_refuses(Arena *a, int arch)
{
    const int *have = nvcc_archs();
    if (!have || nvcc_builds(arch))
        return NULL;
    const char *words = "";
    for (int i = 0; have[i]; i++)
        words = arena_printf(a, "%s%s%d", words, *words ? " " : "", have[i]);
    return words;
}

bool toolchain_runtime_loads_on(int arch)
{
    int newest = 0;
    for (int i = 0; i < N_DEFAULT_ARCHS; i++) {
        int built = default_archs[i];
        if (!nvcc_builds(built))
            continue;
        if (built / 10 == arch / 10 && built <= arch) /* machine code: same major, no newer minor */
            return true;
        newest = built;
    }
    return newest && arch >= newest; /* the newest's PTX, which a newer GPU compiles */
}

const char *toolchain_runtime_archs(Arena *a, int with)
{
    const char *words = "";
    bool placed = false;
    for (int i = 0; i <= N_DEFAULT_ARCHS; i++) {
        int next = i < N_DEFAULT_ARCHS ? default_archs[i] : INT_MAX; /* ascending: the Makefile checks */
        if (with && !placed && with <= next) {
            words = arena_printf(a, "%s%s%d", words, *words ? " " : "", with);
            placed = true;
        }
        if (i < N_DEFAULT_ARCHS && next != with)
            words = arena_printf(a, "%s%s%d", words, *words ? " " : "", next);
    }
    return words;
}

const char *toolchain_arch_flags(Arena *a, const char *arch)
{
    if (arch) {
        const char *sm = arch + 3; /* "sm_90" -> "90" */
        return arena_printf(a, "-gencode arch=compute_%s,code=sm_%s -gencode arch=compute_%s,code=compute_%s", sm, sm,
                            sm, sm);
    }
    if (toolchain_gpu_visible())
        return "-arch=native";
    const char *flags = "";
    int newest = 0;
    for (int i = 0; i < N_DEFAULT_ARCHS; i++)
        if (nvcc_builds(default_archs[i])) {
            flags = arena_printf(a, "%s%s-gencode arch=compute_%d,code=sm_%d", flags, *flags ? " " : "",
                                 default_archs[i], default_archs[i]);
            newest = default_archs[i];
        }
    if (!newest) /* an nvcc older than every default: its own default */
        return "";
    return arena_printf(a, "%s -gencode arch=compute_%d,code=compute_%d", flags, newest, newest);
}

/* The architectures in words, for --doctor. */
static const char *arch_words(Arena *a)
{
    if (toolchain_gpu_visible())
        return "native (the GPUs visible here); --arch sm_XX builds for one";
    const char *built = "", *left = "";
    int newest = 0;
    for (int i = 0; i < N_DEFAULT_ARCHS; i++) {
        if (nvcc_builds(default_archs[i])) {
            built = arena_printf(a, "%s%ssm_%d", built, *built ? " " : "", default_archs[i]);
            newest = default_archs[i];
        } else
            left = arena_printf(a, "%s%ssm_%d", left, *left ? " " : "", default_archs[i]);
    }
    if (!newest)
        return arena_printf(a, "nvcc's own default (it builds none of %s); --arch sm_XX builds for one", left);
    return arena_printf(a, "%s, and PTX for compute_%d (newer GPUs)%s%s; --arch sm_XX builds for one", built, newest,
                        *left ? "; this nvcc cannot build " : "", left);
}

void toolchain_doctor(FILE *out, const char *runtime_lib, int runtime_mpi)
{
    Arena a = {0};
    fprintf(out, "ddpc %s\n", DDPC_VERSION);
    if (DDPC_NVCC[0])
        fprintf(out, "nvcc:     %s (CUDA %s)\n", DDPC_NVCC, nvcc_version()[0] ? nvcc_version() : "version unknown");
    else
        fputs("nvcc:     not found when ddpc was built: --target cuda is disabled "
              "(install the CUDA toolkit, then rebuild ddpc)\n", out);
    const Toolchain *tc = toolchain_get();
    for (int i = 0; i < TOOL_LIBS; i++) {
        const ToolLib *l = &tc->libs[i];
        char label[16], hint[256];
        fill(label, sizeof label, "%s:", l->name);
        if (l->found)
            fprintf(out, "%-9s %s, %s (headers %s; from %s)\n", label, l->version, l->lib, l->include, l->where);
        else
            fprintf(out, "%-9s not found (%s): --target cuda will fail; looked in: %s\n", label,
                    missing_hint(&lib_specs[i], hint, sizeof hint), l->looked);
    }
    if (DDPC_MPI_LIBS[0])
        fprintf(out, "MPI:      %s\n", DDPC_MPI_LIBS);
    else
        fputs("MPI:      not found when ddpc was built: CPU programs run one rank (install MPI, then rebuild ddpc)\n",
              out);
    if (runtime_lib)
        fprintf(out, "runtime:  %s (%s)\n", runtime_lib,
                runtime_mpi ? "uses MPI: CUDA programs link it" : "without MPI: CUDA programs do not link it");
    else if (DDPC_NVCC[0])
        fputs("runtime:  libddprt_cuda.a not found: --target cuda will fail (make builds it)\n", out);
    if (DDPC_NVCC[0])
        fprintf(out, "arch:     %s\n", arch_words(&a));
    fprintf(out, "GPU:      %s\n", toolchain_gpu_visible() ? "visible here: ddpc builds for cuda by default"
                                                          : "none visible here: ddpc builds for the cpu by default");
    arena_free(&a);
}

const char *toolchain_cuda_link(Arena *a, const char **include_flags)
{
    const Toolchain *tc = toolchain_get();
    const char *inc = "", *libs = "", *rpath = "";
    for (int i = 0; i < TOOL_LIBS; i++) {
        const ToolLib *l = &tc->libs[i];
        if (!ddpc_word_in(l->include, system_include, DDPC_COUNT(system_include)) &&
            !strstr(inc, arena_printf(a, "-I%s ", l->include)))
            inc = arena_printf(a, "%s-I%s ", inc, l->include);
        /* through -Xlinker: nvcc takes no input file named libX.so.9 */
        libs = arena_printf(a, "%s%s-Xlinker %s", libs, *libs ? " " : "", l->lib);
        bool listed = false;
        for (const char *p = rpath; *p && !listed; p = strchr(p, ':') ? strchr(p, ':') + 1 : "")
            listed = strncmp(p, l->libdir, strlen(l->libdir)) == 0 &&
                     (p[strlen(l->libdir)] == ':' || p[strlen(l->libdir)] == '\0');
        if (!listed && !ddpc_word_in(l->libdir, system_lib, DDPC_COUNT(system_lib)))
            rpath = arena_printf(a, "%s%s%s", rpath, *rpath ? ":" : "", l->libdir);
    }
    *include_flags = inc;
    if (!*rpath)
        return libs;
    /* --enable-new-dtags: DT_RUNPATH (which LD_LIBRARY_PATH can override),
     * whatever the linker's default */
    return arena_printf(a, "%s -Xlinker --enable-new-dtags -Xlinker -rpath=%s", libs, rpath);
}
