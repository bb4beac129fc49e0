/* The eager tape: one entry per recorded op call, in execution order.  An
 * entry owns one reference to each saved tensor (its inputs and output);
 * the tape owns its entries.  Variables are numbered as they are created;
 * gradients are tensors of the variable's own dtype and shape. */
#ifndef TL_TAPE_H
#define TL_TAPE_H

#include "op.h"

struct tl_node;

/* A tape entry that runs its own backward pass: a fast path's (a fused
 * chain, fuse.c; a scalar loop, loop.c).  backward reads the gradients of
 * its results from grads and adds to those of its inputs, in the order the
 * unfused entries would; free releases it. */
typedef struct tl_custom {
    tl_code (*backward)(struct tl_custom *c, tl_ctx *cx, tl_tensor **grads, tl_status *st);
    void (*free)(struct tl_custom *c);
} tl_custom;

#define TL_ENTRY_SMALL 2

/* 88 bytes: a long recording holds millions. */
typedef struct tl_entry {
    tl_opcode op;
    int nin;
    int out_var;
    bool owns_attrs;       /* attrs is a copy the entry owns (dropout's, with the node's place;
                            * a recorded rule's) */
    const tl_attrs *attrs; /* owned by the graph (or the entry); NULL: defaults */
    const struct tl_node *node; /* the graph node recorded, for messages */
    tl_custom *custom;          /* in place of one op: a fast path's entry; owned */
    tl_tensor *out;
    int *in_var;     /* -1: no gradient wanted for that input */
    tl_tensor **in;
    /* most ops have few inputs: their arrays live here, not on the heap */
    int small_var[TL_ENTRY_SMALL];
    tl_tensor *small_in[TL_ENTRY_SMALL];
} tl_entry;

/* The entries live in chunks of TL_TAPE_CHUNK that never move: a long
 * recording grows by one chunk at a time, with no copy of what it holds
 * (a doubling array copied and re-faulted its whole past at each step). */
#define TL_TAPE_CHUNK_BITS 10
#define TL_TAPE_CHUNK ((int64_t)1 << TL_TAPE_CHUNK_BITS)

typedef struct tl_tape {
    tl_entry **chunk;
    int64_t n, cap;     /* entries recorded; entries in the chunks made */
    int64_t nchunk_cap; /* room in chunk[] */
    int nvars;
    tl_budget *budget; /* the chunks are charged here (not owned) */
    int64_t keep_below; /* tensors under this many bytes are kept whole */
    struct tl_tape_owned *owned; /* what entries' attributes point to, freed with the tape */
    char *arena;                 /* chunks past the first few: cut from blocks of huge pages */
    int arena_left;              /* chunks still to cut from it */
    /* the one header without data that entries keep of every host scalar
     * of a dtype whose value no rule reads (tape.c: keep) */
    struct tl_tensor *scalar_stub[TL_NDTYPES];
} tl_tape;

/* Entry k (0 <= k < t->n); its address stays while the tape lives. */
static inline tl_entry *tl_tape_entry(const tl_tape *t, int64_t k)
{
    return &t->chunk[k >> TL_TAPE_CHUNK_BITS][k & (TL_TAPE_CHUNK - 1)];
}

/* For a backward loop about to read entry k: entry k - 8 asked into the
 * cache, and the tensors of entry k - 4 (whose entry is there by now).  A
 * long recording is far larger than the caches, and its entries and
 * tensors were read cold, one miss after another (most of the time of
 * the 100k-step recurrence's backward passes). */
static inline void tl_tape_prefetch(const tl_tape *t, int64_t k)
{
    if (k >= 8) {
        const char *p = (const char *)tl_tape_entry(t, k - 8);
        __builtin_prefetch(p);
        __builtin_prefetch(p + 64);
    }
    if (k >= 4) {
        const tl_entry *q = tl_tape_entry(t, k - 4);
        if (q->out)
            __builtin_prefetch(q->out);
        for (int i = 0; i < q->nin && i < TL_ENTRY_SMALL; i++)
            __builtin_prefetch(q->in[i]);
    }
}

/* A fresh variable id (inputs that are differentiated get one). */
int tl_tape_new_var(tl_tape *t);
/* Records an op call whose inputs have the given variables (-1: none);
 * returns the output's variable or -1 with st set. */
int tl_tape_record(tl_tape *t, tl_opcode op, int nin, tl_tensor *const *in, const int *in_var,
                   tl_tensor *out, const tl_attrs *attrs, const struct tl_node *node, tl_status *st);
/* The same with a copy of attrs that the entry owns (for attributes that
 * live no longer than the call: a recorded backward rule's). */
int tl_tape_record_copy(tl_tape *t, tl_opcode op, int nin, tl_tensor *const *in, const int *in_var,
                        tl_tensor *out, const tl_attrs *attrs, const struct tl_node *node, tl_status *st);
/* Hands the tape p, which its entries' attributes may point to (a fused
 * chain's map body: fuse.c), to free with free_fn when the tape is freed,
 * after its entries; on failure (st set) p is freed at once. */
tl_code tl_tape_own(tl_tape *t, void *p, void (*free_fn)(void *), tl_status *st);
/* Records a custom entry, which the tape then owns (and frees, also when
 * recording fails).  node: its first, for messages. */
tl_code tl_tape_record_custom(tl_tape *t, tl_custom *c, const struct tl_node *node, tl_status *st);
/* Runs the tape backwards.  grads[nvars] holds the seeds on entry (NULL:
 * zero) and every variable's gradient on return.  Consumes the entries.
 * progress (may be NULL) hears how far it got after every entry. */
typedef void (*tl_progress_fn)(void *ctx, const char *phase, int64_t done, int64_t total);
tl_code tl_tape_backward(tl_tape *t, tl_ctx *cx, tl_tensor **grads, tl_progress_fn progress,
                         void *progress_ctx, tl_status *st);
void tl_tape_free(tl_tape *t);
/* Before a backward pass that wants the gradients of the variables with
 * target[v] only: every entry's inputs that are neither targets nor
 * depend on one are marked as wanting no gradient (in_var -1), so their
 * gradients, and entries left wanting none, are never computed.  (tl jvp
 * pulls back to the seeds alone, tl hvp to the inputs alone.)  Leaves a
 * tape with fast-path entries as it is. */
void tl_tape_prune(tl_tape *t, const bool *target);

/* The recording pullback (exec/record.c): runs the tape backwards like
 * tl_tape_backward, but every op call of the rules (and every sum of
 * gradients) is recorded on the same tape as a new entry, so that the
 * gradients are values of the tape and the tape can be run backwards
 * again (second derivatives).  The entries stay.  grads[nvars0] holds the
 * seeds on entry and the gradients on return, gvar[nvars0] their
 * variables (-1: a constant), for the variables nvars0 the tape had when
 * it began.  Only the first nentries entries (those of the forward run)
 * are run backwards: sums of seeds recorded before the pass (an output
 * given twice) are already in grads.  The tape must hold op entries only
 * (no fast path).  seeds_only: the values of the forward are taken as
 * constants, so only what depends on the seeds is recorded (a pass that
 * will be pulled back to the seeds alone: tl jvp), and the tape keeps
 * only what the rules of that read. */
tl_code tl_tape_backward_recording(tl_tape *t, int64_t nentries, bool seeds_only, tl_ctx *cx, tl_tensor **grads,
                                   int *gvar, tl_status *st);
/* *slot += g (taking over g's reference), as a pullback adds gradients:
 * the first is taken as is; the sum is recorded on t (when t is not NULL
 * and either is a variable: *svar, gv) and *svar becomes its variable. */
tl_code tl_tape_add_recorded(tl_tape *t, tl_ctx *cx, tl_tensor **slot, int *svar, tl_tensor *g, int gv,
                             const struct tl_node *node, tl_status *st);

/* A take entry's gradient g added into *slot in place, where the rows it
 * took land, with the bits of take_grad and the add (tape.c): 1 done (a
 * NULL *slot becomes those rows in zeros), 0 not this entry (repeated or
 * many indices, a device, a shared *slot, check_finite: the rule runs),
 * -1 error.  *clean: the slot's tensor when it is known to hold no -0
 * and no signalling NaN (else a pass over it makes it so, as adding 0
 * would); set to it after. */
int tl_take_into(tl_ctx *cx, const tl_entry *e, tl_tensor **slot, const tl_tensor *g, const tl_tensor **clean,
                 tl_status *st);

/* Which tensors of an entry the backward rule reads by value, given
 * which inputs want a gradient (in_var >= 0): bit i for input i,
 * TL_GRAD_READS_OUT for the output.  The tape keeps only the shape of the
 * others (large ones; small ones it simply keeps). */
#define TL_GRAD_READS_OUT (1u << 31)
unsigned tl_grad_reads(tl_opcode op, int nin, const int *in_var, const tl_attrs *attrs);

/* The backward rule of one entry: gin[i] receives the gradient of input i
 * (a new reference) where e->in_var[i] >= 0, or NULL for an exact zero. */
tl_code tl_grad_rule(tl_ctx *cx, const tl_entry *e, tl_tensor *g, tl_tensor **gin,
                     tl_status *st);

/* The same rule with its op calls and constants handed to a recorder
 * instead of run (fuse.c writes a fused chain's backward program so):
 * op gets what tl_op would, num what tl_ctx_scalar would; each returns a
 * new reference (NULL with st set to fail the rule). */
typedef struct tl_grad_recorder {
    tl_tensor *(*op)(struct tl_grad_recorder *r, tl_opcode op, int n, tl_tensor *const *in,
                     const tl_attrs *a, tl_status *st);
    tl_tensor *(*num)(struct tl_grad_recorder *r, tl_dtype dt, double v, tl_status *st);
    /* the recorded rules are differentiated again (exec/record.c): every
     * op they call must have a rule, so compositions replace the kernels
     * that have none */
    bool twice;
} tl_grad_recorder;
tl_code tl_grad_rule_with(tl_ctx *cx, tl_grad_recorder *rec, const tl_entry *e, tl_tensor *g,
                          tl_tensor **gin, tl_status *st);

#endif
