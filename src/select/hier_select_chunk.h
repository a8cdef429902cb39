/* hier_select_chunk.h: how a call is cut and how many of its chunks are in
 * flight, pure, so the communicator (comm/hier_comm_node.c), the model and
 * hier-info decide alike: the chunk is the node segment's small buffers'
 * while one of them carries the call, else the pipeline segment's; the
 * depth comes from coll_hier_pipeline_depth and the provider, bounded by
 * the memory a chunk's steps take. docs/design.md, *Inside a node*. */
#ifndef HIER_SELECT_CHUNK_H
#define HIER_SELECT_CHUNK_H

#include <stddef.h>

#include "sched/hier_sched.h"

/* The small buffers' chunk for a node of `nranks` ranks (between nodes,
 * the fewest any node has): a 64-byte piece per rank, 8 KiB at least. */
size_t hier_select_small_chunk(int nranks);
/* The pipeline chunk the parameters ask for (net_chunk_size between
 * nodes, shm_chunk_size on one), whole cache lines, 1 GiB at most. */
size_t hier_select_pipe_chunk(int nnodes);
/* Chunks of a pipelined call whose network rounds are in flight at once
 * (coll_hier_pipeline_depth between nodes, within 1 .. HIER_RUN_DEPTH_MAX;
 * 1 on one node; 0, by the fabric's provider as libfabric names it: the
 * same on every rank, whose endpoints talk to each other): its pipeline
 * segment holds one more per slot. */
unsigned hier_select_pipe_depth(int nnodes, const char *provider);
/* A call's depth over a tier of tier_depth: fewer chunks in flight where
 * its chunks' schedules are so long that their steps and send queues would
 * hold more than HIER_SELECT_DEPTH_BYTES (thousands of nodes); the same on
 * every rank (the steps a chunk may have depend on the call's shape alone);
 * a rule's depth= lower still. */
unsigned hier_select_call_depth(unsigned tier_depth, const hier_sched_args_t *args);
/* Whether the small buffers carry the call in one chunk. */
int hier_select_small_serves(const hier_sched_args_t *args, size_t small);
/* The chunk of a call the small buffers do not serve in one: the pipeline
 * segment's (pipe 0: none made), or a rule's chunk= below it (whole cache
 * lines), else the small buffers', 0: neither carries it (a huge allgather
 * without the budget). */
size_t hier_select_chunk_past_small(const hier_sched_args_t *args, size_t small, size_t pipe);
/* The chunk a call runs with, given both. */
size_t hier_select_chunk(const hier_sched_args_t *args, size_t small, size_t pipe);

#endif
