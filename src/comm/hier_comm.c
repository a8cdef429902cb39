/* hier_comm.c: per-communicator state, lazy segment set-up, algorithm choice
 * and the loop that feeds schedules to the executor. */
#include "comm/hier_comm.h"
#include "comm/hier_coll_dev.h"
#include "comm/hier_comm_impl.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accel/hier_accel.h"
#include "shm/hier_cma.h"
#include "exec/hier_exec.h"
#include "base/hier_log.h"
#include "base/hier_params.h"
#include "exec/hier_reduce.h"
#include "sched/hier_sched.h"
#include "base/hier_topo.h"

static hier_topo_t *hier_core_topo;
static _Atomic unsigned hier_core_segments;
static pthread_once_t hier_core_topo_once = PTHREAD_ONCE_INIT;

void hier_core_finalize(void)
{
    hier_core_fabric_close();
    hier_topo_close(hier_core_topo);
    hier_core_topo = NULL;
}

/* A rank's node id and rank, sorted by id then rank: the nodes in order. */
typedef struct {
    int id, rank;
} hier_comm_rank_node_t;

static int hier_comm_by_node(const void *a, const void *b)
{
    const hier_comm_rank_node_t *x = a, *y = b;
    return x->id != y->id ? (x->id < y->id ? -1 : 1) : x->rank - y->rank;
}

/* Nodes numbered in order of their first rank, each node's ranks in rank
 * order; my node and index. Returns 0 without memory. */
static int hier_comm_layout(hier_comm_t *c, const int *node_of)
{
    size_t n = (size_t)c->size;
    hier_comm_rank_node_t *rn = malloc(n * sizeof(*rn));
    int *dense = malloc(n * sizeof(*dense)), *first_rank = malloc(n * sizeof(*first_rank)), ok = 0;
    c->node_ranks = malloc(n * sizeof(*c->node_ranks));
    c->node_first = calloc(n + 1, sizeof(*c->node_first));
    c->rs_displs = malloc(n * sizeof(*c->rs_displs));
    if (!rn || !dense || !first_rank || !c->node_ranks || !c->node_first || !c->rs_displs) goto out;
    /* 1. group ranks by node id; a node's number is the rank order of its first rank */
    for (int r = 0; r < c->size; r++) rn[r] = (hier_comm_rank_node_t){.id = node_of ? node_of[r] : 0, .rank = r};
    qsort(rn, n, sizeof(*rn), hier_comm_by_node);
    int groups = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || rn[i].id != rn[i - 1].id) first_rank[groups++] = rn[i].rank;
        dense[rn[i].rank] = groups - 1; /* provisional: the group's sorted position */
    }
    /* 2. renumber groups by their first rank: a node's first rank is where it starts in rank order */
    int *renum = calloc((size_t)groups, sizeof(*renum));
    if (!renum) goto out;
    c->nnodes = 0;
    for (int r = 0; r < c->size; r++)
        if (first_rank[dense[r]] == r) renum[dense[r]] = c->nnodes++;
    for (int r = 0; r < c->size; r++) dense[r] = renum[dense[r]];
    free(renum);
    /* 3. counts, node lists, my node, my index, the fewest ranks per node */
    for (int r = 0; r < c->size; r++) c->node_first[dense[r] + 1]++;
    for (int k = 0; k < c->nnodes; k++) c->node_first[k + 1] += c->node_first[k];
    c->pieces = c->size;
    for (int k = 0; k < c->nnodes; k++) {
        int cnt = (int)(c->node_first[k + 1] - c->node_first[k]);
        c->pieces = cnt < c->pieces ? cnt : c->pieces;
    }
    uint32_t *next = (uint32_t *)first_rank; /* (reused: node -> next free entry) */
    for (int k = 0; k < c->nnodes; k++) next[k] = c->node_first[k];
    for (int r = 0; r < c->size; r++) c->node_ranks[next[dense[r]]++] = (uint32_t)r;
    c->node = dense[c->rank];
    c->nranks = (int)(c->node_first[c->node + 1] - c->node_first[c->node]);
    c->me = 0;
    for (int r = 0; r < c->rank; r++) c->me += dense[r] == c->node;
    ok = 1;
out:
    free(rn);
    free(dense);
    free(first_rank);
    return ok;
}

hier_status_t hier_comm_create(int size, int rank, int my_node, const hier_comm_ops_t *ops, hier_comm_t **comm_p)
{
    if (size < 1 || rank < 0 || rank >= size) return HIER_ERR_INVALID_ARG;
    hier_comm_t *c = calloc(1, sizeof(*c));
    if (!c) return HIER_ERR_NO_MEMORY;
    c->size = c->nranks = size;
    c->rank = c->me = rank;
    c->ops = *ops;
    c->nnodes = 1;
    c->my_node = my_node;
    hier_core_set_progress(ops->progress);
    hier_accel_init();
    *comm_p = c;
    return HIER_OK;
}

/* 1b. Whether every rank has the same parameters where they shape what
 * ranks do (chunk sizes, algorithms, thresholds, provider): the least and
 * the greatest digest, agreed. Different settings (an MCA file on some
 * nodes only) would make ranks run different steps and hang. */
static int hier_comm_same_params(hier_comm_t *c)
{
    int d = (int)(hier_params_digest(&hier_params) & 0x3fffffff), lo = d, neg_hi = -d;
    if (c->ops.agree(&lo, c->ops.arg) != 0 || c->ops.agree(&neg_hi, c->ops.arg) != 0) lo = -1, neg_hi = 0;
    if (lo == -neg_hi) return 1;
    c->params_differ = 1;
    if (c->rank == 0)
        HIER_ERROR("the ranks of a communicator have different coll_hier parameters (MCA settings differ between "
                   "nodes or processes?): it uses the previous component");
    return 0;
}

/* Every rank's node and the step buffer the layout needs, once, collective:
 * 1. agree that every rank sees one node, or every rank several (different
 *    settings of ranks_per_node would split them) and can hold the map;
 *    (1b) and that every rank has the same parameters;
 * 2. several: allgather the node names;
 * 3. lay the communicator out, size the step buffer, and agree it all went
 *    well. Returns 0 (on every rank alike) when hier cannot serve it. */
int hier_comm_ensure_layout(hier_comm_t *c)
{
    if (c->layout_done) return !c->too_big;
    c->layout_done = 1;
    int *node_of = c->my_node >= 0 ? calloc((size_t)c->size, sizeof(*node_of)) : NULL;
    int several = c->my_node >= 0 && node_of, one = c->my_node < 0, ok; /* 1 */
    if (c->ops.agree(&several, c->ops.arg) != 0 || c->ops.agree(&one, c->ops.arg) != 0 || (!several && !one)) {
        if (!several && !one) HIER_LOG(HIER_LOG_COMM, "ranks disagree about the nodes (or lack memory): not served");
        free(node_of);
        c->too_big = 1;
        return 0;
    }
    if (!hier_comm_same_params(c)) { /* 1b */
        free(node_of);
        c->too_big = 1;
        return 0;
    }
    if (several && c->ops.allgather(&c->my_node, node_of, sizeof(int), c->ops.arg) != 0) several = -1; /* 2 */
    ok = several >= 0 && hier_comm_layout(c, node_of); /* 3 */
    free(node_of);
    if (ok && c->nnodes > 1 && !(c->chans = calloc((size_t)c->nnodes, sizeof(*c->chans)))) ok = 0;
    if (c->ops.agree(&ok, c->ops.arg) != 0) ok = 0;
    c->too_big = !ok;
    return ok;
}

void hier_comm_destroy(hier_comm_t *c)
{
    if (!c) return;
    hier_coll_pd_close(c);
    hier_comm_close_net(c);
    hier_shm_detach(c->shm);
    free(c->stage);
    free(c->steps);
    free(c->steps2);
    hier_coll_dev_release(c);
    hier_topo_groups_free(&c->groups);
    free(c->order);
    free(c->slots);
    free(c->chans);
    free(c->node_first);
    free(c->node_ranks);
    free(c->rs_displs);
    free(c);
}

uint64_t hier_comm_net_bytes(const hier_comm_t *c)
{
    return c->net_bytes;
}

int hier_comm_staged(const hier_comm_t *c)
{
    return c->staged;
}

/* The machine's topology, loaded once per process whatever the threads do. */
static void hier_core_topo_load(void)
{
    if (hier_topo_open(NULL, &hier_core_topo) != HIER_OK) hier_core_topo = NULL;
}

/* This rank's NUMA domain: from the numa_ranks_per_domain simulation, or from
 * hwloc and the process binding (-1 when unbound or unknown). */
static int hier_comm_my_numa(const hier_comm_t *c)
{
    hier_locality_t loc;
    if (hier_params.numa_ranks_per_domain > 0) return c->me / hier_params.numa_ranks_per_domain;
    pthread_once(&hier_core_topo_once, hier_core_topo_load);
    if (!hier_core_topo || hier_topo_self_locality(hier_core_topo, &loc) != HIER_OK) return -1;
    return loc.numa;
}

static hier_status_t hier_comm_build_groups(hier_comm_t *c)
{
    hier_locality_t *locs = malloc((size_t)c->nranks * sizeof(*locs));
    c->order = malloc((size_t)c->nranks * sizeof(*c->order));
    c->slots = malloc((size_t)c->nranks * sizeof(*c->slots));
    if (!locs || !c->order || !c->slots) {
        free(locs);
        return HIER_ERR_NO_MEMORY;
    }
    for (int r = 0; r < c->nranks; r++) locs[r] = (hier_locality_t){.numa = hier_shm_peer_numa(c->shm, r)};
    hier_status_t st = hier_topo_groups_by_numa(locs, c->nranks, &c->groups);
    free(locs);
    if (st != HIER_OK) return st;
    for (int r = 0; r < c->nranks; r++) {
        c->order[r] = (uint32_t)r;
        c->slots[r] = hier_shm_slot(c->shm, r);
    }
    return HIER_OK;
}

/* The last agreement of the set-up: whether this rank's NUMA groups could
 * be built (`ready`; else every rank gives up), and whether every rank can
 * read every other rank's memory (each probes all its peers' cookies).
 * Collective, after the segment exists: agree on 0 (failed), 1 (ready,
 * no single copy) or 2 (ready, single copy). */
static hier_status_t hier_comm_setup_cma(hier_comm_t *c, int ready)
{
    int ok = hier_params.cma != 0;
    for (int i = 1; ok && ready && i < c->nranks; i++) {
        const hier_shm_ctl_t *peer = hier_shm_ctl(c->shm, (c->me + i) % c->nranks);
        ok = hier_cma_probe(peer->pid, peer->cma_probe_addr, peer->cma_cookie) == HIER_OK;
    }
    int verdict = ready ? 1 + ok : 0;
    if (c->ops.agree(&verdict, c->ops.arg) != 0 || verdict == 0) return HIER_ERR_INTERNAL;
    c->cma = verdict == 2;
    return HIER_OK;
}

/* What decides which schedule a call runs: the parameters (already agreed
 * at layout, 1b) and the pipeline chunk they give with this node's rank
 * count, which every node must also share: ranks with different chunks
 * would run different step lists and meet at the wrong barriers. */
static uint64_t hier_comm_params_digest(size_t chunk)
{
    return (uint64_t)hier_params_digest(&hier_params) << 32 ^ chunk;
}

/* Polls before a waiting rank yields. When ranks outnumber the cores (the
 * runtime says so, or this node's ranks exceed its online CPUs), the
 * rank we wait for is likely waiting for our core: spinning long only delays
 * it (on 4 ranks over 2 cores, 2000 polls made a small allreduce 3x slower, and
 * even 50 doubled its time against yielding at once). */
static int hier_comm_spin_count(const hier_comm_t *c)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN); /* not our affinity: a rank bound to one core is not crowded */
    int crowded = (c->ops.oversubscribed && c->ops.oversubscribed()) || (cpus > 0 && c->nranks > cpus);
    return crowded && hier_params.spin_count > HIER_COMM_CROWDED_SPIN ? HIER_COMM_CROWDED_SPIN
                                                                    : hier_params.spin_count;
}

/* Pipeline buffer size: the parameter, kept within [4 KiB, 1 GiB], at least a
 * 64-byte piece per rank (reduce_scatter's blocks), in whole lines. */
static size_t hier_comm_chunk_bytes(int nranks, int nnodes)
{
    size_t chunk = nnodes > 1 ? hier_params.net_chunk_size : hier_params.shm_chunk_size, least = (size_t)nranks * 64;
    if (chunk < HIER_COMM_MIN_CHUNK) chunk = HIER_COMM_MIN_CHUNK;
    if (chunk > HIER_COMM_MAX_CHUNK) chunk = HIER_COMM_MAX_CHUNK;
    if (chunk < least) chunk = least;
    return (chunk + 63) & ~(size_t)63;
}

/* Segment set-up, collective over the communicator, run at the first call that needs it:
 * 1. local rank 0 of every node creates its node's segment under a fresh name;
 * 2. every rank publishes (allgather) that name, empty if creation failed, and
 *    its parameters' digest;
 * 3. everyone checks the digests and attaches to its node's segment; everyone
 *    reserves its own slot and publishes its pid and NUMA domain;
 * 4. everyone agrees (minimum) on success;
 * 5. local rank 0 unlinks the name: from here on nothing is left behind even after a crash;
 * 6. every rank builds its NUMA groups and probes single copy to every
 *    other, and all agree on both;
 * on any failure everyone detaches and the communicator falls back for good. */
typedef struct {
    char name[HIER_SHM_NAME_MAX];
    uint64_t digest;
} hier_comm_shm_msg_t;

/* Step 3's checks: every rank's digest equals mine, my node's leader created a segment. */
static hier_status_t hier_comm_check_peers(const hier_comm_t *c, const hier_comm_shm_msg_t *all, uint64_t digest)
{
    for (int r = 0; r < c->size; r++)
        if (all[r].digest != digest) {
            HIER_ERROR("rank %d: coll/hier parameters or pipeline chunk differ from rank %d's; not using hier on "
                       "this communicator", c->rank, r);
            return HIER_ERR_INVALID_ARG;
        }
    return all[c->node_ranks[c->node_first[c->node]]].name[0] ? HIER_OK : HIER_ERR_SHM;
}

static hier_status_t hier_comm_setup_shm(hier_comm_t *c)
{
    hier_comm_shm_msg_t msg = {"", 0}, *all = calloc((size_t)c->size, sizeof(*all));
    hier_status_t st = all ? HIER_OK : HIER_ERR_NO_MEMORY;
    size_t chunk = hier_comm_chunk_bytes(c->nranks, c->nnodes);
    uint64_t digest = hier_comm_params_digest(chunk);
    int ok;

    msg.digest = digest;
    ok = all != NULL; /* every rank must take part in the allgather, or none */
    if (c->ops.agree(&ok, c->ops.arg) != 0 || !ok) goto free_stage;
    if (c->me == 0) { /* 1 */
        snprintf(msg.name, sizeof(msg.name), "coll-hier-%d-%u", (int)getpid(),
                 atomic_fetch_add(&hier_core_segments, 1));
        if (hier_shm_create(hier_params.shm_dir, msg.name, c->nranks, chunk, &c->shm) != HIER_OK) msg.name[0] = 0;
    }
    if (c->ops.allgather(&msg, all, sizeof(msg), c->ops.arg) != 0) goto unlink_segment; /* 2 */
    st = hier_comm_check_peers(c, all, digest);                                           /* 3 */
    if (st == HIER_OK && c->me != 0) {
        const char *name = all[c->node_ranks[c->node_first[c->node]]].name;
        st = hier_shm_attach(hier_params.shm_dir, name, c->nranks, c->me, chunk, &c->shm);
    }
    if (st == HIER_OK) st = hier_shm_claim(c->shm, c->me, hier_comm_my_numa(c));
    if (st == HIER_OK && !(c->stage = malloc(HIER_EXEC_STAGE_BYTES))) st = HIER_ERR_NO_MEMORY;
    ok = st == HIER_OK;
    if (c->ops.agree(&ok, c->ops.arg) != 0) ok = 0; /* 4 */
    if (c->me == 0 && c->shm) hier_shm_unlink(c->shm); /* 5 */
    free(all);
    all = NULL;
    if (!ok) goto free_stage;
    c->chunk_bytes = chunk;
    c->wait = (hier_shm_wait_t){.nranks = c->nranks, .me = c->me, .spin_count = hier_comm_spin_count(c),
                                .progress = hier_core_progress};
    c->wait.sleep = c->wait.spin_count == HIER_COMM_CROWDED_SPIN && hier_params.spin_count > 0;
    if (hier_comm_setup_cma(c, hier_comm_build_groups(c) == HIER_OK) != HIER_OK) goto free_stage; /* 6 */
    c->shm_state = HIER_SHM_STATE_READY;
    HIER_LOG(HIER_LOG_DEBUG, "segment ready: %d ranks, chunk %zu, %d NUMA group(s), single copy %s, %d polls "
             "before yielding", c->nranks, chunk, c->groups.ngroups, c->cma ? "on" : "off", c->wait.spin_count);
    return HIER_OK;

unlink_segment:
    ok = 0;
    (void)c->ops.agree(&ok, c->ops.arg); /* the others are at step 4 */
    if (c->shm) hier_shm_unlink(c->shm);
free_stage:
    free(all);
    free(c->stage);
    c->stage = NULL;
    hier_shm_detach(c->shm);
    c->shm = NULL;
    c->shm_state = HIER_SHM_STATE_FAILED;
    HIER_LOG(HIER_LOG_COMM, "shared-memory segment unavailable (%zu bytes for %d ranks): using the previous "
             "component on this communicator", hier_shm_segment_size(c->nranks, chunk), c->nranks);
    return HIER_ERR_SHM;
}

static hier_status_t hier_comm_ensure_shm(hier_comm_t *c)
{
    switch (c->shm_state) {
    case HIER_SHM_STATE_READY: return HIER_OK;
    case HIER_SHM_STATE_FAILED: return HIER_ERR_SHM;
    case HIER_SHM_STATE_NONE: break;
    }
    return hier_comm_setup_shm(c);
}

/* Single copy: read another rank's published buffer through the kernel. */
static hier_status_t hier_comm_peer_read(void *ctx, hier_ref_t ref, void *dst, size_t len)
{
    hier_comm_t *c = ctx;
    const hier_shm_ctl_t *peer = hier_shm_ctl(c->shm, ref.rank);
    uint64_t base = ref.kind == HIER_BUF_PEER_INPUT ? peer->input_addr : peer->recv_addr;
    return hier_cma_read(peer->pid, base + ref.off, dst, len);
}

static int hier_comm_is_net(const hier_step_t *s)
{
    return s->op == HIER_STEP_NET_SEND || s->op == HIER_STEP_NET_RECV;
}

/* A chunk's steps cut for the overlap: [0, b1) before its first barrier
 * (the copy in), [b1, net) up to its network run, [net, tail) the run
 * (net == tail: none on this rank), [tail, n) from its last barrier on (the
 * copy out). Only the inter-node schedules (two barriers per chunk, the run
 * between them) are cut; the others run whole: b1 == net == tail == n. */
typedef struct {
    hier_step_t *steps;
    size_t n, b1, net, tail;
} hier_comm_chunk_t;

static void hier_comm_build(hier_comm_t *c, hier_sched_args_t *args, size_t k, hier_comm_chunk_t *ch)
{
    int cut = hier_sched_is_hier(args->kind);
    ch->n = hier_sched_build(args, k, (int)(c->chunk_seq++ & 1), ch->steps);
    ch->b1 = ch->net = ch->tail = ch->n;
    if (!cut) return;
    while (ch->tail > 0 && ch->steps[ch->tail - 1].op != HIER_STEP_BARRIER) ch->tail--;
    if (ch->tail) ch->tail--; /* at the last barrier */
    for (ch->net = ch->tail; ch->net > 0 && hier_comm_is_net(&ch->steps[ch->net - 1]);) ch->net--;
    for (ch->b1 = 0; ch->b1 < ch->net && ch->steps[ch->b1].op != HIER_STEP_BARRIER;) ch->b1++;
}

static void hier_comm_flag(hier_comm_t *c, hier_status_t failed)
{
    if (failed != HIER_OK) atomic_store_explicit(&hier_shm_ctl(c->shm, c->me)->error, 1, memory_order_relaxed);
}

/* Steps [from, to) of a chunk: local ones here, barriers through the
 * segment, a network run met here (none in hier's schedules) at once; the
 * run in flight is polled between steps. A barrier's error (a dead peer)
 * is returned; a step's goes to *failed (see hier_comm_run). */
static hier_status_t hier_comm_local(hier_comm_t *c, const hier_exec_bufs_t *bufs, const hier_comm_chunk_t *ch,
                                     size_t from, size_t to, hier_status_t *failed)
{
    for (size_t i = from; i < to; i++) {
        const hier_step_t *s = &ch->steps[i];
        if (s->op == HIER_STEP_BARRIER) {
            hier_status_t st = hier_shm_barrier(c->shm, &c->wait);
            if (st != HIER_OK) return st; /* every rank finds out */
        } else if (*failed == HIER_OK && hier_comm_is_net(s)) { /* (never while a run is in flight: cut chunks) */
            assert(!c->netx.active);
            size_t j = i + 1;
            while (j < to && hier_comm_is_net(&ch->steps[j])) j++;
            *failed = hier_comm_net_run(c, bufs, s, j - i);
            i = j - 1;
        } else if (*failed == HIER_OK) {
            *failed = hier_exec_step(bufs, s);
        }
        if (*failed == HIER_OK) *failed = hier_comm_net_poll(c);
        hier_comm_flag(c, *failed);
    }
    return HIER_OK;
}

static void hier_comm_start(hier_comm_t *c, const hier_exec_bufs_t *bufs, const hier_comm_chunk_t *ch,
                            hier_status_t *failed)
{
    if (*failed != HIER_OK || ch->net == ch->tail) return;
    *failed = hier_comm_net_start(c, bufs, ch->steps + ch->net, ch->tail - ch->net);
    hier_comm_flag(c, *failed);
}

static void hier_comm_finish(hier_comm_t *c, hier_status_t *failed)
{
    hier_status_t st = hier_comm_net_finish(c);
    if (*failed == HIER_OK) *failed = st;
    hier_comm_flag(c, *failed);
}

/* Feed every chunk's steps to the executor; barriers go to the segment. */
hier_status_t hier_comm_run(hier_comm_t *c, hier_sched_args_t *args, const void *sbuf, void *rbuf,
                                   hier_reduce_kernel_t kernel)
{
    hier_exec_bufs_t bufs = {.sbuf = sbuf, .rbuf = rbuf, .slots = c->slots,
                             .parity_stride = hier_shm_parity_stride(c->shm), .esize = args->esize,
                             .kernel = kernel, .peer_read = hier_comm_peer_read, .peer_ctx = c,
                             .stage = c->stage};

    args->nranks = c->nranks;
    args->me = c->me;
    args->chunk_bytes = c->chunk_bytes;
    args->order = c->order;
    args->groups = (hier_sched_groups_t){.ngroups = c->groups.ngroups, .group_of = c->groups.group_of,
                                         .leader = c->groups.leader, .first = c->groups.first,
                                         .members = c->groups.members};
    args->node = c->node;
    args->nnodes = c->nnodes;
    args->node_first = c->node_first;
    args->node_ranks = c->node_ranks;
    if (!args->pieces) args->pieces = c->pieces;
    c->net_bytes = 0;
    if (hier_sched_is_cma(args->kind)) { /* published before the first barrier, which makes them visible */
        hier_shm_ctl_t *mine = hier_shm_ctl(c->shm, c->me);
        mine->input_addr = (uint64_t)(uintptr_t)(args->in_place ? (const uint8_t *)rbuf + hier_sched_input_offset(args, c->me)
                                                                 : (const uint8_t *)sbuf);
        mine->recv_addr = (uint64_t)(uintptr_t)rbuf;
    }
    /* A failed data step must not make this rank skip barriers its peers wait
     * at: it keeps to the barriers, skips further data, and raises its error
     * flag; after the last barrier every rank sees every flag, so all return
     * the error together and the communicator falls back for good. */
    hier_status_t failed = HIER_OK, st = HIER_OK;
    size_t nchunks = hier_sched_nchunks(args), need = hier_sched_max_steps(args);
    if (need > c->nsteps) { /* sized by the call's shape, the same on every rank: all grow at this call */
        free(c->steps);
        free(c->steps2);
        c->steps = malloc(need * sizeof(*c->steps));
        c->steps2 = malloc(need * sizeof(*c->steps2));
        int ok = c->steps && c->steps2;
        if (c->ops.agree(&ok, c->ops.arg) != 0) ok = 0;
        c->nsteps = ok ? need : 0;
        if (!ok) {
            HIER_ERROR("rank %d: no memory for %zu schedule steps on some rank", c->rank, need);
            return HIER_ERR_NO_MEMORY;
        }
    }
    hier_comm_chunk_t ch[2] = {{.steps = c->steps}, {.steps = c->steps2}};
    /* Chunk k's network run is in flight while chunk k+1 copies its input
     * in; barriers keep their order (every rank, owner or not, alike):
     * 1. chunk 0 up to its network run, which starts;
     * 2. for each chunk k: chunk k+1's copy in (polling k's run);
     * 3. k's run finished, then k's part from its last barrier (copy out);
     * 4. chunk k+1 from its first barrier up to its run, which starts.
     * Safe with the slot parities: k+1's copy in writes parity k+1, last read
     * by k-1's copy out, which every rank finished before k's first barrier;
     * it reads only this rank's input, which k's copy out writes elsewhere
     * (in place, below: reading first is the safe order). */
    if (nchunks) {                                                                    /* 1 */
        hier_comm_build(c, args, 0, &ch[0]);
        st = hier_comm_local(c, &bufs, &ch[0], 0, ch[0].net, &failed);
        if (st == HIER_OK) hier_comm_start(c, &bufs, &ch[0], &failed);
    }
    for (size_t k = 0; k < nchunks && st == HIER_OK; k++) {
        hier_comm_chunk_t *cur = &ch[k % 2], *nxt = &ch[(k + 1) % 2];
        if (k + 1 < nchunks) {                                                        /* 2 */
            hier_comm_build(c, args, k + 1, nxt);
            st = hier_comm_local(c, &bufs, nxt, 0, nxt->b1, &failed);
        }
        if (st != HIER_OK) break;
        hier_comm_finish(c, &failed);                                                 /* 3 */
        st = hier_comm_local(c, &bufs, cur, cur->tail, cur->n, &failed);
        if (st != HIER_OK || k + 1 == nchunks) break;
        st = hier_comm_local(c, &bufs, nxt, nxt->b1, nxt->net, &failed);              /* 4 */
        if (st == HIER_OK) hier_comm_start(c, &bufs, nxt, &failed);
    }
    if (st != HIER_OK) {
        c->net_bytes += c->netx.net_bytes; /* a dead peer: the run is abandoned with the call */
        c->netx.net_bytes = 0;
        c->netx.active = 0;
        c->netx.steps = NULL;
        return st;
    }
    int checked = hier_sched_is_cma(args->kind) || c->nnodes > 1;
    for (int r = 0; r < c->nranks && nchunks && checked; r++)
        if (atomic_load_explicit(&hier_shm_ctl(c->shm, r)->error, memory_order_relaxed)) {
            c->shm_state = HIER_SHM_STATE_FAILED;
            if (failed == HIER_OK) HIER_ERROR("local rank %d: a step failed on local rank %d", c->me, r);
            return failed != HIER_OK ? failed : HIER_ERR_INTERNAL;
        }
    return failed;
}

/* Common entry: nothing to do, single rank, forced fallback or no segment. */
hier_status_t hier_comm_prepare(hier_comm_t *c, int algo, hier_path_t *path_p)
{
    if (algo == HIER_ALGO_FALLBACK) {
        *path_p = HIER_PATH_FALLBACK_FORCED;
        return HIER_ERR_NOT_SUPPORTED;
    }
    if (!hier_comm_ensure_layout(c)) {
        *path_p = c->params_differ ? HIER_PATH_FALLBACK_PARAMS : HIER_PATH_FALLBACK_RANKS;
        return HIER_ERR_NOT_SUPPORTED;
    }
    if (c->size == 1) {
        *path_p = HIER_PATH_SELF;
        return HIER_IN_PROGRESS; /* caller copies */
    }
    if (hier_comm_ensure_shm(c) != HIER_OK) {
        *path_p = HIER_PATH_FALLBACK_SHM;
        return HIER_ERR_NOT_SUPPORTED;
    }
    if (c->nnodes > 1 && hier_comm_ensure_net(c) != HIER_OK) {
        *path_p = HIER_PATH_FALLBACK_NET;
        return HIER_ERR_NOT_SUPPORTED;
    }
    return HIER_OK;
}

