/* hier_proc.c: what the process has once, whatever its communicators: the
 * machine's topology, the libfabric endpoint, Open MPI's progress, and the
 * order things are released in at the end. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/hier_lock.h"
#include "base/hier_log.h"
#include "base/hier_params.h"
#include "comm/hier_proc.h"
#include "net/hier_dev_mr.h"
#include "net/hier_fi.h"
#include "net/hier_pml.h"
#include "shm/hier_shm_pool.h"

static hier_topo_t *hier_proc_topo;
static void *(*hier_proc_lent_topo)(void); /* the MPI library's topology (hier_proc_lend_topology) */
static int hier_proc_numa;   /* this process's NUMA domain, -1 unknown */
static pthread_once_t hier_proc_topo_once = PTHREAD_ONCE_INIT;
static hier_fabric_t *_Atomic hier_proc_fab; /* (read unlocked by every waiting thread) */
static int hier_proc_fab_tried;
static int *hier_proc_place; /* the node's ranks' NUMA domains, to place NICs (hier_proc_fabric_place) */
/* fabric_warmup: the endpoint's costly first step in a thread, started by
 * the first call between nodes worth it (hier_comm_setup.c), joined before
 * the endpoint opens */
enum { HIER_WARM_IDLE, HIER_WARM_RUNNING, HIER_WARM_DONE, HIER_WARM_JOINED, HIER_WARM_NO_THREAD };
static pthread_t hier_proc_warm_thread;
static _Atomic int hier_proc_warm_state;
static int hier_proc_place_n, hier_proc_place_me;
static int hier_proc_fab_driven = 1; /* the MPI library drives a libfabric it loaded (the glue says; unknown: yes) */

static void hier_proc_topo_load(void);
/* Open MPI's progress; set by every communicator created (always the same
 * function), read by any waiting thread. */
static _Atomic hier_progress_fn_t hier_proc_glue;

void hier_proc_set_progress(hier_progress_fn_t progress)
{
    atomic_store_explicit(&hier_proc_glue, progress, memory_order_relaxed);
}

static hier_progress_fn_t hier_proc_glue_progress(void)
{
    return atomic_load_explicit(&hier_proc_glue, memory_order_relaxed);
}

void hier_proc_progress(void)
{
    hier_progress_fn_t glue = hier_proc_glue_progress();
    if (glue) glue();
    hier_chan_poll();
}

/* What the endpoint is asked for, but where it sits. */
static hier_fabric_config_t hier_proc_fabric_config(void)
{
    return (hier_fabric_config_t){.provider = hier_params.fabric_provider, .iface = hier_params.fabric_iface,
                                  .profile = hier_params.fabric_profile,
                                  /* only where device buffers may come: FI_HMEM can cost host traffic (shm) */
                                  .hmem = hier_params.device_peer_direct && !hier_params.device_force_staging &&
                                          hier_accel_has_backend(),
                                  .cuda = hier_accel_cuda_backend() != NULL,
                                  .max_rails = hier_params.fabric_rails_max, .stripe = hier_params.fabric_stripe};
}

/* Niceness the opening thread adds to the process's: loading libfabric
 * and finding its providers is 0.15 s of CPU here (reading /proc/kallsyms),
 * which, where ranks outnumber cores, slowed the calls running meanwhile
 * (the slowest call of a mixed run on 2 x 2 fake nodes, 2 cores: 16-24 ms at
 * the process's priority, 10-12 at +10, docs/performance.md). Not idle: a
 * thread of SCHED_IDLE, or nice 19 where ranks spin on every core, waits
 * for seconds, and the providers' start-up calibrations then take that long. */
#define HIER_PROC_WARM_NICE 10

static void *hier_proc_warm_main(void *arg)
{
    hier_fabric_config_t cfg = hier_proc_fabric_config();
    (void)arg;
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, 0);
    if (errno == 0) /* (this thread alone: Linux applies it to the calling thread's id) */
        (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid),
                          nice + HIER_PROC_WARM_NICE > 19 ? 19 : nice + HIER_PROC_WARM_NICE);
    hier_fabric_prefetch(&cfg);
    atomic_store_explicit(&hier_proc_warm_state, HIER_WARM_DONE, memory_order_release);
    return NULL;
}

/* (locked, or at exit) */
static void hier_proc_warm_join(void)
{
    int s = atomic_load_explicit(&hier_proc_warm_state, memory_order_acquire);
    if (s != HIER_WARM_RUNNING && s != HIER_WARM_DONE) return;
    pthread_join(hier_proc_warm_thread, NULL);
    atomic_store_explicit(&hier_proc_warm_state, HIER_WARM_JOINED, memory_order_relaxed);
}

/* At exit (or at the component's unloading, whose functions glibc runs
 * then): hier's threads end before libfabric's destructor frees what they
 * use. A program that initialised MPI_T and never finalised it keeps Open
 * MPI's frameworks open, so hier's close (hier_proc_release) never runs,
 * and the opening thread was still in fi_getinfo at exit: a segfault after
 * a passing test, 2 runs in 100 of test_requests on 2 x 1. */
static pid_t hier_proc_threads_pid; /* (a forked child that exits has none of them to join) */
static void (*_Atomic hier_proc_thread_stop)(void); /* the progress thread's (hier_req.h) */

static void hier_proc_at_exit(void)
{
    if (getpid() != hier_proc_threads_pid) return;
    void (*stop)(void) = atomic_load_explicit(&hier_proc_thread_stop, memory_order_acquire);
    if (stop) stop();
    hier_proc_warm_join();
}

static void hier_proc_at_exit_register(void)
{
    hier_proc_threads_pid = getpid();
    atexit(hier_proc_at_exit);
}

void hier_proc_threads_guard(void (*stop)(void))
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (stop) atomic_store_explicit(&hier_proc_thread_stop, stop, memory_order_release);
    pthread_once(&once, hier_proc_at_exit_register);
}

void hier_proc_set_fabric_driven(int driven)
{
    hier_proc_fab_driven = driven;
}

int hier_proc_fabric_shared(void)
{
    return hier_proc_fab_driven && hier_fi_shared();
}

void hier_proc_fabric_warm(void)
{
    hier_lock_take();
    if (hier_params.fabric_warmup && !hier_proc_fab && !hier_proc_fab_tried &&
        atomic_load_explicit(&hier_proc_warm_state, memory_order_relaxed) == HIER_WARM_IDLE) {
        /* (a libfabric someone else drives is called from MPI's threads only;
         * one not loaded yet is loaded by the thread: hier_fi_shared) */
        const char *why = hier_proc_fabric_shared() ? "the MPI library drives libfabric itself (an ofi BTL or MTL)"
                                                    : NULL;
        /* (running before the thread starts: a thread that ends at once, libfabric already
         * initialised by the MPI library's components, must not have its DONE overwritten) */
        atomic_store_explicit(&hier_proc_warm_state, HIER_WARM_RUNNING, memory_order_relaxed);
        if (!why) hier_proc_threads_guard(NULL);
        int ret = why ? 0 : pthread_create(&hier_proc_warm_thread, NULL, hier_proc_warm_main, NULL);
        if (!why && ret == 0) {
            HIER_LOG(HIER_LOG_COMM, "libfabric opens in a thread of hier's, in the background");
        } else {
            atomic_store_explicit(&hier_proc_warm_state, HIER_WARM_NO_THREAD, memory_order_relaxed);
            HIER_LOG(HIER_LOG_COMM, "%s%s: the call that asks whether every endpoint is open opens it, not a thread of hier's",
                     why ? why : "no thread to open libfabric in the background: ", why ? "" : strerror(ret));
        }
    }
    hier_lock_drop();
}

int hier_proc_fabric_ready(void)
{
    if (!hier_params.fabric_warmup || atomic_load_explicit(&hier_proc_fab, memory_order_acquire)) return 1;
    return atomic_load_explicit(&hier_proc_warm_state, memory_order_acquire) >= HIER_WARM_DONE;
}

static hier_fabric_t *hier_proc_fabric_locked(void)
{
    hier_fabric_t *fab = NULL;
    if (hier_proc_fab || hier_proc_fab_tried) return hier_proc_fab;
    hier_proc_fab_tried = 1;
    uint64_t t0 = hier_wait_now_ms();
    pthread_once(&hier_proc_topo_once, hier_proc_topo_load);
    hier_proc_warm_join(); /* (its answer is step 1 of the open) */
    hier_fabric_config_t cfg = hier_proc_fabric_config();
    cfg.topo = hier_proc_topo;
    cfg.rank_numa = hier_proc_place;
    cfg.nlocal = hier_proc_place_n;
    cfg.me = hier_proc_place_me;
    if (hier_fabric_open(&cfg, &fab) != HIER_OK) fab = NULL;
    HIER_LOG(HIER_LOG_DEBUG, "libfabric endpoint %s on this thread in %llu ms", fab ? "opened" : "not opened",
             (unsigned long long)(hier_wait_now_ms() - t0));
    free(hier_proc_place);
    hier_proc_place = NULL;
    atomic_store_explicit(&hier_proc_fab, fab, memory_order_release);
    hier_chan_poll_on(fab);
    return fab;
}

void hier_proc_fabric_place(const int32_t *numa, int nlocal, int me)
{
    hier_lock_take();
    if (!hier_proc_fab && !hier_proc_fab_tried && !hier_proc_place &&
        (hier_proc_place = malloc(sizeof(int) * (size_t)nlocal))) {
        for (int i = 0; i < nlocal; i++) hier_proc_place[i] = numa[i];
        hier_proc_place_n = nlocal;
        hier_proc_place_me = me;
    }
    hier_lock_drop();
}

hier_fabric_t *hier_proc_fabric_open(void)
{
    return atomic_load_explicit(&hier_proc_fab, memory_order_acquire);
}

int hier_proc_fabric_failed(void)
{
    hier_lock_take();
    int failed = hier_proc_fab_tried && !hier_proc_fab;
    hier_lock_drop();
    return failed;
}

hier_fabric_t *hier_proc_fabric(void)
{
    hier_fabric_t *fab = atomic_load_explicit(&hier_proc_fab, memory_order_acquire);
    if (fab) return fab; /* (every wait turn asks: no lock once open) */
    hier_lock_take();    /* (threads: one opens it) */
    fab = hier_proc_fabric_locked();
    hier_lock_drop();
    return fab;
}

/* The machine's topology and this process's place in it, found once per
 * process whatever the threads do: asking the kernel for the binding lists
 * every thread (/proc/self/task), a cost every communicator's set-up would
 * pay, and Open MPI binds processes once, at launch. */
static void hier_proc_topo_load(void)
{
    hier_locality_t loc;
    void *lent = hier_proc_lent_topo ? hier_proc_lent_topo() : NULL;
    if (!lent || hier_topo_adopt(lent, &hier_proc_topo) != HIER_OK) {
        if (lent) HIER_LOG(HIER_LOG_DEBUG, "topo: the MPI library's topology is not usable here: loading one");
        if (hier_topo_open_cpus(&hier_proc_topo) != HIER_OK) hier_proc_topo = NULL;
    }
    hier_proc_numa = hier_proc_topo && hier_topo_self_locality(hier_proc_topo, &loc) == HIER_OK ? loc.numa : -1;
}

void hier_proc_lend_topology(void *(*get)(void))
{
    hier_proc_lent_topo = get;
}

/* One NUMA domain on this machine: every rank is in it, found without
 * loading a topology (3-4 ms of a communicator's first call). */
static int hier_proc_one_numa;
static pthread_once_t hier_proc_one_numa_once = PTHREAD_ONCE_INIT;

static void hier_proc_one_numa_find(void)
{
    hier_proc_one_numa = hier_topo_machine_numa_count() == 1;
}

int hier_proc_my_numa(int local_index)
{
    if (hier_params.numa_ranks_per_domain > 0) return local_index / hier_params.numa_ranks_per_domain;
    pthread_once(&hier_proc_one_numa_once, hier_proc_one_numa_find);
    if (hier_proc_one_numa) return 0;
    pthread_once(&hier_proc_topo_once, hier_proc_topo_load);
    return hier_proc_numa;
}

/* Where this rank wants its NICs: near the accelerator this thread works
 * on when a device backend says which (and hwloc finds it on the PCI tree),
 * else near its binding. */
int hier_proc_nic_numa(int local_index)
{
    char busid[32];
    hier_locality_t loc;
    if (!hier_accel_has_backend()) return hier_proc_my_numa(local_index); /* (no topology needed) */
    pthread_once(&hier_proc_topo_once, hier_proc_topo_load);
    if (hier_proc_topo && hier_accel_device_busid(busid, sizeof(busid)) == HIER_OK &&
        hier_topo_pci_locality(hier_proc_topo, busid, &loc) == HIER_OK) {
        HIER_LOG_ONCE(HIER_LOG_COMM, "NICs are placed near this rank's accelerator %s (NUMA %d)", busid, loc.numa);
        return loc.numa;
    }
    return hier_proc_my_numa(local_index);
}

/* (sysconf reads sysfs: once, not at every communicator's set-up) */
static long hier_proc_ncpus;
static pthread_once_t hier_proc_ncpus_once = PTHREAD_ONCE_INIT;

static void hier_proc_ncpus_find(void)
{
    hier_proc_ncpus = sysconf(_SC_NPROCESSORS_ONLN);
}

long hier_proc_cpus(void)
{
    pthread_once(&hier_proc_ncpus_once, hier_proc_ncpus_find);
    return hier_proc_ncpus;
}

size_t hier_proc_shm_budget(void)
{
    return hier_params.shm_budget;
}

/* Registrations go before the channels and the endpoint they belong to:
 * the device cache, the recycled segments' slots; then channels, then the
 * endpoint. The device backends are forgotten last (one a program
 * registered may live in code it unloads after MPI_Finalize). */
void hier_proc_release(void)
{
    hier_dev_mr_flush();
    hier_shm_pool_trim(0);
    hier_peers_clear();
    hier_pml_finalize(); /* (sends closed links left in flight: their buffers) */
    hier_lock_take();
    hier_proc_warm_join();
    atomic_store_explicit(&hier_proc_warm_state, HIER_WARM_JOINED, memory_order_relaxed); /* (none again) */
    hier_chan_poll_on(NULL);
    hier_fabric_close(hier_proc_fab);
    atomic_store_explicit(&hier_proc_fab, NULL, memory_order_release);
    hier_proc_fab_tried = 0;
    hier_lock_drop();
    hier_topo_close(hier_proc_topo);
    hier_proc_topo = NULL;
    hier_proc_lent_topo = NULL;
    hier_accel_reset();
}
