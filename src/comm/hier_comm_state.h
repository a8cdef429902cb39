/* hier_comm_state.h: a communicator's state, level by level (types only), shared by the modules of comm/
 * (docs/design.md, "A communicator's life"):
 *   hier_comm_t          every communicator: its size, rank, the glue's services; after its first call, the layout
 *   hier_node_t          made at set-up: the node segment (control lines, low-latency areas, small slots) and, at
 *                        the first call too large for the small slots, the pipeline segment (hier_comm_node.c)
 *   hier_net_t           several nodes only: the ranks its schedules talk to, over Open MPI's point-to-point
 *                        (links) or, once every rank's endpoint is open, libfabric (hier_comm_net.c)
 *   hier_pd, hier_stage  device buffers only (hier_comm_pd.c, exec/hier_stage.c) */
#ifndef HIER_COMM_STATE_H
#define HIER_COMM_STATE_H

#include "accel/hier_accel.h"
#include "base/hier_topo.h"
#include "comm/hier_comm_ops.h"
#include "comm/hier_layout.h"
#include "exec/hier_net_exec.h"
#include "exec/hier_run.h"
#include "exec/hier_stage.h"
#include "base/hier_stats.h"
#include "net/hier_peers.h"
#include "select/hier_select.h"
#include "shm/hier_shm.h"

/* A tier of slots: the node segment's small ones, or a pipeline segment's. */
typedef struct {
    hier_shm_t *seg;
    uint8_t **slots;        /* every local rank's */
    hier_fabric_mr_t *mr;   /* my slot, registered for sends in place (several nodes; NULL: sends copy) */
    int mr_tried;
    uint64_t chunk_seq;     /* chunks run over it: picks the pipeline buffer */
} hier_tier_t;

/* The bytes of one rank's slot of the tier: its pipeline buffers. */
static inline size_t hier_tier_bytes(const hier_tier_t *t)
{
    return hier_shm_nbufs(t->seg) * hier_shm_buf_stride(t->seg);
}

/* A blocking call's shape, and what hier_node_run decided for it (hier_comm_node_run.c): the same shape again
 * skips select/'s chunk and depth policy, and (one chunk) the schedule's builders. */
#define HIER_NODE_KEY_WORDS 11
#define HIER_NODE_CACHED 4
typedef struct {
    uint64_t key[HIER_NODE_KEY_WORDS]; /* all 0: free */
    size_t *rcounts;             /* a reduce_scatter's counts (a copy, hier_node_ncounts of them): part of the key */
    hier_tier_t *tier;
    size_t chunk_bytes;
    unsigned depth;
    hier_run_cache_t run;
} hier_node_cached_t;

typedef enum {
    HIER_PIPE_NONE,  /* not needed yet */
    HIER_PIPE_READY, /* the pipeline segment is mapped */
    HIER_PIPE_SMALL, /* none within the budget: large calls pipeline through the small slots */
} hier_pipe_state_t;

typedef struct {
    hier_tier_t small;           /* in the node segment (small.seg is the node segment) */
    int recycled;                /* that segment was a freed communicator's */
    hier_tier_t pipe;            /* the pipeline segment */
    hier_pipe_state_t pipe_state;
    size_t pipe_chunk;           /* its buffers' size, the same on every node */
    uint64_t *procs;             /* the node's processes, in local order: what recycled segments are keyed by */
    hier_shm_wait_t wait;
    hier_topo_groups_t groups;   /* by NUMA domain */
    uint32_t *order;             /* 0 .. nranks - 1: the fold order */
    int cma;                     /* -1: not probed yet; 0: no single copy; 1: every rank reads every other */
    hier_select_window_t cma_window; /* single copy, probed: the allgather blocks it wins at (hier_comm_probe.c) */
    size_t ll_top[HIER_RULE_COLLS]; /* measured: by collective, the largest call low latency serves (0: not yet) */
    int crowded;                 /* more ranks on the node than cores (as any of them sees it) */
    hier_step_t *steps[HIER_RUN_DEPTH_MAX + 1]; /* the schedules of the chunks a run holds at once, nsteps each
                                  * (the first ones made: hier_node_steps_grow) */
    hier_net_send_t *sendq;      /* several nodes: the network executor's send queues, nsteps each, one per run
                                  * in flight */
    unsigned nqueues;            /* how many */
    size_t nsteps;               /* made at set-up for every kind that fits HIER_NODE_STEPS_AHEAD */
    uint8_t *scratch;            /* the executor's scratch (HIER_EXEC_SCRATCH_BYTES), at the first in-place call */
    int scratch_tried;           /* (without it the executor folds on its stack: this rank's choice alone) */
    hier_node_cached_t cached[HIER_NODE_CACHED]; /* emptied whenever the tiers or the steps' memory change */
    unsigned cached_next;        /* the entry the next shape replaces */
} hier_node_t;

typedef struct {
    int fabric;                  /* the transport now: libfabric (1) or Open MPI's point-to-point (0) */
    int *talk, ntalk;            /* the nodes whose rank of my local index my schedules talk to */
    void **links;                /* by node: the link to that rank: the point-to-point's (hier_pml_t), or the
                                  * channel (libfabric: found at first use, hier_net_exec.c) */
    uint8_t *link_mem;           /* (the links, ntalk of them) */
    uint32_t mbox;                /* libfabric: where this communicator's messages land here */
    hier_peer_t **peers;         /* by node: the process of my local index there (the ones I talk to) */
    uint32_t *mboxes;             /* by node: that process's mailbox for this communicator */
    hier_net_exec_t netx;
} hier_net_t;

/* PML: served, spans nodes, its network steps over Open MPI's
 * point-to-point while libfabric may still open on some rank: its calls
 * count toward asking every rank whether its endpoint is open, and it
 * moves to libfabric at the call where all say so (hier_comm_net.c);
 * READY then, or for good over the point-to-point when some rank has no
 * usable provider.
 * SETTING: the set-up runs as a fiber (its first call was nonblocking), its
 * exchanges in flight; its end is the verdict (hier_comm_xchg.c). */
typedef enum {
    HIER_COMM_NEW,
    HIER_COMM_READY,
    HIER_COMM_REFUSED,
    HIER_COMM_PML,
    HIER_COMM_SETTING
} hier_comm_state_t;

struct hier_pd;
struct hier_req;
struct hier_fiber;

struct hier_comm {
    int size, rank;
    hier_comm_ops_t ops;
    hier_comm_state_t state;
    hier_path_t refused;         /* why, when not served */
    unsigned served_colls;       /* bit coll: not forced to the previous component (coll_hier_<coll>_algorithm) */
    uint64_t pml_calls, pml_asks; /* calls while PML; those that asked whether every rank's endpoint is open */
    int pml_waiting;             /* counted in hier_stats_pml_waiting (hier_net_waiting) */
    hier_layout_t layout;
    hier_node_t *node;
    hier_net_t *net;
    struct hier_pd *pd;
    hier_stage_t *stage;         /* the staging pipeline's host buffers, at the first staged call */
    int dev_possible;            /* some rank has a device backend (said at set-up) */
    size_t *rs_displs;           /* size: a reduce_scatter's prefix sums (made at set-up) */
    struct hier_sched_slices *rs_slices; /* several nodes: a reduce_scatter's chunk layout (its first call) */
    uint64_t calls;              /* collectives run over the node: the signatures' call numbers */
    hier_select_cache_t select_cache; /* select/'s choices for the sizes called (emptied with the struct) */
    hier_select_shape_t shape;   /* what select/ decides from, made at the first choice (size 0: not yet) */
    /* nonblocking calls not over yet, in the order they were made: the first
     * runs, the others wait for it (hier_comm_req.c); while there are any,
     * the communicator is on the process's list of those with requests */
    struct hier_req *req_head, *req_tail;
    struct hier_comm *req_prev, *req_next;
    struct hier_fiber *setting;  /* SETTING: the set-up, run as a fiber */
    hier_comm_state_t setting_from; /* NEW; READY (a pipeline segment); PML (the move to libfabric) */
};

#endif
