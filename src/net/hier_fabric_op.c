/* hier_fabric_op.c: the context of every write in flight. A provider in
 * FI_CONTEXT or FI_CONTEXT2 mode (efa-direct, the DGRAM endpoints) keeps its
 * own state in the memory an operation's context points to, from the post
 * to the completion: a context must then be memory of ours that nothing
 * else touches meanwhile, not a value. Every write gets one of these (on
 * every provider: one code path, the one the tests run), and its
 * completion hands the caller's context value back. Under the transport
 * lock, as everything of the endpoint's. */
#include <stdlib.h>

#include "base/hier_log.h"
#include "net/hier_fabric_impl.h"

#define HIER_FABRIC_OPS_PER_BLOCK 128

struct hier_fabric_op_block {
    struct hier_fabric_op_block *next;
    hier_fabric_op_t op[HIER_FABRIC_OPS_PER_BLOCK];
};

/* Blocks go at close only (the most ever in flight at once is what the
 * provider's queues hold). */
int hier_fabric_op_grow(hier_fabric_t *fab)
{
    struct hier_fabric_op_block *b = calloc(1, sizeof(*b));
    if (!b) {
        HIER_ERROR("no memory for the contexts of %zu more writes in flight", (size_t)HIER_FABRIC_OPS_PER_BLOCK);
        return 0;
    }
    b->next = fab->op_blocks;
    fab->op_blocks = b;
    for (size_t i = 0; i < HIER_FABRIC_OPS_PER_BLOCK; i++) {
        b->op[i].next = fab->op_free;
        fab->op_free = &b->op[i];
    }
    return 1;
}

void hier_fabric_ops_free(hier_fabric_t *fab)
{
    while (fab->op_blocks) {
        struct hier_fabric_op_block *b = fab->op_blocks;
        fab->op_blocks = b->next;
        free(b);
    }
    fab->op_free = NULL;
}
