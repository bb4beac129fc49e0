/* The graph loader's fast path (the top-level nodes read one at a time,
 * graph/graph.c) against the whole-document path it falls back to: every
 * graph file of the repository, large generated graphs, errors deep in
 * them (line and column, the same words), texts at the edges of JSON, the
 * mapped file, and what the nodes share (numbers, attribute records). */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec/exec.h"
#include "formats/npy.h"
#include "tests/graph_same.h"

/* Loads text both ways: both load the same graph, or both fail with the
 * same message (returned). */
static const char *both_ways(const char *text, size_t len, const char *path)
{
    static tl_status a;
    tl_status b = {0};
    tl_status_clear(&a);
    tl_graph *g = tl_graph_parse(text, len, path, &a), *h = tl_graph_parse_dom(text, len, path, NULL, &b);
    cr_assert(!g == !h, "%s: loads one way only: %s%s", path, a.msg, b.msg);
    if (g) {
        graph_diff d;
        const char *why = graph_same(g, h, &d);
        cr_assert(!why, "%s: the two ways differ: %s", path, why);
    } else {
        cr_assert_eq(a.code, b.code, "%s", path);
        cr_assert_str_eq(a.msg, b.msg, "%s", path);
    }
    tl_graph_free(g);
    tl_graph_free(h);
    return a.msg;
}

static const char *both_ways_s(const char *text)
{
    return both_ways(text, strlen(text), "t.json");
}

Test(loader, every_graph_file_loads_the_same_both_ways)
{
    static const char *const patterns[] = {
        "examples/*.json",       "tests/bench/*.json",         "tests/cli/*.json",
        "tests/cli/*/*.json",    "tests/cli/outside/sub/*.json", "tests/fixtures/*/*.json",
        "tests/fuzz/corpus/graph/*", "tests/fuzz/regressions/graph/*", "tests/gpu/*.json",
    };
    int files = 0, loaded = 0;
    for (size_t p = 0; p < sizeof patterns / sizeof patterns[0]; p++) {
        glob_t gl;
        if (glob(patterns[p], 0, NULL, &gl))
            continue;
        for (size_t i = 0; i < gl.gl_pathc; i++) {
            unsigned char *buf;
            size_t len;
            tl_status st = {0};
            cr_assert(!tl_slurp_path(gl.gl_pathv[i], &buf, &len, &st), "%s: %s", gl.gl_pathv[i], st.msg);
            loaded += !both_ways((const char *)buf, len, gl.gl_pathv[i])[0];
            files++;
            free(buf);
        }
        globfree(&gl);
    }
    cr_expect_gt(files, 900, "only %d graph files found (run from the repository root)", files);
    cr_expect_gt(loaded, 300, "only %d of %d files loaded", loaded, files);
}

/* The bench's graph (tests/bench/bench.py big_graph): a chain of n
 * add/mul nodes, node i on line i + 2. */
static char *chain(int n, size_t *len)
{
    size_t cap = 128 + (size_t)n * 80;
    char *s = malloc(cap), *p = s;
    cr_assert(s);
    p += sprintf(p, "{\"version\": 1, \"doc\": \"%d nodes\", \"inputs\": [\"x\"], \"nodes\": [\n", n);
    for (int i = 0; i < n; i++) {
        char prev[16];
        snprintf(prev, sizeof prev, i ? "node_%06d" : "x", i - 1);
        p += sprintf(p, "  {\"id\": \"node_%06d\", \"op\": \"%s\", \"args\": [\"%s\", 1.0000001]},\n", i,
                     i % 2 ? "add" : "mul", prev);
    }
    p += sprintf(p, "  {\"id\": \"out\", \"op\": \"neg\", \"args\": [\"node_%06d\"]}\n], \"outputs\": \"out\"}\n", n - 1);
    *len = (size_t)(p - s);
    return s;
}

/* The text of node i of chain() (its line). */
static char *node_line(char *text, int i)
{
    char id[32];
    snprintf(id, sizeof id, "\"node_%06d\", \"op\"", i);
    char *at = strstr(text, id);
    cr_assert(at);
    while (at[-1] != '\n')
        at--;
    return at;
}

#define BIG 120000

Test(loader, a_large_chain_takes_the_fast_path_and_loads_as_before)
{
    size_t len;
    char *text = chain(BIG, &len);
    unsigned long dom = tl_graph_dom_loads();
    tl_status st = {0};
    tl_graph *g = tl_graph_parse(text, len, "t.json", &st);
    cr_assert(g, "%s", st.msg);
    cr_expect_eq(tl_graph_dom_loads(), dom, "the fast path gave up on a plain chain");
    tl_graph *h = tl_graph_parse_dom(text, len, "t.json", NULL, &st);
    cr_assert(h, "%s", st.msg);
    graph_diff d;
    const char *why = graph_same(g, h, &d);
    cr_expect(!why, "%s", why);
    cr_expect_eq(g->nnodes, BIG + 1);
    cr_expect_eq(g->nslots, BIG + 2);
    cr_expect_eq(g->nnums, 1, "one number, one id (%d)", g->nnums);
    const tl_node *n = &g->top.nodes[99999];
    cr_expect_str_eq(n->name, "node_099999");
    cr_expect_eq(n->op, TL_OP_ADD);
    cr_expect_eq(n->nargs, 2);
    cr_expect_str_eq(g->slot_name[n->args[0].slot], "node_099998");
    cr_expect(n->args[1].slot < 0 && n->args[1].num == 1.0000001);
    cr_expect_eq(n->nfree, 1, "node_099998 is freed after its one use");
    cr_expect_eq(n->attrs, &tl_attrs_default, "a node without attributes shares the defaults");
    cr_expect_eq(n->flow, g->top.nodes[5].flow, "plain nodes share one flow record");
    cr_expect(!n->flow->then_b && !n->flow->body && n->flow->cond.slot == -1 && n->flow->index_slot == -1);
    cr_expect_eq(tl_graph_input_index(g, "x"), 0);
    cr_expect_eq(tl_graph_top_slot(g, "node_100000"), g->top.nodes[100000].out[0]);
    tl_graph_free(g);
    tl_graph_free(h);
    free(text);
}

Test(loader, a_chain_runs_to_the_value_computed_here)
{
    size_t len;
    char *text = chain(3001, &len);
    tl_status st = {0};
    tl_graph *g = tl_graph_parse(text, len, "t.json", &st);
    cr_assert(g, "%s", st.msg);
    tl_tensor *x = tl_tensor_scalar(TL_F64, 1.5, &st);
    tl_result *r = NULL;
    cr_assert(!tl_run(g, &x, NULL, &r, &st), "%s", st.msg);
    double y = 1.5;
    for (int i = 0; i < 3001; i++)
        y = i % 2 ? y + 1.0000001 : y * 1.0000001;
    cr_expect_eq(tl_tensor_get(tl_result_output(r, 0), 0), -y);
    tl_result_free(r);
    tl_tensor_unref(x);
    tl_graph_free(g);
    free(text);
}

/* Line and column of the first occurrence of what in text. */
static void where(const char *text, const char *at, int *line, int *col)
{
    *line = 1;
    *col = 1;
    for (const char *p = text; p < at; p++) {
        if (*p == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

/* chain(BIG) with node 99999 (the 100000th, on line 100001) edited:
 * the first `from` in its line becomes `to`. */
static char *broken(const char *from, const char *to, size_t *len, int *col)
{
    char *text = chain(BIG, len);
    char *line = node_line(text, 99999), *at = strstr(line, from);
    cr_assert(at && at < strchr(line, '\n'));
    size_t nf = strlen(from), nt = strlen(to);
    char *out = malloc(*len + nt + 1);
    cr_assert(out);
    size_t head = (size_t)(at - text);
    memcpy(out, text, head);
    memcpy(out + head, to, nt);
    memcpy(out + head + nt, at + nf, *len - head - nf);
    *len = *len - nf + nt;
    int l;
    where(out, out + head, &l, col);
    cr_assert_eq(l, 100001);
    free(text);
    return out;
}

/* The message a text gives, both ways alike; the fast path gave up. */
static const char *error_both_ways(const char *text, size_t len)
{
    unsigned long dom = tl_graph_dom_loads();
    const char *msg = both_ways(text, len, "t.json");
    cr_expect(msg[0], "loaded");
    cr_expect_eq(tl_graph_dom_loads(), dom + 2, "the error came from the whole-document path");
    return msg;
}

Test(loader, syntax_errors_deep_in_the_nodes_keep_their_line_and_column)
{
    size_t len;
    int col;
    char want[160];
    char *text = broken("\"op\": ", "\"op\" ", &len, &col);
    snprintf(want, sizeof want, "t.json:100001:%d: malformed JSON: expected ':' after the key, found '\"'", col + 5);
    cr_expect_str_eq(error_both_ways(text, len), want);
    free(text);

    text = broken("1.0000001]}", "1.0000001}", &len, &col);
    snprintf(want, sizeof want, "t.json:100001:%d: malformed JSON: expected ',' or ']' after a value in an array, "
             "found '}'", col + 9);
    cr_expect_str_eq(error_both_ways(text, len), want);
    free(text);

    text = broken("1.0000001", "01.0000001", &len, &col);
    /* cJSON takes 01 (as before): the graph loads, the fast way */
    unsigned long dom = tl_graph_dom_loads();
    cr_expect_str_eq(both_ways(text, len, "t.json"), "");
    cr_expect_eq(tl_graph_dom_loads(), dom + 1);
    free(text);

    text = broken("\"node_099999\"", "\"node_\xff\"", &len, &col);
    snprintf(want, sizeof want, "t.json:100001:%d: invalid UTF-8", col + 6);
    cr_expect_str_eq(error_both_ways(text, len), want);
    free(text);

    text = broken("\"node_099999\"", "\"node_\x01\"", &len, &col);
    snprintf(want, sizeof want, "t.json:100001:%d: malformed JSON: a raw control character in a string (escape it)",
             col + 6);
    cr_expect_str_eq(error_both_ways(text, len), want);
    free(text);

    text = broken("},", "}, ]", &len, &col); /* the array ends early: what follows is not a key */
    cr_expect(strstr(error_both_ways(text, len), "t.json:100001:"), "%s", error_both_ways(text, len));
    free(text);
}

Test(loader, meaning_errors_deep_in_the_nodes_read_as_before)
{
    size_t len;
    int col;
    char *text = broken("\"add\"", "\"addd\"", &len, &col);
    cr_expect_str_eq(error_both_ways(text, len),
                     "t.json: node \"node_099999\": unknown op \"addd\" (did you mean \"add\"?)");
    free(text);

    text = broken("\"op\": \"add\"", "\"op\": \"add\", \"op\": \"mul\"", &len, &col);
    cr_expect_str_eq(error_both_ways(text, len), "t.json: duplicate key \"op\"");
    free(text);

    text = broken("\"node_099998\"", "\"node_199998\"", &len, &col);
    cr_expect_str_eq(error_both_ways(text, len),
                     "t.json: node \"node_099999\" (add): unknown name \"node_199998\" (not defined before this point)");
    free(text);

    text = broken("\"node_099999\"", "\"node_099997\"", &len, &col);
    cr_expect_str_eq(error_both_ways(text, len), "t.json: node \"node_099997\" (add): name \"node_099997\" is defined twice");
    free(text);

    text = broken("1.0000001]", "1.0000001], \"axis\": 0", &len, &col);
    cr_expect(strstr(error_both_ways(text, len), "unknown attribute \"axis\" (add takes no attributes)"), "%s",
              error_both_ways(text, len));
    free(text);
}

Test(loader, texts_at_the_edges_load_alike_both_ways)
{
    static const char *const texts[] = {
        "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[],\"outputs\":\"x\"}",
        "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[ \n\t ],\"outputs\":\"x\"}",
        "\xEF\xBB\xBF{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[{\"id\":\"y\",\"op\":\"neg\",\"args\":[\"x\"]}],"
        "\"outputs\":\"y\"}",
        "{\"version\":1,\"inputs\":[\"x\"],\"nod\\u0065s\":[{\"id\":\"y\",\"op\":\"neg\",\"args\":[\"x\"]}],"
        "\"outputs\":\"y\"}",
        "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[],\"nodes\":[{\"id\":\"y\",\"op\":\"neg\",\"args\":[\"x\"]}],"
        "\"outputs\":\"y\"}",
        "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":{},\"outputs\":\"x\"}",
        "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[1],\"outputs\":\"x\"}",
        "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[[]],\"outputs\":\"x\"}",
        "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[{\"id\":\"y\",\"op\":\"neg\",\"args\":[\"x\"]},],\"outputs\":\"y\"}",
        "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[,{\"id\":\"y\",\"op\":\"neg\",\"args\":[\"x\"]}],\"outputs\":\"y\"}",
        "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[{\"id\":\"y\",\"op\":\"neg\",\"args\":[\"x\"]}"
        "{\"id\":\"z\",\"op\":\"neg\",\"args\":[\"y\"]}],\"outputs\":\"z\"}",
        "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[{\"id\":\"y\",\"op\":\"neg\",\"args\":[\"x\"]}],\"outputs\":\"y\"} x",
        "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[{\"id\":\"y\",\"op\":\"neg\",\"args\":[\"x\"]}],\"outputs\":\"y\"}\n\r\t ",
        "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[{\"id\":\"y\",\"op\":\"neg\",\"args\":[\"x\"]}],\"outputs\":\"y\"",
        "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[{\"id\":\"y\",\"op\":\"neg\",\"args\":[\"x\"]}",
        "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[{\"id\":\"y\",\"op\":\"neg\",\"args\":[\"x\"]",
        "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[\x01{\"id\":\"y\",\"op\":\"neg\",\"args\":[\"x\"]}\x02,\x1f"
        "{\"id\":\"z\",\"op\":\"neg\",\"args\":[\"y\"]}\x7f],\"outputs\":\"z\"}",
        "{\"nodes\":[{\"id\":\"y\",\"op\":\"mul\",\"args\":[\"x\",\"k\"]}],\"outputs\":\"y\",\"consts\":{\"k\":2},"
        "\"inputs\":[\"x\"],\"version\":1}",
        "{\"version\":1,\"doc\":\"nodes\",\"inputs\":[\"x\"],\"nodes\":[{\"id\":\"nodes\",\"op\":\"neg\",\"args\":[\"x\"],"
        "\"nodes\":[]}],\"outputs\":\"nodes\"}",
        "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[{\"id\":\"y\",\"op\":\"neg\",\"args\":[\"x\"]}],\"outputs\":\"y\","
        "\"x\":1,\"x\":2}",
        "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[{\"id\":\"y\",\"op\":\"neg\",\"args\":[\"x\"],\"args\":[\"x\"]}],"
        "\"outputs\":\"y\"}",
        "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[{\"id\":\"y\\u0000\",\"op\":\"neg\",\"args\":[\"x\"]}],\"outputs\":\"y\"}",
        "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[{\"id\":\"y\",\"op\":\"neg\",\"args\":[\"x\"]}],\"outputs\":\"y\"}}",
        "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[{\"id\":\"y\",\"op\":\"neg\",\"args\":[\"x\"]}]],\"outputs\":\"y\"}",
        "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[{\"id\":\"y\",\"op\":\"neg\",\"args\":[\"x\"]}],\"outputs\":\"y\",}",
        "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[{\"id\":\"y\",\"op\":\"neg\",\"args\":[\"x\"]}],\"outputs\":\"y\"",
        "[{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[],\"outputs\":\"x\"}]",
        "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[{\"id\":[\"y\",\"z\"],\"op\":\"neg\",\"args\":[\"x\"]}],\"outputs\":\"y\"}",
        "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[{\"id\":\"y\",\"op\":\"neg\",\"args\":[\"x\\\"]}],\"outputs\":\"y\"}",
        "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[{\"id\":\"y\",\"op\":\"neg\",\"args\":[\"x\\\\\"]}],\"outputs\":\"y\"}",
        " \n{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[{\"id\":\"y\",\"op\":\"clamp\",\"args\":[\"x\"],\"min\":-1e400}],"
        "\"outputs\":\"y\"}",
        "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[{\"id\":\"c\",\"op\":\"sum\",\"args\":[\"x\"]},"
        "{\"id\":\"r\",\"op\":\"if\",\"cond\":\"c\",\"then\":{\"nodes\":[{\"id\":\"a\",\"op\":\"neg\",\"args\":[\"x\"]}],"
        "\"result\":\"a\"},\"else\":{\"nodes\":[],\"result\":\"x\"}},"
        "{\"id\":\"s\",\"op\":\"iterate\",\"count\":3,\"init\":[\"r\"],\"state\":[\"t\"],\"index\":\"i\",\"body\":{\"nodes\":"
        "[{\"id\":\"u\",\"op\":\"mul\",\"args\":[\"t\",0.5]}],\"result\":\"u\"}},"
        "{\"id\":\"m\",\"op\":\"map\",\"args\":[\"s\"],\"params\":[\"p\"],\"body\":{\"nodes\":[{\"id\":\"q\",\"op\":\"mul\","
        "\"args\":[\"p\",0.5]}],\"result\":\"q\"}},{\"id\":\"k\",\"op\":\"take\",\"args\":[\"m\"],\"axis\":0,"
        "\"indices\":[0,0]}],\"outputs\":[\"m\",\"k\"]}",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        both_ways(texts[i], strlen(texts[i]), "t.json");
    /* a NUL after the object (strlen stops before it above) */
    static const char nul[] = "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[],\"outputs\":\"x\"}\n\0";
    cr_expect(strstr(both_ways(nul, sizeof nul - 1, "t.json"), "a NUL byte"));
    /* ... and where the fast path looks for the nodes array (found by the fuzzer) */
    static const char nul2[] = "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":\0[],\"outputs\":\"x\"}";
    cr_expect(strstr(both_ways(nul2, sizeof nul2 - 1, "t.json"), "t.json:1:37: malformed JSON: a NUL byte"), "%s",
              both_ways(nul2, sizeof nul2 - 1, "t.json"));
    static const char nul3[] = "{\"version\":1,\"inputs\":[\"x\"],\"nodes\"\0:[],\"outputs\":\"x\"}";
    cr_expect(strstr(both_ways(nul3, sizeof nul3 - 1, "t.json"), "a NUL byte"));
    static const char nul4[] = "\0{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[],\"outputs\":\"x\"}";
    cr_expect(strstr(both_ways(nul4, sizeof nul4 - 1, "t.json"), "a NUL byte"));
}

Test(loader, the_fast_path_takes_keys_in_any_order_and_nested_blocks)
{
    const char *keys_after = "{\"nodes\":[{\"id\":\"y\",\"op\":\"mul\",\"args\":[\"x\",\"k\"]}],\"outputs\":\"y\","
                             "\"consts\":{\"k\":2},\"inputs\":[\"x\"],\"version\":1}";
    const char *blocks = "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[{\"id\":\"c\",\"op\":\"sum\",\"args\":[\"x\"]},"
                         "{\"id\":\"r\",\"op\":\"if\",\"cond\":\"c\",\"then\":{\"nodes\":[{\"id\":\"a\",\"op\":\"neg\","
                         "\"args\":[\"x\"]}],\"result\":\"a\"},\"else\":{\"nodes\":[],\"result\":\"x\"}}],"
                         "\"outputs\":\"r\"}";
    unsigned long dom = tl_graph_dom_loads();
    cr_expect_str_eq(both_ways_s(keys_after), "");
    cr_expect_str_eq(both_ways_s(blocks), "");
    cr_expect_eq(tl_graph_dom_loads(), dom + 2, "only the comparisons went the whole-document way");
}

/* One node {"id": "a", <node>} in a graph of input x, loaded both ways. */
static const char *node_both_ways(const char *node)
{
    char text[512];
    snprintf(text, sizeof text, "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[{\"id\":\"a\",%s},"
             "{\"id\":\"b\",\"op\":\"neg\",\"args\":[\"a\"]}],\"outputs\":\"b\"}", node);
    return both_ways_s(text);
}

/* graph.c reads the common node without cJSON (flat_read): numbers and
 * shapes at its edges, each read there or by cJSON, load alike. */
Test(loader, the_common_node_read_without_cjson_loads_as_cjson_reads_it)
{
    static const char *const nums[] = {
        "0", "-0", "0.0", "-0.0", "1.5", "1.0000001", "0.1", "0.30000000000000004", "123456789012345678",
        "9007199254740992", "9007199254740993", "18446744073709551615", "1234567890123456789012", "1e22",
        "1e23", "1E-22", "1e-23", "2.5E+3", "4.9e-324", "1.7976931348623157e308", "1e309", "1e0000", "1e00001",
        "1e-0", "0.0000000000000000000001", "1.00000000000000000000", "01", "-01", "1.", ".5", "+1", "-",
        "1e", "1e+", "1.5.2", "1e5e", "0x10", "1,", "Infinity", "-Infinity", "NaN", "\"nan\"", "true", "null",
        "[1]", "{}", "3.14159265358979", "-2.718281828459045", "6.02214076e23", "1.602176634e-19"};
    char node[256];
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        snprintf(node, sizeof node, "\"op\":\"add\",\"args\":[\"x\",%s]", nums[i]);
        node_both_ways(node);
    }
    static const char *const shapes[] = {
        "\"args\":[\"x\",1],\"op\":\"add\"", "\"op\":\"add\"", "\"op\":\"add\",\"args\":[\"x\",1],\"op\":\"mul\"",
        "\"op\":\"add\",\"args\":[\"x\",1],\"args\":[\"x\",2]", "\"op\":\"add\",\"args\":[\"x\",1,]",
        "\"op\":\"add\",\"args\":[,\"x\",1]", "\"op\":\"add\",\"args\":[\"x\" 1]", "\"op\":\"add\",\"args\":[]",
        "\"op\":\"sum\",\"args\":[\"x\",\"x\"]", "\"op\":\"addd\",\"args\":[\"x\",1]", "\"op\":\"add\",\"args\":[\"y\",1]",
        "\"op\":\"add\",\"args\":[\"\\u0078\",1]", "\"op\":\"a\\u0064d\",\"args\":[\"x\",1]", "\"op\":\"add\",\"args\":[\"x\",[1]]",
        "\"op\":\"add\",\"args\":\"x\"", "\"op\":\"reshape\",\"args\":[\"x\"]", "\"op\":\"clamp\",\"args\":[\"x\"]",
        "\"op\":\"take\",\"args\":[\"x\",\"x\"]", "\"op\":\"resize\",\"args\":[\"x\"]", "\"op\":\"if\",\"args\":[\"x\"]",
        "\"op\":\"add\",\"args\":[\"x\",1],\"axes\":[0]", "\"op\":\"add\",\"args\":[\"x\",1],\"\":1",
        " \t\r\n\x01\"op\" \x1f: \"add\" , \"args\" :[ \"x\" ,\t1 ] ", "\"op\":\"concat\",\"args\":[\"x\",\"x\",\"x\",\"x\","
        "\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\"],\"axis\":0",
        "\"op\":\"max\",\"args\":[\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\","
        "\"x\",\"x\"]", "\"op\":\"add\",\"args\":[\"x\",1]}", "\"op\":\"add\",\"args\":[\"x y\",1]",
        "\"op\":\"add\",\"args\":[\"x\",\"\xc3\xa9\"]", "\"op\":\"add \",\"args\":[\"x\",1]",
        "\"op\":\"\",\"args\":[\"x\",1]", "\"op\":\"add\",\"args\":[\"\",1]"};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        node_both_ways(shapes[i]);
    cr_expect(strstr(node_both_ways("\"op\":\"add\",\"args\":[\"a\",1]"), "unknown name \"a\""));
    cr_expect(strstr(node_both_ways("\"op\":\"add\",\"args\":[\"x\",1]},{\"id\":\"a\",\"op\":\"neg\",\"args\":[1]"),
                     "name \"a\" is defined twice"));
}

/* Random decimals, most of them within the exact conversion and some
 * past it, give strtod's bits. */
Test(loader, random_decimals_give_strtods_bits)
{
    enum { N = 4000 };
    char *text = malloc((size_t)N * 80 + 256), *p = text;
    cr_assert(text);
    p += sprintf(p, "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[");
    uint64_t r = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < N; i++) {
        char num[64], *q = num;
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        int digits = 1 + (int)(r % 20), point = 1 + (int)(r >> 8) % digits, e = (int)((r >> 16) % 61) - 30;
        if ((r >> 24) & 1)
            *q++ = '-';
        for (int d = 0; d < digits; d++) {
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            *q++ = (char)('0' + (d == 0 && point > 1 ? 1 + r % 9 : r % 10)); /* no leading zero */
            if (d + 1 == point && point < digits)
                *q++ = '.';
        }
        q += (r >> 25) & 1 ? sprintf(q, "e%d", e) : 0;
        *q = '\0';
        p += sprintf(p, "{\"id\":\"n%d\",\"op\":\"add\",\"args\":[\"x\",%s]},", i, num);
    }
    p += sprintf(p, "{\"id\":\"out\",\"op\":\"neg\",\"args\":[\"x\"]}],\"outputs\":\"out\"}");
    cr_expect_str_eq(both_ways(text, (size_t)(p - text), "t.json"), "");
    free(text);
}

Test(loader, equal_numbers_share_an_id_and_unequal_ones_never_do)
{
    const char *text = "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":["
                       "{\"id\":\"a\",\"op\":\"add\",\"args\":[\"x\",1.5]},"
                       "{\"id\":\"b\",\"op\":\"add\",\"args\":[\"a\",1.50]},"
                       "{\"id\":\"c\",\"op\":\"add\",\"args\":[\"b\",0.0]},"
                       "{\"id\":\"d\",\"op\":\"add\",\"args\":[\"c\",-0.0]},"
                       "{\"id\":\"e\",\"op\":\"where\",\"args\":[1.5,\"d\",2]}],\"outputs\":\"e\"}";
    tl_status st = {0};
    tl_graph *g = tl_graph_parse(text, strlen(text), "t.json", &st);
    cr_assert(g, "%s", st.msg);
    const tl_node *n = g->top.nodes;
    cr_expect_eq(n[0].args[1].num_id, n[1].args[1].num_id);
    cr_expect_eq(n[0].args[1].num_id, n[4].args[0].num_id);
    cr_expect_neq(n[2].args[1].num_id, n[3].args[1].num_id, "0 and -0 are different numbers");
    cr_expect_neq(n[0].args[1].num_id, n[4].args[2].num_id);
    cr_expect_eq(g->nnums, 4);
    for (int i = 0; i < 5; i++)
        for (int k = 0; k < n[i].nargs; k++)
            cr_expect(n[i].args[k].slot >= 0 || n[i].args[k].num_id < g->nnums);
    tl_graph_free(g);
}

static char *temp_file(const char *text, size_t len)
{
    char *path = strdup("/tmp/tl-loader-XXXXXX");
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "wb");
    cr_assert(f && fwrite(text, 1, len, f) == len && !fclose(f));
    return path;
}

Test(loader, a_large_file_is_mapped_and_loads_as_its_text_does)
{
    size_t len;
    char *text = chain(BIG, &len);
    cr_assert_gt(len, (size_t)1 << 20, "large enough to be mapped");
    char *path = temp_file(text, len);
    tl_status st = {0};
    unsigned long dom = tl_graph_dom_loads();
    tl_graph *g = tl_graph_load(path, &st), *h = tl_graph_parse(text, len, path, &st);
    cr_assert(g && h, "%s", st.msg);
    cr_expect_eq(tl_graph_dom_loads(), dom);
    graph_diff d;
    const char *why = graph_same(g, h, &d);
    cr_expect(!why, "%s", why);
    tl_graph_free(g);
    tl_graph_free(h);
    unlink(path);
    free(path);
    free(text);

    int col;
    text = broken("\"op\": ", "\"op\" ", &len, &col);
    path = temp_file(text, len);
    cr_assert(!tl_graph_load(path, &st));
    char want[200];
    snprintf(want, sizeof want, "%s:100001:%d: malformed JSON: expected ':' after the key, found '\"'", path, col + 5);
    cr_expect_str_eq(st.msg, want);
    unlink(path);
    free(path);
    free(text);
}
