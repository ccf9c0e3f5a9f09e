/* planned_net.c: see planned_net.h. */
#include "planned_net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool planned_net(PlannedNet *c, const char *src)
{
    memset(c, 0, sizeof *c);
    FILE *out = open_memstream(&c->messages, &c->messages_len);
    diag_init(&c->diag, "t.net", src, strlen(src), out);
    parse_net(&c->arena, &c->diag, src, strlen(src), &c->ast);
    bool ok = sema_net(&c->arena, &c->diag, &c->ast, "t.net", &c->net);
    diag_flush(&c->diag);
    fclose(out);
    if (ok)
        plan_net(&c->arena, &c->net, false, &c->plan); /* NCHW, as a CPU program's by default */
    else
        fprintf(stderr, "\n%s", c->messages);
    return ok;
}

void planned_net_release(PlannedNet *c)
{
    diag_free(&c->diag);
    arena_free(&c->arena);
    free(c->messages);
}
