/*
 * steps_digest_build.h: the shell words that build tests/layout/steps_digest.cpp
 * around a generated source as ddpc builds a CPU program, for the tests that
 * compare two builds of a net's steps bit for bit (test_layout.c: NCHW and
 * channels-last; test_lanes.c: vectorised and not).
 */
#ifndef STEPS_DIGEST_BUILD_H
#define STEPS_DIGEST_BUILD_H

/* A malloc'd shell command: compile the generated SOURCE into EXE with
 * DDPC_CPU_CXXFLAGS, then EXTRA (more flags, "" for none), against
 * build/libddprt.a and the libraries make gives ($CPU_LIBS, else config.h's
 * list). Both may hold shell words ($d/net.cu). */
char *steps_digest_build(const char *source, const char *extra, const char *exe);

/* The check of a command that ends `cmp A B && echo SAME`, printing A's
 * digest first: passes when it exited RC 0 with a digest and SAME;
 * otherwise fails WHAT, at the caller's FILE and LINE, and prints OUT. */
void steps_digest_assert_same(int rc, const char *out, const char *what, const char *file, unsigned line);

#endif
