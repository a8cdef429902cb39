#define _GNU_SOURCE
#include "shm/hier_cma.h"

#include <errno.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>
#include <string.h>
#include <sys/uio.h>

#include "base/hier_log.h"

static _Atomic uint64_t hier_cma_cookie_word;

uint64_t hier_cma_cookie(void)
{
    uint64_t v = atomic_load(&hier_cma_cookie_word);
    if (!v) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        v = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 40) ^ 0x9e3779b97f4a7c15ull;
        uint64_t zero = 0;
        if (!atomic_compare_exchange_strong(&hier_cma_cookie_word, &zero, v)) v = zero;
    }
    return v;
}

uint64_t hier_cma_probe_addr(void)
{
    return (uint64_t)(uintptr_t)&hier_cma_cookie_word;
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

hier_status_t hier_cma_probe(pid_t pid, uint64_t addr, uint64_t cookie)
{
    uint64_t word = 0;
    struct iovec local = {.iov_base = &word, .iov_len = sizeof(word)};
    struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = sizeof(word)};
    if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != (ssize_t)sizeof(word)) {
        HIER_LOG(HIER_LOG_COMM, "single copy (process_vm_readv) to pid %d unavailable: %s; using shared-memory "
                 "copies only", (int)pid, strerror(errno));
        return HIER_ERR_NOT_SUPPORTED;
    }
    return word == cookie ? HIER_OK : HIER_ERR_NOT_SUPPORTED;
}
