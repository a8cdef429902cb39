/* hier_comm_piggyback.c: a small first call served by the set-up's own
 * exchange (every record carries its rank's contribution), only where the
 * result is bit for bit what the call's algorithm gives
 * (docs/design.md, "A communicator's life"):
 * 1. every record carries the same call, else nothing is piggybacked;
 * 2. allgather: always;
 * 3. reductions whose result does not depend on the operands' order;
 * 4. floating SUM and PROD, complex SUM, where the order is the
 *    algorithm's (one node but the NUMA tree, two nodes, recursive
 *    doubling between more). */
#include <stdalign.h>
#include <stddef.h>
#include <string.h>

#include "base/hier_params.h"
#include "base/hier_sig.h"
#include "comm/hier_comm_setup.h"
#include "comm/hier_comm_choice.h"
#include "exec/hier_reduce.h"
#include "sched/hier_sched_pattern.h"

static int hier_piggyback_reducible(hier_dtype_t dt, hier_op_t op)
{
    hier_reduce_kernel_t k;
    return op != HIER_OP_USER && hier_reduce_kernel_get(dt, op, &k) == HIER_OK;
}

/* An algorithm the user forced (coll_hier_*_algorithm) serves every call. */
int hier_piggyback_offer(const hier_comm_t *c, const hier_call_t *call, hier_piggyback_t *pb)
{
    int gather = call->coll == HIER_COLL_ALLGATHER;
    if (hier_select_algorithm(call->coll) != HIER_ALGO_AUTO || hier_params.net_algorithm != HIER_ALGO_AUTO) return 0;
    if (!gather && !hier_piggyback_reducible(call->dt, call->op)) return 0;
    if (!call->count || call->count > HIER_PIGGYBACK_MAX || !call->rbuf) return 0; /* (an element is a byte or more) */
    size_t len = call->count * call->esize;
    if (len > HIER_PIGGYBACK_MAX) return 0;
    const void *in = call->sbuf ? call->sbuf : gather ? (const char *)call->rbuf + (size_t)c->rank * len : call->rbuf;
    *pb = (hier_piggyback_t){.coll = call->coll, .dt = call->dt, .op = call->op, .count = call->count, .in = in,
                          .out = call->rbuf, .len = len, .rcounts = call->rcounts,
                          .digest = call->rcounts ? hier_sig_digest(call->rcounts, c->size) : 0};
    return 1;
}

void hier_piggyback_pack(const hier_piggyback_t *pb, hier_piggyback_rec_t *rec)
{
    *rec = (hier_piggyback_rec_t){0};
    if (!pb || !pb->len) return;
    *rec = (hier_piggyback_rec_t){.coll = (uint8_t)(pb->coll + 1), .dt = (uint8_t)pb->dt, .op = (uint8_t)pb->op,
                             .digest = pb->digest, .count = pb->count};
    memcpy(rec->data, pb->in, pb->len);
}

static const hier_piggyback_rec_t *hier_piggyback_rec(const void *recs, size_t stride, int r)
{
    return (const hier_piggyback_rec_t *)((const char *)recs + (size_t)r * stride);
}

/* 3: the result does not depend on the order of the operands. */
static int hier_piggyback_exact(hier_dtype_t dt, hier_op_t op)
{
    switch (dt) {
    case HIER_DT_FLOAT: case HIER_DT_DOUBLE: case HIER_DT_LONG_DOUBLE:
        return op == HIER_OP_MIN || op == HIER_OP_MAX;
    case HIER_DT_FLOAT_COMPLEX: case HIER_DT_DOUBLE_COMPLEX: case HIER_DT_LONG_DOUBLE_COMPLEX:
    case HIER_DT_FLOAT_INT: case HIER_DT_DOUBLE_INT: case HIER_DT_LONG_DOUBLE_INT:
    case HIER_DT_2FLOAT: case HIER_DT_2DOUBLE:
        return 0;
    default:
        return 1; /* integers, _Bool, integer-valued pairs */
    }
}

/* 4: the operands' order is the algorithm's wherever it could matter. Every
 * algorithm folds a node's ranks in local order (hier_sched_intra.c,
 * hier_sched_hier.c step 3, the low-latency path), but the NUMA tree, which
 * one node of several domains may take; two nodes' partials combine in
 * either order (the ops are commutative, bit for bit); more nodes only by
 * recursive doubling (hier_sched_net.c), whose tree the fold here follows,
 * where select/ picks it for this allreduce. */
static int hier_piggyback_same_order(const hier_comm_t *c, const hier_piggyback_rec_t *call)
{
    hier_dtype_t dt = (hier_dtype_t)call->dt;
    hier_op_t op = (hier_op_t)call->op;
    int complex = dt == HIER_DT_FLOAT_COMPLEX || dt == HIER_DT_DOUBLE_COMPLEX || dt == HIER_DT_LONG_DOUBLE_COMPLEX;
    if (op != HIER_OP_SUM && (op != HIER_OP_PROD || complex)) return 0;
    if (c->layout.nnodes == 2) return 1;
    if (c->layout.nnodes == 1) return c->layout.nranks <= 2 || (c->node && c->node->groups.ngroups <= 1);
    if (call->coll - 1 != HIER_COLL_ALLREDUCE || !c->net) return 0;
    hier_select_shape_t shape = hier_comm_shape(c);
    hier_select_t choice;
    hier_select(&shape, HIER_COLL_ALLREDUCE, call->count * hier_dtype_size(dt), &choice);
    return choice.path == HIER_PATH_NET_RD;
}

int hier_piggyback_agreed(const hier_comm_t *c, const hier_piggyback_t *pb, const void *recs, size_t stride)
{
    const hier_piggyback_rec_t *first = hier_piggyback_rec(recs, stride, 0);
    if (!pb || !first->coll) return 0;
    for (int r = 1; r < c->size; r++) { /* 1 */
        const hier_piggyback_rec_t *x = hier_piggyback_rec(recs, stride, r);
        if (x->coll != first->coll || x->dt != first->dt || x->op != first->op || x->count != first->count ||
            x->digest != first->digest)
            return 0;
    }
    if (first->coll - 1 == HIER_COLL_ALLGATHER) return 1; /* 2 */
    return hier_piggyback_exact((hier_dtype_t)first->dt, (hier_op_t)first->op) || /* 3 */
           hier_piggyback_same_order(c, first);                                   /* 4 */
}

/* Node n's partial: its ranks in local order, the earlier operand first. */
static void hier_piggyback_node(const hier_comm_t *c, const hier_piggyback_t *pb, hier_reduce_kernel_t k,
                                const void *recs, size_t stride, int n, unsigned char *out)
{
    alignas(max_align_t) unsigned char in[HIER_PIGGYBACK_MAX];
    uint32_t first = c->layout.node_first[n], end = c->layout.node_first[n + 1];
    memcpy(out, hier_piggyback_rec(recs, stride, (int)c->layout.node_ranks[first])->data, pb->len);
    for (uint32_t i = first + 1; i < end; i++) {
        memcpy(in, hier_piggyback_rec(recs, stride, (int)c->layout.node_ranks[i])->data, pb->len);
        k.acc(out, in, pb->count);
    }
}

/* The whole vector's result: each node's partial, then the nodes' as
 * recursive doubling combines them (hier_sched_pattern.h): the extras
 * folded into their neighbours, then a balanced tree over the virtual
 * ranks, kept as a stack of subtrees (a binary counter). With one or two
 * nodes that is node 0's partial, then node 1's. */
static void hier_piggyback_fold(const hier_comm_t *c, const hier_piggyback_t *pb, const void *recs, size_t stride,
                                void *out)
{
    enum { DEPTH = 32 };
    hier_reduce_kernel_t k;
    alignas(max_align_t) unsigned char part[HIER_PIGGYBACK_MAX], stack[DEPTH][HIER_PIGGYBACK_MAX];
    int height[DEPTH], top = 0;
    hier_rd_t rd = hier_rd(c->layout.nnodes);
    hier_reduce_kernel_get(pb->dt, pb->op, &k); /* (offered: it has one) */
    for (int v = 0; v < rd.p2; v++) {
        int lo = hier_rd_real_lo(&rd, v), hi = hier_rd_real_hi(&rd, v);
        hier_piggyback_node(c, pb, k, recs, stride, lo, stack[top]);
        if (hi != lo) {
            hier_piggyback_node(c, pb, k, recs, stride, hi, part);
            k.acc(stack[top], part, pb->count);
        }
        height[top++] = 0;
        while (top > 1 && height[top - 1] == height[top - 2]) { /* (two subtrees of one height: one) */
            k.acc(stack[top - 2], stack[top - 1], pb->count);
            height[top - 2]++;
            top--;
        }
    }
    memcpy(out, stack[0], pb->len);
}

void hier_piggyback_serve(const hier_comm_t *c, hier_piggyback_t *pb, const void *recs, size_t stride)
{
    alignas(max_align_t) unsigned char sum[HIER_PIGGYBACK_MAX];
    if (pb->coll == HIER_COLL_ALLGATHER) {
        for (int r = 0; r < c->size; r++)
            memcpy((char *)pb->out + (size_t)r * pb->count, hier_piggyback_rec(recs, stride, r)->data, pb->len);
    } else if (pb->coll == HIER_COLL_ALLREDUCE) {
        hier_piggyback_fold(c, pb, recs, stride, sum);
        memcpy(pb->out, sum, pb->len);
    } else { /* reduce_scatter: my block of the whole */
        size_t es = hier_dtype_size(pb->dt), displ = 0;
        hier_piggyback_fold(c, pb, recs, stride, sum);
        for (int r = 0; r < c->rank; r++) displ += pb->rcounts[r];
        memcpy(pb->out, sum + displ * es, pb->rcounts[c->rank] * es);
    }
    pb->done = 1;
}
