/* hier_shm_pool.c: see hier_shm_pool.h. A list, most recently pooled first,
 * of at most HIER_SHM_POOL_MAX segments (besides the budget): recycling
 * serves communicators made after others were freed, and a storm of frees
 * (a framework tearing down its groups) needs no thousands kept; short, so
 * lookups scan it. */
#include "shm/hier_shm_pool.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct hier_pool_entry {
    struct hier_pool_entry *next;
    hier_shm_t *shm;
    hier_shm_pool_user_t user;
    int nprocs;
    uint64_t procs[];
} hier_pool_entry_t;

#define HIER_SHM_POOL_MAX 32

static hier_pool_entry_t *hier_pool_head;
static int hier_pool_n;
static pthread_mutex_t hier_pool_lock = PTHREAD_MUTEX_INITIALIZER;

static void hier_pool_release(hier_pool_entry_t *e)
{
    if (e->user.release) e->user.release(e->user.data);
    hier_shm_detach(e->shm);
    free(e);
}

/* Unlink the oldest entry (the list's last), or NULL. Under the lock. */
static hier_pool_entry_t *hier_pool_pop_oldest(void)
{
    hier_pool_entry_t **pp = &hier_pool_head;
    if (!*pp) return NULL;
    while ((*pp)->next) pp = &(*pp)->next;
    hier_pool_entry_t *e = *pp;
    *pp = NULL;
    hier_pool_n--;
    return e;
}

void hier_shm_pool_trim(size_t budget)
{
    for (;;) {
        pthread_mutex_lock(&hier_pool_lock);
        int over = hier_shm_mapped_total() > budget || hier_pool_n > HIER_SHM_POOL_MAX;
        hier_pool_entry_t *e = over ? hier_pool_pop_oldest() : NULL;
        pthread_mutex_unlock(&hier_pool_lock);
        if (!e) return;
        hier_pool_release(e); /* (may deregister from the NIC: not under our lock) */
    }
}

void hier_shm_pool_put(hier_shm_t *shm, const uint64_t *procs, int nprocs, hier_shm_pool_user_t user, size_t budget)
{
    hier_pool_entry_t *e = malloc(sizeof(*e) + (size_t)nprocs * sizeof(*procs));
    if (!e || hier_shm_size(hier_shm_shape(shm)) > budget) {
        free(e);
        if (user.release) user.release(user.data);
        hier_shm_detach(shm);
        return;
    }
    *e = (hier_pool_entry_t){.shm = shm, .user = user, .nprocs = nprocs};
    memcpy(e->procs, procs, (size_t)nprocs * sizeof(*procs));
    pthread_mutex_lock(&hier_pool_lock);
    e->next = hier_pool_head;
    hier_pool_head = e;
    hier_pool_n++;
    pthread_mutex_unlock(&hier_pool_lock);
    hier_shm_pool_trim(budget);
}

static int hier_pool_matches(const hier_pool_entry_t *e, const hier_shm_shape_t *shape, const uint64_t *procs,
                             int nprocs, const char *name)
{
    const hier_shm_shape_t *s = hier_shm_shape(e->shm);
    return s->kind == shape->kind && s->nranks == shape->nranks && s->chunk_bytes == shape->chunk_bytes &&
           s->nbufs == shape->nbufs &&
           e->nprocs == nprocs && !memcmp(e->procs, procs, (size_t)nprocs * sizeof(*procs)) &&
           (!name || !strcmp(name, hier_shm_name(e->shm)));
}

hier_shm_t *hier_shm_pool_take(const hier_shm_shape_t *shape, const uint64_t *procs, int nprocs, const char *name,
                               hier_shm_pool_user_t *user_p)
{
    hier_shm_t *shm = NULL;
    pthread_mutex_lock(&hier_pool_lock);
    for (hier_pool_entry_t **pp = &hier_pool_head; *pp; pp = &(*pp)->next) {
        if (!hier_pool_matches(*pp, shape, procs, nprocs, name)) continue;
        hier_pool_entry_t *e = *pp;
        *pp = e->next;
        hier_pool_n--;
        shm = e->shm;
        *user_p = e->user;
        free(e);
        break;
    }
    pthread_mutex_unlock(&hier_pool_lock);
    return shm;
}

int hier_shm_pool_count(void)
{
    pthread_mutex_lock(&hier_pool_lock);
    int n = hier_pool_n;
    pthread_mutex_unlock(&hier_pool_lock);
    return n;
}
