/* hier_fiber.c: fibers (hier_fiber.h) on ucontext. With AddressSanitizer
 * each switch is announced (its fake stacks follow the stack in use). */
#include "base/hier_fiber.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <ucontext.h>

#include "base/hier_log.h"

#if defined(__SANITIZE_ADDRESS__)
#define HIER_FIBER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HIER_FIBER_ASAN 1
#endif
#endif
#ifdef HIER_FIBER_ASAN
void __sanitizer_start_switch_fiber(void **fake_stack_save, const void *bottom, size_t size);
void __sanitizer_finish_switch_fiber(void *fake_stack_save, const void **bottom_old, size_t *size_old);
#endif

struct hier_fiber {
    ucontext_t self, back;
    void (*fn)(void *);
    void *arg;
    void *stack;
    int ended;
    const void *back_bottom; /* (ASan: the resumer's stack) */
    size_t back_size;
};

static _Thread_local hier_fiber_t *hier_fiber_now;

/* A switch, announced to ASan: into the fiber (into), or back to its resumer. */
static void hier_fiber_switch(ucontext_t *from, ucontext_t *to, hier_fiber_t *f, int into)
{
#ifdef HIER_FIBER_ASAN
    void *fake = NULL;
    if (into) __sanitizer_start_switch_fiber(&fake, f->stack, HIER_FIBER_STACK);
    else __sanitizer_start_switch_fiber(f->ended ? NULL : &fake, f->back_bottom, f->back_size);
    swapcontext(from, to);
    /* (back in the fiber, from a yield: whoever resumed it now waits on its own stack) */
    __sanitizer_finish_switch_fiber(fake, into ? NULL : &f->back_bottom, into ? NULL : &f->back_size);
#else
    (void)f;
    (void)into;
    swapcontext(from, to);
#endif
}

static void hier_fiber_main(unsigned hi, unsigned lo)
{
    hier_fiber_t *f = (hier_fiber_t *)(((uintptr_t)hi << 32) | (uintptr_t)lo);
#ifdef HIER_FIBER_ASAN
    __sanitizer_finish_switch_fiber(NULL, &f->back_bottom, &f->back_size);
#endif
    f->fn(f->arg);
    f->ended = 1;
    hier_fiber_now = NULL;
    hier_fiber_switch(&f->self, &f->back, f, 0);
}

hier_status_t hier_fiber_new(void (*fn)(void *), void *arg, hier_fiber_t **fiber_p)
{
    hier_fiber_t *f = calloc(1, sizeof(*f));
    if (!f) return HIER_ERR_NO_MEMORY;
    f->stack = mmap(NULL, HIER_FIBER_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (f->stack == MAP_FAILED || getcontext(&f->self) != 0) {
        HIER_ERROR("a fiber's stack of %zu bytes could not be made", HIER_FIBER_STACK);
        if (f->stack != MAP_FAILED) munmap(f->stack, HIER_FIBER_STACK);
        free(f);
        return HIER_ERR_NO_MEMORY;
    }
    f->fn = fn;
    f->arg = arg;
    f->self.uc_stack.ss_sp = f->stack;
    f->self.uc_stack.ss_size = HIER_FIBER_STACK;
    f->self.uc_link = NULL;
    uintptr_t p = (uintptr_t)f;
    makecontext(&f->self, (void (*)(void))hier_fiber_main, 2, (unsigned)(p >> 32), (unsigned)(p & 0xffffffffu));
    *fiber_p = f;
    return HIER_OK;
}

int hier_fiber_resume(hier_fiber_t *f)
{
    if (f->ended) return 1;
    if (hier_fiber_now) return 0; /* (a fiber does not run another) */
    hier_fiber_now = f;
    hier_fiber_switch(&f->back, &f->self, f, 1);
    hier_fiber_now = NULL;
    return f->ended;
}

void hier_fiber_yield(void)
{
    hier_fiber_t *f = hier_fiber_now;
    if (!f) return;
    hier_fiber_now = NULL;
    hier_fiber_switch(&f->self, &f->back, f, 0);
    hier_fiber_now = f;
}

int hier_fiber_inside(void)
{
    return hier_fiber_now != NULL;
}

void hier_fiber_free(hier_fiber_t *f)
{
    if (!f) return;
    munmap(f->stack, HIER_FIBER_STACK);
    free(f);
}
