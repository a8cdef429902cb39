/* hier_sched_build.c: dispatch to the builders of each family. */
#include "sched/hier_sched_build.h"

#include "base/hier_part.h"
#include "sched/hier_sched_cma.h"
#include "sched/hier_sched_hier.h"
#include "sched/hier_sched_intra.h"

int hier_sched_is_cma(hier_sched_kind_t kind)
{
    return kind == HIER_SCHED_CMA_ALLGATHER;
}

int hier_sched_is_hier(hier_sched_kind_t kind)
{
    return kind >= HIER_SCHED_HIER_ALLREDUCE && kind <= HIER_SCHED_HIER_REDUCE_SCATTER;
}

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

size_t hier_sched_input_offset(const hier_sched_args_t *a, int rank)
{
    return hier_sched_cma_input_offset(a, rank);
}

size_t hier_sched_build(const hier_sched_args_t *a, size_t k, int parity, hier_step_t *steps)
{
    hier_sched_out_t out = {.steps = steps, .n = 0};
    size_t units = hier_sched_chunk_units(a), total = hier_sched_total(a);
    size_t first = k * units, len = total - first < units ? total - first : units;

    if (hier_sched_hier_sliced(a)) {
        len = hier_sched_hier_slice(a, k, hier_sched_nchunks(a));
        first = 0;
    }
    if (hier_sched_is_cma(a->kind))
        hier_sched_cma_build(a, &out);
    else if (hier_sched_is_hier(a->kind))
        hier_sched_hier_build(a, first, len, parity, &out);
    else
        hier_sched_intra_build(a, k, first, len, parity, &out);
    return out.n;
}
