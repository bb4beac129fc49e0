#include "mapc.h"

#include <stdlib.h>
#include <string.h>

typedef struct mcomp {
    const tl_graph *g;
    tl_node *node;
    tl_mprog *p;
    int *slot_reg;
    int cap_ins, cap_const, cap_caps;
    tl_status *st;
} mcomp;

static bool grow(void **p, int *cap, int need, size_t es, tl_status *st)
{
    if (need <= *cap)
        return true;
    int c = *cap ? 2 * *cap : 16;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, (size_t)c * es);
    if (!q)
        return tl_fail(st, TL_ERUNTIME, "out of memory compiling a map body"), false;
    *p = q;
    *cap = c;
    return true;
}

static int emit(mcomp *c, tl_mins ins)
{
    if (!grow((void **)&c->p->ins, &c->cap_ins, c->p->nins + 1, sizeof ins, c->st))
        return -1;
    c->p->ins[c->p->nins] = ins;
    return c->p->nins++;
}

static int new_reg(mcomp *c) { return c->p->nregs++; }

/* The register holding an argument: a constant, a local, or a captured
 * name of an enclosing scope (which becomes a program input). */
static int arg_reg(mcomp *c, const tl_arg *a)
{
    tl_mprog *p = c->p;
    if (a->slot < 0) {
        if (!grow((void **)&p->const_reg, &c->cap_const, p->nconst + 1, sizeof(int), c->st) ||
            !(p->const_val = realloc(p->const_val, sizeof(double) * (size_t)c->cap_const)))
            return tl_fail(c->st, TL_ERUNTIME, "out of memory compiling a map body"), -1;
        p->const_reg[p->nconst] = new_reg(c);
        p->const_val[p->nconst] = a->num;
        return p->const_reg[p->nconst++];
    }
    if (c->slot_reg[a->slot] >= 0)
        return c->slot_reg[a->slot];
    tl_flow *f = c->node->flow;
    if (!grow((void **)&f->cap_slots, &c->cap_caps, f->ncap + 1, sizeof(int), c->st))
        return -1;
    f->cap_slots[f->ncap++] = a->slot;
    return c->slot_reg[a->slot] = new_reg(c);
}

static int slot_reg(mcomp *c, int slot) { return arg_reg(c, &(tl_arg){.slot = slot}); }

static tl_code comp_block(mcomp *c, const tl_block *b);

static tl_code comp_results(mcomp *c, const tl_block *b, const int *dst)
{
    for (int i = 0; i < b->nresult; i++) {
        int r = slot_reg(c, b->result[i]);
        if (r < 0 || emit(c, (tl_mins){.code = TL_M_MOV, .dst = dst[i], .a = r}) < 0)
            return c->st->code;
    }
    return TL_OK;
}

static tl_code comp_if(mcomp *c, const tl_node *n)
{
    int out[256], cond = arg_reg(c, &n->flow->cond);
    if (cond < 0)
        return c->st->code;
    for (int i = 0; i < n->nout; i++)
        out[i] = c->slot_reg[n->out[i]] = new_reg(c);
    int jz = emit(c, (tl_mins){.code = TL_M_JZ, .a = cond});
    if (jz < 0 || comp_block(c, n->flow->then_b) || comp_results(c, n->flow->then_b, out))
        return c->st->code;
    int jmp = emit(c, (tl_mins){.code = TL_M_JMP});
    if (jmp < 0)
        return c->st->code;
    c->p->ins[jz].imm = c->p->nins;
    if (comp_block(c, n->flow->else_b) || comp_results(c, n->flow->else_b, out))
        return c->st->code;
    c->p->ins[jmp].imm = c->p->nins;
    return TL_OK;
}

static tl_code comp_iterate(mcomp *c, const tl_node *n)
{
    int state[256], tmp[256], counter = c->p->ncounters++;
    for (int i = 0; i < n->nargs; i++) {
        int init = arg_reg(c, &n->args[i]);
        state[i] = c->slot_reg[n->flow->state[i]] = c->slot_reg[n->out[i]] = new_reg(c);
        tmp[i] = new_reg(c);
        if (init < 0 || emit(c, (tl_mins){.code = TL_M_MOV, .dst = state[i], .a = init}) < 0)
            return c->st->code;
    }
    int index = n->flow->index_slot >= 0 ? (c->slot_reg[n->flow->index_slot] = new_reg(c)) : -1;
    if (emit(c, (tl_mins){.code = TL_M_LOOP_INIT, .c = counter}) < 0)
        return c->st->code;
    int top = emit(c, (tl_mins){.code = TL_M_LOOP_TEST, .c = counter, .b = n->flow->count, .dst = index});
    if (top < 0 || comp_block(c, n->flow->body) || comp_results(c, n->flow->body, tmp))
        return c->st->code;
    for (int i = 0; i < n->nargs; i++)
        if (emit(c, (tl_mins){.code = TL_M_MOV, .dst = state[i], .a = tmp[i]}) < 0)
            return c->st->code;
    if (emit(c, (tl_mins){.code = TL_M_LOOP_INC, .c = counter}) < 0 ||
        emit(c, (tl_mins){.code = TL_M_JMP, .imm = top}) < 0)
        return c->st->code;
    c->p->ins[top].imm = c->p->nins;
    return TL_OK;
}

static tl_code comp_node(mcomp *c, const tl_node *n)
{
    tl_opkind kind = tl_ops[n->op].kind;
    int r[3];
    if (n->op == TL_OP_IF)
        return comp_if(c, n);
    if (n->op == TL_OP_ITERATE)
        return comp_iterate(c, n);
    bool elementwise = kind == TL_KIND_BIN || kind == TL_KIND_CMP || kind == TL_KIND_UN ||
                       n->op == TL_OP_WHERE;
    if (!elementwise)
        return tl_fail(c->st, TL_EINPUT,
                       "%s is not allowed in a map body (a scalar program of elementwise "
                       "ops, comparisons, if and iterate)", tl_ops[n->op].name);
    for (int i = 0; i < n->nargs; i++)
        if ((r[i] = arg_reg(c, &n->args[i])) < 0)
            return c->st->code;
    int dst = c->slot_reg[n->out[0]] = new_reg(c);
    tl_mins ins = {.op = (uint8_t)n->op, .dst = dst, .a = r[0]};
    if (n->op == TL_OP_WHERE) {
        ins.code = TL_M_WHERE;
        ins.b = r[1];
        ins.c = r[2];
    } else if (n->op == TL_OP_CLAMP) {
        ins.code = TL_M_CLAMP;
        ins.lo = n->attrs->min;
        ins.hi = n->attrs->max;
        ins.has_lo = n->attrs->has_min;
        ins.has_hi = n->attrs->has_max;
    } else if (kind == TL_KIND_UN) {
        ins.code = TL_M_UN;
        ins.approx = (uint8_t)n->attrs->approximate;
    } else {
        ins.code = TL_M_BIN;
        ins.b = r[1];
    }
    return emit(c, ins) < 0 ? c->st->code : TL_OK;
}

static tl_code comp_block(mcomp *c, const tl_block *b)
{
    for (int i = 0; i < b->nnodes; i++)
        if (comp_node(c, &b->nodes[i]))
            return tl_wrap(c->st, "node \"%s\" (%s)", b->nodes[i].name,
                           tl_ops[b->nodes[i].op].name);
    return TL_OK;
}

tl_code tl_map_compile(const tl_graph *g, tl_node *n, tl_status *st)
{
    mcomp c = {g, n, tl_calloc(1, sizeof(tl_mprog), "a map program", st), NULL, 0, 0, 0, st};
    if (!c.p)
        return st->code;
    n->flow->prog = c.p;
    if (!(c.slot_reg = tl_malloc((size_t)g->nslots, sizeof(int), "a map program", st)))
        return st->code;
    for (int s = 0; s < g->nslots; s++)
        c.slot_reg[s] = -1;
    for (int i = 0; i < n->nargs; i++)
        c.slot_reg[n->flow->params[i]] = new_reg(&c);
    tl_code rc = comp_block(&c, n->flow->body);
    int res = rc ? -1 : slot_reg(&c, n->flow->body->result[0]);
    c.p->nin = n->nargs + n->flow->ncap;
    if (res >= 0 && (c.p->in_reg = tl_malloc((size_t)c.p->nin, sizeof(int), "a map program", st))) {
        /* params took the first registers; captured names got theirs as met */
        for (int i = 0; i < n->nargs; i++)
            c.p->in_reg[i] = i;
        for (int i = 0; i < n->flow->ncap; i++)
            c.p->in_reg[n->nargs + i] = c.slot_reg[n->flow->cap_slots[i]];
    }
    free(c.slot_reg);
    c.p->result = res;
    return c.p->in_reg ? TL_OK : st->code;
}

void tl_mprog_free(tl_mprog *p)
{
    if (!p)
        return;
    for (int i = 0; p->deriv && i < 2 * p->nin; i++) /* derivatives, then times a cotangent */
        tl_mprog_free(p->deriv[i]);
    free(p->deriv);
    free(p->ins);
    free(p->const_reg);
    free(p->const_val);
    free(p->in_reg);
    free(p);
}
