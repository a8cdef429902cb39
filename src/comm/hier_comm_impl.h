/* hier_comm_impl.h: the communicator's state, shared by the files that
 * implement its collectives (internal). */
#ifndef HIER_COMM_IMPL_H
#define HIER_COMM_IMPL_H

#include "accel/hier_accel.h"
#include "net/hier_chan.h"
#include "comm/hier_comm.h"
#include "exec/hier_exec.h"
#include "exec/hier_net_exec.h"
#include "exec/hier_reduce.h"
#include "sched/hier_sched_build.h"
#include "shm/hier_shm.h"
#include "base/hier_topo.h"

#define HIER_COMM_MIN_CHUNK 4096
#define HIER_COMM_MAX_CHUNK ((size_t)1 << 30)
#define HIER_COMM_CROWDED_SPIN 0 /* polls before yielding when ranks outnumber cores */

typedef enum { HIER_SHM_STATE_NONE, HIER_SHM_STATE_READY, HIER_SHM_STATE_FAILED } hier_shm_state_t;

struct hier_comm {
    int nranks;                 /* ranks on my node: the segment's */
    int me;                     /* my index among them */
    int size;                   /* the communicator */
    int rank;
    hier_comm_ops_t ops;
    /* several nodes: the communicator's ranks by node (see hier_sched_args_t) */
    int nnodes;
    int node;
    int pieces;                 /* fewest ranks any node has: owners per node */
    int my_node;                /* as given to hier_comm_create */
    int layout_done;
    int too_big;                /* the layout could not be made (ranks disagree, no memory) */
    int params_differ;          /* the ranks' coll_hier parameters differ: not served */
    uint32_t *node_first;       /* nnodes + 1 */
    uint32_t *node_ranks;       /* size */
    size_t *rs_displs;          /* size: a reduce_scatter's prefix sums */
    hier_shm_state_t net_state;
    hier_chan_t **chans;        /* nnodes: to my local index on each other node (NULL: not needed) */
    hier_fabric_mr_t *slot_mr;  /* my slot, registered: inter-node sends go from it without a copy */
    /* peer-direct allgather (hier_coll_pd.c): a ring over every rank through the fabric */
    int pd_state;               /* HIER_PD_* */
    hier_chan_t *pd_left;       /* with the rank before me in the ring: it writes into my buffer */
    hier_chan_t *pd_right;      /* with the rank after me: I write into its buffer */
    uint32_t *pd_counts;        /* per ring step, the left's writes that landed this call */
    size_t pd_max_msg;          /* the smallest max_msg_size of all ranks: blocks are cut by it */
    uint64_t net_bytes;         /* put on the fabric by the last call */
    int staged;                 /* the last call's buffers were device memory, staged through dev_host */
    int dev_possible;           /* some rank has a device backend: 1, none: -1, not asked yet: 0 */
    uint8_t *dev_host;          /* host staging buffer for device buffers (hier_coll_dev.c) */
    size_t dev_host_len;
    const hier_accel_backend_t *dev_host_pin; /* the backend that pinned dev_host, if any */
    int dev_host_pin_device;                  /* for which device */
    hier_shm_state_t shm_state;
    hier_shm_t *shm;
    size_t chunk_bytes;
    uint64_t chunk_seq;         /* chunks run so far: picks the pipeline parity */
    hier_shm_wait_t wait;
    hier_topo_groups_t groups;
    uint32_t *order;            /* nranks: 0..nranks-1 */
    uint8_t **slots;            /* nranks */
    int cma;                    /* every rank can read every other's memory */
    uint8_t *stage;             /* the executor's staging blocks */
    uint64_t ll_seq;            /* low-latency calls so far (hier_comm_ll.c) */
    hier_step_t *steps;         /* one chunk's schedule */
    hier_step_t *steps2;        /* the next one's (chunks overlap: hier_comm_run) */
    size_t nsteps;              /* room in each */
    hier_net_exec_t netx;       /* the network run in flight */
};

/* The inter-node level (hier_comm_net.c). */
hier_status_t hier_comm_ensure_net(hier_comm_t *c);
void hier_comm_close_net(hier_comm_t *c);
/* Run consecutive NET steps over the communicator's channels. */
hier_status_t hier_comm_net_run(hier_comm_t *c, const hier_exec_bufs_t *bufs, const hier_step_t *steps, size_t n);
/* The same in parts (c->netx): start, poll (never waits; nothing in flight:
 * no-op), finish (waits; nothing in flight: HIER_OK). */
hier_status_t hier_comm_net_start(hier_comm_t *c, const hier_exec_bufs_t *bufs, const hier_step_t *steps, size_t n);
hier_status_t hier_comm_net_poll(hier_comm_t *c);
hier_status_t hier_comm_net_finish(hier_comm_t *c);
/* Progress for every wait: Open MPI's, and the endpoint's when it is open. */
void hier_core_progress(void);
void hier_core_set_progress(hier_progress_fn_t progress);
void hier_core_fabric_close(void);
/* The process's endpoint, opened at the first call (NULL when none works). */
hier_fabric_t *hier_core_fabric(void);
/* Every rank's node, once, collective (hier_comm.c); 0 when not served. */
int hier_comm_ensure_layout(hier_comm_t *c);

/* The collectives on host buffers (hier_coll.c); the public entry points
 * add device-buffer handling around them. */
hier_status_t hier_coll_host_allreduce(hier_comm_t *c, const void *sbuf, void *rbuf, size_t count, hier_dtype_t dt,
                                       hier_op_t op, hier_path_t *path_p);
hier_status_t hier_coll_host_allgather(hier_comm_t *c, const void *sbuf, void *rbuf, size_t block_bytes,
                                       hier_path_t *path_p);
hier_status_t hier_coll_host_reduce_scatter(hier_comm_t *c, const void *sbuf, void *rbuf, const size_t *rcounts,
                                            hier_dtype_t dt, hier_op_t op, hier_path_t *path_p);

/* Common entry of a collective: HIER_OK to go on, HIER_IN_PROGRESS for a
 * one-rank communicator (the caller copies), or a fallback with its reason. */
hier_status_t hier_comm_prepare(hier_comm_t *c, int algo, hier_path_t *path_p);
/* Run a schedule: every chunk's steps, barriers through the segment. */
hier_status_t hier_comm_run(hier_comm_t *c, hier_sched_args_t *args, const void *sbuf, void *rbuf,
                            hier_reduce_kernel_t kernel);

/* Low-latency path for small messages (hier_comm_ll.c); the segment exists. */
size_t hier_comm_ll_capacity(void);
hier_status_t hier_comm_ll_allreduce(hier_comm_t *c, const void *sbuf, void *rbuf, size_t count, size_t esize,
                                     hier_reduce_kernel_t kernel);
hier_status_t hier_comm_ll_allgather(hier_comm_t *c, const void *sbuf, void *rbuf, size_t block);
hier_status_t hier_comm_ll_reduce_scatter(hier_comm_t *c, const void *sbuf, void *rbuf, const size_t *rcounts,
                                          const size_t *rdispls, size_t total, size_t esize,
                                          hier_reduce_kernel_t kernel);

#endif
