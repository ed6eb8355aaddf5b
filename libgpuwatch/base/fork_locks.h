// The locks of gpuwatch's that live outside the Session and the agent
// (interned NVTX names, Python frames, region handles, array shapes, the
// unwinder's refresh, the memory reserve, the report queue, the mark's scan):
// fork() must not leave any of them held in the child, so each is registered
// here once, where it is made, and the one fork protocol (this file's
// pthread_atfork, the only one of gpuwatch's, with the agent's part in
// interpose/agent/fork.cc) takes them all around a fork, in a fixed order.
//
// The order: each tier in the order its entries were added, kOuter before
// the agent's report lock and the Session's tables, kLeaf after everything.
// An entry is kLeaf when nothing else of gpuwatch's is locked while it is
// held (it guards one small table); kOuter when something of the Session's
// or the agent's may be locked while it is held (NVTX's and the Python
// table's groups, the mark's scan).
//
// Adding never allocates, never waits for a fork in progress (a lock made on
// first use may be registered by a thread that holds a lock the fork waits
// for: the background thread's first report's memory reserve), and never
// fails silently: beyond kMaxEntries an entry is refused with one line (the
// fork would then not take it).
#ifndef GPUWATCH_LIBGPUWATCH_BASE_FORK_LOCKS_H_
#define GPUWATCH_LIBGPUWATCH_BASE_FORK_LOCKS_H_

#include <cstddef>
#include <mutex>

#include "libgpuwatch/base/mutex.h"

namespace gpuwatch::fork_locks {

enum class Tier { kOuter, kLeaf };

struct Entry {
  void (*lock)(void* arg) = nullptr;
  void (*unlock)(void* arg) = nullptr;  // in the parent after the fork
  void (*child)(void* arg) = nullptr;   // in the child; must unlock too
  void* arg = nullptr;
  Tier tier = Tier::kLeaf;
  const char* name = "";
};

inline constexpr size_t kMaxEntries = 32;

// Registers an entry for the rest of the process. Thread-safe.
void Add(const Entry& entry);
// A leaf Mutex or std::mutex: locked before the fork, unlocked on both sides.
void AddLeaf(Mutex* mu, const char* name);
void AddLeaf(std::mutex* mu, const char* name);
// A lock held while the Session's tables are taken: in the outer tier.
void AddOuter(std::mutex* mu, const char* name);

// The agent's own part (interpose/agent/fork.cc): its background thread brought
// to rest, its report lock, the Session's tables, taken between the two
// tiers; `restart_in_child` runs in the child once every lock is released.
struct AgentSteps {
  bool (*lock)() = nullptr;  // false: nothing was taken (not attached)
  void (*unlock)() = nullptr;
  void (*restart_in_child)() = nullptr;
};
void SetAgentSteps(const AgentSteps& steps);  // the first call's steps stay

// The protocol, registered with pthread_atfork once, at the first Add or
// SetAgentSteps: before fork(), kOuter's entries, the agent's part, kLeaf's;
// after it, the same released in the reverse order (each entry's `child` in
// the child), then the agent's restart in the child.
void Prepare();
void Parent();
void InChild();

// For tests: the entries registered so far.
size_t Count();
Entry At(size_t i);

}  // namespace gpuwatch::fork_locks

#endif  // GPUWATCH_LIBGPUWATCH_BASE_FORK_LOCKS_H_
