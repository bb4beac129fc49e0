/* tl compare A B: two result files, tensor by tensor (formats/compare.h).
 * Exit 0 when everything matches, 1 on any difference, 2 on bad input. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static bool whole_number(const char *s, long long *v)
{
    char *end;
    errno = 0;
    *v = strtoll(s, &end, 10);
    return *s && !*end && errno != ERANGE;
}

/* a number, inf written as such (1e400 overflows: an error, as in literals) */
static bool real_number(const char *s, double *v)
{
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    return *s && !*end && !(errno == ERANGE && isinf(*v));
}

int cli_compare_option(int argc, char **argv, int *i, tl_compare_opts *o)
{
    const char *a = argv[*i], *v;
    long long n;
    if (!strcmp(a, "--equal-nan")) {
        o->equal_nan = true;
        return 0;
    }
    if (cli_is_opt(a, NULL, "--rtol") || cli_is_opt(a, NULL, "--atol")) {
        bool rtol = a[2] == 'r';
        if (!(v = cli_opt_value(argc, argv, i, a, rtol ? "--rtol" : "--atol")) ||
            !real_number(v, rtol ? &o->rtol : &o->atol))
            return cli_usage("%.6s takes a number >= 0", a);
        *(rtol ? &o->rtol_set : &o->atol_set) = true;
        return 0;
    }
    if (cli_is_opt(a, NULL, "--ulp")) {
        if (!(v = cli_opt_value(argc, argv, i, a, "--ulp")) || !whole_number(v, &n))
            return cli_usage("--ulp takes a whole number >= 0");
        o->ulp = n;
        o->use_ulp = true;
        return 0;
    }
    return -1;
}

static tl_result_set *read_side(const char *path, tl_status *st)
{
    tl_result_set *s = tl_result_set_read(path, st);
    if (!s)
        tl_wrap(st, "%s", strcmp(path, "-") ? path : "standard input");
    return s;
}

int cmd_compare(int argc, char **argv)
{
    tl_compare_opts o = {0};
    const char *file[2] = {NULL, NULL};
    bool json = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int rc = cli_compare_option(argc, argv, &i, &o);
        if (rc >= 0) {
            if (rc)
                return rc;
        } else if (cli_is_opt(a, NULL, "--format")) {
            int usage = cli_format_opt(argc, argv, &i, a, &json);
            if (usage)
                return usage;
        } else if (a[0] == '-' && a[1]) {
            return cli_unknown_option("compare", a);
        } else if (file[1]) {
            return cli_usage("compare takes two files, A and B; '%s' is a third", a);
        } else {
            file[!!file[0]] = a;
        }
    }
    if (!file[1])
        return cli_usage("compare needs two files: tl compare A B");
    if (!strcmp(file[0], "-") && !strcmp(file[1], "-"))
        return cli_usage("only one of A and B can be standard input");
    tl_status st = {0};
    if (tl_compare_check_opts(&o, &st))
        return cli_fail(&st);
    tl_result_set *a = read_side(file[0], &st), *b = a ? read_side(file[1], &st) : NULL;
    tl_compare_report *r = b ? tl_compare(a, b, &o, &st) : NULL;
    int rc;
    if (!r)
        rc = cli_fail(&st);
    else if (json ? tl_compare_write_json(stdout, r, &st) : tl_compare_write_text(stdout, r, false, &st))
        rc = cli_fail(&st);
    else
        rc = cli_finish_stdout();
    if (!rc && !tl_compare_all_match(r))
        rc = TL_EDIFF;
    tl_compare_free(r);
    tl_result_set_free(b);
    tl_result_set_free(a);
    return rc;
}
