/*
 * fuzz_check.h: what the fuzz harnesses share. CHECK states what must hold
 * of the code under test; abort() makes libFuzzer keep the input that broke it.
 */
#ifndef FUZZ_CHECK_H
#define FUZZ_CHECK_H

#include <stdlib.h>  // abort

#define CHECK(cond)   \
    do {              \
        if (!(cond))  \
            abort();  \
    } while (0)

#endif
