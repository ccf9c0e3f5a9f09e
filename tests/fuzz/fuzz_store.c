/*
 * fuzz_store.c: libFuzzer harness for the store's wire parser,
 * ddp_store_parse (runtime/store_wire.c), the one function between a socket open
 * to anyone and the server's memory.
 *
 * The input is read as the server reads a connection: messages parsed one
 * after another until one is malformed or incomplete. Beyond "no crash, no
 * sanitizer report" it checks what the server relies on: a message never
 * claims more bytes than it was given, its key and value lie inside it and
 * within the limits, every prefix of a good message asks for more rather
 * than failing (so a slow peer is never dropped for being slow), and
 * encoding what was parsed gives back the same bytes. Built with ASan and
 * UBSan:
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
 *         -std=c11 -D_GNU_SOURCE -Iruntime -o build/fuzz_store \
 *         tests/fuzz/fuzz_store.c runtime/store_wire.c runtime/status.c
 *   mkdir -p build/fuzz-store-corpus && build/fuzz_store -max_total_time=600 build/fuzz-store-corpus
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store_wire.h"  // ddp_store_parse, ddp_store_encode
#include "fuzz_check.h"  // CHECK

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static unsigned char copy[DDP_STORE_HEADER + DDP_STORE_MAX_KEY + DDP_STORE_MAX_VALUE];
    size_t off = 0;
    for (int first = 1; off <= size; first = 0) {
        DdpStoreMessage m;
        long n = ddp_store_parse(data + off, size - off, &m);
        CHECK(n >= -1 && n <= (long)(size - off));
        if (n <= 0)
            break;
        const unsigned char *msg = data + off;
        CHECK(n >= DDP_STORE_HEADER);
        CHECK(m.key_len <= DDP_STORE_MAX_KEY && m.value_len <= DDP_STORE_MAX_VALUE);
        CHECK((const unsigned char *)m.key == msg + DDP_STORE_HEADER);
        CHECK(m.value == msg + DDP_STORE_HEADER + m.key_len);
        CHECK((size_t)n == DDP_STORE_HEADER + m.key_len + m.value_len);
        if (first) {
            /* Every proper prefix wants more; none is refused. */
            DdpStoreMessage p;
            for (long len = 0; len < n; len++)
                CHECK(ddp_store_parse(msg, (size_t)len, &p) == 0);
        }
        /* Encoding it again gives the same bytes. */
        size_t e = ddp_store_encode(copy, sizeof copy, m.type, m.key, m.key_len, m.value, m.value_len);
        CHECK(e == (size_t)n && memcmp(copy, msg, e) == 0);
        off += (size_t)n;
    }
    return 0;
}
