/* coll_hier.h: the Open MPI glue of coll/hier. Only mca/ includes Open MPI
 * headers; it translates MPI arguments into core calls and owns the fallback. */
#ifndef MCA_COLL_HIER_H
#define MCA_COLL_HIER_H

#include "ompi_config.h"

#include "mpi.h"
#include "ompi/communicator/communicator.h"
#include "ompi/datatype/ompi_datatype.h"
#include "ompi/mca/coll/coll.h"
#include "ompi/op/op.h"

#include "coll_hier_compat.h"
#include "accel/hier_accel_mirror.h"

#include "comm/hier_comm.h"
#include "base/hier_dtype.h"
#include "base/hier_log.h"
#include "base/hier_stats.h"

BEGIN_C_DECLS

/* HIER_PATH_COUNT in comm_fallback means "the communicator is served". */
#define MCA_COLL_HIER_SERVED HIER_PATH_COUNT

/* (datatype, op) as the core sees them: mca_coll_hier_map_reduction's answer. */
typedef struct {
    const ompi_datatype_t *dtype; /* NULL: an empty slot */
    const ompi_op_t *op;
    hier_path_t path;
    hier_dtype_t dt;
    hier_op_t hop;
    size_t per_type;
} mca_coll_hier_map_t;
#define MCA_COLL_HIER_LAYOUT_SLOTS 4

/* A datatype's layout as an allgather needs it: mca_coll_hier_map_bytes's
 * answer for a predefined datatype, the same for every count (gap-free or
 * not whatever the count). */
typedef struct {
    const ompi_datatype_t *dtype; /* NULL: an empty slot */
    hier_path_t path;
    ptrdiff_t lb;
} mca_coll_hier_layout_t;
#define MCA_COLL_HIER_MAP_SLOTS 8

typedef struct {
    mca_coll_base_module_t super;
    ompi_communicator_t *comm;
    hier_comm_t *core;
    hier_path_t comm_fallback; /* why every call on this communicator falls back, or SERVED */
    /* The answers for predefined datatypes with predefined ops, which live
     * as long as the job (derived types and user ops may be freed and their
     * addresses reused: asked every call). Per module: MPI forbids two
     * threads' collectives on one communicator at once. */
    mca_coll_hier_map_t map[MCA_COLL_HIER_MAP_SLOTS];
    mca_coll_hier_layout_t layout[MCA_COLL_HIER_LAYOUT_SLOTS]; /* (the same, for allgathers' layouts) */

    /* What was selected before us; every fallback goes here. */
    mca_coll_base_module_allreduce_fn_t prev_allreduce;
    mca_coll_base_module_t *prev_allreduce_module;
    mca_coll_base_module_allgather_fn_t prev_allgather;
    mca_coll_base_module_t *prev_allgather_module;
    mca_coll_base_module_reduce_scatter_fn_t prev_reduce_scatter;
    mca_coll_base_module_t *prev_reduce_scatter_module;
    mca_coll_base_module_reduce_scatter_block_fn_t prev_reduce_scatter_block;
    mca_coll_base_module_t *prev_reduce_scatter_block_module;
    mca_coll_base_module_bcast_fn_t prev_bcast;
    mca_coll_base_module_t *prev_bcast_module;
    /* ...and nonblocking (libnbc): NULL where none was, and then not ours either */
    mca_coll_base_module_iallreduce_fn_t prev_iallreduce;
    mca_coll_base_module_t *prev_iallreduce_module;
    mca_coll_base_module_iallgather_fn_t prev_iallgather;
    mca_coll_base_module_t *prev_iallgather_module;
    mca_coll_base_module_ireduce_scatter_fn_t prev_ireduce_scatter;
    mca_coll_base_module_t *prev_ireduce_scatter_module;
    mca_coll_base_module_ireduce_scatter_block_fn_t prev_ireduce_scatter_block;
    mca_coll_base_module_t *prev_ireduce_scatter_block_module;
    /* ...and persistent: what we replaced (6.0 puts it back); a start hier
     * does not serve runs the nonblocking call above */
    mca_coll_base_module_allreduce_init_fn_t prev_allreduce_init;
    mca_coll_base_module_t *prev_allreduce_init_module;
    mca_coll_base_module_allgather_init_fn_t prev_allgather_init;
    mca_coll_base_module_t *prev_allgather_init_module;
    mca_coll_base_module_reduce_scatter_init_fn_t prev_reduce_scatter_init;
    mca_coll_base_module_t *prev_reduce_scatter_init_module;
    mca_coll_base_module_reduce_scatter_block_init_fn_t prev_reduce_scatter_block_init;
    mca_coll_base_module_t *prev_reduce_scatter_block_init_module;
} mca_coll_hier_module_t;
OBJ_CLASS_DECLARATION(mca_coll_hier_module_t);

MCA_COLL_HIER_DECLSPEC extern const MCA_COLL_HIER_COMPONENT_T mca_coll_hier_component;

/* World rank of this process, known once MPI_COMM_WORLD got its module. */
extern int mca_coll_hier_world_rank;

int mca_coll_hier_init_query(bool enable_progress_threads, bool enable_mpi_threads);
mca_coll_base_module_t *mca_coll_hier_comm_query(ompi_communicator_t *comm, int *priority);

/* Parameters and MPI_T performance variables, registered from the core tables. */
int mca_coll_hier_register_params(void);
/* hier_params' string values: copied from the MCA system at open, freed at close. */
int mca_coll_hier_params_take_strings(void);
void mca_coll_hier_params_drop_strings(void);
int mca_coll_hier_register_pvars(void);
void mca_coll_hier_stats_report(void);

/* MPI datatype (and op) to core element type and element count. Returns
 * MCA_COLL_HIER_SERVED or the fallback reason. A user's commutative op maps
 * to HIER_OP_USER, one element per item of the datatype. */
hier_path_t mca_coll_hier_map_reduction(ompi_datatype_t *dtype, ompi_op_t *op, hier_dtype_t *dt_p,
                                        size_t *per_type_p, hier_op_t *op_p);
/* The same through the module's slots: O(1) for predefined handles. */
static inline hier_path_t mca_coll_hier_map(mca_coll_hier_module_t *hm, ompi_datatype_t *dtype, ompi_op_t *op,
                                            hier_dtype_t *dt_p, size_t *per_type_p, hier_op_t *op_p)
{
    mca_coll_hier_map_t *m = &hm->map[(((uintptr_t)dtype ^ ((uintptr_t)op >> 4)) >> 6) % MCA_COLL_HIER_MAP_SLOTS];
    if (m->dtype == dtype && m->op == op) {
        *dt_p = m->dt, *per_type_p = m->per_type, *op_p = m->hop;
        return m->path;
    }
    hier_dtype_t dt = HIER_DT_COUNT;
    hier_op_t hop = HIER_OP_COUNT;
    size_t per_type = 0;
    hier_path_t path = mca_coll_hier_map_reduction(dtype, op, &dt, &per_type, &hop);
    if (ompi_datatype_is_predefined(dtype) && ompi_op_is_intrinsic(op))
        *m = (mca_coll_hier_map_t){.dtype = dtype, .op = op, .path = path, .dt = dt, .hop = hop, .per_type = per_type};
    *dt_p = dt, *per_type_p = per_type, *op_p = hop;
    return path;
}
/* Around a core call with HIER_OP_USER (nothing for the others): the
 * calling thread's reductions call the user's function through Open MPI
 * (ompi_op_reduce) with the call's datatype. u lives until the end. */
typedef struct {
    ompi_op_t *op;
    ompi_datatype_t *dtype;
} mca_coll_hier_user_op_t;
void mca_coll_hier_user_op_install(mca_coll_hier_user_op_t *u, ompi_op_t *op, ompi_datatype_t *dtype);
/* (inline: every reduction passes here, and few are the user's) */
static inline void mca_coll_hier_user_op_begin(mca_coll_hier_user_op_t *u, hier_op_t hop, ompi_op_t *op,
                                               ompi_datatype_t *dtype)
{
    if (hop == HIER_OP_USER) mca_coll_hier_user_op_install(u, op, dtype);
}
static inline void mca_coll_hier_user_op_end(hier_op_t hop)
{
    if (hop == HIER_OP_USER) hier_comm_user_op_set(NULL);
}
/* The core's view of u (a request keeps u as long as itself). */
hier_user_op_t mca_coll_hier_user_op_core(mca_coll_hier_user_op_t *u);
/* Contiguous byte layout of count items: start offset (true lb) or a fallback reason. */
hier_path_t mca_coll_hier_map_bytes(ompi_datatype_t *dtype, size_t count, ptrdiff_t *lb_p);
/* The same through the module's slots: asked once per predefined datatype. */
static inline hier_path_t mca_coll_hier_layout(mca_coll_hier_module_t *hm, ompi_datatype_t *dtype, size_t count,
                                               ptrdiff_t *lb_p)
{
    mca_coll_hier_layout_t *l = &hm->layout[((uintptr_t)dtype >> 6) % MCA_COLL_HIER_LAYOUT_SLOTS];
    if (l->dtype == dtype) {
        if (l->path == MCA_COLL_HIER_SERVED) *lb_p = l->lb;
        return l->path;
    }
    if (!ompi_datatype_is_predefined(dtype)) return mca_coll_hier_map_bytes(dtype, count, lb_p);
    ptrdiff_t lb = 0;
    hier_path_t path = mca_coll_hier_map_bytes(dtype, 2, &lb); /* (two items: the answer for any count) */
    *l = (mca_coll_hier_layout_t){.dtype = dtype, .path = path, .lb = lb};
    if (path == MCA_COLL_HIER_SERVED) *lb_p = lb;
    return path;
}
/* Open MPI's datatype copy (pack, unpack) of counts in size_t: MPI_ERR_COUNT
 * where the line's counts cannot hold them. */
int mca_coll_hier_sndrcv(const void *sbuf, size_t scount, ompi_datatype_t *sdtype, void *rbuf, size_t rcount,
                         ompi_datatype_t *rdtype);
/* count items of a non-contiguous type at buf, in device memory: their
 * span (gaps included) copied into a host mirror *m the datatype engine
 * can walk (m->backend NULL: host memory, or a contiguous layout the core
 * stages itself). */
int mca_coll_hier_mirror_in_any(const void *buf, size_t count, ompi_datatype_t *dt, hier_accel_mirror_t *m);
/* (inline: every allgather asks, and most processes have no device memory) */
static inline int mca_coll_hier_mirror_in(const void *buf, size_t count, ompi_datatype_t *dt, hier_accel_mirror_t *m)
{
    if (!hier_accel_maybe_device()) {
        *m = (hier_accel_mirror_t){0};
        return OMPI_SUCCESS;
    }
    return mca_coll_hier_mirror_in_any(buf, count, dt, m);
}

/* Count the call, log it at verbose 10 (inline: every call passes here;
 * the log apart, so that counting needs no registers saved). */
void mca_coll_hier_account_log(mca_coll_hier_module_t *hm, hier_coll_t coll, hier_path_t path, size_t bytes);
static inline void mca_coll_hier_account(mca_coll_hier_module_t *hm, hier_coll_t coll, const hier_result_t *res,
                                         size_t bytes)
{
    int served = !hier_path_is_fallback(res->path);
    hier_stats_count(coll, res->path, bytes, served ? res->net_bytes : 0, served && res->staged);
    if (HIER_LOG_CALL <= hier_log_level) mca_coll_hier_account_log(hm, coll, res->path, bytes);
}
/* Turn a core error into an MPI error, logged once with its cause. */
int mca_coll_hier_error(mca_coll_hier_module_t *hm, hier_coll_t coll, hier_status_t st);

int mca_coll_hier_allreduce(const void *sbuf, void *rbuf, mca_coll_hier_count_t count, ompi_datatype_t *dtype,
                            ompi_op_t *op, ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_hier_allgather(const void *sbuf, mca_coll_hier_count_t scount, ompi_datatype_t *sdtype, void *rbuf,
                            mca_coll_hier_count_t rcount, ompi_datatype_t *rdtype, ompi_communicator_t *comm,
                            mca_coll_base_module_t *module);
int mca_coll_hier_reduce_scatter(const void *sbuf, void *rbuf, mca_coll_hier_counts_t rcounts, ompi_datatype_t *dtype,
                                 ompi_op_t *op, ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_hier_reduce_scatter_block(const void *sbuf, void *rbuf, mca_coll_hier_count_t rcount,
                                       ompi_datatype_t *dtype, ompi_op_t *op, ompi_communicator_t *comm,
                                       mca_coll_base_module_t *module);

/* Nonblocking (coll_hier_nb.c): requests of the core, completed from its
 * progress; at close, out of Open MPI's progress loop. */
void mca_coll_hier_nb_close(void);
int mca_coll_hier_iallreduce(const void *sbuf, void *rbuf, mca_coll_hier_count_t count, ompi_datatype_t *dtype,
                             ompi_op_t *op, ompi_communicator_t *comm, ompi_request_t **request,
                             mca_coll_base_module_t *module);
int mca_coll_hier_iallgather(const void *sbuf, mca_coll_hier_count_t scount, ompi_datatype_t *sdtype, void *rbuf,
                             mca_coll_hier_count_t rcount, ompi_datatype_t *rdtype, ompi_communicator_t *comm,
                             ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_hier_ireduce_scatter(const void *sbuf, void *rbuf, mca_coll_hier_counts_t rcounts,
                                  ompi_datatype_t *dtype, ompi_op_t *op, ompi_communicator_t *comm,
                                  ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_hier_ireduce_scatter_block(const void *sbuf, void *rbuf, mca_coll_hier_count_t rcount,
                                        ompi_datatype_t *dtype, ompi_op_t *op, ompi_communicator_t *comm,
                                        ompi_request_t **request, mca_coll_base_module_t *module);

/* Persistent (coll_hier_pc.c): MPI_*_init (4.1: MPIX_*_init). */
int mca_coll_hier_allreduce_init(const void *sbuf, void *rbuf, mca_coll_hier_count_t count, ompi_datatype_t *dtype,
                                 ompi_op_t *op, ompi_communicator_t *comm, struct ompi_info_t *info,
                                 ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_hier_allgather_init(const void *sbuf, mca_coll_hier_count_t scount, ompi_datatype_t *sdtype, void *rbuf,
                                 mca_coll_hier_count_t rcount, ompi_datatype_t *rdtype, ompi_communicator_t *comm,
                                 struct ompi_info_t *info, ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_hier_reduce_scatter_init(const void *sbuf, void *rbuf, mca_coll_hier_counts_t rcounts,
                                      ompi_datatype_t *dtype, ompi_op_t *op, ompi_communicator_t *comm,
                                      struct ompi_info_t *info, ompi_request_t **request,
                                      mca_coll_base_module_t *module);
int mca_coll_hier_reduce_scatter_block_init(const void *sbuf, void *rbuf, mca_coll_hier_count_t rcount,
                                            ompi_datatype_t *dtype, ompi_op_t *op, ompi_communicator_t *comm,
                                            struct ompi_info_t *info, ompi_request_t **request,
                                            mca_coll_base_module_t *module);

END_C_DECLS

#endif
