// Kernel launches counted per kernel, and GPU time per kernel when kernel
// activity records are enabled (GPUWATCH_KERNEL_TIMING=1).
//
// OnLaunch() is on the launch path of every kernel, so it is lock-free and
// allocation-free once a kernel has been seen: the name is interned by the
// pointer CUPTI passes as symbolName (base/name_table.h), copied once on a
// kernel's first launch, and a counter per name id is added to. Names are
// merged by text at report time.
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
    std::atomic<uint64_t>& count = id != 0 ? counts_[id] : overflow_;
    count.fetch_add(1, std::memory_order_relaxed);
    return id;
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
  // Launches per name id (1..kMaxNames). The library never destroys its
  // table (callbacks may run during exit); a table that is destroyed frees it.
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;
  std::atomic<uint64_t> overflow_{0};
  mutable Mutex mu_;
  std::unordered_map<std::string, std::pair<uint64_t, uint64_t>> timing_;  // guarded by mu_
};

// A demangled kernel name ("Scale(float*, unsigned long, float)"), or the
// name itself when it is not a mangled C++ name.
std::string DemangleKernel(const std::string& name);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_RECORD_KERNELS_H_
