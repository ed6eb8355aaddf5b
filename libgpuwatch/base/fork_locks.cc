#include "libgpuwatch/base/fork_locks.h"

#include <pthread.h>
#include <sched.h>

#include <atomic>

#include "libgpuwatch/base/log.h"

namespace gpuwatch::fork_locks {
namespace {

// Entries are written once, before `g_count` publishes them, and never
// change: the fork handlers read them without a lock of their own.
Entry g_entries[kMaxEntries];
std::atomic<size_t> g_count{0};
// Serialises Add and SetAgentSteps. Not taken by the fork handlers: a thread
// may add an entry (a lock made on first use) while it holds a lock that a
// fork in progress waits for, and must not wait for that fork in turn. The
// child clears it (the thread that held it is gone; what it was adding was
// not published).
std::atomic_flag g_adding = ATOMIC_FLAG_INIT;

AgentSteps g_agent;  // written under g_adding before g_agent_set publishes it
std::atomic<bool> g_agent_set{false};
// This fork's: the entries its Prepare took, and whether it took the agent's
// part (one fork at a time: pthread_atfork's handlers run on the forking thread).
size_t g_fork_count = 0;
bool g_agent_locked = false;

class Adding {
 public:
  Adding() {
    while (g_adding.test_and_set(std::memory_order_acquire)) sched_yield();
  }
  ~Adding() { g_adding.clear(std::memory_order_release); }
  Adding(const Adding&) = delete;
  Adding& operator=(const Adding&) = delete;
};

template <typename M>
void LockIt(void* mu) {
  static_cast<M*>(mu)->lock();
}
template <typename M>
void UnlockIt(void* mu) {
  static_cast<M*>(mu)->unlock();
}

template <typename M>
Entry OfLock(M* mu, const char* name, Tier tier) {
  Entry e;
  e.lock = &LockIt<M>;
  e.unlock = &UnlockIt<M>;
  e.child = &UnlockIt<M>;
  e.arg = mu;
  e.tier = tier;
  e.name = name;
  return e;
}

void LockTier(Tier tier) {
  for (size_t i = 0; i < g_fork_count; ++i) {
    if (g_entries[i].tier == tier) g_entries[i].lock(g_entries[i].arg);
  }
}

void ReleaseTier(Tier tier, bool child) {
  for (size_t i = g_fork_count; i-- > 0;) {
    const Entry& e = g_entries[i];
    if (e.tier == tier) (child ? e.child : e.unlock)(e.arg);
  }
}

// gpuwatch's only pthread_atfork.
void InstallOnce() {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(&Prepare, &Parent, &InChild); });
}

}  // namespace

void Add(const Entry& entry) {
  {
    const Adding adding;
    const size_t n = g_count.load(std::memory_order_relaxed);
    if (n == kMaxEntries) {
      Warn("internal: more than %zu locks for fork(); %s is not taken around a fork", kMaxEntries,
           entry.name);
      return;
    }
    g_entries[n] = entry;
    g_count.store(n + 1, std::memory_order_release);
  }
  InstallOnce();
}

void AddLeaf(Mutex* mu, const char* name) { Add(OfLock(mu, name, Tier::kLeaf)); }
void AddLeaf(std::mutex* mu, const char* name) { Add(OfLock(mu, name, Tier::kLeaf)); }
void AddOuter(std::mutex* mu, const char* name) { Add(OfLock(mu, name, Tier::kOuter)); }

void SetAgentSteps(const AgentSteps& steps) {
  {
    const Adding adding;
    if (!g_agent_set.load(std::memory_order_relaxed)) {
      g_agent = steps;
      g_agent_set.store(true, std::memory_order_release);
    }
  }
  InstallOnce();
}

void Prepare() {
  // Entries added from here on (by a thread this fork waits for) are not
  // taken by this fork: they were made during it.
  g_fork_count = g_count.load(std::memory_order_acquire);
  LockTier(Tier::kOuter);
  g_agent_locked = g_agent_set.load(std::memory_order_acquire) && g_agent.lock();
  LockTier(Tier::kLeaf);
}

void Parent() {
  ReleaseTier(Tier::kLeaf, false);
  if (g_agent_locked) g_agent.unlock();
  ReleaseTier(Tier::kOuter, false);
}

void InChild() {
  ReleaseTier(Tier::kLeaf, true);
  const bool restart = g_agent_locked;
  if (restart) g_agent.unlock();
  ReleaseTier(Tier::kOuter, true);
  g_adding.clear(std::memory_order_release);
  if (restart) g_agent.restart_in_child();
}

size_t Count() { return g_count.load(std::memory_order_acquire); }
Entry At(size_t i) { return i < Count() ? g_entries[i] : Entry{}; }

}  // namespace gpuwatch::fork_locks
