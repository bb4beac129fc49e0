/* ONNX models on the command line: the inputs first (so the tensors given
 * fix the shapes), then the translation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "graph/onnx.h"

/* The initializers that become inputs besides --params: those --wrt names
 * and those a --tangent is given for (jvp, hvp: a direction in the
 * weights), as one comma-separated list; NULL for none, or with st set
 * when memory ran out. */
static char *made_inputs(const cli_run_args *c, tl_status *st)
{
    size_t len = c->wrt ? strlen(c->wrt) + 1 : 0;
    for (int i = 0; i < c->ntangent; i++)
        len += strcspn(c->tangent[i], "=") + 1;
    if (!len)
        return NULL;
    char *s = malloc(len), *p = s;
    if (!s)
        return tl_fail(st, TL_ERUNTIME, "out of memory"), NULL;
    if (c->wrt)
        p += sprintf(p, "%s", c->wrt);
    for (int i = 0; i < c->ntangent; i++)
        p += sprintf(p, "%s%.*s", p == s ? "" : ",", (int)strcspn(c->tangent[i], "="), c->tangent[i]);
    *p = '\0';
    return s;
}

tl_graph *cli_model_open(cli_run_args *c, struct tl_onnx_model **m, tl_status *st)
{
    char *wrt = made_inputs(c, st);
    if (!wrt && st->code)
        return NULL;
    tl_onnx_options o = {.params = c->params, .wrt = wrt, .allow_outside_files = c->outside};
    *m = tl_onnx_open(c->graph, &o, st);
    free(wrt);
    if (!*m)
        return NULL;
    tl_graph *g = tl_onnx_signature(*m, st);
    c->model = *m;
    if (g && !(c->defaults = calloc((size_t)g->ninputs + 1, sizeof *c->defaults))) {
        tl_fail(st, TL_ERUNTIME, "out of memory");
        tl_graph_free(g);
        return NULL;
    }
    for (int i = 0; g && i < g->ninputs; i++)
        c->defaults[c->ndefaults++] = tl_onnx_default(*m, i);
    return g;
}

int cli_model_check(const char *path, const struct tl_onnx_model *m, int n, tl_tensor *const *in, tl_status *st)
{
    for (int i = 0; i < n; i++)
        if (tl_onnx_check_input(m, i, in[i], st))
            return tl_wrap(st, "%s", path), cli_fail(st);
    return 0;
}

int cli_model_translate(const cli_run_args *c, struct tl_onnx_model *m, tl_graph **g, tl_tensor **in, tl_status *st)
{
    int rc = cli_model_check(c->graph, m, (*g)->ninputs, in, st);
    if (rc)
        return rc;
    tl_graph *r = tl_onnx_translate(m, in, st);
    if (!r) {
        cli_literal_hint(c, in, *g, st); /* an f64 literal for an int64 input: its prefix */
        return cli_fail(st);
    }
    tl_graph_free(*g);
    *g = r;
    return 0;
}

int cli_model_bind(cli_run_args *c, struct tl_onnx_model **m, tl_graph **sig, tl_tensor ***in, tl_status *st)
{
    if (!(*sig = cli_model_open(c, m, st)))
        return cli_fail(st);
    if (!(*in = calloc((size_t)(*sig)->ninputs + 1, sizeof **in)))
        return tl_fail(st, TL_ERUNTIME, "out of memory"), cli_fail(st);
    c->declared = *m;
    int rc = cli_bind_inputs(c, *sig, *in, st);
    return rc ? rc : cli_model_check(c->graph, *m, (*sig)->ninputs, *in, st);
}

void cli_model_close(struct tl_onnx_model *m) { tl_onnx_free(m); }

const char *cli_model_input_hint(const struct tl_onnx_model *m, const tl_graph *g, const char *name, char *buf,
                                 size_t len)
{
    int ninit = m ? tl_onnx_initializer_count(m) : 0;
    for (int i = 0; i < ninit; i++)
        if (tl_onnx_initializer_name(m, i) && !strcmp(tl_onnx_initializer_name(m, i), name)) {
            snprintf(buf, len, " (an initializer of the model: a constant, which --params or --wrt %.60s makes "
                               "an input of tl grad, jvp, hvp and gradcheck)", name);
            return buf;
        }
    const char **names = ninit ? malloc(sizeof *names * ((size_t)g->ninputs + (size_t)ninit)) : NULL;
    if (!names)
        return cli_input_hint(g, name, buf, len);
    int n = 0;
    for (int k = 0; k < g->ninputs; k++)
        names[n++] = g->inputs[k].name;
    for (int i = 0; i < ninit; i++)
        if (tl_onnx_initializer_name(m, i))
            names[n++] = tl_onnx_initializer_name(m, i);
    const char *near = tl_nearest(name, names, n);
    free(names);
    if (!near)
        return cli_input_hint(g, name, buf, len);
    snprintf(buf, len, " (did you mean \"%.200s\"?)", near);
    return buf;
}
