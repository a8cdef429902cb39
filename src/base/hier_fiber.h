/* hier_fiber.h: code that waits, run where waiting is not allowed: a fiber runs a function on its own stack, in
 * the thread that resumes it; where the function would wait it yields (hier_fiber_yield) and the resumer goes on,
 * and resumed later it goes on from there (docs/design.md, "Nonblocking and persistent calls"). */
#ifndef HIER_FIBER_H
#define HIER_FIBER_H

#include "base/hier_status.h"

typedef struct hier_fiber hier_fiber_t;

/* A fiber for fn(arg), not run yet (its stack: HIER_FIBER_STACK bytes). */
#define HIER_FIBER_STACK ((size_t)1 << 20)
hier_status_t hier_fiber_new(void (*fn)(void *), void *arg, hier_fiber_t **fiber_p);
/* Run it until it yields or ends: 1 ended, 0 yielded (not from inside a fiber). */
int hier_fiber_resume(hier_fiber_t *f);
/* Inside a fiber: back to its resumer (outside one: nothing). */
void hier_fiber_yield(void);
/* Whether this thread runs inside a fiber now. */
int hier_fiber_inside(void);
/* A fiber that ended (or never ran) goes; one that yielded must be run to its end first. */
void hier_fiber_free(hier_fiber_t *f);

#endif
