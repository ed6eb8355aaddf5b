// The ABI of the fake libraries: names, symbol versions and sonames as NVIDIA's.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <link.h>

#include <string>

#include "common/env.h"

namespace gwsim::test {
namespace {

void* Open(const char* soname) {
  void* handle = dlopen(soname, RTLD_NOW | RTLD_NOLOAD);  // linked into this test
  EXPECT_NE(handle, nullptr) << soname << ": " << dlerror();
  return handle;
}

TEST(Exports, DriverExportsItsEntryPointsUnversioned) {
  void* lib = Open("libcuda.so.1");
  ASSERT_NE(lib, nullptr);
#define X(name) EXPECT_NE(dlsym(lib, #name), nullptr) << #name;
#include "driver/exports.inc"
#undef X
  for (const char* name : {"gwsim_api_enter", "gwsim_api_exit", "gwsim_register_cupti"}) {
    EXPECT_NE(dlsym(lib, name), nullptr) << name;
  }
  // Internals stay hidden.
  EXPECT_EQ(dlsym(lib, "_ZN5gwsim3drv1DEv"), nullptr);
}

TEST(Exports, RuntimeSymbolsCarryTheLibcudartVersion) {
  void* lib = Open("libcudart.so.13");
  ASSERT_NE(lib, nullptr);
  // What nvcc -cudart shared programs need, and the APIs the simulator promises.
  for (const char* name : {"__cudaRegisterFatBinary",
                           "__cudaRegisterFatBinaryEnd",
                           "__cudaUnregisterFatBinary",
                           "__cudaRegisterFunction",
                           "__cudaRegisterVar",
                           "__cudaRegisterManagedVar",
                           "__cudaInitModule",
                           "__cudaPushCallConfiguration",
                           "__cudaPopCallConfiguration",
                           "__cudaGetKernel",
                           "__cudaLaunchKernel",
                           "__cudaLaunchKernel_ptsz",
                           "cudaLaunchKernel",
                           "cudaLaunchKernelExC",
                           "cudaMalloc",
                           "cudaMallocPitch",
                           "cudaMalloc3D",
                           "cudaMallocManaged",
                           "cudaMallocAsync",
                           "cudaMallocAsync_ptsz",
                           "cudaMallocFromPoolAsync",
                           "cudaFree",
                           "cudaFreeAsync",
                           "cudaMallocHost",
                           "cudaHostAlloc",
                           "cudaFreeHost",
                           "cudaHostRegister",
                           "cudaHostUnregister",
                           "cudaIpcGetMemHandle",
                           "cudaIpcOpenMemHandle",
                           "cudaIpcCloseMemHandle",
                           "cudaMemPoolCreate",
                           "cudaMemPoolDestroy",
                           "cudaDeviceGetDefaultMemPool",
                           "cudaMemcpy",
                           "cudaMemcpy_ptds",
                           "cudaMemcpyAsync",
                           "cudaMemcpyAsync_ptsz",
                           "cudaMemcpy2D",
                           "cudaMemcpy2DAsync",
                           "cudaMemcpy3D",
                           "cudaMemcpyPeer",
                           "cudaMemcpyPeerAsync",
                           "cudaMemcpyToSymbol",
                           "cudaMemcpyFromSymbol",
                           "cudaMemcpyBatchAsync",
                           "cudaMemset",
                           "cudaMemsetAsync",
                           "cudaStreamCreate",
                           "cudaStreamCreateWithFlags",
                           "cudaStreamDestroy",
                           "cudaStreamSynchronize",
                           "cudaDeviceSynchronize",
                           "cudaEventCreate",
                           "cudaEventRecord",
                           "cudaEventSynchronize",
                           "cudaEventElapsedTime",
                           "cudaEventDestroy",
                           "cudaGetLastError",
                           "cudaPeekAtLastError",
                           "cudaGetErrorString",
                           "cudaGetErrorName",
                           "cudaDeviceReset",
                           "cudaRuntimeGetVersion",
                           "cudaDriverGetVersion",
                           "cudaSetDevice",
                           "cudaGetDevice",
                           "cudaGetDeviceCount",
                           "cudaGetDeviceProperties",
                           "cudaMemGetInfo",
                           "cudaPointerGetAttributes",
                           "cudaGetDriverEntryPoint",
                           "cudaGetDriverEntryPointByVersion",
                           "cudaMallocArray",
                           "cudaMalloc3DArray",
                           "cudaMallocMipmappedArray",
                           "cudaFreeArray",
                           "cudaArrayGetInfo",
                           "cudaCreateChannelDesc",
                           "cudaMemcpy2DToArray",
                           "cudaMemcpy2DFromArray",
                           "cudaMemcpy3DPeer",
                           "cudaProfilerStart",
                           "cudaProfilerStop",
                           "cudaMemPrefetchAsync",
                           "cudaMemAdvise",
                           "cudaFuncGetAttributes",
                           "cudaFuncSetAttribute",
                           "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags"}) {
    EXPECT_NE(dlvsym(lib, name, "libcudart.so.13"), nullptr) << name;
  }
}

TEST(Exports, CuptiSymbolsCarryTheLibcuptiVersion) {
  void* lib = Open("libcupti.so.13");
  ASSERT_NE(lib, nullptr);
  for (const char* name :
       {"cuptiSubscribe", "cuptiSubscribe_v2", "cuptiUnsubscribe", "cuptiEnableCallback",
        "cuptiEnableDomain", "cuptiGetResultString", "cuptiGetTimestamp", "cuptiGetCallbackName",
        "cuptiFinalize", "cuptiActivityRegisterCallbacks", "cuptiActivityEnable",
        "cuptiActivityDisable", "cuptiActivityFlushAll", "cuptiActivityGetNextRecord",
        "cuptiActivityGetNumDroppedRecords"}) {
    EXPECT_NE(dlvsym(lib, name, "libcupti.so.13"), nullptr) << name;
  }
}

TEST(Exports, ValueParsers) {
  uint64_t v = 0;
  EXPECT_TRUE(ParseByteSize("1073741824", &v));
  EXPECT_EQ(v, 1ull << 30);
  EXPECT_TRUE(ParseByteSize("16G", &v));
  EXPECT_EQ(v, 16ull << 30);
  EXPECT_TRUE(ParseByteSize("512MiB", &v));
  EXPECT_EQ(v, 512ull << 20);
  EXPECT_FALSE(ParseByteSize("-1", &v));
  EXPECT_FALSE(ParseByteSize("12Q", &v));
  EXPECT_FALSE(ParseByteSize("", &v));
  EXPECT_FALSE(ParseUnsigned("7x", &v));
  double d = 0;
  EXPECT_TRUE(ParsePositiveDouble("12.5", &d));
  EXPECT_EQ(d, 12.5);
  EXPECT_FALSE(ParsePositiveDouble("0", &d));
  EXPECT_FALSE(ParsePositiveDouble("nan", &d));
}

}  // namespace
}  // namespace gwsim::test
