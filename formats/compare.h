/* Comparing a result set A with a reference B, tensor by tensor, and the
 * report of what differs.  tl_compare returns a report that the caller
 * frees with tl_compare_free; the report points at the names and tensors
 * of A and B, so it must be freed before them.  The writers print to a
 * FILE given by the caller.
 *
 * The rule.  Tensors pair up by name (a .npy's unnamed tensor pairs with
 * the only tensor of the other set).  A pair matches when dtype and shape
 * are equal and every element does:
 * - floats, by default: |a - b| <= atol + rtol * |b| (NumPy's allclose, B
 *   the reference), evaluated in double in NumPy's order of operations,
 *   so that for f64 the answer is numpy.isclose's to the last bit.  f32
 *   values are widened to double (exactly) and decided there, where NumPy
 *   would round in f32.  A difference of two finite values that overflows
 *   a double is decided with everything halved, so it is never an
 *   infinity that matches.  rtol defaults to 1e-7 for f64 and 1e-5 for
 *   f32, atol to 0.
 * - floats with use_ulp: at most ulp units in the last place apart, in the
 *   tensor's own dtype, counted as the distance between the values on the
 *   ordered integer line of that dtype's bits (+0 and -0 are both 0 there,
 *   the largest finite value and infinity are 1 apart).
 * - either way: NaN matches NaN only with equal_nan, and an infinity only
 *   the same infinity.
 * - index tensors (i32, i64) match only when equal: a tolerance is no
 *   use for indices, so rtol, atol and ulp do not apply to them.
 * A name in one set only, or a dtype or shape that differs, is a mismatch.
 *
 * The errors reported for a pair are over its elements where neither value
 * is NaN (a NaN that does not match counts among the mismatches and is
 * shown as the worst element): abs |a - b| (in double; an infinity against
 * anything else, or a difference beyond the double range, is inf), rel
 * abs / |b| (inf when b is 0 and a is not), and the ulp distance. */
#ifndef TL_FORMATS_COMPARE_H
#define TL_FORMATS_COMPARE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "formats/results.h"

/* {0}: the defaults. */
typedef struct tl_compare_opts {
    double rtol, atol; /* rtol applies when rtol_set, else the dtype's default */
    bool rtol_set;
    bool atol_set;     /* atol was given (only checked against use_ulp) */
    int64_t ulp;       /* applies when use_ulp, instead of rtol and atol */
    bool use_ulp, equal_nan;
} tl_compare_opts;

#define TL_COMPARE_RTOL_F64 1e-7
#define TL_COMPARE_RTOL_F32 1e-5

/* Why a pair did not get its values compared. */
typedef enum tl_compare_reason {
    TL_CMP_COMPARED = 0, /* values compared: see match */
    TL_CMP_ONLY_A,       /* the name is in A only */
    TL_CMP_ONLY_B,       /* ... in B only */
    TL_CMP_DTYPE,        /* dtypes differ */
    TL_CMP_SHAPE,        /* shapes differ */
} tl_compare_reason;

typedef struct tl_compare_entry {
    const char *name;          /* A's name, B's when only in B */
    const tl_tensor *a, *b;    /* NULL when absent */
    tl_compare_reason reason;
    bool match;
    double rtol, atol;         /* the tolerance applied (floats without use_ulp) */
    /* When the values were compared: */
    double max_abs, max_rel;
    uint64_t max_abs_int;      /* index tensors: max |a - b|, exactly */
    uint64_t max_ulp;          /* floats */
    int64_t mismatches;        /* elements that do not match */
    int64_t worst;             /* flat index of the worst element, -1 for none:
                                * the mismatch with the largest abs error (a NaN
                                * first), or without mismatches the element with
                                * the largest nonzero abs error */
} tl_compare_entry;

typedef struct tl_compare_report {
    tl_compare_opts opts;
    int n;                     /* A's names in A's order, then B's own */
    tl_compare_entry *entries;
    int mismatched;            /* entries that do not match */
} tl_compare_report;

/* Checks the options: tolerances are numbers >= 0 (infinity allowed), ulp
 * >= 0, and ulp excludes rtol and atol.  TL_EINPUT naming the option. */
tl_code tl_compare_check_opts(const tl_compare_opts *o, tl_status *st);

/* Compares every tensor of a with b's.  NULL opts: the defaults.  Errors:
 * bad options or a name given twice in a set (TL_EINPUT), out of memory
 * or a tensor that is not in host memory (TL_ERUNTIME): bring device
 * results to the host first. */
tl_compare_report *tl_compare(const tl_result_set *a, const tl_result_set *b,
                              const tl_compare_opts *opts, tl_status *st);
bool tl_compare_all_match(const tl_compare_report *r);
void tl_compare_free(tl_compare_report *r); /* NULL ok */

/* The text report: a line per pair (only those that differ when
 * mismatches_only), columns aligned, then a summary line.  The errors
 * (max abs, max rel) are rounded to 4 significant digits, the worst
 * element's values printed exactly.  Names are printed with control
 * characters escaped. */
tl_code tl_compare_write_text(FILE *f, const tl_compare_report *r, bool mismatches_only,
                              tl_status *st);
/* The json report: one object, {"match", "total", "mismatched", "rtol",
 * "atol", "ulp", "equal_nan", "tensors": [...]}, with a line per pair; see
 * man/tl.1 for the fields.  Numbers print as tl prints tensors (shortest
 * round trip; NaN and infinities as "nan", "inf", "-inf"). */
tl_code tl_compare_write_json(FILE *f, const tl_compare_report *r, tl_status *st);

#endif
