#include "base/hier_part.h"

void hier_part_range(size_t count, int nparts, int part, size_t align, size_t *off_p, size_t *len_p)
{
    size_t units = (count + align - 1) / align;
    size_t base = units / (size_t)nparts;
    size_t rem = units % (size_t)nparts;
    size_t p = (size_t)part;
    size_t first_unit = p * base + (p < rem ? p : rem);
    size_t my_units = base + (p < rem ? 1 : 0);
    size_t off = first_unit * align;
    size_t len = my_units * align;

    if (off > count) off = count;
    if (len > count - off) len = count - off;
    *off_p = off;
    *len_p = len;
}

void hier_part_intersect(size_t a, size_t alen, size_t b, size_t blen, size_t *start_p, size_t *len_p)
{
    size_t lo = a > b ? a : b;
    size_t ahi = a + alen, bhi = b + blen;
    size_t hi = ahi < bhi ? ahi : bhi;

    *start_p = lo;
    *len_p = hi > lo ? hi - lo : 0;
}
