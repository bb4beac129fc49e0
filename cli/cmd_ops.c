/* tl ops and tl devices: what this build can run, and where. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/cpu/blas.h"
#include "backends/device.h"
#include "backends/opdoc.h"
#include "cli.h"
#include "graph/onnx.h"
#include "formats/results.h"

static const char *const kinds[] = {"binary", "compare", "unary", "reduce", "other", "control",
                                    "internal"};

/* The dtypes an op takes (its value arguments'). */
static int op_dtypes(tl_opcode op, tl_dtype *dts)
{
    int n = 0;
    dts[n++] = TL_F32;
    dts[n++] = TL_F64;
    if ((tl_ops[op].dtypes == TL_DT_ANY || tl_ops[op].dtypes == TL_DT_NUM) &&
        tl_ops[op].kind != TL_KIND_FLOW) {
        dts[n++] = TL_I32;
        dts[n++] = TL_I64;
    }
    return n;
}

/* Whether the device runs op on dtype dt (index arguments i64). */
static bool device_runs(const tl_backend *dev, tl_opcode op, tl_dtype dt)
{
    if (tl_ops[op].kind == TL_KIND_FLOW)
        return op == TL_OP_MAP ? dev->supports(dev, op, 1, &dt, dt, NULL) : true; /* run by tl itself */
    tl_dtype in[4];
    int n = tl_ops[op].min_args > 0 ? tl_ops[op].min_args : 1;
    for (int i = 0; i < n && i < 4; i++)
        in[i] = i == tl_ops[op].index_arg ? TL_I64 : dt;
    tl_dtype out = op == TL_OP_ONE_HOT ? TL_F64 : dt;
    return dev->supports(dev, op, n, in, out, NULL);
}

static void arity_text(tl_opcode op, char *buf, size_t len)
{
    const tl_opinfo *o = &tl_ops[op];
    if (o->kind == TL_KIND_FLOW)
        snprintf(buf, len, "%s", op == TL_OP_MAP ? "1+ args, a body" : "blocks");
    else if (o->max_args < 0)
        snprintf(buf, len, "%d+ args", o->min_args);
    else if (o->max_args > o->min_args)
        snprintf(buf, len, "%d-%d args", o->min_args, o->max_args);
    else
        snprintf(buf, len, "%d arg%s", o->min_args, o->min_args == 1 ? "" : "s");
}

/* Where the op runs: "cpu" and, when a device is usable, whether it does. */
static void devices_text(const tl_backend *dev, tl_opcode op, char *buf, size_t len)
{
    tl_dtype dts[4];
    int n = op_dtypes(op, dts), k = snprintf(buf, len, "cpu");
    if (!dev)
        return;
    int on = 0;
    for (int i = 0; i < n; i++)
        on += device_runs(dev, op, dts[i]);
    if (on == n)
        snprintf(buf + k, len - (size_t)k, " %s", dev->name);
    else if (on)
        snprintf(buf + k, len - (size_t)k, " %s(some dtypes)", dev->name);
}

static void json_string_or_null(const char *s)
{
    if (s)
        tl_json_write_string(stdout, s);
    else
        fputs("null", stdout);
}

static void op_json(const tl_backend *dev, tl_opcode op)
{
    const tl_opinfo *o = &tl_ops[op];
    const tl_opdoc *d = &tl_opdocs[op];
    tl_dtype dts[4];
    int n = op_dtypes(op, dts);
    printf("{\"name\": \"%s\", \"kind\": \"%s\", \"min_args\": %d, \"max_args\": ", o->name, kinds[o->kind],
           o->min_args);
    if (o->max_args < 0)
        printf("null");
    else
        printf("%d", o->max_args);
    printf(", \"index_arg\": ");
    if (o->index_arg < 0)
        printf("null");
    else
        printf("%d", o->index_arg);
    printf(", \"differentiable\": %s, \"dtypes\": [", tl_op_differentiable(op) ? "true" : "false");
    for (int i = 0; i < n; i++)
        printf("%s\"%s\"", i ? ", " : "", tl_dtype_name(dts[i]));
    printf("], \"devices\": {\"cpu\": [");
    for (int i = 0; i < n; i++)
        printf("%s\"%s\"", i ? ", " : "", tl_dtype_name(dts[i]));
    printf("]");
    if (dev) {
        printf(", \"%s\": [", dev->name);
        for (int i = 0, m = 0; i < n; i++)
            if (device_runs(dev, op, dts[i]))
                printf("%s\"%s\"", m++ ? ", " : "", tl_dtype_name(dts[i]));
        printf("]");
    }
    printf("}, \"attributes\": [");
    for (int i = 0; i < TL_MAX_OP_ATTRS && d->attrs[i].name; i++) {
        printf("%s{\"name\": \"%s\", \"type\": ", i ? ", " : "", d->attrs[i].name);
        json_string_or_null(d->attrs[i].type);
        printf(", \"required\": %s, \"default\": ", d->attrs[i].deflt ? "false" : "true");
        json_string_or_null(d->attrs[i].deflt);
        printf("}");
    }
    printf("], \"value\": ");
    json_string_or_null(d->value);
    printf(", \"gradient\": ");
    json_string_or_null(d->gradient);
    printf("}");
}

static void op_text(const tl_backend *dev, tl_opcode op)
{
    const tl_opdoc *d = &tl_opdocs[op];
    char arity[32], where[96];
    tl_dtype dts[4];
    int n = op_dtypes(op, dts);
    arity_text(op, arity, sizeof arity);
    devices_text(dev, op, where, sizeof where);
    printf("%s (%s, %s)\n  value:     %s\n  gradient:  %s\n", tl_ops[op].name, kinds[tl_ops[op].kind], arity,
           d->value, d->gradient);
    printf("  dtypes:   ");
    for (int i = 0; i < n; i++)
        printf(" %s", tl_dtype_name(dts[i]));
    if (tl_ops[op].index_arg >= 0)
        printf("; argument %d is an index tensor (i32 or i64)", tl_ops[op].index_arg + 1);
    printf("\n  devices:   %s\n", where);
    for (int i = 0; i < TL_MAX_OP_ATTRS && d->attrs[i].name; i++)
        printf("  attribute %s: %s; %s%s\n", d->attrs[i].name, d->attrs[i].type,
               d->attrs[i].deflt ? "default " : "required", d->attrs[i].deflt ? d->attrs[i].deflt : "");
}

/* tl ops --onnx: the ONNX ops translated, with their opsets. */
static int onnx_ops(bool json)
{
    int lo, hi;
    const char *n;
    if (json)
        printf("[");
    for (int i = 0; (n = tl_onnx_op_name(i, &lo, &hi)); i++) {
        if (json)
            printf("%s{\"op\": \"%s\", \"domain\": \"ai.onnx\", \"opsets\": [%d, %d]}", i ? ",\n " : "", n, lo, hi);
        else
            printf("%-24s ai.onnx  opsets %d-%d\n", n, lo, hi);
    }
    if (json)
        printf("]\n");
    return cli_finish_stdout();
}

int cmd_ops(int argc, char **argv)
{
    const char *name = NULL;
    bool json = false, onnx = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--onnx")) {
            onnx = true;
        } else if (cli_is_opt(a, NULL, "--format")) {
            int usage = cli_format_opt(argc, argv, &i, a, &json);
            if (usage)
                return usage;
        } else if (a[0] == '-' && a[1]) {
            return cli_unknown_option("ops", a);
        } else if (name) {
            return cli_usage("tl ops takes one op name, got '%s' too", a);
        } else {
            name = a;
        }
    }
    if (onnx && name)
        return cli_usage("tl ops --onnx lists every ONNX op translated; it takes no op name");
    if (onnx)
        return onnx_ops(json);
    tl_opcode one = TL_OP_COUNT;
    if (name && (one = tl_op_lookup(name)) == TL_OP_COUNT) {
        const char *near = tl_op_suggest(name), *n;
        bool of_onnx = false; /* an ONNX op's name, such as Gemm: tl ops --onnx */
        int lo, hi;
        for (int i = 0; !of_onnx && (n = tl_onnx_op_name(i, &lo, &hi)); i++)
            of_onnx = !strcmp(n, name);
        tl_status st = {0};
        if (of_onnx)
            tl_fail(&st, TL_EINPUT, "no op \"%s\" (%s%s%s\"%s\" is an ONNX op, which tl translates: tl ops --onnx "
                    "lists those)", name, near ? "did you mean \"" : "", near ? near : "", near ? "\"? " : "", name);
        else
            tl_fail(&st, TL_EINPUT, "no op \"%.64s\"%s%s%s", name,
                    near ? " (did you mean \"" : " (tl ops lists them)", near ? near : "", near ? "\"?)" : "");
        return cli_fail(&st);
    }
    tl_status st = {0};
    const tl_backend *dev = tl_device_open("auto", &st);
    if (dev && !tl_backend_is_device(dev))
        dev = NULL;
    bool first = true;
    if (json && !name)
        printf("[");
    for (int i = 0; i < TL_OP_COUNT; i++) {
        if (tl_ops[i].kind == TL_KIND_INT || (name && (tl_opcode)i != one))
            continue;
        if (json) {
            printf("%s", first ? "" : ",\n ");
            op_json(dev, (tl_opcode)i);
        } else if (name) {
            op_text(dev, (tl_opcode)i);
        } else {
            char arity[32], where[96];
            tl_dtype dts[4];
            int n = op_dtypes((tl_opcode)i, dts);
            arity_text((tl_opcode)i, arity, sizeof arity);
            devices_text(dev, (tl_opcode)i, where, sizeof where);
            printf("%-15s %-8s %-16s %-16s %-5s %s\n", tl_ops[i].name, kinds[tl_ops[i].kind], arity,
                   n == 4 ? "f32 f64 i32 i64" : "f32 f64", tl_op_differentiable((tl_opcode)i) ? "grad" : "-",
                   where);
        }
        first = false;
    }
    if (json)
        printf(name ? "\n" : "]\n");
    tl_device_close(dev);
    return cli_finish_stdout();
}

/* The kernels OpenBLAS would pick by itself here, in core[len] ("" when
 * that cannot be learnt): a tl started with the choice left to OpenBLAS
 * (TL_BLAS_CHOOSE=0, no OPENBLAS_CORETYPE; OpenBLAS chooses once, at its
 * start) and no CUDA plugin says.  That tl asks no further. */
static void openblas_alone(char *core, size_t len)
{
    extern char **environ;
    *core = 0;
    size_t n = 0, k = 0;
    while (environ[n])
        n++;
    /* the path, not /proc/self/exe itself: under valgrind only the link
     * is the program's */
    char **env = calloc(n + 3, sizeof *env), buf[4096], self[4096];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    int fd[2];
    if (!env || sl <= 0 || pipe(fd)) {
        free(env);
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "OPENBLAS_CORETYPE=", 18) && strncmp(environ[i], "TL_BLAS_CHOOSE=", 15) &&
            strncmp(environ[i], "TL_CUDA_PLUGIN=", 15))
            env[k++] = environ[i];
    env[k++] = "TL_BLAS_CHOOSE=0";
    env[k++] = "TL_CUDA_PLUGIN=/nonexistent";
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
    posix_spawn_file_actions_addclose(&fa, fd[0]);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    char *args[] = {"tl", "devices", NULL};
    pid_t pid;
    self[sl] = 0;
    int bad = posix_spawn(&pid, self, &fa, NULL, args, env);
    posix_spawn_file_actions_destroy(&fa);
    free(env);
    close(fd[1]);
    size_t got = 0;
    ssize_t r;
    while (!bad && got < sizeof buf - 1 && (r = read(fd[0], buf + got, sizeof buf - 1 - got)) != 0)
        if (r > 0)
            got += (size_t)r;
        else if (errno != EINTR)
            break;
    close(fd[0]);
    while (!bad && waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    buf[got] = 0;
    /* "blas     OpenBLAS 0.3.21, linked in: Zen kernels, ..." */
    char *line = strstr(buf, "\nblas "), *colon = line ? strchr(line, ':') : NULL;
    char *end = colon ? strstr(colon, " kernels") : NULL;
    if (end && end - colon - 2 > 0 && (size_t)(end - colon - 2) < len)
        snprintf(core, len, "%.*s", (int)(end - colon - 2), colon + 2);
}

/* tl devices --format json: the same as fields */
static void devices_json(const tl_device_list *l, const char *text, const char *alone)
{
    cpu_blas_facts facts, *b = &facts;
    cpu_blas_facts_get(b);
    printf("{\"cpu\": {\"usable\": true},\n \"blas\": {\"usable\": %s", b->usable ? "true" : "false");
    if (b->usable) {
        printf(", \"library\": ");
        tl_json_write_string(stdout, b->library);
        printf(", \"how\": ");
        tl_json_write_string(stdout, b->from);
        printf(", \"kernels\": ");
        tl_json_write_string(stdout, b->kernels);
        printf(", \"choice\": ");
        tl_json_write_string(stdout, b->choice);
        printf(", \"openblas_alone\": ");
        json_string_or_null(*alone ? alone : NULL);
    } else {
        printf(", \"why\": ");
        tl_json_write_string(stdout, b->why);
    }
    printf(", \"text\": ");
    tl_json_write_string(stdout, text);
    printf("},\n \"cuda\": {\"usable\": %s, \"why\": ", l->count ? "true" : "false");
    json_string_or_null(l->count ? NULL : l->why);
    printf(", \"devices\": [");
    for (int i = 0; i < l->count; i++) {
        const tl_plugin_device *d = &l->dev[i];
        printf("%s{\"name\": ", i ? ", " : "");
        tl_json_write_string(stdout, l->name[i]);
        printf(", \"model\": ");
        tl_json_write_string(stdout, d->model);
        printf(", \"memory_bytes\": %llu, \"free_bytes\": %llu, \"compute_capability\": \"%d.%d\"}",
               (unsigned long long)d->memory, (unsigned long long)d->free, d->cc_major, d->cc_minor);
    }
    printf("]},\n \"plugin\": ");
    json_string_or_null(l->plugin_found ? l->plugin_path : NULL);
    printf("}\n");
}

int cmd_devices(int argc, char **argv)
{
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (cli_is_opt(argv[i], NULL, "--format")) {
            int usage = cli_format_opt(argc, argv, &i, argv[i], &json);
            if (usage)
                return usage;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_unknown_option("devices", argv[i]);
        } else {
            return cli_usage("tl devices takes no arguments but --format, got '%s'", argv[i]);
        }
    }
    tl_device_list l;
    tl_device_probe(&l);
    char blas[640], alone[32] = "";
    cpu_blas_describe(blas, sizeof blas);
    const char *own = getenv("TL_BLAS_CHOOSE");
    if (*cpu_blas_kernels_asked() && !(own && !strcmp(own, "0")))
        openblas_alone(alone, sizeof alone);
    if (*alone) {
        size_t n = strlen(blas);
        snprintf(blas + n, sizeof blas - n, "; OpenBLAS alone would run %s",
                 strcasecmp(alone, cpu_blas_kernels_asked()) ? alone : "the same");
    }
    if (json) {
        devices_json(&l, blas, alone);
        return cli_finish_stdout();
    }
    printf("cpu      usable  host memory, every op in every dtype\n");
    printf("blas     ");
    cli_print_escaped(stdout, blas);
    printf("\n");
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
