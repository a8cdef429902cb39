/* hier_exec_pair.c: two nodes of one rank each; see hier_exec_pair.h. */
#include "exec/hier_exec_pair.h"

#include <string.h>

hier_status_t hier_exec_pair_allreduce(hier_net_exec_t *x, int me, const void *sbuf, void *rbuf, size_t count,
                                       size_t esize, hier_reduce_kernel_t kernel)
{
    hier_net_swap_t sw;
    size_t bytes = count * esize;
    hier_status_t st = hier_net_exec_swap(x, (uint32_t)(1 - me), HIER_EXEC_PAIR_TAG, sbuf ? sbuf : rbuf, bytes, bytes,
                                          &sw);
    if (st != HIER_OK) return st;
    if (sbuf && bytes) memcpy(rbuf, sbuf, bytes);
    if (count) kernel.acc(rbuf, sw.msg.data, count); /* mine op theirs */
    return hier_net_exec_swap_done(x, &sw);
}

hier_status_t hier_exec_pair_allgather(hier_net_exec_t *x, int me, const void *sbuf, void *rbuf, size_t block)
{
    hier_net_swap_t sw;
    uint8_t *out = rbuf;
    const uint8_t *mine = sbuf ? sbuf : out + (size_t)me * block;
    hier_status_t st = hier_net_exec_swap(x, (uint32_t)(1 - me), HIER_EXEC_PAIR_TAG, mine, block, block, &sw);
    if (st != HIER_OK) return st;
    if (block) memcpy(out + (size_t)(1 - me) * block, sw.msg.data, block);
    if (sbuf && block) memcpy(out + (size_t)me * block, sbuf, block);
    return hier_net_exec_swap_done(x, &sw);
}

hier_status_t hier_exec_pair_reduce_scatter(hier_net_exec_t *x, int me, const void *sbuf, void *rbuf,
                                            const size_t *rcounts, const size_t *rdispls, size_t esize,
                                            hier_reduce_kernel_t kernel)
{
    hier_net_swap_t sw;
    int peer = 1 - me;
    size_t n = rcounts[me];
    const uint8_t *in = sbuf ? sbuf : rbuf, *mine = in + rdispls[me] * esize;
    hier_status_t st = hier_net_exec_swap(x, (uint32_t)peer, HIER_EXEC_PAIR_TAG, in + rdispls[peer] * esize,
                                          rcounts[peer] * esize, n * esize, &sw);
    if (st != HIER_OK) return st;
    if (n && mine != (const uint8_t *)rbuf) /* (in place, the peer's block went out copied: it may go) */
        memmove(rbuf, mine, n * esize);
    if (n) kernel.acc(rbuf, sw.msg.data, n); /* mine op theirs */
    return hier_net_exec_swap_done(x, &sw);
}
