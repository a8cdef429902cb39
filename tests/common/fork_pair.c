/* fork_pair.c: two processes over the fabric, for the transport tests
 * (see fork_pair.h). */
#include "fork_pair.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fabric_reap.h"

double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Wait for the other rank to reach `v`, polling our endpoint meanwhile (a
 * tcp;ofi_rxm target only receives while it polls). */
int wait_stage(xchg_t *x, int other, int v, hier_fabric_t *fab, double seconds)
{
    double end = now() + seconds;
    hier_fabric_event_t ev[8];
    size_t n;
    while (atomic_load(&x->stage[other]) < v) {
        if (fab) hier_fabric_poll(fab, ev, 8, &n);
        if (now() > end) return -1;
        usleep(100);
    }
    return 0;
}

int run_pair(body_t body, const char *prov)
{
    xchg_t *x = mmap(NULL, sizeof(*x), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    memset(x, 0, sizeof(*x));
    pid_t pids[2];
    int ok = 0;
    for (int r = 0; r < 2; r++)
        if ((pids[r] = fork()) == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL); /* a test killed on timeout takes its ranks along */
            fabric_reap_self();
            _exit(body(r, x, prov));
        }
    for (int r = 0; r < 2; r++) {
        int st;
        waitpid(pids[r], &st, 0);
        fabric_reap(pids[r]);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) ok++;
        else fprintf(stderr, "%s: rank %d ended with %d\n", prov, r, WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st));
    }
    munmap(x, sizeof(*x));
    return ok;
}

const char *fab_profile;

hier_fabric_config_t fab_config(const char *prov)
{
    if (!strcmp(prov, PAIR_RAILS)) /* every interface here, two rails per process, messages striped */
        return (hier_fabric_config_t){.provider = "tcp", .iface = "*", .max_rails = 2, .stripe = 1,
                                      .profile = fab_profile};
    return (hier_fabric_config_t){.provider = prov, .iface = strcmp(prov, "shm") ? "lo" : NULL, .profile = fab_profile};
}

hier_fabric_t *open_fab(const char *prov)
{
    hier_fabric_t *fab;
    hier_fabric_config_t cfg = fab_config(prov);
    return hier_fabric_open(&cfg, &fab) == HIER_OK ? fab : NULL;
}

/* Both ranks: open, publish the address, learn the other's. */
int connect_pair(int me, xchg_t *x, hier_fabric_t *fab, hier_fabric_peer_t *peer)
{
    size_t len;
    if (hier_fabric_addr(fab, x->addr[me], &len) != HIER_OK) return 1;
    atomic_store(&x->stage[me], 1);
    if (wait_stage(x, !me, 1, NULL, 20)) return 2;
    return hier_fabric_insert(fab, x->addr[!me], peer) == HIER_OK ? 0 : 3;
}


/* Open, connect and give both ranks one channel of `slots` x `bytes`: 0, or a code to exit with. */
int chan_pair(int me, xchg_t *x, const char *prov, size_t slots, size_t bytes, hier_fabric_t **fab_p,
                     hier_chan_t **ch_p)
{
    hier_fabric_peer_t peer;
    if (!(*fab_p = open_fab(prov)) || connect_pair(me, x, *fab_p, &peer)) return 10;
    if (hier_chan_open(*fab_p, slots, bytes, ch_p) != HIER_OK) return 11;
    hier_chan_info(*ch_p, &x->chan[me]);
    atomic_store(&x->stage[me], 2);
    if (wait_stage(x, !me, 2, *fab_p, 20)) return 12;
    return hier_chan_connect(*ch_p, peer, &x->chan[!me]) == HIER_OK ? 0 : 13;
}
