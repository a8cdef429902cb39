#define _GNU_SOURCE /* O_NOFOLLOW, getrandom */
#include "shm/hier_shm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/hier_log.h"
#include "shm/hier_cma.h"

#define HIER_SHM_PAGE 4096

static _Atomic size_t hier_shm_total;

static size_t hier_shm_round(size_t v, size_t to)
{
    return (v + to - 1) / to * to;
}

/* Where the parts of a node segment start (pipeline segments: slots only). */
static size_t hier_shm_lines_off(int nranks)
{
    return hier_shm_ctl_off() + (size_t)nranks * sizeof(hier_shm_ctl_t);
}

static size_t hier_shm_tails_off(int nranks)
{
    return hier_shm_round(hier_shm_lines_off(nranks) + (size_t)nranks * 2 * HIER_SHM_LINE, HIER_SHM_PAGE);
}

static size_t hier_shm_slots_off(const hier_shm_shape_t *s)
{
    size_t end = s->kind == HIER_SHM_NODE ? hier_shm_tails_off(s->nranks) + (size_t)s->nranks * 2 * HIER_SHM_LL_TAIL
                                          : sizeof(hier_shm_header_t);
    return hier_shm_round(end, HIER_SHM_PAGE);
}

static unsigned hier_shm_shape_nbufs(const hier_shm_shape_t *s)
{
    return s->kind == HIER_SHM_NODE || !s->nbufs ? HIER_SHM_BUFS : s->nbufs;
}

static size_t hier_shm_slot_stride(const hier_shm_shape_t *s)
{
    return hier_shm_round(hier_shm_shape_nbufs(s) * s->chunk_bytes, HIER_SHM_PAGE);
}

size_t hier_shm_size(const hier_shm_shape_t *s)
{
    return hier_shm_slots_off(s) + (size_t)s->nranks * hier_shm_slot_stride(s);
}

size_t hier_shm_mapped_total(void)
{
    return atomic_load_explicit(&hier_shm_total, memory_order_relaxed);
}

hier_shm_offer_t *hier_shm_offer(hier_shm_t *shm)
{
    return (hier_shm_offer_t *)(shm->base + sizeof(hier_shm_header_t));
}

_Atomic uint64_t *hier_shm_ll_line(hier_shm_t *shm, int rank, int parity)
{
    return (_Atomic uint64_t *)(shm->base + hier_shm_lines_off(shm->shape.nranks) +
                                ((size_t)rank * 2 + (size_t)parity) * HIER_SHM_LINE);
}

uint8_t *hier_shm_ll_tail(hier_shm_t *shm, int rank, int parity)
{
    return shm->base + hier_shm_tails_off(shm->shape.nranks) + ((size_t)rank * 2 + (size_t)parity) * HIER_SHM_LL_TAIL;
}

uint64_t *hier_shm_ll_seq(hier_shm_t *shm)
{
    return &shm->ll_seq;
}

uint64_t hier_shm_id(const hier_shm_t *shm)
{
    return shm->id;
}

/* The creator's pid and creation number, from the name (hier_shm_fresh_name's); 0 if none. */
static uint64_t hier_shm_id_of(const char *name)
{
    int pid = 0;
    unsigned n = 0;
    if (sscanf(name, "coll-hier-%d-%u-", &pid, &n) != 2) return 0;
    return (uint64_t)(uint32_t)pid << 32 | n;
}

const char *hier_shm_name(const hier_shm_t *shm)
{
    return shm->name;
}

const hier_shm_shape_t *hier_shm_shape(const hier_shm_t *shm)
{
    return &shm->shape;
}

/* A name nobody can guess ahead of us: pid, a counter and 64 random bits. */
static void hier_shm_fresh_name(char *name)
{
    static _Atomic unsigned counter;
    uint64_t rnd = 0;
    if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        rnd = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_sec;
    }
    snprintf(name, HIER_SHM_NAME_MAX, "coll-hier-%d-%u-%016llx", (int)getpid(), atomic_fetch_add(&counter, 1),
             (unsigned long long)rnd);
}

/* O_NOFOLLOW and O_EXCL: a file someone else put there (a link, an old
 * file) is never opened as ours; O_CLOEXEC: children of system() do not
 * inherit it. */
static int hier_shm_open_fd(hier_shm_t *shm, const char *dir, int create)
{
    int flags = O_RDWR | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT | O_EXCL : 0);
    shm->posix = !dir || !dir[0];
    if (shm->posix) {
        snprintf(shm->path, sizeof(shm->path), "/%s", shm->name);
        return shm_open(shm->path, flags, 0600);
    }
    snprintf(shm->path, sizeof(shm->path), "%s/%s", dir, shm->name);
    return open(shm->path, flags, 0600);
}

static hier_status_t hier_shm_map(const char *dir, const char *name, const hier_shm_shape_t *shape, int create,
                                  hier_shm_t **shm_p)
{
    size_t size = hier_shm_size(shape);
    hier_shm_t *shm = calloc(1, sizeof(*shm));
    if (!shm) return HIER_ERR_NO_MEMORY;
    shm->fd = -1;
    shm->shape = *shape;
    if (create) hier_shm_fresh_name(shm->name);
    else snprintf(shm->name, sizeof(shm->name), "%s", name);
    shm->id = hier_shm_id_of(shm->name);

    int fd = hier_shm_open_fd(shm, dir, create);
    if (fd < 0) {
        HIER_ERROR("cannot %s shared-memory file %s: %s", create ? "create" : "open", shm->path, strerror(errno));
        goto free_shm;
    }
    shm->linked = create;
    if (create && ftruncate(fd, (off_t)size) != 0) {
        HIER_ERROR("cannot size shared-memory file %s to %zu bytes: %s", shm->path, size, strerror(errno));
        goto close_fd;
    }
    /* Allocate the parts before the slots now, so a full tmpfs fails here
     * with ENOSPC instead of SIGBUS later; slots are allocated by owners. The
     * low-latency tails are allocated too, but touched only by payloads
     * larger than a line's head. */
    if (create) {
        int err = posix_fallocate(fd, 0, (off_t)hier_shm_slots_off(shape));
        if (err) {
            HIER_ERROR("cannot allocate shared-memory file %s: %s", shm->path, strerror(err));
            goto close_fd;
        }
    }
    shm->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (shm->base == MAP_FAILED) {
        HIER_ERROR("cannot map %zu bytes of %s: %s", size, shm->path, strerror(errno));
        shm->base = NULL;
        goto close_fd;
    }
    shm->size = size;
    shm->fd = fd;
    atomic_fetch_add_explicit(&hier_shm_total, size, memory_order_relaxed);
    *shm_p = shm;
    return HIER_OK;

close_fd:
    close(fd);
    if (create) hier_shm_unlink(shm);
free_shm:
    free(shm);
    return HIER_ERR_SHM;
}

hier_status_t hier_shm_create(const char *dir, const hier_shm_shape_t *shape, hier_shm_t **shm_p)
{
    hier_shm_t *shm;
    hier_status_t st = hier_shm_map(dir, NULL, shape, 1, &shm);
    if (st != HIER_OK) return st;

    hier_shm_header_t *h = hier_shm_header(shm);
    h->magic = HIER_SHM_MAGIC;
    h->version = HIER_SHM_VERSION;
    h->kind = (uint32_t)shape->kind;
    h->nranks = (uint32_t)shape->nranks;
    h->chunk_bytes = shape->chunk_bytes;
    h->slots_off = hier_shm_slots_off(shape);
    h->slot_stride = hier_shm_slot_stride(shape);
    h->total_bytes = shm->size;
    h->nbufs = hier_shm_shape_nbufs(shape);
    if (shape->kind == HIER_SHM_NODE) {
        atomic_init(&hier_shm_offer(shm)->seq, 0);
        for (int r = 0; r < shape->nranks; r++) atomic_init(&hier_shm_ctl(shm, r)->phase, 0);
    }
    *shm_p = shm;
    return HIER_OK;
}

hier_status_t hier_shm_attach(const char *dir, const char *name, const hier_shm_shape_t *shape, hier_shm_t **shm_p)
{
    hier_shm_t *shm;
    hier_status_t st = hier_shm_map(dir, name, shape, 0, &shm);
    if (st != HIER_OK) return st;

    const hier_shm_header_t *h = hier_shm_header(shm);
    if (h->magic != HIER_SHM_MAGIC || h->version != HIER_SHM_VERSION || h->kind != (uint32_t)shape->kind ||
        h->nranks != (uint32_t)shape->nranks || h->chunk_bytes != shape->chunk_bytes || h->total_bytes != shm->size ||
        h->nbufs != hier_shm_shape_nbufs(shape)) {
        HIER_ERROR("segment %s has layout version %u, kind %u, %u ranks, chunk %llu x %u; expected version %u, kind %d, "
                   "%d ranks, chunk %zu x %u (mixed coll/hier builds or parameters?)",
                   shm->path, h->version, h->kind, h->nranks, (unsigned long long)h->chunk_bytes, h->nbufs,
                   HIER_SHM_VERSION, (int)shape->kind, shape->nranks, shape->chunk_bytes,
                   hier_shm_shape_nbufs(shape));
        hier_shm_detach(shm);
        return HIER_ERR_SHM;
    }
    *shm_p = shm;
    return HIER_OK;
}

hier_status_t hier_shm_claim(hier_shm_t *shm, int me)
{
    const hier_shm_header_t *h = hier_shm_header(shm);
    off_t off = (off_t)(h->slots_off + (size_t)me * h->slot_stride);
    int err = posix_fallocate(shm->fd, off, (off_t)h->slot_stride);
    close(shm->fd);
    shm->fd = -1;
    if (err) {
        HIER_ERROR("rank %d: cannot allocate its %llu-byte slot in %s: %s", me,
                   (unsigned long long)h->slot_stride, shm->path, strerror(err));
        return HIER_ERR_SHM;
    }
    /* (allocated by the owner: the pages are on its NUMA node; none is
     * touched here, so none counts in anybody's memory before it is used) */
    if (shm->shape.kind != HIER_SHM_NODE) return HIER_OK;
    hier_shm_ctl(shm, me)->pid = (int32_t)getpid();
    hier_shm_ctl(shm, me)->cma_probe_addr = hier_cma_probe_addr();
    hier_shm_ctl(shm, me)->cma_cookie = hier_cma_cookie();
    return HIER_OK;
}

void hier_shm_unlink(hier_shm_t *shm)
{
    if (!shm->linked) return;
    if (shm->posix)
        shm_unlink(shm->path);
    else
        unlink(shm->path);
    shm->linked = 0;
}

void hier_shm_detach(hier_shm_t *shm)
{
    if (!shm) return;
    if (shm->base) {
        munmap(shm->base, shm->size);
        atomic_fetch_sub_explicit(&hier_shm_total, shm->size, memory_order_relaxed);
    }
    if (shm->fd >= 0) close(shm->fd);
    free(shm);
}

uint8_t *hier_shm_slot(hier_shm_t *shm, int rank)
{
    const hier_shm_header_t *h = hier_shm_header(shm);
    return shm->base + h->slots_off + (size_t)rank * h->slot_stride;
}

