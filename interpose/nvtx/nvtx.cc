// NVTX's tool side: the injection entry point fills each NVTX instance's
// function table (one per module compiled with the NVTX headers: the
// program, libtorch, ...) with the functions below, which keep the calling
// thread's stack of open ranges in the process's phase table.
//
// Taken: push/pop of the default domain (ASCII, wide and attribute
// messages) and of registered domains, domain creation and registered
// strings. Everything else NVTX offers stays a no-op (the table entries we
// leave null), or, when gpuwatch chains to another tool (below), that tool's.
#define NVTX_NO_IMPL
#include "interpose/nvtx/nvtx.h"

#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstring>
#include <cwchar>
#include <memory>
#include <mutex>
#include <type_traits>

#include "interpose/nvtx/nvtx_names.h"
#include "libgpuwatch/base/fork_locks.h"
#include "libgpuwatch/base/mutex.h"

namespace gpuwatch {

namespace nvtx_internal {
constinit thread_local ThreadPhases t_phases __attribute__((tls_model("initial-exec")));
}  // namespace nvtx_internal

namespace {

// Domains by index (0, a null handle, is the default domain); a handle of
// gpuwatch's own is its index. At most kMaxDomains; past that, domains share
// the last.
constexpr uint32_t kMaxDomains = 255;
struct Domains {
  Mutex mu;
  std::array<std::string, kMaxDomains + 1> names;  // [0]: the default domain
  // names[1..used] are written, each before `used` covers it (release): a
  // push reads its domain's name without the lock.
  std::atomic<uint32_t> used{0};
};
Domains& TheDomains() {
  static auto* domains = new Domains();  // never destroyed: ranges end during exit
  return *domains;
}

// The stack of the calling thread, and whether its exit is watched.
using nvtx_internal::t_phases;
using nvtx_internal::ThreadPhases;

pthread_key_t g_exit_key;
void OnThreadExit(void* stack) { ProcessPhases().ThreadExit(*static_cast<PhaseStack*>(stack)); }
bool WatchExits() { return pthread_key_create(&g_exit_key, &OnThreadExit) == 0; }

// Once per thread: a thread that ends inside a range is counted.
__attribute__((noinline)) void Watch(ThreadPhases& t) {
  static const bool watching = WatchExits();
  if (watching) pthread_setspecific(g_exit_key, &t.stack);
  t.stack.thread = static_cast<uint32_t>(gettid());
  t.watched = true;
}

void Push(uint32_t name, uint32_t domain) {
  ThreadPhases& t = t_phases;
  if (!t.watched) [[unlikely]]
    Watch(t);
  ProcessPhases().Push(&t.stack, name, domain);
}

// A range's name: its text, cut to kMaxPhaseNameBytes, prefixed with its
// domain's name ("domain:text") outside the default domain.
NameBuffer NameIn(uint32_t domain) {
  NameBuffer name;
  if (domain == 0) return name;
  Domains& d = TheDomains();
  if (domain <= d.used.load(std::memory_order_acquire)) name.Append(d.names[domain]);
  name.Append(":");
  return name;
}

// A name the thread's cache did not hold: built ("domain:text"), interned,
// and kept in the cache (*entry) when what was interned is what was built
// (not "(other)", past the table's limit) and the domain's name is set for
// good; *entry null otherwise.
__attribute__((noinline)) uint32_t InternText(const char* text, uint32_t domain,
                                              NameCache::Entry** entry) {
  NameBuffer name = NameIn(domain);
  const size_t prefix = name.view().size();
  name.Append(text);
  const uint32_t id = ProcessPhases().InternName(name.view());
  const bool fixed = domain == 0 || domain <= TheDomains().used.load(std::memory_order_acquire);
  *entry = fixed && ProcessPhases().NameText(id) == name.view()
               ? t_phases.names.Put(text, domain, id, prefix)
               : nullptr;
  return id;
}

// The name id of range name `text` (NUL-terminated; null: "(unnamed)") in
// `domain`, and its entry in the thread's cache (null: none): the cache's
// (a pointer compare and the text's), else interned.
uint32_t NameOfText(const PhaseTable& phases, const char* text, uint32_t domain,
                    NameCache::Entry** entry) {
  if (text == nullptr) text = "(unnamed)";
  *entry = t_phases.names.Find(phases, text, domain);
  return *entry != nullptr ? (*entry)->name : InternText(text, domain, entry);
}

uint32_t NameOfText(const char* text, uint32_t domain) {
  NameCache::Entry* entry = nullptr;
  return NameOfText(ProcessPhases(), text, domain, &entry);
}

// Opens range `text` of `domain` on the calling thread: its name from the
// thread's cache, and its path too when the thread opened it in the same
// place before (paths below kMaxPhasePaths never change).
void PushText(const char* text, uint32_t domain) {
  ThreadPhases& t = t_phases;
  if (!t.watched) [[unlikely]]
    Watch(t);
  PhaseTable& phases = ProcessPhases();
  NameCache::Entry* e = nullptr;
  const uint32_t name = NameOfText(phases, text, domain, &e);
  PhaseStack& stack = t.stack;
  const uint32_t parent = stack.current();
  if (e != nullptr && e->path != 0 && e->parent == parent && stack.depth < kMaxPhaseDepth) {
    phases.Open(&stack, name, domain, e->path);
    return;
  }
  const int depth = stack.depth;
  phases.Push(&stack, name, domain);
  if (e != nullptr && stack.depth > depth && stack.current() < kMaxPhasePaths) {
    e->parent = static_cast<uint16_t>(parent);
    e->path = static_cast<uint16_t>(stack.current());
  }
}

// NVTX's handles are opaque to the program: ours are small integers, a
// registered string's its name id, a domain's its index.
nvtxStringHandle_t HandleOfName(uint32_t id) {
  // NOLINTNEXTLINE(performance-no-int-to-ptr): an opaque handle, never dereferenced
  return reinterpret_cast<nvtxStringHandle_t>(uintptr_t{id});
}

nvtxDomainHandle_t HandleOfDomain(uint32_t index) {
  // NOLINTNEXTLINE(performance-no-int-to-ptr): an opaque handle, never dereferenced
  return reinterpret_cast<nvtxDomainHandle_t>(uintptr_t{index});
}

int Depth() { return t_phases.stack.depth + t_phases.stack.overflow; }

// --- Chaining -----------------------------------------------------------------
// When NVTX_INJECTION64_PATH named another tool (Nsight Systems), gpuwatch
// took the variable and calls that tool's entry point first
// (InitializeNvtx): the functions it set in the slots gpuwatch takes are
// called after gpuwatch's own, and the handles the program gets are the
// other tool's, mapped to gpuwatch's domains and names.

enum Slot : uint8_t {
  kPushA,
  kPushW,
  kPushEx,
  kPop,
  kDomainPushEx,
  kDomainPop,
  kCreateA,
  kCreateW,
  kDestroy,
  kRegisterA,
  kRegisterW,
  kNumSlots
};
// The other tool's function per slot (null: none), set once, by the first
// NVTX instance to initialize.
std::array<std::atomic<NvtxFunctionPointer>, kNumSlots> g_next{};

template <typename Fn>
Fn Next(Slot slot) {
  return reinterpret_cast<Fn>(g_next[slot].load(std::memory_order_acquire));
}

HandleMap& DomainMap() {
  static auto* map = new HandleMap();
  return *map;
}
HandleMap& StringMap() {
  static auto* map = new HandleMap();
  return *map;
}

// A domain handle: the other tool's (mapped), else gpuwatch's own index.
uint32_t DomainOf(nvtxDomainHandle_t handle) {
  if (const uint32_t mapped = DomainMap().Get(handle); mapped != 0) return mapped;
  const auto index = reinterpret_cast<uintptr_t>(handle);
  return index <= kMaxDomains ? static_cast<uint32_t>(index) : kMaxDomains;
}

// A registered string's name id, likewise.
uint32_t NameOfHandle(nvtxStringHandle_t handle) {
  if (const uint32_t mapped = StringMap().Get(handle); mapped != 0) return mapped;
  const auto id = reinterpret_cast<uintptr_t>(handle);
  return id <= kMaxPhaseNames ? static_cast<uint32_t>(id) : 0;
}

uint32_t NameOf(const nvtxEventAttributes_t* a, uint32_t domain) {
  const bool valid = a != nullptr && a->size >= NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  if (valid && a->messageType == NVTX_MESSAGE_TYPE_REGISTERED) {
    // Interned, with its domain, when it was registered: no text to copy.
    if (const uint32_t id = NameOfHandle(a->message.registered); id != 0) return id;
  }
  if (valid && a->messageType == NVTX_MESSAGE_TYPE_ASCII && a->message.ascii != nullptr) {
    return NameOfText(a->message.ascii, domain);
  }
  NameBuffer name = NameIn(domain);
  const bool wide =
      valid && a->messageType == NVTX_MESSAGE_TYPE_UNICODE && a->message.unicode != nullptr;
  if (wide) {
    name.AppendWide(a->message.unicode);
  } else {
    name.Append("(unnamed)");  // no text, a bad handle or an unknown message type
  }
  return ProcessPhases().InternName(name.view());
}

void PushAttributes(const nvtxEventAttributes_t* a, uint32_t domain) {
  if (a != nullptr && a->size >= NVTX_EVENT_ATTRIB_STRUCT_SIZE &&
      a->messageType == NVTX_MESSAGE_TYPE_ASCII && a->message.ascii != nullptr) {
    PushText(a->message.ascii, domain);
  } else {
    Push(NameOf(a, domain), domain);
  }
}

// The NVTX functions. A push returns the depth of the range it opened (0:
// outermost); a pop the depth of the range it closed, or a negative value
// when none was open. Chained, the other tool's answer is returned.
int NVTX_API RangePushA(const char* message) {
  PushText(message, 0);
  if (const auto next = Next<int(NVTX_API*)(const char*)>(kPushA)) return next(message);
  return Depth() - 1;
}

int NVTX_API RangePushW(const wchar_t* message) {
  NameBuffer name;
  name.AppendWide(message);
  Push(ProcessPhases().InternName(name.view()), 0);
  if (const auto next = Next<int(NVTX_API*)(const wchar_t*)>(kPushW)) return next(message);
  return Depth() - 1;
}

int NVTX_API RangePushEx(const nvtxEventAttributes_t* attributes) {
  PushAttributes(attributes, 0);
  if (const auto next = Next<int(NVTX_API*)(const nvtxEventAttributes_t*)>(kPushEx)) {
    return next(attributes);
  }
  return Depth() - 1;
}

int NVTX_API RangePop() {
  const bool popped = ProcessPhases().Pop(&t_phases.stack, 0);
  if (const auto next = Next<int(NVTX_API*)()>(kPop)) return next();
  return popped ? Depth() : -1;
}

int NVTX_API DomainRangePushEx(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attributes) {
  PushAttributes(attributes, DomainOf(domain));
  if (const auto next =
          Next<int(NVTX_API*)(nvtxDomainHandle_t, const nvtxEventAttributes_t*)>(kDomainPushEx)) {
    return next(domain, attributes);
  }
  return Depth() - 1;
}

int NVTX_API DomainRangePop(nvtxDomainHandle_t domain) {
  const bool popped = ProcessPhases().Pop(&t_phases.stack, DomainOf(domain));
  if (const auto next = Next<int(NVTX_API*)(nvtxDomainHandle_t)>(kDomainPop)) return next(domain);
  return popped ? Depth() : -1;
}

// Start/end ranges: process-wide, they may end on another thread. When
// gpuwatch chains to a tool that takes them, they are that tool's alone
// (its range ids are what the program holds).
nvtxRangeId_t NVTX_API RangeStartA(const char* message) {
  return ProcessPhases().Start(NameOfText(message, 0));
}

nvtxRangeId_t NVTX_API RangeStartW(const wchar_t* message) {
  NameBuffer name;
  name.AppendWide(message);
  return ProcessPhases().Start(ProcessPhases().InternName(name.view()));
}

nvtxRangeId_t NVTX_API RangeStartEx(const nvtxEventAttributes_t* attributes) {
  return ProcessPhases().Start(NameOf(attributes, 0));
}

void NVTX_API RangeEnd(nvtxRangeId_t id) { ProcessPhases().End(id); }

nvtxRangeId_t NVTX_API DomainRangeStartEx(nvtxDomainHandle_t domain,
                                          const nvtxEventAttributes_t* attributes) {
  return ProcessPhases().Start(NameOf(attributes, DomainOf(domain)));
}

void NVTX_API DomainRangeEnd(nvtxDomainHandle_t /*domain*/, nvtxRangeId_t id) {
  ProcessPhases().End(id);
}

uint32_t CreateDomain(std::string_view name) {
  Domains& d = TheDomains();
  std::lock_guard<Mutex> lock(d.mu);
  const uint32_t used = d.used.load(std::memory_order_relaxed);
  for (uint32_t i = 1; i <= used; ++i) {
    if (d.names[i] == name) return i;
  }
  if (used == kMaxDomains) return kMaxDomains;
  d.names[used + 1].assign(name.substr(0, kMaxPhaseNameBytes / 2));
  d.used.store(used + 1, std::memory_order_release);
  return used + 1;
}

// The handle the program gets: the other tool's, when it made one.
nvtxDomainHandle_t DomainHandle(uint32_t index, nvtxDomainHandle_t theirs) {
  if (theirs == nullptr) return HandleOfDomain(index);
  DomainMap().Put(theirs, index);
  return theirs;
}

nvtxDomainHandle_t NVTX_API DomainCreateA(const char* name) {
  const uint32_t index = CreateDomain(name != nullptr ? name : "(unnamed)");
  const auto next = Next<nvtxDomainHandle_t(NVTX_API*)(const char*)>(kCreateA);
  return DomainHandle(index, next != nullptr ? next(name) : nullptr);
}

nvtxDomainHandle_t NVTX_API DomainCreateW(const wchar_t* name) {
  NameBuffer text;
  text.AppendWide(name);
  const uint32_t index = CreateDomain(text.view());
  const auto next = Next<nvtxDomainHandle_t(NVTX_API*)(const wchar_t*)>(kCreateW);
  return DomainHandle(index, next != nullptr ? next(name) : nullptr);
}

void NVTX_API DomainDestroy(nvtxDomainHandle_t domain) {
  // Its ranges keep their names; the other tool may free what it holds.
  if (const auto next = Next<void(NVTX_API*)(nvtxDomainHandle_t)>(kDestroy)) next(domain);
}

nvtxStringHandle_t StringHandle(uint32_t id, nvtxStringHandle_t theirs) {
  if (theirs == nullptr) return HandleOfName(id);
  StringMap().Put(theirs, id);
  return theirs;
}

nvtxStringHandle_t NVTX_API DomainRegisterStringA(nvtxDomainHandle_t domain, const char* string) {
  NameBuffer name = NameIn(DomainOf(domain));
  name.Append(string != nullptr ? string : "(unnamed)");
  const uint32_t id = ProcessPhases().InternName(name.view());
  const auto next =
      Next<nvtxStringHandle_t(NVTX_API*)(nvtxDomainHandle_t, const char*)>(kRegisterA);
  return StringHandle(id, next != nullptr ? next(domain, string) : nullptr);
}

nvtxStringHandle_t NVTX_API DomainRegisterStringW(nvtxDomainHandle_t domain,
                                                  const wchar_t* string) {
  NameBuffer name = NameIn(DomainOf(domain));
  name.AppendWide(string);
  const uint32_t id = ProcessPhases().InternName(name.view());
  const auto next =
      Next<nvtxStringHandle_t(NVTX_API*)(nvtxDomainHandle_t, const wchar_t*)>(kRegisterW);
  return StringHandle(id, next != nullptr ? next(domain, string) : nullptr);
}

// Where each slot gpuwatch takes is, and gpuwatch's function for it.
struct SlotSpec {
  bool core2;  // NVTX_CB_MODULE_CORE2, else NVTX_CB_MODULE_CORE
  unsigned int id;
  NvtxFunctionPointer ours;
};
template <typename Fn>
NvtxFunctionPointer Generic(Fn fn) {
  return reinterpret_cast<NvtxFunctionPointer>(fn);
}
// The start/end slots: gpuwatch's unless the tool it chains to took them.
const std::array<SlotSpec, 6>& StartEndSpecs() {
  static const std::array<SlotSpec, 6> specs = {{
      {false, NVTX_CBID_CORE_RangeStartA, Generic(&RangeStartA)},
      {false, NVTX_CBID_CORE_RangeStartW, Generic(&RangeStartW)},
      {false, NVTX_CBID_CORE_RangeStartEx, Generic(&RangeStartEx)},
      {false, NVTX_CBID_CORE_RangeEnd, Generic(&RangeEnd)},
      {true, NVTX_CBID_CORE2_DomainRangeStartEx, Generic(&DomainRangeStartEx)},
      {true, NVTX_CBID_CORE2_DomainRangeEnd, Generic(&DomainRangeEnd)},
  }};
  return specs;
}

const std::array<SlotSpec, kNumSlots>& Specs() {
  static const std::array<SlotSpec, kNumSlots> specs = {{
      {false, NVTX_CBID_CORE_RangePushA, Generic(&RangePushA)},
      {false, NVTX_CBID_CORE_RangePushW, Generic(&RangePushW)},
      {false, NVTX_CBID_CORE_RangePushEx, Generic(&RangePushEx)},
      {false, NVTX_CBID_CORE_RangePop, Generic(&RangePop)},
      {true, NVTX_CBID_CORE2_DomainRangePushEx, Generic(&DomainRangePushEx)},
      {true, NVTX_CBID_CORE2_DomainRangePop, Generic(&DomainRangePop)},
      {true, NVTX_CBID_CORE2_DomainCreateA, Generic(&DomainCreateA)},
      {true, NVTX_CBID_CORE2_DomainCreateW, Generic(&DomainCreateW)},
      {true, NVTX_CBID_CORE2_DomainDestroy, Generic(&DomainDestroy)},
      {true, NVTX_CBID_CORE2_DomainRegisterStringA, Generic(&DomainRegisterStringA)},
      {true, NVTX_CBID_CORE2_DomainRegisterStringW, Generic(&DomainRegisterStringW)},
  }};
  return specs;
}

// An NVTX instance's tables of function pointers (CORE2 may be absent).
struct Tables {
  NvtxFunctionTable core = nullptr;
  unsigned int core_size = 0;
  NvtxFunctionTable core2 = nullptr;
  unsigned int core2_size = 0;

  // The slot of `spec` (null when the instance has none).
  NvtxFunctionPointer* At(const SlotSpec& spec) const {
    const NvtxFunctionTable table = spec.core2 ? core2 : core;
    const unsigned int size = spec.core2 ? core2_size : core_size;
    return table != nullptr && spec.id <= size ? table[spec.id] : nullptr;
  }
};

static_assert(std::is_same_v<NvtxGetExportTableFunc_t, NvtxExportTableGetter>);

bool TablesOf(NvtxGetExportTableFunc_t get_export_table, Tables* out) {
  const auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(
      get_export_table != nullptr ? get_export_table(NVTX_ETID_CALLBACKS) : nullptr);
  if (callbacks == nullptr || callbacks->struct_size < sizeof(NvtxExportTableCallbacks) ||
      callbacks->GetModuleFunctionTable == nullptr) {
    return false;
  }
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &out->core, &out->core_size) == 0) {
    return false;
  }
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &out->core2, &out->core2_size) == 0) {
    out->core2 = nullptr;
  }
  return true;
}

// The other tool first, then gpuwatch's functions over its own in the slots
// gpuwatch takes (what it set there is called after them).
bool FillTables(NvtxGetExportTableFunc_t get_export_table) {
  Tables tables;
  if (!TablesOf(get_export_table, &tables)) return false;
  const auto& specs = Specs();
  const auto& start_end = StartEndSpecs();
  std::array<bool, 6> start_end_taken{};  // by the tool gpuwatch chains to
  if (const nvtx_internal::NvtxEntryPoint chained = nvtx_internal::ChainedEntryPoint()) {
    std::array<NvtxFunctionPointer, kNumSlots> before{};
    for (size_t i = 0; i < kNumSlots; ++i) {
      if (NvtxFunctionPointer* slot = tables.At(specs[i])) before[i] = *slot;
    }
    std::array<NvtxFunctionPointer, 6> start_end_before{};
    for (size_t i = 0; i < start_end.size(); ++i) {
      if (NvtxFunctionPointer* slot = tables.At(start_end[i])) start_end_before[i] = *slot;
    }
    if (chained(get_export_table) != 0) {
      for (size_t i = 0; i < start_end.size(); ++i) {
        NvtxFunctionPointer* slot = tables.At(start_end[i]);
        start_end_taken[i] = slot != nullptr && *slot != start_end_before[i] && *slot != nullptr;
      }
      for (size_t i = 0; i < kNumSlots; ++i) {
        NvtxFunctionPointer* slot = tables.At(specs[i]);
        // What the other tool set; NVTX's own initial function otherwise.
        if (slot == nullptr || *slot == before[i] || *slot == nullptr) continue;
        NvtxFunctionPointer none = nullptr;
        g_next[i].compare_exchange_strong(none, *slot, std::memory_order_acq_rel);
      }
      DomainMap().MarkUsed();
      StringMap().MarkUsed();
    }
  }
  for (const SlotSpec& spec : specs) {
    if (NvtxFunctionPointer* slot = tables.At(spec)) *slot = spec.ours;
  }
  for (size_t i = 0; i < start_end.size(); ++i) {
    NvtxFunctionPointer* slot = tables.At(start_end[i]);
    if (slot != nullptr && !start_end_taken[i]) *slot = start_end[i].ours;
  }
  const auto* version =
      static_cast<const NvtxExportTableVersionInfo*>(get_export_table(NVTX_ETID_VERSIONINFO));
  if (version != nullptr && version->struct_size >= sizeof(NvtxExportTableVersionInfo) &&
      version->SetInjectionNvtxVersion != nullptr) {
    version->SetInjectionNvtxVersion(NVTX_VERSION);
  }
  return true;
}

// fork() while another thread creates a domain, registers a string or
// interns a new name must not leave the child a lock held forever: every
// lock of phases is taken around it (the session's handlers take the
// session's, none of these).
void LockForFork() {
  ProcessPhases().LockForFork();
  TheDomains().mu.lock();
  DomainMap().mutex().lock();
  StringMap().mutex().lock();
}
void UnlockAfterFork() {
  StringMap().mutex().unlock();
  DomainMap().mutex().unlock();
  TheDomains().mu.unlock();
  ProcessPhases().UnlockAfterFork();
}

}  // namespace

PhaseTable& ProcessPhases() {
  static auto* table = [] {
    auto* made = new PhaseTable();  // never destroyed: ranges end during exit
    fork_locks::Entry entry;
    entry.lock = [](void*) { LockForFork(); };
    entry.unlock = [](void*) { UnlockAfterFork(); };
    entry.child = entry.unlock;
    entry.tier = fork_locks::Tier::kOuter;
    entry.name = "NVTX phases, domains and strings";
    fork_locks::Add(entry);
    return made;
  }();
  return *table;
}

void PushPhase(const char* name) { PushText(name, 0); }

bool PopPhase() { return ProcessPhases().Pop(&t_phases.stack, 0); }

int InitializeNvtx(NvtxExportTableGetter get_export_table) {
  ProcessPhases();  // made now, not inside a first push
  return FillTables(get_export_table) ? 1 : 0;
}

}  // namespace gpuwatch
