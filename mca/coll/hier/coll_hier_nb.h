/* coll_hier_nb.h: the MPI request of hier's nonblocking (coll_hier_nb.c)
 * and persistent (coll_hier_pc.c) collectives, and what both files share. */
#ifndef MCA_COLL_HIER_NB_H
#define MCA_COLL_HIER_NB_H

#include "coll_hier.h"

#include "ompi/mca/coll/base/coll_base_util.h"
#include "ompi/request/request.h"

/* The call as the application made it: what an allgather packs at each
 * start, and what a persistent start the previous component runs is given. */
typedef struct {
    const void *sbuf;             /* (MPI_IN_PLACE as given) */
    void *rbuf;
    mca_coll_hier_count_t scount; /* allgather's send count */
    mca_coll_hier_count_t count;  /* allreduce: count; allgather: rcount; reduce_scatter_block: rcount */
    ompi_datatype_t *sdtype;      /* allgather's send type */
    ompi_datatype_t *dtype;       /* the (receive) type */
    ompi_op_t *op;
    mca_coll_hier_counts_t rcounts; /* reduce_scatter (the application's: MPI keeps it unchanged meanwhile) */
} mca_coll_hier_nb_args_t;

/* Open MPI's MPI_I* and MPI_*_init entry points take every nonblocking or
 * persistent collective's request for its base type
 * (ompi_coll_base_retain_op writes the operation and datatype it retains
 * into it): so is ours. */
typedef struct {
    ompi_coll_base_nbc_request_t super;
    hier_req_t *core;             /* (persistent: NULL when every start falls back, for `why`) */
    mca_coll_hier_module_t *hm;
    hier_coll_t coll;
    size_t bytes;                 /* for the counters */
    hier_path_t path;             /* what served it (a persistent start: this start) */
    hier_path_t why;              /* persistent without a core request: why each start falls back */
    mca_coll_hier_nb_args_t args;
    ompi_datatype_t *dtype;       /* allgather's receive type, retained for the unpacking (NULL: none) */
    mca_coll_hier_user_op_t user; /* the user operation's context, as long as the request */
    char *spack, *rpack;          /* allgather's temporaries; rpack is unpacked into rbuf at the end */
    int orphan;                   /* freed by the application before its end (erroneous, but no crash): released then */
    int persistent;
    int held;                     /* args' operation and datatypes retained (persistent) */
    ompi_request_t *inner;        /* the previous component's run of this call (its end ends ours) */
    hier_req_t *deferred;         /* persistent: this start, handed back at its turn (a busy communicator) */
    void *dead;                   /* orphaned, its inner run over: released by the next request made */
} mca_coll_hier_nb_t;

/* A request for a call of `bytes` (per rank: the counters' size), the
 * communicator retained. */
mca_coll_hier_nb_t *mca_coll_hier_nb_new(mca_coll_hier_module_t *hm, hier_coll_t coll, size_t bytes,
                                         int persistent);
/* A persistent request keeps the operation and datatypes of its args
 * until it is freed (hold 1; 0 lets them go): the application may free
 * them right after the init, and Open MPI's own retain skips persistent
 * requests (ompi_coll_base_retain_op finds them complete at their init). */
void mca_coll_hier_nb_hold(mca_coll_hier_nb_t *r, int hold);
/* Given back: the core's request, temporaries, retained objects. */
void mca_coll_hier_nb_release(mca_coll_hier_nb_t *r);
/* The core's notify: counted, unpacked, and the MPI request complete. */
void mca_coll_hier_nb_done(hier_req_t *core, hier_status_t st, void *arg);
/* The previous component runs the call (its nonblocking twin, counted as
 * a fallback for `why`), and its end ends the request; an MPI error if it
 * could not start it. */
int mca_coll_hier_nb_prev(mca_coll_hier_nb_t *r, hier_path_t why);
/* The previous component's run of the request and its handed-back core
 * request, both over, given back (a persistent request's at each start). */
void mca_coll_hier_nb_prev_free(mca_coll_hier_nb_t *r);
/* Open MPI's progress loop advances hier's requests from the first one on. */
void mca_coll_hier_nb_register(void);
/* An allgather's contiguous places (*s_p: NULL in place; *r_p): the
 * application's buffers where their layouts are contiguous, else
 * temporaries the request keeps; OMPI_SUCCESS or out of memory. */
int mca_coll_hier_nb_layout(mca_coll_hier_nb_t *r, const char **s_p, char **r_p);
/* What the temporaries hold at a start: the send data packed (in place:
 * this rank's block of rbuf); at the end, rpack unpacked into rbuf. */
int mca_coll_hier_nb_pack(mca_coll_hier_nb_t *r);
int mca_coll_hier_nb_unpack(mca_coll_hier_nb_t *r);

#endif
