/* What JSON forbids and cJSON lets through (json_strict.c). */
#ifndef TL_JSON_STRICT_H
#define TL_JSON_STRICT_H

#include <stdbool.h>
#include <stddef.h>
#include <cjson/cJSON.h>

/* cJSON's own limit (CJSON_NESTING_LIMIT), reported by name */
#define MAX_JSON_DEPTH 1000

/* The offset of the first NUL byte, raw control character or \u0000 in a
 * string, or nesting past MAX_JSON_DEPTH (*why says which); len if none. */
size_t tl_json_hazard(const char *text, size_t len, const char **why);
/* The first key given twice in an object of v or below (depth: v's own),
 * or NULL; *oom is set when the search could not be made. */
const cJSON *tl_json_duplicate(const cJSON *v, int depth, bool *oom);

#endif
