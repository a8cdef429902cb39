/* hier_wait.h: what every wait of hier shares, in shared memory or on the
 * network: Open MPI's progress between polls (the glue passes
 * opal_progress, so the MPI library's own transports move while hier
 * waits), and one clock and one timeout (coll_hier_timeout) for a wait that
 * stands still. */
#ifndef HIER_WAIT_H
#define HIER_WAIT_H

#include <stdint.h>

typedef void (*hier_progress_fn_t)(void);

/* A wait past its spin yields the CPU every turn; where ranks outnumber
 * cores it calls Open MPI's progress every HIER_WAIT_PROGRESS_TURNS turns,
 * not every turn: Open MPI's progress polls every transport and there
 * (mpi_yield_when_idle) yields the CPU once more when it finds nothing
 * (docs/performance.md, "Waits on crowded nodes"). */
#define HIER_WAIT_PROGRESS_TURNS 16

/* Milliseconds on the monotonic clock. */
uint64_t hier_wait_now_ms(void);
/* Whether a wait that has stood still since `since_ms` has run past the
 * timeout (never when it is 0). */
int hier_wait_expired(uint64_t since_ms);
/* The timeout in seconds, for messages. */
int hier_wait_timeout_s(void);

#endif
