/* hier_sched_net.c: inter-node schedules (pure builders), the level that
 * runs between nodes once each node has reduced its share in shared memory.
 *
 * Ring allreduce over N participants, the vector cut into N blocks:
 * 1. reduce-scatter, N-1 steps: at step s send block (me - s) to the next
 *    participant and fold block (me - s - 1) from the previous one into mine;
 *    afterwards block (me + 1) is complete here;
 * 2. allgather, N-1 steps: at step s send block (me + 1 - s) on and take
 *    block (me - s) from the previous one as it is.
 * Every block is reduced by exactly one chain and then copied, so all
 * participants end with the same bits. Bandwidth-optimal: each sends and
 * receives 2 (N-1)/N of the vector. */
#include "hier_part.h"
#include "hier_sched_impl.h"

static void hier_sched_net(hier_sched_out_t *out, hier_step_op_t op, int peer, unsigned tag, hier_ref_t ref,
                           size_t len, int reduce)
{
    if (!len) return;
    hier_step_t st = {.op = op, .len = len, .peer = (uint16_t)peer, .tag = (uint16_t)tag,
                      .net_reduce = (uint8_t)reduce, .self_rank = HIER_SCHED_NO_RANK};
    if (op == HIER_STEP_NET_SEND)
        st.src = ref;
    else
        st.dst = ref;
    out->steps[out->n++] = st;
}

size_t hier_sched_net_ring_allreduce(const hier_net_args_t *a, hier_step_t *steps)
{
    hier_sched_out_t out = {.steps = steps, .n = 0};
    int n = a->nparts, next = (a->me + 1) % n, prev = (a->me + n - 1) % n;
    size_t es = a->esize, align = hier_part_align(es), off, len;

    for (int s = 0; s < n - 1; s++) { /* 1 */
        int b = (a->me - s + 2 * n) % n, c = (a->me - s - 1 + 2 * n) % n;
        hier_part_range(a->count, n, b, align, &off, &len);
        hier_sched_net(&out, HIER_STEP_NET_SEND, next, a->tag_base + (unsigned)s,
                       hier_ref(HIER_BUF_RECV, 0, 0, (a->off + off) * es), len * es, 0);
        hier_part_range(a->count, n, c, align, &off, &len);
        hier_sched_net(&out, HIER_STEP_NET_RECV, prev, a->tag_base + (unsigned)s,
                       hier_ref(HIER_BUF_RECV, 0, 0, (a->off + off) * es), len, 1);
    }
    for (int s = 0; s < n - 1; s++) { /* 2 */
        int b = (a->me + 1 - s + 2 * n) % n, c = (a->me - s + 2 * n) % n;
        unsigned tag = a->tag_base + (unsigned)(n - 1 + s);
        hier_part_range(a->count, n, b, align, &off, &len);
        hier_sched_net(&out, HIER_STEP_NET_SEND, next, tag, hier_ref(HIER_BUF_RECV, 0, 0, (a->off + off) * es),
                       len * es, 0);
        hier_part_range(a->count, n, c, align, &off, &len);
        hier_sched_net(&out, HIER_STEP_NET_RECV, prev, tag, hier_ref(HIER_BUF_RECV, 0, 0, (a->off + off) * es),
                       len * es, 0);
    }
    return out.n;
}
