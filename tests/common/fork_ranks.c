/* fork_ranks.c: forked ranks for unit tests (fork_ranks.h). */
#include "fork_ranks.h"

#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fabric_reap.h"

void fork_barrier(fork_world_t *w)
{
    int gen = atomic_load(&w->generation);
    if (atomic_fetch_add(&w->arrived, 1) == w->nranks - 1) {
        atomic_store(&w->arrived, 0);
        atomic_fetch_add(&w->generation, 1);
    } else {
        while (atomic_load(&w->generation) == gen) sched_yield();
    }
}

int fork_exchanges;

static int fork_allgather(const void *sbuf, void *rbuf, size_t len, void *arg)
{
    fork_rank_t *r = arg;
    fork_exchanges++;
    if (len * (size_t)r->w->nranks > sizeof(r->w->buf)) return -1;
    memcpy(r->w->buf + (size_t)r->me * len, sbuf, len);
    fork_barrier(r->w);
    memcpy(rbuf, r->w->buf, len * (size_t)r->w->nranks);
    fork_barrier(r->w);
    return 0;
}

static int fork_agree(int *values, int n, void *arg)
{
    fork_rank_t *r = arg;
    fork_exchanges++;
    if (n > 8) return -1;
    memcpy(r->w->values[r->me], values, (size_t)n * sizeof(int));
    fork_barrier(r->w);
    for (int i = 0; i < r->w->nranks; i++)
        for (int k = 0; k < n; k++)
            if (r->w->values[i][k] < values[k]) values[k] = r->w->values[i][k];
    fork_barrier(r->w);
    return 0;
}

int fork_ranks_per_node;

/* Rank r shares my node when the layout says so; its process is r. */
static int fork_peer(int r, uint64_t *proc, void *arg)
{
    fork_rank_t *fr = arg;
    *proc = (uint64_t)r + 1000;
    return !fork_ranks_per_node || r / fork_ranks_per_node == fr->me / fork_ranks_per_node;
}

hier_comm_ops_t fork_ops;

int run_ranks(int n, rank_body_t body, int *statuses)
{
    fork_world_t *w = mmap(NULL, sizeof(*w), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pid_t pids[64];
    int ok = 0;
    memset(w, 0, sizeof(*w));
    w->nranks = n;
    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            fork_rank_t fr = {w, r};
            prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY); /* let siblings read us (Yama ptrace_scope 1) */
            prctl(PR_SET_PDEATHSIG, SIGKILL);          /* a test killed on timeout takes its ranks along */
            fabric_reap_self();
            fork_ops = (hier_comm_ops_t){.allgather = fork_allgather, .agree = fork_agree, .peer = fork_peer,
                                         .progress = NULL, .arg = &fr};
            hier_comm_t *comm;
            if (hier_comm_create(n, r, &fork_ops, &comm) != HIER_OK) _exit(3);
            int rc = body(comm, r, n, w);
            hier_comm_destroy(comm);
            hier_proc_finalize(); /* closes the endpoint: the shm provider leaves a file behind otherwise */
            _exit(rc);
        }
    }
    for (int r = 0; r < n; r++) {
        int st;
        waitpid(pids[r], &st, 0);
        fabric_reap(pids[r]);
        statuses[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        ok += statuses[r] == 0;
    }
    munmap(w, sizeof(*w));
    return ok;
}

