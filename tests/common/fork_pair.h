/* fork_pair.h: two forked processes that talk over the libfabric
 * transport, with a shared area to exchange addresses and move in stages
 * (tests/unit/test_fabric.c, test_peers.c). */
#ifndef FORK_PAIR_H
#define FORK_PAIR_H

#include <stdatomic.h>

#include "net/hier_chan.h"
#include "net/hier_fabric.h"

typedef struct {
    _Atomic int stage[2];
    char addr[2][HIER_FABRIC_ADDR_MAX];
    hier_fabric_rkey_t rkey;
    hier_chan_info_t chan[2];
    unsigned long waited;
} xchg_t;

typedef int (*body_t)(int me, xchg_t *x, const char *prov);

double now(void);
/* Wait for the other rank to reach `v`, polling `fab` meanwhile (NULL: not). */
int wait_stage(xchg_t *x, int other, int v, hier_fabric_t *fab, double seconds);
/* Fork both ranks running body; how many exited with 0. */
int run_pair(body_t body, const char *prov);
/* "tcp-rails": the tcp provider over every interface of the machine (lo
 * and eth0, say), two rails per process, messages striped over both. */
#define PAIR_RAILS "tcp-rails"
hier_fabric_config_t fab_config(const char *prov);
/* The fabric profile fab_config asks for (NULL: auto). */
extern const char *fab_profile;
hier_fabric_t *open_fab(const char *prov);
/* Both ranks: publish the address, learn the other's. */
int connect_pair(int me, xchg_t *x, hier_fabric_t *fab, hier_fabric_peer_t *peer);
/* Open, connect and give both ranks one channel of `slots` x `bytes`: 0, or a code to exit with. */
int chan_pair(int me, xchg_t *x, const char *prov, size_t slots, size_t bytes, hier_fabric_t **fab_p,
              hier_chan_t **ch_p);

#endif
