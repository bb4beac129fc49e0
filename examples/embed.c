/* Running and differentiating a graph from C with libtl: the Result API.
 *
 *   make examples                  (or, after make install:
 *   cc embed.c $(pkg-config --cflags --libs tl) -o embed)
 *   ./build/examples/embed examples/poly.json '[1,2,3]'
 *
 * Loads GRAPH (a graph file or a .tl program), binds its one input to a literal (or a .npy file), runs it
 * with a recording, pulls back all-ones seeds, and prints every output
 * and the input's gradient. */
#include <stdio.h>
#include <string.h>

#include "tl.h"

static int fail(const tl_status *st)
{
    fprintf(stderr, "embed: %s\n", st->msg);
    return st->code ? (int)st->code : 3;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: embed GRAPH TENSOR  (GRAPH: .json or .tl; TENSOR: a literal such as '[1,2]' or a .npy file)\n");
        return 2;
    }
    tl_status st = {0};
    tl_graph *g = tl_graph_load(argv[1], &st);
    if (!g)
        return fail(&st);
    if (g->ninputs != 1) {
        fprintf(stderr, "embed: %s has %d inputs; this example binds exactly one\n", argv[1], g->ninputs);
        tl_graph_free(g);
        return 2;
    }
    size_t n = strlen(argv[2]);
    tl_tensor *x = n > 4 && !strcmp(argv[2] + n - 4, ".npy") ? tl_npy_read_file(argv[2], &st)
                                                            : tl_literal_parse(argv[2], &st);
    tl_result *r = NULL;
    tl_tensor *grad = NULL;
    tl_run_opts opts = {.record = true}; /* the CPU; a device: .backend = tl_device_open(...) */
    int rc = 0;
    if (!x || tl_run(g, &x, &opts, &r, &st) || tl_result_backward(r, &grad, &st)) {
        rc = fail(&st);
    } else {
        for (int i = 0; i < tl_result_noutputs(r); i++)
            tl_text_write(stdout, tl_result_output_name(r, i), tl_result_output(r, i), false, &st);
        char name[300];
        snprintf(name, sizeof name, "grad/%s", g->inputs[0].name);
        if (grad)
            tl_text_write(stdout, name, grad, false, &st);
        printf("device: %s\n", tl_result_device_name(r));
    }
    tl_tensor_unref(grad);
    tl_result_free(r); /* before the graph it points into */
    tl_tensor_unref(x);
    tl_graph_free(g);
    return rc;
}
