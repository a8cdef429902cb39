/* hier_sched_direct.c: the peer-direct allgather's ring.
 *
 * Every rank registers its receive buffer; the blocks travel a ring over
 * every rank of the communicator, each written by RDMA from one buffer
 * straight into the next. The caller orders the ring node by node
 * (hier_comm_pd.c), so only one edge per node crosses the network. A write
 * carries its step as its tag: writes may land in any order (EFA), and the
 * target counts them by tag. */
#include "sched/hier_sched_direct.h"

#include "sched/hier_sched_emit.h"

size_t hier_sched_direct_max_steps(int total)
{
    return total < 2 ? 0 : 2 * (size_t)total + 2;
}

static void hier_direct_step(hier_sched_out_t *out, hier_step_op_t op, int peer, unsigned tag, hier_ref_t src,
                             hier_ref_t dst, size_t len)
{
    out->steps[out->n++] = (hier_step_t){.op = op, .peer = (uint32_t)peer, .tag = (uint32_t)tag, .src = src,
                                         .dst = dst, .len = len, .self_rank = HIER_SCHED_NO_RANK};
}

/* Every rank, at ring position pos:
 * 1. tell the left neighbour where to write (my receive buffer's key): no
 *    write of this call comes before that;
 * 2. my own block into place (the caller's: hier_sched_direct.h);
 * 3. learn where the right neighbour wants its blocks;
 * 4. step s = 0 .. total - 2: write the block of position pos - s to the
 *    right, from my input at s = 0, else the block the left neighbour
 *    wrote at step s - 1 (wait for it first);
 * 5. wait for the left neighbour's last block (the others were waited for
 *    in 4) and tell it so: its buffers are its own again; wait until the
 *    right neighbour says the same of mine. */
size_t hier_sched_direct_allgather(const hier_direct_args_t *a, hier_step_t *steps)
{
    hier_sched_out_t out = {.steps = steps};
    int total = a->total, pos = a->pos;
    hier_ref_t none = {0};
    if (total < 2) return 0;
    hier_direct_step(&out, HIER_STEP_NET_NOTE_SEND, HIER_DIRECT_LEFT, HIER_NOTE_KEY, none,        /* 1 */
                     hier_ref(HIER_BUF_RECV, 0, 0, 0), 0);
    hier_direct_step(&out, HIER_STEP_NET_NOTE_RECV, HIER_DIRECT_RIGHT, HIER_NOTE_KEY, none, none, 0); /* 3 */
    for (int s = 0; s < total - 1; s++) {                                                          /* 4 */
        size_t at = (size_t)a->ring[(pos - s + total) % total] * a->block;
        hier_ref_t src = s == 0 && !a->in_place ? hier_ref(HIER_BUF_SEND, 0, 0, 0) : hier_ref(HIER_BUF_RECV, 0, 0, at);
        if (s > 0)
            hier_direct_step(&out, HIER_STEP_NET_WRITES_WAIT, HIER_DIRECT_LEFT, (unsigned)s - 1, none, none,
                             a->block);
        hier_direct_step(&out, HIER_STEP_NET_WRITE, HIER_DIRECT_RIGHT, (unsigned)s, src,
                         hier_ref(HIER_BUF_RECV, 0, 0, at), a->block);
    }
    hier_direct_step(&out, HIER_STEP_NET_WRITES_WAIT, HIER_DIRECT_LEFT, (unsigned)total - 2, none, none, /* 5 */
                     a->block);
    hier_direct_step(&out, HIER_STEP_NET_NOTE_SEND, HIER_DIRECT_LEFT, HIER_NOTE_DONE, none, none, 0);
    hier_direct_step(&out, HIER_STEP_NET_NOTE_RECV, HIER_DIRECT_RIGHT, HIER_NOTE_DONE, none, none, 0);
    return out.n;
}
