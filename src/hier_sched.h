/* hier_sched.h: intra-node algorithms as data.
 *
 * A builder is a pure function: given the collective's shape and one chunk
 * index it emits the steps one rank performs for that chunk (copy, reduce,
 * barrier). An executor runs them: hier_exec over the shared-memory segment,
 * or the test simulator over plain memory, which is how Criterion sweeps
 * ranks x counts x chunk sizes without processes.
 *
 * Buffers are named, not pointed at: the user's send and receive buffers and
 * each rank's slot in the segment. A slot holds two pipeline buffers
 * (parities) of chunk_bytes each; consecutive chunks alternate parity, which
 * is what lets a rank refill its slot after a single barrier (see
 * hier_sched.c for the argument). */
#ifndef HIER_SCHED_H
#define HIER_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hier_topo.h"

#define HIER_SCHED_MAX_RANKS HIER_TOPO_MAX_RANKS

typedef enum {
    HIER_BUF_SEND,
    HIER_BUF_RECV,
    HIER_BUF_SLOT,
    /* single copy: another rank's buffers, read through the kernel (CMA) */
    HIER_BUF_PEER_INPUT, /* where rank `rank`'s contribution starts (see hier_sched_input_offset) */
    HIER_BUF_PEER_RECV,  /* rank `rank`'s receive buffer */
} hier_buf_kind_t;

typedef struct {
    uint8_t kind;   /* hier_buf_kind_t */
    uint8_t parity; /* HIER_BUF_SLOT: which pipeline buffer */
    uint16_t rank;  /* HIER_BUF_SLOT: whose slot (ignored by REDUCE sources) */
    size_t off;     /* bytes from the start of that buffer */
} hier_ref_t;

typedef enum {
    HIER_STEP_COPY,
    HIER_STEP_REDUCE,
    HIER_STEP_BARRIER,
    /* inter-node: peers are indexes in the group of ranks that share a local index */
    HIER_STEP_NET_SEND, /* len bytes at src to `peer`, labelled `tag` */
    HIER_STEP_NET_RECV, /* the message `tag` from `peer`: copied to dst, or (net_reduce) dst = dst op it */
} hier_step_op_t;

#define HIER_SCHED_NO_RANK 0xffffu

typedef struct {
    hier_step_op_t op;
    hier_ref_t dst;
    hier_ref_t src;     /* COPY: the source. REDUCE: slot parity and offset of every operand */
    size_t len;         /* COPY: bytes. REDUCE: elements */
    const uint16_t *ranks; /* REDUCE: dst = src[ranks[0]] op src[ranks[1]] op ... in this order */
    uint16_t nranks;
    uint16_t self_rank; /* REDUCE: this operand is read from self_src instead of its slot */
    uint8_t has_dst2;    /* REDUCE: the result is also stored at dst2 (while still in L1) */
    uint8_t net_reduce;  /* NET_RECV: reduce into dst (len elements) instead of copying (len bytes) */
    uint16_t peer;       /* NET_*: the other end */
    uint16_t tag;        /* NET_*: which message */
    hier_ref_t self_src; /* (the rank's own input, never copied into its slot) */
    hier_ref_t dst2;
} hier_step_t;

typedef enum {
    HIER_SCHED_ALLREDUCE_FLAT,
    HIER_SCHED_ALLREDUCE_NUMA,
    HIER_SCHED_ALLREDUCE_RSAG,
    HIER_SCHED_ALLGATHER,
    HIER_SCHED_REDUCE_SCATTER,
    /* single copy: one step list per call, no segment slots (hier_sched_cma.c) */
    HIER_SCHED_CMA_ALLREDUCE,
    HIER_SCHED_CMA_ALLGATHER,
    HIER_SCHED_CMA_REDUCE_SCATTER, /* not in place: results would overwrite input peers still read */
    /* several nodes (hier_sched_hier.c): shared memory inside, network between */
    HIER_SCHED_HIER_ALLREDUCE,
    HIER_SCHED_HIER_ALLGATHER,
    HIER_SCHED_HIER_REDUCE_SCATTER, /* rcounts/rdispls by communicator rank */
} hier_sched_kind_t;

/* The shape of one collective as seen by one rank. */
typedef struct {
    hier_sched_kind_t kind;
    int nranks;
    int me;
    size_t esize;        /* bytes per element */
    size_t count;        /* allreduce: elements per rank; allgather: elements per block;
                            reduce_scatter: total elements (sum of rcounts) */
    const size_t *rcounts; /* reduce_scatter: elements each rank receives */
    const size_t *rdispls; /* reduce_scatter: prefix sums of rcounts */
    bool in_place;
    size_t chunk_bytes;  /* capacity of one pipeline buffer; at least nranks x esize */
    const uint16_t *order;  /* 0..nranks-1, the fold order of flat and rsag reductions */
    const hier_topo_groups_t *groups; /* NUMA: groups (CSR in groups->first) */
    const uint16_t *members;          /* NUMA: groups->members as uint16_t */
    const uint16_t *leaders;          /* NUMA: leader of each group, by group */
    /* several nodes: this node's index, the node count, how many local ranks
     * every node has at least (the pieces), and the inter-node algorithm */
    int node;
    int nnodes;
    int pieces;
    int net_kind;                     /* hier_net_kind_t: ring or recursive doubling allreduce */
    /* several nodes: the communicator's ranks grouped by node, each node's in
     * local order: node n holds node_ranks[node_first[n] .. node_first[n + 1] - 1]
     * (allgather blocks and reduce_scatter results are by communicator rank) */
    const uint16_t *node_first;
    const uint16_t *node_ranks;
} hier_sched_args_t;

/* Upper bound of steps any single-node builder emits for one chunk. */
#define HIER_SCHED_MAX_NODES 64
#define HIER_SCHED_MAX_TOTAL 1024 /* several nodes: ranks in all */
#define HIER_SCHED_MAX_STEPS (2 * HIER_SCHED_MAX_RANKS + 4 * HIER_SCHED_MAX_NODES + 16)
/* Upper bound for the several-node builders: `total` ranks in all, `pieces` owners per node. */
size_t hier_sched_hier_max_steps(int total, int nnodes, int pieces);

/* Elements (allreduce, reduce_scatter) or bytes (allgather) one chunk carries. */
size_t hier_sched_chunk_units(const hier_sched_args_t *args);
/* Chunks the collective needs (0 when there is nothing to move). */
size_t hier_sched_nchunks(const hier_sched_args_t *args);
/* Steps of chunk `k` for rank args->me, using pipeline buffer `parity`.
 * Returns the number of steps written to `steps` (at most HIER_SCHED_MAX_STEPS). */
size_t hier_sched_build(const hier_sched_args_t *args, size_t k, int parity, hier_step_t *steps);
/* Inter-node schedules among `nparts` participants (one rank per node with
 * the same local index) over elements of RECV, which holds this rank's
 * contribution (hier_sched_net.c). */
typedef enum {
    HIER_NET_RING_ALLREDUCE,      /* bandwidth-optimal: reduce-scatter then allgather */
    HIER_NET_RING_REDUCE_SCATTER, /* afterwards block `me` is complete here */
    HIER_NET_RING_ALLGATHER,      /* block `me` is this participant's contribution */
    HIER_NET_RD_ALLREDUCE,        /* latency-optimal recursive doubling, any nparts */
    HIER_NET_RD_ALLGATHER,        /* recursive doubling, any nparts; blocks in participant order, contiguous */
    HIER_NET_RH_ALLREDUCE,        /* Rabenseifner: recursive halving reduce-scatter + doubling allgather, any nparts */
} hier_net_kind_t;

typedef struct {
    hier_net_kind_t kind;
    int nparts;
    int me;
    size_t esize;
    hier_ref_t base;        /* the buffer the vector lives in: RECV, or my own SLOT */
    size_t off;             /* elements: where the vector starts in `base` */
    size_t count;           /* RD: elements of the vector */
    const size_t *counts;   /* ring: elements of each participant's block */
    const size_t *displs;   /* ring: where each block starts, from off */
    /* ring, optional: blocks made of several ranges (a node's ranks need not
     * be consecutive): block b is ranges seg_first[b] .. seg_first[b + 1] - 1
     * of seg_off/seg_len (elements, from off); counts/displs are then unused */
    const size_t *seg_first;
    const size_t *seg_off;
    const size_t *seg_len;
    uint16_t tag_base;      /* tags used: tag_base .. tag_base + HIER_SCHED_NET_TAGS(nparts) - 1 */
} hier_net_args_t;

#define HIER_SCHED_NET_TAGS(nparts) (2 * (size_t)(nparts) + 2)
/* Steps of one build: `nsegs` ranges in all blocks together (nparts without seg_first). */
#define HIER_SCHED_NET_MAX_STEPS(nparts, nsegs) (4 * (size_t)(nsegs) + 4 * (size_t)(nparts) + 4)
/* Returns the number of steps written (at most HIER_SCHED_NET_MAX_STEPS). */
size_t hier_sched_net_build(const hier_net_args_t *args, hier_step_t *steps);
/* needed[p] = 1 for every participant p that some inter-node schedule of
 * participant `me` talks to (ring neighbours, recursive-doubling partners):
 * the only ones it needs a channel to. Symmetric: p needs me when I need p. */
void hier_sched_net_peers(int nparts, int me, uint8_t *needed);
/* Equal blocks, cache-line aligned, for a ring over `count` elements. */
void hier_sched_net_even_blocks(size_t count, int nparts, size_t esize, size_t *counts, size_t *displs);

/* Single-copy kinds publish where their input starts: the send buffer, or
 * (in place) the receive buffer plus this offset. */
size_t hier_sched_input_offset(const hier_sched_args_t *args, int rank);
static inline int hier_sched_is_cma(hier_sched_kind_t kind)
{
    return kind >= HIER_SCHED_CMA_ALLREDUCE && kind <= HIER_SCHED_CMA_REDUCE_SCATTER;
}

#endif
