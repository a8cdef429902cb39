/* hier_select_chunk.c: a call's chunk and depth; see hier_select_chunk.h. */
#include "select/hier_select_chunk.h"

#include "base/hier_params.h"
#include "exec/hier_run.h"
#include "net/hier_fabric.h"
#include "sched/hier_sched_build.h"

#define HIER_SELECT_SMALL_CHUNK 8192 /* bytes per small pipeline buffer, at least */
#define HIER_SELECT_MAX_CHUNK ((size_t)1 << 30)
/* A call's chunks in flight hold this much of a rank's memory at most in
 * schedule steps and send queues: at 1,000 nodes x 8 a reduce_scatter's
 * chunk has 181,000 steps (33 MB a chunk in flight), allreduce's 10,640
 * (2 MB). */
#define HIER_SELECT_DEPTH_BYTES ((size_t)16 << 20)
/* Auto (0): 4 on efa, whose links run at 100 Gbit/s and more, where one
 * chunk's rounds take less time than their latencies (docs/model.md); 2 on
 * the others (tcp and shm here: docs/performance.md). */
#define HIER_SELECT_DEPTH_FAST 4
#define HIER_SELECT_DEPTH_OTHER 2

static size_t hier_select_round64(size_t v)
{
    return (v + 63) & ~(size_t)63;
}

size_t hier_select_small_chunk(int nranks)
{
    size_t least = hier_select_round64((size_t)nranks * 64);
    return least > HIER_SELECT_SMALL_CHUNK ? least : HIER_SELECT_SMALL_CHUNK;
}

size_t hier_select_pipe_chunk(int nnodes)
{
    size_t want = nnodes > 1 ? hier_params.net_chunk_size : hier_params.shm_chunk_size;
    return hier_select_round64(want > HIER_SELECT_MAX_CHUNK ? HIER_SELECT_MAX_CHUNK : want);
}

unsigned hier_select_pipe_depth(int nnodes, const char *provider)
{
    int d = hier_params.pipeline_depth;
    if (d == 0) d = hier_fabric_provider_is_efa(provider) ? HIER_SELECT_DEPTH_FAST : HIER_SELECT_DEPTH_OTHER;
    if (nnodes < 2 || d < 1) return 1; /* (one node: no network rounds to overlap) */
    return d > HIER_RUN_DEPTH_MAX ? HIER_RUN_DEPTH_MAX : (unsigned)d;
}

unsigned hier_select_call_depth(unsigned tier_depth, const hier_sched_args_t *args)
{
    size_t per = hier_sched_max_steps(args) * (sizeof(hier_step_t) + sizeof(hier_net_send_t));
    size_t fits = per ? HIER_SELECT_DEPTH_BYTES / per : tier_depth;
    if (args->depth_cap && args->depth_cap < fits) fits = args->depth_cap;
    return fits < 1 ? 1 : fits < tier_depth ? (unsigned)fits : tier_depth;
}

/* Whether one pipeline buffer of `chunk` bytes carries at least a unit of
 * this shape (a multi-node allgather needs a piece of every block). */
static int hier_select_fits(const hier_sched_args_t *args, size_t chunk)
{
    hier_sched_args_t a = *args;
    a.chunk_bytes = chunk;
    if (a.kind == HIER_SCHED_HIER_ALLGATHER) return chunk >= (size_t)(a.node_first[a.nnodes] + 1) * 64;
    return hier_sched_chunk_units(&a) > 0;
}

int hier_select_small_serves(const hier_sched_args_t *args, size_t small)
{
    hier_sched_args_t a = *args;
    a.chunk_bytes = small;
    return hier_select_fits(&a, small) && hier_sched_nchunks(&a) <= 1;
}

size_t hier_select_chunk_past_small(const hier_sched_args_t *args, size_t small, size_t pipe)
{
    size_t cap = hier_select_round64(args->chunk_cap);
    if (pipe && cap && cap < pipe && hier_select_fits(args, cap)) return cap; /* (a rule's chunk=) */
    if (pipe && hier_select_fits(args, pipe)) return pipe;
    return hier_select_fits(args, small) ? small : 0;
}

size_t hier_select_chunk(const hier_sched_args_t *args, size_t small, size_t pipe)
{
    return hier_select_small_serves(args, small) ? small : hier_select_chunk_past_small(args, small, pipe);
}
