// Kernel launches counted per kernel, and GPU time per kernel when kernel
// activity records are enabled (GPUWATCH_KERNEL_TIMING=1).
//
// OnLaunch() is on the launch path of every kernel, so it is lock-free and
// allocation-free once a kernel has been seen: the name is interned by the
// pointer CUPTI passes as symbolName (base/name_table.h), copied once on a
// kernel's first launch, and a counter per name id is added to. Each kernel
// keeps the stack of its first launch too (SetSite). Names are merged by text
// at report time.
#ifndef GPUWATCH_LIBGPUWATCH_RECORD_KERNELS_H_
#define GPUWATCH_LIBGPUWATCH_RECORD_KERNELS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "libgpuwatch/base/mutex.h"
#include "libgpuwatch/base/name_table.h"

namespace gpuwatch {

struct KernelStats {
  std::string name;  // mangled, as the driver knows it
  uint64_t launches = 0;
  uint64_t timed = 0;  // launches with an activity record
  uint64_t gpu_ns = 0;
};

class KernelTable {
 public:
  KernelTable();
  KernelTable(const KernelTable&) = delete;
  KernelTable& operator=(const KernelTable&) = delete;

  // Counts one launch. `name` may be null (graph launches, unknown).
  // Thread-safe. Returns the name's id (0: counted under "(other)").
  uint32_t OnLaunch(const char* name) {
    const uint32_t id = names_.Intern(name != nullptr ? name : kNoName);
    std::atomic<uint64_t>& count = id != 0 ? kernels_[id].launches : overflow_;
    count.fetch_add(1, std::memory_order_relaxed);
    return id;
  }
  // The launch path's common case (Events::KernelLaunchedAgain): the id of
  // a kernel launched before, with its launch site, whose name is found at
  // its first probe; 0 for any other (a null name too), which then goes
  // OnLaunch's way. Counts nothing (Count does). Lock-free.
  uint32_t LaunchedBefore(const char* name) const {
    const uint32_t id = names_.Find(name);
    return id != 0 && kernels_[id].site.load(std::memory_order_relaxed) != 0 ? id : 0;
  }
  // One more launch of `id`, as LaunchedBefore returned it.
  void Count(uint32_t id) { kernels_[id].launches.fetch_add(1, std::memory_order_relaxed); }
  // Whether the kernel `id` has no launch site yet (SetSite): the stack of
  // its first launch, captured once per kernel, not once per launch.
  bool NeedsSite(uint32_t id) const {
    return id != 0 && id <= kMaxNames && kernels_[id].site.load(std::memory_order_relaxed) == 0;
  }
  // Its site, once (`stack_id` 0: none could be captured; not asked again).
  void SetSite(uint32_t id, uint32_t stack_id) {
    if (id != 0 && id <= kMaxNames) {
      kernels_[id].site.store(uint64_t{stack_id} + 1, std::memory_order_relaxed);
    }
  }
  // The stack id of the kernel's first launch; 0 when none.
  uint32_t SiteOf(uint32_t id) const {
    const uint64_t site =
        id != 0 && id <= kMaxNames ? kernels_[id].site.load(std::memory_order_relaxed) : 0;
    return site != 0 ? static_cast<uint32_t>(site - 1) : 0;
  }
  // The name of an id OnLaunch returned; nullptr for 0 or an unknown id.
  const char* NameOf(uint32_t id) const { return names_.Name(id); }
  // One kernel activity record. Thread-safe; takes a mutex.
  void OnKernelRecord(const char* name, uint64_t start_ns, uint64_t end_ns);
  // Every kernel, merged by name, most launched first.
  std::vector<KernelStats> Snapshot() const;
  // Launches counted, of every kernel (a sum: not for the launch path).
  uint64_t launches() const;
  // Distinct names kept, for launches and for GPU time apart; launches and
  // records of kernels beyond them are counted under "(other)".
  static constexpr size_t kMaxNames = 4096;
  // For pthread_atfork (prepare; parent and child).
  void LockForFork() {
    mu_.lock();
    names_.LockForFork();
  }
  void UnlockAfterFork() {
    names_.UnlockAfterFork();
    mu_.unlock();
  }

 private:
  static constexpr const char kNoName[] = "(unnamed)";
  NameTable names_{static_cast<uint32_t>(kMaxNames)};
  // Per name id (1..kMaxNames): its launches and its launch site, side by
  // side, so that a launch reads and writes one line. The library never
  // destroys its table (callbacks may run during exit); a table that is
  // destroyed frees it. Mapped zeroed (no launch, no site): a page is
  // touched when one of its 256 kernels is first launched, not all 16 at
  // attach, as `new` zeroing them did.
  struct PerKernel {
    std::atomic<uint64_t> launches{0};
    std::atomic<uint64_t> site{0};  // 1 + the stack id of its first launch; 0: not captured yet
  };
  struct Unmapper {
    void operator()(PerKernel* kernels) const;
  };
  std::unique_ptr<PerKernel[], Unmapper> kernels_;
  std::atomic<uint64_t> overflow_{0};
  mutable Mutex mu_;
  std::unordered_map<std::string, std::pair<uint64_t, uint64_t>> timing_;  // guarded by mu_
};

// A demangled kernel name ("Scale(float*, unsigned long, float)"), or the
// name itself when it is not a mangled C++ name.
std::string DemangleKernel(const std::string& name);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_RECORD_KERNELS_H_
