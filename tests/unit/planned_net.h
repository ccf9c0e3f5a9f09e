/*
 * planned_net.h: a .net source run through ddpc's front end and planner, for
 * the compiler's tests that need a Net and its Plan (the memory planner's,
 * scaling on paper's).
 */
#ifndef PLANNED_NET_H
#define PLANNED_NET_H

#include <stdbool.h>
#include <stddef.h>

#include "ddpc.h"  // Arena, Diag, Ast, Net, Plan

typedef struct {
    Arena arena;
    Diag diag;
    Ast ast;
    Net net;
    Plan plan;
    char *messages;  /* what the front end said */
    size_t messages_len;
} PlannedNet;

/* Parses, checks and plans SRC (as "t.net"); false, with the front end's
 * messages on stderr, when it has errors. Release C either way. */
bool planned_net(PlannedNet *c, const char *src);
void planned_net_release(PlannedNet *c);

#endif
