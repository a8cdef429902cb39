/* hier_lock.c: the transport lock; see hier_lock.h. */
#include "base/hier_lock.h"

#include <pthread.h>

int hier_lock_mt, hier_lock_callers_mt;
pthread_mutex_t hier_lock_mutex;
static pthread_once_t hier_lock_once = PTHREAD_ONCE_INIT;

static void hier_lock_init(void)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&hier_lock_mutex, &a);
    pthread_mutexattr_destroy(&a);
}

void hier_lock_set_threads(int callers, int progress_thread)
{
    pthread_once(&hier_lock_once, hier_lock_init);
    hier_lock_callers_mt = callers != 0;
    hier_lock_mt = callers || progress_thread;
}
