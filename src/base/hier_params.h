/* hier_params.h: every runtime parameter, declared once in one table.
 * The glue registers the table with Open MPI's MCA system in a loop (so each
 * default is written once, in hier_params.c) and docs/parameters.md's table
 * is generated from it. */
#ifndef HIER_PARAMS_H
#define HIER_PARAMS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum {
    HIER_ALGO_AUTO = 0,
    HIER_ALGO_FLAT,    /* allreduce: every rank reduces every slot */
    HIER_ALGO_NUMA,    /* allreduce: two-level NUMA tree */
    HIER_ALGO_RSAG,    /* allreduce: reduce-scatter + allgather through the segment */
    HIER_ALGO_FALLBACK,/* always use the previous module (for comparisons) */
    HIER_ALGO_SHM,     /* allgather, reduce_scatter: through the segment */
    HIER_ALGO_CMA,     /* allgather: single copy between processes (process_vm_readv) */
    HIER_ALGO_LL,      /* any, small messages: flags inside the data, no barrier */
    HIER_ALGO_RING,    /* inter-node allreduce: ring reduce-scatter + allgather */
    HIER_ALGO_RD,      /* inter-node allreduce: recursive doubling */
    HIER_ALGO_RH,      /* inter-node allreduce: Rabenseifner (recursive halving + doubling) */
    HIER_ALGO_COUNT
} hier_algo_t;

typedef struct {
    int priority;
    int verbose;
    int stats;
    int nonblocking;              /* 1: nonblocking calls served as requests (comm/hier_comm_req.c) */
    int nonblocking_setup;        /* 1: a communicator's first call, nonblocking, sets it up without waiting */
    int progress_thread;          /* 1: a thread of hier's advances the requests between MPI calls */
    int allreduce_algorithm;      /* hier_algo_t: AUTO, LL, FLAT, NUMA, RSAG or FALLBACK */
    int allgather_algorithm;      /* AUTO, LL, SHM, CMA or FALLBACK */
    int reduce_scatter_algorithm; /* AUTO, LL, SHM or FALLBACK */
    size_t allreduce_ll_max;      /* bytes per rank: the low-latency path up to here (0: measured) */
    size_t allgather_ll_max;      /* bytes per rank */
    size_t reduce_scatter_ll_max; /* bytes of the whole send buffer */
    size_t allreduce_flat_max;    /* bytes: flat (or NUMA) up to here, RSAG above */
    size_t allreduce_numa_min_ranks;
    size_t shm_chunk_size;        /* bytes per rank per pipeline buffer */
    int spin_count;
    int timeout;                  /* seconds a wait may stand still (0: for ever) */
    char *shm_dir;
    size_t shm_budget;            /* bytes of segments one process keeps mapped, in use or recycled */
    int numa_ranks_per_domain;    /* 0: hwloc; K: pretend K consecutive ranks share a NUMA domain */
    int ranks_per_node;           /* 0: Open MPI's locality; K: virtual nodes of K consecutive world ranks */
    size_t allgather_cma_min;     /* block bytes: auto reads peers' blocks directly from here ... */
    size_t allgather_cma_max;     /* ... up to here */
    char *rules;                  /* a rules file (select/hier_select_rules.h); "" = built in */
    char *fabric_provider;        /* libfabric provider; "" = best available */
    char *fabric_iface;           /* NICs to use (or ^exclude); "" = all but lo, docker* */
    char *fabric_profile;         /* the provider's rules hier keeps: auto, default, efa-direct */
    int fabric_rails_max;         /* NICs one process drives at most */
    int fabric_stripe;            /* messages spread over every shared rail */
    int fabric_warmup;            /* open libfabric in the background; calls between nodes wait for no one */
    size_t fabric_open_min;       /* bytes of a call between nodes that starts the opening */
    size_t fabric_slot_size;      /* bytes per message slot of an inter-node channel */
    int fabric_slots;             /* slots per channel: messages in flight before credit returns */
    int net_algorithm;            /* between nodes: AUTO, RING, RD or RH */
    size_t net_rd_max;            /* bytes between nodes: recursive doubling up to here under auto */
    size_t net_rd_max_two_nodes;  /* the same on two nodes */
    size_t net_split_min;         /* bytes between nodes: from here every local rank drives the network */
    int net_radix_max;            /* rabenseifner: the largest radix of a level */
    int net_ring_max_nodes;       /* auto: the ring, not a folded rabenseifner, for large messages up to here */
    size_t net_chunk_size;        /* shm_chunk_size of communicators that span nodes */
    size_t net_pair_max;          /* two nodes of one rank each: one message each way up to here */
    int pipeline_depth;           /* between nodes: chunks whose rounds are in flight at once (0: by the provider) */
    int device_peer_direct;       /* device allgathers go NIC to NIC when the provider takes device memory */
    size_t device_peer_direct_min; /* ... with blocks of this many bytes or more */
    int device_force_staging;     /* every device buffer goes through host memory */
    size_t device_stage_chunk;    /* staging pipeline chunk */
} hier_params_t;

typedef enum { HIER_PARAM_INT, HIER_PARAM_SIZE, HIER_PARAM_STRING, HIER_PARAM_ALGO } hier_param_type_t;

typedef struct {
    const char *name;      /* MCA name is coll_hier_<name> */
    hier_param_type_t type;
    const char *defval;    /* default, as text: "100", "64K", "auto" */
    const char *help;
    size_t offset;         /* into hier_params_t */
    unsigned algo_mask;    /* HIER_PARAM_ALGO: which hier_algo_t values are valid */
    int local;             /* 1: may differ between ranks (logging, waiting, local paths) */
    int level;             /* ompi_info level: 1-3 users, 4-6 tuning, 9 testing and simulation */
} hier_param_desc_t;

/* The live values; set to defaults by hier_params_defaults(). */
extern hier_params_t hier_params;

const hier_param_desc_t *hier_params_table(size_t *count_p);
void hier_params_defaults(hier_params_t *params);
/* Set parameter `name` (without coll_hier_) from text as a user writes it
 * ("64K", "ring"); -1 for an unknown name or a value it does not take. A
 * string value is kept by pointer. For tools outside Open MPI (hier-model). */
int hier_params_set(hier_params_t *params, const char *name, const char *text);
const char *hier_algo_name(hier_algo_t algo);
/* A digest of every value that must be the same on all ranks (not `local`). */
uint32_t hier_params_digest(const hier_params_t *params);
/* Parse "64K", "1M", "1048576"; -1 on malformed text. */
int hier_params_parse_size(const char *text, size_t *value_p);
/* docs/parameters.md's table, in Markdown. */
void hier_params_print_markdown(FILE *out);

#endif
