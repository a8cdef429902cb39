/* coll_hier_module.c: which communicators hier serves, the saved previous
 * module, and the services the core borrows from it. */
#include "coll_hier.h"

#include "ompi/group/group.h"
#include "ompi/mca/mtl/base/base.h"
#include "ompi/mca/pml/base/base.h"
#include "ompi/mca/pml/pml.h"
#include "ompi/mca/coll/base/base.h"
#include "opal/mca/btl/base/base.h"
#include "ompi/mca/coll/base/coll_base_functions.h"
#include "ompi/proc/proc.h"
#include "opal/mca/hwloc/hwloc-internal.h"
#include "opal/runtime/opal_progress.h"
#if MCA_COLL_HIER_HAVE_ACCELERATOR
#include "opal/mca/accelerator/accelerator.h"
#include "opal/mca/accelerator/base/base.h"
#endif

#include <limits.h>
#include <string.h>

#include "accel/hier_accel.h"
#include "base/hier_lock.h"
#include "base/hier_log.h"
#include "base/hier_params.h"
#include "base/hier_topo.h"

static void mca_coll_hier_module_construct(mca_coll_hier_module_t *hm)
{
    hm->comm = NULL;
    hm->core = NULL;
    hm->comm_fallback = MCA_COLL_HIER_SERVED;
    memset(hm->map, 0, sizeof(hm->map));
    memset(hm->layout, 0, sizeof(hm->layout));
    hm->prev_allreduce_module = hm->prev_allgather_module = NULL;
    hm->prev_reduce_scatter_module = hm->prev_reduce_scatter_block_module = hm->prev_bcast_module = NULL;
    hm->prev_iallreduce_module = hm->prev_iallgather_module = NULL;
    hm->prev_ireduce_scatter_module = hm->prev_ireduce_scatter_block_module = NULL;
    hm->prev_allreduce_init_module = hm->prev_allgather_init_module = NULL;
    hm->prev_reduce_scatter_init_module = hm->prev_reduce_scatter_block_init_module = NULL;
}

static void mca_coll_hier_module_destruct(mca_coll_hier_module_t *hm)
{
    hier_comm_destroy(hm->core);
    mca_coll_base_module_t **prev[] = {&hm->prev_allreduce_module, &hm->prev_allgather_module,
                                       &hm->prev_reduce_scatter_module, &hm->prev_reduce_scatter_block_module,
                                       &hm->prev_bcast_module, &hm->prev_iallreduce_module,
                                       &hm->prev_iallgather_module, &hm->prev_ireduce_scatter_module,
                                       &hm->prev_ireduce_scatter_block_module, &hm->prev_allreduce_init_module,
                                       &hm->prev_allgather_init_module, &hm->prev_reduce_scatter_init_module,
                                       &hm->prev_reduce_scatter_block_init_module};
    for (size_t i = 0; i < sizeof(prev) / sizeof(prev[0]); i++)
        if (*prev[i]) OBJ_RELEASE(*prev[i]);
}

OBJ_CLASS_INSTANCE(mca_coll_hier_module_t, mca_coll_base_module_t, mca_coll_hier_module_construct,
                   mca_coll_hier_module_destruct);

#if MCA_COLL_HIER_HAVE_ACCELERATOR
static int mca_coll_hier_accel_is_device(const void *p)
{
    int dev;
    uint64_t flags;
    return opal_accelerator.check_addr(p, &dev, &flags);
}
#endif

/* The machine's topology if Open MPI has loaded it already (5.0 maps the
 * one its daemon found) and its hwloc is ours, not an embedded copy; NULL:
 * the core loads its own (Open MPI 4.1 would discover one with its PCI
 * devices, 3x what the core needs on one node). */
static void *mca_coll_hier_topology(void)
{
    if ((hier_topo_load_fn_t)hwloc_topology_load != hier_topo_library()) return NULL;
    return opal_hwloc_topology;
}

/* enable_mpi_threads: MPI_THREAD_MULTIPLE, collectives on different
 * communicators may run at once; the shared endpoint then takes a lock.
 * Open MPI 5's accelerator framework, when a real component (not null) was
 * selected, tells the core device memory its own backends cannot. Where
 * Open MPI has the machine's topology loaded when the core first needs
 * one, the core borrows it. */
int mca_coll_hier_init_query(bool enable_progress_threads, bool enable_mpi_threads)
{
    (void)enable_progress_threads;
    if (hier_params.progress_thread < 0) /* (auto: where a CPU is free for it) */
        hier_params.progress_thread = hier_req_thread_choose((int)ompi_process_info.num_local_peers + 1);
    hier_lock_set_threads(enable_mpi_threads, hier_params.progress_thread);
    hier_comm_lend_topology(mca_coll_hier_topology);
#if MCA_COLL_HIER_HAVE_ACCELERATOR
    const char *acc = opal_accelerator_base_selected_component.base_version.mca_component_name;
    if (strcmp(acc, "null") != 0) {
        hier_accel_set_foreign(mca_coll_hier_accel_is_device);
        HIER_LOG(HIER_LOG_COMM, "Open MPI's accelerator component %s tells device memory of runtimes hier has "
                 "no backend for (they fall back)", acc);
    }
#endif
    return OMPI_SUCCESS;
}

/* ---- services for the core ------------------------------------------------ */

/* The core's own exchanges at a communicator's set-up (its records, its
 * agreements) run Open MPI's base algorithms over point-to-point, not the
 * previous module: where that is han (5.0 and 6.0 by default), its first
 * call on a communicator builds communicators of its own (6 on 5.0, 7 on
 * 6.0; tests/mpi/test_churn counts them), which a communicator hier serves
 * never uses, and which, with MPI_THREAD_MULTIPLE
 * and first calls on several communicators at once, hang in Open MPI's
 * communicator-id agreement (2 runs in 40 of tests/mpi/test_threads on 6.0
 * without hier). Recursive doubling (Bruck's where the size is not a power
 * of two) keeps them log2(size) steps. The base algorithms keep their
 * requests in the module's base_data (Open MPI's module destructor frees it). */
static mca_coll_base_module_t *mca_coll_hier_core_module(mca_coll_hier_module_t *hm)
{
    if (!hm->super.base_data) hm->super.base_data = OBJ_NEW(mca_coll_base_comm_t);
    return hm->super.base_data ? &hm->super : NULL;
}

static int mca_coll_hier_core_allgather(const void *sbuf, void *rbuf, size_t len, void *arg)
{
    mca_coll_hier_module_t *hm = arg;
    mca_coll_base_module_t *m = mca_coll_hier_core_module(hm);
    if (!m) return OMPI_ERR_OUT_OF_RESOURCE;
    hier_stats_count_exchange();
    return ompi_coll_base_allgather_intra_recursivedoubling(sbuf, (mca_coll_hier_count_t)len, MPI_BYTE, rbuf,
                                                            (mca_coll_hier_count_t)len, MPI_BYTE, hm->comm, m);
}

static int mca_coll_hier_core_agree(int *values, int n, void *arg)
{
    mca_coll_hier_module_t *hm = arg;
    mca_coll_base_module_t *m = mca_coll_hier_core_module(hm);
    if (!m) return OMPI_ERR_OUT_OF_RESOURCE;
    hier_stats_count_exchange();
    return ompi_coll_base_allreduce_intra_recursivedoubling(MPI_IN_PLACE, values, n, MPI_INT, MPI_MIN, hm->comm, m);
}

/* A set-up's exchanges without waiting (hier_comm_ops.h): a send and a
 * receive on a tag of hier's own, so that no collective's messages match
 * them: the far end of the tags Open MPI gives collectives (4.1 and 5.0:
 * hcoll's last, which it counts down to from its base; 6.0 ends them at
 * MCA_COLL_BASE_TAG_NEIGHBOR_END, far above); the network level's mailboxes
 * over the point-to-point (net/hier_pml.h) next to it. */
#define MCA_COLL_HIER_TAG_SETUP (-INT_MAX + 1)
#define MCA_COLL_HIER_TAG_MBOX(mbox) (-INT_MAX + 2 + (int)(mbox))
_Static_assert(HIER_PML_MBOXES <= 8, "hier's tags stay at the far end of the collectives' range");

typedef struct {
    ompi_request_t *reqs[2];
} mca_coll_hier_sendrecv_t;

static int mca_coll_hier_core_sendrecv(int to, const void *sbuf, size_t slen, int from, void *rbuf, size_t rlen,
                                       void *arg, void **pending_p)
{
    mca_coll_hier_module_t *hm = arg;
    mca_coll_hier_sendrecv_t *p = malloc(sizeof(*p));
    if (!p) return OMPI_ERR_OUT_OF_RESOURCE;
    int rc = MCA_PML_CALL(irecv(rbuf, rlen, MPI_BYTE, from, MCA_COLL_HIER_TAG_SETUP, hm->comm, &p->reqs[1]));
    if (rc != OMPI_SUCCESS) {
        free(p);
        return rc;
    }
    rc = MCA_PML_CALL(isend(sbuf, slen, MPI_BYTE, to, MCA_COLL_HIER_TAG_SETUP, MCA_PML_BASE_SEND_STANDARD,
                            hm->comm, &p->reqs[0]));
    if (rc != OMPI_SUCCESS) { /* (the receive stays posted: nothing can cancel it safely; it is lost with p) */
        free(p);
        return rc;
    }
    *pending_p = p;
    return OMPI_SUCCESS;
}

/* (no progress here: the caller's loop, Open MPI's progress, drives them) */
static int mca_coll_hier_core_sendrecv_test(void *pending, void *arg)
{
    mca_coll_hier_sendrecv_t *p = pending;
    (void)arg;
    if (!REQUEST_COMPLETE(p->reqs[0]) || !REQUEST_COMPLETE(p->reqs[1])) return 0;
    int ok = p->reqs[0]->req_status.MPI_ERROR == MPI_SUCCESS && p->reqs[1]->req_status.MPI_ERROR == MPI_SUCCESS;
    ompi_request_free(&p->reqs[0]);
    ompi_request_free(&p->reqs[1]);
    free(p);
    return ok ? 1 : -1;
}

/* ---- the network level over Open MPI's point-to-point (net/hier_pml.h) ---- */

static int mca_coll_hier_p2p_isend(const void *buf, size_t len, int to, uint32_t mbox, void *arg, void **req_p)
{
    mca_coll_hier_module_t *hm = arg;
    ompi_request_t *req;
    if (MCA_PML_CALL(isend(buf, len, MPI_BYTE, to, MCA_COLL_HIER_TAG_MBOX(mbox), MCA_PML_BASE_SEND_STANDARD, hm->comm,
                           &req)) != OMPI_SUCCESS)
        return -1;
    *req_p = req;
    return 0;
}

static int mca_coll_hier_p2p_irecv(void *buf, size_t len, int from, uint32_t mbox, void *arg, void **req_p)
{
    mca_coll_hier_module_t *hm = arg;
    ompi_request_t *req;
    if (MCA_PML_CALL(irecv(buf, len, MPI_BYTE, from, MCA_COLL_HIER_TAG_MBOX(mbox), hm->comm, &req)) != OMPI_SUCCESS)
        return -1;
    *req_p = req;
    return 0;
}

/* (no progress here: the executor's waits run Open MPI's) */
static int mca_coll_hier_p2p_test(void *req, size_t *len_p)
{
    ompi_request_t *r = req;
    if (!REQUEST_COMPLETE(r)) return 0;
    int err = r->req_status.MPI_ERROR;
    *len_p = r->req_status._ucount;
    ompi_request_free(&r);
    return err == MPI_SUCCESS ? 1 : err == MPI_ERR_TRUNCATE ? HIER_PML_TRUNCATED : -1;
}

static void mca_coll_hier_p2p_cancel(void *req)
{
    ompi_request_t *r = req;
    ompi_request_cancel(r);
    ompi_request_free(&r);
}

/* Whether the MPI library drives libfabric itself: cm over the ofi MTL, or
 * an ofi or usnic BTL in use (what keeps hier's own thread from opening
 * libfabric: hier_comm_fabric_driven). */
static int mca_coll_hier_mpi_drives_libfabric(void)
{
    mca_btl_base_selected_module_t *m;
    if (!strcmp(mca_pml_base_selected_component.pmlm_version.mca_component_name, "cm"))
        return !ompi_mtl_base_selected_component ||
               !strcmp(ompi_mtl_base_selected_component->mtl_version.mca_component_name, "ofi");
    OPAL_LIST_FOREACH (m, &mca_btl_base_modules_initialized, mca_btl_base_selected_module_t) {
        const char *name = m->btl_component->btl_version.mca_component_name;
        if (!strcmp(name, "ofi") || !strcmp(name, "usnic")) return 1;
    }
    return 0;
}

/* Whether communicator rank r shares this process's node (Open MPI's
 * locality, or virtual nodes of ranks_per_node consecutive world ranks),
 * and its process's identity in the job (jobid, vpid). */
static int mca_coll_hier_core_peer(int r, uint64_t *proc_p, void *arg)
{
    mca_coll_hier_module_t *hm = arg;
    int k = hier_params.ranks_per_node;
    ompi_proc_t *p = ompi_comm_peer_lookup(hm->comm, r), *me = ompi_comm_peer_lookup(hm->comm, ompi_comm_rank(hm->comm));
    uint32_t vpid = p->super.proc_name.vpid;
    *proc_p = (uint64_t)p->super.proc_name.jobid << 32 | vpid;
    if (p == me) return 1;
    if (k > 0) return vpid / (uint32_t)k == me->super.proc_name.vpid / (uint32_t)k;
    return OPAL_PROC_ON_LOCAL_NODE(p->super.proc_flags) != 0;
}

static int mca_coll_hier_core_oversubscribed(void)
{
    return opal_progress_yield_when_idle;
}

/* ---- selection ------------------------------------------------------------ */

/* Why hier cannot serve this communicator at all, or SERVED. */
static hier_path_t mca_coll_hier_comm_verdict(ompi_communicator_t *comm, const char **why_p)
{
    if (OMPI_COMM_IS_INTER(comm)) {
        *why_p = "intercommunicator";
        return HIER_PATH_FALLBACK_INTERCOMM;
    }
    *why_p = NULL;
    return MCA_COLL_HIER_SERVED;
}

/* What the communicator has now (the components of lower priority chose
 * it) becomes our fallback; 6.0 then takes our function in its place
 * (4.1 and 5.0 copy the module's functions themselves after enable). */
#define MCA_COLL_HIER_SAVE(hm, comm, api)                                 \
    do {                                                                  \
        (hm)->prev_##api = (comm)->c_coll->coll_##api;                    \
        (hm)->prev_##api##_module = (comm)->c_coll->coll_##api##_module;  \
        if ((hm)->prev_##api##_module) OBJ_RETAIN((hm)->prev_##api##_module); \
    } while (0)
#if MCA_COLL_HIER_INSTALLS_API
#define MCA_COLL_HIER_INSTALL(hm, comm, api) \
    MCA_COLL_INSTALL_API(comm, api, mca_coll_hier_##api, &(hm)->super, "hier")
#define MCA_COLL_HIER_RESTORE(hm, comm, api) \
    MCA_COLL_INSTALL_API(comm, api, (hm)->prev_##api, (hm)->prev_##api##_module, "hier")

/* 6.0: the communicator goes, or another module takes over: what we
 * replaced goes back, in the reverse order of enable. */
static int mca_coll_hier_module_disable(mca_coll_base_module_t *module, ompi_communicator_t *comm)
{
    mca_coll_hier_module_t *hm = (mca_coll_hier_module_t *)module;
    if (hm->super.coll_reduce_scatter_block_init) MCA_COLL_HIER_RESTORE(hm, comm, reduce_scatter_block_init);
    if (hm->super.coll_reduce_scatter_init) MCA_COLL_HIER_RESTORE(hm, comm, reduce_scatter_init);
    if (hm->super.coll_allgather_init) MCA_COLL_HIER_RESTORE(hm, comm, allgather_init);
    if (hm->super.coll_allreduce_init) MCA_COLL_HIER_RESTORE(hm, comm, allreduce_init);
    if (hm->prev_ireduce_scatter_block) MCA_COLL_HIER_RESTORE(hm, comm, ireduce_scatter_block);
    if (hm->prev_ireduce_scatter) MCA_COLL_HIER_RESTORE(hm, comm, ireduce_scatter);
    if (hm->prev_iallgather) MCA_COLL_HIER_RESTORE(hm, comm, iallgather);
    if (hm->prev_iallreduce) MCA_COLL_HIER_RESTORE(hm, comm, iallreduce);
    MCA_COLL_HIER_RESTORE(hm, comm, reduce_scatter_block);
    MCA_COLL_HIER_RESTORE(hm, comm, reduce_scatter);
    MCA_COLL_HIER_RESTORE(hm, comm, allgather);
    MCA_COLL_HIER_RESTORE(hm, comm, allreduce);
    return OMPI_SUCCESS;
}
#endif

/* The nonblocking calls: ours where a previous component has them (our
 * fallback), else none (4.1 and 5.0 copy what the module has); the
 * persistent ones where the previous component has both the persistent
 * call (MPI checks for it) and the nonblocking one (a start hier does not
 * serve runs it). */
static void mca_coll_hier_enable_nonblocking(mca_coll_hier_module_t *hm, ompi_communicator_t *comm)
{
    MCA_COLL_HIER_SAVE(hm, comm, iallreduce);
    MCA_COLL_HIER_SAVE(hm, comm, iallgather);
    MCA_COLL_HIER_SAVE(hm, comm, ireduce_scatter);
    MCA_COLL_HIER_SAVE(hm, comm, ireduce_scatter_block);
    MCA_COLL_HIER_SAVE(hm, comm, allreduce_init);
    MCA_COLL_HIER_SAVE(hm, comm, allgather_init);
    MCA_COLL_HIER_SAVE(hm, comm, reduce_scatter_init);
    MCA_COLL_HIER_SAVE(hm, comm, reduce_scatter_block_init);
    if (!hm->prev_iallreduce) hm->super.coll_iallreduce = NULL;
    if (!hm->prev_iallgather) hm->super.coll_iallgather = NULL;
    if (!hm->prev_ireduce_scatter) hm->super.coll_ireduce_scatter = NULL;
    if (!hm->prev_ireduce_scatter_block) hm->super.coll_ireduce_scatter_block = NULL;
    if (!hm->prev_iallreduce || !hm->prev_allreduce_init) hm->super.coll_allreduce_init = NULL;
    if (!hm->prev_iallgather || !hm->prev_allgather_init) hm->super.coll_allgather_init = NULL;
    if (!hm->prev_ireduce_scatter || !hm->prev_reduce_scatter_init) hm->super.coll_reduce_scatter_init = NULL;
    if (!hm->prev_ireduce_scatter_block || !hm->prev_reduce_scatter_block_init)
        hm->super.coll_reduce_scatter_block_init = NULL;
}

static int mca_coll_hier_module_enable(mca_coll_base_module_t *module, ompi_communicator_t *comm)
{
    mca_coll_hier_module_t *hm = (mca_coll_hier_module_t *)module;
    const char *why;

    MCA_COLL_HIER_SAVE(hm, comm, allreduce);
    MCA_COLL_HIER_SAVE(hm, comm, allgather);
    MCA_COLL_HIER_SAVE(hm, comm, reduce_scatter);
    MCA_COLL_HIER_SAVE(hm, comm, reduce_scatter_block);
    if (!hm->prev_allreduce || !hm->prev_allgather || !hm->prev_reduce_scatter || !hm->prev_reduce_scatter_block) {
        HIER_LOG(HIER_LOG_COMM, "comm %s (cid %u): no previous component provides every collective hier needs; "
                 "disqualifying myself", comm->c_name, mca_coll_hier_comm_cid(comm));
        return OMPI_ERROR;
    }
    if (comm == &ompi_mpi_comm_world.comm) mca_coll_hier_world_rank = ompi_comm_rank(comm);
    mca_coll_hier_enable_nonblocking(hm, comm);

    hm->comm = comm;
    hm->comm_fallback = mca_coll_hier_comm_verdict(comm, &why);
    static int told; /* (the MPI library's transports are chosen before any communicator) */
    if (!told) {
        told = 1;
        hier_comm_fabric_driven(mca_coll_hier_mpi_drives_libfabric());
    }
    if (hm->comm_fallback == MCA_COLL_HIER_SERVED) {
        hier_comm_ops_t ops = {.allgather = mca_coll_hier_core_allgather, .agree = mca_coll_hier_core_agree,
                               .sendrecv = mca_coll_hier_core_sendrecv,
                               .sendrecv_test = mca_coll_hier_core_sendrecv_test,
                               .peer = mca_coll_hier_core_peer, .progress = MCA_COLL_HIER_PROGRESS,
                               .oversubscribed = mca_coll_hier_core_oversubscribed,
                               .p2p = {.isend = mca_coll_hier_p2p_isend, .irecv = mca_coll_hier_p2p_irecv,
                                       .test = mca_coll_hier_p2p_test, .cancel = mca_coll_hier_p2p_cancel,
                                       .arg = hm},
                               .arg = hm};
        hier_status_t st = hier_comm_create(ompi_comm_size(comm), ompi_comm_rank(comm), &ops, &hm->core);
        if (st != HIER_OK) return OMPI_ERR_OUT_OF_RESOURCE;
        HIER_LOG(HIER_LOG_COMM, "comm %s (cid %u, %d ranks): hier serves it from its first collective on",
                 comm->c_name, mca_coll_hier_comm_cid(comm), ompi_comm_size(comm));
    } else {
        HIER_LOG(HIER_LOG_COMM, "comm %s (cid %u, %d ranks): not served, %s; calls go to the previous component",
                 comm->c_name, mca_coll_hier_comm_cid(comm), ompi_comm_size(comm), why);
    }
#if MCA_COLL_HIER_INSTALLS_API
    if (hm->super.coll_allreduce_init) MCA_COLL_HIER_INSTALL(hm, comm, allreduce_init);
    if (hm->super.coll_allgather_init) MCA_COLL_HIER_INSTALL(hm, comm, allgather_init);
    if (hm->super.coll_reduce_scatter_init) MCA_COLL_HIER_INSTALL(hm, comm, reduce_scatter_init);
    if (hm->super.coll_reduce_scatter_block_init) MCA_COLL_HIER_INSTALL(hm, comm, reduce_scatter_block_init);
    if (hm->prev_iallreduce) MCA_COLL_HIER_INSTALL(hm, comm, iallreduce);
    if (hm->prev_iallgather) MCA_COLL_HIER_INSTALL(hm, comm, iallgather);
    if (hm->prev_ireduce_scatter) MCA_COLL_HIER_INSTALL(hm, comm, ireduce_scatter);
    if (hm->prev_ireduce_scatter_block) MCA_COLL_HIER_INSTALL(hm, comm, ireduce_scatter_block);
    MCA_COLL_HIER_INSTALL(hm, comm, allreduce);
    MCA_COLL_HIER_INSTALL(hm, comm, allgather);
    MCA_COLL_HIER_INSTALL(hm, comm, reduce_scatter);
    MCA_COLL_HIER_INSTALL(hm, comm, reduce_scatter_block);
#endif
    return OMPI_SUCCESS;
}

mca_coll_base_module_t *mca_coll_hier_comm_query(ompi_communicator_t *comm, int *priority)
{
    if (hier_params.priority <= 0) return NULL;
    mca_coll_hier_module_t *hm = OBJ_NEW(mca_coll_hier_module_t);
    if (!hm) return NULL;
    (void)comm;
    *priority = hier_params.priority;
    hm->super.coll_module_enable = mca_coll_hier_module_enable;
#if MCA_COLL_HIER_INSTALLS_API
    hm->super.coll_module_disable = mca_coll_hier_module_disable;
#endif
    hm->super.coll_allreduce = mca_coll_hier_allreduce;
    hm->super.coll_allgather = mca_coll_hier_allgather;
    hm->super.coll_reduce_scatter = mca_coll_hier_reduce_scatter;
    hm->super.coll_reduce_scatter_block = mca_coll_hier_reduce_scatter_block;
    hm->super.coll_iallreduce = mca_coll_hier_iallreduce;
    hm->super.coll_iallgather = mca_coll_hier_iallgather;
    hm->super.coll_ireduce_scatter = mca_coll_hier_ireduce_scatter;
    hm->super.coll_ireduce_scatter_block = mca_coll_hier_ireduce_scatter_block;
    hm->super.coll_allreduce_init = mca_coll_hier_allreduce_init;
    hm->super.coll_allgather_init = mca_coll_hier_allgather_init;
    hm->super.coll_reduce_scatter_init = mca_coll_hier_reduce_scatter_init;
    hm->super.coll_reduce_scatter_block_init = mca_coll_hier_reduce_scatter_block_init;
    return &hm->super;
}

/* ---- per-call bookkeeping -------------------------------------------------- */

__attribute__((cold)) void mca_coll_hier_account_log(mca_coll_hier_module_t *hm, hier_coll_t coll, hier_path_t path,
                                                     size_t bytes)
{
    HIER_LOG(HIER_LOG_CALL, "%s comm cid %u: %zu bytes via %s", hier_coll_name(coll),
             mca_coll_hier_comm_cid(hm->comm), bytes, hier_path_name(path));
}

int mca_coll_hier_error(mca_coll_hier_module_t *hm, hier_coll_t coll, hier_status_t st)
{
    HIER_ERROR("%s on comm %s (cid %u) failed: %s", hier_coll_name(coll), hm->comm->c_name,
               mca_coll_hier_comm_cid(hm->comm), hier_status_str(st));
    if (st == HIER_ERR_BUFFER) return MPI_ERR_BUFFER;
    if (st == HIER_ERR_MISMATCH) return MPI_ERR_ARG; /* (the arguments differ between ranks: logged above) */
    return st == HIER_ERR_NO_MEMORY ? OMPI_ERR_OUT_OF_RESOURCE : OMPI_ERROR;
}
