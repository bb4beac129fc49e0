/* libFuzzer harness: an ONNX model read, its inputs checked and
 * translated for the shapes it declares (the protobuf reader, the
 * initializers, the input checks and every op translator on what they
 * are given), with and without its weights as inputs. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "graph/onnx.h"

int fuzz_onnx_one(const uint8_t *data, size_t size);
int fuzz_onnx_one(const uint8_t *data, size_t size)
{
    tl_status st = {0};
    /* an odd-sized input also makes the weights inputs (--params) */
    tl_onnx_options o = {.params = size & 1};
    tl_onnx_model *m = tl_onnx_open_mem(data, size, "fuzz.onnx", &o, &st);
    tl_graph *sig = m ? tl_onnx_signature(m, &st) : NULL;
    if (sig && sig->ninputs <= 8) {
        /* small inputs of the declared ranks' worth: [2] floats each, or
         * defaults (every other weight given [2] floats instead), each
         * checked as the command line checks it; translated either way */
        tl_tensor *in[8] = {0};
        bool ok = true;
        for (int i = 0; i < sig->ninputs && ok; i++) {
            ok = (in[i] = o.params && i % 2 ? NULL : tl_onnx_default(m, i)) ||
                 (in[i] = tl_tensor_zeros(TL_F32, 1, (int64_t[]){2}, &st));
            tl_status cst = {0};
            if (ok && tl_onnx_check_input(m, i, in[i], &cst) && (cst.code != TL_EINPUT || !cst.msg[0]))
                FUZZ_FAIL("input check failed with code %d, not TL_EINPUT: %s", (int)cst.code, cst.msg);
        }
        tl_graph *g = ok ? tl_onnx_translate(m, in, &st) : NULL;
        if (!g && (st.code != TL_EINPUT || !st.msg[0]))
            FUZZ_FAIL("translate failed with code %d, not TL_EINPUT: %s", (int)st.code, st.msg);
        tl_graph_free(g);
        for (int i = 0; i < 8; i++)
            tl_tensor_unref(in[i]);
    } else if (!m && (st.code != TL_EINPUT || !st.msg[0])) {
        FUZZ_FAIL("open failed with code %d, not TL_EINPUT: %s", (int)st.code, st.msg);
    }
    tl_graph_free(sig);
    tl_onnx_free(m);
    return 0;
}

FUZZ_ENTRY(onnx)
