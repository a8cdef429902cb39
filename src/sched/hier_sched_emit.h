/* hier_sched_emit.h: how builders append steps (internal to sched/). */
#ifndef HIER_SCHED_EMIT_H
#define HIER_SCHED_EMIT_H

#include "sched/hier_sched.h"

typedef struct {
    hier_step_t *steps;
    size_t n;
} hier_sched_out_t;

static inline hier_ref_t hier_ref(hier_buf_kind_t kind, int rank, int buf, size_t off)
{
    return (hier_ref_t){.kind = (uint8_t)kind, .buf = (uint8_t)buf, .rank = (uint32_t)rank, .off = off};
}

static inline void hier_sched_copy(hier_sched_out_t *out, hier_ref_t dst, hier_ref_t src, size_t bytes)
{
    if (!bytes) return;
    out->steps[out->n++] = (hier_step_t){.op = HIER_STEP_COPY, .dst = dst, .src = src, .len = bytes};
}

/* The step emitted, or NULL when there is nothing to reduce. */
static inline hier_step_t *hier_sched_reduce(hier_sched_out_t *out, hier_ref_t dst, hier_ref_t src, size_t count,
                                             const uint32_t *ranks, int nranks)
{
    if (!count) return NULL;
    out->steps[out->n] = (hier_step_t){.op = HIER_STEP_REDUCE, .dst = dst, .src = src, .len = count,
                                       .ranks = ranks, .nranks = (uint32_t)nranks,
                                       .self_rank = HIER_SCHED_NO_RANK};
    return &out->steps[out->n++];
}

static inline void hier_sched_barrier(hier_sched_out_t *out)
{
    out->steps[out->n++] = (hier_step_t){.op = HIER_STEP_BARRIER};
}

/* A network step of len bytes (or, reduced, elements); none when empty. */
static inline void hier_sched_net(hier_sched_out_t *out, hier_step_op_t op, int peer, unsigned tag, hier_ref_t ref,
                                  size_t len, int reduce)
{
    if (!len) return;
    hier_step_t st = {.op = op, .len = len, .peer = (uint32_t)peer, .tag = (uint32_t)tag,
                      .net_reduce = (uint8_t)reduce, .self_rank = HIER_SCHED_NO_RANK};
    if (op == HIER_STEP_NET_SEND)
        st.src = ref;
    else
        st.dst = ref;
    out->steps[out->n++] = st;
}

/* Where this rank's contribution comes from: its send buffer, or (in place)
 * the receive buffer at `in_place_off`. */
static inline hier_ref_t hier_sched_input(const hier_sched_args_t *a, size_t off, size_t in_place_off)
{
    return a->in_place ? hier_ref(HIER_BUF_RECV, 0, 0, in_place_off) : hier_ref(HIER_BUF_SEND, 0, 0, off);
}

/* A reduce reads rank `me`'s operand from its own input (`step` may be NULL). */
static inline void hier_sched_reduce_self(hier_step_t *step, int me, hier_ref_t self_src)
{
    if (!step) return;
    step->self_rank = (uint32_t)me;
    step->self_src = self_src;
}

/* Copy [first, first + len) of my input into my slot, except the part
 * [skip, skip + skip_len) that only I read (straight from my input). */
static inline void hier_sched_copy_in_except(const hier_sched_args_t *a, size_t first, size_t len, size_t skip,
                                             size_t skip_len, int p, hier_sched_out_t *out)
{
    size_t es = a->esize;
    if (!skip_len) skip = first + len;
    size_t head = skip > first ? skip - first : 0, tail_from = skip + skip_len;
    hier_sched_copy(out, hier_ref(HIER_BUF_SLOT, a->me, p, 0), hier_sched_input(a, first * es, first * es),
                    head * es);
    if (tail_from < first + len)
        hier_sched_copy(out, hier_ref(HIER_BUF_SLOT, a->me, p, (tail_from - first) * es),
                        hier_sched_input(a, tail_from * es, tail_from * es), (first + len - tail_from) * es);
}

#endif
