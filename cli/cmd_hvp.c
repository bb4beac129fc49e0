/* tl jvp and tl hvp: second derivatives on the same tape.  The run is
 * recorded for them (exec.h: twice), the seeds are pulled back with the
 * backward pass itself recorded, and the tangents are then pulled back
 * through that: for hvp from the gradients to the inputs (the Hessian of
 * <seed, outputs> times the tangents), for jvp from the gradients to the
 * seeds, of which the recorded backward pass is a linear function (J v).
 * The rest (inputs, seeds, --wrt, writing, --expect) is tl grad's
 * (cmd_run.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "graph/onnx.h"

/* The input a --tangent names, or an exit code (through *rc). */
static int tangent_input(const cli_run_args *c, const tl_graph *g, tl_tensor *const *in, const char *spec,
                         tl_status *st, int *rc)
{
    const char *eq = strchr(spec, '=');
    size_t n = (size_t)(eq - spec);
    char name[300];
    snprintf(name, sizeof name, "%.*s", (int)(n < 299 ? n : 299), spec);
    int k = n < 256 ? tl_graph_input_index(g, name) : -1;
    char hint[400];
    if (k < 0)
        *rc = (tl_fail(st, TL_EINPUT, "--tangent %s: not an input of the graph%s", name,
                       cli_model_input_hint(c->model, g, name, hint, sizeof hint)), cli_fail(st));
    else if (tl_dtype_is_int(in[k]->dtype))
        *rc = (tl_fail(st, TL_EINPUT, "--tangent %s: input \"%s\" is an index tensor (%s), which has no "
                       "tangent", name, name, tl_dtype_name(in[k]->dtype)), cli_fail(st));
    else if (tl_onnx_input_is_bool(c->model, k))
        *rc = (tl_fail(st, TL_EINPUT, "--tangent %s: input \"%s\" is bool in the model (given as %s 0/1), which "
                       "has no tangent", name, name, tl_dtype_name(in[k]->dtype)), cli_fail(st));
    return k;
}

int cli_second_prepare(const cli_run_args *c, const tl_graph *g, tl_tensor *const *in, const bool *wrt,
                       cli_second *s, tl_status *st)
{
    int ni = g->ninputs, rc = 0;
    s->jvp = c->second == 1;
    s->ninputs = ni;
    s->nd = ni + g->nslots; /* outputs: the graph's, or --outputs' */
    s->tangent = calloc((size_t)ni + 1, sizeof *s->tangent);
    s->wrt = calloc((size_t)ni + 1, sizeof *s->wrt);
    s->d = calloc((size_t)s->nd + 1, sizeof *s->d);
    s->names = calloc((size_t)s->nd + 1, sizeof *s->names);
    if (!s->tangent || !s->wrt || !s->d || !s->names)
        return tl_fail(st, TL_ERUNTIME, "out of memory"), cli_fail(st);
    for (int i = 0; i < c->ntangent && !rc; i++) {
        int k = tangent_input(c, g, in, c->tangent[i], st, &rc);
        if (rc)
            break;
        const tl_tensor *x = in[k];
        const char *name = g->inputs[k].name;
        char want[96], got[96];
        if (s->tangent[k]) {
            rc = (tl_fail(st, TL_EINPUT, "--tangent %s: given twice", name), cli_fail(st));
        } else if (!(s->tangent[k] = cli_read_tensor(strchr(c->tangent[i], '=') + 1, st))) {
            rc = (tl_wrap(st, "--tangent %s", name), cli_fail(st));
        } else if (s->tangent[k]->dtype != x->dtype || !tl_same_shape(s->tangent[k], x)) {
            char hint[200];
            tl_fail(st, TL_EINPUT, "--tangent %s: expected %s like the input, got %s%s", name,
                    tl_tensor_desc(x, want, sizeof want), tl_tensor_desc(s->tangent[k], got, sizeof got),
                    cli_f32_literal_hint("--tangent", c->tangent[i], strchr(c->tangent[i], '=') + 1,
                                         s->tangent[k], x->dtype, hint, sizeof hint));
            rc = cli_fail(st);
        }
    }
    /* the run differentiates the tangents' inputs (mixed partials), and
     * for hvp those whose gradients are written */
    for (int k = 0; k < ni && !rc; k++)
        s->wrt[k] = s->tangent[k] || (c->second == 2 && wrt[k]);
    return rc;
}

tl_code cli_second_pullback(const cli_run_args *c, tl_result *r, tl_tensor *const *seeds, const bool *wrt,
                            tl_tensor **grads, cli_second *s, tl_status *st)
{
    (void)c;
    if (tl_result_pullback_recorded(r, seeds, s->jvp, grads, st))
        return st->code;
    for (int k = 0; s->jvp && k < s->ninputs; k++) { /* jvp writes no gradient: its memory is free again */
        tl_tensor_unref(grads[k]);
        grads[k] = NULL;
    }
    if (tl_result_pullback_again(r, s->tangent, s->jvp ? NULL : s->d, s->jvp ? s->d : NULL, st))
        return st->code;
    for (int k = 0; !s->jvp && k < s->ninputs; k++) /* hvp writes --wrt's gradients and hvps alone */
        if (!wrt[k]) {
            tl_tensor_unref(grads[k]);
            grads[k] = NULL;
            tl_tensor_unref(s->d[k]);
            s->d[k] = NULL;
        }
    return TL_OK;
}

int cli_second_names(const tl_graph *g, const tl_result *r, cli_second *s, const char **names,
                     const tl_tensor **ts)
{
    int n = 0, count = !s->d ? 0 : s->jvp ? tl_result_noutputs(r) : g->ninputs;
    for (int i = 0; i < count; i++) {
        if (!s->d[i])
            continue;
        const char *base = s->jvp ? tl_result_output_name(r, i) : g->inputs[i].name;
        size_t len = strlen(base) + 5;
        if (!(s->names[i] = malloc(len)))
            continue; /* cannot happen in practice; the tensor is then not written */
        snprintf(s->names[i], len, "%s/%s", s->jvp ? "jvp" : "hvp", base);
        names[n] = s->names[i];
        ts[n++] = s->d[i];
    }
    return n;
}

void cli_second_free(cli_second *s)
{
    for (int k = 0; s->tangent && k < s->ninputs; k++)
        tl_tensor_unref(s->tangent[k]);
    for (int k = 0; s->d && k < s->nd; k++) {
        tl_tensor_unref(s->d[k]);
        free(s->names[k]);
    }
    free(s->tangent);
    free(s->wrt);
    free(s->d);
    free(s->names);
}
