#include "hier_exec.h"

#include <string.h>

/* Reductions run block by block so the partial result stays in L1 while
 * every operand streams past it once. */
#define HIER_EXEC_BLOCK_BYTES 4096

void *hier_exec_ref(const hier_exec_bufs_t *bufs, hier_ref_t ref)
{
    switch ((hier_buf_kind_t)ref.kind) {
    case HIER_BUF_SEND: return (void *)(bufs->sbuf + ref.off);
    case HIER_BUF_RECV: return bufs->rbuf + ref.off;
    case HIER_BUF_SLOT: return bufs->slots[ref.rank] + ref.parity * bufs->parity_stride + ref.off;
    }
    return NULL;
}

static int hier_exec_overlaps(const uint8_t *a, const uint8_t *b, size_t len)
{
    return a < b + len && b < a + len;
}

/* dst[0..count) = fold over ops[0..n) of the operands, in order; the same
 * result also goes to dst2 unless it is NULL. */
static void hier_exec_fold(const hier_exec_bufs_t *bufs, uint8_t *dst, uint8_t *dst2, const uint8_t *const *ops,
                           int n, size_t count)
{
    size_t es = bufs->esize, bytes = count * es;
    int alias = 0;

    if (n == 1) {
        if (dst != ops[0]) memcpy(dst, ops[0], bytes);
        if (dst2) memcpy(dst2, ops[0], bytes);
        return;
    }
    for (int i = 0; i < n; i++) alias |= hier_exec_overlaps(dst, ops[i], bytes);

    size_t blk = HIER_EXEC_BLOCK_BYTES / es ? HIER_EXEC_BLOCK_BYTES / es : 1;
    _Alignas(64) uint8_t tmp[HIER_EXEC_BLOCK_BYTES > 64 ? HIER_EXEC_BLOCK_BYTES : 64];
    for (size_t done = 0; done < count; done += blk) {
        size_t c = count - done < blk ? count - done : blk;
        size_t o = done * es;
        uint8_t *out = alias ? tmp : dst + o;
        bufs->kernel.comb(out, ops[0] + o, ops[1] + o, c);
        for (int i = 2; i < n; i++) bufs->kernel.acc(out, ops[i] + o, c);
        if (alias) memcpy(dst + o, tmp, c * es);
        if (dst2) memcpy(dst2 + o, out, c * es);
    }
}

void hier_exec_step(const hier_exec_bufs_t *bufs, const hier_step_t *step)
{
    switch (step->op) {
    case HIER_STEP_COPY:
        memcpy(hier_exec_ref(bufs, step->dst), hier_exec_ref(bufs, step->src), step->len);
        break;
    case HIER_STEP_REDUCE: {
        const uint8_t *ops[HIER_SCHED_MAX_RANKS];
        for (int i = 0; i < step->nranks; i++) {
            hier_ref_t r = step->src;
            r.rank = step->ranks[i];
            ops[i] = hier_exec_ref(bufs, r.rank == step->self_rank ? step->self_src : r);
        }
        hier_exec_fold(bufs, hier_exec_ref(bufs, step->dst), step->has_dst2 ? hier_exec_ref(bufs, step->dst2) : NULL,
                       ops, step->nranks, step->len);
        break;
    }
    case HIER_STEP_BARRIER: break;
    }
}
