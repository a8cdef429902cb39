#define _GNU_SOURCE
#include "hier_cma.h"

#include <errno.h>
#include <string.h>
#include <sys/uio.h>

#include "hier_log.h"

#define HIER_CMA_PROBE_MAGIC 0x68696572636d6121ull /* "hiercma!" */

static const volatile uint64_t hier_cma_probe_word = HIER_CMA_PROBE_MAGIC;

uint64_t hier_cma_probe_addr(void)
{
    return (uint64_t)(uintptr_t)&hier_cma_probe_word;
}

hier_status_t hier_cma_read(pid_t pid, uint64_t addr, void *dst, size_t len)
{
    uint8_t *d = dst;
    while (len) {
        struct iovec local = {.iov_base = d, .iov_len = len};
        struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = len};
        ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
        if (n <= 0) {
            int err = n < 0 ? errno : EIO;
            if (err == EINTR) continue;
            HIER_ERROR("process_vm_readv of %zu bytes from pid %d failed: %s", len, (int)pid, strerror(err));
            return err == ESRCH ? HIER_ERR_PEER_DEAD : HIER_ERR_INTERNAL;
        }
        d += n, addr += (uint64_t)n, len -= (size_t)n; /* a short read: go on from there */
    }
    return HIER_OK;
}

hier_status_t hier_cma_probe(pid_t pid, uint64_t addr)
{
    uint64_t word = 0;
    struct iovec local = {.iov_base = &word, .iov_len = sizeof(word)};
    struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = sizeof(word)};
    if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != (ssize_t)sizeof(word)) {
        HIER_LOG(HIER_LOG_COMM, "single copy (process_vm_readv) to pid %d unavailable: %s; using shared-memory "
                 "copies only", (int)pid, strerror(errno));
        return HIER_ERR_NOT_SUPPORTED;
    }
    return word == HIER_CMA_PROBE_MAGIC ? HIER_OK : HIER_ERR_NOT_SUPPORTED;
}
