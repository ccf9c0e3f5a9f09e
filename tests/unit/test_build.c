/*
 * ddpc -o and --rebuild: the generated source compiles cleanly for both
 * targets, a CPU program links no BLAS, and the build line recorded in it
 * rebuilds it.
 *
 * ddpc's outputs: never an input, a directory or a FIFO, always written whole
 * (concurrent runs), CPU by default where no GPU is visible, and the runtime
 * found from an installed prefix.
 *
 * The CUDA programs cannot run here, but every example must compile and link
 * with nvcc (the default architectures, and PTX) with no warning from the
 * generated code.
 *
 * cuDNN, cuBLAS and NCCL are found where users have them: a fake pip-wheel
 * tree (versioned library names only, linked to the toolkit's) stands for
 * PyTorch's wheels, found through a fake python3 on PATH; the program's
 * RUNPATH names their directories; CUDNN_HOME wins; a missing library stops
 * ddpc before nvcc with exit status 2.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const examples[] = {"examples/mnist.net", "examples/mlp.net", "examples/resnet.net",
                                       "examples/cifar10.net", "examples/fashion_resnet.net"};

static int have_nvcc(void)
{
    return test_run("test -x build/libddprt_cuda.a || test -f build/libddprt_cuda.a", NULL) == 0 &&
           test_run("command -v nvcc || test -x /usr/local/cuda/bin/nvcc", NULL) == 0;
}

static void build_example(const char *net, const char *target)
{
    char *cmd, *out = NULL;
    CU_ASSERT_FATAL(asprintf(&cmd, "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; %s %s --target %s -o $d/prog; "
                                   "test -x $d/prog; grep -q '^// ddpc-build: ' $d/prog.cu; "
                                   "if ldd $d/prog 2>/dev/null | grep -Eqi 'lib(open)?blas|libmkl|libblis'; then "
                                   "echo LINKS_A_BLAS; fi; echo BUILT",
                             test_ddpc(), net, target) > 0);
    int rc = test_run(cmd, &out);
    char what[512];
    snprintf(what, sizeof what, "%s --target %s: exit %d", net, target, rc);
    CU_assertImplementation(rc == 0 && out && strstr(out, "BUILT"), __LINE__, what, __FILE__, "", CU_FALSE);
    /* A CPU program's products are its own (runtime/gemm_cpu.h): a BLAS
     * linked in would be dead weight, and a BLAS call a broken promise. (A
     * CUDA program links cuBLAS, which the pattern leaves out.) */
    snprintf(what, sizeof what, "%s --target %s: links a BLAS", net, target);
    CU_assertImplementation(out && !strstr(out, "LINKS_A_BLAS"), __LINE__, what, __FILE__, "", CU_FALSE);
    snprintf(what, sizeof what, "%s --target %s: the compiler warned", net, target);
    CU_assertImplementation(out && !strstr(out, "warning"), __LINE__, what, __FILE__, "", CU_FALSE);
    if (rc != 0 || (out && strstr(out, "warning")))
        fprintf(stderr, "\n%s\n", out ? out : "");
    free(out);
    free(cmd);
}

static void test_cpu_programs_build(void)
{
    for (size_t i = 0; i < sizeof examples / sizeof examples[0]; i++)
        build_example(examples[i], "cpu");
}

static void test_cuda_programs_build(void)
{
    if (!have_nvcc()) {
        fputs("\n  (skipped: no nvcc or no build/libddprt_cuda.a)", stderr);
        return;
    }
    for (size_t i = 0; i < sizeof examples / sizeof examples[0]; i++)
        build_example(examples[i], "cuda");
}

static void test_cuda_source_has_ptx_and_sm90(void)
{
    char *cmd, *out = NULL;
    CU_ASSERT_FATAL(asprintf(&cmd, "%s examples/mnist.net --emit cu --target cuda --arch sm_90 | head -5", test_ddpc()) > 0);
    if (!have_nvcc()) {
        free(cmd);
        return;
    }
    CU_ASSERT_EQUAL(test_run(cmd, &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "code=sm_90"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "code=compute_90"));
    CU_ASSERT_PTR_NULL(out && strstr(out, "sm_80")); /* --arch picks one */
    free(out);
    free(cmd);
}

static void test_rebuild_after_edit(void)
{
    char *cmd, *out = NULL;
    /* a hand edit (a comment) and a rebuild; then a broken edit must fail with status 1 */
    CU_ASSERT_FATAL(asprintf(&cmd,
                             "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; %s examples/mlp.net --target cpu -o $d/p; "
                             "rm $d/p; echo '// tuned by hand' >> $d/p.cu; %s --rebuild $d/p.cu; test -x $d/p; "
                             "echo 'this is not C' >> $d/p.cu; set +e; %s --rebuild $d/p.cu; echo \"rebuild=$?\"; "
                             "%s --rebuild /nonexistent.cu; echo \"missing=$?\"; echo 'int x;' > $d/q.cu; "
                             "%s --rebuild $d/q.cu; echo \"foreign=$?\"",
                             test_ddpc(), test_ddpc(), test_ddpc(), test_ddpc(), test_ddpc()) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "rebuild=1"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "the build failed"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "missing=2"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "foreign=2"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "no '// ddpc-build:' line"));
    free(out);
    free(cmd);
}

/* Runs the shell script SCRIPT (one %s: ddpc) and checks that its output
 * holds each of WANT (NULL-terminated); prints the output when not. */
static void script_says(const char *script, const char *const *want)
{
    char *cmd, *out = NULL;
    CU_ASSERT_FATAL(asprintf(&cmd, "D=%s; set -u; d=$(mktemp -d); trap 'rm -rf $d' EXIT; cd $d; %s", test_ddpc(),
                             script) > 0);
    int rc = test_run(cmd, &out);
    int ok = rc == 0;
    for (const char *const *w = want; *w; w++)
        if (!out || !strstr(out, *w)) {
            fprintf(stderr, "\n  missing: %s", *w);
            ok = 0;
        }
    CU_ASSERT(ok);
    if (!ok)
        fprintf(stderr, "\n  exit %d, output:\n%s\n", rc, out ? out : "");
    free(out);
    free(cmd);
}

/* -o may not name an input, nor have its .cu do so (by inode: ./x.net is
 * x.net), nor name ddpc itself (a copy of it, found its runtime by
 * DDPC_HOME: a failure here must not overwrite the build's), nor be a link
 * to its own .cu, nor be a directory or a FIFO; nor may --rebuild F.cu's
 * program F be the source itself or ddpc (links). Each refusal leaves the
 * file as it was. Without -o (or --emit...) ddpc says it wrote nothing. */
static void test_output_not_an_input(void)
{
    char *script;
    CU_ASSERT_FATAL(asprintf(&script,
        "cp %s/examples/mlp.net x.net; cp x.net n.cu; cp x.net keep; mkdir sub; mkfifo ff; touch reg; "
        "$D x.net --target cpu -o x.net; echo \"self=$?\"; "
        "$D ./x.net --target cpu -o $d/x.net; echo \"abs=$?\"; "
        "$D n.cu --target cpu -o n; echo \"cu=$?\"; "
        "$D x.net --target cpu -o sub; echo \"dir=$?\"; "
        "$D x.net --target cpu -o sub// 2>&1 | grep 'is a directory'; "
        "$D x.net --target cpu -o ff; echo \"fifo=$?\"; "
        "$D x.net --target cpu -o reg/p; echo \"under=$?\"; "
        "cp $D own; DDPC_HOME=%s ./own x.net --target cpu -o own; echo \"ddpc=$?\"; $D x.net; echo \"bare=$?\"; "
        "ln -s o.cu o; $D x.net --target cpu -o o; echo \"link=$?\"; test -e o.cu || echo NO_SOURCE; "
        "$D x.net --target cpu -o p > /dev/null; cp p.cu s.cu; cp p.cu s_keep; ln -s s.cu s; "
        "$D --rebuild s.cu; echo \"rebuild_source=$?\"; cp p.cu d.cu; ln -s own d; "
        "DDPC_HOME=%s ./own --rebuild d.cu; echo \"rebuild_ddpc=$?\"; cmp $D own && echo DDPC_KEPT; "
        "cmp s.cu s_keep && cmp x.net keep && cmp n.cu keep && echo UNCHANGED; "
        "test -p ff && test -z \"$(ls sub)\" && echo KINDS_KEPT",
        getenv("PWD") ? getenv("PWD") : ".", getenv("PWD") ? getenv("PWD") : ".",
        getenv("PWD") ? getenv("PWD") : ".") > 0);
    static const char *const want[] = {
        "self=2", "abs=2", "cu=2", "dir=2", "fifo=2", "under=2", "ddpc=2", "link=2", "NO_SOURCE", "rebuild_source=2",
        "rebuild_ddpc=2", "DDPC_KEPT", "UNCHANGED", "KINDS_KEPT", "bare=0",
        "ddpc: x.net: no errors; nothing written (-o OUT builds the program)",
        "ddpc: error: -o o: it and its source o.cu are one file; name another output",
        "ddpc: error: --rebuild s.cu (the program s): that is its source s.cu; move or rename the source",
        "ddpc: error: --rebuild d.cu (the program d): that is ddpc itself ",
        "ddpc: error: -o x.net: that is the input x.net; name another output",
        "ddpc: error: -o own: that is ddpc itself ",
        "ddpc: error: -o n: its source n.cu would overwrite the input n.cu; name another output",
        "ddpc: error: -o sub: is a directory; name the program to write (-o sub/NAME)",
        "ddpc: error: -o sub//: is a directory; name the program to write (-o sub/NAME)",
        "ddpc: error: -o ff: is a FIFO, not a regular file; name a file",
        "ddpc: error: -o reg/p: reg is not a directory",
        NULL};
    script_says(script, want);
    free(script);
}

/* A file name with a newline is refused (it would end a comment of the
 * generated program in the middle); one with a quote and a space builds,
 * its net (no `net NAME` line: the file's stem) named with '_' for them. */
static void test_awkward_file_names(void)
{
    char *script;
    CU_ASSERT_FATAL(asprintf(&script,
        "cp %s/examples/mlp.net \"$(printf 'new\\nline.net')\"; grep -v '^net ' %s/examples/mlp.net > 'say \"hi\".net'; "
        "$D \"$(printf 'new\\nline.net')\" --target cpu -o p1; echo \"newline=$?\"; test -e p1 || echo NOTHING; "
        "$D 'say \"hi\".net' --target cpu -o p2 > /dev/null; echo \"quote=$?\"; "
        "./p2 --help | grep -m1 'Trains the net'",
        getenv("PWD") ? getenv("PWD") : ".", getenv("PWD") ? getenv("PWD") : ".") > 0);
    static const char *const want[] = {
        "newline=2", "NOTHING", "quote=0",
        "ddpc: error: the input file's name holds a control character (byte 0x0a), which the generated program's "
        "comments cannot hold; rename it",
        "Trains the net 'say__hi_'",
        NULL};
    script_says(script, want);
    free(script);
}

/* The current directory, the .net's and the runtime's (DDPC_HOME, through
 * links) with a space, a quote, a $, a ;, a backslash and a non-ASCII
 * letter in them: the program builds, rebuilds after a hand edit, and its
 * recorded line, pasted into a shell, builds it too. */
static void test_awkward_directories(void)
{
    static const char *const want[] = {
        "built=0", "run1: usage: p ", "one line", "rebuilt=0", "run2: usage: p ", "pasted=0", "run3: usage: p ", NULL};
    script_says("r=$(cd $(dirname $D)/.. && pwd); w=\"$d/a b'c \\$x;\\\\ \xc3\xa9\"; h=\"$d/h o'me \\$HOME\"; "
                "mkdir -p \"$w\" \"$h/build\"; ln -s $r/runtime \"$h/runtime\"; ln -s $r/build/*.a \"$h/build/\"; "
                "cd \"$w\"; cp $r/examples/mlp.net \"n 'x.net\"; export DDPC_HOME=\"$h\"; "
                "$D \"n 'x.net\" --target cpu -o p; echo built=$?; ./p --help | head -1 | sed 's/^/run1: /'; "
                "test $(grep -c 'ddpc-build: ' p.cu) = 1 && echo one line; "
                "echo '// tuned by hand' >> p.cu; rm -f p; $D --rebuild p.cu; echo rebuilt=$?; "
                "./p --help | head -1 | sed 's/^/run2: /'; "
                "line=$(sed -n 's|^// ddpc-build: ||p' p.cu); rm -f p; sh -c \"$line\"; echo pasted=$?; "
                "./p --help | head -1 | sed 's/^/run3: /'",
                want);
}

/* An -o with the shell's metacharacters runs nothing (no file pwned
 * appears), and the program builds under that name; so does a --rebuild
 * of it after a hand edit. */
static void test_output_runs_nothing(void)
{
    static const char *const want[] = {"rc1=0", "rc2=0", "programs=2", "rebuilt=0", "rebuilt program", "nothing ran",
                                       NULL};
    script_says("r=$(cd $(dirname $D)/.. && pwd); a='p;echo INJECTED>pwned;#'; b='q$(touch pwned)`touch pwned`|x'; "
                "$D $r/examples/mlp.net --target cpu -o \"$a\"; echo rc1=$?; "
                "$D $r/examples/mlp.net --target cpu -o \"$b\"; echo rc2=$?; "
                "echo programs=$(ls -1 | grep -c -v '[.]cu$'); "
                "echo '// tuned by hand' >> \"$a.cu\"; rm -f \"$a\"; $D --rebuild \"$a.cu\"; echo rebuilt=$?; "
                "test -x \"$a\" && echo rebuilt program; test -e pwned || echo nothing ran",
                want);
}

/* The recorded line is the plain line where no word needs quoting; a hand
 * edit in a shell's quoting ("...", \ ) reads back as the shell reads it
 * (--verbose shows the words, requoted); what needs a shell is refused, as
 * is a current directory with a newline (no line could record it). */
static void test_build_line_quoting(void)
{
    static const char *const want[] = {
        "built=0", "quotes=0", "Wextra '-DDDPC_T=a b' '-DDDPC_U=c d' -DDDPC_V=e -I", "edited=0", "shell=2",
        "/e.cu: error: the '// ddpc-build:' line needs a shell to run, which ddpc does not use: a $ outside quotes "
        "(quote it)",
        "open=2", "a ' that nothing closes", "no_source=2", "the '// ddpc-build:' line names no source (F.cu)",
        "newline=2", "NOTHING_WRITTEN",
        "ddpc: error: -o p: its path ", "\\nline/p holds a line break, which the generated program's one-line "
        "'// ddpc-build:' comment cannot hold; name a directory without one",
        NULL};
    script_says("r=$(cd $(dirname $D)/.. && pwd); $D $r/examples/mlp.net --target cpu -o p; echo built=$?; "
                "echo quotes=$(grep '^// ddpc-build: ' p.cu | tr -cd \"'\\\"\\\\\\\\\" | wc -c); "
                "edit() { sed \"/^\\/\\/ ddpc-build: /s|$1|$2|\" p.cu > e.cu; }; "
                "edit -Wextra \"-Wextra \\\"-DDDPC_T=a b\\\" -DDDPC_U=c\\\\\\\\ d -DDDPC_\\\"V\\\"=e\"; "
                "$D --rebuild e.cu --verbose > v.txt 2>&1; echo edited=$?; grep -o \"Wextra.* -I\" v.txt; "
                "edit -Wextra '-Wextra $HOME'; $D --rebuild e.cu; echo shell=$?; "
                "edit -Wextra \"-Wextra 'x\"; $D --rebuild e.cu; echo open=$?; "
                "edit ' [^ ]*/p[.]cu ' ' '; $D --rebuild e.cu; echo no_source=$?; "
                "mkdir \"$(printf 'new\\nline')\"; cd new?line; $D $r/examples/mlp.net --target cpu -o p; "
                "echo newline=$?; ls | grep -q . || echo NOTHING_WRITTEN",
                want);
}

/* Several ddpc runs with one -o: every one succeeds (two linkers writing
 * one file in place made some fail), the .cu is byte for byte a single
 * run's, and the program runs: each file is written whole and renamed. */
static void test_concurrent_outputs(void)
{
    char *script;
    CU_ASSERT_FATAL(asprintf(&script,
        "net=%s/examples/mlp.net; $D $net --target cpu -o $d/p >/dev/null 2>&1 || echo FIRST_FAILED; cp p.cu ref.cu; "
        "for i in $(seq 12); do ($D $net --target cpu -o $d/p > log$i 2>&1; echo \"exit=$?\" >> log$i) & done; wait; "
        "cmp p.cu ref.cu && echo SAME_SOURCE; ./p --help | head -1; ls | grep -c tmp- | sed 's/^/leftovers=/'; "
        "cat log* | grep -c -v '^exit=0$' | sed 's/^/failed=/'",
        getenv("PWD") ? getenv("PWD") : ".") > 0);
    static const char *const want[] = {"SAME_SOURCE", "usage: p ", "leftovers=0", "failed=0", NULL};
    script_says(script, want);
    free(script);
}

/* With nvcc but no GPU visible, ddpc builds for the CPU and says so. */
static void test_default_target_without_gpu(void)
{
    if (!have_nvcc()) {
        fputs("\n  (skipped: no nvcc or no build/libddprt_cuda.a)", stderr);
        return;
    }
    char *script;
    CU_ASSERT_FATAL(asprintf(&script,
        "CUDA_VISIBLE_DEVICES= $D %s/examples/mlp.net -o p; echo \"rc=$?\"; grep '^// ddpc-build:' p.cu; ./p --help | head -1",
        getenv("PWD") ? getenv("PWD") : ".") > 0);
    static const char *const want[] = {
        "rc=0", "-x c++", "usage: p ",
        "ddpc: note: no GPU is visible here: building for the CPU (--target cuda builds for GPUs anyway)", NULL};
    script_says(script, want);
    free(script);
}

/* --emit cu saved under another name, elsewhere: --rebuild builds it beside itself. */
static void test_emit_then_rebuild(void)
{
    char *script;
    CU_ASSERT_FATAL(asprintf(&script,
        "mkdir -p a/b; $D %s/examples/mlp.net --target cpu --emit cu > a/b/mine.cu; "
        "$D --rebuild a/b/mine.cu; echo \"rc=$?\"; a/b/mine --help | head -1; "
        "$D --rebuild a/b/mine.cu.txt; echo \"suffix=$?\"",
        getenv("PWD") ? getenv("PWD") : ".") > 0);
    static const char *const want[] = {
        "rc=0", "usage: mine ", "suffix=2",
        "the source's name must end in .cu (F.cu builds the program F)", NULL};
    script_says(script, want);
    free(script);
}

/* ddpc installed as PREFIX/bin/ddpc finds PREFIX/include/ddpc and
 * PREFIX/lib/ddpc; copied alone, it says what it looked for; DDPC_HOME
 * names a prefix or the source tree. */
static void test_installed_ddpc(void)
{
    const char *root = getenv("PWD") ? getenv("PWD") : ".";
    char *script;
    CU_ASSERT_FATAL(asprintf(&script,
        "R=%s; mkdir -p pre/bin pre/include/ddpc pre/lib/ddpc alone; cp $D pre/bin/ddpc; cp $D alone/ddpc; "
        "cp $R/runtime/*.h pre/include/ddpc/; cp $R/build/*.a pre/lib/ddpc/; "
        "pre/bin/ddpc $R/examples/mnist.net --target cpu -o m; echo \"installed=$?\"; ./m --help | head -1; "
        "grep -c 'pre/include/ddpc' m.cu | sed 's/^/headers=/'; "
        "alone/ddpc $R/examples/mnist.net --target cpu -o m2; echo \"alone=$?\"; "
        "DDPC_HOME=$d/pre alone/ddpc $R/examples/mlp.net --target cpu -o m3; echo \"home_prefix=$?\"; "
        "DDPC_HOME=$R alone/ddpc $R/examples/mlp.net --target cpu -o m4; echo \"home_tree=$?\"",
        root) > 0);
    static const char *const want[] = {
        "installed=0", "usage: m ", "headers=1", "alone=2", "home_prefix=0", "home_tree=0",
        "cannot find the runtime beside", NULL};
    script_says(script, want);
    free(script);
}

/* The shell lines that set up, in $d, a CUDA toolkit's cuDNN, cuBLAS and NCCL
 * laid out as PyTorch's pip wheels lay them out (nvidia/cudnn, nvidia/cu13,
 * nvidia/nccl; versioned library names only), a python3 on PATH whose sys.path
 * holds them ($d/bin/python3), and an empty CUDA_HOME ($d/empty), so that the
 * wheels are all there is. $C is the toolkit. */
#define WHEELS                                                                                                       \
    "C=$(dirname $(dirname $(readlink -f $(command -v nvcc || echo /usr/local/cuda/bin/nvcc)))); "                   \
    "L=$C/lib64; test -d $L || L=$C/lib; S=$d/site/nvidia; "                                                         \
    "mkdir -p $S/cudnn/lib $S/cudnn/include $S/cu13/lib $S/cu13/include $S/nccl/lib $S/nccl/include bin empty; "     \
    "ln -s $L/libcudnn.so.[0-9]* $S/cudnn/lib/; ln -s $C/include/cudnn*.h $S/cudnn/include/; "                       \
    "ln -s $L/libcublas.so.[0-9]* $L/libcublasLt.so.[0-9]* $S/cu13/lib/; ln -s $C/include/cublas*.h $S/cu13/include/; " \
    "ln -s $L/libnccl.so.[0-9]* $S/nccl/lib/; ln -s $C/include/nccl*.h $S/nccl/include/; "                           \
    "printf '#!/bin/sh\\necho %%s/site\\n' $d > bin/python3; chmod +x bin/python3; "

/* Whether this machine can stand in for a user's: nvcc, the CUDA runtime,
 * and cuDNN and NCCL in the toolkit (which the fake wheels link to) but not
 * in the system's directories (which come before the wheels). */
static int have_toolkit_libs(void)
{
    if (!have_nvcc() ||
        test_run("C=$(dirname $(dirname $(readlink -f $(command -v nvcc || echo /usr/local/cuda/bin/nvcc)))); "
                 "test -f $C/include/cudnn.h && test -f $C/include/nccl.h && "
                 "! ls /usr/lib/*-linux-gnu/libcudnn.so* /usr/lib64/libcudnn.so* /usr/lib/libcudnn.so* "
                 "/usr/local/lib/libcudnn.so* >/dev/null 2>&1", NULL) != 0) {
        fputs("\n  (skipped: needs nvcc, build/libddprt_cuda.a, cuDNN and NCCL in the toolkit, none in /usr/lib)",
              stderr);
        return 0;
    }
    return 1;
}

/* Libraries only in pip wheels: the build links them by full path, the
 * program's DT_RUNPATH (not DT_RPATH) names their directories, so it finds
 * them without LD_LIBRARY_PATH; --doctor and --version name them. */
static void test_wheels_found(void)
{
    if (!have_toolkit_libs())
        return;
    char *script;
    CU_ASSERT_FATAL(asprintf(&script,
        WHEELS "export PATH=$d/bin:$PATH CUDA_HOME=$d/empty; "
        "$D %s/examples/mnist.net --target cuda -o m; echo \"rc=$?\"; grep '^// ddpc-build:' m.cu; "
        "readelf -d m | grep -E '\\((RUNPATH|RPATH)\\)'; "
        "env -u LD_LIBRARY_PATH ldd m | grep -E 'libcudnn|libnccl|libcublas'; "
        "$D --doctor; $D --version",
        getenv("PWD") ? getenv("PWD") : ".") > 0);
    static const char *const want[] = {
        "rc=0",
        "-Xlinker /tmp/", "/site/nvidia/cudnn/lib/libcudnn.so.", "/site/nvidia/cu13/lib/libcublas.so.",
        "/site/nvidia/nccl/lib/libnccl.so.", "/site/nvidia/cudnn/include",
        "(RUNPATH)            Library runpath: [/tmp/", "/site/nvidia/cudnn/lib:/tmp/",
        "/site/nvidia/cu13/lib:/tmp/", "/site/nvidia/nccl/lib]",
        "libcudnn.so.9 => /tmp/", /* resolved through the RUNPATH */
        "from a pip wheel of python3", "cuDNN:    9.", "NCCL:     2.", "cuBLAS:   1", "cuBLASLt: 1",
        "\ncuDNN 9.", NULL};
    script_says(script, want);
    free(script);
}

/* CUDNN_HOME wins over the toolkit that also has cuDNN; a CUDNN_HOME without
 * it is an error naming it (not a quiet fallback to another cuDNN). */
static void test_cudnn_home_overrides(void)
{
    if (!have_toolkit_libs())
        return;
    char *script;
    CU_ASSERT_FATAL(asprintf(&script,
        WHEELS "export CUDNN_HOME=$d/site/nvidia/cudnn; "
        "$D %s/examples/mnist.net --target cuda --emit cu | grep '^// ddpc-build:'; echo \"rc=$?\"; "
        "$D --doctor | grep cuDNN; "
        "CUDNN_HOME=$d/nope $D %s/examples/mnist.net --target cuda --emit cu; echo \"nope=$?\"",
        getenv("PWD") ? getenv("PWD") : ".", getenv("PWD") ? getenv("PWD") : ".") > 0);
    static const char *const want[] = {
        "rc=0", "/site/nvidia/cudnn/lib/libcudnn.so.", "-I/tmp/", "/site/nvidia/cudnn/include ",
        "(headers /tmp/", "; from CUDNN_HOME)", "nope=2",
        "ddpc: error: --target cuda needs cuDNN (cudnn.h and libcudnn.so*), which is in none of: CUDNN_HOME=/tmp/",
        "/nope (no cudnn.h, libcudnn.so*); set CUDNN_HOME to where it is installed", NULL};
    script_says(script, want);
    free(script);
}

/* cuDNN in a directory whose path has a space (CUDNN_HOME): refused with
 * status 2 before nvcc runs, naming it, where the library flags, words
 * joined by spaces, would have split it. */
static void test_cuda_path_with_a_space(void)
{
    if (!have_toolkit_libs())
        return;
    char *script;
    CU_ASSERT_FATAL(asprintf(&script,
        WHEELS "mv $S/cudnn \"$S/cu dnn\"; export CUDNN_HOME=\"$S/cu dnn\"; "
        "$D %s/examples/mnist.net --target cuda -o m; echo \"rc=$?\"; test -e m.cu || test -e m || echo NOTHING_WRITTEN",
        getenv("PWD") ? getenv("PWD") : ".") > 0);
    static const char *const want[] = {
        "ddpc: error: /tmp/", "/site/nvidia/cu dnn/include holds a space, which the program's build line cannot carry",
        "rc=2", "NOTHING_WRITTEN", NULL};
    script_says(script, want);
    free(script);
}

/* No cuDNN anywhere: exit status 2 before nvcc runs (no m.cu, no m), naming
 * each place looked at and what to do; --doctor says what fails. */
static void test_missing_cudnn(void)
{
    if (!have_toolkit_libs())
        return;
    char *script;
    CU_ASSERT_FATAL(asprintf(&script,
        WHEELS "rm -r $S/cudnn; export PATH=$d/bin:$PATH CUDA_HOME=$d/empty; "
        "$D %s/examples/mnist.net --target cuda -o m; echo \"rc=$?\"; test -e m.cu || test -e m || echo NOTHING_WRITTEN; "
        "$D --doctor | grep cuDNN; $D --version",
        getenv("PWD") ? getenv("PWD") : ".") > 0);
    static const char *const want[] = {
        "rc=2", "NOTHING_WRITTEN",
        "ddpc: error: --target cuda needs cuDNN (cudnn.h and libcudnn.so*), which is in none of: CUDA_HOME=/tmp/",
        "/empty (no cudnn.h, libcudnn.so*); the system's /usr/include",
        "python3's site-packages (no nvidia/*/ wheel holds it); set CUDNN_HOME to where it is installed, "
        "or pip install nvidia-cudnn-cu", "into the active python3, or use --target cpu",
        "cuDNN:    not found (set CUDNN_HOME", "): --target cuda will fail; looked in: CUDA_HOME=/tmp/",
        "cuDNN not found, cuBLAS 1", NULL};
    script_says(script, want);
    free(script);
}

/* --arch names a GPU: with --target cpu it is refused, exit 2, and nothing
 * written, where it would otherwise be dropped unsaid; without --target it
 * asks for the GPU build, here where no GPU is visible (a login node's
 * case), and --check takes it. */
static void test_arch_without_a_gpu_target(void)
{
    static const char *const refused[] = {
        "cpu=2 written=0\n",
        "ddpc: error: --arch sm_90 names a GPU to build for, and this run's target is the CPU (--target cpu): add "
        "--target cuda, or drop --arch",
        NULL};
    script_says("r=$(cd $(dirname $D)/.. && pwd); $D $r/examples/mlp.net --target cpu --arch sm_90 -o p 2>&1; "
                "echo cpu=$? written=$(ls | wc -l)",
                refused);
    if (!have_nvcc()) {
        fputs("\n  (the GPU build without --target skipped: no nvcc)", stderr);
        return;
    }
    static const char *const gpu[] = {"check=0\n", "cuda build: 1\n", NULL};
    script_says("r=$(cd $(dirname $D)/.. && pwd); $D $r/examples/mlp.net --check --arch sm_90; echo check=$?; "
                "CUDA_VISIBLE_DEVICES= $D $r/examples/mlp.net --emit cu --arch sm_90 | grep -c '^// ddpc-build: .*nvcc' "
                "| sed 's/^/cuda build: /'",
                gpu);
}

/* A GPU build under an mpirun of several processes (mpirun's variables,
 * which are all a build without MPI reads): --world-size 1 would make each
 * a run of its own, training alone, and is refused before the program looks
 * for a GPU; ranks the flags place otherwise meet through the store, so the
 * CPU build's refusal of them (its MPI needs mpirun's) is not this build's:
 * it gets as far as the data (--data names nothing). So does a world of one
 * under an mpirun of one. */
static void test_gpu_build_under_mpirun(void)
{
    if (!have_nvcc()) {
        fputs("\n  (skipped: no nvcc)", stderr);
        return;
    }
    static const char *const want[] = {
        "p: error: mpirun started 2 processes, but this one is a world of 1 (--world-size 1), a run of its own, "
        "training alone: leave that out (or mpirun -np 1)\none=2\n",
        "p: error: mpirun started 2 processes, but this one is a world of 1 (WORLD_SIZE=1), a run of its own, "
        "training alone: leave that out (or mpirun -np 1)\ntorchrun=2\n",
        "p: rank 0: error: nowhere: No such file or directory\nflagged=2\n",
        "\n0\np: error: nowhere: No such file or directory\nnp1=2\n", NULL};
    script_says("r=$(cd $(dirname $D)/.. && pwd); $D $r/examples/mlp.net --target cuda -o p > /dev/null || exit 9; "
                "export OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 CUDA_VISIBLE_DEVICES=; "
                "./p --world-size 1 --data nowhere 2>&1; echo one=$?; "
                "TORCHELASTIC_RUN_ID=x RANK=0 WORLD_SIZE=1 ./p --data nowhere 2>&1; echo torchrun=$?; "
                "./p --rank 0 --world-size 2 --init-method tcp://127.0.0.1:1 --data nowhere 2>&1; echo flagged=$?; "
                "OMPI_COMM_WORLD_SIZE=1 ./p --world-size 1 --data nowhere 2>&1 | grep -c 'a run of its own'; "
                "OMPI_COMM_WORLD_SIZE=1 ./p --world-size 1 --data nowhere 2>&1; echo np1=$?",
                want);
}

/* The architectures ddpc was built with (make's CUDA_ARCHS, in config.h), as
 * words "80 86 ...", for the shell; README's default is the Makefile's. */
#define ARCHS_OF_BUILD "$(sed -n 's/^#define DDPC_CUDA_ARCHS //p' build/config.h | tr -d ,)"

/* With no GPU visible: machine code for each architecture of make's
 * CUDA_ARCHS this nvcc builds, and PTX for the newest; --arch picks one.
 * README's --arch row names the Makefile's default list. */
static void test_default_archs(void)
{
    if (!have_nvcc()) {
        fputs("\n  (skipped: no nvcc or no build/libddprt_cuda.a)", stderr);
        return;
    }
    char *script;
    CU_ASSERT_FATAL(asprintf(&script,
        "W=%s; cd $W; N=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc); A=$($N --list-gpu-arch); newest=; "
        "line=$(CUDA_VISIBLE_DEVICES= $D examples/mnist.net --target cuda --emit cu | grep '^// ddpc-build:'); "
        "for a in " ARCHS_OF_BUILD "; do case \" $(echo $A) \" in *\" compute_$a \"*) newest=$a; "
        "  case \"$line\" in *\"arch=compute_$a,code=sm_$a \"*) ;; *) echo \"MISSING sm_$a\";; esac;; esac; done; "
        "case \"$line\" in *\"arch=compute_$newest,code=compute_$newest \"*) echo PTX_OF_NEWEST;; esac; "
        "$D examples/mnist.net --target cuda --arch sm_86 --emit cu | grep '^// ddpc-build:' | "
        "grep -o 'code=[a-z_0-9]*' | tr '\\n' ' '; echo END; "
        "default=$(sed -n 's/^CUDA_ARCHS *?= *//p' Makefile | sed 's/\\([0-9][0-9]*\\)/sm_\\1/g'); "
        "grep -q -- \"otherwise machine code for \\`$default\\`\" README.md && echo \"README: $default\"",
        getenv("PWD") ? getenv("PWD") : ".") > 0);
    static const char *const want[] = {"PTX_OF_NEWEST", "code=sm_86 code=compute_86 END", "README: sm_", NULL};
    script_says(script, want);
    free(script);
    /* and nothing is missing */
    char *cmd, *out = NULL;
    CU_ASSERT_FATAL(asprintf(&cmd,
        "N=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc); A=$($N --list-gpu-arch); "
        "line=$(CUDA_VISIBLE_DEVICES= %s examples/mnist.net --target cuda --emit cu | grep '^// ddpc-build:'); "
        "for a in " ARCHS_OF_BUILD "; do echo ARCH; case \" $(echo $A) \" in *\" compute_$a \"*) "
        "case \"$line\" in *\"arch=compute_$a,code=sm_$a \"*) ;; *) echo \"MISSING sm_$a\";; esac;; esac; done",
        test_ddpc()) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "ARCH"));
    CU_ASSERT_PTR_NULL(out && strstr(out, "MISSING"));
    if (out && strstr(out, "MISSING"))
        fprintf(stderr, "\n%s\n", out);
    free(out);
    free(cmd);
}

/* --arch for a GPU the runtime's kernels do not load on (one nvcc builds,
 * older than the oldest of make's CUDA_ARCHS) is refused, exit 2, naming the
 * list to build ddpc with; one nvcc cannot build (sm_999) is refused, exit
 * 2, naming those it can; the oldest is built, and a GPU newer than the
 * newest too (the newest's PTX). */
static void test_arch_the_runtime_does_not_load_on(void)
{
    if (!have_nvcc()) {
        fputs("\n  (skipped: no nvcc or no build/libddprt_cuda.a)", stderr);
        return;
    }
    char *cmd, *out = NULL;
    CU_ASSERT_FATAL(asprintf(&cmd,
        "archs=\"" ARCHS_OF_BUILD "\"; oldest=${archs%%%% *}; newest=${archs##* }; "
        "N=$(sed -n 's/^#define DDPC_NVCC \"\\(.*\\)\"$/\\1/p' build/config.h); "
        "older=$($N --list-gpu-arch | sed -n 's/^compute_//p' | awk -v o=$oldest '$1 < o' | sort -n | tail -1); "
        "[ -n \"$older\" ] || echo \"NO_OLDER: $N builds nothing older than sm_$oldest\"; "
        "%s examples/mnist.net --target cuda --arch sm_$older --emit cu 2>&1 > /dev/null; echo older=$?; "
        "%s examples/mnist.net --target cuda --arch sm_999 --emit cu 2>&1 > /dev/null; echo unknown=$?; "
        "echo \"want: make CUDA_ARCHS=\\\"$older $archs\\\"\"; "
        "for a in $oldest $((newest + 20)); do "
        "%s examples/mnist.net --target cuda --arch sm_$a --emit cu | grep -c \"code=sm_$a\"; done",
        test_ddpc(), test_ddpc(), test_ddpc()) > 0);
    test_run(cmd, &out);
    const char *want = out ? strstr(out, "want: ") : NULL;
    char line[200] = "";
    if (want)
        sscanf(want + 6, "%199[^\n]", line);
    if (out && strstr(out, "NO_OLDER")) { /* this nvcc leaves no older GPU to refuse */
        fprintf(stderr, "\n  (the older architecture skipped: %.80s)", strstr(out, "NO_OLDER"));
    } else {
        CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "the GPU runtime's kernels are built for "));
        CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "none of which loads on an sm_"));
        CU_ASSERT(line[0] && out && strstr(out, line) && strstr(out, line) < want); /* the list ddpc names */
        CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "older=2\n"));
    }
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "ddpc: error: --arch sm_999: nvcc cannot build it; it builds sm_ "
                                              "followed by one of: "));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "unknown=2\n"));
    CU_ASSERT_PTR_NOT_NULL(want && strstr(want, "\n1\n1\n"));
    if (!want || !strstr(want, "\n1\n1\n"))
        fprintf(stderr, "\n%s\n", out ? out : "");
    free(out);
    free(cmd);
}

/* The GPU runtime's kernels load wherever a program's own do: each object
 * of build/libddprt_cuda.a with GPU code carries the very codes (machine
 * code and PTX) of a program's build line with no GPU visible (the
 * Makefile's CUDA_ARCHS). Read by tests/build/fatbin_archs.py, itself first
 * checked against a kernel nvcc builds for two known codes. */
static void test_runtime_archs_are_the_programs(void)
{
    if (!have_nvcc()) {
        fputs("\n  (skipped: no nvcc or no build/libddprt_cuda.a)", stderr);
        return;
    }
    char *script;
    CU_ASSERT_FATAL(asprintf(&script,
        "W=%s; N=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc); "
        "echo '__global__ void k(float *x) { x[0] = 1; }' > k.cu; "
        "$N -c -o k.o k.cu -gencode arch=compute_86,code=sm_86 -gencode arch=compute_80,code=compute_80 && "
        "python3 $W/tests/build/fatbin_archs.py k.o",
        getenv("PWD") ? getenv("PWD") : ".") > 0);
    static const char *const want[] = {"k.o code=sm_86 code=compute_80", NULL};
    script_says(script, want);
    free(script);
    char *cmd, *out = NULL;
    CU_ASSERT_FATAL(asprintf(&cmd,
        "want=$(CUDA_VISIBLE_DEVICES= %s examples/mnist.net --target cuda --emit cu | grep '^// ddpc-build:' | "
        "grep -o 'code=[a-z_0-9]*' | tr '\\n' ' '); "
        "python3 tests/build/fatbin_archs.py build/libddprt_cuda.a | grep code= | while read -r name codes; do "
        "echo OBJECT; [ \"$codes \" = \"$want\" ] || echo \"MISMATCH $name: $codes; the program: $want\"; done",
        test_ddpc()) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "OBJECT"));
    CU_ASSERT_PTR_NULL(out && strstr(out, "MISMATCH"));
    if (!out || strstr(out, "MISMATCH") || !strstr(out, "OBJECT"))
        fprintf(stderr, "\n%s\n", out ? out : "");
    free(out);
    free(cmd);
}

/* MPI is linked exactly when the CUDA runtime library calls it: a runtime
 * built without MPI (here a stand-in archive) gives a line without it. */
static void test_mpi_follows_runtime(void)
{
    if (!have_nvcc()) {
        fputs("\n  (skipped: no nvcc or no build/libddprt_cuda.a)", stderr);
        return;
    }
    char *script;
    CU_ASSERT_FATAL(asprintf(&script,
        "R=%s; M=$(sed -n 's/^#define DDPC_MPI_LIBS \"\\(.*\\)\"$/\\1/p' $R/build/config.h); "
        "mkdir -p t/build u/build; ln -s $R/runtime t/runtime; ln -s $R/runtime u/runtime; "
        "echo 'int ddp_stand_in;' > a.c; cc -c a.c -o a.o; ar rcs t/build/libddprt_cuda.a a.o; "
        "echo 'int MPI_Init_thread(void); int f(void) { return MPI_Init_thread(); }' > b.c; cc -c b.c -o b.o; "
        "ar rcs u/build/libddprt_cuda.a a.o b.o; "
        "without=$(DDPC_HOME=$d/t $D $R/examples/mlp.net --target cuda --emit cu | grep '^// ddpc-build:'); "
        "with=$(DDPC_HOME=$d/u $D $R/examples/mlp.net --target cuda --emit cu | grep '^// ddpc-build:'); "
        "echo \"$without\" | grep -q -- '-lgomp -lz -lm$' && echo WITHOUT_MPI; "
        "if [ -z \"$M\" ]; then echo WITH_MPI; else echo \"$with\" | grep -qF -- \"-lm $M\" && echo WITH_MPI; fi",
        getenv("PWD") ? getenv("PWD") : ".") > 0);
    static const char *const want[] = {"WITHOUT_MPI", "WITH_MPI", NULL};
    script_says(script, want);
    free(script);
}

/* --help names every exit status. */
static void test_help_exit_statuses(void)
{
    static const char *const want[] = {"Exit status: 0 done; 1 the build failed", "2 bad usage", NULL};
    script_says("$D --help", want);
}

/* A build that fails keeps OUT.cu, to read, fix and --rebuild (here the
 * runtime's kernel.h is made to fail, through DDPC_HOME); its message shows
 * the command with OUT.cu and OUT, not the temporary names it ran with, and
 * says which temporary name the compiler's own messages give the source.
 * The program an earlier run built there (of mlp.net) goes, and ddpc says
 * so: it was not built from the OUT.cu now beside it. */
static void test_failed_build_keeps_source(void)
{
    static const char *const want[] = {"earlier=0", "status=1", "source kept", "no program",
                                       "ddpc: the source is m.cu (the compiler's messages call it m.tmp-",
                                       "its name while it built", "the command builds m from m.cu",
                                       "ddpc: removed the old program m, which was not built from this m.cu\n", NULL};
    script_says("r=$(cd $(dirname $D)/.. && pwd); mkdir -p home/runtime home/build; cp $r/runtime/*.h home/runtime/; "
                "echo '#error broken on purpose' >> home/runtime/kernel.h; ln -s $r/build/libddprt.a home/build/; "
                "$D $r/examples/mlp.net --target cpu -o m; test -x m; echo earlier=$?; "
                "DDPC_HOME=$PWD/home $D $r/examples/mnist.net --target cpu -o m > log 2>&1; echo status=$?; cat log; "
                "grep -A1 'the command was' log | tail -1 | grep -v tmp- | grep \" $PWD/m.cu .*-o $PWD/m \" "
                "> /dev/null && echo the command builds m from m.cu; "
                "grep -q 'ddpc-build:' m.cu && grep -q 'of mnist.net' m.cu && echo source kept; test -e m || echo no program; ls",
                want);
}

/* A source that cannot be written whole (a file size limit stands for a
 * full disk: the same failed write) is reported by the name the user gave,
 * OUT.cu, not by the temporary name it was written under, which is gone by
 * then; the OUT.cu of an earlier run is left as it was. */
static void test_failed_write_names_the_output(void)
{
    static const char *const want[] = {"status=1", "ddpc: error: cannot write 'p.cu': File too large\n",
                                       "no temporary name said", "leftovers=0", "old source kept", NULL};
    script_says("echo old > p.cu; (trap '' XFSZ; ulimit -f 8; $D $(dirname $D)/../examples/mnist.net --target cpu "
                "-o p > log 2>&1; echo status=$?); cat log; grep -q tmp- log || echo no temporary name said; "
                "ls | grep -c tmp- | sed 's/^/leftovers=/'; test \"$(cat p.cu)\" = old && echo old source kept",
                want);
}

/* An -o whose name fits the file system but whose temporary names (the
 * name plus .tmp-XXXXXX) do not: the message says it is the temporary name
 * that is too long, not that the directory cannot be written; exit 2 and
 * nothing left. (250 characters: its .cu is 253, under NAME_MAX's 255.) */
static void test_temporary_name_too_long(void)
{
    static const char *const want[] = {"status=2", "': the temporary name it is written under first (its name with "
                                       ".tmp-XXXXXX added) is too long: File name too long; choose a shorter name\n",
                                       "directory not blamed", "left=0", NULL};
    script_says("n=$(printf '%0250d' 0); $D $(dirname $D)/../examples/mnist.net --target cpu -o $n > log 2>&1; "
                "echo status=$?; cat log; grep -q 'write into' log || echo directory not blamed; "
                "ls | grep -c -v '^log$' | sed 's/^/left=/'",
                want);
}

/* DDP_DEBUG=1 blames a failing library call on its layer and .net line:
 * a hand edit gives linear1's product a negative batch. Without it the
 * message names no layer; and the mode changes no result. */
static void test_debug_names_the_layer(void)
{
    static const char *const want[] = {
        "linear1 forward, mlp.net:4: internal error: ddp_gemm(trans_a=0, trans_b=1, m=-128,", "debug=1",
        "plain=1 naming the layer 0", "same weights", NULL};
    script_says("r=$(cd $(dirname $D)/.. && pwd); $D $r/examples/mlp.net --target cpu -o p >/dev/null 2>&1; "
                "run() { ./p --max-steps 2 --quiet --export $1.safetensors 2>&1; }; "
                "run plain >/dev/null; DDP_DEBUG=1 run debug >/dev/null; cmp plain.safetensors debug.safetensors "
                "&& echo same weights; "
                "sed -i '0,/ddp_linear_forward_bias(ctx->ops, n,/s//ddp_linear_forward_bias(ctx->ops, -n,/' p.cu; "
                "$D --rebuild p.cu >/dev/null 2>&1; "
                "DDP_DEBUG=1 ./p --max-steps 1 --quiet 2>&1; echo debug=$?; "
                "./p --max-steps 1 --quiet > plain.txt 2>&1; echo plain=$? naming the layer $(grep -c linear1 plain.txt)",
                want);
}

void suite_build(void)
{
    static const TestCase cases[] = {
        {"every example builds for the CPU without warnings, and links no BLAS", test_cpu_programs_build},
        {"every example builds for CUDA without warnings", test_cuda_programs_build},
        {"--arch sm_90: the CUDA build line asks for sm_90 code and PTX, and no other", test_cuda_source_has_ptx_and_sm90},
        {"default architectures: make's CUDA_ARCHS (those nvcc builds) + PTX; README names the Makefile's",
         test_default_archs},
        {"the GPU runtime's kernels are built for a program's architectures", test_runtime_archs_are_the_programs},
        {"--arch for a GPU the runtime's kernels do not load on: refused", test_arch_the_runtime_does_not_load_on},
        {"--arch with --target cpu: refused, nothing written; without --target: the GPU build", test_arch_without_a_gpu_target},
        {"cuDNN, cuBLAS, NCCL from pip wheels: linked by path, in the RUNPATH, in --doctor", test_wheels_found},
        {"CUDNN_HOME wins over the toolkit; a CUDNN_HOME without cuDNN is an error", test_cudnn_home_overrides},
        {"no cuDNN anywhere: exit 2 before nvcc, naming where it looked", test_missing_cudnn},
        {"cuDNN under a path with a space: exit 2 before nvcc, named", test_cuda_path_with_a_space},
        {"the CUDA line links MPI exactly when the CUDA runtime calls it", test_mpi_follows_runtime},
        {"a GPU build under an mpirun of several: --world-size 1 refused, flags' ranks of several not",
         test_gpu_build_under_mpirun},
        {"--rebuild runs the recorded line; failures are reported", test_rebuild_after_edit},
        {"-o refuses the inputs (by inode), a directory, a FIFO, a path under a file", test_output_not_an_input},
        {"a file name with a newline refused; one with a quote builds, its net named with '_'", test_awkward_file_names},
        {"directories with a space, a quote, $ and ; build, rebuild, and their line pastes into a shell",
         test_awkward_directories},
        {"an -o with the shell's metacharacters runs nothing, and builds and rebuilds", test_output_runs_nothing},
        {"the build line: plain where it can be, a shell's quoting read back, a newline refused",
         test_build_line_quoting},
        {"concurrent runs with one -o leave a whole .cu and a program that runs", test_concurrent_outputs},
        {"nvcc but no GPU visible: builds for the CPU and says so", test_default_target_without_gpu},
        {"--emit cu saved elsewhere rebuilds beside itself", test_emit_then_rebuild},
        {"an installed or moved ddpc finds its runtime, or says where it looked", test_installed_ddpc},
        {"--help lists the exit statuses 0, 1 and 2", test_help_exit_statuses},
        {"a build that fails keeps OUT.cu", test_failed_build_keeps_source},
        {"a source that cannot be written whole: named as OUT.cu, not its temporary name", test_failed_write_names_the_output},
        {"an -o too long for its temporary name: said so, exit 2, nothing written", test_temporary_name_too_long},
        {"DDP_DEBUG=1 names a failing call's layer and .net line, and changes no result", test_debug_names_the_layer},
        {NULL, NULL},
    };
    test_add_suite("build [g++, nvcc]", cases);
}
