// Another NVTX tool, as Nsight Systems is one: a library NVTX_INJECTION64_PATH
// names, for tests/e2e/phases_test.cc's chaining test. It takes push/pop of
// the default and registered domains, domain creation and registered strings
// with handles of its own, counts what it sees, checks that every handle it
// is given is one it made, and writes its counts at exit to the file
// NVTX_OTHER_TOOL_OUT names. It takes NVTX's memory extension too (heaps and
// regions, with handles of its own; tests/e2e/regions_test.cc), and writes
// a second line of counts when a program used it.
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtMem.h>

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

// The memory extension.
std::atomic<bool> g_mem_used{false};
std::atomic<int> g_heaps{0};
std::atomic<int> g_heap_unregisters{0};
std::atomic<int> g_heap_resets{0};
std::atomic<int> g_regions{0};
std::atomic<int> g_region_unregisters{0};

nvtxMemHeapHandle_t HeapRegister(nvtxDomainHandle_t domain, const nvtxMemHeapDesc_t*) {
  CheckOwn(domain);
  g_mem_used = true;
  ++g_heaps;
  return static_cast<nvtxMemHeapHandle_t>(const_cast<void*>(Make("heap")));
}
void HeapUnregister(nvtxDomainHandle_t domain, nvtxMemHeapHandle_t heap) {
  CheckOwn(domain);
  CheckOwn(heap);
  ++g_heap_unregisters;
}
void HeapReset(nvtxDomainHandle_t domain, nvtxMemHeapHandle_t heap) {
  CheckOwn(domain);
  CheckOwn(heap);
  ++g_heap_resets;
}
void RegionsRegister(nvtxDomainHandle_t domain, const nvtxMemRegionsRegisterBatch_t* b) {
  CheckOwn(domain);
  CheckOwn(b->heap);
  g_regions += static_cast<int>(b->regionCount);
  for (size_t i = 0; b->regionHandleElementsOut != nullptr && i < b->regionCount; ++i) {
    b->regionHandleElementsOut[i] =
        static_cast<nvtxMemRegionHandle_t>(const_cast<void*>(Make("region")));
  }
}
void RegionsUnregister(nvtxDomainHandle_t domain, const nvtxMemRegionsUnregisterBatch_t* b) {
  CheckOwn(domain);
  for (size_t i = 0; i < b->refCount; ++i) {
    if (b->refType == NVTX_MEM_REGION_REF_TYPE_HANDLE) CheckOwn(b->refElements[i].handle);
    ++g_region_unregisters;
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
    if (g_mem_used) {
      std::fprintf(f, "heaps %d heap_unregisters %d heap_resets %d regions %d unregisters %d\n",
                   g_heaps.load(), g_heap_unregisters.load(), g_heap_resets.load(),
                   g_regions.load(), g_region_unregisters.load());
    }
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

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtxExtension(
    nvtxExtModuleInfo_t* info) {
  if (info == nullptr || info->moduleId != NVTX_EXT_MODULEID_MEM || info->segmentsCount == 0) {
    return 0;
  }
  intptr_t* slots = info->segments[0].functionSlots;
  if (info->segments[0].slotCount <= NVTX3EXT_CBID_nvtxMemRegionsUnregister) return 0;
  slots[NVTX3EXT_CBID_nvtxMemHeapRegister] = reinterpret_cast<intptr_t>(&HeapRegister);
  slots[NVTX3EXT_CBID_nvtxMemHeapUnregister] = reinterpret_cast<intptr_t>(&HeapUnregister);
  slots[NVTX3EXT_CBID_nvtxMemHeapReset] = reinterpret_cast<intptr_t>(&HeapReset);
  slots[NVTX3EXT_CBID_nvtxMemRegionsRegister] = reinterpret_cast<intptr_t>(&RegionsRegister);
  slots[NVTX3EXT_CBID_nvtxMemRegionsUnregister] = reinterpret_cast<intptr_t>(&RegionsUnregister);
  return 1;
}
