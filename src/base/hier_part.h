/* hier_part.h: partitioning arithmetic shared by every schedule (pure functions). */
#ifndef HIER_PART_H
#define HIER_PART_H

#include <stddef.h>

/* Split `count` elements into `nparts` contiguous parts whose sizes are
 * multiples of `align` elements (except the part holding the tail) and differ
 * by at most one unit of `align`. Part p is [*off_p, *off_p + *len_p). */
void hier_part_range(size_t count, int nparts, int part, size_t align, size_t *off_p, size_t *len_p);

/* Elements per alignment unit so that parts start on cache-line boundaries
 * whenever the buffer does: max(1, 64 / esize). */
static inline size_t hier_part_align(size_t esize)
{
    return esize >= 64 ? 1 : 64 / esize;
}

/* Number of pieces of at most `piece` units needed for `total` units (0 -> 0). */
static inline size_t hier_part_nchunks(size_t total, size_t piece)
{
    return piece ? (total + piece - 1) / piece : 0;
}

/* Intersection of [a, a + alen) and [b, b + blen): start and length (0 if empty). */
void hier_part_intersect(size_t a, size_t alen, size_t b, size_t blen, size_t *start_p, size_t *len_p);

#endif
