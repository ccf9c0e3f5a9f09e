/*
 * fuzz_parse.c: libFuzzer harness for the front end (jq's tests/jq_fuzz_parse.c habit).
 *
 * Every input goes through the scanner, the parser and sema, exactly as
 * `ddpc --check` runs them, messages formatted and quoted into /dev/null so
 * that the quoting of hostile lines is fuzzed too. Built with
 * ASan and UBSan by `make fuzz`; run it seeded with the examples and the
 * golden files:
 *
 *   make fuzz && mkdir -p build/fuzz-corpus &&
 *   build/fuzz_parse -max_total_time=600 -max_len=8192 build/fuzz-corpus examples tests/golden/bad tests/golden/good
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ddpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *sink;
    if (!sink)
        sink = fopen("/dev/null", "w");
    Arena arena = {0};
    Diag diag;
    diag_init(&diag, "fuzz.net", (const char *)data, size, sink);
    Ast ast;
    Net net;
    parse_net(&arena, &diag, (const char *)data, size, &ast);
    sema_net(&arena, &diag, &ast, "fuzz.net", &net);
    diag_flush(&diag);
    diag_free(&diag);
    arena_free(&arena);
    return 0;
}
