/* The peer-direct ring (sched/hier_sched_direct.c) run by the network
 * executor (exec/hier_net_exec.c) over real channels: 2 to 4 forked ranks,
 * each with a channel to either ring neighbour, write their blocks straight
 * into each other's registered receive buffers. Writes are cut small (odd
 * sizes, many pieces per block), the ring's order is not the ranks' order,
 * in place and not; every rank must end with every rank's block, having
 * written (n - 1) blocks and two notes, nothing more. */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include "fabric_reap.h"
#include "fork_pair.h"
#include "base/hier_lock.h"
#include "exec/hier_net_exec.h"
#include "net/hier_chan.h"
#include "net/hier_fabric.h"
#include "sched/hier_sched_direct.h"

#define NMAX 4

typedef struct {
    _Atomic int stage[NMAX];
    char addr[NMAX][HIER_FABRIC_ADDR_MAX];
    hier_chan_info_t info[NMAX][HIER_DIRECT_PEERS]; /* [rank][its left, its right] */
} ring_t;

typedef struct {
    int n;
    size_t block, max_write;
    int in_place;
} ring_case_t;

static int ring_wait(ring_t *g, int n, int v, hier_fabric_t *fab)
{
    for (int r = 0; r < n; r++)
        for (double end = now() + 30; atomic_load(&g->stage[r]) < v;) {
            if (fab) hier_chan_progress(fab);
            if (now() > end) return -1;
            usleep(50);
        }
    return 0;
}

/* The ring's order: positions backwards from the ranks' (rank r at n-1-r). */
static int pos_of(int n, int r)
{
    return n - 1 - r;
}

static uint8_t byte_of(int rank, size_t i)
{
    return (uint8_t)(rank * 37 + i * 11 + 1);
}

/* My channels to the ring neighbours, connected to theirs (their right end
 * is my left's peer, and the other way round). */
static int ring_connect(int me, const ring_case_t *c, ring_t *g, hier_fabric_t *fab, hier_chan_t **chans)
{
    uint32_t ring[NMAX];
    for (int p = 0; p < c->n; p++) ring[p] = (uint32_t)(c->n - 1 - p);
    int pos = pos_of(c->n, me);
    int left = (int)ring[(pos + c->n - 1) % c->n], right = (int)ring[(pos + 1) % c->n];
    hier_fabric_peer_t lp, rp;
    if (hier_fabric_insert(fab, g->addr[left], &lp) != HIER_OK ||
        hier_fabric_insert(fab, g->addr[right], &rp) != HIER_OK)
        return 0;
    return hier_chan_connect(chans[HIER_DIRECT_LEFT], lp, &g->info[left][HIER_DIRECT_RIGHT]) == HIER_OK &&
           hier_chan_connect(chans[HIER_DIRECT_RIGHT], rp, &g->info[right][HIER_DIRECT_LEFT]) == HIER_OK;
}

static int ring_member(int me, const ring_case_t *c, ring_t *g)
{
    hier_fabric_config_t cfg = fab_config("shm");
    cfg.hmem = 1;
    hier_fabric_t *fab;
    hier_chan_t *chans[HIER_DIRECT_PEERS] = {0};
    size_t len = sizeof(g->addr[me]), bytes = (size_t)c->n * c->block;
    uint32_t counts[NMAX] = {0}, ring[NMAX];
    if (hier_fabric_open(&cfg, &fab) != HIER_OK || hier_fabric_addr(fab, g->addr[me], &len) != HIER_OK) return 10;
    for (int k = 0; k < HIER_DIRECT_PEERS; k++) {
        if (hier_chan_open(fab, 4, sizeof(hier_net_note_t), &chans[k]) != HIER_OK) return 11;
        hier_chan_info(chans[k], &g->info[me][k]);
    }
    hier_chan_direct_counts(chans[HIER_DIRECT_LEFT], counts, NMAX);
    atomic_store(&g->stage[me], 1);
    if (ring_wait(g, c->n, 1, NULL) || !ring_connect(me, c, g, fab, chans)) return 12;
    /* (C11: an aligned_alloc's size is a multiple of its alignment) */
    uint8_t *rbuf = aligned_alloc(64, (bytes + 127) & ~(size_t)63);
    uint8_t *sbuf = aligned_alloc(64, (c->block + 127) & ~(size_t)63);
    for (size_t i = 0; i < bytes; i++) rbuf[i] = 0xee;
    for (size_t i = 0; i < c->block; i++) (c->in_place ? rbuf + (size_t)me * c->block : sbuf)[i] = byte_of(me, i);
    hier_fabric_mr_t *rmr, *smr = NULL;
    if (hier_fabric_mr_reg(fab, rbuf, bytes + 1, &rmr) != HIER_OK ||
        (!c->in_place && hier_fabric_mr_reg(fab, sbuf, c->block + 1, &smr) != HIER_OK))
        return 13;
    for (int p = 0; p < c->n; p++) ring[p] = (uint32_t)(c->n - 1 - p);
    hier_direct_args_t a = {.total = c->n, .pos = pos_of(c->n, me), .ring = ring, .block = c->block,
                            .in_place = c->in_place};
    hier_step_t steps[2 * NMAX + 2];
    size_t n = hier_sched_direct_allgather(&a, steps);
    hier_exec_bufs_t bufs = {.sbuf = c->in_place ? NULL : sbuf, .rbuf = rbuf, .esize = 1};
    hier_net_direct_t dw = {.mr = {smr, rmr}, .nic = {c->in_place ? NULL : sbuf, rbuf},
                            .counts = counts, .ntags = NMAX, .max_write = c->max_write};
    hier_net_send_t sendq[4];
    void *links[HIER_DIRECT_PEERS] = {chans[0], chans[1]};
    hier_net_exec_t x = {.link = &hier_link_chan, .fab = fab, .links = links, .bufs = &bufs, .direct = &dw, .spin = 16,
                         .progress_every = 1, .run[0].q = {.q = sendq, .cap = 4}};
    if (hier_net_exec_start(&x, 0, steps, n) != HIER_OK) return 14;
    if (!c->in_place) memcpy(rbuf + (size_t)me * c->block, sbuf, c->block); /* (the caller's step 2) */
    if (hier_net_exec_finish(&x, 0) != HIER_OK) return 15;
    for (int k = 0; k < c->n; k++)
        for (size_t i = 0; i < c->block; i++)
            if (rbuf[(size_t)k * c->block + i] != byte_of(k, i)) return 16;
    if (x.net_bytes != (uint64_t)(c->n - 1) * c->block + 2 * sizeof(hier_net_note_t)) return 17; /* (and 2 notes) */
    size_t pieces = c->block / c->max_write + (c->block % c->max_write != 0);
    for (int t = 0; t < c->n - 1; t++)
        if (hier_chan_direct_count(counts, (size_t)t) != pieces) return 18;
    for (double end = now() + 20; hier_chan_direct_pending(chans[HIER_DIRECT_RIGHT]);) /* (the target's progress) */
        if (hier_chan_progress(fab) != HIER_OK || now() > end) return 19;
    atomic_store(&g->stage[me], 2);
    if (ring_wait(g, c->n, 2, fab)) return 20;
    for (int k = 0; k < HIER_DIRECT_PEERS; k++) hier_chan_close(chans[k]);
    hier_fabric_mr_dereg(rmr);
    hier_fabric_mr_dereg(smr);
    hier_fabric_close(fab);
    free(rbuf);
    free(sbuf);
    return 0;
}

/* Every rank forked; how many passed (a failing rank says its code). */
static int ring_run(const ring_case_t *c)
{
    ring_t *g = mmap(NULL, sizeof(*g), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    memset(g, 0, sizeof(*g));
    pid_t pids[NMAX];
    int ok = 0;
    for (int r = 0; r < c->n; r++)
        if ((pids[r] = fork()) == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            fabric_reap_self();
            _exit(ring_member(r, c, g));
        }
    for (int r = 0; r < c->n; r++) {
        int st;
        waitpid(pids[r], &st, 0);
        fabric_reap(pids[r]);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) ok++;
        else fprintf(stderr, "ring of %d, block %zu, writes of %zu, in place %d: rank %d ended with %d\n", c->n,
                     c->block, c->max_write, c->in_place, r, WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st));
    }
    munmap(g, sizeof(*g));
    return ok;
}

/* shm with FI_HMEM here, or there is no one-sided path to test. */
static int shm_has_hmem(void)
{
    hier_fabric_config_t cfg = fab_config("shm");
    cfg.hmem = 1;
    hier_fabric_t *fab;
    if (hier_fabric_open(&cfg, &fab) != HIER_OK) return 0;
    int yes = hier_fabric_hmem(fab, 0);
    hier_fabric_close(fab);
    return yes;
}

Test(net_direct, ring_over_shm_every_size_and_order, .timeout = 180)
{
    if (!shm_has_hmem()) cr_skip_test("libfabric's shm provider registers no FI_HMEM memory here");
    static const size_t blocks[] = {1, 4096, 100003};
    static const size_t writes[] = {1000, 65536, 1u << 30};
    for (int n = 2; n <= NMAX; n++)
        for (size_t b = 0; b < 3; b++)
            for (size_t w = 0; w < 3; w++)
                for (int ip = 0; ip <= 1; ip++) {
                    if (blocks[b] / writes[w] > 200) continue; /* (a byte per write is slow, not different) */
                    ring_case_t c = {.n = n, .block = blocks[b], .max_write = writes[w], .in_place = ip};
                    cr_assert_eq(ring_run(&c), n, "ring of %d, block %zu, writes of %zu, in place %d", n, c.block,
                                 c.max_write, ip);
                }
}

/* A write without the target's key must fail, not write anywhere: the
 * executor refuses a schedule whose write comes before its key note. */
Test(net_direct, write_before_key_is_refused)
{
    hier_step_t steps[1] = {{.op = HIER_STEP_NET_WRITE, .peer = HIER_DIRECT_RIGHT, .len = 8,
                             .src = {.kind = HIER_BUF_RECV}}};
    uint8_t buf[8];
    uint32_t counts[1];
    hier_fabric_t *fab = open_fab("shm");
    hier_fabric_mr_t *mr;
    cr_assert(fab);
    cr_assert_eq(hier_fabric_mr_reg(fab, buf, sizeof(buf), &mr), HIER_OK);
    hier_exec_bufs_t bufs = {.rbuf = buf, .esize = 1};
    hier_net_direct_t dw = {.mr = {NULL, mr}, .nic = {NULL, buf}, .counts = counts, .ntags = 1, .max_write = 8};
    hier_net_send_t sendq[1];
    void *links[HIER_DIRECT_PEERS] = {0};
    hier_net_exec_t x = {.link = &hier_link_chan, .fab = fab, .links = links, .bufs = &bufs, .direct = &dw,
                         .run[0].q = {.q = sendq, .cap = 1}};
    hier_status_t st = hier_net_exec_start(&x, 0, steps, 1);
    if (st == HIER_OK) st = hier_net_exec_finish(&x, 0);
    cr_assert_eq(st, HIER_ERR_INVALID_ARG);
    hier_fabric_mr_dereg(mr);
    hier_fabric_close(fab);
}
