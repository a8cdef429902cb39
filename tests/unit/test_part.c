/* Partitioning arithmetic: every split covers [0, count) exactly once, in
 * order, with aligned starts and balanced sizes. */
#include <criterion/criterion.h>

#include "base/hier_part.h"

Test(part, covers_exactly_once_balanced_and_aligned)
{
    static const size_t counts[] = {0, 1, 2, 3, 7, 15, 16, 17, 63, 64, 65, 1000, 4099, 65537};
    static const size_t aligns[] = {1, 2, 4, 8, 16, 64};
    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
        for (size_t ai = 0; ai < sizeof(aligns) / sizeof(aligns[0]); ai++)
            for (int n = 1; n <= 17; n++) {
                size_t count = counts[ci], align = aligns[ai], next = 0, lo = (size_t)-1, hi = 0;
                for (int p = 0; p < n; p++) {
                    size_t off, len;
                    hier_part_range(count, n, p, align, &off, &len);
                    cr_assert_eq(off, next, "count %zu n %d align %zu part %d: off %zu, expected %zu", count, n,
                                 align, p, off, next);
                    if (len) cr_assert_eq(off % align, 0, "part %d starts unaligned at %zu", p, off);
                    next = off + len;
                    if (off + len < count) { /* parts other than the tail are whole units */
                        lo = len < lo ? len : lo;
                        hi = len > hi ? len : hi;
                    }
                }
                cr_assert_eq(next, count, "count %zu n %d align %zu: parts end at %zu", count, n, align, next);
                if (hi) cr_assert_leq(hi - lo, align, "count %zu n %d: sizes %zu..%zu unbalanced", count, n, lo, hi);
            }
}

Test(part, align_and_chunks)
{
    cr_assert_eq(hier_part_align(1), 64);
    cr_assert_eq(hier_part_align(8), 8);
    cr_assert_eq(hier_part_align(32), 2);
    cr_assert_eq(hier_part_align(128), 1);
    cr_assert_eq(hier_part_nchunks(0, 10), 0);
    cr_assert_eq(hier_part_nchunks(10, 10), 1);
    cr_assert_eq(hier_part_nchunks(11, 10), 2);
    cr_assert_eq(hier_part_nchunks(5, 0), 0);
}

Test(part, intersect)
{
    size_t s, l;
    hier_part_intersect(0, 10, 5, 10, &s, &l);
    cr_assert(s == 5 && l == 5);
    hier_part_intersect(0, 10, 10, 5, &s, &l);
    cr_assert_eq(l, 0);
    hier_part_intersect(3, 4, 0, 100, &s, &l);
    cr_assert(s == 3 && l == 4);
    hier_part_intersect(20, 5, 0, 10, &s, &l);
    cr_assert_eq(l, 0);
}
