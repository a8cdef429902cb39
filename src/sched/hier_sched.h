/* hier_sched.h: the vocabulary of schedules (types only; docs/design.md, "The tree").
 *
 * A builder is a pure function: given the collective's shape and one chunk index it emits the steps one rank
 * performs for that chunk (copy, reduce, barrier, network send and receive); an executor runs them over shared
 * memory and the network, or over plain memory in the test simulators. Buffers are named, not pointed at: the
 * user's send and receive buffers and each local rank's slot, whose pipeline buffers consecutive chunks take in
 * turn (hier_sched_intra.c). Nothing has a size limit: ranks, peers and tags are 32-bit, and the arrays a
 * shape refers to belong to the caller, sized by its layout. */
#ifndef HIER_SCHED_H
#define HIER_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    HIER_BUF_SEND,
    HIER_BUF_RECV,
    HIER_BUF_SLOT,
    /* single copy: another rank's input, read through the kernel (CMA) */
    HIER_BUF_PEER_INPUT, /* where rank `rank`'s contribution starts (hier_sched_input_offset) */
} hier_buf_kind_t;

typedef struct {
    uint8_t kind;   /* hier_buf_kind_t */
    uint8_t buf;    /* HIER_BUF_SLOT: which pipeline buffer */
    uint32_t rank;  /* HIER_BUF_SLOT, PEER_*: whose (ignored by REDUCE sources) */
    size_t off;     /* bytes from the start of that buffer */
} hier_ref_t;

typedef enum {
    HIER_STEP_COPY,
    HIER_STEP_REDUCE,
    HIER_STEP_BARRIER,
    /* inter-node: peers are indexes in the group of ranks that share a local index */
    HIER_STEP_NET_SEND, /* len bytes at src to `peer`, labelled `tag` */
    HIER_STEP_NET_RECV, /* the message `tag` from `peer`: copied to dst, or (net_reduce) dst = dst op it */
    /* one-sided (hier_sched_direct.c): a peer writes straight into my registered buffer */
    HIER_STEP_NET_NOTE_SEND,   /* a note of kind `tag` (hier_note_kind_t) to `peer`; HIER_NOTE_KEY: dst's key */
    HIER_STEP_NET_NOTE_RECV,   /* the next note from `peer`, which must be of kind `tag`; a key is kept */
    HIER_STEP_NET_WRITE,       /* len bytes at src into `peer`'s keyed buffer at dst.off, tagged `tag` */
    HIER_STEP_NET_WRITES_WAIT, /* until `peer`'s writes tagged `tag` (len bytes in all) landed here */
} hier_step_op_t;

/* What a note says. A writer writes only with the key its target sent, and
 * the target's buffer is the caller's again once it said DONE. */
typedef enum {
    HIER_NOTE_KEY,  /* you may write into my buffer (dst): here is its key */
    HIER_NOTE_DONE, /* every write of yours landed: your buffers are yours again */
    HIER_NOTE_KINDS
} hier_note_kind_t;

#define HIER_SCHED_NO_RANK UINT32_MAX

typedef struct {
    hier_step_op_t op;
    uint8_t has_dst2;      /* REDUCE: the result is also stored at dst2 (while still in L1) */
    uint8_t net_reduce;    /* NET_RECV: reduce into dst (len elements) instead of copying (len bytes) */
    hier_ref_t dst;
    hier_ref_t src;        /* COPY: the source. REDUCE: slot buffer and offset of every operand */
    size_t len;            /* COPY: bytes. REDUCE: elements */
    const uint32_t *ranks; /* REDUCE: dst = src[ranks[0]] op src[ranks[1]] op ... in this order */
    uint32_t nranks;
    uint32_t self_rank;    /* REDUCE: this operand is read from self_src instead of its slot */
    uint32_t peer;         /* NET_*: the other end */
    uint32_t tag;          /* NET_*: which message */
    hier_ref_t self_src;   /* (the rank's own input, never copied into its slot) */
    hier_ref_t dst2;
} hier_step_t;

typedef enum {
    HIER_SCHED_ALLREDUCE_FLAT,
    HIER_SCHED_ALLREDUCE_NUMA,
    HIER_SCHED_ALLREDUCE_RSAG,
    HIER_SCHED_ALLGATHER,
    HIER_SCHED_REDUCE_SCATTER,
    /* single copy: one step list per call, no segment slots (hier_sched_cma.c) */
    HIER_SCHED_CMA_ALLGATHER,
    /* several nodes (hier_sched_hier.c): shared memory inside, network between */
    HIER_SCHED_HIER_ALLREDUCE,
    HIER_SCHED_HIER_ALLGATHER,
    HIER_SCHED_HIER_REDUCE_SCATTER, /* rcounts/rdispls by communicator rank */
} hier_sched_kind_t;

/* Inter-node schedules among `nparts` participants (one rank per node with
 * the same local index) over elements of a vector (hier_sched_net.c). */
typedef enum {
    HIER_NET_RING_ALLREDUCE,      /* bandwidth-optimal: reduce-scatter then allgather */
    HIER_NET_RING_REDUCE_SCATTER, /* afterwards block `me` is complete here */
    HIER_NET_RING_ALLGATHER,      /* block `me` is this participant's contribution */
    HIER_NET_RD_ALLREDUCE,        /* latency-optimal recursive doubling, any nparts */
    HIER_NET_RD_ALLGATHER,        /* recursive doubling, any nparts; blocks in participant order, contiguous */
    HIER_NET_RH_ALLREDUCE,        /* Rabenseifner in mixed radix: reduce-scatter + allgather, any nparts */
    HIER_NET_RH_REDUCE_SCATTER,   /* its first half: afterwards block `me` is complete here */
    HIER_NET_RH_ALLGATHER,        /* its second half: block `me` is this participant's contribution */
} hier_net_kind_t;

/* Local ranks grouped by NUMA domain (base/hier_topo.h makes them): group g
 * holds members[first[g] .. first[g+1]) in increasing rank order, its leader
 * being the first. */
typedef struct {
    int ngroups;
    const uint32_t *group_of; /* rank -> group */
    const uint32_t *leader;   /* group -> its lowest rank */
    const uint32_t *first;    /* group -> offset in members; first[ngroups] == nranks */
    const uint32_t *members;  /* ranks, grouped */
} hier_sched_groups_t;

/* A sliced reduce_scatter's chunk (hier_sched_hier.c): virtual rank
 * v = j x T + r (T ranks in all) is the j-th of `pieces` parts of rank r's
 * slice, lo[v] elements into r's block, vc[v] long, at vd[v] in the chunk;
 * node n's virtual ranks are node_ranks[node_first[n] ..). Made by
 * hier_sched_slices_new for a communicator's shape, filled per chunk. */
typedef struct hier_sched_slices {
    size_t *vc, *vd, *lo;
    uint32_t *node_first, *node_ranks;
    int pieces, total, nnodes; /* the memory reserved: a call with more pieces is not sliced */
} hier_sched_slices_t;

/* Whether slicing pays: not in place (a chunk's result would land on input
 * a later chunk reads), over several nodes, and every virtual rank's slice
 * 32 elements on average in a chunk of `units` elements (at thousands of
 * ranks the copies would cost more than the links gain). The one rule
 * hier_sched_hier_sliced applies and a communicator asks before it reserves
 * the slices. */
int hier_sched_slices_pay(size_t units, int pieces, int total, int nnodes, int in_place);
/* Memory for pieces x total virtual ranks over nnodes (one allocation, free()). */
hier_sched_slices_t *hier_sched_slices_new(int pieces, int total, int nnodes);

/* The shape of one collective as seen by one rank. */
typedef struct {
    hier_sched_kind_t kind;
    int nranks;          /* local ranks: the slots */
    int me;              /* my local index */
    size_t esize;        /* bytes per element */
    size_t count;        /* allreduce: elements per rank; allgather: elements per block;
                            reduce_scatter: total elements (sum of rcounts) */
    const size_t *rcounts; /* reduce_scatter: elements each rank receives */
    const size_t *rdispls; /* reduce_scatter: prefix sums of rcounts */
    /* reduce_scatter over several nodes: where chunk k's slices of the
     * ranks' blocks go, worked out as it is built (see hier_sched_hier.c);
     * NULL: chunk k is elements [k x units, ...) of the vector */
    struct hier_sched_slices *rs_slices;
    bool in_place;
    size_t chunk_bytes;  /* capacity of one pipeline buffer; at least nranks x 64 */
    /* a rule's chunk= and depth= (0: none): caps the communicator puts on
     * the chunk and the chunks in flight (select/hier_select_chunk.h), which
     * the schedules do not read */
    size_t chunk_cap;
    unsigned depth_cap;
    const uint32_t *order;  /* 0..nranks-1, the fold order of flat and rsag reductions */
    hier_sched_groups_t groups; /* NUMA */
    /* several nodes: this node's index, the node count, how many local ranks
     * own a piece (at most the fewest any node has), the inter-node algorithm */
    int node;
    int nnodes;
    int pieces;
    hier_net_kind_t net_kind;
    int net_radix;          /* RH kinds: hier_net_args_t's radix_max */
    /* several nodes: the communicator's ranks grouped by node, each node's in
     * local order: node n holds node_ranks[node_first[n] .. node_first[n + 1] - 1]
     * (allgather blocks and reduce_scatter results are by communicator rank) */
    const uint32_t *node_first;
    const uint32_t *node_ranks;
} hier_sched_args_t;

/* How the blocks of an inter-node schedule lie in its vector (elements from
 * hier_net_args_t.off): computed where needed, so no array of any size is
 * made for them. */
typedef enum {
    HIER_NET_BLOCKS_EVEN,  /* `count` cut into nparts cache-line aligned blocks of nearly equal size */
    HIER_NET_BLOCKS_NODES, /* block n: node n's ranks' pieces, [node_first[n], node_first[n+1]) x unit */
    HIER_NET_BLOCKS_RANKS, /* block n: one range per rank r of node n, what r receives (rdispls/rcounts)
                            * of the vector's elements [origin + off, origin + off + count) */
} hier_net_blocks_t;

typedef struct {
    hier_net_kind_t kind;
    int nparts;
    int me;
    size_t esize;
    hier_ref_t base;        /* the buffer the vector lives in: RECV, or my own SLOT */
    size_t off;             /* elements: where the vector starts in `base` */
    size_t count;           /* elements of the vector (EVEN, RANKS and recursive doubling) */
    hier_net_blocks_t blocks;
    size_t unit;            /* NODES: elements per rank */
    const uint32_t *node_first; /* NODES, RANKS */
    const uint32_t *node_ranks; /* RANKS */
    const size_t *rcounts;  /* RANKS */
    const size_t *rdispls;  /* RANKS */
    size_t origin;          /* RANKS: the rdispls coordinate of base's element 0 */
    uint32_t tag_base;      /* tags used: from tag_base, fewer than 2 nparts + 2 */
    int radix_max;          /* RH kinds: the largest radix (hier_radix; below 2 means 2) */
} hier_net_args_t;

#endif
