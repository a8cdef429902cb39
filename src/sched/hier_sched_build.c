/* hier_sched_build.c: dispatch to the builders of each family. */
#include "sched/hier_sched_build.h"

#include "base/hier_part.h"
#include "sched/hier_sched_cma.h"
#include "sched/hier_sched_hier.h"
#include "sched/hier_sched_intra.h"

/* Units the chunks cut: bytes of a block (allgathers), elements otherwise. */
static size_t hier_sched_total(const hier_sched_args_t *a)
{
    int bytes = a->kind == HIER_SCHED_ALLGATHER || a->kind == HIER_SCHED_HIER_ALLGATHER;
    return bytes ? a->count * a->esize : a->count;
}

size_t hier_sched_chunk_units(const hier_sched_args_t *a)
{
    return hier_sched_is_hier(a->kind) ? hier_sched_hier_units(a) : hier_sched_intra_units(a);
}

size_t hier_sched_nchunks(const hier_sched_args_t *a)
{
    size_t total = hier_sched_total(a);
    if (hier_sched_is_cma(a->kind)) return total ? 1 : 0; /* no slots: one step list per call */
    if (hier_sched_hier_sliced(a)) return hier_sched_hier_sliced_nchunks(a);
    if (a->kind == HIER_SCHED_REDUCE_SCATTER) { /* the largest block sets the pace */
        total = 0;
        for (int r = 0; r < a->nranks; r++) total = a->rcounts[r] > total ? a->rcounts[r] : total;
    }
    return hier_part_nchunks(total, hier_sched_chunk_units(a));
}

size_t hier_sched_max_steps(const hier_sched_args_t *a)
{
    return hier_sched_is_hier(a->kind) ? hier_sched_hier_max_steps(a) : hier_sched_intra_max_steps(a);
}

size_t hier_sched_max_steps_within(const hier_sched_args_t *layout, size_t cap)
{
    static const hier_sched_kind_t kinds[] = {HIER_SCHED_HIER_ALLREDUCE, HIER_SCHED_HIER_ALLGATHER,
                                              HIER_SCHED_HIER_REDUCE_SCATTER};
    if (layout->nnodes <= 1) {
        size_t n = hier_sched_intra_max_steps(layout); /* (every one-node kind alike) */
        return n <= cap ? n : 0;
    }
    size_t most = 0;
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        hier_sched_args_t a = *layout;
        a.kind = kinds[i];
        size_t n = hier_sched_hier_max_steps_any(&a);
        if (n <= cap && n > most) most = n;
    }
    return most;
}

size_t hier_sched_input_offset(const hier_sched_args_t *a, int rank)
{
    return hier_sched_cma_input_offset(a, rank);
}

/* Chunk k of an inter-node schedule: the chunks cut the total evenly (64-byte
 * multiples where that still fits a slot), since chunk k's network run
 * overlaps chunk k + 1's copy in: a short last chunk (1 MiB allgathered on 4
 * ranks: 209 KiB then 47 KiB a block) leaves little to overlap. Intra-node
 * ones take full chunks, the last one what is left. */
static void hier_sched_chunk_range(const hier_sched_args_t *a, size_t k, size_t *first_p, size_t *len_p)
{
    size_t units = hier_sched_chunk_units(a), total = hier_sched_total(a);
    size_t n = hier_part_nchunks(total, units);
    if (!hier_sched_is_hier(a->kind) || n < 2) {
        *first_p = k * units;
        *len_p = total - *first_p < units ? total - *first_p : units;
        return;
    }
    size_t align = hier_part_align(a->kind == HIER_SCHED_HIER_ALLGATHER ? 1 : a->esize);
    size_t grains = (total + align - 1) / align;
    if ((grains + n - 1) / n * align > units) align = 1;
    hier_part_range(total, (int)n, (int)k, align, first_p, len_p);
}

size_t hier_sched_build(const hier_sched_args_t *a, size_t k, int buf, hier_step_t *steps)
{
    hier_sched_out_t out = {.steps = steps, .n = 0};
    size_t first = 0, len;

    if (hier_sched_hier_sliced(a))
        len = hier_sched_hier_slice(a, k, hier_sched_nchunks(a));
    else
        hier_sched_chunk_range(a, k, &first, &len);
    if (hier_sched_is_cma(a->kind))
        hier_sched_cma_build(a, &out);
    else if (hier_sched_is_hier(a->kind))
        hier_sched_hier_build(a, first, len, buf, &out);
    else
        hier_sched_intra_build(a, k, first, len, buf, &out);
    return out.n;
}
