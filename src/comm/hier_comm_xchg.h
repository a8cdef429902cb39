/* hier_comm_xchg.h: a communicator's exchanges with its peers during its
 * set-up (hier_comm_xchg.c): blocking, or, inside a set-up run as a fiber,
 * posted and tested. */
#ifndef HIER_COMM_XCHG_H
#define HIER_COMM_XCHG_H

#include "comm/hier_comm_state.h"

/* Every rank's len bytes into rbuf, by rank (0, or the glue's error). */
int hier_xchg_allgather(hier_comm_t *c, const void *sbuf, void *rbuf, size_t len);
/* values[i] = the minimum over the communicator, i < n (0, or an error). */
int hier_xchg_agree(hier_comm_t *c, int *values, int n);

#endif
