/* hier_sig.c: call signatures (hier_sig.h). */
#include "base/hier_sig.h"

#include <stdio.h>


hier_sig_t hier_sig_renumber(hier_sig_t s, uint64_t call)
{
    s.word = (s.word & ~(uint64_t)0xffff) | (call & 0xffff);
    return s;
}

/* One multiply per count (every reduce_scatter computes it: thousands of
 * counts at scale), position-dependent, folded to 31 bits. */
uint32_t hier_sig_digest(const size_t *counts, int n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < n; i++) h = (h ^ (uint64_t)counts[i]) * 0x9e3779b97f4a7c15ull + (uint64_t)i;
    return (uint32_t)(h ^ h >> 29 ^ h >> 58) & HIER_SIG_DIGEST_MASK;
}

int hier_sig_fold(hier_sig_t s)
{
    uint64_t x = s.count * 0x9e3779b97f4a7c15ull ^ s.word;
    return (int)((x ^ x >> 31 ^ x >> 62) & 0x3fffffff);
}

int hier_sig_valid(hier_sig_t s)
{
    return (s.word & HIER_SIG_VALID) != 0;
}

int hier_sig_ahead(hier_sig_t s, hier_sig_t t)
{
    return (int16_t)(uint16_t)(hier_sig_call(t) - hier_sig_call(s));
}

void hier_sig_describe(hier_sig_t s, char *buf, size_t len)
{
    hier_coll_t coll = (hier_coll_t)(s.word >> 16 & 0x1f);
    hier_dtype_t dt = (hier_dtype_t)(s.word >> 21 & 0x3f);
    hier_op_t op = (hier_op_t)(s.word >> 27 & 0x1f);
    unsigned digest = (unsigned)(s.word >> 32 & HIER_SIG_DIGEST_MASK), call = hier_sig_call(s);
    unsigned long long n = (unsigned long long)s.count;
    if (!hier_sig_valid(s))
        snprintf(buf, len, "no collective yet");
    else if (coll == HIER_COLL_ALLGATHER || coll == HIER_COLL_IALLGATHER || coll == HIER_COLL_ALLGATHER_INIT)
        snprintf(buf, len, "%s of %llu bytes per rank, call %u", hier_coll_name(coll), n, call);
    else if (coll == HIER_COLL_REDUCE_SCATTER || coll == HIER_COLL_IREDUCE_SCATTER ||
             coll == HIER_COLL_REDUCE_SCATTER_INIT)
        snprintf(buf, len, "%s of %llu %s in all (%s; counts digest %08x), call %u", hier_coll_name(coll), n,
                 hier_dtype_name(dt), hier_op_name(op), digest, call);
    else
        snprintf(buf, len, "%s of %llu %s (%s), call %u", hier_coll_name(coll), n, hier_dtype_name(dt),
                 hier_op_name(op), call);
}

void hier_sig_explain(int rank_a, hier_sig_t a, int rank_b, hier_sig_t b, char *buf, size_t len)
{
    char da[128], db[128];
    hier_sig_describe(a, da, sizeof(da));
    hier_sig_describe(b, db, sizeof(db));
    snprintf(buf, len, "rank %d called %s; rank %d %s", rank_a, da, rank_b, db);
}
