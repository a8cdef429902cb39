/* hier_sig.h: a collective call's signature, the few bytes every rank puts
 * where its peers already look (the low-latency line, the control line,
 * the network message header), so a call that differs between ranks is an
 * error on every rank instead of a hang or a silently wrong result.
 *
 * 16 bytes: the count, then one word of collective, element type,
 * operation, a digest of the per-rank counts (reduce_scatter) and the
 * communicator's call number modulo 2^16. A zeroed signature is "no call":
 * the valid bit is set in every real one. */
#ifndef HIER_SIG_H
#define HIER_SIG_H

#include <stddef.h>
#include <stdint.h>

#include "base/hier_dtype.h"
#include "base/hier_coll.h"

#define HIER_SIG_VALID ((uint64_t)1 << 63)
#define HIER_SIG_DIGEST_MASK 0x7fffffffu

typedef struct {
    uint64_t count; /* allreduce: elements; allgather: bytes per rank; reduce_scatter: elements in all */
    uint64_t word;  /* valid 63 | digest 62..32 | op 31..27 | dtype 26..21 | coll 20..16 | call 15..0 */
} hier_sig_t;

/* coll, dt and op as the call gave them (dt, op ignored for allgather);
 * digest: hier_sig_digest of reduce_scatter's counts, else 0. */
static inline hier_sig_t hier_sig_make(hier_coll_t coll, uint64_t count, hier_dtype_t dt, hier_op_t op,
                                       uint32_t digest, uint64_t call)
{
    if (coll == HIER_COLL_ALLGATHER || coll == HIER_COLL_IALLGATHER || coll == HIER_COLL_ALLGATHER_INIT) dt = 0, op = 0;
    if (coll == HIER_COLL_REDUCE_SCATTER_BLOCK) coll = HIER_COLL_REDUCE_SCATTER; /* (one core entry) */
    if (coll == HIER_COLL_IREDUCE_SCATTER_BLOCK) coll = HIER_COLL_IREDUCE_SCATTER;
    if (coll == HIER_COLL_REDUCE_SCATTER_BLOCK_INIT) coll = HIER_COLL_REDUCE_SCATTER_INIT;
    uint64_t w = HIER_SIG_VALID | (uint64_t)(digest & HIER_SIG_DIGEST_MASK) << 32 | (uint64_t)(op & 0x1f) << 27 |
                 (uint64_t)(dt & 0x3f) << 21 | (uint64_t)(coll & 0x1f) << 16 | (call & 0xffff);
    return (hier_sig_t){.count = count, .word = w};
}
/* s with another call number (a call that ran others inside it signs again). */
hier_sig_t hier_sig_renumber(hier_sig_t s, uint64_t call);
/* A digest of every rank's count (31 bits). */
uint32_t hier_sig_digest(const size_t *counts, int n);
/* The whole signature in 30 bits, for an agreement of ints (non-negative). */
int hier_sig_fold(hier_sig_t s);
int hier_sig_valid(hier_sig_t s);
static inline uint16_t hier_sig_call(hier_sig_t s)
{
    return (uint16_t)(s.word & 0xffff);
}
static inline int hier_sig_same(hier_sig_t a, hier_sig_t b)
{
    return a.count == b.count && a.word == b.word;
}
/* Calls between s and t: t's number minus s's, modulo 2^16, signed. */
int hier_sig_ahead(hier_sig_t s, hier_sig_t t);
/* "allreduce of 600 int32 (sum), call 17" */
void hier_sig_describe(hier_sig_t s, char *buf, size_t len);
/* One line naming what differs: "rank 3 called allreduce of 600 int32
 * (sum), call 17; rank 0 allreduce of 300 int32 (sum), call 17". */
void hier_sig_explain(int rank_a, hier_sig_t a, int rank_b, hier_sig_t b, char *buf, size_t len);

#endif
