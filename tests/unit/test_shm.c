/* The shared-memory engine end to end with forked processes: segment set-up
 * and unlink, thousands of back-to-back collectives with exact results (no
 * lost or repeated update), an unusable directory, a peer that dies, and a
 * segment from a mismatched build. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fabric_reap.h"
#include "fork_ranks.h"
#include "accel/hier_accel.h"
#include "comm/hier_comm.h"
#include "comm/hier_comm_state.h" /* (white mailbox: the reduce_scatter slice layout) */
#include "base/hier_log.h"
#include "base/hier_params.h"
#include "shm/hier_shm.h"
#include "shm/hier_shm_pool.h"
#include "test_dev_backend.h"

/* The segments in the directory this test's ranks make them in: a test
 * that counts them uses one of its own (private_dir), as other test
 * programs running beside it (make -j2 check) make and unlink theirs in
 * /dev/shm at any moment. */
static int count_segments(void)
{
    int n = 0;
    DIR *d = opendir(hier_params.shm_dir && *hier_params.shm_dir ? hier_params.shm_dir : "/dev/shm");
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (!strncmp(e->d_name, "coll-hier-", 10)) n++;
    if (d) closedir(d);
    return n;
}

/* Segments of this test as files in a directory of its own under /dev/shm
 * (coll_hier_shm_dir), made now; the ranks forked after inherit it. */
static char private_dir_name[64];
static void private_dir(void)
{
    snprintf(private_dir_name, sizeof(private_dir_name), "/dev/shm/hier-test-%d", (int)getpid());
    cr_assert(mkdir(private_dir_name, 0700) == 0 || errno == EEXIST, "cannot make %s", private_dir_name);
    hier_params.shm_dir = private_dir_name;
}

static void private_dir_gone(void)
{
    rmdir(private_dir_name); /* (empty, if nothing was left: the tests say so first) */
}

static void setup(void)
{
    hier_params_defaults(&hier_params);
    hier_params.shm_chunk_size = 4096;
    hier_params.spin_count = 50;
}

TestSuite(shm, .init = setup, .timeout = 60);

/* 3000 collectives back to back, all algorithms, sizes from 1 element to
 * several chunks; every element checked exactly (int64 sums). */
static int many_collectives(hier_comm_t *comm, int me, int n, fork_world_t *w)
{
    (void)w;
    static int64_t s[6000], r[6000 * 8];
    size_t rcounts[64];
    int single_copies = 0, low_latency = 0;
    for (int it = 0; it < 3000; it++) {
        /* every fourth call small enough for the low-latency path */
        size_t count = it % 4 == 3 ? 1 + (size_t)(it % 100) : 1 + (size_t)(it * 7919 % 5000);
        hier_result_t res;
        static const int algos[] = {HIER_ALGO_AUTO, HIER_ALGO_FLAT, HIER_ALGO_RSAG, HIER_ALGO_NUMA, HIER_ALGO_LL};
        hier_params.allreduce_algorithm = algos[it % 5];
        /* (forked siblings may read each other: single copy runs too) */
        hier_params.allgather_algorithm = it % 7 < 2 ? HIER_ALGO_CMA : it % 7 < 4 ? HIER_ALGO_LL : HIER_ALGO_SHM;
        hier_params.reduce_scatter_algorithm = it % 11 < 5 ? HIER_ALGO_SHM : HIER_ALGO_AUTO;
        for (size_t i = 0; i < count; i++) s[i] = (int64_t)(me + 1) * (int64_t)(it + (int)i);
        switch (it % 3) {
        case 0:
            if (hier_comm_allreduce(comm, s, r, count, HIER_DT_INT64, HIER_OP_SUM, &res) != HIER_OK) return 10;
            for (size_t i = 0; i < count; i++)
                if (r[i] != (int64_t)n * (n + 1) / 2 * (it + (int)i)) return 11;
            break;
        case 1:
            if (hier_comm_allgather(comm, s, r, count * sizeof(int64_t), &res) != HIER_OK) return 20;
            for (int j = 0; j < n; j++)
                for (size_t i = 0; i < count; i++)
                    if (r[(size_t)j * count + i] != (int64_t)(j + 1) * (it + (int)i)) return 21;
            break;
        default: {
            size_t total = 0, mine = 0;
            for (int j = 0; j < n; j++) {
                rcounts[j] = (count + (size_t)j * 3) / (size_t)n;
                if (j < me) mine += rcounts[j];
                total += rcounts[j];
            }
            for (size_t i = 0; i < total; i++) s[i] = (int64_t)(me + 1) * (int64_t)(it + (int)i);
            if (hier_comm_reduce_scatter(comm, s, r, rcounts, HIER_DT_INT64, HIER_OP_SUM, &res) != HIER_OK)
                return 30;
            for (size_t i = 0; i < rcounts[me]; i++)
                if (r[i] != (int64_t)n * (n + 1) / 2 * (it + (int)(mine + i))) return 31;
        }
        }
        single_copies += res.path == HIER_PATH_CMA_COPY;
        low_latency += res.path == HIER_PATH_SHM_LL;
    }
    if (low_latency < 150) return 41;   /* the low-latency path ran too */
    return single_copies > 200 ? 0 : 40; /* and the single-copy allgather */
}

Test(shm, thousands_of_collectives_exact_and_nothing_left)
{
    private_dir();
    int before = count_segments(), st[64];
    for (int n = 2; n <= 5; n += 3) {
        int ok = run_ranks(n, many_collectives, st);
        for (int r = 0; r < n; r++) cr_expect_eq(st[r], 0, "n %d rank %d exited with %d", n, r, st[r]);
        cr_assert_eq(ok, n);
    }
    cr_assert_eq(count_segments(), before, "segments left in %s", hier_params.shm_dir);
    private_dir_gone();
}

/* The segment's name is gone as soon as set-up finished: no name left in
 * the test's own directory (other tests' segments come and go in the
 * default one meanwhile) while the communicator still uses the segment. */
static int unlinked_after_setup(hier_comm_t *comm, int me, int n, fork_world_t *w)
{
    int64_t x = me, y;
    hier_result_t res;
    (void)n;
    for (int i = 0; i < 2; i++) { /* (the first may be piggybacked on the set-up's exchange) */
        if (hier_comm_allreduce(comm, &x, &y, 1, HIER_DT_INT64, HIER_OP_SUM, &res) != HIER_OK) return 1;
        if (res.path >= HIER_PATH_FIRST_FALLBACK || y != 3) return 3;
    }
    fork_barrier(w);
    return count_segments() == 0 ? 0 : 2;
}

Test(shm, name_unlinked_once_everyone_attached)
{
    int st[64];
    private_dir();
    cr_assert_eq(run_ranks(3, unlinked_after_setup, st), 3, "statuses %d %d %d", st[0], st[1], st[2]);
    private_dir_gone();
}

static int unusable_dir(hier_comm_t *comm, int me, int n, fork_world_t *w)
{
    int64_t x = me, y;
    hier_result_t res = {.path = HIER_PATH_COUNT};
    (void)n, (void)w;
    hier_params.shm_dir = "/nonexistent/coll-hier-test";
    for (int i = 0; i < 3; i++) { /* stays a fallback, consistently on every rank */
        if (hier_comm_allreduce(comm, &x, &y, 1, HIER_DT_INT64, HIER_OP_SUM, &res) != HIER_ERR_NOT_SUPPORTED)
            return 1;
        if (res.path != HIER_PATH_FALLBACK_SHM) return 2;
    }
    return 0;
}

Test(shm, unusable_directory_falls_back_on_every_rank)
{
    int st[64];
    cr_assert_eq(run_ranks(3, unusable_dir, st), 3, "statuses %d %d %d", st[0], st[1], st[2]);
}

/* Rank 1 leaves mid-stream: the others get HIER_ERR_PEER_DEAD, not a hang. */
static int peer_dies(hier_comm_t *comm, int me, int n, fork_world_t *w)
{
    int64_t x[64] = {0}, y[64];
    hier_result_t res;
    (void)n, (void)w;
    for (int it = 0; it < 100000; it++) {
        if (me == 1 && it == 50) _exit(0);
        hier_status_t st = hier_comm_allreduce(comm, x, y, 64, HIER_DT_INT64, HIER_OP_SUM, &res);
        if (st == HIER_ERR_PEER_DEAD) return it >= 50 ? 0 : 5;
        if (st != HIER_OK) return 6;
    }
    return 7; /* never noticed */
}

Test(shm, dead_peer_is_reported_not_waited_for)
{
    int st[64];
    cr_assert_eq(run_ranks(3, peer_dies, st), 3, "statuses %d %d %d", st[0], st[1], st[2]);
}

Test(shm, attach_rejects_a_different_layout)
{
    hier_shm_shape_t two = {.kind = HIER_SHM_NODE, .nranks = 2, .chunk_bytes = 8192};
    hier_shm_shape_t chunk = two, three = two, pipe = two;
    hier_shm_t *a, *b;
    char name[HIER_SHM_NAME_MAX];
    chunk.chunk_bytes = 16384;
    three.nranks = 3;
    pipe.kind = HIER_SHM_PIPE;
    cr_assert_eq(hier_shm_create(NULL, &two, &a), HIER_OK);
    snprintf(name, sizeof(name), "%s", hier_shm_name(a));
    cr_assert(strlen(name) > 30, "an unpredictable name: %s", name);
    cr_assert_eq(hier_shm_attach(NULL, name, &chunk, &b), HIER_ERR_SHM, "chunk size mismatch accepted");
    cr_assert_eq(hier_shm_attach(NULL, name, &three, &b), HIER_ERR_SHM, "rank count mismatch accepted");
    cr_assert_eq(hier_shm_attach(NULL, name, &pipe, &b), HIER_ERR_SHM, "kind mismatch accepted");
    cr_assert_eq(hier_shm_attach(NULL, name, &two, &b), HIER_OK);
    cr_assert_eq(hier_shm_claim(b, 1), HIER_OK);
    cr_assert_eq(hier_shm_claim(a, 0), HIER_OK);
    cr_assert_eq(hier_shm_ctl(a, 1)->pid, (int32_t)getpid(), "a peer's claim published in the other mapping");
    hier_shm_unlink(a);
    hier_shm_detach(b);
    hier_shm_detach(a);
    cr_assert_eq(hier_shm_attach(NULL, name, &two, &b), HIER_ERR_SHM, "unlinked name still attachable");
}

/* A file someone else put under the name is never taken for ours, and a
 * fresh name is never the same twice. */
Test(shm, fresh_names_are_exclusive)
{
    hier_shm_shape_t s = {.kind = HIER_SHM_NODE, .nranks = 2, .chunk_bytes = 8192};
    hier_shm_t *a, *b;
    cr_assert_eq(hier_shm_create(NULL, &s, &a), HIER_OK);
    cr_assert_eq(hier_shm_create(NULL, &s, &b), HIER_OK);
    cr_assert_str_neq(hier_shm_name(a), hier_shm_name(b));
    hier_shm_unlink(a);
    hier_shm_unlink(b);
    hier_shm_detach(a);
    hier_shm_detach(b);
}

Test(shm, layout_is_a_wire_format)
{
    hier_shm_shape_t node2 = {.kind = HIER_SHM_NODE, .nranks = 2, .chunk_bytes = 8192};
    hier_shm_shape_t node40 = {.kind = HIER_SHM_NODE, .nranks = 40, .chunk_bytes = 8192};
    hier_shm_shape_t pipe4 = {.kind = HIER_SHM_PIPE, .nranks = 4, .chunk_bytes = 262144};
    cr_assert_eq(sizeof(hier_shm_header_t), 128);
    cr_assert_eq(sizeof(hier_shm_offer_t), 128);
    cr_assert_eq(sizeof(hier_shm_ctl_t), 128);
    /* header, offer, 2 control lines, 2 x 2 low-latency lines: one page; 2 x 2
     * tails of 8 KiB: 8 pages; then 2 slots of 2 x 8 KiB */
    cr_assert_eq(hier_shm_size(&node2), 9 * 4096 + 2 * 16384);
    /* 256 + 40 x 128 + 80 x 128 = 15616 bytes: 4 pages; 80 tails: 160 pages */
    cr_assert_eq(hier_shm_size(&node40), 164 * 4096 + 40 * 16384);
    cr_assert_eq(hier_shm_size(&pipe4), 4096 + 4 * 524288);
}

/* A rank that takes a recycled segment into a new communicator shows its
 * past communicator's signatures until it has cleared them. Set up without
 * an agreement, a peer may already wait for it in the first call: while it
 * says it is joining, the peer takes it as late (without the flag it saw
 * call 57 of "another collective": a false mismatch). */
typedef struct {
    hier_shm_t *seg;
    hier_sig_t sig;
    hier_status_t st;
} joiner_t;

static void *late_joiner(void *arg)
{
    joiner_t *j = arg;
    hier_shm_wait_t w = {.nranks = 2, .me = 1, .spin_count = 10};
    usleep(300000); /* (the waiting rank looks at it every 1024 yields: many times) */
    hier_shm_sign_reset(j->seg, 1);
    hier_shm_sign(j->seg, &w, j->sig);
    j->st = hier_shm_barrier(j->seg, &w);
    return NULL;
}

Test(shm, a_rank_joining_a_recycled_segment_is_late_not_in_another_call)
{
    hier_shm_shape_t s = {.kind = HIER_SHM_NODE, .nranks = 2, .chunk_bytes = 8192};
    hier_shm_t *a, *b;
    cr_assert_eq(hier_shm_create(NULL, &s, &a), HIER_OK);
    cr_assert_eq(hier_shm_claim(a, 0), HIER_OK);
    cr_assert_eq(hier_shm_attach(NULL, hier_shm_name(a), &s, &b), HIER_OK);
    cr_assert_eq(hier_shm_claim(b, 1), HIER_OK);
    hier_shm_unlink(a);
    hier_shm_wait_t past = {.nranks = 2, .me = 1, .spin_count = 10}, w = {.nranks = 2, .me = 0, .spin_count = 10};
    hier_shm_sign(b, &past, hier_sig_make(HIER_COLL_ALLREDUCE, 8, HIER_DT_INT32, HIER_OP_SUM, 0, 57));
    hier_shm_joining(b, 1);
    joiner_t j = {.seg = b, .sig = hier_sig_make(HIER_COLL_ALLREDUCE, 8, HIER_DT_INT32, HIER_OP_SUM, 0, 1)};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, late_joiner, &j), 0);
    hier_shm_sign(a, &w, j.sig);
    hier_status_t st = hier_shm_barrier(a, &w);
    pthread_join(t, NULL);
    cr_assert_eq(st, HIER_OK, "the waiting rank: %s", hier_status_str(st));
    cr_assert_eq(j.st, HIER_OK);
    hier_shm_detach(b);
    hier_shm_detach(a);
}

/* A wait past its spin: crowded (progress_every 16), Open MPI's progress
 * every 16th turn and the endpoint alone between; with a core each (1),
 * progress every turn (hier_wait.h). The callbacks count the turns and make
 * the word ready after the 64th. */
static _Atomic uint64_t turn_word;
static int turn_progress, turn_polls;

static void turn_count(int *n)
{
    (*n)++;
    if (turn_progress + turn_polls == 64) atomic_store(&turn_word, 1);
}

static void turn_on_progress(void)
{
    turn_count(&turn_progress);
}

static void turn_on_poll(void)
{
    turn_count(&turn_polls);
}

static void wait_turns(hier_shm_t *seg, int every)
{
    hier_shm_wait_t w = {.nranks = 2, .me = 0, .spin_count = 0, .progress = turn_on_progress, .poll = turn_on_poll,
                         .progress_every = every};
    atomic_store(&turn_word, 0);
    turn_progress = turn_polls = 0;
    cr_assert_eq(hier_shm_wait(seg, 1, &turn_word, 1, &w), HIER_OK);
}

Test(shm, a_crowded_wait_calls_open_mpis_progress_every_16th_turn)
{
    hier_shm_shape_t s = {.kind = HIER_SHM_NODE, .nranks = 2, .chunk_bytes = 8192};
    hier_shm_t *seg;
    cr_assert_eq(hier_shm_create(NULL, &s, &seg), HIER_OK);
    hier_shm_unlink(seg);
    wait_turns(seg, 16);
    cr_assert_eq(turn_progress, 4, "Open MPI's progress at turns 16, 32, 48, 64: %d", turn_progress);
    cr_assert_eq(turn_polls, 60, "the endpoint alone the other turns: %d", turn_polls);
    wait_turns(seg, 1);
    cr_assert_eq(turn_progress, 64, "a core each: every turn (%d)", turn_progress);
    cr_assert_eq(turn_polls, 0);
    wait_turns(seg, 0); /* (a wait made without the field: every turn) */
    cr_assert_eq(turn_progress, 64);
    hier_shm_detach(seg);
}

/* A peer that writes the word, finishes its call and exits between the
 * waiter's last look and its check has done its part: the wait is served,
 * not told the peer died (seen once in CI: a rank of a node ended its last
 * reduce_scatter and exited while its leader was still in the barrier). The
 * word is made ready by the progress call of the turn that checks, and the
 * peer's pid is a reaped child's. */
static void ready_at_check(void)
{
    if (++turn_progress == 1024) atomic_store(&turn_word, 1); /* (HIER_SHM_CHECK_YIELDS) */
}

Test(shm, a_peer_that_wrote_then_exited_has_done_its_part)
{
    hier_shm_shape_t s = {.kind = HIER_SHM_NODE, .nranks = 2, .chunk_bytes = 8192};
    hier_shm_t *seg;
    pid_t gone = fork();
    if (gone == 0) _exit(0);
    cr_assert(gone > 0);
    waitpid(gone, NULL, 0);
    cr_assert_eq(hier_shm_create(NULL, &s, &seg), HIER_OK);
    hier_shm_unlink(seg);
    hier_shm_ctl(seg, 1)->pid = gone;
    hier_shm_wait_t w = {.nranks = 2, .me = 0, .spin_count = 0, .progress = ready_at_check, .progress_every = 1};
    atomic_store(&turn_word, 0);
    turn_progress = 0;
    cr_assert_eq(hier_shm_wait(seg, 1, &turn_word, 1, &w), HIER_OK);
    cr_assert_eq(turn_progress, 1024, "served at the turn that checked (%d)", turn_progress);
    atomic_store(&turn_word, 0); /* (never written: the dead peer is reported) */
    cr_assert_eq(hier_shm_wait(seg, 1, &turn_word, 1, &w), HIER_ERR_PEER_DEAD);
    hier_shm_detach(seg);
}

/* ---- communicators made and freed by the hundred ---- */

/* One checked 8-byte allreduce on a communicator of my own, then its footprint. */
static int small_call(int me, int n, hier_comm_footprint_t *fp, int keep, hier_comm_t **comm_p)
{
    hier_comm_t *c;
    int64_t x = me + 1, y = 0;
    hier_result_t res;
    if (hier_comm_create(n, me, &fork_ops, &c) != HIER_OK) return 1;
    if (hier_comm_allreduce(c, &x, &y, 1, HIER_DT_INT64, HIER_OP_SUM, &res) != HIER_OK) return 2;
    if (y != (int64_t)n * (n + 1) / 2) return 3;
    hier_comm_footprint(c, fp);
    if (keep) *comm_p = c;
    else hier_comm_destroy(c);
    return 0;
}

/* A dup storm: each communicator's node segment is the previous one's,
 * nothing but the node level is made for small messages, and nothing is
 * left in /dev/shm. */
static int storm(hier_comm_t *comm, int me, int n, fork_world_t *w)
{
    int recycled = 0, before;
    (void)comm;
    fork_barrier(w); /* (counted with no set-up under way, and at the end after every rank's last one) */
    before = count_segments();
    for (int i = 0; i < 200; i++) {
        hier_comm_footprint_t fp;
        int rc = small_call(me, n, &fp, 0, NULL);
        if (rc) return 10 + rc;
        if (!fp.node || fp.pipeline || fp.net || fp.peer_direct || fp.staging) return 20;
        recycled += fp.recycled;
    }
    if (recycled < 190) return 30;
    fork_barrier(w);
    if (count_segments() > before) return 31;
    if (hier_shm_pool_count() < 1) return 32;
    return 0;
}

/* Communicators of processes that had one before set up in one exchange
 * (every rank prepared: the leader's recycled segment set aside by
 * the others), without the agreement; with a rank whose pool holds nothing,
 * in an exchange and an agreement, fresh, still right. */
static int one_exchange(hier_comm_t *comm, int me, int n, fork_world_t *w)
{
    hier_comm_footprint_t fp;
    (void)comm, (void)w;
    for (int i = 0; i < 50; i++) {
        int before = fork_exchanges, rc = small_call(me, n, &fp, 0, NULL);
        if (rc) return 10 + rc;
        if (i > 0 && (!fp.recycled || fork_exchanges - before != 1)) return 20 + (fork_exchanges - before);
    }
    if (me == 1) hier_params.shm_budget = 1; /* (nothing pooled from now on) */
    for (int i = 0; i < 5; i++) {
        int before = fork_exchanges, rc = small_call(me, n, &fp, 0, NULL);
        if (rc) return 40 + rc;
        if (i > 0 && fork_exchanges - before < 2) return 50 + (fork_exchanges - before); /* (0: one pooled still) */
    }
    return 0;
}

Test(shm, communicators_of_known_processes_set_up_in_one_exchange)
{
    int st[64];
    cr_assert_eq(run_ranks(3, one_exchange, st), 3, "statuses %d %d %d", st[0], st[1], st[2]);
}

Test(shm, communicators_recycle_their_segments)
{
    int st[64];
    private_dir();
    cr_assert_eq(run_ranks(3, storm, st), 3, "statuses %d %d %d", st[0], st[1], st[2]);
    private_dir_gone();
}

/* Communicators alive at once each have their own segment (a storm of
 * splits); freed, they go to the pool, bounded. */
static int live_ones(hier_comm_t *comm, int me, int n, fork_world_t *w)
{
    hier_comm_t *live[40];
    (void)comm, (void)w;
    for (int i = 0; i < 40; i++) {
        hier_comm_footprint_t fp;
        int rc = small_call(me, n, &fp, 1, &live[i]);
        if (rc) return 10 + rc;
        if (i > 0 && fp.recycled) return 20; /* (the pool had none: every one is alive) */
    }
    size_t mapped = hier_shm_mapped_total();
    for (int i = 0; i < 40; i++) hier_comm_destroy(live[i]);
    if (hier_shm_pool_count() > 32) return 30;
    return hier_shm_mapped_total() < mapped ? 0 : 31;
}

Test(shm, live_communicators_have_their_own_segments)
{
    int st[64];
    cr_assert_eq(run_ranks(2, live_ones, st), 2, "statuses %d %d", st[0], st[1]);
}

/* A large call with a budget too small for pipeline buffers: the small
 * slots serve it, correctly; with room for smaller ones than asked for,
 * those. Never a failure. */
static int budget(hier_comm_t *comm, int me, int n, fork_world_t *w)
{
    size_t count = 200000;
    int64_t *x = malloc(count * 8), *y = malloc(count * 8);
    hier_result_t res;
    (void)w;
    for (size_t i = 0; i < count; i++) x[i] = (int64_t)(me + 1) * (int64_t)i;
    hier_params.shm_chunk_size = 262144;
    for (int round = 0; round < 2; round++) {
        hier_comm_t *c;
        hier_comm_footprint_t fp;
        /* round 0: nothing beyond the node segment fits; round 1: 64 KiB buffers do, 256 KiB ones do not */
        hier_params.shm_budget = round == 0 ? 1 : hier_shm_mapped_total() + 300 * 1024;
        if (hier_comm_create(n, me, &fork_ops, &c) != HIER_OK) return 1;
        for (int it = 0; it < 3; it++) {
            memset(y, 0, count * 8);
            if (hier_comm_allreduce(c, x, y, count, HIER_DT_INT64, HIER_OP_SUM, &res) != HIER_OK) return 2;
            for (size_t i = 0; i < count; i++)
                if (y[i] != (int64_t)n * (n + 1) / 2 * (int64_t)i) return 3;
        }
        hier_comm_footprint(c, &fp);
        if (fp.pipeline != round) return 4 + round;
        if (round == 1 && fp.mapped_bytes > hier_params.shm_budget) return 6;
        hier_comm_destroy(c);
    }
    (void)comm;
    free(x);
    free(y);
    return 0;
}

Test(shm, a_small_budget_gives_smaller_buffers_never_a_failure)
{
    int st[64];
    cr_assert_eq(run_ranks(2, budget, st), 2, "statuses %d %d", st[0], st[1]);
}

/* Rank 1 keeps nothing (its budget is all in use): the leader offers its
 * recycled segment, rank 1 lacks it, and the set-up makes a fresh one. */
static int missing(hier_comm_t *comm, int me, int n, fork_world_t *w)
{
    int before;
    (void)comm;
    /* (counted with no set-up under way, and at the end after every rank's
     * last one: a call piggybacked on its set-up can end on rank 1 before the
     * leader unlinks the fresh segment, a moment later) */
    fork_barrier(w);
    before = count_segments();
    if (me == 1) hier_params.shm_budget = 1;
    for (int i = 0; i < 20; i++) {
        hier_comm_footprint_t fp;
        int rc = small_call(me, n, &fp, 0, NULL);
        if (rc) return 10 + rc;
        if (fp.recycled) return 20;
    }
    fork_barrier(w);
    return count_segments() > before ? 30 : 0;
}

Test(shm, a_recycled_segment_missing_somewhere_means_a_fresh_one)
{
    int st[64];
    private_dir();
    cr_assert_eq(run_ranks(2, missing, st), 2, "statuses %d %d", st[0], st[1]);
    private_dir_gone();
}

/* ---- several nodes: forked ranks as nodes of 2, joined over libfabric ---- */

/* Allreduce, allgather and reduce_scatter of int64 on host or device
 * buffers, exact; every call must have been served between nodes. */
static int across_nodes_calls(hier_comm_t *comm, int me, int n, int64_t *s, int64_t *r, int on_device)
{
    int64_t *sh = on_device ? (int64_t *)tdev_alias(s) : s, *rh = on_device ? (int64_t *)tdev_alias(r) : r;
    size_t rcounts[64];
    for (int it = 0; it < 60; it++) {
        size_t count = it % 2 ? 1 + (size_t)(it * 7919 % 20000) : 1 + (size_t)it;
        hier_result_t res;
        hier_params.net_algorithm = it % 3 == 0 ? HIER_ALGO_AUTO : it % 3 == 1 ? HIER_ALGO_RING : HIER_ALGO_RH;
        for (size_t i = 0; i < count * (size_t)n; i++) sh[i] = (int64_t)(me + 1) * (int64_t)(it + (int)i);
        switch (it % 3) {
        case 0:
            if (hier_comm_allreduce(comm, s, r, count, HIER_DT_INT64, HIER_OP_SUM, &res) != HIER_OK) return 10;
            for (size_t i = 0; i < count; i++)
                if (rh[i] != (int64_t)n * (n + 1) / 2 * (it + (int)i)) return 11;
            if (res.path != HIER_PATH_NET_RD && res.path != HIER_PATH_NET_RING && res.path != HIER_PATH_NET_RH)
                return 12;
            break;
        case 1:
            if (hier_comm_allgather(comm, s, r, count * 8, &res) != HIER_OK) return 20;
            for (int j = 0; j < n; j++)
                for (size_t i = 0; i < count; i++)
                    if (rh[(size_t)j * count + i] != (int64_t)(j + 1) * (it + (int)i)) return 21;
            if (res.path != HIER_PATH_NET_COPY) return 22;
            break;
        default: {
            size_t mine = 0;
            for (int j = 0; j < n; j++) {
                rcounts[j] = (count + (size_t)j * 5) / (size_t)n;
                if (j < me) mine += rcounts[j];
            }
            if (hier_comm_reduce_scatter(comm, s, r, rcounts, HIER_DT_INT64, HIER_OP_SUM, &res) != HIER_OK)
                return 30;
            for (size_t i = 0; i < rcounts[me]; i++)
                if (rh[i] != (int64_t)n * (n + 1) / 2 * (it + (int)(mine + i))) return 31;
            if (res.path != HIER_PATH_NET_RS) return 32;
        }
        }
        if (res.staged != on_device) return 40;
    }
    /* reduce_scatter chunks were slices of every rank's block (else every
     * node's result went one after another: correct, at half the link) */
    if (!comm->rs_slices) return 45;
    return 0;
}

static int across_nodes(hier_comm_t *comm, int me, int n, fork_world_t *w, int on_device)
{
    size_t bytes = 20000 * (size_t)n * 8;
    int64_t *s = on_device ? tdev_alloc(bytes) : malloc(bytes), *r = on_device ? tdev_alloc(bytes) : malloc(bytes);
    int rc = s && r ? across_nodes_calls(comm, me, n, s, r, on_device) : 9;
    (void)w;
    if (on_device) { /* (NULL is fine) */
        tdev_free(s);
        tdev_free(r);
    } else {
        free(s);
        free(r);
    }
    return rc;
}

static int across_nodes_host(hier_comm_t *comm, int me, int n, fork_world_t *w)
{
    return across_nodes(comm, me, n, w, 0);
}

static int across_nodes_device(hier_comm_t *comm, int me, int n, fork_world_t *w)
{
    return across_nodes(comm, me, n, w, 1);
}

static void nodes_setup(const char *provider)
{
    setup();
    hier_params.fabric_provider = (char *)provider;
    hier_params.fabric_iface = strcmp(provider, "shm") ? "lo" : "";
    hier_params.net_chunk_size = 8192;
    hier_params.net_split_min = 1024;
    hier_params.fabric_slot_size = 4096;
    hier_params.fabric_warmup = 0; /* (every call between nodes served: the warm-up has its own case) */
    fork_ranks_per_node = 2;
}

/* Between nodes too, once every rank knows the others' addresses: the
 * first communicator exchanges them (an exchange and an agreement more),
 * the next ones set up in one exchange, which serves their first call
 * (hier_comm_piggyback.c), and their calls after it are served between nodes. */
static int one_exchange_across(hier_comm_t *comm, int me, int n, fork_world_t *w)
{
    (void)comm, (void)w;
    for (int i = 0; i < 30; i++) {
        hier_comm_t *c;
        hier_result_t res;
        int64_t x[3] = {me + 1, i, -me}, y[3];
        int before = fork_exchanges;
        if (hier_comm_create(n, me, &fork_ops, &c) != HIER_OK) return 1;
        for (int call = 0; call < 2; call++) { /* (the first is piggybacked on the set-up once addresses are known) */
            if (hier_comm_allreduce(c, x, y, 3, HIER_DT_INT64, HIER_OP_SUM, &res) != HIER_OK) return 2;
            if (y[0] != (int64_t)n * (n + 1) / 2 || y[1] != (int64_t)n * i || y[2] != -(int64_t)n * (n - 1) / 2)
                return 3;
            if (res.path != HIER_PATH_NET_RD && res.path != HIER_PATH_NET_RING && res.path != HIER_PATH_NET_RH &&
                (call || res.path != HIER_PATH_SETUP))
                return 4;
        }
        if (i > 1 && fork_exchanges - before != 1) return 20 + (fork_exchanges - before);
        hier_comm_destroy(c);
    }
    return 0;
}

Test(shm, between_nodes_known_processes_set_up_in_one_exchange)
{
    int st[64];
    nodes_setup("tcp");
    int ok = run_ranks(4, one_exchange_across, st);
    fork_ranks_per_node = 0;
    cr_assert_eq(ok, 4, "statuses %d %d %d %d", st[0], st[1], st[2], st[3]);
}

Test(shm, several_nodes_over_tcp_and_shm_providers)
{
    static const char *const providers[] = {"tcp", "shm"};
    int st[64];
    for (int p = 0; p < 2; p++)
        for (int n = 3; n <= 4; n++) { /* 2 + 1 and 2 + 2 */
            nodes_setup(providers[p]);
            int ok = run_ranks(n, across_nodes_host, st);
            for (int r = 0; r < n; r++) cr_expect_eq(st[r], 0, "%s n %d rank %d exited with %d", providers[p], n, r, st[r]);
            cr_assert_eq(ok, n);
        }
    fork_ranks_per_node = 0;
}

/* Device buffers the CPU faults on, on one node and on two: staged. */
Test(shm, device_buffers_are_staged_never_touched)
{
    int st[64];
    cr_assert_eq(hier_accel_register(tdev_backend()), HIER_OK); /* the forked ranks inherit it */
    nodes_setup("tcp");
    cr_assert_eq(run_ranks(4, across_nodes_device, st), 4, "statuses %d %d %d %d", st[0], st[1], st[2], st[3]);
    fork_ranks_per_node = 0;
    hier_accel_reset();
}

/* One rank cannot open the fabric: every rank is served over Open MPI's
 * point-to-point (pml_*), from the first call and for good. */
static int one_without_provider(hier_comm_t *comm, int me, int n, fork_world_t *w)
{
    int64_t x = me, y;
    hier_result_t res = {.path = HIER_PATH_COUNT};
    (void)w;
    /* the provider is missing there, not named differently (that is
     * fallback:params): libfabric reads FI_PROVIDER at its first call */
    if (me == n - 1) setenv("FI_PROVIDER", "no-such-provider", 1);
    for (int i = 0; i < 3; i++) {
        if (hier_comm_allreduce(comm, &x, &y, 1, HIER_DT_INT64, HIER_OP_SUM, &res) != HIER_OK) return 1;
        if (y != (int64_t)n * (n - 1) / 2) return 2;
        if (res.path != HIER_PATH_PML_RD && (i || res.path != HIER_PATH_SETUP)) return 3;
    }
    return 0;
}

Test(shm, a_rank_without_provider_is_served_over_the_point_to_point)
{
    int st[64];
    nodes_setup("tcp");
    cr_assert_eq(run_ranks(4, one_without_provider, st), 4, "statuses %d %d %d %d", st[0], st[1], st[2], st[3]);
    fork_ranks_per_node = 0;
}

/* fabric_warmup: small calls between nodes are served over Open MPI's
 * point-to-point from the first (pml_*) and open nothing; the first large
 * one (fabric_open_min) starts libfabric opening in a thread; calls stay
 * on the point-to-point until every rank's endpoint is open, then move to
 * libfabric at the same call on every rank, right throughout. With a rank
 * missing the provider, they stay on the point-to-point for good. */
#define WARM_BIG 16384 /* int64: 128 KiB, past fabric_open_min */
static int warm_up(hier_comm_t *comm, int me, int n, fork_world_t *w)
{
    static int64_t xs[WARM_BIG], ys[WARM_BIG];
    int64_t x = me + 1, y = 0;
    hier_result_t res = {.path = HIER_PATH_COUNT};
    int missing = getenv("HIER_TEST_NO_PROVIDER") != NULL, moved = -1, calls = 0;
    if (missing && me == n - 1) setenv("FI_PROVIDER", "no-such-provider", 1);
    for (int i = 0; i < 50; i++, calls++) { /* small calls start nothing: over the point-to-point */
        usleep(100);
        if (hier_comm_allreduce(comm, &x, &y, 1, HIER_DT_INT64, HIER_OP_SUM, &res) != HIER_OK ||
            y != (int64_t)n * (n + 1) / 2 || (res.path != HIER_PATH_PML_RD && (i || res.path != HIER_PATH_SETUP)))
            return 9;
    }
    hier_comm_footprint_t fp;
    hier_comm_footprint(comm, &fp);
    if (!fp.net) return 10;
    for (int k = 0; k < WARM_BIG; k++) xs[k] = me + k;
    for (int big = 0; moved < 0 && big < 100000; big++, calls++) { /* a large one starts the opening */
        usleep(100); /* (work between calls, as an application has: 4 ranks spin on 2 cores here) */
        if (hier_comm_allreduce(comm, xs, ys, WARM_BIG, HIER_DT_INT64, HIER_OP_SUM, &res) != HIER_OK) return 2;
        for (int k = 0; k < WARM_BIG; k++)
            if (ys[k] != (int64_t)n * (n - 1) / 2 + (int64_t)n * k) return 6;
        if (res.path >= HIER_PATH_NET_RING && res.path <= HIER_PATH_NET_RS) moved = calls;
        else if (res.path < HIER_PATH_PML_RING || res.path > HIER_PATH_PML_RS) return 4;
        if (missing && big == 2000) break; /* (it never moves) */
    }
    if (missing) return moved < 0 ? 0 : 5;
    if (moved < 0) return 1;
    if (moved == 50) return 7; /* (the first large call opened nothing: it cannot have been ready) */
    w->values[me][0] = moved; /* every rank moved at the same call */
    fork_barrier(w);
    for (int r = 0; r < n; r++)
        if (w->values[r][0] != moved) return 11;
    for (int i = 0; i < 5; i++) /* over libfabric from now on */
        if (hier_comm_allreduce(comm, &x, &y, 1, HIER_DT_INT64, HIER_OP_SUM, &res) != HIER_OK ||
            res.path != HIER_PATH_NET_RD)
            return 8;
    return 0;
}

Test(shm, warm_up_serves_over_the_point_to_point_until_every_endpoint_is_open)
{
    int st[64];
    for (int missing = 0; missing < 2; missing++) {
        nodes_setup("tcp");
        hier_params.fabric_warmup = 1;
        if (missing) setenv("HIER_TEST_NO_PROVIDER", "1", 1);
        cr_expect_eq(run_ranks(4, warm_up, st), 4, "%s: statuses %d %d %d %d", missing ? "a rank without provider" : "",
                     st[0], st[1], st[2], st[3]);
        unsetenv("HIER_TEST_NO_PROVIDER");
    }
    fork_ranks_per_node = 0;
}

/* A rule's chunk= cuts calls between nodes below the pipeline segment's
 * chunk: a 640 KB allreduce on 2 nodes x 2 runs, under `chunk=16K`, as
 * many chunks through a 64 KiB segment as through a 16 KiB one without
 * rules, more than through the 64 KiB one without (white mailbox: the
 * pipeline tier's chunk count), and its results are right. */
static int chunks_of_one_call(hier_comm_t *comm, int me, int n, fork_world_t *w)
{
    (void)w;
    size_t count = 80000;
    int64_t *x = malloc(count * 8), *y = malloc(count * 8);
    hier_result_t res;
    if (!x || !y) return 250;
    for (size_t i = 0; i < count; i++) x[i] = (int64_t)(me + 1) * (int64_t)i;
    if (hier_comm_allreduce(comm, x, y, 16, HIER_DT_INT64, HIER_OP_SUM, &res) != HIER_OK) return 251;
    uint64_t before = comm->node->pipe.chunk_seq;
    if (hier_comm_allreduce(comm, x, y, count, HIER_DT_INT64, HIER_OP_SUM, &res) != HIER_OK) return 252;
    for (size_t i = 0; i < count; i++)
        if (y[i] != (int64_t)n * (n + 1) / 2 * (int64_t)i) return 253;
    uint64_t chunks = comm->node->pipe.chunk_seq - before;
    free(x);
    free(y);
    return chunks > 0 && chunks < 250 ? (int)chunks : 254;
}

static int chunks_under(size_t net_chunk, const char *rules)
{
    int st[64];
    char path[] = "/tmp/test_shm_rulesXXXXXX";
    nodes_setup("tcp");
    hier_params.net_chunk_size = net_chunk;
    if (rules) { /* (each rank loads coll_hier_rules at its first communicator) */
        int fd = mkstemp(path);
        cr_assert(fd >= 0);
        cr_assert_eq(write(fd, rules, strlen(rules)), (ssize_t)strlen(rules));
        close(fd);
        hier_params.rules = path;
    }
    int ok = run_ranks(4, chunks_of_one_call, st);
    if (rules) unlink(path);
    hier_params.rules = "";
    fork_ranks_per_node = 0;
    cr_assert_eq(ok, 0, "the ranks' chunk counts are exit statuses");
    for (int r = 1; r < 4; r++) cr_assert_eq(st[r], st[0], "ranks ran %d and %d chunks", st[0], st[r]);
    cr_assert(st[0] < 250, "status %d", st[0]);
    return st[0];
}

Test(shm, a_rule_chunk_cuts_calls_between_nodes, .timeout = 120)
{
    const char *rule = "coll-hier-rules 1\nnet allreduce ring - 0 any chunk=16K\n";
    int small = chunks_under(16384, NULL), capped = chunks_under(65536, rule), large = chunks_under(65536, NULL);
    cr_expect_eq(capped, small, "chunk=16K: %d chunks, a 16 KiB segment %d", capped, small);
    cr_expect_gt(capped, large, "chunk=16K: %d chunks, a 64 KiB segment %d", capped, large);
}
