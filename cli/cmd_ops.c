/* tl ops: the operations this build knows, from the op table. */
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
