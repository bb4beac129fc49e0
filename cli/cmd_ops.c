/* tl ops and tl devices: what this build can run, and where. */
#include "backends/device.h"
#include "cli.h"

int cmd_ops(int argc, char **argv)
{
    if (argc > 1)
        return cli_usage("tl ops takes no arguments, got '%s'", argv[1]);
    static const char *kinds[] = {"binary", "compare", "unary", "reduce", "other", "control"};
    for (int i = 0; i < TL_OP_COUNT; i++) {
        if (tl_ops[i].kind == TL_KIND_INT)
            continue;
        printf("%-13s %-8s ", tl_ops[i].name, kinds[tl_ops[i].kind]);
        if (tl_ops[i].max_args < 0)
            printf("%d+ args\n", tl_ops[i].min_args);
        else if (tl_ops[i].kind == TL_KIND_FLOW)
            printf("(graph.md)\n");
        else
            printf("%d arg%s\n", tl_ops[i].min_args, tl_ops[i].min_args == 1 ? "" : "s");
    }
    return cli_finish_stdout();
}

int cmd_devices(int argc, char **argv)
{
    if (argc > 1)
        return cli_usage("tl devices takes no arguments, got '%s'", argv[1]);
    tl_device_list l;
    tl_device_probe(&l);
    printf("cpu      usable  host memory, every op in every dtype\n");
    if (!l.count) {
        printf("cuda     not usable: ");
        cli_print_escaped(stdout, l.why);
        printf("\n");
    }
    for (int i = 0; i < l.count; i++) {
        const tl_plugin_device *d = &l.dev[i];
        printf("%-8s usable  ", l.name[i]);
        cli_print_escaped(stdout, d->model);
        printf(", %.1f GiB (%.1f GiB free), compute capability %d.%d\n",
               (double)d->memory / (1 << 30), (double)d->free / (1 << 30), d->cc_major, d->cc_minor);
    }
    if (l.plugin_found) {
        printf("plugin   ");
        cli_print_escaped(stdout, l.plugin_path);
        printf("\n");
    }
    return cli_finish_stdout();
}
