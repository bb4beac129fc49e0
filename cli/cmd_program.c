/* Programs wherever a graph goes (a .tl file, or -e TEXT, which
 * cli_load_graph hands to cli_load_program), and the two commands about
 * recipes: tl compile (the graph a program translates to, as JSON) and
 * tl diff (whether two programs or graphs are the same recipe). */
#define _DEFAULT_SOURCE /* realpath */
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "formats/npy.h"
#include "graph/onnx.h"
#include "graph/program.h"
#include "graph/recipe.h"

/* What cli_inline_graph puts before the text: no GRAPH a user types can
 * start so, since every argument starting with '-' is an option. */
#define INLINE_MARK "-e "
#define INLINE_LEN 3

/* The source line and caret of the last program error, waiting for
 * cli_fail to print them under its message.  The command line's one piece
 * of state: a command reports one error and exits. */
static char caret_note[1024];

bool cli_is_program(const char *graph)
{
    size_t n = strlen(graph);
    return !strncmp(graph, INLINE_MARK, INLINE_LEN) || (n > 3 && !strcmp(graph + n - 3, ".tl"));
}

/* Marks every slot a block reads: its nodes' arguments, an if's
 * condition, and the blocks inside with their results. */
static void mark_reads(const tl_block *b, bool *used)
{
    for (int i = 0; b && i < b->nnodes; i++) {
        const tl_node *n = &b->nodes[i];
        for (int k = 0; k < n->nargs; k++)
            if (n->args[k].slot >= 0)
                used[n->args[k].slot] = true;
        if (n->flow->cond.slot >= 0)
            used[n->flow->cond.slot] = true;
        const tl_block *in[3] = {n->flow->then_b, n->flow->else_b, n->flow->body};
        for (int j = 0; j < 3; j++) {
            mark_reads(in[j], used);
            for (int r = 0; in[j] && r < in[j]->nresult; r++)
                used[in[j]->result[r]] = true;
        }
    }
}

void cli_warn_unused(const tl_graph *g)
{
    bool *used = calloc((size_t)g->nslots + 1, sizeof *used);
    if (!used)
        return;
    mark_reads(&g->top, used);
    for (int i = 0; i < g->noutputs; i++)
        used[g->outputs[i]] = true;
    for (int i = 0; i < g->top.nnodes; i++) {
        const tl_node *n = &g->top.nodes[i];
        bool any = false;
        for (int k = 0; k < n->nout; k++)
            any = any || used[n->out[k]];
        const char *name = g->slot_name[n->out[0]];
        if (!any && name[0] != '_') /* _3_9: a value the program made, never unread */
            fprintf(stderr, "tl: warning: %s: \"%s\" is computed but never used (a program returns its last "
                    "binding; `output %s, ...` returns more)\n", g->path, name, name);
    }
    free(used);
}

bool cli_is_graph_file(const char *graph)
{
    size_t n = strlen(graph);
    return n > 5 && !strcmp(graph + n - 5, ".json");
}

bool cli_text_is_program(const char *text, size_t len)
{
    size_t i = 0;
    while (i < len && strchr(" \t\r\n", text[i]))
        i++;
    if (i == len)
        return false; /* nothing: the JSON loader says so */
    char c = text[i];
    if (c == '{') { /* a graph's object opens with a key (or closes): a block with a statement */
        for (i++; i < len && strchr(" \t\r\n", text[i]); i++)
            ;
        return i < len && text[i] != '"' && text[i] != '}';
    }
    return c == '#' || c == '_' || c == '(' || c == '[' || c == '-' || c == '.' || (c >= '0' && c <= '9') ||
           (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

char *cli_inline_graph(const char *text)
{
    size_t n = strlen(text);
    char *s = malloc(n + INLINE_LEN + 1);
    if (s) {
        memcpy(s, INLINE_MARK, INLINE_LEN);
        memcpy(s + INLINE_LEN, text, n + 1);
    }
    return s;
}

void cli_print_caret(FILE *f)
{
    if (caret_note[0] && isatty(fileno(f)))
        fputs(caret_note, f);
    caret_note[0] = '\0';
}

/* A graph's text: a file, standard input ("-"), or what -e gave. */
typedef struct source {
    const char *path, *text;
    size_t len;
    unsigned char *buf;
} source;

static tl_code read_source(const char *graph, source *s, tl_status *st)
{
    *s = (source){graph, NULL, 0, NULL};
    if (!strncmp(graph, INLINE_MARK, INLINE_LEN)) {
        s->path = "-e";
        s->text = graph + INLINE_LEN;
        s->len = strlen(s->text);
        return TL_OK;
    }
    if (!strcmp(graph, "-")) {
        s->path = "standard input";
        if (tl_slurp_stream(stdin, &s->buf, &s->len, st))
            return tl_wrap(st, "standard input");
    } else if (tl_slurp_path(graph, &s->buf, &s->len, st)) {
        return tl_wrap(st, "%s", graph);
    }
    s->text = (const char *)s->buf;
    return TL_OK;
}

/* A file named .tl (s read from it) that holds a JSON graph: said so,
 * where the program's parser would stumble over its first string. */
static bool graph_in_program_file(const source *s, tl_status *st)
{
    size_t i = 0;
    while (s->buf && i < s->len && strchr(" \t\r\n", s->text[i]))
        i++;
    if (!s->buf || i == s->len || s->text[i] != '{' || cli_text_is_program(s->text, s->len))
        return false;
    tl_fail(st, TL_EINPUT, "%s: a JSON graph, not a program: name it .json", s->path);
    return true;
}

/* The program's line at pos and a caret under its column (a tab stays a
 * tab, so the caret lines up); a long line is shown around the column. */
static void note_caret(const char *text, size_t len, tl_srcpos pos)
{
    enum { BEFORE = 60, WIDTH = 120 };
    const char *p = text, *end = text + len;
    if (len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3))
        p += 3; /* a byte order mark, which the lexer skips too */
    for (int line = 1; line < pos.line && p < end; p++)
        line += *p == '\n';
    int skip = pos.col - 1 > BEFORE + 20 ? pos.col - 1 - BEFORE : 0, col = 0;
    char shown[512], under[512];
    size_t ns = 0, nu = 0;
    if (skip)
        ns = nu = (size_t)snprintf(shown, sizeof shown, "...");
    memset(under, ' ', nu);
    for (; p < end && *p != '\n' && *p != '\r' && col < skip + WIDTH && ns + 5 < sizeof shown; col++) {
        size_t len = 1;
        while (p + len < end && ((unsigned char)p[len] & 0xC0) == 0x80 && len < 4)
            len++; /* the rest of a UTF-8 character */
        bool ctl = (unsigned char)*p < 0x20 && *p != '\t';
        if (col >= skip) {
            memcpy(shown + ns, ctl || *p == 0x7f ? "?" : p, ctl || *p == 0x7f ? 1 : len);
            ns += ctl || *p == 0x7f ? 1 : len;
            if (col < pos.col - 1)
                under[nu++] = *p == '\t' ? '\t' : ' ';
        }
        p += len;
    }
    snprintf(caret_note, sizeof caret_note, "  %.*s%s\n  %.*s^\n", (int)ns, shown,
             p < end && *p != '\n' && *p != '\r' ? "..." : "", (int)nu, under);
}

tl_graph *cli_load_program_text(const char *text, size_t len, const char *path, const tl_graph_options *o,
                                tl_status *st)
{
    source s = {path, text, len, NULL};
    tl_srcpos pos;
    tl_graph *g = tl_program_load(s.text, s.len, s.path, o, &pos, st);
    if (!g && pos.line)
        note_caret(s.text, s.len, pos);
    return g;
}

tl_graph *cli_load_program(const char *graph, const tl_graph_options *o, tl_status *st)
{
    source s;
    if (read_source(graph, &s, st))
        return NULL;
    if (graph_in_program_file(&s, st)) {
        free(s.buf);
        return NULL;
    }
    tl_graph *g = cli_load_program_text(s.text, s.len, s.path, o, st);
    free(s.buf);
    return g;
}

int cli_fail_in(const tl_graph *g, tl_status *st)
{
    tl_srcpos pos;
    tl_program_place(g, st, &pos);
    if (pos.line)
        note_caret(g->source, g->source_len, pos);
    return cli_fail(st);
}

/* ---------- arguments ---------- */

typedef struct args {
    const char *graphs[2]; /* GRAPH arguments, or what -e made of TEXT */
    char *inlined[2];
    int ngraphs, want;
    const char *output;
    bool outside;
    /* tl diff: NAME=TENSOR and -i FILE for the ONNX models among the
     * recipes (c.bind and c.npz, argc entries each) */
    bool inputs;
    cli_run_args c;
} args;

static int parse(int argc, char **argv, args *a, bool output)
{
    if (a->inputs && (!(a->c.bind = calloc((size_t)argc, sizeof *a->c.bind)) ||
                      !(a->c.npz = calloc((size_t)argc, sizeof *a->c.npz))))
        return cli_usage("out of memory");
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        bool e = !strcmp(s, "-e");
        if (output && cli_is_opt(s, "-o", "--output")) {
            if (!(a->output = cli_opt_value(argc, argv, &i, s, "--output")))
                return cli_usage("%s needs a file", s);
        } else if (!strcmp(s, "--allow-outside-files")) {
            a->outside = true;
        } else if (a->inputs && cli_is_opt(s, "-i", "--inputs")) {
            if (!(a->c.npz[a->c.nnpz++] = cli_opt_value(argc, argv, &i, s, "--inputs")))
                return cli_usage("%s needs a result file (.npz, json or text)", s);
        } else if (a->inputs && a->ngraphs && s[0] != '-' && strchr(s, '=')) {
            a->c.bind[a->c.nbind++] = s; /* after the first recipe, NAME=TENSOR */
        } else if (e && i + 1 == argc) {
            return cli_usage("-e needs a program");
        } else if (cli_is_opt(s, "-i", "--inputs")) {
            return cli_usage("%s: a program has no shapes to fix (tl compile MODEL.onnx takes the inputs)", s);
        } else if (s[0] == '-' && s[1] && !e) {
            return cli_unknown_option(argv[0], s);
        } else if (a->ngraphs == a->want) {
            return cli_usage("tl %s takes %s, got '%s' too", argv[0], a->want == 1 ? "one program" : "two recipes",
                             e ? argv[i + 1] : s);
        } else if (e) {
            if (!(a->inlined[a->ngraphs] = cli_inline_graph(argv[++i])))
                return cli_usage("out of memory");
            a->graphs[a->ngraphs] = a->inlined[a->ngraphs];
            a->ngraphs++;
        } else {
            a->graphs[a->ngraphs++] = s;
        }
    }
    if (a->ngraphs < a->want)
        return cli_usage(a->want == 1 ? "no program given: tl compile PROGRAM [-o FILE.json]"
                                      : "tl diff compares two recipes: tl diff A B [NAME=TENSOR]... [-i FILE]");
    return 0;
}

/* ---------- tl compile ---------- */

static tl_code text_body(FILE *f, const void *ctx, tl_status *st)
{
    (void)st;
    fputs(ctx, f);
    return TL_OK;
}

/* The folder of path ("." when it names none), resolved (NULL: not
 * there; the caller frees it). */
static char *real_folder(const char *path)
{
    const char *slash = strrchr(path, '/');
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%.*s", slash ? (slash == path ? 1 : (int)(slash - path)) : 1, slash ? path : ".");
    return realpath(dir, NULL);
}

/* The path of file (absolute, resolved) from folder dir (the same): below
 * it as "sub/f.npy", else through "..". */
static void path_from(const char *dir, const char *file, char *buf, size_t len)
{
    size_t common = 0, n = strlen(dir);
    if (!strcmp(dir, "/"))
        n = 0;
    if (!strncmp(file, dir, n) && file[n] == '/') {
        snprintf(buf, len, "%s", file + n + 1);
        return;
    }
    for (size_t i = 0; dir[i] && dir[i] == file[i]; i++)
        if (dir[i] == '/')
            common = i; /* the last separator both share */
    size_t k = 0;
    buf[0] = '\0';
    for (const char *p = dir + common; *p && k + 4 < len; p++)
        if (*p == '/')
            k += (size_t)snprintf(buf + k, len - k, "../");
    snprintf(buf + k, len - k, "%s", file + common + 1);
}

/* One "file" of the program (relative to its folder from) made relative
 * to the compiled graph's folder to; *moved set when it changed. */
static tl_code move_file(const args *a, const char *from, const char *to, cJSON *file, bool *moved,
                         tl_status *st)
{
    if (!cJSON_IsString(file) || file->valuestring[0] == '/')
        return TL_OK;
    char whole[PATH_MAX * 2], *real, rel[PATH_MAX * 2];
    snprintf(whole, sizeof whole, "%s/%s", from, file->valuestring);
    if (!(real = realpath(whole, NULL)))
        return TL_OK; /* the loader found it; gone since: the next load says so */
    path_from(to, real, rel, sizeof rel);
    free(real);
    if (!strncmp(rel, "../", 3) && !a->outside)
        return tl_fail(st, TL_EINPUT, "-o %s: the program's file \"%s\" would be %s from the compiled graph's "
                       "folder, outside it: compile into the program's folder (or one above it), or give "
                       "--allow-outside-files, which running it needs too", a->output, file->valuestring, rel);
    if (strcmp(rel, file->valuestring) && cJSON_SetValuestring(file, rel))
        *moved = true;
    return TL_OK;
}

/* tl compile PROGRAM -o DIR/FILE.json where DIR is not the program's
 * folder: the files it reads (file constants, inputs' defaults), relative
 * to the program's folder, are rewritten relative to DIR, so that the
 * compiled graph reads the same files; one that would lie outside DIR
 * needs --allow-outside-files.  The result is loaded (from DIR) and laid
 * out anew: *json replaced.  The program's folder: that of its file (or a
 * JSON graph's), else the current one (-e, -). */
static tl_code move_file_consts(const args *a, char **json, tl_status *st)
{
    const char *src = strncmp(a->graphs[0], INLINE_MARK, INLINE_LEN) && strcmp(a->graphs[0], "-")
                          ? a->graphs[0] : "./-";
    char *from = real_folder(src), *to = real_folder(a->output), *text = NULL;
    cJSON *doc = NULL;
    bool moved = false;
    tl_code rc = TL_OK;
    if (!from || !to || !strcmp(from, to))
        goto done; /* the same folder (or one not there, which writing reports) */
    if (!(doc = cJSON_Parse(*json))) {
        rc = tl_fail(st, TL_ERUNTIME, "out of memory");
        goto done;
    }
    const cJSON *consts = cJSON_GetObjectItemCaseSensitive(doc, "consts");
    for (cJSON *c = consts ? consts->child : NULL; c && !rc; c = c->next)
        rc = move_file(a, from, to, cJSON_GetObjectItemCaseSensitive(c, "file"), &moved, st);
    const cJSON *ins = cJSON_GetObjectItemCaseSensitive(doc, "inputs");
    for (cJSON *c = ins ? ins->child : NULL; c && !rc; c = c->next) {
        cJSON *d = cJSON_IsObject(c) ? cJSON_GetObjectItemCaseSensitive(c, "default") : NULL;
        rc = move_file(a, from, to, cJSON_IsObject(d) ? cJSON_GetObjectItemCaseSensitive(d, "file") : NULL, &moved,
                       st);
    }
    if (!rc && moved) {
        tl_graph_options go = {a->outside};
        tl_srcpos pos;
        char *again = (text = cJSON_PrintUnformatted(doc))
                          ? tl_program_compile(text, strlen(text), a->output, false, &go, &pos, st) : NULL;
        if (again) {
            free(*json);
            *json = again;
        } else {
            rc = text ? st->code : tl_fail(st, TL_ERUNTIME, "out of memory");
        }
    }
done:
    free(text);
    cJSON_Delete(doc);
    free(from);
    free(to);
    return rc;
}

static int compile(const args *a)
{
    tl_status st = {0};
    tl_graph_options go = {a->outside};
    source s;
    tl_srcpos pos;
    if (a->output && strcmp(a->output, "-") && strncmp(a->output, "/dev/", 5) && !cli_ends_with(a->output, ".json"))
        return cli_usage("-o %s: tl compile writes a JSON graph: give -o FILE.json (or -o - for standard output)",
                         a->output);
    if (a->output && strcmp(a->output, "-") && cli_check_path(a->output, &st))
        return cli_fail(&st); /* before the work, as run does */
    if (read_source(a->graphs[0], &s, &st))
        return cli_fail(&st);
    if (cli_is_program(a->graphs[0]) && graph_in_program_file(&s, &st)) {
        free(s.buf);
        return cli_fail(&st);
    }
    bool program = cli_is_program(a->graphs[0]) ||
                   (!cli_is_graph_file(a->graphs[0]) && cli_text_is_program(s.text, s.len));
    char *json = tl_program_compile(s.text, s.len, s.path, program, &go, &pos, &st);
    if (!json && pos.line)
        note_caret(s.text, s.len, pos);
    /* checked as tl check would for the types its inputs declare, file
     * constants read: "only a valid graph is written" (a program whose
     * declared shapes cannot meet, or a missing file, was written, until
     * tests/cli/programs.txt's case) */
    tl_graph *cg = json ? tl_graph_parse_with(json, strlen(json), s.path, &go, &st) : NULL;
    int bad = !json ? 0 : !cg ? cli_fail(&st) : cli_check_declared(cg, &st);
    tl_graph_free(cg);
    free(s.buf);
    if (bad) {
        free(json);
        return bad;
    }
    if (!json)
        return cli_fail(&st);
    int rc;
    if (a->output && strcmp(a->output, "-") && strncmp(a->output, "/dev/", 5) && move_file_consts(a, &json, &st))
        rc = cli_fail(&st);
    else if (a->output && strcmp(a->output, "-"))
        rc = cli_write_atomic(a->output, text_body, json, &st) ? cli_fail(&st) : 0;
    else
        rc = (fputs(json, stdout), cli_finish_stdout());
    free(json);
    return rc;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* tl compile MODEL.onnx [NAME=TENSOR...] -o FILE.json: the recipe for
 * those inputs (the declared shapes for the others), its weights in
 * FILE.npz beside it; a FILE.npz there from an earlier compile is
 * replaced, or removed once FILE.json is written when this recipe has
 * every weight inline. */
static int compile_model(int argc, char **argv)
{
    cli_run_args c = {0};
    tl_status st = {0};
    struct tl_onnx_model *m = NULL;
    tl_graph *sig = NULL;
    tl_tensor **in = NULL, **ts = NULL;
    char **keys = NULL, *json = NULL, *npz = NULL;
    int nk = 0, rc = cli_parse_run_args(argc, argv, &c);
    if (!rc && !c.output)
        rc = cli_usage("tl compile MODEL.onnx needs -o FILE.json (its weights go in FILE.npz beside it)");
    /* two files, named alike in one folder: neither standard output nor
     * a device can hold them */
    else if (!rc && (!cli_ends_with(c.output, ".json") || strlen(base_name(c.output)) == 5 ||
                     !strncmp(c.output, "/dev/", 5)))
        rc = cli_usage("-o %s: tl compile MODEL.onnx writes FILE.json, and its weights in FILE.npz beside it: "
                       "give -o FILE.json", c.output);
    if (rc)
        goto done;
    size_t n = strlen(c.output);
    if (!(npz = malloc(n)))
        goto oom;
    snprintf(npz, n, "%.*s.npz", (int)(n - 5), c.output);
    /* both places checked before the work, as run does */
    if (cli_check_path(c.output, &st) || cli_check_path(npz, &st)) {
        rc = cli_fail(&st);
        goto done;
    }
    if ((rc = cli_model_bind(&c, &m, &sig, &in, &st)))
        goto done;
    char *pinned = NULL;
    if (!(json = tl_onnx_compile(m, in, base_name(npz), &nk, &keys, &ts, &pinned, &st))) {
        rc = cli_fail(&st);
        goto done;
    }
    if (pinned) /* still inputs: another value would run a recipe made for these */
        fprintf(stderr, "tl: warning: %s: the compiled recipe holds only for the values given for %s "
                "(they also fixed shapes at load): give it no others\n", c.graph, pinned);
    free(pinned);
    cli_out o = {.path = npz, .n = nk, .names = (const char **)keys, .ts = (const tl_tensor **)ts, .noutputs = nk};
    cli_defer_begin(); /* both written, then both named: a failure changes neither */
    if ((nk && cli_write(&o, &st)) || cli_write_atomic(c.output, text_body, json, &st) || cli_defer_commit(&st)) {
        cli_defer_abort();
        rc = cli_fail(&st);
    } else if (!nk && unlink(npz) && errno != ENOENT) { /* an earlier compile's weights, now stale */
        tl_fail(&st, TL_ERUNTIME, "%s: cannot remove the weights an earlier compile left there (%s, "
                "written, has every weight inline): %s", npz, c.output, strerror(errno));
        rc = cli_fail(&st);
    }
    goto done;
oom:
    rc = cli_usage("out of memory");
done:
    for (int i = 0; i < nk; i++) {
        free(keys[i]);
        tl_tensor_unref(ts[i]);
    }
    free(keys);
    free(ts);
    for (int i = 0; in && sig && i < sig->ninputs; i++)
        tl_tensor_unref(in[i]);
    free(in);
    free(json);
    free(npz);
    tl_graph_free(sig);
    cli_model_close(m);
    cli_run_args_free(&c);
    return rc;
}

int cmd_compile(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (argv[i][0] != '-' && tl_onnx_is_model(argv[i]))
            return compile_model(argc, argv);
    args a = {.want = 1};
    int rc = parse(argc, argv, &a, true);
    if (!rc)
        rc = compile(&a);
    free(a.inlined[0]);
    return rc;
}

/* ---------- tl diff ---------- */

/* One side of tl diff: an ONNX model translated for the inputs given (the
 * shapes it declares for the others), else the graph or program. */
static tl_graph *diff_side(args *a, int k, tl_status *st, int *rc)
{
    tl_graph_options go = {a->outside};
    if (!tl_onnx_is_model(a->graphs[k])) {
        tl_graph *g = cli_load_graph(a->graphs[k], &go, st);
        if (!g && !strncmp(a->graphs[k], INLINE_MARK, INLINE_LEN) && !strncmp(a->graphs[0], INLINE_MARK, INLINE_LEN) &&
            !strncmp(a->graphs[1], INLINE_MARK, INLINE_LEN))
            tl_wrap(st, "%s", k ? "B" : "A"); /* two -e: which one */
        *rc = g ? 0 : cli_fail(st);
        return g;
    }
    cli_run_args c = a->c;
    c.graph = a->graphs[k];
    c.outside = a->outside;
    c.defaults = NULL;
    c.ndefaults = 0;
    struct tl_onnx_model *m = NULL;
    tl_graph *g = NULL;
    tl_tensor **in = NULL;
    *rc = cli_model_bind(&c, &m, &g, &in, st);
    int n = g ? g->ninputs : 0;
    if (!*rc)
        *rc = cli_model_translate(&c, m, &g, in, st);
    if (!*rc && tl_onnx_refine_fixed(m, in, g, st))
        *rc = cli_fail(st);
    if (!*rc) /* as tl compile writes it */
        tl_graph_drop_fixed_inputs(g);
    for (int i = 0; in && i < n; i++)
        tl_tensor_unref(in[i]);
    free(in);
    for (int i = 0; i < c.ndefaults; i++)
        tl_tensor_unref(c.defaults[i]);
    free(c.defaults);
    cli_model_close(m);
    if (*rc) {
        tl_graph_free(g);
        g = NULL;
    }
    return g;
}

static int diff(args *a)
{
    tl_status st = {0};
    tl_recipe_diff d;
    if ((a->c.nbind || a->c.nnpz) && !tl_onnx_is_model(a->graphs[0]) && !tl_onnx_is_model(a->graphs[1]))
        return cli_usage("the inputs tl diff takes fix the shapes of an ONNX model, and neither A nor B is one");
    if (!strcmp(a->graphs[0], "-") && !strcmp(a->graphs[1], "-"))
        return cli_usage("only one of A and B can be standard input");
    a->c.graph = !strcmp(a->graphs[1], "-") ? "-" : a->graphs[0];
    int rc = cli_check_stdin(&a->c);
    if (rc)
        return rc;
    tl_graph *g[2] = {diff_side(a, 0, &st, &rc), NULL};
    if (g[0])
        g[1] = diff_side(a, 1, &st, &rc);
    if (!rc && tl_recipe_compare(g[0], g[1], &d, &st))
        rc = cli_fail(&st);
    if (!rc && !d.equal) {
        printf("A: %s\nB: %s\n", d.a, d.b);
        tl_recipe_diff_free(&d);
        rc = cli_finish_stdout();
        rc = rc ? rc : TL_EDIFF;
    }
    tl_graph_free(g[0]);
    tl_graph_free(g[1]);
    cli_stdin_release();
    return rc;
}

int cmd_diff(int argc, char **argv)
{
    args a = {.want = 2, .inputs = true};
    int rc = parse(argc, argv, &a, false);
    if (!rc)
        rc = diff(&a);
    free(a.inlined[0]);
    free(a.inlined[1]);
    free(a.c.bind);
    free(a.c.npz);
    return rc;
}
