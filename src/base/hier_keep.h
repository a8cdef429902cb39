/* hier_keep.h: objects over (requests), kept for the next calls: an
 * allocation and its zeroing or construction were a tenth of an 8-byte
 * call. At most HIER_KEEP_MAX; the caller's lock covers it. */
#ifndef HIER_KEEP_H
#define HIER_KEEP_H

#define HIER_KEEP_MAX 16

typedef struct {
    void *obj[HIER_KEEP_MAX];
    int n;
} hier_keep_t;

/* One kept object, or NULL: none. */
static inline void *hier_keep_take(hier_keep_t *k)
{
    return k->n ? k->obj[--k->n] : NULL;
}

/* 1: kept; 0: the list is full (the caller frees it). */
static inline int hier_keep_put(hier_keep_t *k, void *obj)
{
    if (k->n == HIER_KEEP_MAX) return 0;
    k->obj[k->n++] = obj;
    return 1;
}

#endif
