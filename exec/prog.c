/* Register programs for the evaluator's fast paths (prog.h). */
#include "prog.h"

#include <stdlib.h>
#include <string.h>

#include "shape.h"

bool tl_op_elementwise(tl_opcode op)
{
    tl_opkind k = tl_ops[op].kind;
    return k == TL_KIND_BIN || k == TL_KIND_CMP || k == TL_KIND_UN || op == TL_OP_WHERE;
}


void *tl_pb_grow(void *p, int *cap, int need, size_t size, bool *oom)
{
    if (need <= *cap)
        return p;
    int c = *cap ? *cap * 2 : 32;
    while (c < need)
        c *= 2;
    void *q = realloc(p, (size_t)c * size);
    if (!q) {
        *oom = true;
        return p;
    }
    *cap = c;
    return q;
}

int64_t tl_pb_bytes(const tl_pbuild *b)
{
    return (int64_t)b->cap * (int64_t)sizeof(tl_mins) + (int64_t)b->ccap * (int64_t)(sizeof(int) + sizeof(double)) +
           (int64_t)b->icap * (int64_t)(sizeof(int) + sizeof *b->in);
}

void tl_pb_free(tl_pbuild *b)
{
    free(b->p.ins);
    free(b->p.const_reg);
    free(b->p.const_val);
    free(b->p.in_reg);
    free(b->in);
}

int tl_pb_reg(tl_pbuild *b) { return b->p.nregs++; }

void tl_pb_emit(tl_pbuild *b, tl_mins ins)
{
    b->p.ins = tl_pb_grow(b->p.ins, &b->cap, b->p.nins + 1, sizeof ins, &b->oom);
    if (!b->oom)
        b->p.ins[b->p.nins++] = ins;
}

int tl_pb_const(tl_pbuild *b, double v)
{
    int r = tl_pb_reg(b);
    int cap = b->ccap;
    b->p.const_reg = tl_pb_grow(b->p.const_reg, &cap, b->p.nconst + 1, sizeof(int), &b->oom);
    b->p.const_val = tl_pb_grow(b->p.const_val, &b->ccap, b->p.nconst + 1, sizeof(double), &b->oom);
    if (!b->oom) {
        b->p.const_reg[b->p.nconst] = r;
        b->p.const_val[b->p.nconst++] = v;
    }
    return r;
}

/* An input tensor in register reg (a new one when reg < 0). */
int tl_pb_input(tl_pbuild *b, const tl_tensor *t, int reg)
{
    int r = reg >= 0 ? reg : tl_pb_reg(b);
    int cap = b->icap;
    b->p.in_reg = tl_pb_grow(b->p.in_reg, &cap, b->p.nin + 1, sizeof(int), &b->oom);
    b->in = tl_pb_grow(b->in, &b->icap, b->p.nin + 1, sizeof *b->in, &b->oom);
    if (!b->oom) {
        b->p.in_reg[b->p.nin] = r;
        b->in[b->p.nin++] = t;
    }
    return r;
}

void tl_pb_call(tl_pbuild *b, const tl_mprog *sub, int nin, const int *args, int g, uint64_t want,
                int dst)
{
    int first = b->p.nregs; /* the inputs in consecutive registers */
    for (int i = 0; i < nin; i++)
        tl_pb_reg(b);
    for (int i = 0; i < nin; i++)
        tl_pb_emit(b, (tl_mins){.code = TL_M_MOV, .dst = first + i, .a = args[i]});
    tl_pb_emit(b, (tl_mins){.code = TL_M_CALL, .dst = dst, .a = first, .c = nin, .b = g,
                            .imm = (int64_t)want, .sub = sub});
}

/* The instruction of one elementwise op. */
void tl_pb_op(tl_pbuild *b, tl_opcode op, const tl_attrs *a, int dst, const int *r)
{
    tl_mins ins = {.op = (uint8_t)op, .dst = dst, .a = r[0]};
    if (op == TL_OP_WHERE) {
        ins.code = TL_M_WHERE;
        ins.b = r[1];
        ins.c = r[2];
    } else if (op == TL_OP_CLAMP) {
        ins.code = TL_M_CLAMP;
        ins.lo = a ? a->min : 0;
        ins.hi = a ? a->max : 0;
        ins.has_lo = a && a->has_min;
        ins.has_hi = a && a->has_max;
    } else if (tl_ops[op].kind == TL_KIND_UN) {
        ins.code = TL_M_UN;
        ins.approx = (uint8_t)(a ? a->approximate : 0);
    } else { /* binary, comparison, gelu_grad */
        ins.code = TL_M_BIN;
        ins.b = r[1];
        ins.approx = (uint8_t)(a ? a->approximate : 0);
    }
    tl_pb_emit(b, ins);
}

/* ---------- the backward program: the rules, recorded ---------- */


/* A tensor that stands for register reg: a header without data. */
tl_tensor *tl_pr_symbol(tl_precorder *r, int reg, tl_dtype dt, int ndim, const int64_t *shape,
                         tl_status *st)
{
    int cap = r->cap, cap2 = r->cap;
    r->stub = tl_pb_grow(r->stub, &cap, r->n + 1, sizeof *r->stub, &r->b->oom);
    r->rows = tl_pb_grow(r->rows, &cap2, r->n + 1, sizeof *r->rows, &r->b->oom);
    r->reg = tl_pb_grow(r->reg, &r->cap, r->n + 1, sizeof *r->reg, &r->b->oom);
    if (r->b->oom) {
        tl_fail(st, TL_ERUNTIME, "out of memory writing a fused backward program");
        return NULL;
    }
    tl_tensor *t = tl_malloc(1, sizeof *t, "a fused backward program", st);
    if (!t)
        return NULL;
    *t = (tl_tensor){.refs = 1, .dtype = dt, .ndim = ndim, .numel = 1};
    for (int d = 0; d < ndim; d++) {
        t->shape[d] = shape[d];
        t->numel *= shape[d];
    }
    r->stub[r->n] = t;
    r->rows[r->n] = 1;
    r->reg[r->n++] = reg;
    return t;
}

int tl_pr_reg(const tl_precorder *r, const tl_tensor *t)
{
    for (int i = r->n - 1; i >= 0; i--)
        if (r->stub[i] == t)
            return r->reg[i];
    return -1;
}

/* How many registers a symbolic tensor stands for: 1, or k for the k
 * stacked gradients of a map_grad (rows of its [k, ...] result). */
static int rows_of(const tl_precorder *r, const tl_tensor *t)
{
    for (int i = r->n - 1; i >= 0; i--)
        if (r->stub[i] == t)
            return r->rows[i];
    return 0;
}

static tl_tensor *pr_fail(tl_precorder *r, tl_opcode op, tl_status *st)
{
    r->failed = true;
    tl_fail(st, TL_ERUNTIME, "internal: %s in a fused backward program", tl_ops[op].name);
    return NULL;
}

static tl_tensor *tl_pr_op(tl_grad_recorder *base, tl_opcode op, int n, tl_tensor *const *in,
                           const tl_attrs *a, tl_status *st)
{
    tl_precorder *r = (tl_precorder *)base;
    int regs[TL_PB_ARGS];
    bool elementwise = tl_op_elementwise(op) || op == TL_OP_GELU_GRAD;
    bool moves = op == TL_OP_SLICE || op == TL_OP_RESHAPE || op == TL_OP_EXPAND_DIMS ||
                 op == TL_OP_SQUEEZE;
    if (!(elementwise || moves || op == TL_OP_MAP_GRAD) || n > TL_PB_ARGS)
        return pr_fail(r, op, st);
    for (int i = 0; i < n; i++) {
        if ((regs[i] = tl_pr_reg(r, in[i])) < 0) {
            r->failed = true;
            tl_fail(st, TL_ERUNTIME, "internal: an unknown tensor in a fused backward program");
            return NULL;
        }
        if (rows_of(r, in[i]) > 1 && op != TL_OP_SLICE) /* a stack is only sliced */
            return pr_fail(r, op, st);
    }
    tl_attrs at;
    tl_shape sh;
    if (a)
        at = *a;
    else
        tl_attrs_init(&at);
    if (tl_shape_infer(op, n, (const tl_tensor *const *)in, &at, &sh, st)) {
        r->failed = true;
        return NULL;
    }
    int dst, rows = 1;
    if (moves) { /* the same values, another shape: the same register */
        int64_t numel = 1;
        for (int d = 0; d < sh.ndim; d++)
            numel *= sh.dims[d];
        int k = rows_of(r, in[0]);
        dst = regs[0];
        if (op == TL_OP_SLICE && k > 1) { /* one row of a stack */
            if (at.axis != 0 || at.step != 1 || at.stop != at.start + 1 || at.start < 0 || at.start >= k)
                return pr_fail(r, op, st);
            dst = regs[0] + (int)at.start;
        } else if (numel != in[0]->numel) {
            return pr_fail(r, op, st);
        }
    } else if (op == TL_OP_MAP_GRAD) { /* the map's body in derivative mode */
        uint64_t want = 0;
        for (int i = 0; i < n - 1; i++)
            want |= (uint64_t)(at.want && at.want[i]) << i;
        rows = (int)sh.dims[0];
        dst = tl_pb_reg(r->b);
        for (int j = 1; j < rows; j++)
            tl_pb_reg(r->b);
        tl_pb_call(r->b, at.prog, n - 1, regs, regs[n - 1], want, dst);
    } else {
        dst = tl_pb_reg(r->b);
        tl_pb_op(r->b, op, &at, dst, regs);
    }
    tl_tensor *t = tl_pr_symbol(r, dst, sh.dtype, sh.ndim, sh.dims, st);
    if (t)
        r->rows[r->n - 1] = rows;
    return tl_tensor_ref(t);
}

static tl_tensor *tl_pr_num(tl_grad_recorder *base, tl_dtype dt, double v, tl_status *st)
{
    tl_precorder *r = (tl_precorder *)base;
    return tl_tensor_ref(tl_pr_symbol(r, tl_pb_const(r->b, v), dt, 0, NULL, st));
}

void tl_pr_free(tl_precorder *r)
{
    for (int i = 0; i < r->n; i++)
        tl_tensor_unref(r->stub[i]);
    free(r->stub);
    free(r->rows);
    free(r->reg);
}

/* cot[v] += g as the tape adds gradients: the first one is taken as is,
 * later ones are added after it. */
void tl_pb_accumulate(tl_pbuild *b, int *slot, int g)
{
    if (*slot < 0) {
        *slot = g;
        return;
    }
    int r[2] = {*slot, g}, dst = tl_pb_reg(b);
    tl_pb_op(b, TL_OP_ADD, NULL, dst, r);
    *slot = dst;
}


void tl_pr_init(tl_precorder *r, tl_pbuild *b)
{
    memset(r, 0, sizeof *r);
    r->base.op = tl_pr_op;
    r->base.num = tl_pr_num;
    r->b = b;
}

void tl_pb_prune(tl_pbuild *b, const int *out, int nout)
{
    tl_mprog *p = &b->p;
    if (p->nins == 0)
        return;
    bool *live = calloc((size_t)p->nregs + 1, sizeof *live);
    if (!live)
        return; /* nothing pruned: the program is still right */
    for (int i = 0; i < nout; i++)
        if (out[i] >= 0)
            live[out[i]] = true;
    int kept = p->nins;
    for (int pc = p->nins - 1; pc >= 0; pc--) {
        tl_mins *in = &p->ins[pc];
        int ndst = 1;
        if (in->code == TL_M_CALL && in->b >= 0)
            ndst = __builtin_popcountll((unsigned long long)in->imm);
        bool needed = false;
        for (int d = 0; d < ndst; d++)
            needed = needed || live[in->dst + d];
        if (!needed) {
            in->code = 0xff; /* dropped below */
            kept--;
            continue;
        }
        switch (in->code) {
        case TL_M_CALL:
            for (int i = 0; i < in->c; i++)
                live[in->a + i] = true;
            if (in->b >= 0)
                live[in->b] = true;
            break;
        case TL_M_WHERE: live[in->c] = true; /* fall through */
        case TL_M_BIN: live[in->b] = true; /* fall through */
        default: live[in->a] = true; break;
        }
    }
    int w = 0;
    for (int pc = 0; pc < p->nins; pc++)
        if (p->ins[pc].code != 0xff)
            p->ins[w++] = p->ins[pc];
    p->nins = w;
    (void)kept;
    free(live);
}
