#include "libgpuwatch/base/own_stack.h"

#include <pthread.h>
#include <signal.h>

#include <cstdint>

namespace gpuwatch {

namespace {

void* RunWork(void* arg) {
  (*static_cast<const std::function<void()>*>(arg))();
  return nullptr;
}

}  // namespace

bool SetWorkStack(pthread_attr_t* attr) {
  return pthread_attr_setstacksize(attr, kWorkStackBytes) == 0;
}

size_t StackLeft() {
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return SIZE_MAX;
  void* low = nullptr;
  size_t size = 0;
  const int rc = pthread_attr_getstack(&attr, &low, &size);
  pthread_attr_destroy(&attr);
  if (rc != 0 || low == nullptr) return SIZE_MAX;
  const char here = 0;
  const auto sp = reinterpret_cast<uintptr_t>(&here);
  const auto bottom = reinterpret_cast<uintptr_t>(low);
  return sp > bottom ? sp - bottom : 0;
}

bool RunWithStack(const std::function<void()>& work, size_t needed) {
  if (StackLeft() >= needed) {
    work();
    return true;
  }
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0) return false;
  // The host's signals keep going to its own threads.
  sigset_t all;
  sigset_t old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t thread;
  const bool started =
      SetWorkStack(&attr) &&
      pthread_create(&thread, &attr, RunWork, const_cast<std::function<void()>*>(&work)) == 0;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  pthread_attr_destroy(&attr);
  if (started) pthread_join(thread, nullptr);
  return started;
}

}  // namespace gpuwatch
