/* hier_comm_probe.h: what single copy is worth on this node, measured. */
#ifndef HIER_COMM_PROBE_H
#define HIER_COMM_PROBE_H

#include <stddef.h>

#include "comm/hier_comm_state.h"

/* The allgather's single-copy window of a one-node communicator whose
 * ranks all read each other (hier_node_cma said so): the blocks single
 * copy serves. Collective over the node's
 * ranks, blocking: the window kept from an earlier communicator of as many
 * local ranks when every rank keeps one, else measured (a few allgathers
 * each way on scratch buffers: milliseconds, once per process). Runs inside
 * a call, whose signature it renews after its own. */
hier_status_t hier_probe_cma_window(hier_comm_t *c, hier_select_window_t *w_p);
/* The same without measuring, for a set-up run as a fiber (no call may
 * run): the window the ranks' kept windows share (a rank that keeps none:
 * any block). Agreed with hier_xchg_agree; -1 if it failed. */
int hier_probe_cma_window_kept(hier_comm_t *c, hier_select_window_t *w_p);

#endif
