/* Diagnostics of a run on standard error and in report files: -v, the
 * --profile table and the --report json. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "formats/results.h"

void cli_print_verbose(const tl_result *r, bool grad, const cli_times *t)
{
    const tl_stats *s = tl_result_stats(r);
    const tl_devstats *d = &s->dev;
    fprintf(stderr, "tl: device %s\n", tl_result_device_name(r));
    fprintf(stderr, "tl: %lld nodes evaluated, %lld ops, %lld recorded, %lld fallback%s\n",
            (long long)s->nodes, (long long)s->ops, (long long)s->tape_entries,
            (long long)s->fallbacks, s->fallbacks == 1 ? "" : "s");
    if (s->chains)
        fprintf(stderr, "tl: %lld nodes in %lld fused elementwise chain%s\n", (long long)s->fused,
                (long long)s->chains, s->chains == 1 ? "" : "s");
    if (s->loops)
        fprintf(stderr, "tl: %lld iterate node%s run as scalar loops\n", (long long)s->loops,
                s->loops == 1 ? "" : "s");
    if (d->ops_device || d->syncs || d->bytes_up)
        fprintf(stderr, "tl: %lld op calls on the device, %lld on the CPU; %lld host syncs; "
                "%lld bytes up, %lld bytes down\n", (long long)d->ops_device, (long long)d->ops_cpu,
                (long long)d->syncs, (long long)d->bytes_up, (long long)d->bytes_down);
    for (int i = 0; i < d->nkinds; i++)
        fprintf(stderr, "tl: fallback: %s (%s) ran on the CPU %lld time%s: %s\n",
                tl_ops[d->kinds[i].op].name, tl_dtype_name(d->kinds[i].dtype),
                (long long)d->kinds[i].count, d->kinds[i].count == 1 ? "" : "s", d->kinds[i].why);
    for (int i = 0; i < s->nlog; i++)
        fprintf(stderr, "tl: if \"%s\" took %s\n", s->log[i].node, s->log[i].then ? "then" : "else");
    fprintf(stderr, "tl: peak memory %.1f MiB in tensors and tape\n", (double)s->peak_bytes / (1 << 20));
    if (s->branches > s->nlog)
        fprintf(stderr, "tl: ... %lld if decisions in all\n", (long long)s->branches);
    fprintf(stderr, "tl: load %.3f ms, run %.3f ms", t->load, t->run);
    if (grad)
        fprintf(stderr, ", backward %.3f ms (%lld ops)", t->backward, (long long)s->backward_ops);
    fprintf(stderr, "\n");
    /* the rest of the process's time, where large arrays go in and out */
    fprintf(stderr, "tl: inputs read in %.3f ms, results %s in %.3f ms\n", t->inputs,
            t->expect == 1 ? "compared" : t->expect == 2 ? "compared and written" : "written", t->write);
}

typedef struct row {
    int op;
    const tl_opprof *p;
} row;

static int by_time(const void *a, const void *b)
{
    double x = ((const row *)a)->p->ms, y = ((const row *)b)->p->ms;
    return x < y ? 1 : x > y ? -1 : ((const row *)a)->op - ((const row *)b)->op;
}

void cli_print_profile(const tl_result *r)
{
    const tl_opprof(*prof)[2] = tl_result_profile(r);
    static const char *phase[2] = {"forward", "backward"};
    for (int ph = 0; ph < 2; ph++) {
        row rows[TL_OP_COUNT];
        int n = 0;
        double total = 0;
        for (int op = 0; op < TL_OP_COUNT; op++)
            if (prof[op][ph].calls) {
                rows[n++] = (row){op, &prof[op][ph]};
                total += prof[op][ph].ms;
            }
        if (!n)
            continue;
        qsort(rows, (size_t)n, sizeof *rows, by_time);
        int w = 14; /* the op column: its longest name ("batch_norm_params_grad") */
        for (int i = 0; i < n; i++)
            w = (int)strlen(tl_ops[rows[i].op].name) > w ? (int)strlen(tl_ops[rows[i].op].name) : w;
        fprintf(stderr, "tl: profile, %s: %.3f ms in ops\n", phase[ph], total);
        fprintf(stderr, "tl:   %-*s %10s %12s %7s  %s\n", w, "op", "calls", "total ms", "share", "device");
        for (int i = 0; i < n; i++) {
            const tl_opprof *p = rows[i].p;
            const char *dev = !p->device_calls ? "cpu"
                            : p->device_calls == p->calls ? tl_result_backend(r)->name : "mixed";
            fprintf(stderr, "tl:   %-*s %10lld %12.3f %6.1f%%  %s\n", w, tl_ops[rows[i].op].name,
                    (long long)p->calls, p->ms, total > 0 ? 100 * p->ms / total : 0.0, dev);
        }
    }
}

/* ---------- --report FILE.json ---------- */

typedef struct report_job {
    const tl_result *r;
    const tl_graph *g;
    const cli_times *t;
} report_job;

static void node_entries(FILE *f, const tl_block *b, const tl_node_log *log, const char *dev,
                         bool *first)
{
    for (int i = 0; i < b->nnodes; i++) {
        const tl_node *n = &b->nodes[i];
        const tl_node_log *l = &log[n->index];
        if (l->calls) {
            fprintf(f, "%s\n    {\"name\": ", *first ? "" : ",");
            tl_json_write_string(f, n->name);
            fprintf(f, ", \"op\": \"%s\", \"calls\": %lld, \"ms\": %.6f, \"device\": \"%s\", "
                    "\"fallbacks\": %lld, \"why\": ", tl_ops[n->op].name, (long long)l->calls, l->ms,
                    l->fallbacks == l->calls ? "cpu" : l->fallbacks ? "mixed" : dev,
                    (long long)l->fallbacks);
            if (l->why)
                tl_json_write_string(f, l->why);
            else
                fputs("null", f);
            fputc('}', f);
            *first = false;
        }
        if (n->flow->then_b)
            node_entries(f, n->flow->then_b, log, dev, first);
        if (n->flow->else_b)
            node_entries(f, n->flow->else_b, log, dev, first);
        if (n->flow->body && n->op != TL_OP_MAP) /* a map body runs inside the map's kernel */
            node_entries(f, n->flow->body, log, dev, first);
    }
}

static tl_code write_report(FILE *f, const void *ctx, tl_status *st)
{
    (void)st;
    const report_job *j = ctx;
    const tl_result *r = j->r;
    const tl_stats *s = tl_result_stats(r);
    const tl_devstats *d = &s->dev;
    const char *dev = tl_result_backend(r)->name;
    fprintf(f, "{\n  \"graph\": ");
    tl_json_write_string(f, j->g->path);
    fprintf(f, ",\n  \"device\": \"%s\",\n  \"requested_device\": ", tl_result_device_name(r));
    tl_json_write_string(f, j->t->requested ? j->t->requested : "cpu");
    fprintf(f, ",\n  \"device_fallback\": "); /* why the whole run left the GPU asked for */
    if (j->t->device_why[0])
        tl_json_write_string(f, j->t->device_why);
    else
        fputs("null", f);
    fprintf(f, ",\n");
    fprintf(f, "  \"nodes_evaluated\": %lld,\n  \"ops\": %lld,\n  \"backward_ops\": %lld,\n",
            (long long)s->nodes, (long long)s->ops, (long long)s->backward_ops);
    fprintf(f, "  \"ops_on_device\": %lld,\n  \"ops_on_cpu\": %lld,\n  \"fallbacks\": %lld,\n",
            (long long)d->ops_device, (long long)d->ops_cpu, (long long)s->fallbacks);
    fprintf(f, "  \"host_syncs\": %lld,\n  \"bytes_up\": %lld,\n  \"bytes_down\": %lld,\n",
            (long long)d->syncs, (long long)d->bytes_up, (long long)d->bytes_down);
    fprintf(f, "  \"peak_memory_bytes\": %lld,\n  \"tape_entries\": %lld,\n", (long long)s->peak_bytes,
            (long long)s->tape_entries);
    fprintf(f, "  \"times_ms\": {\"load\": %.6f, \"inputs\": %.6f, \"run\": %.6f, \"backward\": %.6f, "
            "\"write\": %.6f},\n", j->t->load, j->t->inputs, j->t->run, j->t->backward, j->t->write);
    fprintf(f, "  \"fallback_kinds\": [");
    for (int i = 0; i < d->nkinds; i++) {
        fprintf(f, "%s\n    {\"op\": \"%s\", \"dtype\": \"%s\", \"count\": %lld, \"why\": ", i ? "," : "",
                tl_ops[d->kinds[i].op].name, tl_dtype_name(d->kinds[i].dtype), (long long)d->kinds[i].count);
        tl_json_write_string(f, d->kinds[i].why);
        fputc('}', f);
    }
    fprintf(f, "%s],\n  \"ops_profile\": [", d->nkinds ? "\n  " : "");
    const tl_opprof(*prof)[2] = tl_result_profile(r);
    bool first = true;
    for (int ph = 0; ph < 2; ph++)
        for (int op = 0; op < TL_OP_COUNT; op++) {
            const tl_opprof *p = &prof[op][ph];
            if (!p->calls)
                continue;
            fprintf(f, "%s\n    {\"op\": \"%s\", \"phase\": \"%s\", \"calls\": %lld, \"device_calls\": %lld, "
                    "\"ms\": %.6f}", first ? "" : ",", tl_ops[op].name, ph ? "backward" : "forward",
                    (long long)p->calls, (long long)p->device_calls, p->ms);
            first = false;
        }
    fprintf(f, "%s],\n  \"nodes\": [", first ? "" : "\n  ");
    first = true;
    if (tl_result_node_log(r))
        node_entries(f, &j->g->top, tl_result_node_log(r), dev, &first);
    fprintf(f, "%s]\n}\n", first ? "" : "\n  ");
    return TL_OK;
}

tl_code cli_write_report(const char *path, const tl_graph *g, const tl_result *r, const cli_times *t,
                         tl_status *st)
{
    report_job j = {r, g, t};
    return cli_write_atomic(path, write_report, &j, st);
}
