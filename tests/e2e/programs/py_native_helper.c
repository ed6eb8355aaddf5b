/* A shared library that tests/e2e/programs/python_leaks.py loads with ctypes:
 * threads created by native code, one that allocates itself (no Python frame
 * anywhere on its stack) and one that calls back into Python; and a loop that
 * keeps a Python thread inside CUDA, without the GIL, while the interpreter
 * exits. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#define GW_EXPORT __attribute__((visibility("default")))

static void* alloc_thread_main(void* arg) {
  void* p = NULL;
  const cudaError_t err = cudaMalloc(&p, *(size_t*)arg); /* LEAK:native */
  return err == cudaSuccess ? p : NULL;
}

/* Allocates `size` bytes from a new native thread; 0 on success. */
GW_EXPORT int gw_native_thread_alloc(size_t size) {
  pthread_t thread;
  if (pthread_create(&thread, NULL, alloc_thread_main, &size) != 0) return -1;
  void* p = NULL;
  pthread_join(thread, &p);
  return p != NULL ? 0 : -1;
}

static void* call_thread_main(void* arg) {
  void (*callback)(void) = (void (*)(void))arg;
  callback(); /* CALLBACK:native */
  return NULL;
}

/* Calls `callback` (a ctypes function) from a new native thread; 0 on success. */
GW_EXPORT int gw_native_thread_call(void (*callback)(void)) {
  pthread_t thread;
  if (pthread_create(&thread, NULL, call_thread_main, (void*)callback) != 0) return -1;
  pthread_join(thread, NULL);
  return 0;
}

static atomic_int churn_stop;
static atomic_int churn_running;
static pthread_once_t churn_once = PTHREAD_ONCE_INIT;

/* Runs after Python has finalized (a C atexit handler registered after
 * gpuwatch's, so before gpuwatch's exit report and CUDA's teardown): stops the
 * loops and waits until no thread is inside CUDA any more. */
static void stop_churn(void) {
  atomic_store(&churn_stop, 1);
  while (atomic_load(&churn_running) > 0) sched_yield();
}

static void register_stop(void) { atexit(stop_churn); }

/* Allocates and frees 4 KiB as fast as it can until the process exits; never
 * returns. Called through ctypes (which released the GIL) from a Python
 * daemon thread: the thread never takes the GIL again, so it stays clear of
 * CPython's own races between daemon threads and finalization, while its
 * Python frames are what the interpreter frees at exit. */
GW_EXPORT void gw_churn_forever(void) {
  pthread_once(&churn_once, register_stop);
  atomic_fetch_add(&churn_running, 1);
  while (!atomic_load(&churn_stop)) {
    void* p = NULL;
    if (cudaMalloc(&p, 4096) == cudaSuccess) cudaFree(p); /* CHURN */
  }
  atomic_fetch_sub(&churn_running, 1);
  for (;;) pause();
}
