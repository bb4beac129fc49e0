/* Tensors as text: exact number formatting, the NumPy-like text output
 * and the JSON tensor object of cli.md, command-line tensor literals and
 * the JSON "data" arrays of graph consts.  The caller owns every tensor
 * and FILE passed in; tl_literal_parse returns a new tensor whose one
 * reference the caller owns.
 *
 * Number format (the same in text and JSON output): the fewest significant
 * digits that strtod (f64) or strtof (f32) reads back to the same bits,
 * laid out like Python's repr of a float: positional when the decimal
 * exponent is in [-4, 16), else scientific with a two-digit-minimum
 * exponent; a value without a fraction gets ".0" so it always looks like a
 * float.  Examples: "2.0", "-0.0", "0.1", "100.0", "1e-07", "1e+16",
 * "3.4028235e+38".  We chose "2.0" over NumPy's "2." because "2.0" is also
 * valid JSON, so the text output of a tensor that is not elided is itself
 * a valid tensor literal (tl_literal_parse reads it back bit for bit).
 * NaN prints as "nan" whatever its sign and payload (those bits are not
 * kept); infinities as "inf" and "-inf".  Formatting assumes the "C"
 * locale for LC_NUMERIC, which is what a program gets without setlocale. */
#ifndef TL_FORMATS_TEXT_H
#define TL_FORMATS_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "backends/status.h"
#include "backends/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cJSON;

/* Enough for any value tl_fmt_* prints, with its terminating NUL. */
#define TL_FMT_LEN 32

/* Write the shortest round-trip form of v into buf (always NUL-terminated
 * when len > 0).  Returns the length of the full text, like snprintf; a
 * result >= len means it was cut short. */
int tl_fmt_f64(char *buf, size_t len, double v);
/* Whether v, finite, becomes an infinity as f32: a number too large for
 * f32 (an error wherever one is written, as inf is written inf). */
bool tl_f32_overflows(double v);
int tl_fmt_f32(char *buf, size_t len, float v);
/* v rounded to `digits` significant digits (1 to 17), laid out as above:
 * "0.0003081", "3.7e-07", "0.0", for figures people read (errors in
 * reports), never for values that must read back. */
int tl_fmt_sig(char *buf, size_t len, double v, int digits);

/* Text output of cli.md: the header line "NAME: f32[2,3]" (left out when
 * name is NULL), then the values NumPy-style: nested brackets, ", " between
 * values, one row per line for 2-D and up (a blank line between 2-D blocks,
 * two between 3-D blocks, ...), values right-aligned to a common width and
 * rows wrapped at 75 columns; a 0-d tensor prints just its value.  When the
 * tensor has more than 1000 elements and full is false, each axis longer
 * than 6 shows its first 3 and last 3 entries around "...".  Host tensors
 * only.  A write error gives TL_ERUNTIME. */
tl_code tl_text_write(FILE *f, const char *name, const tl_tensor *t, bool full, tl_status *st);

/* One-line JSON object {"dtype": "f32", "shape": [2, 3], "data": [...]},
 * data flat and row-major; NaN and infinities as the strings "nan", "inf",
 * "-inf".  No trailing newline, so callers can embed it. */
tl_code tl_json_tensor_write(FILE *f, const tl_tensor *t, tl_status *st);

/* Parses a command-line tensor literal: an optional dtype prefix ("f32:",
 * "f64:", also "float32:", "float64:"; default f64) and a number
 * (tl_scan_number) or a nested array of them, as JSON writes them.  Elements may also be nan, inf, -inf (bare or as JSON
 * strings; case-insensitive, and "infinity" as Python writes it).  Each
 * f32 element is rounded once, straight from its decimal text by strtof.
 * Empty arrays keep their shape ("[]" is [0], "[[],[]]" is [2,0]).  At
 * most TL_MAXDIM levels of nesting; deeper input fails before recursing.
 * Any ':' is taken as the end of a dtype prefix, so callers tell literals
 * from "file.npz:key" first.  Errors (TL_EINPUT) name what is wrong and
 * the column where, e.g. "ragged nested array: row 1 has 3 elements,
 * expected 2". */
tl_tensor *tl_literal_parse(const char *text, tl_status *st);

/* The length of the number at s (at most n bytes), 0 when there is none:
 * a JSON number, or one written as NumPy prints it, with nothing after
 * the point ("1.") or before it (".5", "-.5"); 1.e3 too.  strtod reads
 * exactly these bytes; "+1", "01", ".", hex and "nan(...)" are no number
 * (tl_literal_parse and the program language both read numbers so). */
size_t tl_scan_number(const char *s, size_t n);

/* Fills t (host, shape already set) from a cJSON "data" value: an array
 * nested to match t's shape, or a flat array of t->numel values, or a
 * single value when t has one element.  Values are numbers or the strings
 * "nan", "inf", "-inf".  Errors (TL_EINPUT) name the element at fault,
 * e.g. "data[1] has 3 elements, expected 2". */
tl_code tl_json_fill(tl_tensor *t, const struct cJSON *data, tl_status *st);

#ifdef __cplusplus
}
#endif

#endif
