#include "libgpuwatch/record/kernels.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <new>

#include "libgpuwatch/base/arena.h"

namespace gpuwatch {

namespace {
constexpr const char kOther[] = "(other)";                           // kernels beyond kMaxNames
constexpr size_t kKernelsBytes = (KernelTable::kMaxNames + 1) * 16;  // sizeof(PerKernel)
}  // namespace

KernelTable::KernelTable() : kernels_(static_cast<PerKernel*>(MapZeroed(kKernelsBytes))) {
  static_assert(sizeof(PerKernel) == 16);
  if (kernels_ == nullptr) throw std::bad_alloc();  // as `new` did
}

void KernelTable::Unmapper::operator()(PerKernel* kernels) const { Unmap(kernels, kKernelsBytes); }

uint64_t KernelTable::launches() const {
  uint64_t n = overflow_.load(std::memory_order_relaxed);
  for (uint32_t id = 1; id <= names_.size(); ++id)
    n += kernels_[id].launches.load(std::memory_order_relaxed);
  return n;
}

void KernelTable::OnKernelRecord(const char* name, uint64_t start_ns, uint64_t end_ns) {
  std::lock_guard<Mutex> lock(mu_);
  std::string key = name != nullptr ? name : kNoName;
  auto it = timing_.find(key);
  if (it == timing_.end()) {
    if (timing_.size() >= kMaxNames) key = kOther;
    it = timing_.try_emplace(std::move(key)).first;
  }
  auto& t = it->second;
  t.first += 1;
  t.second += end_ns > start_ns ? end_ns - start_ns : 0;
}

std::vector<KernelStats> KernelTable::Snapshot() const {
  std::map<std::string, KernelStats> merged;
  std::lock_guard<Mutex> lock(mu_);
  for (uint32_t id = 1; id <= names_.size(); ++id) {
    const char* text = names_.Name(id);
    if (text == nullptr) continue;  // still publishing: no launch counted yet
    KernelStats& k = merged[text];
    k.name = text;
    k.launches += kernels_[id].launches.load(std::memory_order_relaxed);
  }
  if (const uint64_t other = overflow_.load(std::memory_order_relaxed); other != 0) {
    merged[kOther].name = kOther;
    merged[kOther].launches += other;
  }
  for (const auto& [text, t] : timing_) {
    KernelStats& k = merged[text];
    k.name = text;
    k.timed += t.first;
    k.gpu_ns += t.second;
  }
  std::vector<KernelStats> out;
  out.reserve(merged.size());
  for (auto& [text, k] : merged) out.push_back(std::move(k));
  std::sort(out.begin(), out.end(), [](const KernelStats& a, const KernelStats& b) {
    return a.launches != b.launches ? a.launches > b.launches : a.name < b.name;
  });
  return out;
}

std::string DemangleKernel(const std::string& name) {
  if (name.rfind("_Z", 0) != 0) return name;
  int status = 0;
  char* demangled = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  if (status != 0 || demangled == nullptr) return name;
  std::string out(demangled);
  std::free(demangled);  // NOLINT(cppcoreguidelines-no-malloc): __cxa_demangle's contract
  return out;
}

}  // namespace gpuwatch
