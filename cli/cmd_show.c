/* tl show TENSOR: prints one tensor (a .npy, an .npz member, a literal,
 * standard input) or every tensor of a result file (.npz, tl's json), as
 * text or json; --stats prints a summary instead of the values. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "graph/onnx.h"
#include "formats/text.h"

typedef struct show {
    bool stats, full, json;
    const char *arg;
    bool single; /* one tensor, called by the argument, not a file of named ones */
} show;

/* Min, max and mean of the values that are not NaN. */
typedef struct summary {
    int64_t count, nan, pos_inf, neg_inf;
    double min, max, sum, carry; /* floats; sum + carry: the finite ones, compensated */
    int64_t imin, imax;          /* index tensors, exactly */
    __int128 isum;               /* (GCC and Clang): exact for any i64 tensor */
} summary;

static void add_finite(summary *s, double x)
{
    double t = s->sum + x; /* Neumaier's compensated sum */
    s->carry += fabs(s->sum) >= fabs(x) ? (s->sum - t) + x : (x - t) + s->sum;
    s->sum = t;
}

static summary summarize(const tl_tensor *t)
{
    summary s = {0};
    for (int64_t i = 0; i < t->numel && tl_dtype_is_int(t->dtype); i++, s.count++) {
        int64_t v = tl_tensor_get_int(t, i);
        s.imin = !s.count || v < s.imin ? v : s.imin;
        s.imax = !s.count || v > s.imax ? v : s.imax;
        s.isum += v;
    }
    for (int64_t i = 0; i < t->numel && !tl_dtype_is_int(t->dtype); i++) {
        double v = tl_tensor_get(t, i);
        if (isnan(v)) {
            s.nan++;
            continue;
        }
        s.min = !s.count || v < s.min ? v : s.min;
        s.max = !s.count || v > s.max ? v : s.max;
        s.count++;
        if (isinf(v))
            *(v > 0 ? &s.pos_inf : &s.neg_inf) += 1;
        else
            add_finite(&s, v);
    }
    return s;
}

/* num / den (den > 0) rounded once to the nearest double, ties to even:
 * a quotient of 53 bits and the rest, compared with half a unit */
static double div_rounded(__int128 num, int64_t den)
{
    unsigned __int128 n = num < 0 ? -(unsigned __int128)num : (unsigned __int128)num, d = (uint64_t)den, q, r;
    if (!n)
        return 0;
    int nb = 128 - (n >> 64 ? __builtin_clzll((uint64_t)(n >> 64)) : 64 + __builtin_clzll((uint64_t)n));
    int db = 64 - __builtin_clzll((uint64_t)den), k = 55 - (nb - db); /* n 2^k / d: 54 to 56 bits */
    if (k > 0)
        q = (n << k) / d, r = (n << k) % d; /* n 2^k < 2^(56 + db) */
    else
        q = n / d, r = n % d, k = 0;
    int qb = 128 - (q >> 64 ? __builtin_clzll((uint64_t)(q >> 64)) : 64 + __builtin_clzll((uint64_t)q));
    int sh = qb > 53 ? qb - 53 : 0;
    unsigned __int128 m = q >> sh, rest = q - (m << sh), half = sh ? (unsigned __int128)1 << (sh - 1) : 0;
    int cmp = sh ? (rest > half ? 1 : rest < half ? -1 : r > 0) : (2 * r > d ? 1 : 2 * r < d ? -1 : 0);
    if (cmp > 0 || (cmp == 0 && (m & 1)))
        m++;
    double v = ldexp((double)m, sh - k); /* m has at most 54 bits: exact */
    return num < 0 ? -v : v;
}

static double mean(const tl_tensor *t, const summary *s)
{
    if (tl_dtype_is_int(t->dtype))
        return div_rounded(s->isum, s->count);
    if (s->pos_inf || s->neg_inf)
        return s->pos_inf && s->neg_inf ? NAN : s->pos_inf ? INFINITY : -INFINITY;
    double m = (s->sum + s->carry) / (double)s->count;
    if (isfinite(m))
        return m;
    /* finite values whose sum passes the largest double: summed again at
     * 2^-64 of their size (the mean is at most the largest of them) */
    summary h = {0};
    for (int64_t i = 0; i < t->numel; i++) {
        double v = tl_tensor_get(t, i);
        if (isfinite(v))
            add_finite(&h, v * 0x1p-64);
    }
    return (h.sum + h.carry) / (double)s->count * 0x1p64;
}

/* A value of t's dtype, as tl prints it. */
static void fmt_value(char *buf, const tl_tensor *t, double v, int64_t iv)
{
    if (tl_dtype_is_int(t->dtype))
        snprintf(buf, TL_FMT_LEN, "%" PRId64, iv);
    else if (t->dtype == TL_F32)
        tl_fmt_f32(buf, TL_FMT_LEN, (float)v);
    else
        tl_fmt_f64(buf, TL_FMT_LEN, v);
}

/* A number; in json, NaN and infinities as strings and none as null. */
static void put_number(const char *text, bool json)
{
    bool word = isalpha((unsigned char)text[text[0] == '-']);
    printf(json && word ? "\"%s\"" : "%s", *text ? text : json ? "null" : "-");
}

/* "  min -1.0  max 3.0  mean 0.5  nan 0  inf 0", or the same as json
 * fields; index tensors have no NaN or infinities to count. */
static void write_stats(const tl_tensor *t, bool json)
{
    static const char *const keys[] = {"min", "max", "mean"};
    summary s = summarize(t);
    char v[3][TL_FMT_LEN] = {"", "", ""};
    if (s.count) {
        fmt_value(v[0], t, s.min, s.imin);
        fmt_value(v[1], t, s.max, s.imax);
        tl_fmt_f64(v[2], TL_FMT_LEN, mean(t, &s));
    }
    for (int k = 0; k < 3; k++) {
        printf(json ? "%s\"%s\": " : "  %s%s ", json && k ? ", " : "", keys[k]);
        put_number(v[k], json);
    }
    if (!tl_dtype_is_int(t->dtype))
        printf(json ? ", \"nan\": %" PRId64 ", \"inf\": %" PRId64 : "  nan %" PRId64 "  inf %" PRId64,
               s.nan, s.pos_inf + s.neg_inf);
}

static tl_code show_text(const show *sh, const char *name, const tl_tensor *t, tl_status *st)
{
    char desc[TL_MAXDIM * 24];
    cli_print_escaped(stdout, name);
    printf(": %s", tl_tensor_desc(t, desc, sizeof desc));
    if (sh->stats) {
        write_stats(t, false);
        putchar('\n');
        return TL_OK;
    }
    putchar('\n');
    return tl_text_write(stdout, NULL, t, sh->full, st);
}

static tl_code show_json(const show *sh, const tl_tensor *t, tl_status *st)
{
    if (!sh->stats)
        return tl_json_tensor_write(stdout, t, st);
    printf("{\"dtype\": \"%s\", \"shape\": [", tl_dtype_name(t->dtype));
    for (int d = 0; d < t->ndim; d++)
        printf("%s%" PRId64, d ? ", " : "", t->shape[d]);
    fputs("], ", stdout);
    write_stats(t, true);
    putchar('}');
    return TL_OK;
}

/* A file of named tensors as json: tl's output format without the device
 * ("grad/NAME" under "grads", "jvp/" and "hvp/" under "jvps" and "hvps",
 * which are there only when the file holds some), so that tl compare
 * reads it back. */
static tl_code show_json_file(const show *sh, const tl_result_set *s, tl_status *st)
{
    static const char *const groups[][2] = {{"outputs", ""}, {"grads", "grad/"}, {"jvps", "jvp/"}, {"hvps", "hvp/"}};
    tl_code rc = TL_OK;
    for (int g = 0; g < 4 && !rc; g++) {
        int k = 0;
        for (int i = 0; i < s->n && !rc; i++) {
            int in = 0; /* the group whose prefix the name has ("" when none) */
            for (int h = 1; h < 4 && !in; h++)
                in = !strncmp(s->names[i], groups[h][1], strlen(groups[h][1])) ? h : 0;
            if (in != g)
                continue;
            if (!k++)
                printf("%s\"%s\": {", g ? "},\n " : "{", groups[g][0]);
            fputs(k > 1 ? ",\n  " : "\n  ", stdout);
            tl_json_write_string(stdout, s->names[i] + strlen(groups[g][1]));
            fputs(": ", stdout);
            rc = show_json(sh, s->ts[i], st);
        }
        if (!k && g < 2) /* outputs and grads, even when empty */
            printf("%s\"%s\": {", g ? "},\n " : "{", groups[g][0]);
    }
    puts("}}");
    return rc;
}

static tl_code show_all(const show *sh, const tl_result_set *s, tl_status *st)
{
    if (sh->json && !sh->single)
        return show_json_file(sh, s, st);
    if (sh->json) {
        tl_code rc = show_json(sh, s->ts[0], st);
        putchar('\n');
        return rc;
    }
    tl_code rc = TL_OK;
    for (int i = 0; i < s->n && !rc; i++)
        rc = show_text(sh, sh->single ? sh->arg : s->names[i], s->ts[i], st);
    return rc;
}

/* "-", a .npy, .npz or .json file, or any file that is there: read whole. */
static bool whole_file(const char *arg)
{
    static const char *const ends[] = {".npy", ".npz", ".json"};
    size_t n = strlen(arg);
    struct stat sb;
    for (int k = 0; k < 3; k++)
        if (n >= strlen(ends[k]) && !strcmp(arg + n - strlen(ends[k]), ends[k]) &&
            (k || !strstr(arg, ".npz:") || (stat(arg, &sb) == 0 && S_ISREG(sb.st_mode)))) /* (A.npz:KEY.npy: a key) */
            return true;
    return !strcmp(arg, "-") || (stat(arg, &sb) == 0 && S_ISREG(sb.st_mode));
}

int cmd_show(int argc, char **argv)
{
    show sh = {0};
    const char *arg = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--stats"))
            sh.stats = true;
        else if (!strcmp(a, "--full"))
            sh.full = true;
        else if (cli_is_opt(a, NULL, "--format")) {
            int usage = cli_format_opt(argc, argv, &i, a, &sh.json);
            if (usage)
                return usage;
        } else if (a[0] == '-' && a[1] && !(a[1] == ':' || a[1] == '.' || (a[1] >= '0' && a[1] <= '9')) &&
                   strcmp(a, "-inf")) { /* -inf: a literal */
            return cli_unknown_option("show", a);
        } else if (arg)
            return cli_usage("show takes one tensor; '%s' is a second", a);
        else
            arg = a;
    }
    sh.arg = arg;
    if (!arg)
        return cli_usage("show needs a tensor: tl show FILE.npy|FILE.npz[:KEY]|MODEL.onnx:INIT|FILE.json|-|LITERAL");
    tl_status st = {0};
    tl_result_set *file = NULL, one = {0};
    const tl_tensor *t = NULL;
    if (whole_file(arg) && tl_onnx_is_model(arg)) /* its weights are shown one at a time */
        tl_fail(&st, TL_EINPUT, "%s: an ONNX model: tl show %s:NAME shows its initializer NAME", arg, arg);
    else if (whole_file(arg)) {
        if (!(file = tl_result_set_read(arg, &st)))
            tl_wrap(&st, "%s", strcmp(arg, "-") ? arg : "standard input");
        sh.single = file && file->anonymous;
    } else {
        t = cli_read_tensor(arg, &st);
        one = tl_result_set_view(1, &arg, &t);
        sh.single = true;
    }
    const tl_result_set *s = file ? file : t ? &one : NULL;
    int rc;
    if (s && show_all(&sh, s, &st) && cli_stdout_gone())
        rc = 0; /* the reader has gone (tl show big.npy --full | head): nothing left to do */
    else if (!s || st.code)
        rc = cli_fail(&st);
    else
        rc = cli_finish_stdout();
    tl_tensor_unref((tl_tensor *)t);
    tl_result_set_free(file);
    return rc;
}
