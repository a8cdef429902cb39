/* hier_comm_xchg.c: the set-up's exchanges (hier_comm_xchg.h). Called by a blocking call, they are the glue's
 * blocking collectives; inside a set-up run as a fiber (a communicator's first call was nonblocking:
 * hier_comm_setup.c, hier_comm_req.c) each is rounds of point-to-point posted through the glue and tested, the
 * fiber yielding between looks (docs/design.md, "Nonblocking and persistent calls"). */
#include "comm/hier_comm_xchg.h"

#include <stdlib.h>
#include <string.h>

#include "base/hier_fiber.h"
#include "base/hier_log.h"

static int hier_xchg_fibered(const hier_comm_t *c)
{
    return hier_fiber_inside() && c->ops.sendrecv && c->ops.sendrecv_test;
}

/* One round, the fiber yielding until it is over. */
static int hier_xchg_round(hier_comm_t *c, int to, const void *sbuf, size_t slen, int from, void *rbuf, size_t rlen)
{
    void *pending;
    if (c->ops.sendrecv(to, sbuf, slen, from, rbuf, rlen, c->ops.arg, &pending) != 0) return -1;
    for (;;) {
        int t = c->ops.sendrecv_test(pending, c->ops.arg);
        if (t) return t > 0 ? 0 : -1;
        hier_fiber_yield();
    }
}

/* Fibered, Bruck's: in round k = 1, 2, 4, ... send the blocks gathered so far (the first min(k, n - k)) to
 * rank - k and receive as many from rank + k after them; at the end block i is rank (me + i)'s. */
int hier_xchg_allgather(hier_comm_t *c, const void *sbuf, void *rbuf, size_t len)
{
    if (!hier_xchg_fibered(c)) return c->ops.allgather(sbuf, rbuf, len, c->ops.arg);
    int n = c->size, me = c->rank, rc = 0;
    char *tmp = malloc((size_t)n * len + 1);
    if (!tmp) return -1;
    hier_stats_count_exchange();
    memcpy(tmp, sbuf, len);
    for (int k = 1; k < n && rc == 0; k <<= 1) {
        int cnt = k < n - k ? k : n - k;
        rc = hier_xchg_round(c, (me - k + n) % n, tmp, (size_t)cnt * len, (me + k) % n, tmp + (size_t)k * len,
                             (size_t)cnt * len);
    }
    for (int i = 0; i < n && rc == 0; i++) memcpy((char *)rbuf + (size_t)((me + i) % n) * len, tmp + (size_t)i * len, len);
    free(tmp);
    return rc;
}

/* Fibered, dissemination: in round k send the values to rank + k and take the minimum with those from
 * rank - k; after ceil(log2 n) rounds every rank has seen every rank's (seeing one twice does no harm). */
int hier_xchg_agree(hier_comm_t *c, int *values, int n)
{
    if (!hier_xchg_fibered(c)) return c->ops.agree(values, n, c->ops.arg);
    int size = c->size, me = c->rank, rc = 0;
    int *got = malloc((size_t)n * sizeof(int) + 1);
    if (!got) return -1;
    hier_stats_count_exchange();
    for (int k = 1; k < size && rc == 0; k <<= 1) {
        rc = hier_xchg_round(c, (me + k) % size, values, (size_t)n * sizeof(int), (me - k + size) % size, got,
                             (size_t)n * sizeof(int));
        for (int i = 0; i < n && rc == 0; i++) values[i] = got[i] < values[i] ? got[i] : values[i];
    }
    free(got);
    return rc;
}
