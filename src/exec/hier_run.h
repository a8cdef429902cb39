/* hier_run.h: runs a schedule, chunk by chunk, over a node's shared memory
 * and (several nodes) the network: local steps here, barriers through the
 * node segment, network steps through hier_net_exec. */
#ifndef HIER_RUN_H
#define HIER_RUN_H

#include "exec/hier_exec.h"
#include "exec/hier_net_exec.h"
#include "exec/hier_plan.h"
#include "sched/hier_sched_build.h"
#include "shm/hier_shm.h"

/* Chunks whose network runs may be in flight at once, at most
 * (coll_hier_pipeline_depth): one network run each (hier_net_exec.h). */
#define HIER_RUN_DEPTH_MAX HIER_NET_RUNS_MAX

/* A call shape's schedule cached between calls (the caller keys it by the shape and empties it with
 * hier_run_cache_clear): its chunk count and, for a call of one chunk, its steps per pipeline buffer, built at the
 * first run that takes that buffer (the steps name buffers, not addresses). */
typedef struct {
    size_t nchunks;
    hier_step_t *steps[HIER_RUN_DEPTH_MAX + 1]; /* NULL: not built yet */
    size_t cut[HIER_RUN_DEPTH_MAX + 1][HIER_PLAN_CUTS];
} hier_run_cache_t;
void hier_run_cache_clear(hier_run_cache_t *cache);

typedef struct {
    hier_shm_t *node;              /* the node segment: barriers, error flags, single-copy publication */
    const hier_shm_wait_t *wait;
    uint8_t *const *slots;         /* every local rank's slot of the tier the call runs in */
    size_t buf_stride;
    uint8_t *scratch;              /* HIER_EXEC_SCRATCH_BYTES */
    hier_exec_peer_read_fn_t peer_read; /* single copy */
    void *peer_ctx;
    hier_net_exec_t *netx;         /* several nodes: settings filled by the caller, a send queue per run
                                    * below depth; else NULL */
    hier_fabric_mr_t *mr;          /* my slot's registration, [mr_base, mr_base + mr_len): the network */
    const uint8_t *mr_base;        /* executor sends from it in place (NULL: copies) */
    size_t mr_len;
    unsigned depth;                /* chunks whose network runs are in flight at once (1 .. HIER_RUN_DEPTH_MAX);
                                    * the tier's slots hold depth + 1 pipeline buffers */
    hier_step_t *steps[HIER_RUN_DEPTH_MAX + 1]; /* hier_sched_max_steps(args) each: the chunks in flight's,
                                    * and the next one's (min(nchunks, depth + 1) of them needed) */
    uint64_t *chunk_seq;           /* chunks run so far over the tier: picks the pipeline buffer */
    hier_run_cache_t *cache;       /* the call shape's (NULL: the chunks counted and built at every run) */
} hier_run_t;

/* A chunk's steps, cut for the overlap (hier_plan_cut). */
typedef struct {
    hier_step_t *steps;
    size_t cut[HIER_PLAN_CUTS];
} hier_run_chunk_t;

/* A run in progress: where it stands in its plan (hier_plan.h), so it can
 * stop wherever it would wait and go on later (a request). */
typedef struct {
    hier_run_t r;
    hier_sched_args_t args;
    hier_exec_bufs_t bufs;         /* (the network executor points here) */
    hier_run_chunk_t ch[HIER_RUN_DEPTH_MAX + 1]; /* chunk j's in ch[j % (depth + 1)] */
    hier_plan_t plan;
    int ranged, done;              /* the plan's local steps at hand are [pos, to); the run is over */
    size_t pos, to;                /* steps [pos, to) of the chunk at hand left to run */
    uint64_t target;               /* a barrier entered and not yet passed (0: none) */
    hier_shm_probe_t probe;
    hier_status_t failed;          /* a data step's error, kept to the end (hier_run_go) */
    uint64_t net_bytes;
} hier_run_req_t;

/* A run of every chunk of the collective args describes (nranks, me, chunk and the layout filled in): begun
 * (nothing waits), then advanced as far as it can go without waiting (block 0: HIER_IN_PROGRESS) or to the end
 * (block 1: a blocking call, which advances once). A failed step does not make this rank skip the barriers its
 * peers wait at: every rank returns the error together. *net_bytes_p: what this rank put on the fabric. The
 * request and what args points to stay in place until the end. */
void hier_run_begin(hier_run_req_t *q, const hier_run_t *r, const hier_sched_args_t *args, const void *sbuf,
                    void *rbuf, hier_reduce_kernel_t kernel);
hier_status_t hier_run_advance(hier_run_req_t *q, int block, uint64_t *net_bytes_p);
/* Where a run stands, logged: its step, chunk and barrier, and its network runs (nothing changes). */
void hier_run_describe(const hier_run_req_t *q);

#endif
