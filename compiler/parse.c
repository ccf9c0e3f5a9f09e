/*
 * parse.c: runs the flex scanner and bison parser (grammar/) over a buffer.
 *
 * The buffer may hold anything, NUL bytes included: flex scans it by length,
 * never as a C string. Both scanner and parser are reentrant and share only
 * the ParseState made here, so two parses never meet.
 */
#include "ddpc.h"

#include <stdlib.h>

#include "net.tab.h"  // net_parse
#include "net.lex.h"  // net_lex_init_extra, net__scan_bytes

bool parse_net(Arena *a, Diag *d, const char *src, size_t len, Ast *ast)
{
    ParseState *st = arena_alloc(a, sizeof *st);
    st->arena = a;
    st->diag = d;
    st->line = 1;
    st->column = 1;

    if (len > 1u << 30) { /* flex takes an int length; no real net is near this */
        diag_file(d, SEV_ERROR, "file too large to be a net (%zu bytes)", len);
        ast->stmts = NULL;
        ast->syntax_errors = 1;
        return false;
    }
    int errors_before = d->errors;
    yyscan_t scanner;
    if (net_lex_init_extra(st, &scanner) != 0) {
        diag_file(d, SEV_ERROR, "internal error: cannot start the scanner");
        return false;
    }
    YY_BUFFER_STATE buf = net__scan_bytes(src, (int)len, scanner);
    int rc = net_parse(scanner, st);
    net__delete_buffer(buf, scanner);
    net_lex_destroy(scanner);

    ast->stmts = st->result;
    ast->syntax_errors = d->errors - errors_before;
    if (rc != 0 && ast->syntax_errors == 0) {
        diag_file(d, SEV_ERROR, "internal error: the parser stopped without saying why");
        ast->syntax_errors = 1;
    }
    return ast->syntax_errors == 0;
}
