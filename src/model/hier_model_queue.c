/* hier_model_queue.c: the simulation's heap of thread clocks (earliest
 * first, ties by id so every run orders alike) and its table of messages in
 * flight (open addressing, linear probing, deletion by shifting back). */
#include <stdlib.h>

#include "model/hier_model_impl.h"

static int hier_model_before(const hier_model_heap_t *h, size_t a, size_t b)
{
    return h->t[a] < h->t[b] || (h->t[a] == h->t[b] && h->id[a] < h->id[b]);
}

static void hier_model_heap_swap(hier_model_heap_t *h, size_t a, size_t b)
{
    double t = h->t[a];
    int id = h->id[a];
    h->t[a] = h->t[b], h->id[a] = h->id[b];
    h->t[b] = t, h->id[b] = id;
}

hier_status_t hier_model_heap_push(hier_model_heap_t *h, double t, int id)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 256;
        double *nt = realloc(h->t, cap * sizeof(*nt));
        if (!nt) return HIER_ERR_NO_MEMORY;
        h->t = nt;
        int *ni = realloc(h->id, cap * sizeof(*ni));
        if (!ni) return HIER_ERR_NO_MEMORY;
        h->id = ni;
        h->cap = cap;
    }
    size_t i = h->n++;
    h->t[i] = t, h->id[i] = id;
    for (; i > 0 && hier_model_before(h, i, (i - 1) / 2); i = (i - 1) / 2) hier_model_heap_swap(h, i, (i - 1) / 2);
    return HIER_OK;
}

int hier_model_heap_pop(hier_model_heap_t *h, double *t_p, int *id_p)
{
    if (!h->n) return 0;
    *t_p = h->t[0], *id_p = h->id[0];
    h->n--;
    h->t[0] = h->t[h->n], h->id[0] = h->id[h->n];
    for (size_t i = 0;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && hier_model_before(h, l, m)) m = l;
        if (r < h->n && hier_model_before(h, r, m)) m = r;
        if (m == i) break;
        hier_model_heap_swap(h, i, m);
        i = m;
    }
    return 1;
}

void hier_model_heap_free(hier_model_heap_t *h)
{
    free(h->t);
    free(h->id);
    *h = (hier_model_heap_t){0};
}

/* dst + 1 in 20 bits (dst < HIER_MODEL_MAX_RANKS - 1), src 20, chunk 8,
 * tag 16; never 0, since dst + 1 is not. */
static uint64_t hier_model_key(int dst, int src, size_t k, uint32_t tag)
{
    return ((uint64_t)(dst + 1) << 44) | ((uint64_t)src << 24) | ((uint64_t)(k & 0xff) << 16) | tag;
}

static size_t hier_model_slot(const hier_model_msgs_t *m, uint64_t key)
{
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 20) & (m->cap - 1);
}

static hier_status_t hier_model_msgs_grow(hier_model_msgs_t *m)
{
    size_t cap = m->cap ? 2 * m->cap : 1024;
    hier_model_msgs_t n = {.key = calloc(cap, sizeof(uint64_t)), .at = malloc(cap * sizeof(double)), .cap = cap};
    if (!n.key || !n.at) {
        free(n.key);
        free(n.at);
        return HIER_ERR_NO_MEMORY;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->key[i]) continue;
        size_t j = hier_model_slot(&n, m->key[i]);
        while (n.key[j]) j = (j + 1) & (cap - 1);
        n.key[j] = m->key[i];
        n.at[j] = m->at[i];
    }
    n.n = m->n;
    hier_model_msgs_free(m);
    *m = n;
    return HIER_OK;
}

/* Where key is, or the empty slot it would take. */
static size_t hier_model_find(const hier_model_msgs_t *m, uint64_t key)
{
    size_t i = hier_model_slot(m, key);
    while (m->key[i] && m->key[i] != key) i = (i + 1) & (m->cap - 1);
    return i;
}

static void hier_model_remove(hier_model_msgs_t *m, size_t i)
{
    m->key[i] = 0;
    m->n--;
    for (size_t j = (i + 1) & (m->cap - 1); m->key[j]; j = (j + 1) & (m->cap - 1)) {
        size_t home = hier_model_slot(m, m->key[j]);
        /* j's entry may move to the hole at i unless its home lies in (i, j] */
        int stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (stays) continue;
        m->key[i] = m->key[j], m->at[i] = m->at[j];
        m->key[j] = 0;
        i = j;
    }
}

static hier_status_t hier_model_put(hier_model_msgs_t *m, uint64_t key, double at)
{
    if (2 * (m->n + 1) > m->cap) {
        hier_status_t st = hier_model_msgs_grow(m);
        if (st != HIER_OK) return st;
    }
    size_t i = hier_model_find(m, key);
    if (!m->key[i]) m->n++;
    m->key[i] = key;
    m->at[i] = at;
    return HIER_OK;
}

hier_status_t hier_model_msgs_post(hier_model_msgs_t *m, int dst, int src, size_t k, uint32_t tag, double at,
                                   int *waiter_p)
{
    uint64_t key = hier_model_key(dst, src, k, tag);
    size_t i = m->cap ? hier_model_find(m, key) : 0;
    *waiter_p = m->cap && m->key[i] == key && m->at[i] < 0;
    return hier_model_put(m, key, at);
}

int hier_model_msgs_take(hier_model_msgs_t *m, int dst, int src, size_t k, uint32_t tag, double *at_p)
{
    uint64_t key = hier_model_key(dst, src, k, tag);
    size_t i = m->cap ? hier_model_find(m, key) : 0;
    if (m->cap && m->key[i] == key && m->at[i] >= 0) {
        *at_p = m->at[i];
        hier_model_remove(m, i);
        return 1;
    }
    if (m->cap && m->key[i] == key) return 0;
    return hier_model_put(m, key, -1.0) == HIER_OK ? 0 : -1;
}

void hier_model_msgs_free(hier_model_msgs_t *m)
{
    free(m->key);
    free(m->at);
    *m = (hier_model_msgs_t){0};
}
