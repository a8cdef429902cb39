/* cuda_loader.h: the few CUDA driver calls the tests and the benchmark use
 * on real device memory, loaded with dlopen("libcuda.so.1"): everything
 * builds without CUDA, and says why not where it cannot run. */
#ifndef CUDA_LOADER_H
#define CUDA_LOADER_H

#include <stddef.h>
#include <stdint.h>

typedef uintptr_t cul_ptr_t;

/* NULL when CUDA works here (a context on device `rank` modulo the devices
 * is current), else why not. */
const char *cul_open(int rank);
cul_ptr_t cul_alloc(size_t bytes);   /* 0 on failure */
void cul_free(cul_ptr_t p);
int cul_htod(cul_ptr_t dst, const void *src, size_t bytes); /* 0 on success */
int cul_dtoh(void *dst, cul_ptr_t src, size_t bytes);

#endif
