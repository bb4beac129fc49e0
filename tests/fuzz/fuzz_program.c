/* libFuzzer harness: the program language (graph/program.h) and recipe
 * equality (graph/recipe.h).
 *
 * Every input goes through tl_program_load: lexer, parser, translator and
 * the graph loader.  A failure must be TL_EINPUT with a message (placed,
 * when it has a place, as "fuzz.tl:LINE:COL: "), or out of memory.  A
 * program that loads must also compile; its compiled JSON must load as a
 * graph that is the same recipe as the program, each must be the same
 * recipe as itself, and laying the JSON out again must give the same
 * text.  Recipes with file constants are not compared (that reads the
 * disk); nothing is run (fuzz_graph runs graphs). */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/program.h"
#include "graph/recipe.h"
#include "fuzz_common.h"

static void check_failure(const tl_status *st, const tl_srcpos *pos)
{
    if (st->code == TL_ERUNTIME && strstr(st->msg, "out of memory"))
        return;
    if (st->code != TL_EINPUT || !st->msg[0])
        FUZZ_FAIL("failed with code %d: %s", (int)st->code, st->msg);
    char where[64];
    snprintf(where, sizeof where, "fuzz.tl:%d:%d: ", pos->line, pos->col);
    if (pos->line && strncmp(st->msg, where, strlen(where)))
        FUZZ_FAIL("the message is not placed at %s: %s", where, st->msg);
}

static bool reads_files(const tl_graph *g)
{
    for (int i = 0; i < g->nconsts; i++)
        if (g->consts[i].kind == TL_CONST_FILE)
            return true;
    return false;
}

static void expect_same(const tl_graph *a, const tl_graph *b, const char *what)
{
    tl_status st = {0};
    tl_recipe_diff d;
    if (tl_recipe_compare(a, b, &d, &st)) {
        if (st.code == TL_ERUNTIME && strstr(st.msg, "out of memory"))
            return;
        FUZZ_FAIL("%s: comparing failed: %s", what, st.msg);
    }
    if (!d.equal)
        FUZZ_FAIL("%s: not the same recipe:\n  A: %s\n  B: %s", what, d.a, d.b);
    tl_recipe_diff_free(&d);
}

int fuzz_program_one(const uint8_t *data, size_t size);
int fuzz_program_one(const uint8_t *data, size_t size)
{
    tl_status st = {0};
    tl_srcpos pos;
    const char *text = (const char *)data;
    tl_graph *g = tl_program_load(text, size, "fuzz.tl", NULL, &pos, &st);
    if (!g) {
        check_failure(&st, &pos);
        return 0;
    }
    char *json = tl_program_compile(text, size, "fuzz.tl", true, NULL, &pos, &st);
    if (!json)
        FUZZ_FAIL("the program loads but does not compile: %s", st.msg);
    tl_graph *h = tl_graph_parse(json, strlen(json), "fuzz.json", &st);
    if (!h)
        FUZZ_FAIL("the compiled JSON does not load: %s\n%s", st.msg, json);
    if (!reads_files(g)) {
        expect_same(g, g, "the program and itself");
        expect_same(g, h, "the program and its compiled JSON");
    }
    char *again = tl_program_compile(json, strlen(json), "fuzz.json", false, NULL, &pos, &st);
    if (!again || strcmp(again, json))
        FUZZ_FAIL("laying the compiled JSON out again changes it:\n%s\n%s", json, again ? again : st.msg);
    free(again);
    free(json);
    tl_graph_free(h);
    tl_graph_free(g);
    return 0;
}

FUZZ_ENTRY(program)
