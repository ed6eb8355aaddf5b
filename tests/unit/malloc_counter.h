// The unit tests' malloc shim: counts the heap allocations the current thread
// makes while g_count_mallocs is set, by replacing malloc, calloc and realloc
// with forwarders to glibc's. It defines those functions, so include it in
// one source file of a test binary only. Not under sanitizers, whose runtimes
// own malloc: GPUWATCH_COUNT_MALLOC is defined where the shim is in place.
#ifndef GPUWATCH_TESTS_UNIT_MALLOC_COUNTER_H_
#define GPUWATCH_TESTS_UNIT_MALLOC_COUNTER_H_

#include <cstddef>

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define GPUWATCH_COUNT_MALLOC 1
extern "C" void* __libc_malloc(size_t size);
extern "C" void* __libc_calloc(size_t count, size_t size);
extern "C" void* __libc_realloc(void* ptr, size_t size);
namespace {
thread_local bool g_count_mallocs = false;
thread_local long g_mallocs = 0;
}  // namespace
extern "C" void* malloc(size_t size) {
  if (g_count_mallocs) ++g_mallocs;
  return __libc_malloc(size);
}
extern "C" void* calloc(size_t count, size_t size) {
  if (g_count_mallocs) ++g_mallocs;
  return __libc_calloc(count, size);
}
extern "C" void* realloc(void* ptr, size_t size) {
  if (g_count_mallocs) ++g_mallocs;
  return __libc_realloc(ptr, size);
}
#endif

#endif  // GPUWATCH_TESTS_UNIT_MALLOC_COUNTER_H_
