/* hier_wait.h: what a rank waiting for another process calls between polls.
 * The glue passes Open MPI's progress (opal_progress), so the MPI library's
 * own transports move while hier waits in shared memory or on the network. */
#ifndef HIER_WAIT_H
#define HIER_WAIT_H

typedef void (*hier_progress_fn_t)(void);

#endif
