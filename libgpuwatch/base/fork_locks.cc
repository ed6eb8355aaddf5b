#include "libgpuwatch/base/fork_locks.h"

#include <pthread.h>

#include <atomic>

#include "libgpuwatch/base/log.h"

namespace gpuwatch::fork_locks {
namespace {

// Entries are written once, before `g_count` publishes them, and never
// change: the fork handlers read them without a lock of their own.
Entry g_entries[kMaxEntries];
std::atomic<size_t> g_count{0};
// Serialises Add and SetAgentSteps, and is held across a fork: no entry is
// added during one, and none is left half added in the child.
std::mutex g_add_mu;

AgentSteps g_agent;  // guarded by g_add_mu
bool g_agent_set = false;
bool g_agent_locked = false;  // by this fork's Prepare (one fork at a time: g_add_mu)

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
  const size_t n = g_count.load(std::memory_order_acquire);
  for (size_t i = 0; i < n; ++i) {
    if (g_entries[i].tier == tier) g_entries[i].lock(g_entries[i].arg);
  }
}

void ReleaseTier(Tier tier, bool child) {
  const size_t n = g_count.load(std::memory_order_acquire);
  for (size_t i = n; i-- > 0;) {
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
    const std::lock_guard<std::mutex> lock(g_add_mu);
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
    const std::lock_guard<std::mutex> lock(g_add_mu);
    g_agent = steps;
    g_agent_set = true;
  }
  InstallOnce();
}

void Prepare() {
  g_add_mu.lock();
  LockTier(Tier::kOuter);
  g_agent_locked = g_agent_set && g_agent.lock();
  LockTier(Tier::kLeaf);
}

void Parent() {
  ReleaseTier(Tier::kLeaf, false);
  if (g_agent_locked) g_agent.unlock();
  ReleaseTier(Tier::kOuter, false);
  g_add_mu.unlock();
}

void InChild() {
  ReleaseTier(Tier::kLeaf, true);
  const bool restart = g_agent_locked;
  if (restart) g_agent.unlock();
  ReleaseTier(Tier::kOuter, true);
  g_add_mu.unlock();
  if (restart) g_agent.restart_in_child();
}

size_t Count() { return g_count.load(std::memory_order_acquire); }
Entry At(size_t i) { return i < Count() ? g_entries[i] : Entry{}; }

}  // namespace gpuwatch::fork_locks
