// What PyTorch's expandable segments need of the simulator: every driver entry point
// c10::cuda::DriverAPI requires (it resolves them all at once, and fails on the first missing
// one), cuMemGetAllocationPropertiesFromHandle, cuStreamWriteValue32, and the NVML it calls
// through pointers it does not check (src/nvml/nvml.cc).
#include <cuda.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "recorder.h"

// The fake NVML's calls (NVML's header is not part of the toolkit): handles are pointers.
extern "C" {
int nvmlInit_v2();
int nvmlShutdown();
const char* nvmlErrorString(int result);
int nvmlSystemGetCudaDriverVersion_v2(int* version);
int nvmlDeviceGetCount_v2(unsigned int* count);
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device);
int nvmlDeviceGetHandleByPciBusId_v2(const char* bus_id, void** device);
int nvmlDeviceGetUUID(void* device, char* uuid, unsigned int length);
int nvmlDeviceGetHandleByUUID(const char* uuid, void** device);
int nvmlDeviceGetP2PStatus(void* device1, void* device2, int index, int* status);
int nvmlDeviceGetComputeRunningProcesses(void* device, unsigned int* count, void* infos);
int nvmlDeviceGetNvLinkRemoteDeviceType(void* device, unsigned int link, int* type);
int nvmlDeviceGetGpuFabricInfoV(void* device, void* info);
}

namespace gwsim::test {
namespace {

// c10/cuda/driver_api.h's required list, as torch 2.15.0's libc10_cuda.so names them (the
// multicast, green-context, device-resource and logs calls are optional there).
constexpr const char* kTorchRequired[] = {"cuCtxGetCurrent",
                                          "cuCtxPopCurrent",
                                          "cuCtxPushCurrent",
                                          "cuCtxSetCurrent",
                                          "cuDeviceGet",
                                          "cuDeviceGetAttribute",
                                          "cuGetErrorString",
                                          "cuMemAddressFree",
                                          "cuMemAddressReserve",
                                          "cuMemCreate",
                                          "cuMemExportToShareableHandle",
                                          "cuMemGetAddressRange",
                                          "cuMemGetAllocationGranularity",
                                          "cuMemGetAllocationPropertiesFromHandle",
                                          "cuMemImportFromShareableHandle",
                                          "cuMemMap",
                                          "cuMemRelease",
                                          "cuMemRetainAllocationHandle",
                                          "cuMemSetAccess",
                                          "cuMemUnmap",
                                          "cuMemsetD32Async",
                                          "cuStreamWriteValue32"};

TEST(PyTorchDriverApi, EveryEntryPointTorchRequiresResolves) {
  InitCuda();
  for (const char* name : kTorchRequired) {
    void* fn = nullptr;
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    EXPECT_EQ(cuGetProcAddress(name, &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &status),
              CUDA_SUCCESS)
        << name;
    EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SUCCESS) << name;
    EXPECT_NE(fn, nullptr) << name;
  }
}

CUmemAllocationProp DeviceProp(int device, CUmemAllocationHandleType types) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = device};
  prop.requestedHandleTypes = types;
  return prop;
}

TEST(PyTorchDriverApi, AllocationPropertiesAreWhatCreationWasGiven) {
  InitCuda();
  const CUmemAllocationProp asked = DeviceProp(1, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  CUmemGenericAllocationHandle h = 0;
  ASSERT_EQ(cuMemCreate(&h, 2 << 20, &asked, 0), CUDA_SUCCESS);
  Recorder rec({kDriver});
  CUmemAllocationProp got{};
  got.location.id = 7;
  ASSERT_EQ(cuMemGetAllocationPropertiesFromHandle(&got, h), CUDA_SUCCESS);
  EXPECT_EQ(rec.Of(kDriver, CUPTI_DRIVER_TRACE_CBID_cuMemGetAllocationPropertiesFromHandle).size(),
            2u);
  EXPECT_EQ(got.type, CU_MEM_ALLOCATION_TYPE_PINNED);
  EXPECT_EQ(got.location.type, CU_MEM_LOCATION_TYPE_DEVICE);
  EXPECT_EQ(got.location.id, 1);
  EXPECT_EQ(got.requestedHandleTypes, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  EXPECT_EQ(cuMemGetAllocationPropertiesFromHandle(nullptr, h), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuMemRelease(h), CUDA_SUCCESS);
  EXPECT_EQ(cuMemGetAllocationPropertiesFromHandle(&got, h), CUDA_ERROR_INVALID_VALUE);
}

// A stream-ordered 32-bit store (completed at once here); 4-byte aligned device memory only,
// flags 0 or NO_MEMORY_BARRIER; each twin under its own cbid.
TEST(PyTorchDriverApi, StreamWriteValue32StoresFourBytes) {
  InitCuda();
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 64), cudaSuccess);
  ASSERT_EQ(cudaMemset(p, 0, 64), cudaSuccess);
  const auto base = reinterpret_cast<CUdeviceptr>(p);
  Recorder rec({kDriver});
  ASSERT_EQ(cuStreamWriteValue32(nullptr, base + 8, 0xA5A5F00Du, 0), CUDA_SUCCESS);
  void* fn = nullptr;  // the per-thread twin, as cuGetProcAddress hands it out
  ASSERT_EQ(cuGetProcAddress("cuStreamWriteValue32", &fn, 12000,
                             CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, nullptr),
            CUDA_SUCCESS);
  const auto per_thread = reinterpret_cast<decltype(&cuStreamWriteValue32)>(fn);
  ASSERT_EQ(per_thread(nullptr, base + 12, 7u, CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER),
            CUDA_SUCCESS);
  std::vector<CUpti_CallbackId> cbids;
  for (const Event& e : rec.Of(kDriver)) {
    if (e.site == CUPTI_API_ENTER) cbids.push_back(e.cbid);
  }
  EXPECT_EQ(cbids,
            (std::vector<CUpti_CallbackId>{CUPTI_DRIVER_TRACE_CBID_cuStreamWriteValue32_v2,
                                           CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress_v2,
                                           CUPTI_DRIVER_TRACE_CBID_cuStreamWriteValue32_v2_ptsz}));
  uint32_t out[4] = {};
  ASSERT_EQ(cudaMemcpy(out, static_cast<char*>(p) + 4, sizeof(out), cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(out[0], 0u);
  EXPECT_EQ(out[1], 0xA5A5F00Du);
  EXPECT_EQ(out[2], 7u);
  EXPECT_EQ(out[3], 0u);
  EXPECT_EQ(cuStreamWriteValue32(nullptr, base + 2, 1, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuStreamWriteValue32(nullptr, base, 1, 2), CUDA_ERROR_INVALID_VALUE);
  uint32_t host = 0;
  EXPECT_NE(cuStreamWriteValue32(nullptr, reinterpret_cast<CUdeviceptr>(&host), 1, 0),
            CUDA_SUCCESS);
  ASSERT_EQ(cudaFree(p), cudaSuccess);
}

// An NVML result by its name (nvmlErrorString's).
std::string Nvml(int result) { return nvmlErrorString(result); }

// NVML (libnvidia-ml.so.1): the simulator's two devices (GWSIM_DEVICE_COUNT=2), found by index,
// by the PCI bus id cuDeviceGetPCIBusId writes and by the UUID of cudaDeviceProp; no NVLink, no
// GPU fabric (what lets torch's get_fabric_access answer false), no processes. Nothing works
// before nvmlInit or after the last nvmlShutdown.
TEST(PyTorchNvml, DevicesAreTheSimulatorsWithoutFabric) {
  InitCuda();
  unsigned int count = 0;
  EXPECT_EQ(Nvml(nvmlDeviceGetCount_v2(&count)), "Uninitialized");
  ASSERT_EQ(Nvml(nvmlInit_v2()), "Success");
  ASSERT_EQ(Nvml(nvmlDeviceGetCount_v2(&count)), "Success");
  EXPECT_EQ(count, 2u);
  int version = 0;
  ASSERT_EQ(Nvml(nvmlSystemGetCudaDriverVersion_v2(&version)), "Success");
  int driver = 0;
  ASSERT_EQ(cuDriverGetVersion(&driver), CUDA_SUCCESS);
  EXPECT_EQ(version, driver);

  for (int device = 0; device < 2; ++device) {
    char bus_id[32] = {};
    ASSERT_EQ(cuDeviceGetPCIBusId(bus_id, sizeof(bus_id), device), CUDA_SUCCESS);
    void* by_bus = nullptr;
    void* by_index = nullptr;
    ASSERT_EQ(Nvml(nvmlDeviceGetHandleByPciBusId_v2(bus_id, &by_bus)), "Success") << bus_id;
    ASSERT_EQ(Nvml(nvmlDeviceGetHandleByIndex_v2(device, &by_index)), "Success");
    EXPECT_EQ(by_bus, by_index);
    char uuid[96] = {};
    ASSERT_EQ(Nvml(nvmlDeviceGetUUID(by_bus, uuid, sizeof(uuid))), "Success");
    cudaDeviceProp prop{};
    ASSERT_EQ(cudaGetDeviceProperties(&prop, device), cudaSuccess);
    std::string expected = "GPU-";
    for (int i = 0; i < 16; ++i) {
      char hex[3];
      std::snprintf(hex, sizeof(hex), "%02x", static_cast<unsigned char>(prop.uuid.bytes[i]));
      expected += hex;
      if (i == 3 || i == 5 || i == 7 || i == 9) expected += "-";
    }
    EXPECT_EQ(uuid, expected);
    void* by_uuid = nullptr;
    ASSERT_EQ(Nvml(nvmlDeviceGetHandleByUUID(uuid, &by_uuid)), "Success");
    EXPECT_EQ(by_uuid, by_bus);
    EXPECT_EQ(Nvml(nvmlDeviceGetUUID(by_bus, uuid, 10)), "Insufficient Size");

    // nvmlGpuFabricInfoV_t version 2, as torch passes it: state NOT_SUPPORTED (0).
    unsigned char fabric[36];
    std::memset(fabric, 0xff, sizeof(fabric));
    const unsigned int v2 = 0x2000024;
    std::memcpy(fabric, &v2, sizeof(v2));
    ASSERT_EQ(Nvml(nvmlDeviceGetGpuFabricInfoV(by_bus, fabric)), "Success");
    EXPECT_EQ(fabric[28], 0);  // state
    int status = 0;
    std::memcpy(&status, fabric + 20, sizeof(status));
    EXPECT_EQ(Nvml(status), "Not Supported");
    int type = -1;
    EXPECT_EQ(Nvml(nvmlDeviceGetNvLinkRemoteDeviceType(by_bus, 0, &type)), "Not Supported");
    unsigned int processes = 5;
    ASSERT_EQ(Nvml(nvmlDeviceGetComputeRunningProcesses(by_bus, &processes, nullptr)), "Success");
    EXPECT_EQ(processes, 0u);
  }
  void* d0 = nullptr;
  void* d1 = nullptr;
  ASSERT_EQ(Nvml(nvmlDeviceGetHandleByPciBusId_v2("00000000:01:00.0", &d0)), "Success");
  ASSERT_EQ(Nvml(nvmlDeviceGetHandleByIndex_v2(1, &d1)), "Success");
  int p2p = -1;
  ASSERT_EQ(Nvml(nvmlDeviceGetP2PStatus(d0, d1, 0, &p2p)), "Success");
  EXPECT_EQ(p2p, 0);  // NVML_P2P_STATUS_OK
  void* none = nullptr;
  EXPECT_EQ(Nvml(nvmlDeviceGetHandleByPciBusId_v2("0000:03:00.0", &none)), "Not Found");
  EXPECT_EQ(Nvml(nvmlDeviceGetHandleByPciBusId_v2("bus", &none)), "Invalid Argument");
  EXPECT_EQ(Nvml(nvmlDeviceGetHandleByUUID("GPU-0", &none)), "Not Found");
  EXPECT_EQ(Nvml(nvmlDeviceGetHandleByIndex_v2(2, &none)), "Invalid Argument");
  EXPECT_EQ(none, nullptr);
  EXPECT_EQ(Nvml(999), "Unknown Error");

  ASSERT_EQ(Nvml(nvmlInit_v2()), "Success");  // counted: one shutdown per init
  ASSERT_EQ(Nvml(nvmlShutdown()), "Success");
  EXPECT_EQ(Nvml(nvmlDeviceGetCount_v2(&count)), "Success");
  ASSERT_EQ(Nvml(nvmlShutdown()), "Success");
  EXPECT_EQ(Nvml(nvmlDeviceGetCount_v2(&count)), "Uninitialized");
  EXPECT_EQ(Nvml(nvmlShutdown()), "Uninitialized");
}

}  // namespace
}  // namespace gwsim::test
