// The CUPTI layer driven with hand-built callback data: the registry of
// callback ids (complete against CUPTI's own headers, enabled exactly as it
// is dispatched), the parse step of each kind of call, and the switchboard's
// ordering rules (frees at ENTER, graph nodes, nested driver calls).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "interpose/callbacks/callbacks.h"
#include "interpose/callbacks/current_session.h"
#include "interpose/callbacks/guard.h"
#include "interpose/calls/calls.h"
#include "interpose/cupti/cupti_loader.h"
#include "interpose/nvtx/nvtx.h"
#include "libgpuwatch/base/mutex.h"
#include "libgpuwatch/session/session.h"
#include "tests/unit/fork_check.h"

namespace gpuwatch {
namespace {

// --- The registry against CUPTI's headers --------------------------------------

// name -> id of every enumerator `PREFIX<name> = <id>` in a CUPTI header.
std::map<std::string, uint32_t> HeaderIds(const std::string& file, const std::string& prefix) {
  std::ifstream in(std::string(GPUWATCH_CUPTI_INCLUDE_DIR) + "/" + file);
  EXPECT_TRUE(in.good()) << file;
  const std::regex line("^\\s*" + prefix + "([A-Za-z0-9_]+)\\s*=\\s*([0-9]+)");
  std::map<std::string, uint32_t> ids;
  std::string text;
  std::smatch m;
  while (std::getline(in, text)) {
    if (std::regex_search(text, m, line) && m[1] != "SIZE" && m[1] != "INVALID") {
      ids[m[1]] = static_cast<uint32_t>(std::stoul(m[2]));
    }
  }
  return ids;
}

std::set<std::string> Registered(CUpti_CallbackDomain domain) {
  std::set<std::string> names;
  for (const CallbackSpec& s : CallbackRegistry()) {
    if (s.domain == domain) names.insert(s.name);
  }
  return names;
}

TEST(Registry, NamesAndIdsAgreeWithCuptisHeadersAndNoIdIsListedTwice) {
  const auto runtime = HeaderIds("cupti_runtime_cbid.h", "CUPTI_RUNTIME_TRACE_CBID_");
  const auto driver = HeaderIds("cupti_driver_cbid.h", "CUPTI_DRIVER_TRACE_CBID_");
  ASSERT_GT(runtime.size(), 400u);
  ASSERT_GT(driver.size(), 700u);
  std::set<std::pair<int, uint32_t>> seen;
  for (const CallbackSpec& s : CallbackRegistry()) {
    const auto& ids = s.domain == CUPTI_CB_DOMAIN_RUNTIME_API ? runtime : driver;
    const auto it = ids.find(s.name);
    ASSERT_NE(it, ids.end()) << s.name;
    EXPECT_EQ(it->second, s.cbid) << s.name;
    EXPECT_TRUE(seen.emplace(s.domain, s.cbid).second) << s.name << " listed twice";
    EXPECT_EQ(FindSpec(s.domain, s.cbid), &s) << s.name;
  }
}

// A name whose API has a newer version in the registry (cuMemAlloc beside
// cuMemAlloc_v2, cudaGraphAddNode_v12020 beside _v12030): CUDA 13 issues the
// newer one only.
bool Superseded(const std::string& name, const std::set<std::string>& registered) {
  static const std::regex runtime("^(.*)_v([0-9]+)$");
  std::smatch m;
  if (std::regex_match(name, m, runtime) && name.rfind("cuda", 0) == 0) {
    for (const std::string& r : registered) {
      std::smatch n;
      if (std::regex_match(r, n, runtime) && n[1] == m[1] && std::stoi(n[2]) > std::stoi(m[2])) {
        return true;
      }
    }
    return false;
  }
  // Driver: cuFoo or cuFoo_ptds beside cuFoo_v2 or cuFoo_v2_ptds.
  static const std::regex suffix("^(cu[A-Za-z0-9]+?)(_v[0-9])?(_ptds|_ptsz)?$");
  if (!std::regex_match(name, m, suffix) || m[2].matched) return false;
  return registered.count(m[1].str() + "_v2" + m[3].str()) != 0 ||
         registered.count(m[1].str() + "_v2") != 0;
}

// Every API of the families gpuwatch follows (allocations, frees, copies,
// kernel and graph launches, graph memory and memcpy nodes, synchronisation)
// is in the registry, in every variant CUPTI has an id for. A handled API
// whose `_ptsz`/`_ptds` variant (or plain form) is missing fails here.
TEST(Registry, EveryVariantOfEveryFollowedApiIsSubscribed) {
  struct Family {
    const char* header;
    const char* prefix;
    CUpti_CallbackDomain domain;
    const char* pattern;
  };
  const Family families[] = {
      {"cupti_runtime_cbid.h", "CUPTI_RUNTIME_TRACE_CBID_", CUPTI_CB_DOMAIN_RUNTIME_API,
       "^(cudaMalloc|cudaFree|cudaMemcpy|cudaHostAlloc|cudaHostRegister|cudaHostUnregister|"
       "cudaLaunchKernel|cudaLaunchCooperativeKernel|__cudaLaunchKernel|cudaGraphLaunch|"
       "cudaGraphAddMemcpyNode|cudaGraphAddMemAllocNode|cudaGraphAddMemFreeNode|"
       "cudaGraphAddNode|cudaGraphInstantiate|cudaDeviceSynchronize|cudaStreamSynchronize|"
       "cudaEventSynchronize|cudaThreadSynchronize|cudaIpcOpenMemHandle|cudaIpcCloseMemHandle)"},
      {"cupti_driver_cbid.h", "CUPTI_DRIVER_TRACE_CBID_", CUPTI_CB_DOMAIN_DRIVER_API,
       "^(cuMemAlloc|cuMemFree|cuMemcpy|cuMemHostAlloc|cuMemHostRegister|cuMemHostUnregister|"
       "cuMemCreate|cuMemRelease|cuMemMap_|cuMemMap$|cuMemUnmap|cuMemImportFromShareableHandle|"
       "cuMemRetainAllocationHandle|"
       "cuArrayCreate|cuArray3DCreate|"
       "cuArrayDestroy|cuMipmappedArrayCreate|cuMipmappedArrayDestroy|cuLaunchKernel|"
       "cuLaunchCooperativeKernel|cuGraphLaunch|cuGraphAddMemcpyNode|cuGraphAddMemAllocNode|"
       "cuGraphAddMemFreeNode|cuGraphAddNode|cuGraphInstantiate|cuCtxSynchronize|"
       "cuStreamSynchronize|cuEventSynchronize|cuIpcOpenMemHandle|cuIpcCloseMemHandle)"},
  };
  // Ids CUDA 13 never issues: entry points removed from the toolkit, and ids
  // without an entry point or params struct of their own.
  const std::set<std::string> never_issued = {
      "cudaLaunchCooperativeKernelMultiDevice_v9000",  // removed in CUDA 12
      "cuLaunchCooperativeKernelMultiDevice",          // removed in CUDA 12
      "cuMemcpy_v2",                                   // no such entry point
      "cuMemHostAlloc_v2",                             // no such entry point
      "cuGraphInstantiate",                            // the ABI name is cuGraphInstantiate_v2
  };
  for (const Family& f : families) {
    const std::set<std::string> registered = Registered(f.domain);
    const std::regex pattern(f.pattern);
    for (const auto& [name, id] : HeaderIds(f.header, f.prefix)) {
      if (!std::regex_search(name, pattern)) continue;
      if (never_issued.count(name) != 0 || Superseded(name, registered)) continue;
      EXPECT_EQ(registered.count(name), 1u) << name << " (id " << id << ") is not subscribed";
    }
  }
}

// Each way the host waits for a whole device is one: cudaDeviceSynchronize
// nests cuCtxSynchronize_v2 on NVIDIA's driver (CUDA 13), cuCtxSynchronize
// before it, and a program may call either itself.
TEST(Registry, EveryDeviceSynchronisationIsADeviceSync) {
  const std::pair<CUpti_CallbackDomain, CUpti_CallbackId> ids[] = {
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaThreadSynchronize_v3020},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2},
  };
  for (const auto& [domain, cbid] : ids) {
    SCOPED_TRACE(cbid);
    const CallbackSpec* spec = FindSpec(domain, cbid);
    ASSERT_NE(spec, nullptr);
    EXPECT_EQ(spec->role, Role::kSync);
    EXPECT_EQ(spec->sync, SyncKind::kDevice);
    EXPECT_EQ(spec->parse, nullptr);  // cuCtxSynchronize_v2's context is not read
  }
}

// The launch path reads a launch's stream in place (LaunchStream, from the
// entry's StreamAt), not through its reader: both read the same, for every
// launch of the registry. Each word of the params points at a row of its
// own, whose words all differ: a wrong offset, or a config read as the
// stream, reads another value.
TEST(Registry, ALaunchsStreamIsReadInPlaceAsItsReaderReadsIt) {
  constexpr size_t kWords = 32;
  std::vector<std::vector<uintptr_t>> rows(kWords, std::vector<uintptr_t>(kWords));
  std::vector<const void*> params(kWords);
  for (size_t i = 0; i < kWords; ++i) {
    params[i] = rows[i].data();
    for (size_t j = 0; j < kWords; ++j) rows[i][j] = 0x10000 * (i + 1) + j;
  }
  CUpti_CallbackData d{};
  d.functionParams = params.data();
  int read = 0;
  for (const CallbackSpec& spec : CallbackRegistry()) {
    if (spec.role != Role::kLaunch) continue;
    SCOPED_TRACE(spec.name);
    ParsedCall parsed;
    if (spec.parse == nullptr) {  // __cudaLaunchKernel: no params struct
      EXPECT_EQ(spec.stream_at.offset, StreamAt::kNone);
      continue;
    }
    ASSERT_TRUE(ParseCall(spec, &d, false, &parsed));
    ASSERT_NE(parsed.stream, nullptr);
    EXPECT_EQ(LaunchStream(spec, &d), parsed.stream);
    ++read;
  }
  EXPECT_EQ(read, 12);  // cudaLaunchKernel(ExC), cooperative, cuLaunchKernel(Ex), ..., _ptsz
  d.functionParams = nullptr;
  EXPECT_EQ(LaunchStream(
                *FindSpec(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel), &d),
            nullptr);
}

// What EnableCallbacks enables, recorded by a fake cuptiEnableCallback.
std::set<std::pair<int, uint32_t>>* g_enabled = nullptr;
CUptiResult CUPTIAPI RecordEnable(uint32_t enable, CUpti_SubscriberHandle, CUpti_CallbackDomain d,
                                  CUpti_CallbackId cbid) {
  if (enable != 0) g_enabled->emplace(d, cbid);
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI ResultString(CUptiResult, const char** text) {
  *text = "test";
  return CUPTI_SUCCESS;
}

TEST(Registry, EnableCallbacksEnablesExactlyWhatDispatchHandles) {
  std::set<std::pair<int, uint32_t>> enabled;
  g_enabled = &enabled;
  CuptiApi api;
  api.EnableCallback = &RecordEnable;
  api.GetResultString = &ResultString;
  std::string error;
  ASSERT_TRUE(EnableCallbacks(api, nullptr, &error)) << error;
  g_enabled = nullptr;
  for (uint32_t cbid = 0; cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE; ++cbid) {
    EXPECT_EQ(enabled.count({CUPTI_CB_DOMAIN_RUNTIME_API, cbid}) == 1,
              FindSpec(CUPTI_CB_DOMAIN_RUNTIME_API, cbid) != nullptr)
        << "runtime id " << cbid;
  }
  for (uint32_t cbid = 0; cbid < CUPTI_DRIVER_TRACE_CBID_SIZE; ++cbid) {
    EXPECT_EQ(enabled.count({CUPTI_CB_DOMAIN_DRIVER_API, cbid}) == 1,
              FindSpec(CUPTI_CB_DOMAIN_DRIVER_API, cbid) != nullptr)
        << "driver id " << cbid;
  }
  for (const CUpti_CallbackId cbid : ResourceCallbacks()) {
    EXPECT_EQ(enabled.count({CUPTI_CB_DOMAIN_RESOURCE, cbid}), 1u) << "resource id " << cbid;
  }
  EXPECT_EQ(enabled.size(), CallbackRegistry().size() + ResourceCallbacks().size());
}

// --- Parsing hand-built params -------------------------------------------------

template <typename P>
CUpti_CallbackData Data(const P& params, CUpti_ApiCallbackSite site = CUPTI_API_ENTER) {
  CUpti_CallbackData d{};
  d.callbackSite = site;
  d.functionParams = &params;
  return d;
}

ParsedCall Parse(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData& d,
                 bool succeeded) {
  const CallbackSpec* spec = FindSpec(domain, cbid);
  EXPECT_NE(spec, nullptr) << cbid;
  ParsedCall call;
  if (spec != nullptr) {
    EXPECT_TRUE(ParseCall(*spec, &d, succeeded, &call));
  }
  return call;
}
ParsedCall Runtime(CUpti_CallbackId cbid, const CUpti_CallbackData& d, bool succeeded = true) {
  return Parse(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, d, succeeded);
}
ParsedCall Driver(CUpti_CallbackId cbid, const CUpti_CallbackData& d, bool succeeded = true) {
  return Parse(CUPTI_CB_DOMAIN_DRIVER_API, cbid, d, succeeded);
}

TEST(Parse, AllocationsReadTheirOutputOnlyWhenTheCallSucceeded) {
  void* out = reinterpret_cast<void*>(0xdead0000);
  cudaMalloc_v3020_params p{&out, 4096};
  const ParsedCall failed = Runtime(CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, Data(p), false);
  EXPECT_EQ(failed.role, Role::kAlloc);
  EXPECT_EQ(failed.size, 4096u);
  EXPECT_EQ(failed.address, 0u);
  const ParsedCall ok = Runtime(CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, Data(p), true);
  EXPECT_EQ(ok.address, 0xdead0000u);
  EXPECT_EQ(ok.kind, MemKind::kDevice);
}

TEST(Parse, ArraysAreSizedFromTheirFormatAndExtent) {
  cudaArray_t array = reinterpret_cast<cudaArray_t>(0xa0);
  const cudaChannelFormatDesc float4{32, 32, 32, 32, cudaChannelFormatKindFloat};
  cudaMalloc3DArray_v3020_params p{&array, &float4, cudaExtent{10, 20, 30}, 0};
  const ParsedCall c = Runtime(CUPTI_RUNTIME_TRACE_CBID_cudaMalloc3DArray_v3020, Data(p));
  EXPECT_EQ(c.kind, MemKind::kArray);
  EXPECT_EQ(c.address, 0xa0u);
  EXPECT_EQ(c.array_element_bytes, 16u);
  EXPECT_EQ(c.size, 16u * 10 * 20 * 30);

  const cudaChannelFormatDesc uchar{8, 0, 0, 0, cudaChannelFormatKindUnsigned};
  cudaMallocArray_v3020_params flat{&array, &uchar, 100, 0, 0};  // 1D: height 0 means 1
  EXPECT_EQ(Runtime(CUPTI_RUNTIME_TRACE_CBID_cudaMallocArray_v3020, Data(flat)).size, 100u);

  CUarray handle = reinterpret_cast<CUarray>(0xb0);
  CUDA_ARRAY_DESCRIPTOR desc{64, 64, CU_AD_FORMAT_HALF, 2};
  cuArrayCreate_v2_params d{&handle, &desc};
  const ParsedCall half2 = Driver(CUPTI_DRIVER_TRACE_CBID_cuArrayCreate_v2, Data(d));
  EXPECT_EQ(half2.size, 4u * 64 * 64);
  EXPECT_EQ(half2.address, 0xb0u);

  // A mipmap: 8x8, 4x4, 2x2, 1x1 elements of 4 bytes.
  cudaMipmappedArray_t mip = reinterpret_cast<cudaMipmappedArray_t>(0xc0);
  const cudaChannelFormatDesc f{32, 0, 0, 0, cudaChannelFormatKindFloat};
  cudaMallocMipmappedArray_v5000_params m{&mip, &f, cudaExtent{8, 8, 0}, 4, 0};
  EXPECT_EQ(Runtime(CUPTI_RUNTIME_TRACE_CBID_cudaMallocMipmappedArray_v5000, Data(m)).size,
            4u * (64 + 16 + 4 + 1));
}

TEST(Parse, CopiesReadBytesDirectionAndBothSides) {
  int host = 0;
  void* device = reinterpret_cast<void*>(0x7000);
  cudaMemcpy_v3020_params sync{device, &host, 123, cudaMemcpyHostToDevice};
  const ParsedCall c = Runtime(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, Data(sync));
  EXPECT_EQ(c.role, Role::kCopy);
  EXPECT_EQ(c.copy.bytes, 123u);
  EXPECT_EQ(c.copy.kind, CopyKind::kHostToDevice);
  EXPECT_FALSE(c.copy.async);
  EXPECT_EQ(c.src, reinterpret_cast<uintptr_t>(&host));
  EXPECT_EQ(c.dst, 0x7000u);

  cudaMemcpyAsync_ptsz_v7000_params async{device, &host, 8, cudaMemcpyDefault, nullptr};
  const ParsedCall a = Runtime(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000, Data(async));
  EXPECT_TRUE(a.copy.async);
  EXPECT_EQ(a.copy.kind, CopyKind::kUnknown);  // cudaMemcpyDefault: resolved later

  cudaArray_t array = reinterpret_cast<cudaArray_t>(0xa1);
  cudaMemcpy2DToArray_v3020_params to_array{array, 0, 0, &host, 256, 64, 3, cudaMemcpyHostToDevice};
  const ParsedCall t = Runtime(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArray_v3020, Data(to_array));
  EXPECT_EQ(t.copy.bytes, 64u * 3);
  EXPECT_EQ(t.copy.kind, CopyKind::kHostToDevice);

  // cudaMemcpy3D with an array: the width counts the array's elements.
  RememberArray(0xa2, 8);
  cudaMemcpy3DParms parms{};
  parms.srcArray = reinterpret_cast<cudaArray_t>(0xa2);
  parms.dstPtr = cudaPitchedPtr{&host, 1024, 16, 4};
  parms.extent = cudaExtent{16, 4, 2};
  parms.kind = cudaMemcpyDeviceToHost;
  cudaMemcpy3D_v3020_params three{&parms};
  const ParsedCall t3 = Runtime(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3D_v3020, Data(three));
  EXPECT_EQ(t3.copy.bytes, 8u * 16 * 4 * 2);
  EXPECT_EQ(t3.copy.kind, CopyKind::kDeviceToHost);
  ForgetArray(0xa2);

  CUDA_MEMCPY2D m2{};
  m2.srcMemoryType = CU_MEMORYTYPE_HOST;
  m2.srcHost = &host;
  m2.dstMemoryType = CU_MEMORYTYPE_ARRAY;
  m2.WidthInBytes = 40;
  m2.Height = 5;
  cuMemcpy2DAsync_v2_ptsz_params d2{&m2, nullptr};
  const ParsedCall drv = Driver(CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DAsync_v2_ptsz, Data(d2));
  EXPECT_EQ(drv.copy.bytes, 200u);
  EXPECT_EQ(drv.copy.kind, CopyKind::kHostToDevice);
  EXPECT_TRUE(drv.copy.async);
  EXPECT_EQ(drv.src, reinterpret_cast<uintptr_t>(&host));

  CUDA_MEMCPY3D m3{};
  m3.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  m3.srcDevice = 0x9000;
  m3.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
  m3.WidthInBytes = 10;
  m3.Height = 2;
  m3.Depth = 3;
  cuMemcpy3D_v2_params d3{&m3};
  const ParsedCall unified = Driver(CUPTI_DRIVER_TRACE_CBID_cuMemcpy3D_v2, Data(d3));
  EXPECT_EQ(unified.copy.bytes, 60u);
  EXPECT_EQ(unified.copy.kind, CopyKind::kUnknown);  // unified: resolved later
  EXPECT_EQ(unified.src, 0x9000u);

  cuMemcpyAtoH_v2_params atoh{&host, nullptr, 0, 77};
  const ParsedCall from_array = Driver(CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoH_v2, Data(atoh));
  EXPECT_EQ(from_array.copy.kind, CopyKind::kDeviceToHost);
  EXPECT_EQ(from_array.dst, reinterpret_cast<uintptr_t>(&host));

  const size_t sizes[3] = {10, 20, 30};
  cudaMemcpyBatchAsync_v13000_params batch{};
  batch.sizes = sizes;
  batch.count = 3;
  const ParsedCall b = Runtime(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_v13000, Data(batch));
  EXPECT_EQ(b.copy.bytes, 60u);
  EXPECT_EQ(b.copy.records, 3u);
}

TEST(Parse, VmmHandlesKnowTheirLocation) {
  CUmemGenericAllocationHandle handle = 42;
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 1;
  cuMemCreate_params create{&handle, 2 << 20, &prop, 0};
  const ParsedCall c = Driver(CUPTI_DRIVER_TRACE_CBID_cuMemCreate, Data(create));
  EXPECT_EQ(c.role, Role::kVmmCreate);
  EXPECT_EQ(c.device, 1);
  EXPECT_EQ(c.handle, 42u);
  cuMemMap_params map{0x200000, 2 << 20, 0, 42, 0};
  const ParsedCall m = Driver(CUPTI_DRIVER_TRACE_CBID_cuMemMap, Data(map));
  EXPECT_EQ(m.role, Role::kVmmMap);
  EXPECT_EQ(m.handle, 42u);
  EXPECT_EQ(m.address, 0x200000u);
  cuMemImportFromShareableHandle_params import{&handle, nullptr, CU_MEM_HANDLE_TYPE_NONE};
  const ParsedCall i = Driver(CUPTI_DRIVER_TRACE_CBID_cuMemImportFromShareableHandle, Data(import));
  EXPECT_EQ(i.role, Role::kVmmImport);
  EXPECT_EQ(i.handle, 42u);
  cuMemRetainAllocationHandle_params retain{&handle, reinterpret_cast<void*>(0x201000)};
  const ParsedCall r = Driver(CUPTI_DRIVER_TRACE_CBID_cuMemRetainAllocationHandle, Data(retain));
  EXPECT_EQ(r.role, Role::kVmmRetain);
  EXPECT_EQ(r.handle, 42u);
  EXPECT_EQ(r.address, 0x201000u);
}

// CUDA IPC: the open says the address it mapped at a successful EXIT (not
// its size), the close the address it names.
TEST(Parse, IpcOpensAndCloses) {
  CUdeviceptr mapped = 0x7f0000200000;
  const cuIpcOpenMemHandle_v2_params open{&mapped, CUipcMemHandle{}, 1};
  ParsedCall c = Driver(CUPTI_DRIVER_TRACE_CBID_cuIpcOpenMemHandle_v2, Data(open), false);
  EXPECT_EQ(c.role, Role::kIpcOpen);
  EXPECT_EQ(c.kind, MemKind::kIpcImported);
  EXPECT_EQ(c.address, 0u) << "before a successful EXIT";
  c = Driver(CUPTI_DRIVER_TRACE_CBID_cuIpcOpenMemHandle_v2, Data(open));
  EXPECT_EQ(c.address, 0x7f0000200000u);
  void* opened = reinterpret_cast<void*>(0x7f0000400000);
  const cudaIpcOpenMemHandle_v4010_params rt_open{&opened, cudaIpcMemHandle_t{}, 1};
  c = Runtime(CUPTI_RUNTIME_TRACE_CBID_cudaIpcOpenMemHandle_v4010, Data(rt_open));
  EXPECT_EQ(c.role, Role::kIpcOpen);
  EXPECT_EQ(c.address, 0x7f0000400000u);
  const cuIpcCloseMemHandle_params close{0x7f0000200000};
  c = Driver(CUPTI_DRIVER_TRACE_CBID_cuIpcCloseMemHandle, Data(close));
  EXPECT_EQ(c.role, Role::kIpcClose);
  EXPECT_EQ(c.address, 0x7f0000200000u);
  const cudaIpcCloseMemHandle_v4010_params rt_close{opened};
  c = Runtime(CUPTI_RUNTIME_TRACE_CBID_cudaIpcCloseMemHandle_v4010, Data(rt_close));
  EXPECT_EQ(c.role, Role::kIpcClose);
  EXPECT_EQ(c.address, 0x7f0000400000u);
  EXPECT_EQ(FindSpec(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuIpcGetMemHandle),
            nullptr)
      << "exporting a handle changes nothing for the exporter";
}

TEST(Parse, GraphNodesAreNodeOnly) {
  cudaMemAllocNodeParams alloc{};
  alloc.poolProps.location.type = cudaMemLocationTypeDevice;
  alloc.poolProps.location.id = 3;
  alloc.bytesize = 1 << 20;
  alloc.dptr = reinterpret_cast<void*>(0x50000);
  cudaGraphAddMemAllocNode_v11040_params p{nullptr, nullptr, nullptr, 0, &alloc};
  const ParsedCall a = Runtime(CUPTI_RUNTIME_TRACE_CBID_cudaGraphAddMemAllocNode_v11040, Data(p));
  EXPECT_EQ(a.role, Role::kAlloc);
  EXPECT_TRUE(a.node_only);
  EXPECT_EQ(a.kind, MemKind::kGraph);
  EXPECT_EQ(a.device, 3);
  EXPECT_EQ(a.size, 1u << 20);
  EXPECT_EQ(a.address, 0x50000u);

  cudaGraphNodeParams generic{};
  generic.type = cudaGraphNodeTypeMemcpy;
  generic.memcpy.copyParams.extent = cudaExtent{100, 2, 1};
  generic.memcpy.copyParams.kind = cudaMemcpyDeviceToHost;
  cudaGraphAddNode_v12030_params add{nullptr, nullptr, nullptr, nullptr, 0, &generic};
  const ParsedCall c = Runtime(CUPTI_RUNTIME_TRACE_CBID_cudaGraphAddNode_v12030, Data(add));
  EXPECT_EQ(c.role, Role::kCopy);
  EXPECT_TRUE(c.node_only);
  EXPECT_EQ(c.copy.bytes, 200u);
  EXPECT_EQ(c.copy.kind, CopyKind::kDeviceToHost);

  // A kernel node: a launch at each launch of the graph, with its function.
  generic.type = cudaGraphNodeTypeKernel;
  int function = 0;
  generic.kernel.func = &function;
  const ParsedCall kernel = Runtime(CUPTI_RUNTIME_TRACE_CBID_cudaGraphAddNode_v12030, Data(add));
  EXPECT_EQ(kernel.role, Role::kLaunch);
  EXPECT_TRUE(kernel.node_only);
  EXPECT_EQ(kernel.kernel_func, &function);
  EXPECT_FALSE(kernel.kernel_func_driver);

  generic.type = cudaGraphNodeTypeHost;  // not followed
  const CallbackSpec* spec =
      FindSpec(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphAddNode_v12030);
  ASSERT_NE(spec, nullptr);
  const CUpti_CallbackData d = Data(add);
  ParsedCall host;
  EXPECT_FALSE(ParseCall(*spec, &d, true, &host));
}

TEST(Parse, NullParamsAreRefusedNotRead) {
  CUpti_CallbackData d{};
  const CallbackSpec* spec =
      FindSpec(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020);
  ASSERT_NE(spec, nullptr);
  ParsedCall call;
  EXPECT_FALSE(ParseCall(*spec, &d, true, &call));
}

// --- The switchboard ----------------------------------------------------------

// A session without stacks or an event trace.
Config PlainConfig() {
  Config config;
  config.depth = 0;
  config.trace_events = 0;
  return config;
}

// A fresh set of tables behind the callbacks, for one test.
class Switchboard : public ::testing::Test {
 protected:
  void SetUp() override {
    PublishSession(&session_);
    CallbackHooks hooks;
    hooks.get_graph_node_id = &NodeId;
    SetCallbackHooks(hooks);
  }
  void TearDown() override {
    SetCallbackHooks(CallbackHooks{});
    PublishSession(nullptr);
  }

  // Node ids: the handle's value, as good as CUPTI's for a test.
  static CUptiResult CUPTIAPI NodeId(CUgraphNode node, uint64_t* id) {
    *id = reinterpret_cast<uintptr_t>(node);
    return CUPTI_SUCCESS;
  }

  template <typename P, typename R>
  static void Call(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, uint32_t correlation,
                   const P& params, CUpti_ApiCallbackSite site, R result) {
    CUpti_CallbackData d{};
    d.callbackSite = site;
    d.functionParams = &params;
    d.functionReturnValue = site == CUPTI_API_EXIT ? &result : nullptr;
    d.correlationId = correlation;
    OnCuptiCallback(nullptr, domain, cbid, &d);
  }
  // The ENTER and EXIT callbacks of a call of `kDomain`, whose functions
  // return R (kSuccess when they succeed): RuntimeApi::Enter, DriverApi::Exit, ...
  template <CUpti_CallbackDomain kDomain, typename R, R kSuccess>
  struct Api {
    template <typename P>
    static void Enter(CUpti_CallbackId cbid, uint32_t correlation, const P& params) {
      Call(kDomain, cbid, correlation, params, CUPTI_API_ENTER, kSuccess);
    }
    template <typename P>
    static void Exit(CUpti_CallbackId cbid, uint32_t correlation, const P& params,
                     R result = kSuccess) {
      Call(kDomain, cbid, correlation, params, CUPTI_API_EXIT, result);
    }
  };
  using RuntimeApi = Api<CUPTI_CB_DOMAIN_RUNTIME_API, cudaError_t, cudaSuccess>;
  using DriverApi = Api<CUPTI_CB_DOMAIN_DRIVER_API, CUresult, CUDA_SUCCESS>;
  static void Resource(CUpti_CallbackId cbid, CUpti_GraphData* graph) {
    CUpti_ResourceData r{};
    r.resourceDescriptor = graph;
    OnCuptiCallback(nullptr, CUPTI_CB_DOMAIN_RESOURCE, cbid, &r);
  }

  void Malloc(uint64_t address, size_t size, uint32_t correlation) {
    // The simulated driver's answer: an address, never dereferenced.
    void* out = reinterpret_cast<void*>(address);  // NOLINT(performance-no-int-to-ptr)
    const cudaMalloc_v3020_params p{&out, size};
    RuntimeApi::Enter(CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, correlation, p);
    RuntimeApi::Exit(CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, correlation, p);
  }

  uint64_t Live() { return tracker_.Snapshot().live.size(); }

  Session session_{PlainConfig()};
  Tracker& tracker_ = session_.recording().tracker;
  Transfers& transfers_ = session_.recording().transfers;
  GraphTable& graphs_ = session_.graphs();
};

// gpuwatch's own work inside a callback (here the out-of-memory hook) may
// make CUDA calls; their callbacks are gpuwatch's, not the application's.
TEST_F(Switchboard, CallbacksCausedByGpuwatchItselfAreIgnored) {
  static decltype(this) self = nullptr;
  static int hook_calls = 0;
  self = this;
  hook_calls = 0;
  CallbackHooks hooks;
  hooks.on_oom = [](const OomEvent&) {
    ++hook_calls;
    EXPECT_TRUE(InsideGpuwatch());
    self->Malloc(0x9000, 512, 99);  // a CUDA call of gpuwatch's own, inside the callback
  };
  SetCallbackHooks(hooks);
  void* out = nullptr;
  const cudaMalloc_v3020_params p{&out, 1 << 20};
  RuntimeApi::Enter(CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 1, p);
  RuntimeApi::Exit(CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 1, p, cudaErrorMemoryAllocation);
  EXPECT_EQ(hook_calls, 1);
  EXPECT_EQ(Live(), 0u) << "gpuwatch's own allocation is not the application's";
  EXPECT_FALSE(InsideGpuwatch());
  Malloc(0x9000, 512, 2);  // the application's, after the callback returned
  EXPECT_EQ(Live(), 1u);
}

TEST(GpuwatchMutex, CountsTheLocksTheCallingThreadHolds) {
  Mutex a;
  Mutex b;
  EXPECT_FALSE(HoldsGpuwatchLock());
  {
    const std::lock_guard<Mutex> la(a);
    EXPECT_TRUE(HoldsGpuwatchLock());
    {
      const std::lock_guard<Mutex> lb(b);
      EXPECT_EQ(t_gpuwatch_locks_held, 2);
    }
    EXPECT_EQ(t_gpuwatch_locks_held, 1);
    // Another thread holds none, and cannot take a while this one holds it.
    std::thread other([&] {
      EXPECT_FALSE(HoldsGpuwatchLock());
      EXPECT_FALSE(a.try_lock());
      EXPECT_FALSE(HoldsGpuwatchLock()) << "a failed try_lock holds nothing";
    });
    other.join();
  }
  EXPECT_FALSE(HoldsGpuwatchLock());
}

// A fork child starts a recording of its own (fork.cc): the callbacks read
// the session's tables per event, so the next event goes there, with no hook
// to install again.
TEST_F(Switchboard, AfterAForkTheNextEventGoesToTheChildsRecording) {
  Malloc(0x1000, 512, 1);
  const Recording& parent = session_.recording();
  session_.StartChildRecording();
  Malloc(0x2000, 256, 2);
  const TrackerSnapshot child = session_.recording().tracker.Snapshot();
  ASSERT_EQ(child.live.size(), 1u);
  EXPECT_EQ(child.live[0].address, 0x2000u);
  EXPECT_EQ(child.live[0].size, 256u);
  const TrackerSnapshot before = parent.tracker.Snapshot();
  ASSERT_EQ(before.live.size(), 1u);
  EXPECT_EQ(before.live[0].address, 0x1000u);
}

TEST_F(Switchboard, AFreeIsRecordedAtEntryAndUndoneWhenItFails) {
  Malloc(0x1000, 256, 1);
  const cudaFree_v3020_params free{reinterpret_cast<void*>(0x1000)};
  RuntimeApi::Enter(CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, 2, free);
  EXPECT_EQ(Live(), 0u) << "freed before the call runs";
  RuntimeApi::Exit(CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, 2, free, cudaErrorInvalidValue);
  EXPECT_EQ(Live(), 1u) << "the call failed: still live";
  EXPECT_EQ(tracker_.DeviceCurrentBytes(), 256u);
  RuntimeApi::Enter(CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, 3, free);
  RuntimeApi::Exit(CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, 3, free);
  EXPECT_EQ(Live(), 0u);
  // A free of an address that is not live counts once, and only when it succeeded.
  RuntimeApi::Enter(CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, 4, free);
  RuntimeApi::Exit(CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, 4, free, cudaErrorInvalidValue);
  EXPECT_EQ(tracker_.Snapshot().unknown_frees, 0u);
  RuntimeApi::Enter(CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, 5, free);
  RuntimeApi::Exit(CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, 5, free);
  EXPECT_EQ(tracker_.Snapshot().unknown_frees, 1u);
}

// An allocation's EXIT reads its outputs into what ENTER read (its own
// path, alloc_callbacks.cc): a pitched allocation is the pitch the driver
// chose times the height; a failed one reports the size it asked for, its
// outputs unread.
TEST_F(Switchboard, APitchedAllocationCountsItsPitchAndAFailedOneWhatItAsked) {
  static OomEvent oom;
  static int oom_calls = 0;
  oom = OomEvent{};
  oom_calls = 0;
  CallbackHooks hooks;
  hooks.on_oom = [](const OomEvent& e) {
    oom = e;
    ++oom_calls;
  };
  SetCallbackHooks(hooks);
  void* out = reinterpret_cast<void*>(0x7000);
  size_t pitch = 128;
  const cudaMallocPitch_v3020_params p{&out, &pitch, 100, 10};
  RuntimeApi::Enter(CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020, 1, p);
  RuntimeApi::Exit(CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020, 1, p);
  TrackerSnapshot s = tracker_.Snapshot();
  ASSERT_EQ(s.live.size(), 1u);
  EXPECT_EQ(s.live[0].address, 0x7000u);
  EXPECT_EQ(s.live[0].size, 1280u) << "128-byte rows, 10 of them";
  out = reinterpret_cast<void*>(0x8000);  // what a failed call must not be read for
  pitch = 4096;
  const cudaMallocPitch_v3020_params big{&out, &pitch, 1000, 3};
  RuntimeApi::Enter(CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020, 2, big);
  RuntimeApi::Exit(CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020, 2, big,
                   cudaErrorMemoryAllocation);
  ASSERT_EQ(oom_calls, 1);
  EXPECT_EQ(oom.size, 3000u) << "the width asked for, not the pitch";
  EXPECT_EQ(oom.kind, MemKind::kDevice);
  s = tracker_.Snapshot();
  ASSERT_EQ(s.live.size(), 1u);
  EXPECT_EQ(s.live[0].address, 0x7000u);
  // The call after a failure starts afresh: a plain allocation, then its free.
  Malloc(0x9000, 64, 3);
  const cudaFree_v3020_params free{reinterpret_cast<void*>(0x7000)};
  RuntimeApi::Enter(CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, 4, free);
  RuntimeApi::Exit(CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, 4, free);
  s = tracker_.Snapshot();
  ASSERT_EQ(s.live.size(), 1u);
  EXPECT_EQ(s.live[0].address, 0x9000u);
  EXPECT_EQ(s.live[0].size, 64u);
  EXPECT_EQ(oom_calls, 1);
}

// The lost-allocation race, in the order a real driver allows: the freed
// address is handed to another thread's cudaMalloc before cudaFree returns.
TEST_F(Switchboard, AnAddressReusedByAnotherThreadBeforeTheFreeReturnsStaysLive) {
  Malloc(0x2000, 8192, 1);
  const cudaFree_v3020_params free{reinterpret_cast<void*>(0x2000)};
  RuntimeApi::Enter(CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, 2, free);
  std::thread other([this] { Malloc(0x2000, 8192, 3); });
  other.join();
  RuntimeApi::Exit(CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, 2, free);
  const TrackerSnapshot s = tracker_.Snapshot();
  EXPECT_EQ(s.live.size(), 1u);
  EXPECT_EQ(s.kinds[0].allocs, 2u);
  EXPECT_EQ(s.kinds[0].frees, 1u);
  EXPECT_EQ(s.unknown_frees, 0u);
}

// A runtime call nests its driver call: counted once, at the runtime level.
TEST_F(Switchboard, NestedDriverCallsAreCountedOnce) {
  void* out = reinterpret_cast<void*>(0x3000);
  const cudaMalloc_v3020_params rt{&out, 64};
  CUdeviceptr dptr = 0x3000;
  const cuMemAlloc_v2_params drv{&dptr, 64};
  RuntimeApi::Enter(CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 7, rt);
  DriverApi::Enter(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, 8, drv);
  DriverApi::Exit(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, 8, drv);
  RuntimeApi::Exit(CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 7, rt);
  EXPECT_EQ(tracker_.Snapshot().kinds[0].allocs, 1u);
}

// gpuwatch attaches while runtime calls are in flight (injection attaches
// inside the first one; other threads may be inside theirs). Such a call's
// nested driver call is recorded, and its EXIT (without an ENTER) adds
// nothing; without a nested driver callback, the EXIT records it. (Each
// thread here starts as a thread does at attach: no runtime callback yet.)
TEST_F(Switchboard, ACallInFlightAtAttachIsCountedOnceWithOrWithoutItsDriverCall) {
  void* out = reinterpret_cast<void*>(0x4000);
  const cudaMalloc_v3020_params rt{&out, 64};
  CUdeviceptr dptr = 0x4000;
  const cuMemAlloc_v2_params drv{&dptr, 64};
  std::thread with_driver([&] {
    DriverApi::Enter(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, 8, drv);
    DriverApi::Exit(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, 8, drv);
    RuntimeApi::Exit(CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 7, rt);
  });
  with_driver.join();
  EXPECT_EQ(tracker_.Snapshot().kinds[0].allocs, 1u);
  void* out2 = reinterpret_cast<void*>(0x5000);
  const cudaMalloc_v3020_params rt2{&out2, 64};
  std::thread runtime_only(
      [&] { RuntimeApi::Exit(CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 9, rt2); });
  runtime_only.join();
  const TrackerSnapshot s = tracker_.Snapshot();
  EXPECT_EQ(s.kinds[0].allocs, 2u);
  EXPECT_EQ(s.live.size(), 2u);
}

// A copy captured from a stream makes a node: no copy now, one per launch.
TEST_F(Switchboard, CapturedCopiesHappenAtEachGraphLaunch) {
  Malloc(0x6000, 1 << 20, 1);
  char host[64];
  const cudaMemcpyAsync_v3020_params copy{reinterpret_cast<void*>(0x6000), host, 4096,
                                          cudaMemcpyHostToDevice, nullptr};
  auto* graph = reinterpret_cast<CUgraph>(0x900);
  auto* node = reinterpret_cast<CUgraphNode>(0x901);
  RuntimeApi::Enter(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, 2, copy);
  CUpti_GraphData created{};
  created.graph = graph;
  created.node = node;
  created.nodeType = CU_GRAPH_NODE_TYPE_MEMCPY;
  Resource(CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, &created);
  RuntimeApi::Exit(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, 2, copy);
  EXPECT_EQ(transfers_.Snapshot().sites.size(), 0u) << "captured: nothing copied yet";

  // Instantiation clones the node into the exec.
  auto* exec = reinterpret_cast<CUgraphExec>(0x950);
  const cudaGraphInstantiate_v12000_params inst{nullptr, nullptr, 0};
  RuntimeApi::Enter(CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiate_v12000, 3, inst);
  CUpti_GraphData cloned{};
  cloned.node = reinterpret_cast<CUgraphNode>(0x951);
  cloned.originalNode = node;
  Resource(CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED, &cloned);
  CUpti_GraphData exec_created{};
  exec_created.graph = graph;
  exec_created.graphExec = exec;
  Resource(CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED, &exec_created);
  RuntimeApi::Exit(CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiate_v12000, 3, inst);

  const cudaGraphLaunch_v10000_params launch{exec, nullptr};
  for (uint32_t c = 10; c < 13; ++c) {
    RuntimeApi::Enter(CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, c, launch);
    RuntimeApi::Exit(CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, c, launch);
  }
  const TransfersSnapshot t = transfers_.Snapshot();
  ASSERT_EQ(t.sites.size(), 1u);
  EXPECT_EQ(t.sites[0].second.all.count, 3u);
  EXPECT_EQ(t.sites[0].second.all.bytes, 3u * 4096);
  EXPECT_EQ(
      t.totals[static_cast<int>(CopyKind::kHostToDevice)][static_cast<int>(HostKind::kPageable)]
          .count,
      3u);
}

// Graph memory: an allocation node allocates at each launch, a free node in
// the same graph frees it; a captured cudaFreeAsync frees nothing now.
TEST_F(Switchboard, GraphMemoryIsLiveFromItsLaunchUntilItsFree) {
  Malloc(0x7000, 512, 1);
  auto* graph = reinterpret_cast<CUgraph>(0xa00);
  // A captured free of memory allocated outside the graph: still live now.
  const cudaFreeAsync_v11020_params free{reinterpret_cast<void*>(0x7000), nullptr};
  RuntimeApi::Enter(CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020, 2, free);
  CUpti_GraphData free_node{};
  free_node.graph = graph;
  free_node.node = reinterpret_cast<CUgraphNode>(0xa01);
  Resource(CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, &free_node);
  RuntimeApi::Exit(CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020, 2, free);
  EXPECT_EQ(Live(), 1u);
  // An allocation node: its address is known at the end of the call.
  cudaMemAllocNodeParams alloc{};
  alloc.bytesize = 1 << 16;
  cudaGraphAddMemAllocNode_v11040_params add{nullptr, graph, nullptr, 0, &alloc};
  RuntimeApi::Enter(CUPTI_RUNTIME_TRACE_CBID_cudaGraphAddMemAllocNode_v11040, 3, add);
  CUpti_GraphData alloc_node{};
  alloc_node.graph = graph;
  alloc_node.node = reinterpret_cast<CUgraphNode>(0xa02);
  Resource(CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, &alloc_node);
  alloc.dptr = reinterpret_cast<void*>(0x80000);
  RuntimeApi::Exit(CUPTI_RUNTIME_TRACE_CBID_cudaGraphAddMemAllocNode_v11040, 3, add);
  EXPECT_EQ(Live(), 1u);
  // No clones reported: the exec stands for the graph's nodes.
  auto* exec = reinterpret_cast<CUgraphExec>(0xa50);
  CUpti_GraphData exec_created{};
  exec_created.graph = graph;
  exec_created.graphExec = exec;
  Resource(CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED, &exec_created);
  const cudaGraphLaunch_v10000_params launch{exec, nullptr};
  RuntimeApi::Enter(CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, 4, launch);
  RuntimeApi::Exit(CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, 4, launch);
  const TrackerSnapshot s = tracker_.Snapshot();
  ASSERT_EQ(s.live.size(), 1u);
  EXPECT_EQ(s.live[0].address, 0x80000u);
  EXPECT_EQ(s.live[0].kind, MemKind::kGraph);
  EXPECT_EQ(s.live[0].size, 1u << 16);
  EXPECT_EQ(s.kinds[static_cast<int>(MemKind::kGraph)].allocs, 1u);
}

// VMM: the memory is the handle's, on the device it was created on, from
// cuMemCreate; a second mapping adds none; a release is recorded at ENTER and
// undone when it fails; an imported handle is no device memory.
TEST_F(Switchboard, VmmMemoryIsTheHandlesOnItsDevice) {
  CUmemGenericAllocationHandle handle = 77;
  CUmemAllocationProp prop{};
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 1;
  const cuMemCreate_params create{&handle, 2 << 20, &prop, 0};
  DriverApi::Enter(CUPTI_DRIVER_TRACE_CBID_cuMemCreate, 1, create);
  DriverApi::Exit(CUPTI_DRIVER_TRACE_CBID_cuMemCreate, 1, create);
  for (const CUdeviceptr at : {0x40000000ull, 0x50000000ull}) {
    const cuMemMap_params map{at, 2 << 20, 0, 77, 0};
    DriverApi::Enter(CUPTI_DRIVER_TRACE_CBID_cuMemMap, 2, map);
    DriverApi::Exit(CUPTI_DRIVER_TRACE_CBID_cuMemMap, 2, map);
  }
  TrackerSnapshot s = tracker_.Snapshot();
  ASSERT_EQ(s.live.size(), 1u);
  EXPECT_EQ(s.live[0].device, 1);
  EXPECT_EQ(s.device_bytes_by_device[1], 2u << 20);
  EXPECT_EQ(s.device_bytes_by_device[0], 0u);
  const cuMemRelease_params release{77};
  DriverApi::Enter(CUPTI_DRIVER_TRACE_CBID_cuMemRelease, 3, release);
  DriverApi::Exit(CUPTI_DRIVER_TRACE_CBID_cuMemRelease, 3, release, CUDA_ERROR_INVALID_VALUE);
  const cuMemUnmap_params unmap{0x40000000, 0x10000000 + (2 << 20)};
  DriverApi::Enter(CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, 4, unmap);
  DriverApi::Exit(CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, 4, unmap);
  EXPECT_EQ(Live(), 1u) << "unmapped, the release failed: still allocated";
  DriverApi::Enter(CUPTI_DRIVER_TRACE_CBID_cuMemRelease, 5, release);
  EXPECT_EQ(Live(), 0u) << "released before the call runs";
  DriverApi::Exit(CUPTI_DRIVER_TRACE_CBID_cuMemRelease, 5, release);
  const cuMemImportFromShareableHandle_params import{&handle, nullptr, CU_MEM_HANDLE_TYPE_NONE};
  DriverApi::Enter(CUPTI_DRIVER_TRACE_CBID_cuMemImportFromShareableHandle, 6, import);
  DriverApi::Exit(CUPTI_DRIVER_TRACE_CBID_cuMemImportFromShareableHandle, 6, import);
  s = tracker_.Snapshot();
  EXPECT_EQ(s.kinds[static_cast<int>(MemKind::kVmmImported)].allocs, 1u);
  EXPECT_EQ(s.kinds[static_cast<int>(MemKind::kVmm)].frees, 1u);
  EXPECT_EQ(s.device_current_bytes, 0u);
  EXPECT_EQ(s.device_peak_bytes, 2u << 20);
}

// CUDA IPC through the switchboard: the size of an opening comes from the
// driver (the mapped_size hook), once per mapping; a close is recorded at
// ENTER, undone when it fails, and one of nothing gpuwatch saw opened counts
// as an unknown free. A runtime call nesting the driver's counts once.
TEST_F(Switchboard, IpcOpeningsAreAnotherProcesssMemory) {
  CallbackHooks hooks;
  hooks.mapped_size = [](uint64_t address) -> uint64_t {
    return address == 0x7f0000200000 ? 3u << 20 : 0;
  };
  SetCallbackHooks(hooks);
  void* opened = reinterpret_cast<void*>(0x7f0000200000);
  const cudaIpcOpenMemHandle_v4010_params open{&opened, cudaIpcMemHandle_t{}, 1};
  CUdeviceptr mapped = 0x7f0000200000;
  const cuIpcOpenMemHandle_v2_params nested{&mapped, CUipcMemHandle{}, 1};
  for (uint32_t correlation : {1u, 2u}) {  // opened twice: one mapping, two references
    RuntimeApi::Enter(CUPTI_RUNTIME_TRACE_CBID_cudaIpcOpenMemHandle_v4010, correlation, open);
    DriverApi::Enter(CUPTI_DRIVER_TRACE_CBID_cuIpcOpenMemHandle_v2, correlation, nested);
    DriverApi::Exit(CUPTI_DRIVER_TRACE_CBID_cuIpcOpenMemHandle_v2, correlation, nested);
    RuntimeApi::Exit(CUPTI_RUNTIME_TRACE_CBID_cudaIpcOpenMemHandle_v4010, correlation, open);
  }
  TrackerSnapshot s = tracker_.Snapshot();
  const KindTotals& ipc = s.kinds[static_cast<int>(MemKind::kIpcImported)];
  EXPECT_EQ(ipc.allocs, 1u);
  EXPECT_EQ(ipc.alloc_bytes, 3u << 20);
  ASSERT_EQ(s.live.size(), 1u);
  EXPECT_EQ(s.live[0].kind, MemKind::kIpcImported);
  EXPECT_EQ(s.device_current_bytes, 0u);
  const cuIpcCloseMemHandle_params close{0x7f0000200000};
  DriverApi::Enter(CUPTI_DRIVER_TRACE_CBID_cuIpcCloseMemHandle, 3, close);
  DriverApi::Exit(CUPTI_DRIVER_TRACE_CBID_cuIpcCloseMemHandle, 3, close);
  EXPECT_EQ(Live(), 1u) << "one reference left";
  DriverApi::Enter(CUPTI_DRIVER_TRACE_CBID_cuIpcCloseMemHandle, 4, close);
  EXPECT_EQ(Live(), 0u) << "unmapped before the call runs";
  DriverApi::Exit(CUPTI_DRIVER_TRACE_CBID_cuIpcCloseMemHandle, 4, close,
                  CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(Live(), 1u) << "the close failed";
  DriverApi::Enter(CUPTI_DRIVER_TRACE_CBID_cuIpcCloseMemHandle, 5, close);
  DriverApi::Exit(CUPTI_DRIVER_TRACE_CBID_cuIpcCloseMemHandle, 5, close);
  EXPECT_EQ(Live(), 0u);
  DriverApi::Enter(CUPTI_DRIVER_TRACE_CBID_cuIpcCloseMemHandle, 6, close);
  DriverApi::Exit(CUPTI_DRIVER_TRACE_CBID_cuIpcCloseMemHandle, 6, close);
  s = tracker_.Snapshot();
  EXPECT_EQ(s.kinds[static_cast<int>(MemKind::kIpcImported)].frees, 1u);
  EXPECT_EQ(s.unknown_frees, 1u) << "a close of nothing opened";
}

}  // namespace
}  // namespace gpuwatch

namespace gpuwatch::testing {
namespace {

// The one fork protocol covers the interposition layer's own tables: the
// arrays' element sizes (not taken around a fork before) and NVTX's names
// and phases (a pthread_atfork of their own before). Each is held by another
// thread in turn while this thread forks, and the child takes every lock.
// (The agent's report queue and mark scan are registered the same way, in
// libgpuwatch.so's attach.cc, which this test does not link.)
TEST(Fork, EveryLockOfTheInterpositionLayerIsFreeInAForkedChild) {
  (void)ArrayElementBytes(0);
  (void)ProcessPhases();
  for (const char* name : {"CUDA arrays' element sizes", "NVTX phases, domains and strings"}) {
    EXPECT_TRUE(Registered(name)) << name;
  }
  ForkWhileEachIsHeld();
}

}  // namespace
}  // namespace gpuwatch::testing
