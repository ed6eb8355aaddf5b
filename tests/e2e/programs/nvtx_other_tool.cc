// Another NVTX tool, as Nsight Systems is one: a library NVTX_INJECTION64_PATH
// names, for tests/e2e/phases_test.cc's chaining test. It takes push/pop of
// the default and registered domains, domain creation and registered strings
// with handles of its own, counts what it sees, checks that every handle it
// is given is one it made, and writes its counts at exit to the file
// NVTX_OTHER_TOOL_OUT names.
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>

namespace {

struct Handle {
  std::string name;
};

std::mutex g_mu;
std::set<const void*> g_handles;  // every handle made here
std::atomic<int> g_pushes{0};
std::atomic<int> g_pops{0};
std::atomic<int> g_domain_pushes{0};
std::atomic<int> g_domain_pops{0};
std::atomic<int> g_foreign{0};  // handles this tool did not make

const void* Make(const char* name) {
  auto* h = new Handle{name != nullptr ? name : ""};
  std::lock_guard<std::mutex> lock(g_mu);
  g_handles.insert(h);
  return h;
}

void CheckOwn(const void* handle) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (handle != nullptr && g_handles.count(handle) == 0) ++g_foreign;
}

int PushA(const char*) { return ++g_pushes; }
int Pop() { return ++g_pops; }
int DomainPushEx(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* a) {
  CheckOwn(domain);
  if (a != nullptr && a->messageType == NVTX_MESSAGE_TYPE_REGISTERED)
    CheckOwn(a->message.registered);
  return ++g_domain_pushes;
}
int DomainPop(nvtxDomainHandle_t domain) {
  CheckOwn(domain);
  return ++g_domain_pops;
}
nvtxDomainHandle_t CreateA(const char* name) {
  return static_cast<nvtxDomainHandle_t>(const_cast<void*>(Make(name)));
}
nvtxStringHandle_t RegisterA(nvtxDomainHandle_t domain, const char* text) {
  CheckOwn(domain);
  return static_cast<nvtxStringHandle_t>(const_cast<void*>(Make(text)));
}

template <typename Fn>
void Set(NvtxFunctionTable table, unsigned int size, unsigned int id, Fn fn) {
  if (table != nullptr && id <= size && table[id] != nullptr) {
    *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
  }
}

struct Report {
  ~Report() {
    const char* path = std::getenv("NVTX_OTHER_TOOL_OUT");
    if (path == nullptr) return;
    FILE* f = std::fopen(path, "w");
    if (f == nullptr) return;
    std::fprintf(f, "pushes %d pops %d domain_pushes %d domain_pops %d handles %zu foreign %d\n",
                 g_pushes.load(), g_pops.load(), g_domain_pushes.load(), g_domain_pops.load(),
                 g_handles.size(), g_foreign.load());
    std::fclose(f);
  }
} g_report;

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    NvtxGetExportTableFunc_t get_export_table) {
  const auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr) return 0;
  NvtxFunctionTable core = nullptr;
  unsigned int core_size = 0;
  NvtxFunctionTable core2 = nullptr;
  unsigned int core2_size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &core_size) == 0 ||
      callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &core2_size) == 0) {
    return 0;
  }
  Set(core, core_size, NVTX_CBID_CORE_RangePushA, &PushA);
  Set(core, core_size, NVTX_CBID_CORE_RangePop, &Pop);
  Set(core2, core2_size, NVTX_CBID_CORE2_DomainRangePushEx, &DomainPushEx);
  Set(core2, core2_size, NVTX_CBID_CORE2_DomainRangePop, &DomainPop);
  Set(core2, core2_size, NVTX_CBID_CORE2_DomainCreateA, &CreateA);
  Set(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringA, &RegisterA);
  return 1;
}
