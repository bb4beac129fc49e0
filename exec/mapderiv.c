/* The derivative of a map body as a map body (bw.h: tl_map_derivative):
 * forward mode over the body's register program.  Every register r gets
 * a tangent register; after each instruction comes the instruction that
 * updates its result's tangent, written by the backward rules of grad.c
 * themselves (recorded into the program, as the fused chains' backward
 * programs are: prog.h), one call per operand with its tangent as the
 * cotangent, the results added.  Jumps and loops stay where they were, so
 * the branch a body takes is the branch its derivative takes.  The result
 * is an ordinary program: a map of it is differentiated again the same
 * way. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bw.h"
#include "prog.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* The registers whose tangent is 0 in every run of the body: those that
 * never hold a value computed from the input differentiated (constants,
 * the other inputs, loop counters and what only they make), found over
 * every instruction whatever the jumps (a register any write makes from a
 * nonzero tangent is not zero).  Their terms are left out of the tangents:
 * 0 times an infinite or NaN partial (the exponent's log(base) in x ** 3
 * at a negative x; 0.5 / sqrt(0)) would be NaN where the derivative is 0. */
static bool *zero_tangents(const tl_mprog *p, int input, tl_status *st)
{
    bool *z = tl_malloc((size_t)p->nregs + 1, sizeof *z, "a map derivative", st);
    if (!z)
        return NULL;
    for (int r = 0; r < p->nregs; r++)
        z[r] = true;
    z[p->in_reg[input]] = false;
    for (bool changed = true; changed;) {
        changed = false;
        for (int pc = 0; pc < p->nins; pc++) {
            const tl_mins *in = &p->ins[pc];
            bool from = false; /* written from a nonzero tangent */
            switch (in->code) {
            case TL_M_UN:
            case TL_M_CLAMP:
            case TL_M_MOV: from = !z[in->a]; break;
            case TL_M_BIN: from = !z[in->a] || !z[in->b]; break;
            case TL_M_WHERE: from = !z[in->b] || !z[in->c]; break; /* the condition has none */
            default: break;
            }
            if (from && z[in->dst]) {
                z[in->dst] = false;
                changed = true;
            }
        }
    }
    return z;
}

/* The tangent of op(operands) at the instruction's result `out`:
 * sum over the operands j of rule_j(cotangent = tangent of j), as
 * registers of b, leaving out the operands whose tangent is always 0
 * (zero[r]); -1 when it is zero. */
static int tangent_of(tl_pbuild *b, const tl_mins *ins, int nregs, int out, const bool *zero, tl_status *st)
{
    tl_opcode op = ins->code == TL_M_WHERE ? TL_OP_WHERE : ins->code == TL_M_CLAMP ? TL_OP_CLAMP : ins->op;
    int n = ins->code == TL_M_UN || ins->code == TL_M_CLAMP ? 1 : ins->code == TL_M_BIN ? 2 : 3;
    int reg[3] = {ins->a, (int)ins->b, ins->c};
    tl_attrs a;
    tl_attrs_init(&a);
    a.approximate = ins->approx;
    a.has_min = ins->has_lo;
    a.has_max = ins->has_hi;
    a.min = ins->lo;
    a.max = ins->hi;
    tl_precorder r;
    tl_pr_init(&r, b);
    int sum = -1;
    tl_code rc = TL_OK;
    for (int j = op == TL_OP_WHERE ? 1 : 0; j < n && !rc; j++) {
        if (zero[reg[j]])
            continue;
        tl_tensor *in[3] = {NULL}, *gin[3] = {NULL};
        int in_var[3] = {-1, -1, -1};
        for (int i = 0; i < n; i++)
            if (!(in[i] = tl_pr_symbol(&r, reg[i], TL_F64, 0, NULL, st)))
                rc = st->code;
        in_var[j] = 0;
        tl_tensor *y = rc ? NULL : tl_pr_symbol(&r, out, TL_F64, 0, NULL, st);
        tl_tensor *g = y ? tl_pr_symbol(&r, nregs + reg[j], TL_F64, 0, NULL, st) : NULL;
        if (!g)
            rc = st->code;
        tl_entry e = {.op = op, .nin = n, .out_var = 0, .attrs = &a, .out = y, .in_var = in_var, .in = in};
        if (!rc)
            rc = tl_grad_rule_with(NULL, &r.base, &e, g, gin, st);
        int t = !rc && gin[j] ? tl_pr_reg(&r, gin[j]) : -1;
        if (!rc && gin[j] && t < 0)
            rc = tl_fail(st, TL_ERUNTIME, "internal: a map body's derivative left its registers");
        if (t >= 0)
            tl_pb_accumulate(b, &sum, t);
        for (int i = 0; i < n; i++)
            tl_tensor_unref(gin[i]);
    }
    tl_pr_free(&r);
    if (!rc && (b->oom || r.failed))
        rc = st->code ? st->code : tl_fail(st, TL_ERUNTIME, "out of memory differentiating a map body");
    return rc ? -2 : sum;
}

static tl_mprog *derive(const tl_mprog *p, int input, bool times, tl_status *st)
{
    tl_pbuild b = {0};
    int nr = p->nregs, *at = tl_malloc((size_t)p->nins + 1, sizeof *at, "a map derivative", st);
    bool *fixed = at ? zero_tangents(p, input, st) : NULL;
    if (!fixed) {
        free(at);
        return NULL;
    }
    b.p.nregs = 2 * nr; /* r's tangent: nr + r */
    b.p.ncounters = p->ncounters;
    for (int k = 0; k < p->nconst; k++) {
        int cap = b.ccap;
        b.p.const_reg = tl_pb_grow(b.p.const_reg, &cap, b.p.nconst + 1, sizeof(int), &b.oom);
        b.p.const_val = tl_pb_grow(b.p.const_val, &b.ccap, b.p.nconst + 1, sizeof(double), &b.oom);
        if (!b.oom) {
            b.p.const_reg[b.p.nconst] = p->const_reg[k];
            b.p.const_val[b.p.nconst++] = p->const_val[k];
        }
    }
    int zero = tl_pb_const(&b, 0), one = tl_pb_const(&b, 1);
    for (int k = 0; k < p->nin; k++)
        tl_pb_input(&b, NULL, p->in_reg[k]);
    for (int k = 0; k < p->nin; k++)
        tl_pb_emit(&b, (tl_mins){.code = TL_M_MOV, .dst = nr + p->in_reg[k], .a = k == input ? one : zero});
    for (int k = 0; k < p->nconst; k++)
        tl_pb_emit(&b, (tl_mins){.code = TL_M_MOV, .dst = nr + p->const_reg[k], .a = zero});
    tl_code rc = TL_OK;
    for (int pc = 0; pc < p->nins && !rc; pc++) {
        tl_mins ins = p->ins[pc];
        at[pc] = b.p.nins;
        switch (ins.code) {
        case TL_M_UN:
        case TL_M_BIN:
        case TL_M_WHERE:
        case TL_M_CLAMP: { /* into a new register first: the rules read the operands */
            int dst = ins.dst, tmp = tl_pb_reg(&b);
            ins.dst = tmp;
            tl_pb_emit(&b, ins);
            int t = tangent_of(&b, &ins, nr, tmp, fixed, st);
            if (t == -2) {
                rc = st->code;
                break;
            }
            tl_pb_emit(&b, (tl_mins){.code = TL_M_MOV, .dst = dst, .a = tmp});
            tl_pb_emit(&b, (tl_mins){.code = TL_M_MOV, .dst = nr + dst, .a = t >= 0 ? t : zero});
            break;
        }
        case TL_M_MOV:
            tl_pb_emit(&b, ins);
            tl_pb_emit(&b, (tl_mins){.code = TL_M_MOV, .dst = nr + ins.dst, .a = nr + ins.a});
            break;
        case TL_M_LOOP_TEST: /* the counter's value has no tangent */
            tl_pb_emit(&b, ins);
            if (ins.dst >= 0)
                tl_pb_emit(&b, (tl_mins){.code = TL_M_MOV, .dst = nr + ins.dst, .a = zero});
            break;
        case TL_M_JZ:
        case TL_M_JMP:
        case TL_M_LOOP_INIT:
        case TL_M_LOOP_INC: tl_pb_emit(&b, ins); break;
        default: rc = tl_fail(st, TL_ERUNTIME, "internal: a call in a map body to differentiate"); break;
        }
    }
    at[p->nins] = b.p.nins;
    for (int pc = 0; !rc && !b.oom && pc < b.p.nins; pc++) { /* jumps to where their targets went */
        tl_mins *in = &b.p.ins[pc];
        if (in->code == TL_M_JZ || in->code == TL_M_JMP || in->code == TL_M_LOOP_TEST)
            in->imm = at[in->imm];
    }
    free(at);
    free(fixed);
    b.p.result = nr + p->result;
    if (times) { /* g * the derivative, g one more input (after every jump's target) */
        int g = tl_pb_input(&b, NULL, -1), r = tl_pb_reg(&b);
        tl_pb_op(&b, TL_OP_MUL, NULL, r, (int[]){g, b.p.result});
        b.p.result = r;
    }
    tl_mprog *d = rc || b.oom ? NULL : tl_malloc(1, sizeof *d, "a map derivative", st);
    if (!rc && b.oom && !st->code)
        tl_fail(st, TL_ERUNTIME, "out of memory differentiating a map body");
    if (!d) {
        tl_pb_free(&b);
        return NULL;
    }
    *d = b.p;
    d->linear_last = times;
    free(b.in);
    return d;
}

static const tl_mprog *cached(const tl_mprog *p, int input, bool times, tl_status *st)
{
    tl_mprog *q = (tl_mprog *)p; /* the cache is the only thing that changes */
    int k = times ? p->nin + input : input;
    pthread_mutex_lock(&lock);
    if (!q->deriv)
        q->deriv = tl_calloc(2 * (size_t)p->nin + 1, sizeof *q->deriv, "a map derivative", st);
    tl_mprog *d = q->deriv ? q->deriv[k] : NULL;
    if (q->deriv && !d && (d = derive(p, input, times, st)))
        q->deriv[k] = d;
    pthread_mutex_unlock(&lock);
    return d;
}

const tl_mprog *tl_map_derivative(const tl_mprog *p, int input, tl_status *st)
{
    return cached(p, input, false, st);
}

const tl_mprog *tl_map_derivative_times(const tl_mprog *p, int input, tl_status *st)
{
    return cached(p, input, true, st);
}
