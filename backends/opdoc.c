#include "opdoc.h"

#define NONE {{NULL, NULL, NULL}}
#define AXES_ALL {"axes", "int or list of ints (negative counts from the end)", "all axes"}
#define KEEPDIMS {"keepdims", "true or false", "false"}
#define BIN(v, g) {v, g, NONE}
#define CMP(v) {v, "none: a comparison is piecewise constant", NONE}
#define UN(v, g) {v, g, NONE}
#define RED(v, g) {v, g, {AXES_ALL, KEEPDIMS}}

const tl_opdoc tl_opdocs[TL_OP_COUNT] = {
    [TL_OP_ADD] = BIN("a + b, NumPy broadcasting; i32, i64: exact, wrapping on overflow", "g to a and b, summed over broadcast axes"),
    [TL_OP_SUB] = BIN("a - b; i32, i64: wrapping", "g to a, -g to b"),
    [TL_OP_MUL] = BIN("a * b; i32, i64: wrapping", "g*b to a, g*a to b"),
    [TL_OP_DIV] = BIN("a / b (1/0 = inf, 0/0 = nan); i32, i64: toward zero, by 0 an error", "g/b to a, -g*(a/b)/b to b"),
    [TL_OP_POW] = BIN("a ** b (as torch.pow)",
                      "g*b*a**(b-1) to a (0 where b = 0); g*a**b*log(a) to b (0 where a = 0 and b >= 0)"),
    [TL_OP_MAXIMUM] = BIN("the larger of a and b; NaN propagates; i32, i64 too",
                          "the larger gets g; a tie gives each g/2"),
    [TL_OP_MINIMUM] = BIN("the smaller of a and b; NaN propagates; i32, i64 too",
                          "the smaller gets g; a tie gives each g/2"),
    [TL_OP_EQ] = CMP("1 where a == b, else 0, in the operands' dtype (i32, i64 too)"),
    [TL_OP_NE] = CMP("1 where a != b, else 0"),
    [TL_OP_LT] = CMP("1 where a < b, else 0"),
    [TL_OP_LE] = CMP("1 where a <= b, else 0"),
    [TL_OP_GT] = CMP("1 where a > b, else 0"),
    [TL_OP_GE] = CMP("1 where a >= b, else 0"),
    [TL_OP_NEG] = UN("-x, a sign flip: neg(+0) = -0; i32, i64: wrapping", "-g"),
    [TL_OP_ABS] = UN("|x|; i32, i64: wrapping (abs(INT_MIN) = INT_MIN)", "g*sign(x): 0 at x = 0"),
    [TL_OP_SIGN] = UN("-1, 0 or 1 (sign(0) = 0; NaN stays NaN); i32, i64 too", "none"),
    [TL_OP_EXP] = UN("e**x", "g*exp(x)"),
    [TL_OP_EXPM1] = UN("e**x - 1, exact near 0", "g*(expm1(x) + 1)"),
    [TL_OP_LOG] = UN("natural log (log(0) = -inf, log(-1) = nan)", "g/x"),
    [TL_OP_LOG1P] = UN("log(1 + x), exact near 0", "g/(x + 1)"),
    [TL_OP_SQRT] = UN("square root (sqrt(-1) = nan)", "g/(2*sqrt(x)): inf at 0, as IEEE"),
    [TL_OP_RSQRT] = UN("1/sqrt(x)", "-g/2 * rsqrt(x)**3"),
    [TL_OP_RECIPROCAL] = UN("1/x", "-g/x**2"),
    [TL_OP_SQUARE] = UN("x*x", "2*g*x"),
    [TL_OP_SIN] = UN("sine", "g*cos(x)"),
    [TL_OP_COS] = UN("cosine", "-g*sin(x)"),
    [TL_OP_TAN] = UN("tangent", "g*(1 + tan(x)**2)"),
    [TL_OP_TANH] = UN("hyperbolic tangent", "g*(1 - tanh(x)**2)"),
    [TL_OP_SIGMOID] = UN("1/(1 + e**-x)", "g*s*(1 - s), s = sigmoid(x)"),
    [TL_OP_ERF] = UN("the error function", "g*2/sqrt(pi)*e**(-x*x)"),
    [TL_OP_RELU] = UN("max(x, 0)", "g where x > 0, else 0 (0 at x = 0)"),
    [TL_OP_SOFTPLUS] = UN("log(1 + e**x), computed stably", "g*sigmoid(x)"),
    [TL_OP_GELU] = {"x*Phi(x) (approximate \"none\", with erf) or its tanh form (\"tanh\"), as torch",
                    "as torch.nn.functional.gelu",
                    {{"approximate", "\"none\" or \"tanh\"", "\"none\""}}},
    [TL_OP_SILU] = UN("x*sigmoid(x)", "g*s*(1 + x*(1 - s)), s = sigmoid(x)"),
    [TL_OP_CLAMP] = {"x limited to [min, max]; NaN stays NaN", "g where min <= x <= max, else 0 (g at the edges)",
                     {{"min", "number", "no lower bound"}, {"max", "number", "no upper bound"}}},
    [TL_OP_DETACH] = UN("x", "none: stops the gradient"),
    [TL_OP_CAST] = {"x converted to another dtype (float to integer truncates toward zero; a value "
                    "outside the integer range is an error)",
                    "g cast back to x's dtype; none from or to an integer dtype",
                    {{"dtype", "\"f32\", \"f64\", \"i32\" or \"i64\"", NULL}}},
    [TL_OP_WHERE] = {"where(c, a, b): a where c != 0, else b, broadcasting all three",
                     "g to a where c != 0, to b elsewhere; none to c", NONE},
    [TL_OP_SUM] = RED("the sum over the axes, in a fixed order; i32, i64: exact, wrapping", "g broadcast back"),
    [TL_OP_MEAN] = RED("the mean over the axes", "g broadcast back, divided by the count"),
    [TL_OP_MAX] = RED("the largest element over the axes (an empty axis is an error)",
                      "g split evenly among the tied largest elements (as torch.amax)"),
    [TL_OP_MIN] = RED("the smallest element over the axes", "g split evenly among the tied smallest elements"),
    [TL_OP_PROD] = RED("the product over the axes; i32, i64: exact, wrapping", "as torch.prod, correct with zeros"),
    [TL_OP_LOGSUMEXP] = RED("log(sum(e**x)) over the axes, computed stably", "g*softmax(x)"),
    [TL_OP_SOFTMAX] = {"e**x / sum(e**x) along axis, computed stably", "y*(g - sum(g*y))",
                       {{"axis", "int", "-1"}}},
    [TL_OP_LOG_SOFTMAX] = {"x - logsumexp(x) along axis", "g - e**y*sum(g)", {{"axis", "int", "-1"}}},
    [TL_OP_MATMUL] = {"numpy.matmul: 1-D operands promoted (and the promoted axis removed), batch axes "
                      "broadcast; BLAS on the CPU",
                      "g@b^T to a and a^T@g to b, summed over broadcast batch axes", NONE},
    [TL_OP_RESHAPE] = {"the same elements in row-major order under a new shape", "g reshaped back",
                       {{"shape", "list of ints (one may be -1)", NULL}}},
    [TL_OP_TRANSPOSE] = {"the axes permuted", "g permuted back",
                         {{"axes", "a permutation of the axes", "reversed"}}},
    [TL_OP_BROADCAST_TO] = {"x broadcast to shape (NumPy rules)", "g summed over the broadcast axes",
                            {{"shape", "list of ints", NULL}}},
    [TL_OP_EXPAND_DIMS] = {"a new axis of size 1 at axis", "g reshaped back", {{"axis", "int", NULL}}},
    [TL_OP_SQUEEZE] = {"size-1 axes removed (squeezing another size is an error)", "g reshaped back",
                       {{"axes", "int or list of ints", "every size-1 axis"}}},
    [TL_OP_CONCAT] = {"the arguments joined along axis (any number)", "g sliced back to each",
                      {{"axis", "int", "0"}}},
    [TL_OP_STACK] = {"the arguments stacked along a new axis", "g sliced back to each", {{"axis", "int", "0"}}},
    [TL_OP_SLICE] = {"x[start:stop:step] along axis (Python rules, step > 0)", "g scattered into zeros",
                     {{"axis", "int", "0"}, {"start", "int or null", "null (the start)"},
                      {"stop", "int or null", "null (the end)"}, {"step", "int > 0", "1"}}},
    [TL_OP_TAKE] = {"numpy.take along axis; indices as the attribute or as an index tensor second "
                    "argument of any shape; result x.shape[:axis] + idx.shape + x.shape[axis+1:]; "
                    "negative indices count from the end, out of range is an error",
                    "g scatter-added back (repeated indices accumulate)",
                    {{"axis", "int", NULL}, {"indices", "list of ints", "none: or the indices as a second argument"}}},
    [TL_OP_GATHER] = {"numpy.take_along_axis: idx has x's rank and sizes except on axis; negative "
                      "indices count from the end",
                      "g scatter-added back", {{"axis", "int", NULL}}},
    [TL_OP_ONE_HOT] = {"idx.shape + [depth]: 1 at each index, else 0, in dtype (default: the element type of the call); "
                       "an index outside [0, depth) is an error",
                       "none", {{"depth", "int >= 0", NULL}, {"dtype", "\"f32\" or \"f64\"", "the element type of the call"}}},
    [TL_OP_IF] = {"only the selected block runs and is recorded: cond != 0 (NaN too) selects then",
                  "that of the selected branch; none claimed at the boundary", NONE},
    [TL_OP_ITERATE] = {"a fixed-count recurrence: each step recorded in order on the tape",
                       "through every step", NONE},
    [TL_OP_MAP] = {"a scalar program applied to every element of the broadcast arguments; each "
                   "element runs only its own branches",
                   "that of each element's selected branches", NONE},
    /* ---- elementwise additions and integer arithmetic ---- */
    [TL_OP_FLOOR] = UN("the largest integer <= x (floor(-0.5) = -1; -0 stays -0)", "none: zero"),
    [TL_OP_CEIL] = UN("the smallest integer >= x (ceil(-0.5) = -0)", "none: zero"),
    [TL_OP_ROUND] = UN("the nearest integer, ties to even (round(2.5) = 2, round(-0.5) = -0), as "
                       "numpy.round and ONNX Round",
                       "none: zero"),
    [TL_OP_TRUNC] = UN("x rounded toward zero (trunc(-1.5) = -1)", "none: zero"),
    [TL_OP_SINH] = UN("hyperbolic sine", "g*cosh(x)"),
    [TL_OP_COSH] = UN("hyperbolic cosine", "g*sinh(x)"),
    [TL_OP_ASIN] = UN("arcsine, in [-pi/2, pi/2] (nan outside [-1, 1])", "g/sqrt(1 - x**2): inf at +-1"),
    [TL_OP_ACOS] = UN("arccosine, in [0, pi] (nan outside [-1, 1])", "-g/sqrt(1 - x**2): -inf at +-1"),
    [TL_OP_ATAN] = UN("arctangent, in (-pi/2, pi/2)", "g/(1 + x**2)"),
    [TL_OP_ASINH] = UN("inverse hyperbolic sine", "g/sqrt(x**2 + 1)"),
    [TL_OP_ACOSH] = UN("inverse hyperbolic cosine (nan below 1)", "g/sqrt(x**2 - 1): inf at 1"),
    [TL_OP_ATANH] = UN("inverse hyperbolic tangent (+-inf at +-1, nan beyond)", "g/(1 - x**2)"),
    [TL_OP_ISNAN] = UN("1 where x is NaN, else 0, in x's dtype", "none"),
    [TL_OP_ISINF] = UN("1 where x is +inf or -inf, else 0, in x's dtype", "none"),
    [TL_OP_FMOD] = BIN("C's fmod: a - trunc(a/b)*b, exact, with a's sign (fmod(-5, 3) = -2; "
                       "by 0: nan); i32, i64: C's %, by 0 an error",
                       "g to a, -g*trunc(a/b) to b, as torch.fmod"),
    [TL_OP_MOD] = BIN("Python's %: a - floor(a/b)*b, with b's sign, a zero result too (mod(-5, 3) = 1; "
                      "by 0: nan); i32, i64: the same, by 0 an error",
                      "g to a, -g*floor(a/b) to b, as torch.remainder"),
    /* ---- end of elementwise additions and integer arithmetic ---- */

    /* ---- convolution ---- */
    [TL_OP_CONV] = {"torch.nn.functional.conv1d/2d/3d (cross-correlation, zero padding): x [N, Cin, *S], "
                    "w [Cout, Cin/groups, *K], optional b [Cout]; out [N, Cout, *O] with "
                    "O = floor((S + pad_begin + pad_end - dilation*(K-1) - 1)/stride) + 1; groups split "
                    "the channels (groups = Cin: depthwise)",
                    "to x: the transposed convolution of g with w; to w: the convolution of x with g, "
                    "summed over the batch; to b: g summed over N and the spatial axes",
                    {{"stride", "int or list of d ints >= 1", "1"},
                     {"padding", "int, list of d ints, or list of d [begin, end] pairs", "0"},
                     {"dilation", "int or list of d ints >= 1", "1"},
                     {"groups", "int >= 1 dividing Cin and Cout", "1"}}},
    [TL_OP_CONV_TRANSPOSE] = {"torch.nn.functional.conv_transpose1d/2d/3d: x [N, Cin, *S], "
                              "w [Cin, Cout/groups, *K], optional b [Cout]; out [N, Cout, *O] with "
                              "O = (S-1)*stride - pad_begin - pad_end + dilation*(K-1) + output_padding + 1",
                              "to x: the convolution of g with w; to w: the convolution of g with x, "
                              "summed over the batch; to b: g summed over N and the spatial axes",
                              {{"stride", "int or list of d ints >= 1", "1"},
                               {"padding", "int, list of d ints, or list of d [begin, end] pairs", "0"},
                               {"output_padding", "int or list of d ints, each below the stride or the dilation",
                                "0"},
                               {"dilation", "int or list of d ints >= 1", "1"},
                               {"groups", "int >= 1 dividing Cin and Cout", "1"}}},
    [TL_OP_CONV_GRAD_W] = {"internal: the weight gradient of conv (conv_grad_w(x, g)) and of "
                           "conv_transpose (conv_grad_w(g, x))", "", NONE},
    /* ---- end of convolution ---- */

    /* ---- pooling ---- */
    [TL_OP_MAX_POOL] = {"torch.nn.functional.max_pool{1,2,3}d over x [N, C, *S]: the largest element of each "
                        "window; padded positions never win (a window of padding alone gives -inf); a window "
                        "holding a NaN gives NaN; output size (S + lo + hi - dilation*(kernel-1) - 1)/stride + 1, "
                        "rounded down or, with ceil_mode, up (a last window that would start in the right "
                        "padding is dropped)",
                        "all of g to each window's first maximum in row-major window order; with a NaN in the "
                        "window, to its last NaN (PyTorch's rule); ties are kinks",
                        {{"kernel", "int or list of d ints >= 1", NULL},
                         {"stride", "int or list of d ints >= 1", "the kernel"},
                         {"padding", "int, list of d ints or of d [begin, end] pairs, each at most kernel/2", "0"},
                         {"dilation", "int or list of d ints >= 1", "1"},
                         {"ceil_mode", "bool", "false"}}},
    [TL_OP_AVG_POOL] = {"torch.nn.functional.avg_pool{1,2,3}d over x [N, C, *S]: each window's sum in row-major "
                        "order divided by its positions inside the padded input (count_include_pad) or inside "
                        "the input; ceil-mode windows past the padded end are clipped; output size as max_pool's "
                        "(no dilation)",
                        "each output's g divided by that count, added to every input element of its window",
                        {{"kernel", "int or list of d ints >= 1", NULL},
                         {"stride", "int or list of d ints >= 1", "the kernel"},
                         {"padding", "int, list of d ints or of d [begin, end] pairs, each at most kernel/2", "0"},
                         {"ceil_mode", "bool", "false"},
                         {"count_include_pad", "bool", "true"}}},
    [TL_OP_MAX_POOL_GRAD] = {"internal: max_pool's backward (g to each window's argmax, recomputed from x)", "", NONE},
    [TL_OP_AVG_POOL_GRAD] = {"internal: avg_pool's backward (g spread over each window)", "", NONE},

    /* ---- end of pooling ---- */

    /* ---- normalization ---- */
    [TL_OP_BATCH_NORM] = {"x [N, C, *S], the rest [C]: (x - mean)/sqrt(var + epsilon)*scale + bias per channel "
                          "(inference); training: the batch's own mean and biased variance over N and S instead "
                          "(the mean and var arguments are not read), and then up to three ids: the value, the "
                          "batch mean, the batch variance",
                          "to every argument it reads: x, scale, bias, mean and var (inference); in training "
                          "mode through the batch statistics (a recipe of ops on the tape)",
                          {{"epsilon", "number > 0", "1e-5"}, {"training", "bool", "false"}}},
    [TL_OP_LAYER_NORM] = {"torch.nn.functional.layer_norm: normalize over the axes axis.. (biased variance), then "
                          "the optional scale and bias of shape x.shape[axis:]",
                          "to x (one fused kernel), scale and bias",
                          {{"axis", "int", "-1"}, {"epsilon", "number > 0", "1e-5"}}},
    [TL_OP_GROUP_NORM] = {"torch.nn.functional.group_norm over x [N, C, *S]: each of groups consecutive channel "
                          "groups normalized over its channels and S, then the optional scale and bias [C]; "
                          "instance norm is groups = C",
                          "to x, scale and bias",
                          {{"groups", "int >= 1 dividing C", NULL}, {"epsilon", "number > 0", "1e-5"}}},
    [TL_OP_LAYER_NORM_GRAD] = {"internal: layer_norm's backward to x (group_norm's too)", "", NONE},
    [TL_OP_LAYER_NORM_PARAMS_GRAD] = {"internal: layer_norm's backward to scale and bias", "", NONE},

    /* ---- end of normalization ---- */

    /* ---- padding and resampling ---- */
    [TL_OP_PAD] = {"numpy.pad / ONNX Pad: per axis, crop -begin (-end) elements where a pad is negative, "
                   "then add begin (end) elements: the constant value, a reflection without repeating the "
                   "edge (\"reflect\", each pad below the cropped size), copies of the edge (\"edge\") or "
                   "the axis periodically (\"wrap\", x[c mod n]); any dtype, index tensors too",
                   "constant: pad(g) with the pads negated (the slice of g that holds x, zeros where x was "
                   "cropped); reflect, edge, wrap: every copy of an element adds its g (pad_grad); none for "
                   "an index tensor",
                   {{"pads", "list of one [begin, end] pair of ints per axis (negative: crop)", NULL},
                    {"mode", "\"constant\", \"reflect\", \"edge\" or \"wrap\"", "\"constant\""},
                    {"value", "number (an integer of x's dtype for an index tensor)", "0"}}},
    [TL_OP_RESIZE] = {"ONNX Resize (opset 13/18) of x [N, C, *S] (1 to 3 spatial axes) to the sizes given, "
                      "or floor(S*scale): each output coordinate o maps to a source coordinate (half_pixel "
                      "(o+0.5)/s-0.5, pytorch_half_pixel the same but 0 for one output, align_corners "
                      "o*(S-1)/(out-1), asymmetric o/s; s the scale given, else out/S), then nearest takes "
                      "one element (by the rounding), linear 2 and cubic 4 (Keys' kernel with cubic_coeff) "
                      "per axis, separably, indices clamped into the axis",
                      "to x: each output's g added to the inputs it read, with its weights (resize_grad)",
                      {{"size", "list of d ints >= 1", "none: give size or scale (one is required)"},
                       {"scale", "list of d numbers > 0", "none: give size or scale"},
                       {"mode", "\"nearest\", \"linear\" or \"cubic\"", "\"nearest\""},
                       {"coordinate", "\"half_pixel\", \"pytorch_half_pixel\", \"align_corners\" or "
                                      "\"asymmetric\"", "\"half_pixel\""},
                       {"nearest", "\"round_prefer_floor\", \"round_prefer_ceil\", \"floor\" or \"ceil\"",
                        "\"round_prefer_floor\""},
                       {"cubic_coeff", "number", "-0.75"}}},
    [TL_OP_PAD_GRAD] = {"internal: pad's backward for reflect, edge and wrap (every copy added up)", "", NONE},
    [TL_OP_RESIZE_GRAD] = {"internal: resize's backward (each output's g to the inputs it read, weighted)", "",
                           NONE},

    /* ---- end of padding and resampling ---- */

    /* ---- scatter, arg-reductions and scans ---- */
    [TL_OP_SCATTER_ADD] = {"torch.Tensor.scatter_add: x with src[j] added at x[..., idx[j], ...] along axis; idx has "
                           "x's rank and sizes except on axis, src idx's shape; negative indices count from the end, "
                           "out of range is an error; repeated indices add up in index order",
                           "g to x, gather(g, idx) to src; none to idx", {{"axis", "int", NULL}}},
    [TL_OP_ARGMAX] = {"the i64 index of the largest element along axis (ties: the first, or the last with "
                      "select_last_index; a NaN is the largest: the first NaN, or the last)",
                      "none: an index",
                      {{"axis", "int", NULL}, KEEPDIMS, {"select_last_index", "true or false", "false"}}},
    [TL_OP_ARGMIN] = {"the i64 index of the smallest element along axis (ties: the first, or the last with "
                      "select_last_index; a NaN is the smallest: the first NaN, or the last)",
                      "none: an index",
                      {{"axis", "int", NULL}, KEEPDIMS, {"select_last_index", "true or false", "false"}}},
    [TL_OP_CUMSUM] = {"ONNX CumSum: running sums along axis in index order (from the end when reverse; "
                      "exclusive: each element's sum leaves it out, the first is 0)",
                      "the cumsum of g the other way: the same exclusive, reverse flipped",
                      {{"axis", "int", NULL}, {"exclusive", "true or false", "false"},
                       {"reverse", "true or false", "false"}}},
    /* ---- end of scatter, arg-reductions and scans ---- */

    /* ---- seeded randomness ---- */
    [TL_OP_RANDOM_UNIFORM] = {"a tensor of shape drawn uniformly from [low, high) by the counter-based generator "
                              "(Philox4x32-10, keyed by seed, the node's place and the iterate step): the same "
                              "bits every run, thread count and device",
                              "none: a constant of the run",
                              {{"shape", "list of ints", NULL}, {"seed", "int", NULL}, {"low", "number", "0"},
                               {"high", "number > low", "1"},
                               {"dtype", "\"f32\" or \"f64\"", "the element type of the call"}}},
    [TL_OP_RANDOM_NORMAL] = {"a tensor of shape drawn from the normal distribution (Box-Muller over the same "
                             "generator), mean + std*z",
                             "none: a constant of the run",
                             {{"shape", "list of ints", NULL}, {"seed", "int", NULL}, {"mean", "number", "0"},
                              {"std", "number > 0", "1"},
                              {"dtype", "\"f32\" or \"f64\"", "the element type of the call"}}},
    [TL_OP_DROPOUT] = {"x * mask / (1 - p), mask 1 where the element's uniform draw is below 1 - p (kept with "
                       "probability 1 - p); training false: x",
                       "g through the same mask, times 1/(1 - p) (drawn again from the same key); training "
                       "false: g",
                       {{"p", "number in [0, 1)", NULL}, {"seed", "int", "0"}, {"training", "true or false", "true"}}},
    /* ---- end of seeded randomness ---- */

    [TL_OP_SLICE_GRAD] = {"internal: slice's backward (scatter into zeros)", "", NONE},
    [TL_OP_TAKE_GRAD] = {"internal: take's backward (scatter-add)", "", NONE},
    [TL_OP_GATHER_GRAD] = {"internal: gather's backward (scatter-add)", "", NONE},
    [TL_OP_PROD_GRAD] = {"internal: prod's backward", "", NONE},
    [TL_OP_GELU_GRAD] = {"internal: g*gelu'(x)", "", NONE},
    [TL_OP_BATCH_NORM_VAR] = {"internal: training batch_norm's batch variance, mean(square(x - m)) over all axes but the channels with the same bits, without the two temporaries", "", NONE},
    [TL_OP_BATCH_NORM_PARAMS_GRAD] = {"internal: training batch_norm's sums of g*xhat and g per channel", "", NONE},
    [TL_OP_BATCH_NORM_GRAD] = {"internal: training batch_norm's gradient to x", "", NONE},
    [TL_OP_RELU_GRAD] = {"internal: g where x > 0, else 0 (relu's backward)", "", NONE},
    [TL_OP_MAP_GRAD] = {"internal: a map's forward-mode derivatives", "", NONE},
    [TL_OP_MAX_POOL_PICK] = {"internal: v at each window's argmax of x (max_pool's Jacobian times v)", "", NONE},
};

bool tl_op_differentiable(tl_opcode op)
{
    switch (op) {
    case TL_OP_SIGN:
    case TL_OP_DETACH:
    case TL_OP_ONE_HOT:
    case TL_OP_FLOOR:
    case TL_OP_CEIL:
    case TL_OP_ROUND:
    case TL_OP_TRUNC:
    case TL_OP_ISNAN:
    case TL_OP_ISINF:
    case TL_OP_ARGMAX:
    case TL_OP_ARGMIN:
    case TL_OP_RANDOM_UNIFORM:
    case TL_OP_RANDOM_NORMAL: return false;
    default: return tl_ops[op].kind != TL_KIND_CMP && tl_ops[op].kind != TL_KIND_INT;
    }
}
