// For the fork tests: every lock registered with the fork protocol
// (libgpuwatch/base/fork_locks.h) is held by another thread in turn while
// this thread forks; the child must then take every lock itself (a lock left
// held in the child would hang it: an alarm ends it and the test fails).
#ifndef GPUWATCH_TESTS_UNIT_FORK_CHECK_H_
#define GPUWATCH_TESTS_UNIT_FORK_CHECK_H_

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "libgpuwatch/base/fork_locks.h"

namespace gpuwatch::testing {

// Forks while entry `held` is held by another thread. The holder lets go
// once the fork has returned in the parent, or after a second: a protocol
// that takes the lock waits for it in its prepare step (and the holder's
// second ends the wait); one that does not forks at once, and the child
// inherits the lock held.
inline void ForkWhileHeld(size_t held) {
  const fork_locks::Entry e = fork_locks::At(held);
  std::mutex mu;
  std::condition_variable cv;
  bool holding = false;
  bool forked = false;
  std::thread holder([&] {
    e.lock(e.arg);
    std::unique_lock<std::mutex> lock(mu);
    holding = true;
    cv.notify_all();
    cv.wait_for(lock, std::chrono::seconds(1), [&] { return forked; });
    e.unlock(e.arg);
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return holding; });
  }
  // The child says it took every lock with a byte on this pipe: its exit
  // status may be a sanitizer's (ThreadSanitizer reports the parent's
  // threads as leaked when a forked child exits).
  int done[2];
  ASSERT_EQ(pipe(done), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(20);  // a lock left held: SIGALRM ends the child
    for (size_t i = 0; i < fork_locks::Count(); ++i) {
      const fork_locks::Entry each = fork_locks::At(i);
      each.lock(each.arg);
      each.unlock(each.arg);
    }
    (void)!write(done[1], "k", 1);
    _exit(0);
  }
  close(done[1]);
  {
    const std::lock_guard<std::mutex> lock(mu);
    forked = true;
    cv.notify_all();
  }
  holder.join();
  ASSERT_GT(pid, 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  char byte = 0;
  const bool took_all = read(done[0], &byte, 1) == 1 && byte == 'k';
  close(done[0]);
  EXPECT_TRUE(took_all && WIFEXITED(status))
      << "fork while another thread held " << e.name << ": the child "
      << (WIFSIGNALED(status) ? "hung on a lock left held" : "failed");
}

// ForkWhileHeld for every registered entry, in turn.
inline void ForkWhileEachIsHeld() {
  for (size_t i = 0; i < fork_locks::Count(); ++i) ForkWhileHeld(i);
}

inline bool Registered(const std::string& name) {
  for (size_t i = 0; i < fork_locks::Count(); ++i) {
    if (fork_locks::At(i).name == name) return true;
  }
  return false;
}

}  // namespace gpuwatch::testing

#endif  // GPUWATCH_TESTS_UNIT_FORK_CHECK_H_
