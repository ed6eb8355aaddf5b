#include "libgpuwatch/record/kernels.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <map>

namespace gpuwatch {

namespace {
constexpr const char kNoName[] = "(unnamed)";
constexpr const char kOther[] = "(other)";  // kernels beyond kMaxNames
}  // namespace

KernelTable::KernelTable() : slots_(std::make_unique<Slot[]>(kSlots)) {}

KernelTable::Slot* KernelTable::FindOrInsert(const char* key) {
  const uint64_t h = reinterpret_cast<uintptr_t>(key) * 0x9E3779B97F4A7C15ULL;
  size_t i = static_cast<size_t>(h >> 52) & (kSlots - 1);
  for (size_t probe = 0; probe < kSlots; ++probe, i = (i + 1) & (kSlots - 1)) {
    const char* seen = slots_[i].key.load(std::memory_order_acquire);
    if (seen == key) return &slots_[i];
    if (seen == nullptr) {
      // First launch of this kernel: copy its name before publishing the slot
      // so that a report never sees a key without a name.
      {
        std::lock_guard<Mutex> lock(mu_);
        names_.try_emplace(key, key);
      }
      const char* expected = nullptr;
      if (slots_[i].key.compare_exchange_strong(expected, key, std::memory_order_acq_rel) ||
          expected == key) {
        return &slots_[i];
      }
    }
  }
  return nullptr;
}

void KernelTable::OnLaunch(const char* name) {
  launches_.fetch_add(1, std::memory_order_relaxed);
  Slot* slot = FindOrInsert(name != nullptr ? name : kNoName);
  if (slot == nullptr) {
    overflow_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  slot->count.fetch_add(1, std::memory_order_relaxed);
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
  for (size_t i = 0; i < kSlots; ++i) {
    const char* key = slots_[i].key.load(std::memory_order_acquire);
    if (key == nullptr) continue;
    auto name = names_.find(key);
    const std::string text = name != names_.end() ? name->second : kNoName;
    KernelStats& k = merged[text];
    k.name = text;
    k.launches += slots_[i].count.load(std::memory_order_relaxed);
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
