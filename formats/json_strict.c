/* What JSON forbids and cJSON lets through, checked alike for graphs and
 * for tl's json result files: NUL bytes, raw control characters and
 * \u0000 in strings, nesting past cJSON's limit, keys given twice. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "json_strict.h"

#define STR_(x) #x
#define STR(x) STR_(x)

/* What JSON forbids and cJSON lets through: a NUL byte anywhere, a raw
 * control character inside a string, and \u0000 (cJSON would cut the
 * string there, so "x\u0000y" would silently be "x").  Returns the offset
 * of the first, or len. */
size_t tl_json_hazard(const char *text, size_t len, const char **why)
{
    bool in_string = false;
    int depth = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == 0)
            return *why = "a NUL byte", i;
        if (!in_string) {
            in_string = c == '"';
            depth += (c == '[' || c == '{') - (c == ']' || c == '}');
            if (depth > MAX_JSON_DEPTH)
                return *why = "nested more than " STR(MAX_JSON_DEPTH) " levels deep", i;
            continue;
        }
        if (c < 0x20)
            return *why = "a raw control character in a string (escape it)", i;
        if (c == '"')
            in_string = false;
        else if (c == '\\' && i + 1 < len) {
            if (text[i + 1] == 'u' && i + 5 < len && !memcmp(text + i + 2, "0000", 4))
                return *why = "\\u0000 in a string", i;
            i++; /* skip the escaped character */
        }
    }
    return len;
}

static int by_key(const void *a, const void *b)
{
    return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

/* A key of object v given twice, or NULL: sorted, so a huge object costs
 * n log n, not n^2.  *oom is set when the sort could not be done. */
static const cJSON *duplicate_key(const cJSON *v, bool *oom)
{
    size_t n = 0, k = 0;
    for (const cJSON *c = v->child; c; c = c->next)
        n++;
    if (n < 2)
        return NULL;
    if (n <= 8) { /* the same answer (the first duplicated key in sorted order) without sorting */
        const cJSON *dup = NULL;
        for (const cJSON *a = v->child; a; a = a->next)
            for (const cJSON *b = a->next; b; b = b->next)
                if (!strcmp(a->string, b->string) && (!dup || strcmp(a->string, dup->string) < 0))
                    dup = b;
        return dup;
    }
    const cJSON **keys = malloc(n * sizeof *keys);
    if (!keys) {
        *oom = true;
        return NULL;
    }
    for (const cJSON *c = v->child; c; c = c->next)
        keys[k++] = c;
    qsort(keys, n, sizeof *keys, by_key);
    const cJSON *dup = NULL;
    for (k = 1; k < n && !dup; k++)
        if (!strcmp(keys[k - 1]->string, keys[k]->string))
            dup = keys[k];
    free(keys);
    return dup;
}

/* Duplicate keys are an error (JSON parsers disagree about them). */
const cJSON *tl_json_duplicate(const cJSON *v, int depth, bool *oom)
{
    if (depth > MAX_JSON_DEPTH)
        return NULL;
    const cJSON *r = cJSON_IsObject(v) ? duplicate_key(v, oom) : NULL;
    for (const cJSON *c = v->child; c && !r && !*oom; c = c->next)
        r = tl_json_duplicate(c, depth + 1, oom);
    return r;
}

