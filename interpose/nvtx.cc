// NVTX's tool side: the injection entry point fills each NVTX instance's
// function table (one per module compiled with the NVTX headers: the
// program, libtorch, ...) with the functions below, which keep the calling
// thread's stack of open ranges in the process's phase table.
//
// Taken: push/pop of the default domain (ASCII, wide and attribute
// messages) and of registered domains, domain creation and registered
// strings. Everything else NVTX offers stays a no-op (the table entries we
// leave null).
#define NVTX_NO_IMPL
#include "interpose/nvtx.h"

#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <cwchar>
#include <mutex>
#include <type_traits>

#include "libgpuwatch/base/mutex.h"

namespace gpuwatch {

namespace {

// Domains by handle: a handle is its index + 1 (0, a null handle, is the
// default domain). At most kMaxDomains; past that, domains share the last.
constexpr uint32_t kMaxDomains = 255;
struct Domains {
  Mutex mu;
  std::array<std::string, kMaxDomains + 1> names;  // [0]: the default domain
  uint32_t used = 0;
};
Domains& TheDomains() {
  static auto* domains = new Domains();  // never destroyed: ranges end during exit
  return *domains;
}

uint32_t DomainOf(nvtxDomainHandle_t handle) {
  const auto index = reinterpret_cast<uintptr_t>(handle);
  return index <= kMaxDomains ? static_cast<uint32_t>(index) : 0;
}

// The stack of the calling thread, and whether its exit is watched.
struct ThreadPhases {
  PhaseStack stack;
  bool watched = false;
};
thread_local ThreadPhases t_phases;

pthread_key_t g_exit_key;
void OnThreadExit(void* stack) { ProcessPhases().ThreadExit(*static_cast<PhaseStack*>(stack)); }
bool WatchExits() { return pthread_key_create(&g_exit_key, &OnThreadExit) == 0; }

void Push(uint32_t name, uint32_t domain) {
  ThreadPhases& t = t_phases;
  if (!t.watched) {
    // Once per thread: a thread that ends inside a range is counted.
    static const bool watching = WatchExits();
    if (watching) pthread_setspecific(g_exit_key, &t.stack);
    t.stack.thread = static_cast<uint32_t>(gettid());
    t.watched = true;
  }
  ProcessPhases().Push(&t.stack, name, domain);
}

// A range's name: its text, cut to kMaxPhaseNameBytes, prefixed with its
// domain's name ("domain:text") outside the default domain.
class NameBuffer {
 public:
  explicit NameBuffer(uint32_t domain) {
    if (domain == 0) return;
    Domains& d = TheDomains();
    std::lock_guard<Mutex> lock(d.mu);
    Append(d.names[domain]);
    Append(":");
  }
  void Append(std::string_view s) {
    const size_t n = std::min(s.size(), sizeof(text_) - 1 - size_);
    std::memcpy(text_ + size_, s.data(), n);
    size_ += n;
  }
  void AppendWide(const wchar_t* s) {
    // UTF-8, enough for names; what does not fit is cut.
    for (; s != nullptr && *s != 0 && size_ + 4 < sizeof(text_); ++s) {
      const auto c = static_cast<uint32_t>(static_cast<std::make_unsigned_t<wchar_t>>(*s));
      if (c < 0x80) {
        text_[size_++] = static_cast<char>(c);
      } else if (c < 0x800) {
        text_[size_++] = static_cast<char>(0xc0 | c >> 6);
        text_[size_++] = static_cast<char>(0x80 | (c & 0x3f));
      } else if (c < 0x10000) {
        text_[size_++] = static_cast<char>(0xe0 | c >> 12);
        text_[size_++] = static_cast<char>(0x80 | ((c >> 6) & 0x3f));
        text_[size_++] = static_cast<char>(0x80 | (c & 0x3f));
      } else {
        text_[size_++] = static_cast<char>(0xf0 | ((c >> 18) & 0x07));
        text_[size_++] = static_cast<char>(0x80 | ((c >> 12) & 0x3f));
        text_[size_++] = static_cast<char>(0x80 | ((c >> 6) & 0x3f));
        text_[size_++] = static_cast<char>(0x80 | (c & 0x3f));
      }
    }
  }
  std::string_view view() const { return {text_, size_}; }

 private:
  char text_[kMaxPhaseNameBytes + 1];  // NOLINT: filled up to size_, never read past it
  size_t size_ = 0;
};

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

uint32_t NameOf(const nvtxEventAttributes_t* a, uint32_t domain) {
  const bool valid = a != nullptr && a->size >= NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  if (valid && a->messageType == NVTX_MESSAGE_TYPE_REGISTERED) {
    // Interned, with its domain, when it was registered: no text to copy.
    const auto id = reinterpret_cast<uintptr_t>(a->message.registered);
    if (id != 0 && id <= kMaxPhaseNames) return static_cast<uint32_t>(id);
  }
  NameBuffer name(domain);
  const bool ascii =
      valid && a->messageType == NVTX_MESSAGE_TYPE_ASCII && a->message.ascii != nullptr;
  const bool wide =
      valid && a->messageType == NVTX_MESSAGE_TYPE_UNICODE && a->message.unicode != nullptr;
  if (ascii) {
    name.Append(a->message.ascii);
  } else if (wide) {
    name.AppendWide(a->message.unicode);
  } else {
    name.Append("(unnamed)");  // no text, a bad handle or an unknown message type
  }
  return ProcessPhases().InternName(name.view());
}

int Depth() { return t_phases.stack.depth + t_phases.stack.overflow; }

// The NVTX functions. A push returns the depth of the range it opened (0:
// outermost); a pop the depth of the range it closed, or a negative value
// when none was open.
int NVTX_API RangePushA(const char* message) {
  NameBuffer name(0);
  name.Append(message != nullptr ? message : "(unnamed)");
  Push(ProcessPhases().InternName(name.view()), 0);
  return Depth() - 1;
}

int NVTX_API RangePushW(const wchar_t* message) {
  NameBuffer name(0);
  name.AppendWide(message);
  Push(ProcessPhases().InternName(name.view()), 0);
  return Depth() - 1;
}

int NVTX_API RangePushEx(const nvtxEventAttributes_t* attributes) {
  Push(NameOf(attributes, 0), 0);
  return Depth() - 1;
}

int NVTX_API RangePop() { return ProcessPhases().Pop(&t_phases.stack, 0) ? Depth() : -1; }

int NVTX_API DomainRangePushEx(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attributes) {
  const uint32_t d = DomainOf(domain);
  Push(NameOf(attributes, d), d);
  return Depth() - 1;
}

int NVTX_API DomainRangePop(nvtxDomainHandle_t domain) {
  return ProcessPhases().Pop(&t_phases.stack, DomainOf(domain)) ? Depth() : -1;
}

nvtxDomainHandle_t CreateDomain(std::string_view name) {
  Domains& d = TheDomains();
  std::lock_guard<Mutex> lock(d.mu);
  for (uint32_t i = 1; i <= d.used; ++i) {
    if (d.names[i] == name) return HandleOfDomain(i);
  }
  if (d.used == kMaxDomains) return HandleOfDomain(kMaxDomains);
  d.names[++d.used].assign(name.substr(0, kMaxPhaseNameBytes / 2));
  return HandleOfDomain(d.used);
}

nvtxDomainHandle_t NVTX_API DomainCreateA(const char* name) {
  return CreateDomain(name != nullptr ? name : "(unnamed)");
}

nvtxDomainHandle_t NVTX_API DomainCreateW(const wchar_t* name) {
  NameBuffer text(0);
  text.AppendWide(name);
  return CreateDomain(text.view());
}

void NVTX_API DomainDestroy(nvtxDomainHandle_t /*domain*/) {}  // its ranges keep their names

nvtxStringHandle_t NVTX_API DomainRegisterStringA(nvtxDomainHandle_t domain, const char* string) {
  NameBuffer name(DomainOf(domain));
  name.Append(string != nullptr ? string : "(unnamed)");
  return HandleOfName(ProcessPhases().InternName(name.view()));
}

nvtxStringHandle_t NVTX_API DomainRegisterStringW(nvtxDomainHandle_t domain,
                                                  const wchar_t* string) {
  NameBuffer name(DomainOf(domain));
  name.AppendWide(string);
  return HandleOfName(ProcessPhases().InternName(name.view()));
}

// Sets `fn` as entry `id` of `table` (of `size` entries after the unused 0).
template <typename Fn>
void Set(NvtxFunctionTable table, unsigned int size, unsigned int id, Fn fn) {
  if (table != nullptr && id <= size && table[id] != nullptr) {
    *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
  }
}

static_assert(std::is_same_v<NvtxGetExportTableFunc_t, NvtxExportTableGetter>);

bool FillTables(NvtxGetExportTableFunc_t get_export_table) {
  const auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(
      get_export_table != nullptr ? get_export_table(NVTX_ETID_CALLBACKS) : nullptr);
  if (callbacks == nullptr || callbacks->struct_size < sizeof(NvtxExportTableCallbacks) ||
      callbacks->GetModuleFunctionTable == nullptr) {
    return false;
  }
  NvtxFunctionTable core = nullptr;
  unsigned int core_size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &core_size) == 0) {
    return false;
  }
  Set(core, core_size, NVTX_CBID_CORE_RangePushA, &RangePushA);
  Set(core, core_size, NVTX_CBID_CORE_RangePushW, &RangePushW);
  Set(core, core_size, NVTX_CBID_CORE_RangePushEx, &RangePushEx);
  Set(core, core_size, NVTX_CBID_CORE_RangePop, &RangePop);
  NvtxFunctionTable core2 = nullptr;
  unsigned int core2_size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &core2_size) != 0) {
    Set(core2, core2_size, NVTX_CBID_CORE2_DomainRangePushEx, &DomainRangePushEx);
    Set(core2, core2_size, NVTX_CBID_CORE2_DomainRangePop, &DomainRangePop);
    Set(core2, core2_size, NVTX_CBID_CORE2_DomainCreateA, &DomainCreateA);
    Set(core2, core2_size, NVTX_CBID_CORE2_DomainCreateW, &DomainCreateW);
    Set(core2, core2_size, NVTX_CBID_CORE2_DomainDestroy, &DomainDestroy);
    Set(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringA, &DomainRegisterStringA);
    Set(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringW, &DomainRegisterStringW);
  }
  const auto* version =
      static_cast<const NvtxExportTableVersionInfo*>(get_export_table(NVTX_ETID_VERSIONINFO));
  if (version != nullptr && version->struct_size >= sizeof(NvtxExportTableVersionInfo) &&
      version->SetInjectionNvtxVersion != nullptr) {
    version->SetInjectionNvtxVersion(NVTX_VERSION);
  }
  return true;
}

std::string& OtherNvtxTool() {
  static auto* path = new std::string();
  return *path;
}

}  // namespace

PhaseTable& ProcessPhases() {
  static auto* table = new PhaseTable();  // never destroyed: ranges end during exit
  return *table;
}

uint32_t CurrentPhase() { return t_phases.stack.current(); }

void PushPhase(std::string_view name) {
  NameBuffer text(0);
  text.Append(name);
  Push(ProcessPhases().InternName(text.view()), 0);
}

bool PopPhase() { return ProcessPhases().Pop(&t_phases.stack, 0); }

void PointNvtxAtSelf(const std::string& self) {
  const char* current = std::getenv("NVTX_INJECTION64_PATH");  // NOLINT(concurrency-mt-unsafe)
  if (current == nullptr || *current == '\0') {
    if (!self.empty()) setenv("NVTX_INJECTION64_PATH", self.c_str(), 1);  // NOLINT
    return;
  }
  if (self != current) OtherNvtxTool() = current;
}

int InitializeNvtx(NvtxExportTableGetter get_export_table) {
  ProcessPhases();  // made now, not inside a first push
  return FillTables(get_export_table) ? 1 : 0;
}

std::string NvtxNotice() {
  const std::string& other = OtherNvtxTool();
  if (other.empty()) return "";
  return "NVTX_INJECTION64_PATH names " + other +
         ": NVTX ranges go to that tool, and this report has no phases";
}

}  // namespace gpuwatch
