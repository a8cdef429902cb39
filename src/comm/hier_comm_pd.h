/* hier_comm_pd.h: allgather of device buffers NIC to NIC, "peer direct" (internal; hier_comm_pd.c). */
#ifndef HIER_COMM_PD_H
#define HIER_COMM_PD_H

#include "comm/hier_comm_state.h"
#include "accel/hier_accel.h"

/* Every rank calls it, host buffers too, for every allgather hier_select_route sends NIC to NIC, with the call's
 * buffers as classified (d); the vote the first time. 1 when it served the call (status in *st_p), 0 when the
 * caller goes on (host call or staging pipeline): the same answer on every rank. */
int hier_comm_pd_allgather(hier_comm_t *c, const hier_accel_pair_t *d, const hier_call_t *call,
                           hier_result_t *res, hier_status_t *st_p);
/* The communicator's vote, as the route takes it: -1 not taken yet, 0 off for good, 1 on. */
int hier_comm_pd_voted(const hier_comm_t *c);
/* Close the communicator's ring, if any (the vote forgotten too). */
void hier_comm_pd_close(hier_comm_t *c);

#endif
