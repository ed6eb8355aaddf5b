// A block of memory per thread for the callback path's per-thread caches
// (the stack walker's record of its last walk, the stack table's recent
// stacks): mapped on the thread's first use and unmapped when the thread
// exits. Not a thread_local itself: a library dlopen'ed with initial-exec
// TLS (CUDA_INJECTION64_PATH) must fit all its TLS in glibc's small static
// surplus, so only a pointer per block type lives there.
#ifndef GPUWATCH_LIBGPUWATCH_BASE_THREAD_BLOCK_H_
#define GPUWATCH_LIBGPUWATCH_BASE_THREAD_BLOCK_H_

#include <pthread.h>
#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <new>

namespace gpuwatch {

// T: zero-initialisable (a fresh block is `new T{}` over zeroed pages).
template <typename T>
class ThreadBlock {
 public:
  // The calling thread's block, or null: no memory, or the thread is exiting
  // (a call from a later TLS destructor of the thread goes without).
  static T* Get() {
    T* block = t_block;
    if (block != nullptr) [[likely]] {
      return reinterpret_cast<uintptr_t>(block) == kGone ? nullptr : block;
    }
    return Make();
  }

 private:
  static constexpr uintptr_t kGone = 1;  // t_block after the thread's key destructor ran

  static void SetGone() {
    t_block = reinterpret_cast<T*>(kGone);  // NOLINT(performance-no-int-to-ptr)
  }

  static void Unmap(void* block) {
    munmap(block, sizeof(T));
    SetGone();
  }

  __attribute__((noinline)) static T* Make() {
    std::call_once(key_once_, [] { key_ok_.store(pthread_key_create(&key_, &Unmap) == 0); });
    void* memory =
        mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) {
      SetGone();
      return nullptr;
    }
    T* block = new (memory) T{};
    // Without the key the block stays mapped after the thread exits.
    if (key_ok_.load()) pthread_setspecific(key_, block);
    t_block = block;
    return block;
  }

  static inline thread_local T* t_block __attribute__((tls_model("initial-exec"))) = nullptr;
  static inline constinit pthread_key_t key_{};
  static inline constinit std::once_flag key_once_;
  static inline constinit std::atomic<bool> key_ok_{false};
};

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_BASE_THREAD_BLOCK_H_
