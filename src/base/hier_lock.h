/* hier_lock.h: the transport lock (docs/design.md, "Between nodes": The transport lock).
 *
 * One libfabric endpoint and one channel table serve every communicator of a process, so every operation on
 * the endpoint, a channel or the registration cache holds this lock where threads may call at once
 * (MPI_THREAD_MULTIPLE, or hier's progress thread). It is recursive and never held across a wait for another
 * process: waits poll with it taken and dropped per turn, and a write without room in the provider reports
 * "not posted" for its caller to poll. A write that fails is its channel's error, reported to that channel's
 * user, not to whichever thread polled. Without threads, taking it is one predictable branch. */
#ifndef HIER_LOCK_H
#define HIER_LOCK_H

#include <pthread.h>

/* Called once, before any communicator: whether the application's threads
 * may call at once (MPI_THREAD_MULTIPLE), and whether hier's progress
 * thread runs beside them; either takes the lock. */
void hier_lock_set_threads(int callers, int progress_thread);
/* Whether threads may call at once (what hier_lock_set_threads said). */
extern int hier_lock_mt;
extern pthread_mutex_t hier_lock_mutex;
static inline void hier_lock_take(void)
{
    if (hier_lock_mt) pthread_mutex_lock(&hier_lock_mutex);
}
static inline void hier_lock_drop(void)
{
    if (hier_lock_mt) pthread_mutex_unlock(&hier_lock_mutex);
}
static inline int hier_lock_threaded(void)
{
    return hier_lock_mt;
}
/* Whether the application's threads may call at once (several threads of
 * the process may wait in hier's calls). */
extern int hier_lock_callers_mt;
static inline int hier_lock_callers_threaded(void)
{
    return hier_lock_callers_mt;
}

/* A lock of its own (a list, a free list), taken only where threads may
 * call at once: without them, one predictable branch. */
static inline void hier_lock_mutex_take(pthread_mutex_t *m)
{
    if (hier_lock_mt) pthread_mutex_lock(m);
}
static inline int hier_lock_mutex_try(pthread_mutex_t *m)
{
    return !hier_lock_mt || pthread_mutex_trylock(m) == 0;
}
static inline void hier_lock_mutex_drop(pthread_mutex_t *m)
{
    if (hier_lock_mt) pthread_mutex_unlock(m);
}

/* `return call;` with the lock held around the call. */
#define HIER_LOCKED_RETURN(type, call)                                                                             \
    do {                                                                                                           \
        hier_lock_take();                                                                                          \
        type hier_locked_r_ = (call);                                                                              \
        hier_lock_drop();                                                                                          \
        return hier_locked_r_;                                                                                     \
    } while (0)

#endif
