/*
 * net.y: the grammar of the .net language.
 *
 * The language is a list of statements, each `[label:] word arguments`,
 * optionally followed by a `{ }` block of statements; statements end at a
 * newline or ';'. Layers, `net`, `loss` and the options inside `train { }` all
 * have this one shape, and what the words mean is sema.c's business: that
 * keeps this grammar small, conflict-free (%expect 0), and lets the messages
 * about misspelt or misplaced words name the word.
 *
 * Errors: a statement that cannot be read is replaced by an error statement
 * and parsing goes on at the next newline or ';', so one run reports every
 * broken line. Messages are written by yyreport_syntax_error below, in the
 * user's words ("unexpected '}'; expected a number"). An unclosed '{' is
 * closed by the scanner at the end of the file, with a message saying where
 * it was opened, so what came before it is still checked.
 *
 * Every semantic value is allocated in the compilation's arena (parse.c), so
 * values the parser discards while recovering are freed with the arena; no
 * %destructor is needed.
 */
%define api.pure full
%define api.prefix {net_}
%define api.location.type {Loc}
%define parse.error custom
%define parse.lac full
%define lr.default-reduction accepting
%locations
%expect 0
%param {void *scanner}
%parse-param {ParseState *st}

%code requires {
#include "ddpc.h"
}

%code {
#include "net.lex.h"
#include <string.h>

static Stmt *new_stmt(ParseState *st, const char *label, Loc label_loc, const char *word, Loc word_loc);
static Stmt *new_error_stmt(ParseState *st, Loc loc);
static Arg *new_arg(ParseState *st, const char *key, Loc key_loc, Value *val, Loc loc);
static Arg *reverse_args(Arg *a);
static Value *items_in_order(ParseState *st, Value *v);
static Stmt *reverse_stmts(Stmt *s);
static Value *new_arrow(ParseState *st, Value *in, Value *out, Loc loc);
static Value *new_word(ParseState *st, const char *text, Loc loc);
static Value *new_list(ParseState *st, Value *first, Loc loc);
static void net_error(Loc *loc, void *scanner, ParseState *st, const char *msg);
}

%union {
    Value *val;
    const char *text;
    Arg *arg;
    Stmt *stmt;
}

%token NEWLINE "newline"
%token ARROW "'->'"
%token LBRACE "'{'" RBRACE "'}'" EQUALS "'='"
%token <val> INT "integer" FLOAT "number" SIZE "size" DIMS "shape"
%token <text> NAME "name"
%token <text> BAD_CHAR "invalid character"

%type <stmt> statements statement head
%type <arg> arguments argument
%type <val> value values

%%

// file = statements
file
    : statements                      { st->result = reverse_stmts($1); }
    ;

// statements = statement? ((NEWLINE | ';') statement?)*
// The list is built newest first (a 10,000-line net stays linear) and put in
// order once complete, by reverse_stmts.
// A statement that cannot be read becomes an error statement. The error rule
// sits on `statements`, not on `statement`, so that recovery never pops past
// the statements already read, wherever the parser notices the mistake.
// Recovery ends with the error rule's reduction, so it says yyerrok there:
// bison would otherwise stay quiet until 3 more tokens were shifted, and
// drop the message of the next line when it is broken too. The rule is
// reduced once the tokens up to the statement's end have been discarded,
// and only on a lookahead that LAC has checked will be shifted next (the
// newline or ';', a '}' or the end of the file), so the token after
// yyerrok is always consumed and recovery cannot loop.
statements
    : %empty                          { $$ = NULL; }
    | statement                       { $$ = $1; }
    | statements end                  { $$ = $1; }
    | statements end statement        { $$ = $3; $3->next = $1; }
    | statements error                { $$ = new_error_stmt(st, @2); $$->next = $1; yyerrok; }
    ;

end : NEWLINE | ';' ;

// statement = head argument* ('{' statements '}')?
statement
    : head arguments                  { $$ = $1; $$->args = reverse_args($2); $$->loc = @$; }
    | head arguments LBRACE statements RBRACE
                                      { $$ = $1; $$->args = reverse_args($2); $$->loc = @1;
                                        $$->loc.last_line = @2.last_line; $$->loc.last_column = @2.last_column;
                                        $$->has_block = true; $$->open_loc = @3; $$->body = reverse_stmts($4);
                                        $$->unclosed = st->closed_at_eof; }
    ;

// head = (NAME ':')? NAME
head
    : NAME                            { $$ = new_stmt(st, NULL, @1, $1, @1); }
    | NAME ':' NAME                   { $$ = new_stmt(st, $1, @1, $3, @3); }
    ;

// argument = value | NAME '=' values
// Arguments, and the values of a list, are built newest first and put in
// order once complete, as statements are: a line of 100,000 stays linear.
arguments
    : %empty                          { $$ = NULL; }
    | arguments argument              { $$ = $2; $$->next = $1; }
    ;

argument
    : value                           { $$ = new_arg(st, NULL, @1, $1, @1); }
    | NAME EQUALS values              { $$ = new_arg(st, $1, @1, items_in_order(st, $3), @$); }
    ;

// values = value (',' value)*
values
    : value                           { $$ = $1; }
    | values ',' value                { $$ = $1->kind == VAL_LIST ? $1 : new_list(st, $1, @1);
                                        $3->next = $$->items; $$->items = $3;
                                        $$->loc.last_line = @3.last_line; $$->loc.last_column = @3.last_column; }
    ;

// value = INT ('->' INT)? | FLOAT | SIZE | DIMS | NAME
value
    : INT                             { $$ = $1; }
    | INT ARROW INT                   { $$ = new_arrow(st, $1, $3, @$); }
    | FLOAT                           { $$ = $1; }
    | SIZE                            { $$ = $1; }
    | DIMS                            { $$ = $1; }
    | NAME                            { $$ = new_word(st, $1, @1); }
    ;

%%

static Stmt *new_stmt(ParseState *st, const char *label, Loc label_loc, const char *word, Loc word_loc)
{
    Stmt *s = arena_alloc(st->arena, sizeof *s);
    s->label = label;
    s->label_loc = label_loc;
    s->word = word;
    s->word_loc = word_loc;
    s->loc = word_loc;
    return s;
}

static Stmt *new_error_stmt(ParseState *st, Loc loc)
{
    Stmt *s = new_stmt(st, NULL, loc, "", loc);
    s->is_error = true;
    return s;
}

static Arg *new_arg(ParseState *st, const char *key, Loc key_loc, Value *val, Loc loc)
{
    Arg *a = arena_alloc(st->arena, sizeof *a);
    a->key = key;
    a->key_loc = key_loc;
    a->val = val;
    a->loc = loc;
    return a;
}

static Arg *reverse_args(Arg *a)
{
    Arg *done = NULL;
    while (a) {
        Arg *next = a->next;
        a->next = done;
        done = a;
        a = next;
    }
    return done;
}

/* V with a list's items put in order (values builds them newest first), and
 * its text as written, less blanks ("5,5"), for messages that quote it. The
 * text is made here, once the list is complete, so a long list stays linear. */
static Value *items_in_order(ParseState *st, Value *v)
{
    if (v->kind != VAL_LIST)
        return v;
    Value *done = NULL, *item = v->items;
    size_t len = 0;
    while (item) {
        Value *next = item->next;
        item->next = done;
        done = item;
        len += strlen(item->text) + 1;
        item = next;
    }
    v->items = done;
    char *text = arena_alloc(st->arena, len), *p = text;
    for (item = done; item; item = item->next) {
        size_t n = strlen(item->text);
        memcpy(p, item->text, n);
        p[n] = item->next ? ',' : '\0';
        p += n + 1;
    }
    v->text = text;
    return v;
}

static Stmt *reverse_stmts(Stmt *s)
{
    Stmt *done = NULL;
    while (s) {
        Stmt *next = s->next;
        s->next = done;
        done = s;
        s = next;
    }
    return done;
}

static Value *new_arrow(ParseState *st, Value *in, Value *out, Loc loc)
{
    Value *v = arena_alloc(st->arena, sizeof *v);
    v->kind = VAL_ARROW;
    v->loc = loc;
    v->text = arena_printf(st->arena, "%s->%s", in->text, out->text);
    v->ndims = 2;
    v->dims[0] = in->i;
    v->dims[1] = out->i;
    v->overflow = in->overflow || out->overflow;
    return v;
}

static Value *new_word(ParseState *st, const char *text, Loc loc)
{
    Value *v = arena_alloc(st->arena, sizeof *v);
    v->kind = VAL_WORD;
    v->loc = loc;
    v->text = text;
    return v;
}

static Value *new_list(ParseState *st, Value *first, Loc loc)
{
    Value *v = arena_alloc(st->arena, sizeof *v);
    v->kind = VAL_LIST;
    v->loc = loc;
    v->items = first;
    v->text = ""; /* items_in_order writes it */
    return v;
}

/* How a token is named in a message: its text where that helps. */
/* The lookahead's text is not reachable from the parser context, but it is
 * the token the scanner produced last, and the scanner keeps its text. */
static const char *describe_token(ParseState *st, yysymbol_kind_t kind)
{
    switch (kind) {
    case YYSYMBOL_NAME:
        return arena_printf(st->arena, "name '%s'", diag_quote(st->arena, st->last_text));
    case YYSYMBOL_INT:
    case YYSYMBOL_FLOAT:
    case YYSYMBOL_SIZE:
    case YYSYMBOL_DIMS:
        return arena_printf(st->arena, "%s '%s'", yysymbol_name(kind), diag_quote(st->arena, st->last_text));
    case YYSYMBOL_BAD_CHAR: {
        unsigned char c = (unsigned char)st->last_text[0];
        if (c >= 0x80)
            return "non-ASCII text";
        if (c >= 32 && c < 127)
            return arena_printf(st->arena, "character '%c'", c);
        return arena_printf(st->arena, "byte 0x%02x", c);
    }
    case YYSYMBOL_YYEOF:
        return "end of file";
    default:
        return yysymbol_name(kind);
    }
}

static int yyreport_syntax_error(const yypcontext_t *ctx, void *scanner, ParseState *st)
{
    (void)scanner;
    yysymbol_kind_t tok = yypcontext_token(ctx);
    Loc loc = *yypcontext_location(ctx);
    if (tok == YYSYMBOL_YYUNDEF) /* the scanner's own error, already reported */
        return 0;
    const char *found = describe_token(st, tok);
    if (tok == YYSYMBOL_BAD_CHAR) {
        diag_at(st->diag, SEV_ERROR, loc, "unexpected %s", found);
        return 0;
    }
    if (tok == YYSYMBOL_RBRACE && st->unmatched_close) {
        diag_at(st->diag, SEV_ERROR, loc, "unexpected '}' with no '{' to close");
        return 0;
    }
    if (tok == YYSYMBOL_EQUALS) {
        diag_at(st->diag, SEV_ERROR, loc, "unexpected '='; options are written name=value, as in lr=0.1");
        return 0;
    }
    enum { MAX_EXPECTED = 5 };
    yysymbol_kind_t expected[MAX_EXPECTED];
    int n = yypcontext_expected_tokens(ctx, expected, MAX_EXPECTED);
    char list[256] = "";
    for (int i = 0; i < n; i++) {
        const char *name = yysymbol_name(expected[i]);
        const char *article = name[0] == '\'' ? "" : strchr("aeiou", name[0]) ? "an " : "a ";
        size_t used = strlen(list);
        snprintf(list + used, sizeof list - used, "%s%s%s", i == 0 ? "" : i == n - 1 ? " or " : ", ", article, name);
    }
    if (n > 0)
        diag_at(st->diag, SEV_ERROR, loc, "unexpected %s; expected %s", found, list);
    else
        diag_at(st->diag, SEV_ERROR, loc, "unexpected %s", found);
    return 0;
}

/* Called by bison only for "memory exhausted": nesting beyond its stack. */
static void net_error(Loc *loc, void *scanner, ParseState *st, const char *msg)
{
    (void)scanner;
    diag_at(st->diag, SEV_ERROR, *loc, "%s: the file nests too deeply to read", msg);
}
