/* hier_select_chunk.h: how a call is cut and how many of its chunks are in flight, pure, so the communicator
 * (comm/hier_comm_node.c), the model and hier-info decide alike (docs/design.md, "Between nodes": Execution). */
#ifndef HIER_SELECT_CHUNK_H
#define HIER_SELECT_CHUNK_H

#include <stddef.h>

#include "sched/hier_sched.h"

/* The small buffers' chunk for `nranks` ranks (between nodes, the fewest any node has): 64 B each, 8 KiB at least. */
size_t hier_select_small_chunk(int nranks);
/* The parameters' pipeline chunk (net_chunk_size between nodes, else shm_chunk_size): whole cache lines, <= 1 GiB. */
size_t hier_select_pipe_chunk(int nnodes);
/* Chunks in flight at once: coll_hier_pipeline_depth between nodes (1 .. HIER_RUN_DEPTH_MAX; 0: by the provider,
 * the same on every rank), 1 on one node. The pipeline segment holds one more buffer per slot. */
unsigned hier_select_pipe_depth(int nnodes, const char *provider);
/* A call's depth over a tier of tier_depth: lower where its steps and send queues would hold more than
 * HIER_SELECT_DEPTH_BYTES (thousands of nodes) or a rule's depth= says; the same on every rank. */
unsigned hier_select_call_depth(unsigned tier_depth, const hier_sched_args_t *args);
/* Whether the small buffers carry the call in one chunk. */
int hier_select_small_serves(const hier_sched_args_t *args, size_t small);
/* The chunk of a call the small buffers do not serve in one: the pipeline segment's (pipe 0: none made) or a rule's
 * chunk= below it, else the small buffers'; 0 when neither carries it (a huge allgather without the budget). */
size_t hier_select_chunk_past_small(const hier_sched_args_t *args, size_t small, size_t pipe);
/* The chunk a call runs with, given both. */
size_t hier_select_chunk(const hier_sched_args_t *args, size_t small, size_t pipe);

#endif
