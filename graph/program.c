/* The program language: a hand-written lexer, a recursive-descent parser
 * with binary precedence climbing over a table (after Lua's lparser.c),
 * and a translator that builds the graph JSON as it parses, in one pass.
 *
 * Every value the translation names is a symbol; the JSON holds
 * placeholders for them ("\x01" and the symbol's number) and the names are
 * chosen only at the end, when all are known: inputs and top-level
 * bindings keep theirs, a name reused by a sibling block is renamed, and
 * generated ids ("_LINE_COL" of the token that made them) avoid all
 * others.  The JSON is then written out (tl_program_compile's layout) and
 * loaded by the graph loader, which checks everything the translator did
 * not; its complaints about a node are placed at that node's token. */
#define _POSIX_C_SOURCE 200809L
#include "program.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/text.h"

/* Nesting of expressions and blocks: deep enough for any real program,
 * shallow enough for the C stack and for the loader's JSON depth limit. */
#define MAX_NEST 200
#define MAX_NAME 255
#define MAX_VALUES 256 /* values of a tuple, as the loader's id lists */

/* ---------- tokens ---------- */

typedef enum tk {
    T_EOF, T_NEWLINE, T_NAME, T_NUMBER, T_STRING,
    T_INPUT, T_OUTPUT, T_IF, T_THEN, T_ELSE, T_TRUE, T_FALSE, T_NAN, T_INF, /* reserved */
    T_LPAREN, T_RPAREN, T_LBRACK, T_RBRACK, T_LBRACE, T_RBRACE,
    T_COMMA, T_SEMI, T_COLON, T_ASSIGN, T_ARROW,
    T_PLUS, T_MINUS, T_STAR, T_SLASH, T_AT, T_POW,
    T_EQ, T_NE, T_LT, T_LE, T_GT, T_GE,
    T_NKINDS
} tk;

static const char *const spelling[T_NKINDS] = {
    "the end of the program", "the end of the line", "a name", "a number", "a string",
    "input", "output", "if", "then", "else", "true", "false", "nan", "inf",
    "(", ")", "[", "]", "{", "}", ",", ";", ":", "=", "->",
    "+", "-", "*", "/", "@", "**", "==", "!=", "<", "<=", ">", ">=",
};

#define FIRST_WORD T_INPUT
#define LAST_WORD T_INF
#define FIRST_PUNCT T_LPAREN

typedef struct token {
    tk kind;
    int line, col;
    size_t off, len; /* its bytes in the source */
    double num;      /* T_NUMBER */
    int match;       /* brackets: the index of the matching one */
} token;

/* ---------- the translator's state ---------- */

typedef enum skind { S_INPUT, S_TOP, S_INNER, S_GEN } skind;

/* A named value of the translation: an input, a node's id, a constant or a
 * block parameter. */
typedef struct sym {
    skind kind;
    const char *want; /* the program's name for it (not NUL-terminated); NULL: generated */
    int wlen;
    int tok;     /* the token that made it, for messages and generated names */
    int part;    /* generated ids of a node with several: 1, 2, ...; else 0 */
    char *final; /* its name in the graph, chosen at the end */
} sym;

/* A name visible now, in a chained hash table (names cannot shadow, so a
 * name has at most one visible binding). */
typedef struct bind {
    const char *name;
    int len;
    int sym;
    int depth; /* of the scope that bound it */
    int tok;   /* where it was bound */
    int next;  /* in its hash chain; -1 ends it */
} bind;

/* What an expression gives: a symbol, a weak scalar, or several values. */
typedef enum vkind { V_REF, V_NUM, V_TUPLE } vkind;

typedef struct val {
    vkind kind;
    int sym;           /* V_REF */
    bool fresh;        /* V_REF: made by this expression and not named yet */
    double num;        /* V_NUM */
    int n;             /* V_TUPLE */
    struct val *items; /* V_TUPLE: n single values */
    int at;            /* the token the expression starts at */
} val;

typedef struct P {
    const char *src;
    size_t n;
    const char *path;
    tl_status *st;
    tl_srcpos *pos;
    token *t;
    int nt, tcap, i; /* tokens; i: the next one */
    sym *s;
    int ns, scap;
    bind *b;
    int nb, bcap, *heads, hcap;
    int depth; /* of the current scope: 0 is the top */
    int scope_start[MAX_NEST + 2]; /* per depth: the first binding made in that scope */
    int nest;  /* recursion depth of the parser */
    bool declared;     /* the program has input statements */
    int *inputs;       /* input syms, in order */
    int *input_first;  /* implicit inputs: the token of the first use */
    int ninputs, icap;
    cJSON *input_decls; /* declared inputs: their JSON, in order */
    int *outputs, noutputs, ocap; /* the names of output statements: tokens */
    cJSON *root, *consts, *cur; /* cur: the node list of the block being translated */
    struct chunk *arena;        /* the items of tuples, freed with the translator */
    bool oom;
} P;

struct chunk {
    struct chunk *next;
    val items[];
};

/* ---------- errors ---------- */

static bool fail_at(P *p, int k, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static bool fail_at(P *p, int k, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const token *t = &p->t[k < p->nt ? k : p->nt - 1];
    p->pos->line = t->line;
    p->pos->col = t->col;
    tl_fail(p->st, TL_EINPUT, "%s:%d:%d: %s", p->path, t->line, t->col, msg);
    return false;
}

/* Errors found while lexing, before the token exists. */
static bool fail_here(P *p, int line, int col, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static bool fail_here(P *p, int line, int col, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->pos->line = line;
    p->pos->col = col;
    tl_fail(p->st, TL_EINPUT, "%s:%d:%d: %s", p->path, line, col, msg);
    return false;
}

static bool out_of_memory(P *p)
{
    p->pos->line = p->pos->col = 0;
    tl_fail(p->st, TL_ERUNTIME, "%s: out of memory translating the program", p->path);
    return false;
}

static bool grow(P *p, void **arr, int *cap, int need, size_t es)
{
    if (need <= *cap)
        return true;
    int c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *q = realloc(*arr, (size_t)c * es);
    if (!q)
        return p->oom = true, false;
    *arr = q;
    *cap = c;
    return true;
}

/* ---------- lexer ---------- */

/* Length of the UTF-8 character at s (at most n bytes), 0 when invalid. */
static size_t utf8_char(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : (c & 0xF0) == 0xE0 ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (!len || len > n)
        return 0;
    for (size_t k = 1; k < len; k++)
        if ((s[k] & 0xC0) != 0x80)
            return 0;
    unsigned c1 = s[len > 1 ? 1 : 0];
    if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 >= 0xA0) || (c == 0xF0 && c1 < 0x90) ||
        (c == 0xF4 && c1 >= 0x90))
        return 0;
    return len;
}

typedef struct lexer {
    size_t i;
    int line, col;
    int *open; /* unclosed brackets: token indexes */
    int nopen, ocap;
} lexer;

static bool is_name_start(int c) { return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
static bool is_digit(int c) { return c >= '0' && c <= '9'; }
static bool is_name_char(int c) { return is_name_start(c) || is_digit(c); }

/* One character of a comment or string: checks it, moves past it. */
static bool text_char(P *p, lexer *L, const char *what)
{
    const unsigned char *s = (const unsigned char *)p->src;
    if (s[L->i] < 0x20 || s[L->i] == 0x7f)
        return fail_here(p, L->line, L->col, "%s (byte 0x%02x) in %s", s[L->i] ? "a control character" : "a NUL byte",
                         s[L->i], what);
    size_t len = utf8_char(s + L->i, p->n - L->i);
    if (!len)
        return fail_here(p, L->line, L->col, "invalid UTF-8 in %s", what);
    L->i += len;
    L->col++;
    return true;
}

static token *new_token(P *p, tk kind, const lexer *L, size_t off)
{
    if (!grow(p, (void **)&p->t, &p->tcap, p->nt + 1, sizeof(token)))
        return NULL;
    token *t = &p->t[p->nt++];
    *t = (token){kind, L->line, L->col, off, L->i - off, 0, -1};
    return t;
}

/* After these a newline does not end the statement. */
static bool continues(const P *p)
{
    if (!p->nt)
        return true;
    tk k = p->t[p->nt - 1].kind;
    return k == T_NEWLINE || k == T_SEMI || k == T_LBRACE || k == T_LPAREN || k == T_LBRACK ||
           k == T_COMMA || k == T_COLON || k == T_ASSIGN || k == T_ARROW || k == T_THEN || k == T_ELSE ||
           (k >= T_PLUS && k <= T_GE);
}

static bool lex_number(P *p, lexer *L)
{
    const char *s = p->src;
    size_t start = L->i, end = start + tl_scan_number(s + start, p->n - start), i = end;
    while (i < p->n && (is_name_char(s[i]) || s[i] == '.'))
        i++;
    if (end == start || i != end)
        return fail_here(p, L->line, L->col, "malformed number '%.*s' (numbers are written as in JSON, "
                         "or as 1. and .5)", (int)(i - start > 40 ? 40 : i - start), s + start);
    char buf[400];
    if (end - start >= sizeof buf)
        return fail_here(p, L->line, L->col, "number longer than %d characters", (int)sizeof buf - 1);
    memcpy(buf, s + start, end - start);
    buf[end - start] = '\0';
    errno = 0;
    double v = strtod(buf, NULL);
    if (isinf(v))
        return fail_here(p, L->line, L->col, "%s is too large for a double (write inf)", buf);
    L->i = end;
    token *t = new_token(p, T_NUMBER, L, start);
    if (!t)
        return false;
    t->num = v;
    L->col += (int)(end - start);
    return true;
}

static bool lex_name(P *p, lexer *L)
{
    size_t start = L->i;
    while (L->i < p->n && is_name_char(p->src[L->i]))
        L->i++;
    size_t len = L->i - start;
    if (len > MAX_NAME)
        return fail_here(p, L->line, L->col, "name longer than %d characters", MAX_NAME);
    tk kind = T_NAME;
    for (int k = FIRST_WORD; k <= LAST_WORD; k++)
        if (strlen(spelling[k]) == len && !memcmp(spelling[k], p->src + start, len))
            kind = (tk)k;
    if ((kind == T_THEN || kind == T_ELSE) && p->nt && p->t[p->nt - 1].kind == T_NEWLINE)
        p->nt--; /* a newline before then or else does not end anything */
    token *t = new_token(p, kind, L, start);
    L->col += (int)len;
    return t != NULL;
}

static bool lex_string(P *p, lexer *L)
{
    size_t start = L->i;
    int line = L->line, col = L->col;
    L->i++;
    L->col++;
    while (L->i < p->n && p->src[L->i] != '"') {
        if (p->src[L->i] == '\n')
            break;
        if (p->src[L->i] == '\\') {
            char e = L->i + 1 < p->n ? p->src[L->i + 1] : '\0';
            if (e != '"' && e != '\\')
                return fail_here(p, L->line, L->col, "unknown escape in a string (only \\\" and \\\\)");
            L->i++;
            L->col++;
        }
        if (!text_char(p, L, "a string"))
            return false;
    }
    if (L->i >= p->n || p->src[L->i] != '"')
        return fail_here(p, line, col, "unterminated string");
    L->i++;
    token *t = new_token(p, T_STRING, L, start);
    if (!t)
        return false;
    t->line = line;
    t->col = col;
    L->col++;
    return true;
}

static bool lex_open(P *p, lexer *L)
{
    if (L->nopen >= MAX_NEST)
        return fail_at(p, p->nt - 1, "brackets nested more than %d deep", MAX_NEST);
    if (!grow(p, (void **)&L->open, &L->ocap, L->nopen + 1, sizeof(int)))
        return false;
    L->open[L->nopen++] = p->nt - 1;
    return true;
}

/* A closing bracket must close the innermost open one. */
static bool lex_close(P *p, lexer *L, tk open)
{
    int k = p->nt - 1;
    if (L->nopen && p->t[L->open[L->nopen - 1]].kind == open) {
        int o = L->open[--L->nopen];
        p->t[o].match = k;
        p->t[k].match = o;
        return true;
    }
    for (int j = 0; j < L->nopen; j++)
        if (p->t[L->open[j]].kind == open)
            return fail_at(p, L->open[L->nopen - 1], "unclosed '%s'", spelling[p->t[L->open[L->nopen - 1]].kind]);
    return fail_at(p, k, "unmatched '%s'", spelling[p->t[k].kind]);
}

static bool lex_punct(P *p, lexer *L)
{
    static const char two[][3] = {"->", "**", "==", "!=", "<=", ">="};
    static const tk two_kind[] = {T_ARROW, T_POW, T_EQ, T_NE, T_LE, T_GE};
    static const char one[] = "()[]{},;:=+-*/@<>";
    static const tk one_kind[] = {T_LPAREN, T_RPAREN, T_LBRACK, T_RBRACK, T_LBRACE, T_RBRACE, T_COMMA,
                                  T_SEMI, T_COLON, T_ASSIGN, T_PLUS, T_MINUS, T_STAR, T_SLASH, T_AT,
                                  T_LT, T_GT};
    const char *s = p->src + L->i;
    size_t start = L->i;
    tk kind = T_EOF;
    for (size_t k = 0; k < sizeof two / sizeof two[0] && kind == T_EOF; k++)
        if (L->i + 1 < p->n && s[0] == two[k][0] && s[1] == two[k][1])
            kind = two_kind[k], L->i += 2;
    const char *c = kind == T_EOF && *s ? strchr(one, *s) : NULL;
    if (c)
        kind = one_kind[c - one], L->i++;
    if (kind == T_EOF) {
        size_t len = utf8_char((const unsigned char *)s, p->n - L->i);
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return fail_here(p, L->line, L->col, "%s (byte 0x%02x)", *s ? "a control character" : "a NUL byte",
                             (unsigned char)*s);
        if (!len)
            return fail_here(p, L->line, L->col, "invalid UTF-8");
        return fail_here(p, L->line, L->col, "unexpected character '%.*s'", (int)len, s);
    }
    if (!new_token(p, kind, L, start))
        return false;
    L->col += (int)(L->i - start);
    if (kind == T_LPAREN || kind == T_LBRACK || kind == T_LBRACE)
        return lex_open(p, L);
    if (kind == T_RPAREN || kind == T_RBRACK || kind == T_RBRACE)
        return lex_close(p, L, kind == T_RPAREN ? T_LPAREN : kind == T_RBRACK ? T_LBRACK : T_LBRACE);
    return true;
}

/* A newline ends a statement only where one can end: at the top or in a
 * block, and not after an operator, '=', ',', '->', then or else. */
static bool lex_newline(P *p, lexer *L)
{
    bool in_parens = L->nopen && p->t[L->open[L->nopen - 1]].kind != T_LBRACE;
    bool ok = in_parens || continues(p) || new_token(p, T_NEWLINE, L, L->i);
    L->i++;
    L->line++;
    L->col = 1;
    return ok;
}

static bool lex(P *p)
{
    lexer L = {0, 1, 1, NULL, 0, 0};
    bool ok = true;
    if (p->n >= 3 && !memcmp(p->src, "\xEF\xBB\xBF", 3))
        L.i = 3; /* a byte order mark, as some editors save UTF-8: no column */
    while (ok && L.i < p->n) {
        char c = p->src[L.i];
        if (c == '\n')
            ok = lex_newline(p, &L);
        else if (c == ' ' || c == '\t' || (c == '\r' && L.i + 1 < p->n && p->src[L.i + 1] == '\n'))
            L.i++, L.col++; /* a CR before a newline (CRLF); a lone CR is a control character */
        else if (c == '#')
            while (ok && L.i < p->n && p->src[L.i] != '\n')
                ok = p->src[L.i] == '\t' || (p->src[L.i] == '\r' && L.i + 1 < p->n && p->src[L.i + 1] == '\n')
                         ? (L.i++, L.col++, true)
                         : text_char(p, &L, "a comment");
        else if (is_digit(c) || (c == '.' && L.i + 1 < p->n && is_digit(p->src[L.i + 1])))
            ok = lex_number(p, &L);
        else if (is_name_start(c))
            ok = lex_name(p, &L);
        else if (c == '"')
            ok = lex_string(p, &L);
        else
            ok = lex_punct(p, &L);
    }
    if (ok && L.nopen)
        ok = fail_at(p, L.open[L.nopen - 1], "unclosed '%s'", spelling[p->t[L.open[L.nopen - 1]].kind]);
    if (ok && p->nt && p->t[p->nt - 1].kind == T_NEWLINE)
        p->nt--;
    if (ok)
        ok = new_token(p, T_EOF, &L, L.i) != NULL;
    free(L.open);
    return ok || (p->oom && out_of_memory(p));
}

/* ---------- tokens for the parser ---------- */

static tk peek(const P *p) { return p->t[p->i].kind; }
static tk peek_at(const P *p, int k) { return p->i + k < p->nt ? p->t[p->i + k].kind : T_EOF; }

static bool accept(P *p, tk kind)
{
    if (peek(p) != kind)
        return false;
    p->i++;
    return true;
}

/* Describes token k for "expected X, found Y". */
static const char *found(const P *p, int k, char *buf, size_t len)
{
    const token *t = &p->t[k];
    if (t->kind == T_NAME || t->kind == T_NUMBER || t->kind == T_STRING || t->kind == T_INF || t->kind == T_NAN)
        snprintf(buf, len, "'%.*s'", (int)(t->len > 40 ? 40 : t->len), p->src + t->off);
    else if (t->kind >= FIRST_WORD && t->kind != T_EOF && t->kind != T_NEWLINE)
        snprintf(buf, len, "'%s'", spelling[t->kind]);
    else
        snprintf(buf, len, "%s", spelling[t->kind]);
    return buf;
}

static bool expect(P *p, tk kind, const char *what)
{
    if (accept(p, kind))
        return true;
    char b[64];
    const char *q = kind < FIRST_WORD ? "" : "'";
    return fail_at(p, p->i, "expected %s%s%s%s%s, found %s", q, spelling[kind], q, what ? " " : "", what ? what : "",
                   found(p, p->i, b, sizeof b));
}

static bool expected(P *p, const char *what)
{
    char b[64];
    return fail_at(p, p->i, "expected %s, found %s", what, found(p, p->i, b, sizeof b));
}

#define TEXT(p, k) (int)(p)->t[k].len, (p)->src + (p)->t[k].off

/* ---------- JSON building (out of memory is noted and reported at the end) ---------- */

static cJSON *note(P *p, cJSON *j)
{
    if (!j)
        p->oom = true;
    return j;
}

static void put(P *p, cJSON *obj, const char *key, cJSON *item)
{
    if (!item || !obj || !cJSON_AddItemToObject(obj, key, item)) {
        cJSON_Delete(item);
        p->oom = true;
    }
}

static void push(P *p, cJSON *arr, cJSON *item)
{
    if (!item || !arr || !cJSON_AddItemToArray(arr, item)) {
        cJSON_Delete(item);
        p->oom = true;
    }
}

/* The placeholder for symbol s, replaced by its name at the end. */
static void placeholder(char *buf, int s) { snprintf(buf, 16, "\x01%d", s); }

static cJSON *sym_json(P *p, int s)
{
    char buf[16];
    placeholder(buf, s);
    return note(p, cJSON_CreateString(buf));
}

static cJSON *num_json(P *p, double v) { return note(p, cJSON_CreateNumber(v)); }

static cJSON *special_json(P *p, double v)
{
    return note(p, cJSON_CreateString(isnan(v) ? "nan" : v > 0 ? "inf" : "-inf"));
}

/* ---------- symbols and scopes ---------- */

static int new_sym(P *p, skind kind, int tok)
{
    if (!grow(p, (void **)&p->s, &p->scap, p->ns + 1, sizeof(sym)))
        return -1;
    p->s[p->ns] = (sym){kind, NULL, 0, tok, 0, NULL};
    return p->ns++;
}

static uint64_t name_hash(const char *s, int len)
{
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static int *bucket(P *p, const char *name, int len)
{
    return &p->heads[name_hash(name, len) & (uint64_t)(p->hcap - 1)];
}

static int lookup(P *p, const char *name, int len)
{
    if (!p->hcap)
        return -1;
    for (int k = *bucket(p, name, len); k >= 0; k = p->b[k].next)
        if (p->b[k].len == len && !memcmp(p->b[k].name, name, (size_t)len))
            return k;
    return -1;
}

static bool rehash(P *p)
{
    int cap = p->hcap ? p->hcap * 2 : 64;
    int *h = malloc(sizeof(int) * (size_t)cap);
    if (!h)
        return p->oom = true, false;
    for (int k = 0; k < cap; k++)
        h[k] = -1;
    free(p->heads);
    p->heads = h;
    p->hcap = cap;
    for (int k = 0; k < p->nb; k++)
        if (p->b[k].sym >= 0) {
            int *head = bucket(p, p->b[k].name, p->b[k].len);
            p->b[k].next = *head;
            *head = k;
        }
    return true;
}

/* Makes name (token tok) visible in the current scope as symbol s; a name
 * visible already, here or in an enclosing scope, is an error. */
static bool bind_name(P *p, const char *name, int len, int tok, int s, int depth)
{
    int k = lookup(p, name, len);
    if (k >= 0) {
        const bind *o = &p->b[k];
        const token *at = &p->t[o->tok];
        const sym *os = &p->s[o->sym];
        bool input = os->kind == S_INPUT && os->want && os->wlen == o->len && !memcmp(os->want, o->name, (size_t)o->len);
        if (input && o->depth == 0 && (p->declared || p->depth == 0)) /* (y = x binds y to input x: not one) */
            return fail_at(p, tok, "\"%.*s\" is already an input (at %d:%d)", len, name, at->line, at->col);
        if (o->depth == depth)
            return fail_at(p, tok, "\"%.*s\" is already bound (at %d:%d)", len, name, at->line, at->col);
        return fail_at(p, tok, "\"%.*s\" shadows the \"%.*s\" of an enclosing scope (at %d:%d)", len, name, len,
                       name, at->line, at->col);
    }
    if (!grow(p, (void **)&p->b, &p->bcap, p->nb + 1, sizeof(bind)) || (p->nb >= p->hcap && !rehash(p)))
        return out_of_memory(p);
    int *head = bucket(p, name, len);
    p->b[p->nb] = (bind){name, len, s, depth, tok, *head};
    *head = p->nb++;
    return true;
}

/* Scopes nest no deeper than the parser (MAX_NEST), which checks first. */
static void open_scope(P *p) { p->scope_start[++p->depth] = p->nb; }

/* Forgets the names of the innermost scope (newest first: they head their
 * chains, behind at most the inputs made since). */
static void close_scope(P *p)
{
    for (int k = p->nb - 1; k >= p->scope_start[p->depth]; k--) {
        bind *e = &p->b[k];
        if (e->sym < 0 || e->depth != p->depth)
            continue;
        int *link = bucket(p, e->name, e->len);
        while (*link != k)
            link = &p->b[*link].next;
        *link = e->next;
        e->sym = -1;
    }
    p->depth--;
}

/* Symbols for the names a binding gives: inputs and top-level names keep
 * theirs in the graph; names in blocks may be renamed. */
static void name_sym(P *p, int s, const char *name, int len)
{
    p->s[s].kind = p->depth == 0 ? S_TOP : S_INNER;
    p->s[s].want = name;
    p->s[s].wlen = len;
    p->s[s].part = 0;
}

/* ---------- values ---------- */

/* Room for n values of a tuple, owned by the translator. */
static val *new_items(P *p, int n)
{
    struct chunk *c = malloc(sizeof *c + sizeof(val) * (size_t)n);
    if (!c)
        return p->oom = true, NULL;
    c->next = p->arena;
    p->arena = c;
    return c->items;
}

static int count_of(const val *v) { return v->kind == V_TUPLE ? v->n : 1; }
static const val *item_of(const val *v, int k) { return v->kind == V_TUPLE ? &v->items[k] : v; }

/* A tuple where one value is needed: `where` says what takes one. */
static bool single(P *p, const val *v, const char *where)
{
    if (v->kind != V_TUPLE)
        return true;
    return fail_at(p, v->at, "%d values where %s takes one (only if, iterate and blocks give several, taken apart "
                   "with (a, b) = ...)", v->n, where);
}

/* A constant from a weak scalar, so that it has a name. */
static int const_sym(P *p, double num, int tok)
{
    int s = new_sym(p, S_GEN, tok);
    if (s < 0)
        return -1;
    char key[16];
    placeholder(key, s);
    put(p, p->consts, key, isfinite(num) ? num_json(p, num) : special_json(p, num));
    return s;
}

/* The symbol a single value goes by (a number becomes a constant). */
static int sym_of(P *p, const val *v)
{
    return v->kind == V_REF ? v->sym : const_sym(p, v->num, v->at);
}

/* A single value as a node argument: a name, or a finite number inline
 * (the graph's arguments hold finite numbers only). */
static cJSON *arg_json(P *p, const val *v)
{
    if (v->kind == V_NUM && isfinite(v->num))
        return num_json(p, v->num);
    int s = sym_of(p, v);
    return s < 0 ? NULL : sym_json(p, s);
}

/* A list of symbols as an id, result or output: one name or an array. */
static cJSON *names_json(P *p, const int *syms, int n)
{
    if (n == 1)
        return sym_json(p, syms[0]);
    cJSON *a = note(p, cJSON_CreateArray());
    for (int k = 0; k < n; k++)
        push(p, a, sym_json(p, syms[k]));
    return a;
}

/* A new node of op at token tok with nout generated ids, appended to the
 * current block by finish_node.  *v is its value (a tuple when nout > 1). */
static cJSON *start_node(P *p, const char *op, int tok, int nout, int at, val *v)
{
    int ids[MAX_VALUES];
    *v = (val){.kind = nout > 1 ? V_TUPLE : V_REF, .at = at, .n = nout};
    if (nout > 1 && !(v->items = new_items(p, nout)))
        return NULL;
    for (int k = 0; k < nout; k++) {
        if ((ids[k] = new_sym(p, S_GEN, tok)) < 0)
            return NULL;
        p->s[ids[k]].part = nout > 1 ? k + 1 : 0;
        val one = {.kind = V_REF, .sym = ids[k], .fresh = true, .at = at};
        if (nout > 1)
            v->items[k] = one;
        else
            *v = one;
    }
    cJSON *node = note(p, cJSON_CreateObject());
    put(p, node, "id", names_json(p, ids, nout));
    put(p, node, "op", note(p, cJSON_CreateString(op)));
    return node;
}

static void finish_node(P *p, cJSON *node) { push(p, p->cur, node); }

/* ---------- expressions ---------- */

static bool expr(P *p, val *v);
static bool subexpr(P *p, int limit, val *v);
static bool statements(P *p, bool top, val *last, bool *trailing);

/* Binary operators: priority to the left and to the right (right < left:
 * right-associative), after Lua's lparser.c. */
static const struct binop {
    tk tok;
    const char *op;
    unsigned char left, right;
} binops[] = {
    {T_EQ, "eq", 3, 3},      {T_NE, "ne", 3, 3},      {T_LT, "lt", 3, 3},    {T_LE, "le", 3, 3},
    {T_GT, "gt", 3, 3},      {T_GE, "ge", 3, 3},      {T_PLUS, "add", 10, 10}, {T_MINUS, "sub", 10, 10},
    {T_STAR, "mul", 11, 11}, {T_SLASH, "div", 11, 11}, {T_AT, "matmul", 11, 11}, {T_POW, "pow", 14, 13},
};
#define UNARY_PRIORITY 12
#define COMPARE_PRIORITY 3

static const char *binop_name(const struct binop *op) { return spelling[op->tok]; }

static const struct binop *binop_of(tk kind)
{
    for (size_t k = 0; k < sizeof binops / sizeof binops[0]; k++)
        if (binops[k].tok == kind)
            return &binops[k];
    return NULL;
}

/* A node of op over single values, in the written order. */
static bool op_node(P *p, const char *op, int tok, const val *args, int nargs, int at, val *v)
{
    cJSON *node = start_node(p, op, tok, 1, at, v);
    cJSON *a = note(p, cJSON_CreateArray());
    for (int k = 0; k < nargs; k++)
        push(p, a, arg_json(p, &args[k]));
    put(p, node, "args", a);
    finish_node(p, node);
    return true;
}

/* A number literal, with the minus of "-2" when there is one.  Returns
 * false with nothing consumed when the tokens are not one. */
static bool number(P *p, double *v)
{
    int k = p->i;
    bool minus = peek(p) == T_MINUS;
    tk t = p->t[k + minus].kind;
    if (t != T_NUMBER && t != T_INF && t != T_NAN)
        return false;
    if (t == T_NAN && minus)
        return fail_at(p, k, "-nan: a NaN has no sign in a recipe; write nan"), false;
    *v = t == T_NUMBER ? p->t[k + minus].num : t == T_INF ? INFINITY : NAN;
    if (minus)
        *v = -*v;
    p->i += 1 + minus;
    return true;
}

/* ---------- tensor literals ---------- */

typedef struct shape_acc {
    int ndim;
    int64_t dims[TL_MAXDIM];  /* -1 until the first row at that depth ends */
    char kind[TL_MAXDIM + 1]; /* of the entries at each depth: 0 unknown, 'n' numbers, 'l' lists */
} shape_acc;

static bool literal_entry(P *p, shape_acc *sa, int depth, tl_dtype dt, bool typed, cJSON *into);

/* [a, b, ...] at depth: a row of numbers or of rows, all alike. */
static bool literal_row(P *p, shape_acc *sa, int depth, tl_dtype dt, bool typed, cJSON *into)
{
    int open = p->i;
    if (depth >= TL_MAXDIM)
        return fail_at(p, open, "a literal nested deeper than %d dimensions", TL_MAXDIM);
    p->i++;
    cJSON *row = note(p, cJSON_CreateArray());
    int64_t n = 0;
    while (peek(p) != T_RBRACK) {
        if (n && !expect(p, T_COMMA, "between entries"))
            return cJSON_Delete(row), false;
        if (!literal_entry(p, sa, depth + 1, dt, typed, row))
            return cJSON_Delete(row), false;
        n++;
    }
    p->i++;
    push(p, into, row);
    if (sa->ndim <= depth)
        sa->ndim = depth + 1;
    if (sa->dims[depth] < 0) {
        sa->dims[depth] = n;
    } else if (sa->dims[depth] != n) {
        return fail_at(p, open, "ragged literal: this row has %lld entr%s, the first row at its depth has %lld",
                       (long long)n, n == 1 ? "y" : "ies", (long long)sa->dims[depth]);
    }
    return true;
}

static bool literal_entry(P *p, shape_acc *sa, int depth, tl_dtype dt, bool typed, cJSON *into)
{
    int at = p->i;
    char kind = peek(p) == T_LBRACK ? 'l' : 'n';
    if (sa->kind[depth] && sa->kind[depth] != kind)
        return fail_at(p, at, "ragged literal: numbers and rows mixed at the same depth");
    sa->kind[depth] = kind;
    if (kind == 'l')
        return literal_row(p, sa, depth, dt, typed, into);
    double v;
    if (!number(p, &v))
        return p->st->code ? false : expected(p, "a number or '[' in a literal");
    /* the number as written: a double may have rounded it */
    char text[64];
    snprintf(text, sizeof text, "%s%.*s", p->i - at > 1 ? "-" : "", TEXT(p, p->i - 1));
    const char *name = tl_dtype_name(dt);
    if (typed && tl_dtype_is_int(dt) && (v != floor(v) || isinf(v)))
        return fail_at(p, at, "%s literals hold integers, not %s", name, text);
    if (typed && dt == TL_I32 && !(v >= -2147483648.0 && v <= 2147483647.0))
        return fail_at(p, at, "i32 literals hold integers from -2147483648 to 2147483647, not %s", text);
    if (typed && dt == TL_I64 && !(fabs(v) < 9007199254740992.0))
        return fail_at(p, at, "the i64 literal %s is not below 2^53 in magnitude, so not held exactly (read larger "
                       "integers from a file)", text);
    if (typed && dt == TL_F32 && tl_f32_overflows(v))
        return fail_at(p, at, "number %s is too large for f32 (write inf)", text);
    push(p, into, isfinite(v) ? num_json(p, v) : special_json(p, v));
    return true;
}

/* [..] (at p->i), optionally after a dtype prefix: a constant of the
 * graph, in the element type of the call when there is no prefix. */
static bool tensor_literal(P *p, int at, bool typed, tl_dtype dt, val *v)
{
    shape_acc sa = {0};
    for (int d = 0; d < TL_MAXDIM; d++)
        sa.dims[d] = -1;
    cJSON *holder = note(p, cJSON_CreateArray());
    if (!literal_row(p, &sa, 0, dt, typed, holder))
        return cJSON_Delete(holder), false;
    int s = new_sym(p, S_GEN, at);
    cJSON *c = note(p, cJSON_CreateObject());
    if (typed)
        put(p, c, "dtype", note(p, cJSON_CreateString(tl_dtype_name(dt))));
    cJSON *shape = note(p, cJSON_CreateArray());
    for (int d = 0; d < sa.ndim; d++)
        push(p, shape, num_json(p, (double)sa.dims[d]));
    put(p, c, "shape", shape);
    put(p, c, "data", holder && holder->child ? cJSON_DetachItemViaPointer(holder, holder->child) : NULL);
    cJSON_Delete(holder);
    char key[16];
    placeholder(key, s);
    put(p, p->consts, key, c);
    *v = (val){.kind = V_REF, .sym = s, .fresh = true, .at = at};
    return s >= 0;
}

/* ---------- calls ---------- */

/* A decoded string token ("..." with \" and \\). */
static char *string_of(P *p, int k)
{
    const token *t = &p->t[k];
    char *s = malloc(t->len);
    if (!s)
        return p->oom = true, NULL;
    size_t n = 0;
    for (size_t i = 1; i + 1 < t->len; i++) {
        char c = p->src[t->off + i];
        if (c == '\\')
            c = p->src[t->off + ++i];
        s[n++] = c;
    }
    s[n] = '\0';
    return s;
}

static cJSON *string_json(P *p, int k)
{
    char *s = string_of(p, k);
    cJSON *j = s ? note(p, cJSON_CreateString(s)) : NULL;
    free(s);
    return j;
}

/* file("w.npy") or file("w.npz", "key"): a file constant. */
static bool file_call(P *p, int name, val *v)
{
    int file = p->i, key = -1;
    if (!expect(p, T_STRING, "(the file's name) after 'file('"))
        return false;
    if (accept(p, T_COMMA) && (key = p->i, !expect(p, T_STRING, "(the .npz member's name)")))
        return false;
    if (!expect(p, T_RPAREN, "after file(NAME) or file(NAME, KEY)"))
        return false;
    if (p->t[file].len <= 2)
        return fail_at(p, file, "the file's name is empty");
    size_t fl = p->t[file].len - 2;
    if (key < 0 && fl >= 4 && !memcmp(p->src + p->t[file].off + 1 + fl - 4, ".npz", 4))
        return fail_at(p, file, "an .npz file needs the member's name: file(\"%.*s\", \"KEY\")", (int)fl,
                       p->src + p->t[file].off + 1);
    int s = new_sym(p, S_GEN, name);
    cJSON *c = note(p, cJSON_CreateObject());
    put(p, c, "file", string_json(p, file));
    if (key >= 0)
        put(p, c, "key", string_json(p, key));
    char buf[16];
    placeholder(buf, s);
    put(p, p->consts, buf, c);
    *v = (val){.kind = V_REF, .sym = s, .fresh = true, .at = name};
    return s >= 0;
}

/* An attribute value: a number, a list (of numbers or of lists, nested at
 * most 2 deep: padding=[[1, 0], [0, 1]]), true, false or a string. */
static cJSON *attr_list(P *p, int depth);

static cJSON *attr_value(P *p)
{
    double v;
    if (accept(p, T_TRUE) || accept(p, T_FALSE))
        return note(p, cJSON_CreateBool(p->t[p->i - 1].kind == T_TRUE));
    if (peek(p) == T_STRING)
        return string_json(p, p->i++);
    if (number(p, &v))
        return isfinite(v) ? num_json(p, v) : special_json(p, v);
    if (p->st->code)
        return NULL;
    if (!accept(p, T_LBRACK))
        return expected(p, "an attribute value (a number, a list of numbers, true, false or a string)"), NULL;
    return attr_list(p, 1);
}

/* The rest of a list after its "[". */
static cJSON *attr_list(P *p, int depth)
{
    double v;
    cJSON *a = note(p, cJSON_CreateArray());
    for (int n = 0; peek(p) != T_RBRACK; n++) {
        if (n && !expect(p, T_COMMA, "between list entries"))
            return cJSON_Delete(a), NULL;
        if (depth < 2 && accept(p, T_LBRACK)) {
            cJSON *inner = attr_list(p, depth + 1);
            if (!inner)
                return cJSON_Delete(a), NULL;
            push(p, a, inner);
            continue;
        }
        if (!number(p, &v)) {
            if (!p->st->code)
                expected(p, depth < 2 ? "a number or a list" : "a number");
            return cJSON_Delete(a), NULL;
        }
        push(p, a, isfinite(v) ? num_json(p, v) : special_json(p, v));
    }
    p->i++;
    return a;
}

/* Checks the call as the loader will, so that a fault is placed at the
 * op's name or at the attribute's. */
static bool check_call(P *p, cJSON *node, int name, const int *attr_toks, int nattrs, int nargs)
{
    cJSON *args = cJSON_DetachItemFromObjectCaseSensitive(node, "args");
    cJSON *zeros = note(p, cJSON_CreateArray());
    for (int k = 0; k < nargs; k++)
        push(p, zeros, num_json(p, 0));
    put(p, node, "args", zeros);
    const char *bad = NULL;
    tl_status st = {0};
    tl_code rc = p->oom ? TL_OK : tl_graph_check_call(node, &bad, &st);
    cJSON_DeleteItemFromObjectCaseSensitive(node, "args");
    put(p, node, "args", args);
    if (!rc)
        return true;
    if (rc != TL_EINPUT)
        return out_of_memory(p);
    int at = name;
    for (int k = 0; bad && k < nattrs; k++)
        if (p->t[attr_toks[k]].len == strlen(bad) && !memcmp(p->src + p->t[attr_toks[k]].off, bad, strlen(bad)))
            at = attr_toks[k];
    bool named = !strncmp(st.msg, p->src + p->t[name].off, p->t[name].len) && st.msg[p->t[name].len] == ' ';
    return named ? fail_at(p, at, "%s", st.msg) : fail_at(p, at, "%.*s: %s", TEXT(p, name), st.msg);
}

/* f(ARGS, key=VALUE, ...): one node of the op named f. */
static bool op_call(P *p, int name, val *v)
{
    char op[MAX_NAME + 1];
    snprintf(op, sizeof op, "%.*s", TEXT(p, name));
    tl_opcode code = tl_op_lookup(op);
    if (code == TL_OP_COUNT) {
        const char *near = tl_op_suggest(op), *file = "file"; /* file(...) is a call too */
        if (!near || tl_edit_distance(op, file) < tl_edit_distance(op, near))
            near = tl_nearest(op, &file, 1) ? file : near;
        return fail_at(p, name, "unknown op \"%s\"%s%s%s", op, near ? " (did you mean \"" : " (tl ops lists them)",
                       near ? near : "", near ? "\"?)" : "");
    }
    cJSON *args = note(p, cJSON_CreateArray()), *attrs = note(p, cJSON_CreateObject());
    int attr_toks[32], nattrs = 0, nargs = 0;
    bool ok = true;
    while (ok && peek(p) != T_RPAREN) {
        if ((nargs || nattrs) && !(ok = expect(p, T_COMMA, "between arguments")))
            break;
        if (peek(p) == T_NAME && peek_at(p, 1) == T_ASSIGN) {
            int key = p->i;
            char k[MAX_NAME + 1];
            snprintf(k, sizeof k, "%.*s", TEXT(p, key));
            if (!strcmp(k, "id") || !strcmp(k, "op") || !strcmp(k, "args")) /* keys of every node */
                ok = fail_at(p, key, "%s: unknown attribute \"%s\"", op, k);
            else if (cJSON_GetObjectItemCaseSensitive(attrs, k))
                ok = fail_at(p, key, "attribute \"%s\" given twice", k);
            else if (nattrs == (int)(sizeof attr_toks / sizeof attr_toks[0]))
                ok = fail_at(p, key, "too many attributes");
            p->i += 2;
            cJSON *value = ok ? attr_value(p) : NULL;
            ok = ok && value;
            if (ok) {
                attr_toks[nattrs++] = key;
                put(p, attrs, k, value);
            }
            continue;
        }
        val a;
        if (nattrs)
            ok = fail_at(p, p->i, "an argument after the attributes (give attributes last)");
        else if ((ok = expr(p, &a) && single(p, &a, "an argument"))) {
            push(p, args, arg_json(p, &a));
            nargs++;
        }
    }
    if (!ok) {
        cJSON_Delete(args);
        cJSON_Delete(attrs);
        return false;
    }
    p->i++;
    cJSON *node = start_node(p, op, name, 1, name, v);
    put(p, node, "args", args);
    while (attrs && attrs->child) {
        cJSON *a = cJSON_DetachItemViaPointer(attrs, attrs->child);
        put(p, node, a->string, a);
    }
    cJSON_Delete(attrs);
    if (!check_call(p, node, name, attr_toks, nattrs, nargs)) {
        cJSON_Delete(node);
        return false;
    }
    finish_node(p, node);
    return true;
}

/* ---------- blocks, lambdas, control flow ---------- */

/* A block of the graph (an if branch, a body): its own scope and node
 * list, params bound first, its value the result.  Gives the block's JSON
 * and the number of values in *n. */
static cJSON *sub_block(P *p, const int *param_toks, const int *param_syms, int nparams, int *n, int *first)
{
    cJSON *saved = p->cur, *nodes = note(p, cJSON_CreateArray());
    cJSON *block = NULL;
    val v = {0};
    open_scope(p);
    bool ok = true;
    for (int k = 0; ok && k < nparams; k++)
        ok = bind_name(p, p->src + p->t[param_toks[k]].off, (int)p->t[param_toks[k]].len, param_toks[k],
                       param_syms[k], p->depth);
    p->cur = nodes;
    *first = p->i;
    if (ok && (ok = expr(p, &v))) {
        int syms[MAX_VALUES];
        *n = count_of(&v);
        for (int k = 0; k < *n; k++)
            ok = ok && (syms[k] = sym_of(p, item_of(&v, k))) >= 0;
        block = note(p, cJSON_CreateObject());
        put(p, block, "nodes", nodes);
        nodes = NULL;
        if (ok)
            put(p, block, "result", names_json(p, syms, *n));
    }
    cJSON_Delete(nodes);
    p->cur = saved;
    close_scope(p);
    if (!ok)
        cJSON_Delete(block);
    return ok ? block : NULL;
}

/* if C then A else B: C in the current block, A and B blocks of their own. */
static bool if_expr(P *p, val *v)
{
    int at = p->i++;
    val c;
    if (!expr(p, &c) || !single(p, &c, "the condition of if"))
        return false;
    cJSON *cond = arg_json(p, &c);
    int nt = 0, ne = 0, ft, fe;
    cJSON *then_b = NULL, *else_b = NULL;
    bool ok = expect(p, T_THEN, "after the condition of if") && (then_b = sub_block(p, NULL, NULL, 0, &nt, &ft)) &&
              expect(p, T_ELSE, "(an if needs both branches)") && (else_b = sub_block(p, NULL, NULL, 0, &ne, &fe));
    if (ok && nt != ne)
        ok = fail_at(p, fe, "the branches of if give %d (then) and %d (else) values", nt, ne);
    cJSON *node = ok ? start_node(p, "if", at, nt, at, v) : NULL;
    if (!node) {
        cJSON_Delete(cond);
        cJSON_Delete(then_b);
        cJSON_Delete(else_b);
        return false;
    }
    put(p, node, "cond", cond);
    put(p, node, "then", then_b);
    put(p, node, "else", else_b);
    finish_node(p, node);
    return true;
}

/* NAME -> or (NAME, ...) ->: the parameters of a lambda. */
static bool lambda_params(P *p, int *toks, int *n, const char *where)
{
    *n = 0;
    if (peek(p) == T_NAME && peek_at(p, 1) == T_ARROW) {
        toks[(*n)++] = p->i;
        p->i += 2;
        return true;
    }
    if (peek(p) != T_LPAREN || p->t[p->t[p->i].match + 1].kind != T_ARROW)
        return expected(p, where);
    p->i++;
    while (peek(p) != T_RPAREN) {
        if (*n && !expect(p, T_COMMA, "between parameters"))
            return false;
        if (*n == MAX_VALUES)
            return fail_at(p, p->i, "more than %d parameters", MAX_VALUES);
        toks[(*n)++] = p->i;
        if (!expect(p, T_NAME, "(a parameter's name)"))
            return false;
    }
    p->i += 2;
    return *n > 0 || fail_at(p, p->i - 3, "a lambda needs at least one parameter");
}

static bool param_syms(P *p, const int *toks, int *syms, int n)
{
    for (int k = 0; k < n; k++) {
        if ((syms[k] = new_sym(p, S_INNER, toks[k])) < 0)
            return out_of_memory(p);
        p->s[syms[k]].want = p->src + p->t[toks[k]].off;
        p->s[syms[k]].wlen = (int)p->t[toks[k]].len;
    }
    return true;
}

static cJSON *syms_array(P *p, const int *syms, int n)
{
    cJSON *a = note(p, cJSON_CreateArray());
    for (int k = 0; k < n; k++)
        push(p, a, sym_json(p, syms[k]));
    return a;
}

/* iterate(N, INIT, s -> BODY), INIT a tuple for several carried values,
 * (i, s) -> BODY with the step index first. */
static bool iterate_call(P *p, int name, val *v)
{
    int at = p->i, toks[MAX_VALUES + 1], syms[MAX_VALUES + 1], np, nb, first;
    double count;
    if (peek(p) == T_MINUS && peek_at(p, 1) == T_NUMBER)
        return fail_at(p, at, "the count of iterate must be a non-negative integer (a number of steps)");
    if (peek(p) != T_NUMBER || !number(p, &count))
        return fail_at(p, at, "the count of iterate must be an integer literal (a fixed number of steps)");
    if (count != floor(count))
        return fail_at(p, at, "the count of iterate must be a non-negative integer, not %.*s", TEXT(p, at));
    if (count >= 9007199254740992.0) /* beyond it, a double may have rounded what was written */
        return fail_at(p, at, "the count of iterate, %.*s, is too large (at most 2^53 - 1 = 9007199254740991)",
                       TEXT(p, at));
    val init;
    if (!expect(p, T_COMMA, "after the count of iterate") || !expr(p, &init))
        return false;
    int k = count_of(&init);
    cJSON *init_j = note(p, cJSON_CreateArray());
    for (int j = 0; j < k; j++)
        push(p, init_j, arg_json(p, item_of(&init, j)));
    bool ok = expect(p, T_COMMA, "before the lambda of iterate");
    int lam = p->i;
    ok = ok && lambda_params(p, toks, &np, "a lambda: s -> BODY, (a, b) -> BODY or (i, s) -> BODY");
    if (ok && np != k && np != k + 1)
        ok = fail_at(p, lam, "the lambda has %d parameters for %d carried value%s (give %d, or %d with the step "
                     "index first)", np, k, k == 1 ? "" : "s", k, k + 1);
    ok = ok && param_syms(p, toks, syms, np);
    cJSON *body = ok ? sub_block(p, toks, syms, np, &nb, &first) : NULL;
    if (body && nb != k)
        ok = fail_at(p, first, "the body gives %d value%s for %d carried", nb, nb == 1 ? "" : "s", k);
    ok = ok && body && expect(p, T_RPAREN, "after the lambda of iterate");
    cJSON *node = ok ? start_node(p, "iterate", name, k, name, v) : NULL;
    if (!node) {
        cJSON_Delete(init_j);
        cJSON_Delete(body);
        return false;
    }
    bool index = np == k + 1;
    put(p, node, "count", num_json(p, count));
    put(p, node, "init", init_j);
    put(p, node, "state", syms_array(p, syms + index, k));
    if (index)
        put(p, node, "index", sym_json(p, syms[0]));
    put(p, node, "body", body);
    finish_node(p, node);
    return true;
}

/* map((a, b) -> BODY, X, Y): the lambda first (read first, as written),
 * the tensors then, each before the map node. */
static bool map_call(P *p, int name, val *v)
{
    int lam = p->i, toks[MAX_VALUES], syms[MAX_VALUES], np, nb, first, nargs = 0;
    if (!lambda_params(p, toks, &np, "a lambda first: map(p -> BODY, X) or map((a, b) -> BODY, X, Y)") ||
        !param_syms(p, toks, syms, np))
        return false;
    cJSON *body = sub_block(p, toks, syms, np, &nb, &first), *args = note(p, cJSON_CreateArray());
    bool ok = body && (nb == 1 || fail_at(p, first, "the body of map gives %d values, not one", nb));
    while (ok && accept(p, T_COMMA)) {
        val a;
        if ((ok = expr(p, &a) && single(p, &a, "each tensor of map"))) {
            push(p, args, arg_json(p, &a));
            nargs++;
        }
    }
    ok = ok && expect(p, T_RPAREN, "after the tensors of map");
    if (ok && nargs != np)
        ok = fail_at(p, lam, "the lambda has %d parameter%s for %d tensor%s", np, np == 1 ? "" : "s", nargs,
                     nargs == 1 ? "" : "s");
    cJSON *node = ok ? start_node(p, "map", name, 1, name, v) : NULL;
    if (!node) {
        cJSON_Delete(body);
        cJSON_Delete(args);
        return false;
    }
    put(p, node, "args", args);
    put(p, node, "params", syms_array(p, syms, np));
    put(p, node, "body", body);
    finish_node(p, node);
    return true;
}

static bool call(P *p, val *v)
{
    int name = p->i;
    p->i += 2;
    const char *s = p->src + p->t[name].off;
    size_t len = p->t[name].len;
    if (len == 7 && !memcmp(s, "iterate", 7))
        return iterate_call(p, name, v);
    if (len == 3 && !memcmp(s, "map", 3))
        return map_call(p, name, v);
    if (len == 4 && !memcmp(s, "file", 4))
        return file_call(p, name, v);
    return op_call(p, name, v);
}

/* ---------- names ---------- */

/* An input made by the first free use of a name (no input statements). */
static bool implicit_input(P *p, int tok, int *s)
{
    if ((*s = new_sym(p, S_INPUT, tok)) < 0 ||
        !grow(p, (void **)&p->inputs, &p->icap, p->ninputs + 1, sizeof(int)) ||
        !(p->input_first = realloc(p->input_first, sizeof(int) * (size_t)p->icap)))
        return out_of_memory(p);
    p->s[*s].want = p->src + p->t[tok].off;
    p->s[*s].wlen = (int)p->t[tok].len;
    p->inputs[p->ninputs] = *s;
    p->input_first[p->ninputs++] = tok;
    return bind_name(p, p->s[*s].want, p->s[*s].wlen, tok, *s, 0);
}

/* Into near, the visible name nearest to the one at token tok
 * (tl_nearest); the last few hundred bindings are compared.
 * False when none is near. */
static bool nearest_visible(P *p, int tok, char *near, size_t len)
{
    enum { MAX = 256 };
    char want[MAX_NAME + 1], *names = malloc((size_t)MAX * (MAX_NAME + 1));
    const char *list[MAX], *best = NULL;
    int n = 0;
    for (int k = p->nb - 1; names && k >= 0 && n < MAX; k--)
        if (p->b[k].sym >= 0) {
            list[n] = names + (size_t)n * (MAX_NAME + 1);
            snprintf(names + (size_t)n * (MAX_NAME + 1), MAX_NAME + 1, "%.*s", p->b[k].len, p->b[k].name);
            n++;
        }
    snprintf(want, sizeof want, "%.*s", TEXT(p, tok));
    best = tl_nearest(want, list, n);
    bool ok = best != NULL;
    if (ok)
        snprintf(near, len, "%s", best);
    free(names);
    return ok;
}

/* The symbol of the name at token tok: a visible binding, else (without
 * input statements, where `implicit` allows) a new input; `where` says
 * where it was looked for. */
static bool resolve_name(P *p, int tok, const char *where, bool implicit, int *s)
{
    int k = lookup(p, p->src + p->t[tok].off, (int)p->t[tok].len);
    if (k >= 0)
        return *s = p->b[k].sym, true;
    if (p->declared || !implicit) {
        char near[MAX_NAME + 1];
        if (nearest_visible(p, tok, near, sizeof near))
            return fail_at(p, tok, "unknown name \"%.*s\" (did you mean \"%s\"?)", TEXT(p, tok), near);
        return fail_at(p, tok, "unknown name \"%.*s\" (not an input, and not bound %s)", TEXT(p, tok), where);
    }
    return implicit_input(p, tok, s);
}

static bool name_ref(P *p, val *v)
{
    int tok = p->i++, s;
    if (!resolve_name(p, tok, "before this point", true, &s))
        return false;
    *v = (val){.kind = V_REF, .sym = s, .at = tok};
    return true;
}

/* ---------- primaries ---------- */

static bool tuple_or_paren(P *p, val *v)
{
    int open = p->i++;
    if (p->t[p->t[open].match + 1].kind == T_ARROW)
        return fail_at(p, open, "a lambda is allowed only as the last argument of iterate and the first of map");
    if (peek(p) == T_RPAREN)
        return fail_at(p, open, "empty parentheses");
    val first, *items = &first;
    int n = 0;
    do {
        if (n == 1 && !(items = new_items(p, MAX_VALUES)))
            return out_of_memory(p);
        if (n == 1)
            items[0] = first;
        if (n == MAX_VALUES)
            return fail_at(p, p->i, "more than %d values in a tuple", MAX_VALUES);
        if (!expr(p, &items[n]))
            return false;
        if (items[n].kind == V_TUPLE)
            return fail_at(p, items[n].at, "tuples do not nest");
        n++;
    } while (accept(p, T_COMMA));
    if (!expect(p, T_RPAREN, "to close the '(' (or ',' for another value)"))
        return false;
    *v = n == 1 ? first : (val){.kind = V_TUPLE, .n = n, .items = items};
    v->at = open;
    return true;
}

/* { s = ...; EXPR } as an expression: a scope of its own; its nodes go to
 * the current block. */
static bool block_expr(P *p, val *v)
{
    int open = p->i++;
    bool trailing;
    open_scope(p);
    bool ok = statements(p, false, v, &trailing) && expect(p, T_RBRACE, "at the end of the block");
    close_scope(p);
    if (ok && v->at < 0)
        return fail_at(p, open, "an empty block has no value");
    return ok;
}

static bool simple(P *p, val *v)
{
    int at = p->i;
    tl_dtype dt;
    char buf[16];
    switch (peek(p)) {
    case T_NUMBER:
    case T_INF:
    case T_NAN:
        *v = (val){.kind = V_NUM, .at = at};
        return number(p, &v->num);
    case T_NAME:
        if (peek_at(p, 1) == T_LPAREN)
            return call(p, v);
        if (peek_at(p, 1) == T_ARROW)
            return fail_at(p, at, "a lambda is allowed only as the last argument of iterate and the first of map");
        snprintf(buf, sizeof buf, "%.*s", (int)(p->t[at].len < 15 ? p->t[at].len : 15), p->src + p->t[at].off);
        if (peek_at(p, 1) == T_COLON && tl_dtype_parse(buf, &dt)) {
            p->i += 2;
            if (peek(p) != T_LBRACK)
                return expected(p, "'[' (a dtype prefix goes before a bracketed literal)");
            return tensor_literal(p, at, true, dt, v);
        }
        return name_ref(p, v);
    case T_LPAREN: return tuple_or_paren(p, v);
    case T_LBRACK: return tensor_literal(p, at, false, TL_F64, v);
    case T_LBRACE: return block_expr(p, v);
    case T_IF: return if_expr(p, v);
    case T_STRING: return fail_at(p, at, "a string is only an attribute value or a file's name");
    case T_TRUE:
    case T_FALSE: return fail_at(p, at, "true and false are attribute values only");
    default: return expected(p, "an expression");
    }
}

/* ---------- operators ---------- */

/* Unary minus: part of a number literal right after it, unless that
 * literal is the left operand of ** (-2 ** x is -(2 ** x)). */
static bool unary(P *p, val *v)
{
    int at = p->i;
    tk next = peek_at(p, 1);
    if ((next == T_NUMBER || next == T_INF || next == T_NAN) && peek_at(p, 2) != T_POW) {
        *v = (val){.kind = V_NUM, .at = at};
        return number(p, &v->num);
    }
    p->i++;
    val x;
    if (!subexpr(p, UNARY_PRIORITY, &x) || !single(p, &x, "-"))
        return false;
    return op_node(p, "neg", at, &x, 1, at, v);
}

/* Binary operators whose left priority exceeds limit (lparser.c's subexpr);
 * comparisons do not chain. */
static bool subexpr(P *p, int limit, val *v)
{
    if (++p->nest > MAX_NEST + 1) /* the statement's own expression is no nesting */
        return fail_at(p, p->i, "expression nested more than %d deep", MAX_NEST);
    bool ok = peek(p) == T_MINUS ? unary(p, v) : simple(p, v);
    const struct binop *op = binop_of(peek(p));
    bool compared = false;
    while (ok && op && op->left > limit) {
        int tok = p->i++;
        if (op->left == COMPARE_PRIORITY && compared)
            return fail_at(p, tok, "comparisons do not chain (parenthesize one to compare a comparison: (a < b) == c)");
        val args[2] = {*v};
        if (!single(p, &args[0], binop_name(op)) || !subexpr(p, op->right, &args[1]) ||
            !single(p, &args[1], binop_name(op)))
            return false;
        ok = op_node(p, op->op, tok, args, 2, v->at, v);
        compared = op->left == COMPARE_PRIORITY;
        op = binop_of(peek(p));
    }
    p->nest--;
    return ok;
}

static bool expr(P *p, val *v)
{
    return subexpr(p, 0, v);
}

/* ---------- statements ---------- */

static bool claimable(P *p, const val *x);

/* NAME = EXPR, or one name of (a, b) = EXPR: a fresh value takes the
 * name; a name already made is shared (no node); a number becomes a
 * constant of that name. */
static bool bind_value(P *p, int tok, const val *x)
{
    const char *name = p->src + p->t[tok].off;
    int len = (int)p->t[tok].len, s;
    if (x->kind == V_REF && !claimable(p, x))
        s = x->sym;
    else if ((s = sym_of(p, x)) >= 0)
        name_sym(p, s, name, len);
    return s >= 0 ? bind_name(p, name, len, tok, s, p->depth) : out_of_memory(p);
}

/* The value a binding statement leaves (the block's value, when last). */
static bool bound_value(P *p, const int *toks, int n, val *last)
{
    val *items = n == 1 ? last : new_items(p, n);
    if (!items)
        return out_of_memory(p);
    for (int k = 0; k < n; k++) {
        int b = lookup(p, p->src + p->t[toks[k]].off, (int)p->t[toks[k]].len);
        items[k] = (val){.kind = V_REF, .sym = p->b[b].sym, .at = toks[k]};
    }
    if (n > 1)
        *last = (val){.kind = V_TUPLE, .n = n, .at = toks[0], .items = items};
    return true;
}

static bool binding(P *p, val *last)
{
    int tok = p->i;
    p->i += 2;
    val x;
    if (!expr(p, &x))
        return false;
    return single(p, &x, "a binding of one name") && bind_value(p, tok, &x) &&
           bound_value(p, &tok, 1, last);
}

static bool destructuring(P *p, val *last)
{
    int open = p->i, toks[MAX_VALUES], n = 0;
    p->i++;
    while (peek(p) != T_RPAREN) {
        if (n && !expect(p, T_COMMA, "between names"))
            return false;
        if (n == MAX_VALUES)
            return fail_at(p, p->i, "more than %d names", MAX_VALUES);
        toks[n++] = p->i;
        if (!expect(p, T_NAME, "(destructuring takes names: (a, b) = ...)"))
            return false;
    }
    p->i += 2;
    val x;
    if (!expr(p, &x))
        return false;
    bool ok = count_of(&x) == n ||
              fail_at(p, open, "%d names for %d value%s", n, count_of(&x), count_of(&x) == 1 ? "" : "s");
    for (int k = 0; ok && k < n; k++)
        ok = bind_value(p, toks[k], item_of(&x, k));
    return ok && bound_value(p, toks, n, last);
}

/* output a, b: resolved at the end, against the top scope. */
static bool output_stmt(P *p)
{
    p->i++;
    do {
        if (!grow(p, (void **)&p->outputs, &p->ocap, p->noutputs + 1, sizeof(int)))
            return out_of_memory(p);
        p->outputs[p->noutputs] = p->i;
        if (!expect(p, T_NAME, "(output lists names)"))
            return false;
        p->noutputs++;
    } while (accept(p, T_COMMA));
    return true;
}

static bool statement(P *p, bool top, val *value, bool *expression)
{
    tk k = peek(p);
    *expression = false;
    if (k == T_INPUT || k == T_OUTPUT) {
        if (!top)
            return fail_at(p, p->i, "%s statements belong at the top level, not in a block", spelling[k]);
        if (k == T_OUTPUT)
            return output_stmt(p);
        while (peek(p) != T_NEWLINE && peek(p) != T_SEMI && peek(p) != T_EOF)
            p->i++; /* read before everything else (input_statements) */
        return true;
    }
    if (k == T_NAME && peek_at(p, 1) == T_ASSIGN)
        return binding(p, value);
    if (k == T_LPAREN && p->t[p->t[p->i].match + 1].kind == T_ASSIGN)
        return destructuring(p, value);
    *expression = true;
    return expr(p, value);
}

static bool at_end(const P *p, bool top) { return peek(p) == T_EOF || (!top && peek(p) == T_RBRACE); }

/* The statements of the program (top) or of a block, up to '}' or the
 * end.  *last: the value of the last binding or expression (at -1: none);
 * *trailing: that was a bare expression, which must be the last statement. */
static bool statements(P *p, bool top, val *last, bool *trailing)
{
    *last = (val){.kind = V_NUM, .at = -1};
    *trailing = false;
    for (;;) {
        while (accept(p, T_NEWLINE) || accept(p, T_SEMI))
            ;
        if (at_end(p, top))
            return true;
        if (*trailing)
            return fail_at(p, last->at, "an expression is only allowed as the last statement (bind it: NAME = ...)");
        val v = {.kind = V_NUM, .at = -1};
        bool expression;
        if (!statement(p, top, &v, &expression))
            return false;
        if (v.at >= 0) {
            *last = v;
            *trailing = expression;
        }
        if (!at_end(p, top) && peek(p) == T_LBRACK) /* x[0]: NumPy's indexing */
            return fail_at(p, p->i, "expected a new line or ';' after the statement, found '[': there is no "
                           "x[i] indexing (use take, gather or slice: tl ops take)");
        if (!at_end(p, top) && peek(p) != T_NEWLINE && peek(p) != T_SEMI)
            return expected(p, "a new line or ';' after the statement");
    }
}

/* ---------- inputs and outputs ---------- */

/* One declared input: NAME, NAME: f32, NAME: [n, 3], NAME: f32[_, 3]. */
static bool input_decl(P *p)
{
    int tok = p->i, s;
    if (!expect(p, T_NAME, "(an input's name)"))
        return false;
    if ((s = new_sym(p, S_INPUT, tok)) < 0 || !grow(p, (void **)&p->inputs, &p->icap, p->ninputs + 1, sizeof(int)))
        return out_of_memory(p);
    p->s[s].want = p->src + p->t[tok].off;
    p->s[s].wlen = (int)p->t[tok].len;
    p->inputs[p->ninputs++] = s;
    if (!bind_name(p, p->s[s].want, p->s[s].wlen, tok, s, 0))
        return false;
    if (!accept(p, T_COLON)) {
        push(p, p->input_decls, sym_json(p, s));
        return true;
    }
    cJSON *d = note(p, cJSON_CreateObject());
    put(p, d, "name", sym_json(p, s));
    push(p, p->input_decls, d);
    char buf[16];
    tl_dtype dt;
    snprintf(buf, sizeof buf, "%.*s", (int)(p->t[p->i].len < 15 ? p->t[p->i].len : 15), p->src + p->t[p->i].off);
    if (peek(p) == T_NAME && tl_dtype_parse(buf, &dt)) {
        put(p, d, "dtype", note(p, cJSON_CreateString(tl_dtype_name(dt))));
        p->i++;
    } else if (peek(p) != T_LBRACK) {
        return expected(p, "a dtype (f32, f64, i32, i64) or a shape such as [n, 3]");
    }
    if (!accept(p, T_LBRACK))
        return true;
    cJSON *shape = note(p, cJSON_CreateArray());
    put(p, d, "shape", shape);
    for (int n = 0; !accept(p, T_RBRACK); n++) {
        if (n && !expect(p, T_COMMA, "between sizes"))
            return false;
        if (n == TL_MAXDIM)
            return fail_at(p, p->i, "more than %d dimensions", TL_MAXDIM);
        const token *t = &p->t[p->i];
        char var[MAX_NAME + 1];
        snprintf(var, sizeof var, "%.*s", TEXT(p, p->i));
        if (t->kind == T_NUMBER && t->num == floor(t->num) && t->num >= 9007199254740992.0)
            return fail_at(p, p->i, "the size %s is too large (at most 2^53 - 1 = 9007199254740991)", var);
        if (t->kind == T_NUMBER && t->num == floor(t->num))
            push(p, shape, num_json(p, t->num));
        else if (t->kind == T_NAME && !strcmp(var, "_"))
            push(p, shape, note(p, cJSON_CreateNull()));
        else if (t->kind == T_NAME)
            push(p, shape, note(p, cJSON_CreateString(var)));
        else
            return expected(p, "a size: an integer, a size name or _ (any size)");
        p->i++;
    }
    return true;
}

/* The input statements, read before everything else: with them, the
 * inputs are declared wherever the statements stand. */
static bool input_statements(P *p)
{
    for (int k = 0; p->t[k].kind != T_EOF;) {
        bool start = k == 0 || p->t[k - 1].kind == T_NEWLINE || p->t[k - 1].kind == T_SEMI;
        if (start && p->t[k].kind == T_INPUT) {
            p->declared = true;
            p->i = k + 1;
            do {
                if (!input_decl(p))
                    return false;
            } while (accept(p, T_COMMA));
            if (peek(p) != T_NEWLINE && peek(p) != T_SEMI && peek(p) != T_EOF)
                return expected(p, "',' or the end of the input statement");
            k = p->i;
            continue;
        }
        k = p->t[k].match > k ? p->t[k].match + 1 : k + 1;
    }
    return true;
}

/* Whether symbol s is the value of a name that is visible now. */
static bool visible(P *p, int s)
{
    int k = p->s[s].want ? lookup(p, p->s[s].want, p->s[s].wlen) : -1;
    return k >= 0 && p->b[k].sym == s;
}

/* A value a binding may give its own name to: made by the expression
 * itself, or named only inside a block that has ended. */
static bool claimable(P *p, const val *x)
{
    return x->kind == V_REF && (x->fresh || (p->s[x->sym].kind == S_INNER && !visible(p, x->sym)));
}

static bool add_output(P *p, int s, int tok, int *outs, int *n)
{
    for (int k = 0; k < *n; k++)
        if (outs[k] == s)
            return fail_at(p, tok, "output \"%.*s\" is the same value as an output before it", TEXT(p, tok));
    outs[(*n)++] = s;
    return true;
}

/* The outputs: the output statements, else the trailing expression (the
 * output "out", or the name it is), else the last binding's names. */
static bool resolve_outputs(P *p, const val *last, bool trailing, int *outs, int *n)
{
    static const char out_name[] = "out";
    *n = 0;
    for (int k = 0; k < p->noutputs; k++) {
        int tok = p->outputs[k], s;
        /* an output names a value: a free name there is no input */
        if (!resolve_name(p, tok, "at the top level", false, &s) || !add_output(p, s, tok, outs, n))
            return false;
    }
    if (p->noutputs)
        return true;
    if (last->at < 0)
        return fail_at(p, p->nt - 1, "the program has no output: end it with an expression, a binding or an "
                       "output statement");
    if (trailing && last->kind == V_TUPLE)
        return fail_at(p, last->at, "a trailing expression is one output; take several values apart with "
                       "(a, b) = ... and list them in an output statement");
    if (trailing && (last->kind == V_NUM || claimable(p, last))) {
        int b = lookup(p, out_name, 3), s = sym_of(p, last);
        if (b >= 0)
            return fail_at(p, last->at, "the trailing expression is the output \"out\", but \"out\" is already "
                           "bound (at %d:%d)", p->t[p->b[b].tok].line, p->t[p->b[b].tok].col);
        if (s < 0)
            return out_of_memory(p);
        name_sym(p, s, out_name, 3);
        outs[(*n)++] = s;
        return true;
    }
    for (int k = 0; k < count_of(last); k++)
        if (!add_output(p, item_of(last, k)->sym, item_of(last, k)->at, outs, n))
            return false;
    return true;
}

/* ---------- names in the graph ---------- */

/* A set of names (open addressing); `next` (counters only) holds, per
 * name, the first suffix a search for it has not tried yet. */
typedef struct name_set {
    char **slot;
    long *next;
    size_t cap;
} name_set;

static size_t set_find(const name_set *t, const char *s)
{
    size_t i = name_hash(s, (int)strlen(s)) & (t->cap - 1);
    while (t->slot[i] && strcmp(t->slot[i], s))
        i = (i + 1) & (t->cap - 1);
    return i;
}

static bool set_has(const name_set *t, const char *s) { return t->slot[set_find(t, s)] != NULL; }

/* base, or base_2, base_3, ... (the base cut so that the name stays
 * within MAX_NAME): the first one no symbol has, and, but for a program
 * name kept as it is (own), that is no name written in the program.  The
 * counter of base saves trying again the suffixes taken before (a
 * thousand sibling lambdas with a parameter p). */
static char *free_name(name_set *finals, const name_set *written, name_set *counters, const char *base, int len,
                       bool own)
{
    char buf[MAX_NAME + 1];
    snprintf(buf, sizeof buf, "%.*s", len, base);
    size_t c = set_find(counters, buf);
    if (!counters->slot[c] && !(counters->slot[c] = strdup(buf)))
        return NULL;
    if (!counters->next[c])
        counters->next[c] = 1;
    for (long k = counters->next[c];; k++) {
        char suffix[24] = "";
        if (k > 1)
            snprintf(suffix, sizeof suffix, "_%ld", k);
        int keep = len + (int)strlen(suffix) > MAX_NAME ? MAX_NAME - (int)strlen(suffix) : len;
        snprintf(buf, sizeof buf, "%.*s%s", keep, base, suffix);
        if (!set_has(finals, buf) && ((own && k == 1) || !set_has(written, buf))) {
            counters->next[c] = k + 1;
            break;
        }
    }
    char *s = strdup(buf);
    if (s)
        finals->slot[set_find(finals, s)] = s;
    return s;
}

static bool new_set(name_set *t, int n, bool counted)
{
    t->cap = 64;
    while (t->cap < 2 * (size_t)n + 2)
        t->cap *= 2;
    t->next = counted ? calloc(t->cap, sizeof(long)) : NULL;
    return (t->slot = calloc(t->cap, sizeof(char *))) != NULL && (!counted || t->next);
}

/* Inputs and top-level names first (they keep theirs), then names in
 * blocks (renamed when taken), then generated ids. */
static bool choose_names(P *p)
{
    name_set finals, written, counters;
    char *copy = malloc(p->n + (size_t)p->nt + 1), *c = copy; /* the names written, NUL-terminated */
    bool ok = new_set(&finals, p->ns, false);
    ok = new_set(&written, p->nt, false) && ok;
    ok = new_set(&counters, p->ns, true) && ok && copy;
    for (int k = 0; ok && k < p->nt; k++)
        if (p->t[k].kind == T_NAME) {
            memcpy(c, p->src + p->t[k].off, p->t[k].len);
            c[p->t[k].len] = '\0';
            size_t i = set_find(&written, c);
            if (!written.slot[i])
                written.slot[i] = c;
            c += p->t[k].len + 1;
        }
    for (int pass = 0; ok && pass < 3; pass++)
        for (int k = 0; k < p->ns; k++) {
            sym *s = &p->s[k];
            char gen[64];
            if ((pass == 0) != (s->kind == S_INPUT || s->kind == S_TOP) || (pass == 2) != (s->kind == S_GEN))
                continue;
            if (s->kind == S_GEN) {
                int n = snprintf(gen, sizeof gen, "_%d_%d", p->t[s->tok].line, p->t[s->tok].col);
                if (s->part)
                    snprintf(gen + n, sizeof gen - (size_t)n, "_%d", s->part);
            }
            s->final = s->kind == S_GEN ? free_name(&finals, &written, &counters, gen, (int)strlen(gen), false)
                                        : free_name(&finals, &written, &counters, s->want, s->wlen, true);
            if (!s->final)
                p->oom = true;
        }
    for (size_t i = 0; counters.slot && i < counters.cap; i++)
        free(counters.slot[i]);
    free(counters.slot);
    free(counters.next);
    free(finals.slot); /* its names are the symbols' */
    free(written.slot);
    free(copy);
    return ok && !p->oom ? true : out_of_memory(p);
}

/* Replaces every placeholder, as a key or a string, by its symbol's name. */
static void fill_names(P *p, cJSON *j)
{
    for (cJSON *c = j; c; c = c->next) {
        if (c->string && c->string[0] == '\x01') {
            char *name = strdup(p->s[atoi(c->string + 1)].final);
            if (!name)
                p->oom = true;
            else
                free(c->string), c->string = name;
        }
        if (cJSON_IsString(c) && c->valuestring[0] == '\x01' &&
            !cJSON_SetValuestring(c, p->s[atoi(c->valuestring + 1)].final))
            p->oom = true;
        if (c->child)
            fill_names(p, c->child);
    }
}

static int by_first_use(const void *a, const void *b)
{
    const int *x = a, *y = b;
    return (x[1] > y[1]) - (x[1] < y[1]);
}

/* Without input statements, the free names in the order they first
 * appear in the text. */
static cJSON *implicit_inputs(P *p)
{
    int *pairs = malloc(sizeof(int) * 2 * (size_t)(p->ninputs + 1));
    cJSON *a = note(p, cJSON_CreateArray());
    if (!pairs)
        return p->oom = true, a;
    for (int k = 0; k < p->ninputs; k++)
        pairs[2 * k] = p->inputs[k], pairs[2 * k + 1] = p->input_first[k];
    qsort(pairs, (size_t)p->ninputs, 2 * sizeof(int), by_first_use);
    for (int k = 0; k < p->ninputs; k++)
        push(p, a, sym_json(p, pairs[2 * k]));
    free(pairs);
    return a;
}

/* ---------- the translation ---------- */

static bool translate(P *p)
{
    val last;
    bool trailing;
    int *outs = NULL, nouts = 0;
    if (!lex(p))
        return false;
    p->consts = note(p, cJSON_CreateObject());
    p->cur = note(p, cJSON_CreateArray());
    p->input_decls = note(p, cJSON_CreateArray());
    if (p->oom || !input_statements(p))
        return p->oom ? out_of_memory(p) : false;
    p->i = 0;
    if (!statements(p, true, &last, &trailing))
        return p->oom ? out_of_memory(p) : false;
    if (!(outs = malloc(sizeof(int) * (size_t)(p->noutputs + MAX_VALUES))))
        return out_of_memory(p);
    bool ok = resolve_outputs(p, &last, trailing, outs, &nouts);
    if (ok && !p->oom) {
        p->root = note(p, cJSON_CreateObject());
        put(p, p->root, "version", num_json(p, 1));
        put(p, p->root, "inputs", p->declared ? p->input_decls : implicit_inputs(p));
        if (p->declared)
            p->input_decls = NULL;
        if (p->consts && p->consts->child)
            put(p, p->root, "consts", p->consts), p->consts = NULL;
        put(p, p->root, "nodes", p->cur);
        p->cur = NULL;
        put(p, p->root, "outputs", syms_array(p, outs, nouts));
        ok = choose_names(p);
        if (ok)
            fill_names(p, p->root);
    }
    free(outs);
    return ok && (!p->oom || out_of_memory(p));
}

static void cleanup(P *p)
{
    for (int k = 0; k < p->ns; k++)
        free(p->s[k].final);
    while (p->arena) {
        struct chunk *c = p->arena;
        p->arena = c->next;
        free(c);
    }
    cJSON_Delete(p->root);
    cJSON_Delete(p->consts);
    cJSON_Delete(p->cur);
    cJSON_Delete(p->input_decls);
    free(p->t);
    free(p->s);
    free(p->b);
    free(p->heads);
    free(p->inputs);
    free(p->input_first);
    free(p->outputs);
}

/* ---------- the layout of tl compile ---------- */

static void write_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            fprintf(f, "\\%c", *c);
        else if (*c == '\n' || *c == '\t')
            fputs(*c == '\n' ? "\\n" : "\\t", f);
        else if (*c < 0x20 || *c == 0x7f)
            fprintf(f, "\\u%04x", *c);
        else
            fputc(*c, f);
    }
    fputc('"', f);
}

/* Integers as integers; everything else in the fewest digits that read
 * back to the same double. */
static void write_number(FILE *f, double v)
{
    char buf[TL_FMT_LEN];
    if (isinf(v))
        fputs(v > 0 ? "1e999" : "-1e999", f);
    else if (v == floor(v) && fabs(v) < 1e15 && !(v == 0 && signbit(v)))
        fprintf(f, "%.0f", v);
    else {
        tl_fmt_f64(buf, sizeof buf, v);
        fputs(buf, f);
    }
}

/* Any value, on one line. */
static void write_value(FILE *f, const cJSON *v)
{
    if (cJSON_IsNumber(v))
        write_number(f, v->valuedouble);
    else if (cJSON_IsString(v))
        write_string(f, v->valuestring);
    else if (cJSON_IsBool(v))
        fputs(cJSON_IsTrue(v) ? "true" : "false", f);
    else if (cJSON_IsArray(v) || cJSON_IsObject(v)) {
        fputc(cJSON_IsArray(v) ? '[' : '{', f);
        for (const cJSON *c = v->child; c; c = c->next) {
            if (c != v->child)
                fputs(", ", f);
            if (cJSON_IsObject(v)) {
                write_string(f, c->string);
                fputs(": ", f);
            }
            write_value(f, c);
        }
        fputc(cJSON_IsArray(v) ? ']' : '}', f);
    } else
        fputs("null", f);
}

static const char *const lead_keys[] = {"id", "op", "args", "cond", "count", "init", "state", "index", "params"};
static const char *const block_keys[] = {"then", "else", "body"};
#define NLEAD (int)(sizeof lead_keys / sizeof lead_keys[0])

static bool listed(const char *key, const char *const *keys, int n)
{
    for (int k = 0; k < n; k++)
        if (!strcmp(key, keys[k]))
            return true;
    return false;
}

static void write_key(FILE *f, const char *key, bool *sep)
{
    fputs(*sep ? ", " : "", f);
    write_string(f, key);
    fputs(": ", f);
    *sep = true;
}

static void write_nodes(FILE *f, const cJSON *nodes, int indent);

/* A node on its line: its keys in a fixed order (attributes as written),
 * blocks last, their nodes on lines of their own. */
static void write_node(FILE *f, const cJSON *node, int indent)
{
    bool sep = false;
    fprintf(f, "%*s{", indent, "");
    for (int k = 0; k < NLEAD; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(node, lead_keys[k]);
        if (v) {
            write_key(f, lead_keys[k], &sep);
            write_value(f, v);
        }
    }
    for (const cJSON *c = node->child; c; c = c->next)
        if (!listed(c->string, lead_keys, NLEAD) && !listed(c->string, block_keys, 3)) {
            write_key(f, c->string, &sep);
            write_value(f, c);
        }
    for (int k = 0; k < 3; k++) {
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(node, block_keys[k]);
        if (!b)
            continue;
        write_key(f, block_keys[k], &sep);
        fputs("{\"nodes\": ", f);
        write_nodes(f, cJSON_GetObjectItemCaseSensitive(b, "nodes"), indent + 2);
        fputs(", \"result\": ", f);
        write_value(f, cJSON_GetObjectItemCaseSensitive(b, "result"));
        fputc('}', f);
    }
    fputc('}', f);
}

/* Nodes at indent, the closing bracket two to the left. */
static void write_nodes(FILE *f, const cJSON *nodes, int indent)
{
    if (!nodes || !nodes->child) {
        fputs("[]", f);
        return;
    }
    fputs("[\n", f);
    for (const cJSON *c = nodes->child; c; c = c->next) {
        write_node(f, c, indent);
        fputs(c->next ? ",\n" : "\n", f);
    }
    fprintf(f, "%*s]", indent - 2, "");
}

static void write_graph(FILE *f, const cJSON *g)
{
    static const char *const keys[] = {"version", "doc", "inputs", "consts", "nodes", "outputs"};
    fputs("{", f);
    for (int k = 0; k < 6; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(g, keys[k]);
        if (!v)
            continue;
        fprintf(f, "%s\n  ", k ? "," : "");
        write_string(f, keys[k]);
        fputs(": ", f);
        if (k == 4) {
            write_nodes(f, v, 4);
        } else if (k == 3 && v->child) {
            fputs("{\n", f);
            for (const cJSON *c = v->child; c; c = c->next) {
                fputs("    ", f);
                write_string(f, c->string);
                fputs(": ", f);
                write_value(f, c);
                fputs(c->next ? ",\n" : "\n", f);
            }
            fputs("  }", f);
        } else {
            write_value(f, v);
        }
    }
    fputs("\n}\n", f);
}

/* The layout as a string (program.h). */
char *tl_graph_layout(const cJSON *g, tl_status *st)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (f) {
        write_graph(f, g);
        bool bad = ferror(f);
        if (fclose(f) || bad) {
            free(buf);
            buf = NULL;
        }
    }
    if (!buf)
        tl_fail(st, TL_ERUNTIME, "out of memory writing the graph's JSON");
    return buf;
}

/* ---------- loading ---------- */

/* ---------- placing messages at the text ---------- */

/* Where the text made the node or constant of this name (ctx: the
 * translator or the graph); false when it did not. */
typedef bool (*where_fn)(const void *ctx, const char *name, tl_srcpos *at);

/* A mention of a node or constant in a message: node "NAME" (OP),
 * node "NAME" (OP, MORE...), node "NAME" or const "NAME"; n the bytes it
 * takes: through the ")" or "," after OP, else the closing quote. */
typedef struct mention {
    bool node;
    char name[MAX_NAME + 1];
    size_t n;
    const char *op; /* after "(": the op's name, up to oplen */
    size_t oplen;
    bool more; /* (OP, MORE): MORE follows op */
} mention;

static bool mention_at(const char *q, mention *m)
{
    bool node = !strncmp(q, "node \"", 6);
    if (!node && strncmp(q, "const \"", 7))
        return false;
    const char *name = q + (node ? 6 : 7), *end = strchr(name, '"');
    if (!end || end - name > MAX_NAME)
        return false;
    *m = (mention){.node = node, .n = (size_t)(end + 1 - q)};
    memcpy(m->name, name, (size_t)(end - name));
    size_t oplen = node && !strncmp(end + 1, " (", 2) ? strcspn(end + 3, ",)") : 0;
    if (oplen && end[3 + oplen]) {
        m->op = end + 3;
        m->oplen = oplen;
        m->more = m->op[oplen] == ',';
        m->n += 2 + oplen + 1; /* through ")" or "," */
    }
    return true;
}

/* The message at the innermost place it names (tl_program_place). */
static void place_message(tl_status *st, const char *path, where_fn where, const void *ctx, tl_srcpos *pos)
{
    size_t pl = strlen(path);
    mention m;
    tl_srcpos at, inner = {0, 0};
    const char *rest, *innermost = NULL;
    pos->line = pos->col = 0;
    /* the message may come wrapped ("input "x" at [0] plus the step: FILE:
     * ..."): the place goes first, the wrapping after it */
    const char *at_path = pl ? strstr(st->msg, path) : NULL;
    for (; at_path; at_path = strstr(at_path + 1, path))
        if ((at_path == st->msg || (at_path - st->msg >= 2 && !strncmp(at_path - 2, ": ", 2))) &&
            !strncmp(at_path + pl, ": ", 2))
            break;
    if (!at_path)
        return;
    size_t wrapped = at_path == st->msg ? 0 : (size_t)(at_path - st->msg) - 2;
    rest = at_path + pl + 2;
    for (const char *q = rest; *q; q++)
        if (mention_at(q, &m) && where(ctx, m.name, &at) && at.line)
            innermost = q, inner = at;
    if (!innermost)
        return;
    /* a constant's own fault (a file it cannot read, a number out of
     * range): the node that happened to read it first is beside the point */
    if (mention_at(innermost, &m) && !m.node)
        rest = innermost;
    char out[sizeof st->msg];
    size_t k = (size_t)snprintf(out, sizeof out, "%s:%d:%d: %.*s%s", path, inner.line, inner.col, (int)wrapped,
                                st->msg, wrapped ? ": " : "");
    k = k < sizeof out ? k : sizeof out - 1;
    for (const char *q = rest; *q && k + 1 < sizeof out;) {
        if (!mention_at(q, &m) || !where(ctx, m.name, &at) || !at.line) {
            out[k++] = *q++;
            continue;
        }
        char here[40] = "";
        if (q != innermost)
            snprintf(here, sizeof here, " at %d:%d", at.line, at.col);
        if (m.op)
            k += (size_t)snprintf(out + k, sizeof out - k, "%.*s%s%s", (int)m.oplen, m.op, here,
                                  m.more ? " (" : "");
        else
            k += (size_t)snprintf(out + k, sizeof out - k, "the %s%s", m.node ? "node" : "constant", here);
        q += m.n;
        if (m.more && *q == ' ')
            q++;
    }
    out[k < sizeof out ? k : sizeof out - 1] = '\0';
    snprintf(st->msg, sizeof st->msg, "%s", out);
    *pos = inner;
}

static bool sym_place(const void *ctx, const char *name, tl_srcpos *at)
{
    const P *p = ctx;
    for (int k = 0; k < p->ns; k++)
        if (p->s[k].final && !strcmp(p->s[k].final, name)) {
            *at = (tl_srcpos){p->t[p->s[k].tok].line, p->t[p->s[k].tok].col};
            return true;
        }
    return false;
}

static bool slot_place(const void *ctx, const char *name, tl_srcpos *at)
{
    const tl_graph *g = ctx;
    int s = tl_graph_slot(g, name);
    if (s < 0)
        return false;
    *at = g->slot_pos[s];
    return true;
}

void tl_program_place(const tl_graph *g, tl_status *st, tl_srcpos *pos)
{
    pos->line = pos->col = 0;
    if (g && g->slot_pos)
        place_message(st, g->path, slot_place, g, pos);
}

bool tl_program_missing_input(const tl_graph *g, tl_tensor *const *in, tl_status *st)
{
    int miss = -1;
    for (int i = 0; i < g->ninputs; i++)
        if (!in[i]) {
            if (miss >= 0)
                return false;
            miss = i;
        }
    int slot = miss >= 0 ? g->inputs[miss].slot : -1;
    if (slot < 0 || !g->slot_pos || !g->slot_pos[slot].line)
        return false;
    /* the names the program could have meant: given inputs and the
     * values it names (generated ids start with "_") */
    const char **names = malloc(sizeof *names * (size_t)(g->nslots + 1));
    int n = 0;
    for (int s = 0; names && s < g->nslots; s++) {
        int k = g->slot_kind[s] == TL_SLOT_INPUT ? tl_graph_input_index(g, g->slot_name[s]) : -1;
        if ((k >= 0 && in[k]) || (g->slot_kind[s] == TL_SLOT_NODE && g->slot_name[s][0] != '_'))
            names[n++] = g->slot_name[s];
    }
    const char *near = names ? tl_nearest(g->inputs[miss].name, names, n) : NULL;
    if (near)
        tl_fail(st, TL_EINPUT, "%s:%d:%d: missing input \"%s\" (did you mean \"%s\"?)", g->path,
                g->slot_pos[slot].line, g->slot_pos[slot].col, g->inputs[miss].name, near);
    free(names);
    return near != NULL;
}

/* What the graph keeps of the program: its text and where each slot's
 * name came from. */
static tl_graph *keep_places(P *p, tl_graph *g)
{
    g->source = malloc(p->n + 1);
    g->slot_pos = calloc((size_t)g->nslots + 1, sizeof *g->slot_pos);
    if (!g->source || !g->slot_pos) {
        tl_graph_free(g);
        return out_of_memory(p), NULL;
    }
    memcpy(g->source, p->src, p->n);
    g->source[p->n] = '\0';
    g->source_len = p->n;
    for (int k = 0; k < p->ns; k++) {
        int s = p->s[k].final ? tl_graph_slot(g, p->s[k].final) : -1;
        if (s >= 0)
            g->slot_pos[s] = (tl_srcpos){p->t[p->s[k].tok].line, p->t[p->s[k].tok].col};
    }
    return g;
}

static char *program_json(P *p, const char *text, size_t len, const char *path, tl_srcpos *pos, tl_status *st)
{
    *p = (P){.src = text, .n = len, .path = path, .st = st, .pos = pos};
    pos->line = pos->col = 0;
    return translate(p) ? tl_graph_layout(p->root, st) : NULL;
}

static tl_graph *load_json(P *p, const char *json, const tl_graph_options *o)
{
    tl_graph *g = tl_graph_parse_with(json, strlen(json), p->path, o, p->st);
    if (!g && p->st->code == TL_EINPUT)
        place_message(p->st, p->path, sym_place, p, p->pos);
    return g;
}

tl_graph *tl_program_load(const char *text, size_t len, const char *path, const tl_graph_options *o,
                          tl_srcpos *pos, tl_status *st)
{
    P p;
    char *json = program_json(&p, text, len, path, pos, st);
    tl_graph *g = json ? load_json(&p, json, o) : NULL;
    if (g)
        g = keep_places(&p, g);
    free(json);
    cleanup(&p);
    return g;
}

char *tl_program_compile(const char *text, size_t len, const char *path, bool is_program,
                         const tl_graph_options *o, tl_srcpos *pos, tl_status *st)
{
    if (is_program) {
        P p;
        char *json = program_json(&p, text, len, path, pos, st);
        tl_graph *g = json ? load_json(&p, json, o) : NULL;
        if (!g)
            free(json), json = NULL;
        tl_graph_free(g);
        cleanup(&p);
        return json;
    }
    pos->line = pos->col = 0;
    tl_graph *g = tl_graph_parse_with(text, len, path, o, st);
    if (!g)
        return NULL;
    tl_graph_free(g);
    cJSON *doc = cJSON_ParseWithLength(text, len);
    char *json = doc ? tl_graph_layout(doc, st) : NULL;
    if (!doc)
        tl_fail(st, TL_ERUNTIME, "%s: out of memory reading the graph's JSON", path);
    cJSON_Delete(doc);
    return json;
}
