/* hier_core.c: what the process has once, whatever its communicators: the
 * machine's topology, the libfabric endpoint, Open MPI's progress, and the
 * order things are released in at the end. */
#include <pthread.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <unistd.h>

#include "base/hier_lock.h"
#include "base/hier_log.h"
#include "base/hier_params.h"
#include "comm/hier_core.h"
#include "net/hier_dev_mr.h"
#include "shm/hier_shm_pool.h"

static hier_topo_t *hier_core_topo;
static int hier_core_numa;   /* this process's NUMA domain, -1 unknown */
static long hier_core_ncpus; /* online CPUs, <= 0 unknown */
static pthread_once_t hier_core_topo_once = PTHREAD_ONCE_INIT;
static hier_fabric_t *_Atomic hier_core_fab; /* (read unlocked by every waiting thread) */
static int hier_core_fab_tried;
static int *hier_core_place; /* the node's ranks' NUMA domains, to place NICs (hier_core_fabric_place) */
static int hier_core_place_n, hier_core_place_me;

static void hier_core_topo_load(void);
/* Open MPI's progress; set by every communicator created (always the same
 * function), read by any waiting thread. */
static _Atomic hier_progress_fn_t hier_core_glue;

void hier_core_set_progress(hier_progress_fn_t progress)
{
    atomic_store_explicit(&hier_core_glue, progress, memory_order_relaxed);
}

hier_progress_fn_t hier_core_glue_progress(void)
{
    return atomic_load_explicit(&hier_core_glue, memory_order_relaxed);
}

/* A rank waiting in shared memory still polls the endpoint: its peers on
 * other nodes may need it to push its last writes (manual progress), or
 * to answer a connection request. */
void hier_core_progress(void)
{
    hier_fabric_t *fab = atomic_load_explicit(&hier_core_fab, memory_order_acquire);
    hier_progress_fn_t glue = hier_core_glue_progress();
    if (glue) glue();
    if (fab) (void)hier_chan_progress(fab);
}

static hier_fabric_t *hier_core_fabric_locked(void)
{
    hier_fabric_t *fab = NULL;
    if (hier_core_fab || hier_core_fab_tried) return hier_core_fab;
    hier_core_fab_tried = 1;
    pthread_once(&hier_core_topo_once, hier_core_topo_load);
    hier_fabric_config_t cfg = {.provider = hier_params.fabric_provider, .iface = hier_params.fabric_iface,
                                /* only where device buffers may come: FI_HMEM can cost host traffic (shm) */
                                .hmem = hier_params.device_peer_direct && !hier_params.device_force_staging &&
                                        hier_accel_has_backend(),
                                .cuda = hier_accel_cuda_backend() != NULL,
                                .max_rails = hier_params.fabric_rails_max, .stripe = hier_params.fabric_stripe,
                                .topo = hier_core_topo, .rank_numa = hier_core_place, .nlocal = hier_core_place_n,
                                .me = hier_core_place_me};
    if (hier_fabric_open(&cfg, &fab) != HIER_OK) fab = NULL;
    free(hier_core_place);
    hier_core_place = NULL;
    atomic_store_explicit(&hier_core_fab, fab, memory_order_release);
    return fab;
}

void hier_core_fabric_place(const int32_t *numa, int nlocal, int me)
{
    hier_lock_take();
    if (!hier_core_fab && !hier_core_fab_tried && !hier_core_place &&
        (hier_core_place = malloc(sizeof(int) * (size_t)nlocal))) {
        for (int i = 0; i < nlocal; i++) hier_core_place[i] = numa[i];
        hier_core_place_n = nlocal;
        hier_core_place_me = me;
    }
    hier_lock_drop();
}

hier_fabric_t *hier_core_fabric(void)
{
    hier_fabric_t *fab = atomic_load_explicit(&hier_core_fab, memory_order_acquire);
    if (fab) return fab; /* (every wait turn asks: no lock once open) */
    hier_lock_take();    /* (threads: one opens it) */
    fab = hier_core_fabric_locked();
    hier_lock_drop();
    return fab;
}

/* The machine's topology and this process's place in it, found once per
 * process whatever the threads do: asking the kernel for the binding lists
 * every thread (/proc/self/task), a cost every communicator's set-up would
 * pay, and Open MPI binds processes once, at launch. */
static void hier_core_topo_load(void)
{
    hier_locality_t loc;
    if (hier_topo_open(NULL, &hier_core_topo) != HIER_OK) hier_core_topo = NULL;
    hier_core_numa = hier_core_topo && hier_topo_self_locality(hier_core_topo, &loc) == HIER_OK ? loc.numa : -1;
    hier_core_ncpus = sysconf(_SC_NPROCESSORS_ONLN);
}

int hier_core_my_numa(int local_index)
{
    if (hier_params.numa_ranks_per_domain > 0) return local_index / hier_params.numa_ranks_per_domain;
    pthread_once(&hier_core_topo_once, hier_core_topo_load);
    return hier_core_numa;
}

/* Where this rank wants its NICs: near the accelerator this thread works
 * on when a device backend says which (and hwloc finds it on the PCI tree),
 * else near its binding. */
int hier_core_nic_numa(int local_index)
{
    char busid[32];
    hier_locality_t loc;
    pthread_once(&hier_core_topo_once, hier_core_topo_load);
    if (hier_accel_has_backend() && hier_core_topo && hier_accel_device_busid(busid, sizeof(busid)) == HIER_OK &&
        hier_topo_pci_locality(hier_core_topo, busid, &loc) == HIER_OK) {
        HIER_LOG_ONCE(HIER_LOG_COMM, "NICs are placed near this rank's accelerator %s (NUMA %d)", busid, loc.numa);
        return loc.numa;
    }
    return hier_core_my_numa(local_index);
}

long hier_core_cpus(void)
{
    pthread_once(&hier_core_topo_once, hier_core_topo_load);
    return hier_core_ncpus;
}

size_t hier_core_shm_budget(void)
{
    return hier_params.shm_budget;
}

/* Registrations go before the channels and the endpoint they belong to:
 * the device cache, the recycled segments' slots; then channels, then the
 * endpoint. The device backends are forgotten last (one a program
 * registered may live in code it unloads after MPI_Finalize). */
void hier_core_release(void)
{
    hier_dev_mr_flush();
    hier_shm_pool_trim(0);
    hier_peers_clear();
    hier_lock_take();
    hier_fabric_close(hier_core_fab);
    atomic_store_explicit(&hier_core_fab, NULL, memory_order_release);
    hier_core_fab_tried = 0;
    hier_lock_drop();
    hier_topo_close(hier_core_topo);
    hier_core_topo = NULL;
    hier_accel_reset();
}
