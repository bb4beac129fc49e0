/* The program language (graph/program.h) and recipe equality
 * (graph/recipe.h): the translation of every operator and statement form,
 * scopes, every error with its line and column, the layout of tl compile,
 * and, for every example and control-flow fixture, a program that is the
 * same recipe as the JSON graph and gives the same bits, values and
 * gradients. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec.h"
#include "formats/npy.h"
#include "formats/npz.h"
#include "formats/text.h"
#include "graph/program.h"
#include "graph/recipe.h"

/* ---------- helpers ---------- */

static char *compile_or_error(const char *src, tl_status *st, tl_srcpos *pos)
{
    tl_status_clear(st);
    return tl_program_compile(src, strlen(src), "p.tl", true, NULL, pos, st);
}

static char *compiled(const char *src)
{
    tl_status st;
    tl_srcpos pos;
    char *json = compile_or_error(src, &st, &pos);
    cr_assert(json, "%s\n  failed: %s", src, st.msg);
    return json;
}

static void render_nodes(FILE *f, const cJSON *nodes);

/* A node as ID=OP(ARGS) KEY=VALUE... with blocks as {NODES | RESULT}. */
static void render_node(FILE *f, const cJSON *n)
{
    char *id = cJSON_PrintUnformatted(cJSON_GetObjectItem(n, "id"));
    const cJSON *args = cJSON_GetObjectItem(n, "args");
    fprintf(f, "%s=%s(", id, cJSON_GetObjectItem(n, "op")->valuestring);
    free(id);
    for (const cJSON *a = args ? args->child : NULL; a; a = a->next) {
        char num[TL_FMT_LEN];
        double v = a->valuedouble;
        if (cJSON_IsNumber(a) && v == (double)(long long)v && !(v == 0 && signbit(v)))
            snprintf(num, sizeof num, "%lld", (long long)v);
        else if (cJSON_IsNumber(a))
            tl_fmt_f64(num, sizeof num, v); /* cJSON would print 2.0000000000000004 as 2 */
        fprintf(f, "%s%s", a == args->child ? "" : ",", cJSON_IsString(a) ? a->valuestring : num);
    }
    fputc(')', f);
    for (const cJSON *c = n->child; c; c = c->next) {
        if (!strcmp(c->string, "id") || !strcmp(c->string, "op") || !strcmp(c->string, "args"))
            continue;
        const cJSON *nodes = cJSON_IsObject(c) ? cJSON_GetObjectItem(c, "nodes") : NULL;
        if (nodes) {
            char *r = cJSON_PrintUnformatted(cJSON_GetObjectItem(c, "result"));
            fprintf(f, " %s{", c->string);
            render_nodes(f, nodes);
            fprintf(f, "|%s}", r);
            free(r);
            continue;
        }
        char *v = cJSON_PrintUnformatted(c);
        fprintf(f, " %s=%s", c->string, v);
        free(v);
    }
}

static void render_nodes(FILE *f, const cJSON *nodes)
{
    for (const cJSON *n = nodes->child; n; n = n->next) {
        render_node(f, n);
        if (n->next)
            fputs("; ", f);
    }
}

/* The translation's nodes (and consts, inputs, outputs when asked) in the
 * compact form above; a static buffer. */
static const char *render(const char *src, bool all)
{
    static char out[8192];
    char *json = compiled(src), *text = NULL;
    size_t len;
    cJSON *g = cJSON_Parse(json);
    cr_assert(g, "the compiled text is not JSON:\n%s", json);
    FILE *f = open_memstream(&text, &len);
    if (all) {
        char *in = cJSON_PrintUnformatted(cJSON_GetObjectItem(g, "inputs"));
        char *co = cJSON_PrintUnformatted(cJSON_GetObjectItem(g, "consts"));
        char *ou = cJSON_PrintUnformatted(cJSON_GetObjectItem(g, "outputs"));
        fprintf(f, "in %s consts %s out %s: ", in, co ? co : "{}", ou);
        free(in);
        free(co);
        free(ou);
    }
    render_nodes(f, cJSON_GetObjectItem(g, "nodes"));
    fclose(f);
    snprintf(out, sizeof out, "%s", text);
    free(text);
    free(json);
    cJSON_Delete(g);
    return out;
}

#define EXPECT_RENDER(src, all, want)                                                                   \
    do {                                                                                               \
        const char *got_ = render(src, all);                                                           \
        cr_expect_str_eq(got_, want, "%s\n  got  %s\n  want %s", src, got_, want);                     \
    } while (0)
#define EXPECT_NODES(src, want) EXPECT_RENDER(src, false, want)
#define EXPECT_ALL(src, want) EXPECT_RENDER(src, true, want)

/* The error a program gives, as "LINE:COL: message" (the path cut). */
static const char *error_of(const char *src)
{
    static char msg[1100];
    tl_status st;
    tl_srcpos pos;
    char *json = compile_or_error(src, &st, &pos);
    free(json);
    if (json)
        return "(no error)";
    cr_expect_eq(st.code, TL_EINPUT, "%s: code %d: %s", src, st.code, st.msg);
    const char *m = !strncmp(st.msg, "p.tl:", 5) ? st.msg + 5 : st.msg;
    snprintf(msg, sizeof msg, "%s", m);
    if (pos.line) {
        char where[32];
        snprintf(where, sizeof where, "%d:%d: ", pos.line, pos.col);
        cr_expect(!strncmp(msg, where, strlen(where)), "%s: the position %s is not the message's: %s", src, where, msg);
    }
    return msg;
}

/* The error starts with "LINE:COL: " and contains what. */
static void expect_error(const char *src, const char *at, const char *what)
{
    const char *m = error_of(src);
    cr_expect(!strncmp(m, at, strlen(at)) && m[strlen(at)] == ':', "%s\n  error %s, expected at %s", src, m, at);
    cr_expect(strstr(m, what) != NULL, "%s\n  error %s, expected to say %s", src, m, what);
}

typedef struct err_case {
    const char *src, *at, *what;
} err_case;

static void expect_errors(const err_case *c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        expect_error(c[i].src, c[i].at, c[i].what);
}

static tl_graph *program(const char *src)
{
    tl_status st = {0};
    tl_srcpos pos;
    tl_graph *g = tl_program_load(src, strlen(src), "p.tl", NULL, &pos, &st);
    cr_assert(g, "%s: %s", src, st.msg);
    return g;
}

/* Whether two programs are the same recipe; the paths when not. */
static bool same_recipe(const char *a, const char *b, tl_recipe_diff *d)
{
    tl_status st = {0};
    tl_graph *ga = program(a), *gb = program(b);
    cr_assert(!tl_recipe_compare(ga, gb, d, &st), "%s", st.msg);
    tl_graph_free(ga);
    tl_graph_free(gb);
    return d->equal;
}

static void expect_same(const char *a, const char *b)
{
    tl_recipe_diff d;
    cr_expect(same_recipe(a, b, &d), "%s\n  vs %s\n  A: %s\n  B: %s", a, b, d.a, d.b);
    tl_recipe_diff_free(&d);
}

/* Not the same recipe, and the paths say where: A's contains in_a, B's in_b. */
static void expect_differ(const char *a, const char *b, const char *in_a, const char *in_b)
{
    tl_recipe_diff d;
    cr_expect(!same_recipe(a, b, &d), "%s\n  vs %s: the same recipe", a, b);
    if (d.equal)
        return;
    cr_expect(strstr(d.a, in_a), "%s\n  A: %s\n  expected %s", a, d.a, in_a);
    cr_expect(strstr(d.b, in_b), "%s\n  B: %s\n  expected %s", b, d.b, in_b);
    tl_recipe_diff_free(&d);
}

/* ---------- operators ---------- */

Test(operators, precedence_of_every_level)
{
    EXPECT_NODES("a + b * c", "\"_1_7\"=mul(b,c); \"out\"=add(a,_1_7)");
    EXPECT_NODES("a * b + c", "\"_1_3\"=mul(a,b); \"out\"=add(_1_3,c)");
    EXPECT_NODES("a - b / c", "\"_1_7\"=div(b,c); \"out\"=sub(a,_1_7)");
    EXPECT_NODES("a @ b + c", "\"_1_3\"=matmul(a,b); \"out\"=add(_1_3,c)");
    EXPECT_NODES("a * b ** c", "\"_1_7\"=pow(b,c); \"out\"=mul(a,_1_7)");
    EXPECT_NODES("a + b < c * d", "\"_1_3\"=add(a,b); \"_1_11\"=mul(c,d); \"out\"=lt(_1_3,_1_11)");
    EXPECT_NODES("-a * b", "\"_1_1\"=neg(a); \"out\"=mul(_1_1,b)");
    EXPECT_NODES("(a + b) * c", "\"_1_4\"=add(a,b); \"out\"=mul(_1_4,c)");
    EXPECT_NODES("if c then a + 1 else b * 2",
                 "\"out\"=if() cond=\"c\" then{\"_1_13\"=add(a,1)|\"_1_13\"} else{\"_1_24\"=mul(b,2)|\"_1_24\"}");
}

Test(operators, associativity)
{
    EXPECT_NODES("a + b + c", "\"_1_3\"=add(a,b); \"out\"=add(_1_3,c)");
    EXPECT_NODES("a - b - c", "\"_1_3\"=sub(a,b); \"out\"=sub(_1_3,c)");
    EXPECT_NODES("a + b - c", "\"_1_3\"=add(a,b); \"out\"=sub(_1_3,c)");
    EXPECT_NODES("a * b * c", "\"_1_3\"=mul(a,b); \"out\"=mul(_1_3,c)");
    EXPECT_NODES("a / b / c", "\"_1_3\"=div(a,b); \"out\"=div(_1_3,c)");
    EXPECT_NODES("a @ b @ c", "\"_1_3\"=matmul(a,b); \"out\"=matmul(_1_3,c)");
    EXPECT_NODES("a / b * c", "\"_1_3\"=div(a,b); \"out\"=mul(_1_3,c)");
    EXPECT_NODES("a ** b ** c", "\"_1_8\"=pow(b,c); \"out\"=pow(a,_1_8)");
    EXPECT_NODES("- - a", "\"_1_3\"=neg(a); \"out\"=neg(_1_3)");
}

Test(operators, every_binary_operator_is_its_op)
{
    static const char *const ops[][2] = {
        {"+", "add"}, {"-", "sub"}, {"*", "mul"}, {"/", "div"}, {"@", "matmul"}, {"**", "pow"},
        {"==", "eq"}, {"!=", "ne"}, {"<", "lt"}, {"<=", "le"}, {">", "gt"}, {">=", "ge"},
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        char src[64], want[64];
        snprintf(src, sizeof src, "a %s b", ops[i][0]);
        snprintf(want, sizeof want, "\"out\"=%s(a,b)", ops[i][1]);
        EXPECT_NODES(src, want);
    }
}

Test(operators, comparisons_do_not_chain)
{
    static const err_case errors[] = {
        {"a < b < c", "1:7", "comparisons do not chain"},
        {"a == b != c", "1:8", "comparisons do not chain"},
        {"a <= b + 1 > c", "1:12", "comparisons do not chain"},
    };
    expect_errors(errors, sizeof errors / sizeof errors[0]);
    EXPECT_NODES("(a < b) < c", "\"_1_4\"=lt(a,b); \"out\"=lt(_1_4,c)");
    EXPECT_NODES("a < (b < c)", "\"_1_8\"=lt(b,c); \"out\"=lt(a,_1_8)");
}

Test(operators, unary_minus)
{
    EXPECT_NODES("x * -1", "\"out\"=mul(x,-1)");
    EXPECT_NODES("a < -0.5", "\"out\"=lt(a,-0.5)");
    EXPECT_NODES("-x ** 2", "\"_1_4\"=pow(x,2); \"out\"=neg(_1_4)");
    EXPECT_NODES("-2 ** x", "\"_1_4\"=pow(2,x); \"out\"=neg(_1_4)");
    EXPECT_NODES("2 ** -x", "\"_1_6\"=neg(x); \"out\"=pow(2,_1_6)");
    EXPECT_NODES("2 ** -3", "\"out\"=pow(2,-3)");
    EXPECT_NODES("-a", "\"out\"=neg(a)");
    EXPECT_NODES("-(1)", "\"out\"=neg(1)");
    EXPECT_NODES("a - 1", "\"out\"=sub(a,1)");
    EXPECT_NODES("a - -1", "\"out\"=sub(a,-1)");
    EXPECT_NODES("x * -0.0", "\"out\"=mul(x,-0.0)");
    EXPECT_NODES("- 1 * x", "\"out\"=mul(-1,x)");
    expect_error("x * -nan", "1:5", "-nan");
}

Test(operators, numbers_are_weak_scalars_bit_for_bit)
{
    EXPECT_NODES("x * 2", "\"out\"=mul(x,2)");
    EXPECT_NODES("x * 0.1", "\"out\"=mul(x,0.1)");
    EXPECT_NODES("x * 1e-300", "\"out\"=mul(x,1e-300)");
    EXPECT_NODES("x * 2.0000000000000004", "\"out\"=mul(x,2.0000000000000004)");
    EXPECT_NODES("x * 1. + .5", "\"_1_3\"=mul(x,1); \"out\"=add(_1_3,0.5)"); /* NumPy's way of writing them */
    EXPECT_ALL("x * nan + inf - -inf",
               "in [\"x\"] consts {\"_1_5\":\"nan\",\"_1_11\":\"inf\",\"_1_17\":\"-inf\"} out [\"out\"]: "
               "\"_1_3\"=mul(x,_1_5); \"_1_9\"=add(_1_3,_1_11); \"out\"=sub(_1_9,_1_17)");
    static const err_case errors[] = {
        {"x * 1e400", "1:5", "too large"},
        {"x * 01", "1:5", "malformed number"},
        {"x * 1..5", "1:5", "malformed number"},
        {"x * 1.5.", "1:5", "malformed number"},
        {"x * 2y", "1:5", "malformed number"},
    };
    expect_errors(errors, sizeof errors / sizeof errors[0]);
}

/* ---------- calls ---------- */

Test(calls, ops_attributes_and_their_checks)
{
    EXPECT_NODES("sum(x, axes=[1], keepdims=true)", "\"out\"=sum(x) axes=[1] keepdims=true");
    EXPECT_NODES("softmax(x, axis=-1)", "\"out\"=softmax(x) axis=-1");
    EXPECT_NODES("gelu(x, approximate=\"tanh\")", "\"out\"=gelu(x) approximate=\"tanh\"");
    EXPECT_NODES("cast(x, dtype=\"i64\")", "\"out\"=cast(x) dtype=\"i64\"");
    EXPECT_NODES("clamp(x, min=-inf, max=1)", "\"out\"=clamp(x) min=\"-inf\" max=1");
    EXPECT_NODES("concat(a, b, c, axis=0)", "\"out\"=concat(a,b,c) axis=0");
    EXPECT_NODES("where(c, a, 0)", "\"out\"=where(c,a,0)");
    EXPECT_NODES("sin(cos(x))", "\"_1_5\"=cos(x); \"out\"=sin(_1_5)");
    EXPECT_NODES("take(x, i64:[2, 0], axis=0)", "\"out\"=take(x,_1_9) axis=0");
    EXPECT_NODES("one_hot(labels, depth=3)", "\"out\"=one_hot(labels) depth=3");
    static const err_case errors[] = {
        {"foo(x)", "1:1", "unknown op \"foo\""},
        {"y = 1 + sum(x, y)", "1:9", "takes 1 argument, got 2"},
        {"matmul(x)", "1:1", "takes 2 arguments, got 1"},
        {"sum(x, axis=1)", "1:8", "unknown attribute \"axis\""},
        {"sum(x, args=[1])", "1:8", "sum: unknown attribute \"args\""},
        {"sum(x, op=\"sin\")", "1:8", "sum: unknown attribute \"op\""},
        {"sum(x, id=1)", "1:8", "sum: unknown attribute \"id\""},
        {"sum(x, body=1)", "1:8", "sum: unknown attribute \"body\""},
        {"sum(x, axes=\"a\")", "1:8", "attribute \"axes\" must be"},
        {"cast(x, dtype=\"f16\")", "1:9", "attribute \"dtype\" must be"},
        {"slice(x, step=0)", "1:10", "attribute \"step\" must be a positive integer"},
        {"sum(x, keepdims=true, keepdims=false)", "1:23", "given twice"},
        {"reshape(x)", "1:1", "missing attribute \"shape\""},
        {"sin(x, axis=1, 2)", "1:16", "after the attributes"},
        {"if(x)", "1:6", "expected 'then'"},
        /* a nested list is syntax (padding=[[1, 0], [0, 1]]); axes takes none */
        {"sum(x, axes=[1, [2]])", "1:8", "must be an integer or a list of integers"},
        {"sum(x, axes=[1, [[2]]])", "1:18", "expected a number"},
    };
    expect_errors(errors, sizeof errors / sizeof errors[0]);
}

Test(calls, index_tensors_and_prefixed_literals)
{
    EXPECT_ALL("input labels: i64[n]\nk = i64:[0, 2, 1]\ny = take(labels, k, axis=0)",
               "in [{\"name\":\"labels\",\"dtype\":\"i64\",\"shape\":[\"n\"]}] "
               "consts {\"k\":{\"dtype\":\"i64\",\"shape\":[3],\"data\":[0,2,1]}} out [\"y\"]: "
               "\"y\"=take(labels,k) axis=0");
    EXPECT_ALL("[[1, 2], [3, 4.5]] @ x + f32:[nan, -inf]",
               "in [\"x\"] consts {\"_1_1\":{\"shape\":[2,2],\"data\":[[1,2],[3,4.5]]},"
               "\"_1_26\":{\"dtype\":\"f32\",\"shape\":[2],\"data\":[\"nan\",\"-inf\"]}} out [\"out\"]: "
               "\"_1_20\"=matmul(_1_1,x); \"out\"=add(_1_20,_1_26)");
    EXPECT_ALL("y = [[], []]", "in [] consts {\"y\":{\"shape\":[2,0],\"data\":[[],[]]}} out [\"y\"]: ");
    static const err_case errors[] = {
        {"y = x * [[1, 2], [3]]", "1:18", "ragged literal"},
        {"y = x * [1, [2]]", "1:13", "ragged literal"},
        {"y = i64:[0.5]", "1:10", "integers"},
        {"y = f32:2", "1:9", "'['"},
        {"y = [1, 2", "1:5", "unclosed '['"},
    };
    expect_errors(errors, sizeof errors / sizeof errors[0]);
}

Test(calls, file_constants)
{
    EXPECT_ALL("y = x @ file(\"w.npy\") + file(\"w.npz\", \"b\")",
               "in [\"x\"] consts {\"_1_9\":{\"file\":\"w.npy\"},\"_1_25\":{\"file\":\"w.npz\",\"key\":\"b\"}} "
               "out [\"y\"]: \"_1_7\"=matmul(x,_1_9); \"y\"=add(_1_7,_1_25)");
    static const err_case errors[] = {
        {"y = file(\"w.npz\")", "1:10", "member's name"},
        {"y = file(w)", "1:10", "expected a string"},
        {"y = file(\"../w.npy\")", "1:5", "outside the graph's folder"},
    };
    expect_errors(errors, sizeof errors / sizeof errors[0]);
}

/* ---------- the layer ops: nested lists, zero-argument calls ---------- */

Test(layer_ops, nested_list_attributes)
{
    EXPECT_NODES("conv(x, w, b, stride=2, padding=[[1, 0], [0, 1]])",
                 "\"out\"=conv(x,w,b) stride=2 padding=[[1,0],[0,1]]");
    EXPECT_NODES("conv(x, w, padding=[1, 2], dilation=[2, 1], groups=4)",
                 "\"out\"=conv(x,w) padding=[1,2] dilation=[2,1] groups=4");
    EXPECT_NODES("conv_transpose(x, w, stride=2, padding=[[0, 1]], output_padding=1)",
                 "\"out\"=conv_transpose(x,w) stride=2 padding=[[0,1]] output_padding=1");
    EXPECT_NODES("max_pool(x, kernel=[3, 3], stride=2, padding=1, ceil_mode=true)",
                 "\"out\"=max_pool(x) kernel=[3,3] stride=2 padding=1 ceil_mode=true");
    EXPECT_NODES("avg_pool(x, kernel=2, padding=[[1, 0], [0, 1]], count_include_pad=false)",
                 "\"out\"=avg_pool(x) kernel=2 padding=[[1,0],[0,1]] count_include_pad=false");
    EXPECT_NODES("pad(x, pads=[[0, 0], [0, 0], [1, 2], [-1, 0]], mode=\"reflect\")",
                 "\"out\"=pad(x) pads=[[0,0],[0,0],[1,2],[-1,0]] mode=\"reflect\"");
    EXPECT_NODES("pad(x, pads=[[1, 1]], value=-inf)", "\"out\"=pad(x) pads=[[1,1]] value=\"-inf\"");
    EXPECT_NODES("batch_norm(x, s, b, m, v, training=true, epsilon=0.001)",
                 "\"out\"=batch_norm(x,s,b,m,v) training=true epsilon=0.001");
    EXPECT_NODES("resize(x, scale=[2, 1.5], mode=\"linear\", coordinate=\"align_corners\")",
                 "\"out\"=resize(x) scale=[2,1.5] mode=\"linear\" coordinate=\"align_corners\"");
    /* an empty inner list parses (the loader then rejects it, below) */
    EXPECT_NODES("pad(x, pads=[])", "\"out\"=pad(x) pads=[]");
}

Test(layer_ops, zero_argument_calls)
{
    EXPECT_ALL("random_uniform(shape=[2, 3], seed=1)",
               "in [] consts {} out [\"out\"]: \"out\"=random_uniform() shape=[2,3] seed=1");
    EXPECT_ALL("r = random_normal(shape=[4], seed=7, mean=1, std=0.5, dtype=\"f32\")",
               "in [] consts {} out [\"r\"]: \"r\"=random_normal() shape=[4] seed=7 mean=1 std=0.5 dtype=\"f32\"");
    /* a draw in an expression, and one with no attributes but the required */
    EXPECT_NODES("input x\ny = x + random_uniform(shape=[2], seed=3, low=-1)",
                 "\"_2_9\"=random_uniform() shape=[2] seed=3 low=-1; \"y\"=add(x,_2_9)");
    EXPECT_NODES("y = dropout(x, p=0.25, seed=9)", "\"y\"=dropout(x) p=0.25 seed=9");
    static const err_case errors[] = {
        {"random_uniform(x, shape=[2, 3], seed=1)", "1:1", "takes 0 arguments, got 1"},
        {"random_uniform(shape=[2, 3])", "1:1", "missing attribute \"seed\""},
        {"random_uniform()", "1:1", "missing attribute"},
        {"random_uniform(shape=[2, 3], seed=1,)", "1:37", "after the attributes"},
        {"random_uniform(, seed=1)", "1:16", "expected"},
        {"random_normal(shape=[2], seed=1, std=0)", "1:34", "attribute \"std\""},
        {"dropout(x, p=1, seed=1)", "1:12", "attribute \"p\""},
    };
    expect_errors(errors, sizeof errors / sizeof errors[0]);
}

/* The program and the JSON graph text: the same recipe. */
static void expect_same_as_json(const char *src, const char *json)
{
    tl_status st = {0};
    tl_graph *p = program(src), *g = tl_graph_parse(json, strlen(json), "g.json", &st);
    cr_assert(g, "%s: %s", json, st.msg);
    tl_recipe_diff d;
    cr_assert(!tl_recipe_compare(p, g, &d, &st), "%s", st.msg);
    cr_expect(d.equal, "%s\n  vs %s\n  A: %s\n  B: %s", src, json, d.a, d.b);
    tl_recipe_diff_free(&d);
    tl_graph_free(p);
    tl_graph_free(g);
}

#define GRAPH_OF(inputs, node) "{\"version\": 1, \"inputs\": [" inputs "], \"nodes\": [" node "], \"outputs\": [\"y\"]}"

Test(layer_ops, the_same_graph_as_json)
{
    expect_same_as_json("input x, w, b\ny = conv(x, w, b, stride=2, padding=[[1, 0], [0, 1]])",
                        GRAPH_OF("\"x\", \"w\", \"b\"", "{\"id\": \"y\", \"op\": \"conv\", \"args\": [\"x\", \"w\", "
                                 "\"b\"], \"stride\": 2, \"padding\": [[1, 0], [0, 1]]}"));
    expect_same_as_json("input x, w\ny = conv(x, w, padding=[1, 2], dilation=[2, 1], groups=4)",
                        GRAPH_OF("\"x\", \"w\"", "{\"id\": \"y\", \"op\": \"conv\", \"args\": [\"x\", \"w\"], "
                                 "\"groups\": 4, \"dilation\": [2, 1], \"padding\": [1, 2]}"));
    expect_same_as_json("input x\ny = max_pool(x, kernel=3, stride=2, padding=1)",
                        GRAPH_OF("\"x\"", "{\"id\": \"y\", \"op\": \"max_pool\", \"args\": [\"x\"], \"kernel\": 3, "
                                 "\"stride\": 2, \"padding\": 1}"));
    expect_same_as_json("input x\ny = avg_pool(x, kernel=[2, 2], count_include_pad=false, ceil_mode=true)",
                        GRAPH_OF("\"x\"", "{\"id\": \"y\", \"op\": \"avg_pool\", \"args\": [\"x\"], \"kernel\": "
                                 "[2, 2], \"ceil_mode\": true, \"count_include_pad\": false}"));
    expect_same_as_json("input x\ny = pad(x, pads=[[0, 0], [1, -1]], mode=\"wrap\")",
                        GRAPH_OF("\"x\"", "{\"id\": \"y\", \"op\": \"pad\", \"args\": [\"x\"], \"pads\": [[0, 0], "
                                 "[1, -1]], \"mode\": \"wrap\"}"));
    expect_same_as_json("input x, s, b, m, v\ny = batch_norm(x, s, b, m, v, training=true)",
                        GRAPH_OF("\"x\", \"s\", \"b\", \"m\", \"v\"", "{\"id\": \"y\", \"op\": \"batch_norm\", "
                                 "\"args\": [\"x\", \"s\", \"b\", \"m\", \"v\"], \"training\": true}"));
    expect_same_as_json("input x\ny = resize(x, size=[4, 6], mode=\"cubic\", cubic_coeff=-0.5)",
                        GRAPH_OF("\"x\"", "{\"id\": \"y\", \"op\": \"resize\", \"args\": [\"x\"], \"size\": [4, 6], "
                                 "\"mode\": \"cubic\", \"cubic_coeff\": -0.5}"));
    expect_same_as_json("y = random_uniform(shape=[2, 3], seed=1)",
                        GRAPH_OF("", "{\"id\": \"y\", \"op\": \"random_uniform\", \"args\": [], \"shape\": [2, 3], "
                                 "\"seed\": 1}"));
    /* attributes compare in their canonical form (a default written out is the same call); these differ */
    expect_differ("conv(x, w, padding=[[1, 0], [0, 1]])", "conv(x, w, padding=[[1, 0], [1, 0]])",
                  "padding=[[1, 0], [0, 1]]", "padding=[[1, 0], [1, 0]]");
    expect_differ("max_pool(x, kernel=2)", "max_pool(x, kernel=3)", "(max_pool) kernel=2", "(max_pool) kernel=3");
    expect_differ("random_uniform(shape=[2], seed=1)", "random_uniform(shape=[2], seed=2)", "seed=1", "seed=2");
    expect_differ("pad(x, pads=[[1, 0]], mode=\"edge\")", "pad(x, pads=[[1, 0]], mode=\"reflect\")", "(pad) mode=",
                  "(pad) mode=");
}

Test(layer_ops, bad_nested_lists)
{
    static const err_case errors[] = {
        /* the syntax of the list: at the offending token */
        {"conv(x, w, padding=[[[1]]])", "1:22", "expected a number, found '['"},
        {"conv(x, w, padding=[[1, 0] [0, 1]])", "1:28", "expected ',' between list entries"},
        {"conv(x, w, padding=[[1, 0], [0, 1])", "1:20", "unclosed '['"},
        {"y = conv(x, w, padding=[[1, 0],\n    [0, 1]]])", "2:12", "unmatched ']'"},
        {"conv(x, w, padding=[[1, x], [0, 1]])", "1:25", "expected a number, found 'x'"},
        {"conv(x, w, padding=[[1, 0], [true, 1]])", "1:30", "expected a number, found 'true'"},
        {"conv(x, w, padding=[[1, 0], [0, 1], ])", "1:37", "expected a number or a list, found ']'"},
        {"conv(x, w, padding=[, [1, 0]])", "1:21", "expected a number or a list, found ','"},
        {"conv(x, w, padding=[[1, 0], \"a\"])", "1:29", "expected a number or a list"},
        /* what the list says: at the attribute's name */
        {"conv(x, w, padding=[[1, 0], [0]])", "1:12", "attribute \"padding\" must be"},
        {"y = conv(x, w, padding=[[1, 0],\n    [0, -1]])", "1:16", "attribute \"padding\" must be"},
        {"conv(x, w, padding=[[1, 0], 2])", "1:12", "attribute \"padding\" must be"},
        {"conv(x, w, padding=[[1.5, 0]])", "1:12", "attribute \"padding\" must be"},
        {"conv(x, w, padding=[[]])", "1:12", "attribute \"padding\" must be"},
        {"conv(x, w, padding=\"same\")", "1:12", "attribute \"padding\" must be"},
        {"conv(x, w, stride=[[1, 1]])", "1:12", "attribute \"stride\" must be"},
        {"conv(x, w, stride=[2, 0])", "1:12", "attribute \"stride\" must be a positive integer"},
        {"pad(x, pads=[1, 0])", "1:8", "attribute \"pads\" must be a list of [begin, end] pairs"},
        {"pad(x, pads=[[1, 0, 2]])", "1:8", "attribute \"pads\" must be"},
        {"pad(x, pads=[[1, 0]], mode=\"mirror\")", "1:23", "attribute \"mode\" must be"},
        {"max_pool(x, kernel=[2, 2], ceil_mode=1)", "1:28", "attribute \"ceil_mode\" must be true or false"},
        {"max_pool(x)", "1:1", "missing attribute \"kernel\""},
        {"max_pool(x, kernel=[[2, 2]])", "1:13", "attribute \"kernel\" must be"},
        {"resize(x, scale=[[2]])", "1:11", "attribute \"scale\" must be"},
        {"batch_norm(x, s, b, m, v, training=1)", "1:27", "attribute \"training\" must be true or false"},
    };
    expect_errors(errors, sizeof errors / sizeof errors[0]);
}

/* ---------- statements ---------- */

Test(statements, every_form)
{
    /* inputs in order, with their constraints */
    EXPECT_ALL("input x, w: f32[n, 3], b: [3], s: f64[], q: [_, 2]\ninput z: i32\ny = x",
               "in [\"x\",{\"name\":\"w\",\"dtype\":\"f32\",\"shape\":[\"n\",3]},{\"name\":\"b\",\"shape\":[3]},"
               "{\"name\":\"s\",\"dtype\":\"f64\",\"shape\":[]},{\"name\":\"q\",\"shape\":[null,2]},"
               "{\"name\":\"z\",\"dtype\":\"i32\"}] consts {} out [\"x\"]: ");
    /* a binding, shared: one sin node */
    EXPECT_NODES("y = sin(x); y * y", "\"y\"=sin(x); \"out\"=mul(y,y)");
    EXPECT_NODES("sin(x) * sin(x)", "\"_1_1\"=sin(x); \"_1_10\"=sin(x); \"out\"=mul(_1_1,_1_10)");
    /* y = x makes no node */
    EXPECT_ALL("y = x; z = y * 2", "in [\"x\"] consts {} out [\"z\"]: \"z\"=mul(x,2)");
    /* a number bound is a constant of that name */
    EXPECT_ALL("k = 2; y = x * k", "in [\"x\"] consts {\"k\":2} out [\"y\"]: \"y\"=mul(x,k)");
    /* destructuring */
    EXPECT_ALL("(p, q) = iterate(2, (a, b), (u, v) -> (v, u))",
               "in [\"a\",\"b\"] consts {} out [\"p\",\"q\"]: "
               "[\"p\",\"q\"]=iterate() count=2 init=[\"a\",\"b\"] state=[\"u\",\"v\"] body{|[\"v\",\"u\"]}");
    /* output statements, in their order */
    EXPECT_ALL("output z, y\ny = sin(x)\nz = cos(x)", "in [\"x\"] consts {} out [\"z\",\"y\"]: "
                                                     "\"y\"=sin(x); \"z\"=cos(x)");
    /* the trailing expression is "out"; a trailing name is itself */
    EXPECT_ALL("y = sin(x)\ny", "in [\"x\"] consts {} out [\"y\"]: \"y\"=sin(x)");
    EXPECT_ALL("2", "in [] consts {\"out\":2} out [\"out\"]: ");
    /* else the last binding */
    EXPECT_ALL("y = sin(x)\nz = cos(y)", "in [\"x\"] consts {} out [\"z\"]: \"y\"=sin(x); \"z\"=cos(y)");
    /* statements end at ';' or a newline, not after an operator, '=', ',' or inside brackets */
    EXPECT_NODES("y = a +\n b; z = (y\n * 2)\nw = sum(z,\n axes=[0,\n 1])",
                 "\"y\"=add(a,b); \"z\"=mul(y,2); \"w\"=sum(z) axes=[0,1]");
    EXPECT_NODES("y = if c\n then a\n else\n b", "\"y\"=if() cond=\"c\" then{|\"a\"} else{|\"b\"}");
    EXPECT_NODES("# a comment\ny = 1 # another\n\n;;\nz = y * x # é", "\"z\"=mul(y,x)");
}

Test(statements, inputs_without_input_statements)
{
    /* the free names, in the order they first appear (in lambdas too) */
    EXPECT_ALL("y = map(p -> p * s, x)",
               "in [\"s\",\"x\"] consts {} out [\"y\"]: \"y\"=map(x) params=[\"p\"] body{\"_1_16\"=mul(p,s)|\"_1_16\"}");
    EXPECT_ALL("b * a + a", "in [\"b\",\"a\"] consts {} out [\"out\"]: \"_1_3\"=mul(b,a); \"out\"=add(_1_3,a)");
    expect_error("input x\ny = x * z", "2:9", "unknown name \"z\"");
    expect_error("y = sin(x)\ninput x\nz = 2 * w", "3:9", "unknown name \"w\"");
    /* input statements are read first: a use before the declaration is fine */
    EXPECT_ALL("y = 2 * x\ninput x: f32", "in [{\"name\":\"x\",\"dtype\":\"f32\"}] consts {} out [\"y\"]: \"y\"=mul(2,x)");
}

Test(statements, statement_errors)
{
    static const err_case errors[] = {
        {"sin(x)\ncos(x)", "1:1", "only allowed as the last statement"},
        {"a = 1 b = 2", "1:7", "expected a new line or ';'"},
        {"out = sin(x)\ncos(x)", "2:1", "\"out\" is already bound"},
        {"iterate(2, (a, b), (u, v) -> (v, u))", "1:1", "a trailing expression is one output"},
        {"input x", "1:8", "no output"},
        {"", "1:1", "no output"},
        {"output y, y\ny = sin(x)", "1:11", "same value as an output before it"},
        {"input x\noutput z", "2:8", "unknown name \"z\""},
        {"y = { input z; z }", "1:7", "input statements belong at the top level"},
        {"y = { output y; 1 }", "1:7", "output statements belong at the top level"},
        {"input x: f16", "1:10", "a dtype (f32, f64, i32, i64) or a shape"},
        {"input x: [2.5]", "1:11", "a size"},
        {"(a, b) = sin(x)", "1:1", "2 names for 1 value"},
        {"(a, b, c) = iterate(1, (x, y), (u, v) -> (u, v))", "1:1", "3 names for 2 values"},
        {"y = (a, b)", "1:5", "2 values where a binding of one name takes one"},
        {"y = (a, (b, c))", "1:9", "tuples do not nest"},
        {"y = ()", "1:5", "empty parentheses"},
        {"y = {}", "1:5", "an empty block has no value"},
    };
    expect_errors(errors, sizeof errors / sizeof errors[0]);
}

/* ---------- scopes ---------- */

Test(scopes, rebinding_and_shadowing)
{
    static const err_case errors[] = {
        {"y = 1\ny = 2", "2:1", "\"y\" is already bound (at 1:1)"},
        {"x = sin(a)\ny = { x = 2; x }", "2:7", "\"x\" shadows the \"x\" of an enclosing scope (at 1:1)"},
        {"input x\nx = 2", "2:1", "\"x\" is already an input (at 1:7)"},
        {"input x\ny = map(x -> x, x)", "2:9", "\"x\" is already an input"},
        {"s = 1\ny = iterate(2, x, s -> s)", "2:19", "shadows"},
        {"y = map((a, a) -> a, x, x)", "1:13", "\"a\" is already bound (at 1:10)"},
        {"y = sin(x)\nx = 2", "2:1", "\"x\" is already an input"},
        {"y = { t = 1; t = 2; t }", "1:14", "\"t\" is already bound"},
    };
    expect_errors(errors, sizeof errors / sizeof errors[0]);
}

Test(scopes, blocks_have_their_own_names)
{
    /* a block's names are local; the value is its last expression */
    EXPECT_NODES("y = { t = sin(x); t * 2 } + 1", "\"t\"=sin(x); \"_1_21\"=mul(t,2); \"y\"=add(_1_21,1)");
    /* a block's last binding is its value; a binding takes a name a finished block made */
    EXPECT_NODES("y = { t = sin(x) }", "\"y\"=sin(x)");
    EXPECT_NODES("y = { t = sin(x); t }", "\"y\"=sin(x)");
    /* after the block, t is no name of it: here a free name, an input */
    EXPECT_ALL("y = { t = sin(x); t }\nz = t * y", "in [\"x\",\"t\"] consts {} out [\"z\"]: \"y\"=sin(x); \"z\"=mul(t,y)");
}

Test(scopes, sibling_blocks_reuse_names_renamed)
{
    /* the second t is renamed; top-level names keep theirs (t = 5 comes last) */
    EXPECT_ALL("y = if c then { t = x * 2; t } else { t = x * 3; t }\nt = 5\nz = y + t",
               "in [\"c\",\"x\"] consts {\"t\":5} out [\"z\"]: "
               "\"y\"=if() cond=\"c\" then{\"t_2\"=mul(x,2)|\"t_2\"} else{\"t_3\"=mul(x,3)|\"t_3\"}; "
               "\"z\"=add(y,t)");
    EXPECT_NODES("a = map(p -> p * 2, x); b = map(p -> p * 3, x)",
                 "\"a\"=map(x) params=[\"p\"] body{\"_1_16\"=mul(p,2)|\"_1_16\"}; "
                 "\"b\"=map(x) params=[\"p_2\"] body{\"_1_40\"=mul(p_2,3)|\"_1_40\"}");
    /* a name first free later is an input; an earlier lambda's parameter gives way */
    EXPECT_ALL("y = map(p -> p * 2, x); z = p * y",
               "in [\"x\",\"p\"] consts {} out [\"z\"]: "
               "\"y\"=map(x) params=[\"p_2\"] body{\"_1_16\"=mul(p_2,2)|\"_1_16\"}; \"z\"=mul(p,y)");
    /* generated ids avoid the program's names */
    EXPECT_NODES("_1_23 = x; y = x * (x + 1)", "\"_1_23_2\"=add(x,1); \"y\"=mul(x,_1_23_2)");
    EXPECT_NODES("_3_4 = 1\ny = _3_4 *\n(x + 1)", "\"_3_4_2\"=add(x,1); \"y\"=mul(_3_4,_3_4_2)");
}

/* ---------- control flow ---------- */

Test(control, if_iterate_map)
{
    EXPECT_NODES("y = if sum(x) > 0 then x else -x",
                 "\"_1_8\"=sum(x); \"_1_15\"=gt(_1_8,0); \"y\"=if() cond=\"_1_15\" then{|\"x\"} else{\"_1_31\"=neg(x)|\"_1_31\"}");
    EXPECT_NODES("(p, q) = if c then (x * y, exp(y)) else (x, 1)",
                 "[\"p\",\"q\"]=if() cond=\"c\" then{\"_1_23\"=mul(x,y); \"_1_28\"=exp(y)|[\"_1_23\",\"_1_28\"]} "
                 "else{|[\"x\",\"_1_45\"]}");
    EXPECT_NODES("y = if a then 1 else if b then 2 else 3",
                 "\"y\"=if() cond=\"a\" then{|\"_1_15\"} else{\"_1_22\"=if() cond=\"b\" then{|\"_1_32\"} "
                 "else{|\"_1_39\"}|\"_1_22\"}");
    EXPECT_NODES("r = iterate(8, a, x -> (x + a / x) * 0.5)",
                 "\"r\"=iterate() count=8 init=[\"a\"] state=[\"x\"] body{\"_1_31\"=div(a,x); \"_1_27\"=add(x,_1_31); "
                 "\"_1_36\"=mul(_1_27,0.5)|\"_1_36\"}");
    EXPECT_NODES("r = iterate(3, x, (i, s) -> s * i)",
                 "\"r\"=iterate() count=3 init=[\"x\"] state=[\"s\"] index=\"i\" body{\"_1_31\"=mul(s,i)|\"_1_31\"}");
    EXPECT_NODES("r = iterate(0, 1, s -> s)", "\"r\"=iterate() count=0 init=[1] state=[\"s\"] body{|\"s\"}");
    EXPECT_NODES("z = map((a, b) -> a * b + s, x, sin(y))",
                 "\"_1_33\"=sin(y); \"z\"=map(x,_1_33) params=[\"a\",\"b\"] body{\"_1_21\"=mul(a,b); "
                 "\"_1_25\"=add(_1_21,s)|\"_1_25\"}");
}

Test(control, errors)
{
    static const err_case errors[] = {
        {"iterate(n, x, s -> s)", "1:9", "integer literal"},
        {"iterate(2.5, x, s -> s)", "1:9", "non-negative integer"},
        {"iterate(-1, x, s -> s)", "1:9", "non-negative integer"},
        {"iterate(2, x, (a, b, c) -> a)", "1:15", "3 parameters for 1 carried value"},
        {"(p, q) = iterate(2, (x, y), (u, v) -> u)", "1:39", "the body gives 1 value for 2 carried"},
        {"map(x, p -> p)", "1:5", "a lambda first"},
        {"map((a, b) -> a, x)", "1:5", "2 parameters for 1 tensor"},
        {"map(p -> (p, p), x)", "1:10", "gives 2 values, not one"},
        {"y = if c then (a, b) else a", "1:27", "the branches of if give 2 (then) and 1 (else) values"},
        {"y = if c then a", "1:16", "expected 'else'"},
        {"y = if c else a", "1:10", "expected 'then'"},
        {"y = x -> x", "1:5", "a lambda is allowed only"},
        {"y = sin((a, b) -> a)", "1:9", "a lambda is allowed only"},
        {"iterate(2, x, s -> s, t -> t)", "1:21", "expected ')'"},
        {"y = map(p -> sum(p), x)", "1:14", "sum is not allowed in a map body"},
    };
    expect_errors(errors, sizeof errors / sizeof errors[0]);
}

/* ---------- lexical ---------- */

Test(lexical, brackets_and_characters)
{
    static const err_case errors[] = {
        {"f(x", "1:2", "unclosed '('"},
        {"y = sin(x))", "1:11", "unmatched ')'"},
        {"y = (x]", "1:7", "unmatched ']'"},
        {"y = x]", "1:6", "unmatched ']'"},
        {"y = { a = 1\n", "1:5", "unclosed '{'"},
        {"y = (1 +\n  (2 * 3)", "1:5", "unclosed '('"},
        /* columns count characters, not bytes */
        {"y = file(\"é.npy\") + zz(1)", "1:21", "unknown op \"zz\""},
        {"# é\ny = é", "2:5", "unexpected character 'é'"},
        {"y = x $ 2", "1:7", "unexpected character '$'"},
        {"y = \"abc", "1:5", "unterminated string"},
        {"y = gelu(x, approximate=\"a\\qb\")", "1:27", "unknown escape"},
        {"y = 1\x01", "1:6", "a control character"},
        {"y = 1 # \x1b[2J", "1:9", "a control character"},
        {"y = 1 # \xff", "1:9", "invalid UTF-8"},
        {"y = \"\xc3\"", "1:6", "invalid UTF-8"},
        {"y = true", "1:5", "attribute values only"},
        {"y = \"s\"", "1:5", "a string is only"},
    };
    expect_errors(errors, sizeof errors / sizeof errors[0]);
    char long_name[300];
    memset(long_name, 'a', 256);
    snprintf(long_name + 256, 20, " = 1");
    expect_error(long_name, "1:1", "longer than 255");
}

Test(lexical, nesting_is_bounded)
{
    char deep[2100];
    size_t n = 0;
    for (int i = 0; i < 250; i++)
        deep[n++] = '(';
    deep[n++] = 'x';
    for (int i = 0; i < 250; i++)
        deep[n++] = ')';
    deep[n] = '\0';
    expect_error(deep, "1:201", "brackets nested more than 200 deep");
    n = 0;
    for (int i = 0; i < 300; i++)
        n += (size_t)snprintf(deep + n, sizeof deep - n, "- ");
    snprintf(deep + n, sizeof deep - n, "x");
    expect_error(deep, "1:403", "nested more than 200 deep");
    /* 200 levels are allowed, as tl-program(7) says: of operators and of calls
     * (the statement's own expression was counted as one, until this test) */
    n = 0;
    for (int i = 0; i < 200; i++)
        n += (size_t)snprintf(deep + n, sizeof deep - n, "- ");
    snprintf(deep + n, sizeof deep - n, "x");
    cr_expect_str_eq(error_of(deep), "(no error)");
    n = 0;
    for (int i = 0; i < 200; i++)
        n += (size_t)snprintf(deep + n, sizeof deep - n, "sin(");
    n += (size_t)snprintf(deep + n, sizeof deep - n, "x");
    for (int i = 0; i < 200; i++)
        deep[n++] = ')';
    deep[n] = '\0';
    cr_expect_str_eq(error_of(deep), "(no error)");
    n = 0;
    for (int i = 0; i < 150; i++)
        deep[n++] = '(';
    deep[n++] = 'x';
    for (int i = 0; i < 150; i++)
        deep[n++] = ')';
    deep[n] = '\0';
    EXPECT_NODES(deep, "");
}

/* ---------- tl compile ---------- */

Test(compile, layout_is_stable_and_reads_back)
{
    const char *src = "input a\nr = iterate(8, a, x -> (x + a / x) * 0.5)";
    char *json = compiled(src);
    cr_expect_str_eq(json, "{\n"
                           "  \"version\": 1,\n"
                           "  \"inputs\": [\"a\"],\n"
                           "  \"nodes\": [\n"
                           "    {\"id\": \"r\", \"op\": \"iterate\", \"count\": 8, \"init\": [\"a\"], \"state\": [\"x\"], "
                           "\"body\": {\"nodes\": [\n"
                           "      {\"id\": \"_2_31\", \"op\": \"div\", \"args\": [\"a\", \"x\"]},\n"
                           "      {\"id\": \"_2_27\", \"op\": \"add\", \"args\": [\"x\", \"_2_31\"]},\n"
                           "      {\"id\": \"_2_36\", \"op\": \"mul\", \"args\": [\"_2_27\", 0.5]}\n"
                           "    ], \"result\": \"_2_36\"}}\n"
                           "  ],\n"
                           "  \"outputs\": [\"r\"]\n"
                           "}\n");
    /* the JSON laid out again is the same text */
    tl_status st = {0};
    tl_srcpos pos;
    char *again = tl_program_compile(json, strlen(json), "g.json", false, NULL, &pos, &st);
    cr_assert(again, "%s", st.msg);
    cr_expect_str_eq(again, json);
    free(again);
    free(json);
}

Test(compile, json_graphs_are_laid_out_too)
{
    static const char g[] = "{\"outputs\": \"y\", \"nodes\": [{\"op\": \"sum\", \"axes\": 1, \"args\": [\"x\"], \"id\": \"y\"}],"
                            " \"inputs\": [\"x\"], \"version\": 1, \"doc\": \"a \\\"doc\\\"\"}";
    tl_status st = {0};
    tl_srcpos pos;
    char *json = tl_program_compile(g, strlen(g), "g.json", false, NULL, &pos, &st);
    cr_assert(json, "%s", st.msg);
    cr_expect_str_eq(json, "{\n  \"version\": 1,\n  \"doc\": \"a \\\"doc\\\"\",\n  \"inputs\": [\"x\"],\n"
                           "  \"nodes\": [\n    {\"id\": \"y\", \"op\": \"sum\", \"args\": [\"x\"], \"axes\": 1}\n  ],\n"
                           "  \"outputs\": \"y\"\n}\n");
    free(json);
    char *bad = tl_program_compile("{\"version\": 2}", 14, "g.json", false, NULL, &pos, &st);
    cr_expect_null(bad);
    cr_expect(strstr(st.msg, "\"version\" must be the integer 1"), "%s", st.msg);
}

/* ---------- recipe equality ---------- */

Test(diff, the_same_recipe)
{
    expect_same("y = x * 2", "z = x * 2");                                  /* renaming */
    expect_same("input a, b\nc = a + b", "input p, q\nr = p + q");          /* inputs renamed */
    expect_same("a = sin(x); b = cos(x); a + b", "b = cos(x); a = sin(x); a + b"); /* independent order */
    expect_same("x * 2", "k = 2; x * k");                                   /* a number and a weak const */
    expect_same("x * nan", "k = nan; x * k");
    expect_same("y = map(p -> p * 2, x)", "y = map(q -> q * 2, x)");        /* block parameters */
    expect_same("iterate(3, x, (i, s) -> s * i)", "iterate(3, x, (j, t) -> t * j)");
    expect_same("u = sin(x); v = cos(x); w = exp(x); u", "w = exp(x); v = cos(x); u = sin(x); u"); /* unused */
    expect_same("softmax(x)", "softmax(x, axis=-1)");                       /* a default written out */
    expect_same("[1, 2] * x", "k = [1, 2]; k * x");
    expect_same("input x: f32[n, 3]\nx * 2", "input y: f32[m, 3]\ny * 2"); /* size variables renamed */
}

Test(diff, not_the_same_recipe)
{
    expect_differ("(a + b) + c", "a + (b + c)", "arg 1 <- node \"_1_4\" (add) arg 1: input 1 \"a\"",
                  "arg 2 <- node \"_1_8\" (add) arg 1: input 2 \"b\"");
    expect_differ("x * x", "x ** 2", "node \"out\" (mul)", "node \"out\" (pow)");
    expect_differ("x * 2", "x * 2.0000000000000004", "arg 2: 2.0", "arg 2: 2.0000000000000004");
    expect_differ("x * 0.0", "x * -0.0", "arg 2: 0.0", "arg 2: -0.0");
    expect_differ("input a, b\na - b", "input a, b\nb - a", "arg 1: input 1 \"a\"", "arg 1: input 2 \"b\"");
    expect_differ("sum(x, axes=[1])", "sum(x, axes=[0])", "(sum) axes=[1]", "(sum) axes=[0]");
    expect_differ("sum(x, keepdims=true)", "sum(x)", "keepdims=true", "keepdims=false");
    expect_differ("output y, z; y = sin(x); z = cos(x)", "output z, y; y = sin(x); z = cos(x)",
                  "output \"y\" <- node \"y\" (sin)", "output \"z\" <- node \"z\" (cos)");
    expect_differ("y = sin(x); u = cos(x); y", "y = sin(x); y", "unused node \"u\" (cos)", "no such node (1 node in all, where the other has 2)");
    expect_differ("input x, y; x - y", "input y, x; x - y", "input 1 \"x\"", "input 2 \"x\"");
    expect_differ("y = sin(x); y * y", "sin(x) * sin(x)", "(mul)", "arg 2 <- node \"_1_10\" (sin)");
    expect_differ("input x: f32\nx", "input x: f64\nx", "input 1 \"x\": f32", "input 1 \"x\": f64");
    expect_differ("input x, y\nx", "input x\nx", "2 inputs (\"x\", \"y\")", "1 input (\"x\")");
    expect_differ("input x, y\n(a, b) = iterate(2, (x, y), (u, v) -> (v, u))", "input x, y\na = iterate(2, x, u -> u)",
                  "2 outputs", "1 output");
    expect_differ("iterate(3, x, s -> sin(s))", "iterate(4, x, s -> sin(s))", "count 3", "count 4");
    expect_differ("[1, 2] * x", "f64:[1, 2] * x", "(untyped) f64[2]", "const \"_1_1\" f64[2]");
    expect_differ("[1, 2] * x", "[1, 3] * x", "arg 1: const", "arg 1: const");
    expect_differ("y = if c then x else sin(x)", "y = if c then sin(x) else x", "else <- node \"_1_22\" (sin)", "then <- node \"_1_15\" (sin)");
    expect_differ("y = map(p -> p * 2, x)", "y = map(p -> 2 * p, x)", "body <- node \"_1_16\" (mul) arg 1: parameter",
                  "body <- node \"_1_16\" (mul) arg 1: 2.0");
}

/* ---------- programs and graphs: the same recipe, the same bits ---------- */

static tl_graph *load_program_file(const char *path)
{
    unsigned char *buf;
    size_t len;
    tl_status st = {0};
    tl_srcpos pos;
    cr_assert(!tl_slurp_path(path, &buf, &len, &st), "%s", st.msg);
    tl_graph *g = tl_program_load((const char *)buf, len, path, NULL, &pos, &st);
    free(buf);
    cr_assert(g, "%s", st.msg);
    return g;
}

static bool same_bits(const tl_tensor *a, const tl_tensor *b)
{
    return a->dtype == b->dtype && tl_same_shape(a, b) &&
           !memcmp(a->data, b->data, (size_t)a->numel * tl_dtype_size(a->dtype));
}

/* Runs g on in (seeds NULL: all ones); outputs then gradients. */
static int run(const tl_graph *g, tl_tensor **in, tl_tensor **seeds, tl_tensor **got)
{
    tl_status st = {0};
    tl_result *r;
    tl_run_opts o = {.record = true};
    cr_assert(!tl_run(g, in, &o, &r, &st), "%s: %s", g->path, st.msg);
    int n = tl_result_noutputs(r);
    for (int i = 0; i < n; i++)
        got[i] = tl_tensor_ref((tl_tensor *)tl_result_output(r, i));
    cr_assert(!tl_result_pullback(r, seeds, got + n, &st), "%s: %s", g->path, st.msg);
    tl_result_free(r);
    return n + g->ninputs;
}

/* The program and the graph: the same recipe, the same bits for values
 * and gradients, and the compiled program again the same recipe. */
static void check_pair(const char *tl_path, const char *json_path, tl_tensor **in, tl_tensor **seeds)
{
    tl_status st = {0};
    tl_graph *p = load_program_file(tl_path), *g = tl_graph_load(json_path, &st);
    cr_assert(g, "%s", st.msg);
    tl_recipe_diff d;
    cr_assert(!tl_recipe_compare(p, g, &d, &st), "%s", st.msg);
    cr_expect(d.equal, "%s vs %s:\n  A: %s\n  B: %s", tl_path, json_path, d.a, d.b);
    tl_recipe_diff_free(&d);
    tl_tensor *a[64] = {0}, *b[64] = {0};
    int n = run(p, in, seeds, a);
    cr_assert_eq(run(g, in, seeds, b), n);
    for (int i = 0; i < n; i++) {
        cr_expect((!a[i] && !b[i]) || (a[i] && b[i] && same_bits(a[i], b[i])), "%s: result %d differs from %s",
                  tl_path, i, json_path);
        tl_tensor_unref(a[i]);
        tl_tensor_unref(b[i]);
    }
    tl_graph_free(p);
    tl_graph_free(g);
}

static tl_tensor *lit(const char *s)
{
    tl_status st = {0};
    tl_tensor *t = tl_literal_parse(s, &st);
    cr_assert(t, "%s", st.msg);
    return t;
}

Test(pairs, every_control_flow_fixture)
{
    static const char *const names[] = {
        "if_else", "if_nanbranch", "if_nanbranch_then", "if_nested_a", "if_nested_b", "if_then", "if_tworesults",
        "iterate_capture", "iterate_if", "iterate_map", "iterate_newton_sqrt", "iterate_square_plus_one",
        "iterate_twostate", "iterate_zero", "kink_if_boundary", "kink_map_piecewise", "map_bcast_capture",
        "map_iterate", "map_piecewise", "map_sqrt_guard",
    };
    int checked = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0] * 2 + 1; i++) {
        char name[128], tl_path[256], json_path[256], npz[256], key[300];
        if (i < 2 * (sizeof names / sizeof names[0]))
            snprintf(name, sizeof name, "%s_%s", names[i / 2], i % 2 ? "f32" : "f64");
        else
            snprintf(name, sizeof name, "map_piecewise_zero_f64");
        snprintf(tl_path, sizeof tl_path, "tests/fixtures/programs/%s.tl", name);
        snprintf(json_path, sizeof json_path, "tests/fixtures/flow/%s.json", name);
        snprintf(npz, sizeof npz, "tests/fixtures/flow/%s.npz", name);
        tl_status st = {0};
        tl_graph *g = tl_graph_load(json_path, &st);
        tl_npz *z = tl_npz_open(npz, &st);
        cr_assert(g && z, "%s", st.msg);
        tl_tensor *in[16] = {0}, *seeds[16] = {0};
        for (int k = 0; k < g->ninputs; k++) {
            snprintf(key, sizeof key, "in/%s", g->inputs[k].name);
            cr_assert(in[k] = tl_npz_get(z, key, &st), "%s", st.msg);
        }
        for (int k = 0; k < g->noutputs; k++) {
            snprintf(key, sizeof key, "seed/%s", g->slot_name[g->outputs[k]]);
            cr_assert(seeds[k] = tl_npz_get(z, key, &st), "%s", st.msg);
        }
        check_pair(tl_path, json_path, in, seeds);
        for (int k = 0; k < 16; k++)
            tl_tensor_unref(in[k]), tl_tensor_unref(seeds[k]);
        tl_npz_close(z);
        tl_graph_free(g);
        checked++;
    }
    cr_expect_eq(checked, 41);
}

Test(pairs, every_example)
{
    static const struct {
        const char *name, *inputs[6];
    } ex[] = {
        {"poly", {"[1, 2, -3]"}},
        {"newton_sqrt", {"[2, 9, 0.25]"}},
        {"piecewise", {"[-3, -0.5, 0.2, 2.5]"}},
        {"branch", {"[3, 4]"}},
        {"mlp", {NULL}},
        {"xent", {NULL}},
        {"cnn", {NULL}},
        {"const_file", {NULL}},
    };
    for (size_t i = 0; i < sizeof ex / sizeof ex[0]; i++) {
        char tl_path[128], json_path[128];
        snprintf(tl_path, sizeof tl_path, "examples/%s.tl", ex[i].name);
        snprintf(json_path, sizeof json_path, "examples/%s.json", ex[i].name);
        tl_status st = {0};
        tl_graph *g = tl_graph_load(json_path, &st);
        cr_assert(g, "%s", st.msg);
        tl_tensor *in[16] = {0};
        tl_npz *z = NULL;
        if (!strcmp(ex[i].name, "const_file"))
            in[0] = tl_npy_read_file("examples/const_file_x.npy", &st);
        else if (!ex[i].inputs[0]) {
            char npz[128];
            snprintf(npz, sizeof npz, "examples/%s_inputs.npz", ex[i].name);
            z = tl_npz_open(npz, &st);
        }
        for (int k = 0; k < g->ninputs; k++) {
            if (z)
                in[k] = tl_npz_get(z, g->inputs[k].name, &st);
            else if (ex[i].inputs[k])
                in[k] = lit(ex[i].inputs[k]);
            cr_assert(in[k], "%s: input %d: %s", ex[i].name, k, st.msg);
        }
        check_pair(tl_path, json_path, in, NULL);
        for (int k = 0; k < 16; k++)
            tl_tensor_unref(in[k]);
        tl_npz_close(z);
        tl_graph_free(g);
    }
}

Test(pairs, a_program_and_its_compiled_json)
{
    static const char *const progs[] = {"examples/piecewise.tl", "tests/fixtures/programs/iterate_twostate_f64.tl",
                                        "tests/fixtures/programs/if_tworesults_f32.tl"};
    for (size_t i = 0; i < sizeof progs / sizeof progs[0]; i++) {
        unsigned char *buf;
        size_t len;
        tl_status st = {0};
        tl_srcpos pos;
        cr_assert(!tl_slurp_path(progs[i], &buf, &len, &st));
        char *json = tl_program_compile((const char *)buf, len, progs[i], true, NULL, &pos, &st);
        free(buf);
        cr_assert(json, "%s", st.msg);
        tl_graph *g = tl_graph_parse(json, strlen(json), progs[i], &st), *p = load_program_file(progs[i]);
        cr_assert(g, "%s", st.msg);
        tl_recipe_diff d;
        cr_assert(!tl_recipe_compare(p, g, &d, &st), "%s", st.msg);
        cr_expect(d.equal, "%s: A: %s B: %s", progs[i], d.a, d.b);
        tl_recipe_diff_free(&d);
        tl_graph_free(g);
        tl_graph_free(p);
        free(json);
    }
}

/* ---------- errors after the load point at the text ---------- */

/* The error of running src on x (an f64 literal), placed by
 * tl_program_place. */
static tl_code run_placed(const char *src, const char *x, tl_status *st, tl_srcpos *pos)
{
    tl_srcpos at;
    tl_status_clear(st);
    tl_graph *g = tl_program_load(src, strlen(src), "p.tl", NULL, &at, st);
    cr_assert(g, "%s: %s", src, st->msg);
    cr_assert(g->source && g->slot_pos && g->source_len == strlen(src) && !strcmp(g->source, src));
    tl_tensor *in = tl_literal_parse(x, st);
    cr_assert(in, "%s", st->msg);
    tl_run_opts o = {.record = false};
    tl_result *r = NULL;
    tl_code rc = tl_run(g, &in, &o, &r, st);
    if (rc)
        tl_program_place(g, st, pos);
    tl_result_free(r);
    tl_tensor_unref(in);
    tl_graph_free(g);
    return rc;
}

Test(errors, run_time_errors_are_placed_at_the_text)
{
    tl_status st;
    tl_srcpos pos;
    cr_expect_eq(run_placed("x @ x + 1", "[[1,2,3]]", &st, &pos), TL_EINPUT);
    cr_expect_str_eq(st.msg, "p.tl:1:3: matmul: inner sizes differ: f64[1,3] @ f64[1,3]");
    cr_expect(pos.line == 1 && pos.col == 3);
    /* the innermost node is the place; the enclosing ones keep theirs in the text */
    cr_expect_eq(run_placed("y = if sum(x) > 0 then {\n  h = x @ x\n  h\n} else x\ny", "[[1,2,3]]", &st, &pos),
                 TL_EINPUT);
    cr_expect_str_eq(st.msg, "p.tl:2:9: if at 1:5: then branch: matmul: inner sizes differ: f64[1,3] @ f64[1,3]");
    cr_expect(pos.line == 2 && pos.col == 9);
}

/* msg, an error of g's run, as tl_program_place leaves it: want */
static void expect_placed(const tl_graph *g, const char *msg, const char *want, tl_srcpos *pos)
{
    tl_status st = {0};
    tl_fail(&st, TL_EINPUT, "%s", msg);
    tl_program_place(g, &st, pos);
    cr_expect_str_eq(st.msg, want);
}

Test(errors, a_message_naming_no_node_stays_as_it_is)
{
    tl_srcpos at, pos = {7, 7};
    tl_status st = {0};
    tl_graph *g = tl_program_load("x * 2", 5, "p.tl", NULL, &at, &st);
    cr_assert(g, "%s", st.msg);
    expect_placed(g, "p.tl: missing input \"x\"", "p.tl: missing input \"x\"", &pos);
    cr_expect(pos.line == 0 && pos.col == 0);
    /* a node of another name, or another graph's path: left alone */
    expect_placed(g, "p.tl: node \"nope\" (mul): bad", "p.tl: node \"nope\" (mul): bad", &pos);
    expect_placed(g, "q.tl: node \"out\" (mul): bad", "q.tl: node \"out\" (mul): bad", &pos);
    /* the forms the executor writes */
    expect_placed(g, "p.tl: backward of node \"out\" (mul, inputs f64[2], f64[]): bad",
                  "p.tl:1:3: backward of mul (inputs f64[2], f64[]): bad", &pos);
    expect_placed(g, "p.tl: backward from node \"out\": bad", "p.tl:1:3: backward from the node: bad", &pos);
    /* wrapped (a perturbed run of tl gradcheck): the place first, the wrapping after it */
    expect_placed(g, "input \"x\" at [1] plus the step: p.tl: node \"out\" (mul): bad",
                  "p.tl:1:3: input \"x\" at [1] plus the step: mul: bad", &pos);
    expect_placed(g, "in xp.tl: node \"out\" (mul): bad", "in xp.tl: node \"out\" (mul): bad", &pos);
    tl_graph_free(g);
    /* a graph file has no text to point at */
    const char *json = "{\"version\": 1, \"inputs\": [\"x\"], \"nodes\": [{\"id\": \"y\", \"op\": \"neg\", \"args\": [\"x\"]}], "
                       "\"outputs\": \"y\"}";
    g = tl_graph_parse(json, strlen(json), "g.json", &st);
    cr_assert(g && !g->source && !g->slot_pos, "%s", st.msg);
    expect_placed(g, "g.json: node \"y\" (neg): bad", "g.json: node \"y\" (neg): bad", &pos);
    tl_graph_free(g);
}

Test(errors, the_f64_copy_of_a_recipe)
{
    const char *src = "input x: f32[2]; y = cast(x * f32:[1.5, 2] + random_uniform(shape=[2], seed=1, dtype=\"f32\"), "
                      "dtype=\"f32\"); output y";
    tl_srcpos at;
    tl_status st = {0};
    tl_graph *g = tl_program_load(src, strlen(src), "p.tl", NULL, &at, &st);
    cr_assert(g, "%s", st.msg);
    cr_assert(!tl_graph_to_f64(g, &st), "%s", st.msg);
    cr_expect_eq(g->inputs[0].dtype, TL_F64);
    cr_assert_eq(g->nconsts, 1);
    cr_expect_eq(g->consts[0].tensor->dtype, TL_F64);
    cr_expect_eq(((double *)g->consts[0].tensor->data)[0], 1.5);
    tl_tensor *x = tl_literal_parse("[1, 2]", &st);
    tl_run_opts o = {.record = false};
    tl_result *r = NULL;
    cr_assert(!tl_run(g, &x, &o, &r, &st), "%s", st.msg);
    cr_expect_eq(tl_result_output(r, 0)->dtype, TL_F64); /* the cast and the draw are f64 too */
    tl_result_free(r);
    tl_tensor_unref(x);
    tl_graph_free(g);
}
