/* libFuzzer harness: result files read back (formats/results.h), the
 * readers of tl's json and text output above all, as `tl compare`, `tl
 * show` and every input (FILE:KEY, -i FILE, -:KEY) meet them.  Bytes
 * are read as a set and as a file whose tensors are taken one by one; a
 * set that reads, written again in tl's json format and (names allowing)
 * in its text format, must read back to the same names and bits. */
#define _POSIX_C_SOURCE 200809L
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/results.h"
#include "formats/text.h"
#include "fuzz_common.h"

static void check_error(const tl_status *st, const char *what)
{
    if (st->code != TL_EINPUT || !st->msg[0])
        FUZZ_FAIL("%s failed with code %d, not TL_EINPUT: %s", what, (int)st->code, st->msg);
}

static FILE *memstream(char **buf, size_t *len)
{
    FILE *f = open_memstream(buf, len);
    if (!f)
        FUZZ_FAIL("open_memstream failed");
    return f;
}

/* s in tl's json format: outputs by name, "grad/NAME" as grads. */
static char *as_json(const tl_result_set *s, size_t *len)
{
    char *buf = NULL;
    FILE *f = memstream(&buf, len);
    tl_status st = {0};
    for (int grads = 0; grads < 2; grads++) {
        fputs(grads ? "}, \"grads\": {" : "{\"device\": \"cpu\", \"outputs\": {", f);
        int k = 0;
        for (int i = 0; i < s->n; i++) {
            bool g = !strncmp(s->names[i], "grad/", 5);
            if (g != (bool)grads)
                continue;
            fputs(k++ ? ", " : "", f);
            tl_json_write_string(f, s->names[i] + (g ? 5 : 0));
            fputs(": ", f);
            if (tl_json_tensor_write(f, s->ts[i], &st))
                FUZZ_FAIL("writing json: %s", st.msg);
        }
    }
    fputs("}}\n", f);
    fclose(f);
    return buf;
}

/* s in tl's text format, every tensor whole. */
static char *as_text(const tl_result_set *s, size_t *len)
{
    char *buf = NULL;
    FILE *f = memstream(&buf, len);
    tl_status st = {0};
    for (int i = 0; i < s->n; i++)
        if (tl_text_write(f, s->names[i], s->ts[i], true, &st))
            FUZZ_FAIL("writing text: %s", st.msg);
    fclose(f);
    return buf;
}

/* Whether the text format carries s in reasonable time, and every name:
 * graph names and "grad/NAME", not empty (any other byte could pass for a
 * header or a value). */
static bool text_names(const tl_result_set *s)
{
    for (int k = 0; k < s->n; k++) {
        /* an empty f64[1000000000000,0] prints a trillion "[]" rows */
        int64_t rows = 1;
        for (int d = 0; d < s->ts[k]->ndim && rows <= 4096; d++)
            rows *= s->ts[k]->shape[d] ? s->ts[k]->shape[d] : 1;
        if (rows > 4096)
            return false;
    }
    for (int k = 0; k < s->n; k++)
        for (const char *p = s->names[k]; *p || p == s->names[k]; p++)
            if (!(*p == '_' || *p == '/' || (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') ||
                  (*p >= 'A' && *p <= 'Z')))
                return false;
    return true;
}

/* b holds a's names with the same dtypes, shapes and bits. */
static void check_same(const tl_result_set *a, const tl_result_set *b)
{
    tl_status st = {0};
    int *order = tl_result_set_order(b, &st);
    if (!order || a->n != b->n)
        FUZZ_FAIL("written again, %d tensors read back, not %d", b->n, a->n);
    for (int i = 0; i < a->n; i++) {
        int j = tl_result_set_lookup(b, order, a->names[i]);
        const tl_tensor *x = a->ts[i], *y = j < 0 ? NULL : b->ts[j];
        if (!y || x->dtype != y->dtype || !tl_same_shape(x, y) || memcmp(x->data, y->data, tl_tensor_bytes(x)))
            FUZZ_FAIL("tensor '%s' did not survive being written again", a->names[i]);
    }
    free(order);
}

/* Whether the bytes went to the json reader (an object past blanks), with
 * names that json carries as they are (bytes that are not UTF-8 are
 * written as U+FFFD). */
static bool json_again(const uint8_t *data, size_t size, const tl_result_set *s)
{
    size_t i = 0;
    while (i < size && strchr(" \t\r\n", data[i]) && data[i])
        i++;
    if (!s || i == size || data[i] != '{')
        return false;
    for (int k = 0; k < s->n; k++)
        for (const unsigned char *p = (const unsigned char *)s->names[k]; *p; p++)
            if (*p >= 0x80)
                return false;
    return true;
}

/* s written by write, read again: the same names and bits. */
static void check_again(const tl_result_set *s, char *(*write)(const tl_result_set *, size_t *), const char *what)
{
    size_t len;
    char *text = write(s, &len);
    tl_status st = {0};
    tl_result_set *again = tl_result_set_read_mem(text, len, "", &st);
    if (!again)
        FUZZ_FAIL("%s written again does not read: %s", what, st.msg);
    check_same(s, again);
    tl_result_set_free(again);
    free(text);
}

int fuzz_results_one(const uint8_t *data, size_t size);
int fuzz_results_one(const uint8_t *data, size_t size)
{
    tl_status st = {0};
    tl_result_set *s = tl_result_set_read_mem(data, size, "x.npy", &st);
    if (!s)
        check_error(&st, "tl_result_set_read_mem");
    for (int i = 0; s && i < s->n; i++) {
        (void)strlen(s->names[i]);
        fuzz_check_tensor(s->ts[i], &st);
    }
    if (json_again(data, size, s))
        check_again(s, as_json, "json");
    if (s && s->n && text_names(s))
        check_again(s, as_text, "text");
    tl_result_set_free(s);

    tl_status_clear(&st);
    tl_result_file *f = tl_result_file_open_mem(data, size, &st);
    if (!f) {
        check_error(&st, "tl_result_file_open_mem");
        return 0;
    }
    int n = tl_result_file_count(f);
    for (int i = 0; i < n; i++) {
        const char *key = tl_result_file_key(f, i);
        if (!tl_result_file_anonymous(f) && (!key || !tl_result_file_has(f, key)))
            FUZZ_FAIL("member %d: key missing or not found", i);
        tl_status_clear(&st);
        tl_tensor *t = tl_result_file_get(f, key, &st);
        fuzz_check_tensor(t, &st);
        tl_tensor_unref(t);
    }
    const char *absent = "\x01no such key"; /* unless the input names it (the fuzzer learns it) */
    if (!tl_result_file_has(f, absent)) {
        tl_status_clear(&st);
        tl_tensor *t = tl_result_file_get(f, absent, &st);
        if (t || st.code != TL_EINPUT)
            FUZZ_FAIL("an absent key was not a clean TL_EINPUT");
    }
    tl_result_file_close(f);
    return 0;
}

FUZZ_ENTRY(results)
