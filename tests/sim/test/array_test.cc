// CUDA arrays: allocation and accounting, MEMORY2 records of kind ARRAY, copies to, from and
// between arrays through the runtime and the driver (contents, MEMCPY records, modelled
// durations), every driver 2D/3D copy entry point, and the errors CUDA documents.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "recorder.h"

// Per-thread-default-stream ABI names, declared by NVIDIA's headers only for per-thread builds.
extern "C" {
CUresult CUDAAPI cuMemcpyHtoA_v2_ptds(CUarray dstArray, size_t dstOffset, const void* srcHost,
                                      size_t ByteCount);
CUresult CUDAAPI cuMemcpyAtoH_v2_ptds(void* dstHost, CUarray srcArray, size_t srcOffset,
                                      size_t ByteCount);
CUresult CUDAAPI cuMemcpyHtoAAsync_v2_ptsz(CUarray dstArray, size_t dstOffset, const void* srcHost,
                                           size_t ByteCount, CUstream hStream);
CUresult CUDAAPI cuMemcpyAtoHAsync_v2_ptsz(void* dstHost, CUarray srcArray, size_t srcOffset,
                                           size_t ByteCount, CUstream hStream);
CUresult CUDAAPI cuMemcpyAtoD_v2_ptds(CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset,
                                      size_t ByteCount);
CUresult CUDAAPI cuMemcpyDtoA_v2_ptds(CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice,
                                      size_t ByteCount);
CUresult CUDAAPI cuMemcpyAtoA_v2_ptds(CUarray dstArray, size_t dstOffset, CUarray srcArray,
                                      size_t srcOffset, size_t ByteCount);
CUresult CUDAAPI cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D* pCopy);
CUresult CUDAAPI cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D* pCopy);
CUresult CUDAAPI cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D* pCopy, CUstream hStream);
CUresult CUDAAPI cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D* pCopy);
CUresult CUDAAPI cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D* pCopy, CUstream hStream);
CUresult CUDAAPI cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER* pCopy);
CUresult CUDAAPI cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER* pCopy, CUstream hStream);
cudaError_t CUDARTAPI cudaMemcpy2DToArray_ptds(cudaArray_t dst, size_t wOffset, size_t hOffset,
                                               const void* src, size_t spitch, size_t width,
                                               size_t height, cudaMemcpyKind kind);
}

// cudaMemcpyToArray & co. are deprecated, and tested here on purpose.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace gwsim::test {
namespace {

// A row of the tables below: the driver entry point's name and cbid, and the kind of its copy.
#define GWSIM_COPY(api, kind) #api, CUPTI_DRIVER_TRACE_CBID_##api, CUPTI_ACTIVITY_MEMCPY_KIND_##kind

cudaChannelFormatDesc Float1() {
  return cudaCreateChannelDesc(32, 0, 0, 0, cudaChannelFormatKindFloat);
}

size_t FreeBytes() {
  size_t free = 0;
  size_t total = 0;
  EXPECT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  return free;
}

std::vector<float> Floats(size_t n, float first) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

CUarray Cu(cudaArray_t a) { return reinterpret_cast<CUarray>(a); }

std::vector<Event> Driver(std::vector<Event> events, CUpti_ApiCallbackSite site) {
  std::vector<Event> out;
  for (Event& e : events) {
    if (e.domain == kDriver && e.site == site) out.push_back(std::move(e));
  }
  return out;
}

// Sets both ends of a driver copy descriptor (CUDA_MEMCPY2D, CUDA_MEMCPY3D, CUDA_MEMCPY3D_PEER):
// memory type, host pointer, device pointer, array and pitch of the source, then the destination.
template <typename Copy>
void SetEnds(Copy* c, CUmemorytype st, const void* sh, CUdeviceptr sd, CUarray sa, CUmemorytype dt,
             void* dh, CUdeviceptr dd, CUarray da, size_t src_pitch, size_t dst_pitch) {
  c->srcMemoryType = st;
  c->srcHost = sh;
  c->srcDevice = sd;
  c->srcArray = sa;
  c->srcPitch = src_pitch;
  c->dstMemoryType = dt;
  c->dstHost = dh;
  c->dstDevice = dd;
  c->dstArray = da;
  c->dstPitch = dst_pitch;
}

// The driver descriptor of an array of width x height floats (height 0: 1D).
CUDA_ARRAY_DESCRIPTOR FloatArray(size_t width, size_t height = 0) {
  CUDA_ARRAY_DESCRIPTOR d{};
  d.Width = width;
  d.Height = height;
  d.Format = CU_AD_FORMAT_FLOAT;
  d.NumChannels = 1;
  return d;
}

// The driver descriptor of a 3D array of width x height x depth floats.
CUDA_ARRAY3D_DESCRIPTOR FloatArray3D(size_t width, size_t height, size_t depth) {
  CUDA_ARRAY3D_DESCRIPTOR d{};
  d.Width = width;
  d.Height = height;
  d.Depth = depth;
  d.Format = CU_AD_FORMAT_FLOAT;
  d.NumChannels = 1;
  return d;
}

// Each Arrays test starts with InitCuda (CudaTest).
using Arrays = CudaTest;

TEST_F(Arrays, SizesAreChargedAndRecordedAsArrayMemory) {
  const size_t free0 = FreeBytes();
  ActivityCollector collector({CUPTI_ACTIVITY_KIND_MEMORY2});
  const cudaChannelFormatDesc f1 = Float1();
  const cudaChannelFormatDesc uchar4 =
      cudaCreateChannelDesc(8, 8, 8, 8, cudaChannelFormatKindUnsigned);
  const cudaChannelFormatDesc short2 =
      cudaCreateChannelDesc(16, 16, 0, 0, cudaChannelFormatKindSigned);
  cudaArray_t a2d = nullptr;
  cudaArray_t a3d = nullptr;
  cudaArray_t a1d = nullptr;
  cudaMipmappedArray_t mip = nullptr;
  ASSERT_EQ(cudaMallocArray(&a2d, &f1, 100, 10), cudaSuccess);  // 4000 bytes, 4096 charged
  EXPECT_EQ(FreeBytes(), free0 - 4096);
  ASSERT_EQ(cudaMalloc3DArray(&a3d, &uchar4, cudaExtent{16, 8, 4}), cudaSuccess);  // 2048
  EXPECT_EQ(FreeBytes(), free0 - 4096 - 2048);
  ASSERT_EQ(cudaMallocArray(&a1d, &short2, 1000), cudaSuccess);  // 1D: 4000 bytes, 4096
  // Levels 64x32, 32x16, 16x8, 8x4 floats: 8192 + 2048 + 512 + 128 bytes, each level
  // starting at a 512-byte boundary: 11264 charged.
  ASSERT_EQ(cudaMallocMipmappedArray(&mip, &f1, cudaExtent{64, 32, 0}, 4), cudaSuccess);
  CUarray drv = nullptr;
  CUDA_ARRAY_DESCRIPTOR d{};
  d.Width = 10;
  d.Format = CU_AD_FORMAT_FLOAT;
  d.NumChannels = 4;
  ASSERT_EQ(cuArrayCreate(&drv, &d), CUDA_SUCCESS);  // 160 bytes, 512 charged
  const size_t charged = 4096 + 2048 + 4096 + 11264 + 512;
  EXPECT_EQ(FreeBytes(), free0 - charged);

  ASSERT_EQ(cudaFreeArray(a2d), cudaSuccess);
  ASSERT_EQ(cudaFreeArray(a3d), cudaSuccess);
  ASSERT_EQ(cudaFreeArray(a1d), cudaSuccess);
  ASSERT_EQ(cudaFreeMipmappedArray(mip), cudaSuccess);
  ASSERT_EQ(cuArrayDestroy(drv), CUDA_SUCCESS);
  EXPECT_EQ(FreeBytes(), free0);

  const Activity a = collector.Collect();
  std::vector<CUpti_ActivityMemory4> records;
  for (const auto& r : a.memory) {
    if (r.memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_ARRAY) records.push_back(r);
  }
  ASSERT_EQ(records.size(), 10u);
  const struct {
    const void* handle;
    uint64_t bytes;
  } expected[] = {{a2d, 4000}, {a3d, 2048}, {a1d, 4000}, {mip, 10880}, {drv, 160}};
  for (size_t i = 0; i < 10; ++i) {
    SCOPED_TRACE(i);
    const CUpti_ActivityMemory4& r = records[i];
    EXPECT_EQ(r.memoryOperationType, i < 5 ? CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION
                                           : CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE);
    EXPECT_EQ(r.address, reinterpret_cast<uintptr_t>(expected[i % 5].handle));
    EXPECT_EQ(r.bytes, expected[i % 5].bytes);
    EXPECT_EQ(r.deviceId, 0u);
    EXPECT_NE(r.contextId, 0u);
    EXPECT_NE(r.correlationId, 0u);
    EXPECT_EQ(r.isAsync, 0);
  }
}

TEST_F(Arrays, AnAllocationThatDoesNotFitFails) {
  const size_t free0 = FreeBytes();
  const cudaChannelFormatDesc float4 =
      cudaCreateChannelDesc(32, 32, 32, 32, cudaChannelFormatKindFloat);
  cudaArray_t a = nullptr;
  // 131072 x 65536 elements of 16 bytes: 128 GiB.
  EXPECT_EQ(cudaMallocArray(&a, &float4, 131072, 65536), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);
  EXPECT_EQ(FreeBytes(), free0);
}

TEST_F(Arrays, InfoDescriptorsAndLevels) {
  const cudaChannelFormatDesc half2 =
      cudaCreateChannelDesc(16, 16, 0, 0, cudaChannelFormatKindFloat);
  cudaArray_t a = nullptr;
  ASSERT_EQ(cudaMalloc3DArray(&a, &half2, cudaExtent{32, 0, 6}, cudaArrayLayered), cudaSuccess);
  cudaChannelFormatDesc desc{};
  cudaExtent extent{};
  unsigned flags = 99;
  ASSERT_EQ(cudaArrayGetInfo(&desc, &extent, &flags, a), cudaSuccess);
  EXPECT_EQ(desc.x, 16);
  EXPECT_EQ(desc.y, 16);
  EXPECT_EQ(desc.z, 0);
  EXPECT_EQ(desc.w, 0);
  EXPECT_EQ(desc.f, cudaChannelFormatKindFloat);
  EXPECT_EQ(extent.width, 32u);
  EXPECT_EQ(extent.height, 0u);
  EXPECT_EQ(extent.depth, 6u);
  EXPECT_EQ(flags, static_cast<unsigned>(cudaArrayLayered));
  ASSERT_EQ(cudaGetChannelDesc(&desc, a), cudaSuccess);
  EXPECT_EQ(desc.x, 16);
  // The runtime's handle is the driver's.
  CUDA_ARRAY3D_DESCRIPTOR d3{};
  ASSERT_EQ(cuArray3DGetDescriptor(&d3, Cu(a)), CUDA_SUCCESS);
  EXPECT_EQ(d3.Width, 32u);
  EXPECT_EQ(d3.Depth, 6u);
  EXPECT_EQ(d3.Format, CU_AD_FORMAT_HALF);
  EXPECT_EQ(d3.NumChannels, 2u);
  EXPECT_EQ(d3.Flags, static_cast<unsigned>(CUDA_ARRAY3D_LAYERED));
  CUDA_ARRAY_DESCRIPTOR d2{};
  EXPECT_EQ(cuArrayGetDescriptor(&d2, Cu(a)), CUDA_ERROR_INVALID_VALUE);  // not 1D or 2D
  ASSERT_EQ(cudaFreeArray(a), cudaSuccess);

  const cudaChannelFormatDesc f1 = Float1();
  cudaMipmappedArray_t mip = nullptr;
  ASSERT_EQ(cudaMallocMipmappedArray(&mip, &f1, cudaExtent{64, 32, 0}, 7), cudaSuccess);
  cudaArray_t level = nullptr;
  ASSERT_EQ(cudaGetMipmappedArrayLevel(&level, mip, 2), cudaSuccess);
  ASSERT_EQ(cudaArrayGetInfo(nullptr, &extent, nullptr, level), cudaSuccess);
  EXPECT_EQ(extent.width, 16u);
  EXPECT_EQ(extent.height, 8u);
  EXPECT_EQ(extent.depth, 0u);
  ASSERT_EQ(cudaGetMipmappedArrayLevel(&level, mip, 6), cudaSuccess);  // 1 x 1
  ASSERT_EQ(cuArrayGetDescriptor(&d2, Cu(level)), CUDA_SUCCESS);
  EXPECT_EQ(d2.Width, 1u);
  EXPECT_EQ(d2.Height, 1u);
  EXPECT_EQ(cudaGetMipmappedArrayLevel(&level, mip, 7), cudaErrorInvalidValue);
  // A level belongs to its mipmapped array.
  EXPECT_EQ(cuArrayDestroy(Cu(level)), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cudaFreeArray(level), cudaErrorInvalidValue);
  ASSERT_EQ(cudaFreeMipmappedArray(mip), cudaSuccess);
  EXPECT_EQ(cudaArrayGetInfo(nullptr, &extent, nullptr, level), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFreeMipmappedArray(mip), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMallocMipmappedArray(&mip, &f1, cudaExtent{64, 32, 0}, 8), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMallocMipmappedArray(&mip, &f1, cudaExtent{64, 32, 0}, 0), cudaErrorInvalidValue);
  cudaGetLastError();
}

TEST_F(Arrays, InvalidDescriptorsAndHandlesFail) {
  const cudaChannelFormatDesc f1 = Float1();
  cudaArray_t a = nullptr;
  EXPECT_EQ(cudaMallocArray(&a, &f1, 0, 4), cudaErrorInvalidValue);  // zero width
  EXPECT_EQ(cudaMallocArray(nullptr, &f1, 4, 4), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMallocArray(&a, nullptr, 4, 4), cudaErrorInvalidValue);
  const cudaChannelFormatDesc three =
      cudaCreateChannelDesc(32, 32, 32, 0, cudaChannelFormatKindFloat);
  EXPECT_EQ(cudaMallocArray(&a, &three, 4, 4), cudaErrorInvalidValue);
  const cudaChannelFormatDesc odd =
      cudaCreateChannelDesc(12, 0, 0, 0, cudaChannelFormatKindUnsigned);
  EXPECT_EQ(cudaMallocArray(&a, &odd, 4, 4), cudaErrorInvalidValue);
  const cudaChannelFormatDesc byte_float =
      cudaCreateChannelDesc(8, 0, 0, 0, cudaChannelFormatKindFloat);
  EXPECT_EQ(cudaMallocArray(&a, &byte_float, 4, 4), cudaErrorInvalidValue);
  const cudaChannelFormatDesc nv12 = cudaCreateChannelDesc(8, 8, 8, 0, cudaChannelFormatKindNV12);
  EXPECT_EQ(cudaMallocArray(&a, &nv12, 4, 4), cudaErrorNotSupported);
  EXPECT_EQ(cudaMallocArray(&a, &f1, 131073), cudaErrorInvalidValue);  // > maxTexture1D
  EXPECT_EQ(cudaMalloc3DArray(&a, &f1, cudaExtent{8, 0, 4}), cudaErrorInvalidValue);  // no height
  EXPECT_EQ(cudaMalloc3DArray(&a, &f1, cudaExtent{8, 4, 6}, cudaArrayCubemap),
            cudaErrorInvalidValue);  // faces must be square
  EXPECT_EQ(cudaMalloc3DArray(&a, &f1, cudaExtent{8, 8, 5}, cudaArrayCubemap),
            cudaErrorInvalidValue);  // six faces
  EXPECT_EQ(cudaMalloc3DArray(&a, &f1, cudaExtent{8, 8, 4}, cudaArrayTextureGather),
            cudaErrorInvalidValue);  // 2D only
  EXPECT_EQ(cudaMallocArray(&a, &f1, 8, 8, cudaArraySparse), cudaErrorNotSupported);
  EXPECT_EQ(cudaMallocArray(&a, &f1, 8, 8, 0x1000), cudaErrorInvalidValue);
  ASSERT_EQ(cudaMalloc3DArray(&a, &f1, cudaExtent{8, 8, 12}, cudaArrayCubemap | cudaArrayLayered),
            cudaSuccess);
  ASSERT_EQ(cudaFreeArray(a), cudaSuccess);
  EXPECT_EQ(cudaFreeArray(a), cudaErrorInvalidValue);  // twice
  EXPECT_EQ(cudaFreeArray(nullptr), cudaSuccess);      // "no operation is performed"
  int not_an_array = 0;
  EXPECT_EQ(cudaFreeArray(reinterpret_cast<cudaArray_t>(&not_an_array)), cudaErrorInvalidValue);
  cudaGetLastError();

  CUDA_ARRAY_DESCRIPTOR d{};
  d.Width = 16;
  d.Height = 16;
  d.Format = static_cast<CUarray_format>(0x05);  // not a format
  d.NumChannels = 1;
  CUarray h = nullptr;
  EXPECT_EQ(cuArrayCreate(&h, &d), CUDA_ERROR_INVALID_VALUE);
  d.Format = CU_AD_FORMAT_BC1_UNORM;  // a format the simulator does not model
  EXPECT_EQ(cuArrayCreate(&h, &d), CUDA_ERROR_NOT_SUPPORTED);
  d.Format = CU_AD_FORMAT_UNSIGNED_INT16;
  d.NumChannels = 3;
  EXPECT_EQ(cuArrayCreate(&h, &d), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuArrayCreate(&h, nullptr), CUDA_ERROR_INVALID_VALUE);
  d.NumChannels = 2;
  ASSERT_EQ(cuArrayCreate(&h, &d), CUDA_SUCCESS);
  CUDA_ARRAY_DESCRIPTOR back{};
  ASSERT_EQ(cuArrayGetDescriptor(&back, h), CUDA_SUCCESS);
  EXPECT_EQ(back.Width, 16u);
  EXPECT_EQ(back.Height, 16u);
  EXPECT_EQ(back.Format, CU_AD_FORMAT_UNSIGNED_INT16);
  EXPECT_EQ(back.NumChannels, 2u);
  ASSERT_EQ(cuArrayDestroy(h), CUDA_SUCCESS);
  EXPECT_EQ(cuArrayDestroy(h), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuArrayGetDescriptor(&back, h), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuArrayDestroy(nullptr), CUDA_ERROR_INVALID_HANDLE);
  CUmipmappedArray m = nullptr;
  EXPECT_EQ(cuMipmappedArrayDestroy(m), CUDA_ERROR_INVALID_HANDLE);
}

TEST_F(Arrays, BytesRoundTripHostArrayHost) {
  const cudaChannelFormatDesc f1 = Float1();
  cudaArray_t a = nullptr;
  ASSERT_EQ(cudaMallocArray(&a, &f1, 64, 16), cudaSuccess);
  const size_t row = 64 * sizeof(float);
  const auto in = Floats(size_t{64} * 16, 1);
  ASSERT_EQ(cudaMemcpy2DToArray(a, 0, 0, in.data(), row, row, 16, cudaMemcpyHostToDevice),
            cudaSuccess);
  std::vector<float> out(in.size());
  ASSERT_EQ(cudaMemcpy2DFromArray(out.data(), row, a, 0, 0, row, 16, cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(out, in);
  // A block of 8 x 4 elements at column 4, row 2, from a pitched host buffer.
  const auto block = Floats(size_t{10} * 4, 5000);
  ASSERT_EQ(cudaMemcpy2DToArray(a, 4 * sizeof(float), 2, block.data(), 10 * sizeof(float),
                                8 * sizeof(float), 4, cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DFromArray(out.data(), row, a, 0, 0, row, 16, cudaMemcpyDeviceToHost),
            cudaSuccess);
  std::vector<float> expected = in;
  for (size_t y = 0; y < 4; ++y) {
    for (size_t x = 0; x < 8; ++x) expected[(2 + y) * 64 + 4 + x] = block[y * 10 + x];
  }
  EXPECT_EQ(out, expected);
  // A block out of the array, a pitch below the width, an element split in two.
  EXPECT_EQ(cudaMemcpy2DToArray(a, 60 * sizeof(float), 0, block.data(), 40, 8 * sizeof(float), 1,
                                cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy2DToArray(a, 0, 14, block.data(), 40, 40, 4, cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy2DToArray(a, 0, 0, block.data(), 16, 40, 4, cudaMemcpyHostToDevice),
            cudaErrorInvalidPitchValue);
  EXPECT_EQ(cudaMemcpy2DToArray(a, 2, 0, block.data(), 40, 40, 1, cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy2DToArray(a, 0, 0, block.data(), 40, 40, 1, static_cast<cudaMemcpyKind>(7)),
            cudaErrorInvalidMemcpyDirection);
  ASSERT_EQ(cudaFreeArray(a), cudaSuccess);
  EXPECT_EQ(cudaMemcpy2DToArray(a, 0, 0, block.data(), 40, 40, 1, cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);  // freed
  cudaGetLastError();
}

TEST_F(Arrays, BytesRoundTripDeviceArrayDeviceAnd3D) {
  const cudaChannelFormatDesc f1 = Float1();
  const size_t row = 32 * sizeof(float);
  cudaArray_t a = nullptr;
  cudaArray_t b = nullptr;
  ASSERT_EQ(cudaMallocArray(&a, &f1, 32, 8), cudaSuccess);
  ASSERT_EQ(cudaMallocArray(&b, &f1, 32, 8), cudaSuccess);
  const auto in = Floats(size_t{32} * 8, 100);
  void* src = nullptr;
  void* dst = nullptr;
  ASSERT_EQ(cudaMalloc(&src, in.size() * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dst, in.size() * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(src, in.data(), in.size() * sizeof(float), cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DToArray(a, 0, 0, src, row, row, 8, cudaMemcpyDeviceToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DArrayToArray(b, 0, 0, a, 0, 0, row, 8), cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DFromArray(dst, row, b, 0, 0, row, 8, cudaMemcpyDeviceToDevice),
            cudaSuccess);
  std::vector<float> out(in.size());
  ASSERT_EQ(cudaMemcpy(out.data(), dst, out.size() * sizeof(float), cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(out, in);

  // 3D: host -> 3D array -> host, positions and the extent's width counted in elements.
  cudaArray_t cube = nullptr;
  ASSERT_EQ(cudaMalloc3DArray(&cube, &f1, cudaExtent{8, 4, 3}), cudaSuccess);
  const auto volume = Floats(size_t{8} * 4 * 3, 7);
  cudaMemcpy3DParms up{};
  up.srcPtr = cudaPitchedPtr{const_cast<float*>(volume.data()), 8 * sizeof(float), 8, 4};
  up.dstArray = cube;
  up.extent = cudaExtent{8, 4, 3};
  up.kind = cudaMemcpyHostToDevice;
  ASSERT_EQ(cudaMemcpy3D(&up), cudaSuccess);
  std::vector<float> back(volume.size());
  cudaMemcpy3DParms down{};
  down.srcArray = cube;
  down.dstPtr = cudaPitchedPtr{back.data(), 8 * sizeof(float), 8, 4};
  down.extent = cudaExtent{8, 4, 3};
  down.kind = cudaMemcpyDeviceToHost;
  ASSERT_EQ(cudaMemcpy3D(&down), cudaSuccess);
  EXPECT_EQ(back, volume);
  std::fill(back.begin(), back.end(), 0.0f);
  ASSERT_EQ(cudaMemcpy3DAsync(&down, nullptr), cudaSuccess);
  EXPECT_EQ(back, volume);
  // One element at (x 5, y 2, z 1) of the cube, by position.
  float one = 0;
  cudaMemcpy3DParms pick{};
  pick.srcArray = cube;
  pick.srcPos = cudaPos{5, 2, 1};
  pick.dstPtr = cudaPitchedPtr{&one, sizeof(float), 1, 1};
  pick.extent = cudaExtent{1, 1, 1};
  pick.kind = cudaMemcpyDeviceToHost;
  ASSERT_EQ(cudaMemcpy3D(&pick), cudaSuccess);
  EXPECT_EQ(one, volume[1 * 32 + 2 * 8 + 5]);
  // Array to array in 3D; both a source array and a source pointer is an error, so is an
  // extent out of the array, and arrays of different element sizes.
  cudaArray_t cube2 = nullptr;
  ASSERT_EQ(cudaMalloc3DArray(&cube2, &f1, cudaExtent{8, 4, 3}), cudaSuccess);
  cudaMemcpy3DParms a2a{};
  a2a.srcArray = cube;
  a2a.dstArray = cube2;
  a2a.extent = cudaExtent{8, 4, 3};
  a2a.kind = cudaMemcpyDeviceToDevice;
  ASSERT_EQ(cudaMemcpy3D(&a2a), cudaSuccess);
  down.srcArray = cube2;
  std::fill(back.begin(), back.end(), 0.0f);
  ASSERT_EQ(cudaMemcpy3D(&down), cudaSuccess);
  EXPECT_EQ(back, volume);
  cudaMemcpy3DParms both = up;
  both.srcArray = cube2;
  EXPECT_EQ(cudaMemcpy3D(&both), cudaErrorInvalidValue);
  cudaMemcpy3DParms too_deep = down;
  too_deep.extent.depth = 4;
  EXPECT_EQ(cudaMemcpy3D(&too_deep), cudaErrorInvalidValue);
  const cudaChannelFormatDesc bytes =
      cudaCreateChannelDesc(8, 0, 0, 0, cudaChannelFormatKindUnsigned);
  cudaArray_t byte_cube = nullptr;
  ASSERT_EQ(cudaMalloc3DArray(&byte_cube, &bytes, cudaExtent{8, 4, 3}), cudaSuccess);
  a2a.dstArray = byte_cube;
  EXPECT_EQ(cudaMemcpy3D(&a2a), cudaErrorInvalidValue);
  cudaGetLastError();
  for (cudaArray_t x : {a, b, cube, cube2, byte_cube}) ASSERT_EQ(cudaFreeArray(x), cudaSuccess);
  cudaFree(src);
  cudaFree(dst);
}

TEST_F(Arrays, LinearCopiesRunOverRows) {
  const cudaChannelFormatDesc f1 = Float1();
  cudaArray_t a = nullptr;
  cudaArray_t b = nullptr;
  ASSERT_EQ(cudaMallocArray(&a, &f1, 16, 8), cudaSuccess);  // rows of 64 bytes
  ASSERT_EQ(cudaMallocArray(&b, &f1, 16, 8), cudaSuccess);
  const auto zeros = std::vector<float>(size_t{16} * 8, 0.0f);
  ASSERT_EQ(cudaMemcpy2DToArray(a, 0, 0, zeros.data(), 64, 64, 8, cudaMemcpyHostToDevice),
            cudaSuccess);
  // 40 floats from (column 10, row 1): 6 to finish row 1, rows 2 and 3, 2 more in row 4.
  const auto in = Floats(40, 1);
  Recorder rec({kDriver});
  ASSERT_EQ(cudaMemcpyToArray(a, 10 * sizeof(float), 1, in.data(), 40 * sizeof(float),
                              cudaMemcpyHostToDevice),
            cudaSuccess);
  const auto copies =
      Driver(rec.Of(kDriver, CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D_v2), CUPTI_API_EXIT);
  EXPECT_EQ(copies.size(), 3u);  // partial row, whole rows, partial row
  std::vector<float> all(size_t{16} * 8);
  ASSERT_EQ(cudaMemcpy2DFromArray(all.data(), 64, a, 0, 0, 64, 8, cudaMemcpyDeviceToHost),
            cudaSuccess);
  std::vector<float> expected(size_t{16} * 8, 0.0f);
  std::copy(in.begin(), in.end(), expected.begin() + 16 + 10);
  EXPECT_EQ(all, expected);
  std::vector<float> out(40);
  ASSERT_EQ(cudaMemcpyFromArray(out.data(), a, 10 * sizeof(float), 1, 40 * sizeof(float),
                                cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(out, in);
  // Array to array with different offsets: the same bytes land 3 elements further on.
  ASSERT_EQ(cudaMemcpy2DToArray(b, 0, 0, zeros.data(), 64, 64, 8, cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpyArrayToArray(b, 13 * sizeof(float), 1, a, 10 * sizeof(float), 1,
                                   40 * sizeof(float)),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpyFromArray(out.data(), b, 13 * sizeof(float), 1, 40 * sizeof(float),
                                cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(out, in);
  // Past the end of the array.
  EXPECT_EQ(cudaMemcpyToArray(a, 0, 7, in.data(), 17 * sizeof(float), cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);
  cudaGetLastError();
  cudaFreeArray(a);
  cudaFreeArray(b);
}

TEST_F(Arrays, CopyRecordsCarryArrayKindsAndTheModelledDuration) {
  const Model m = ReadModel();
  const cudaChannelFormatDesc f1 = Float1();
  const size_t row = 64 * sizeof(float);
  const size_t bytes = row * 16;
  cudaArray_t a = nullptr;
  cudaArray_t b = nullptr;
  ASSERT_EQ(cudaMallocArray(&a, &f1, 64, 16), cudaSuccess);
  ASSERT_EQ(cudaMallocArray(&b, &f1, 64, 16), cudaSuccess);
  std::vector<char> pageable(bytes, 1);
  void* pinned = nullptr;
  void* dev = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, bytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dev, bytes), cudaSuccess);
  cudaStream_t stream = nullptr;
  unsigned long long stream_id = 0;
  ASSERT_NO_FATAL_FAILURE(CreateStreamWithId(&stream, &stream_id));

  ActivityCollector collector({CUPTI_ACTIVITY_KIND_MEMCPY});
  Recorder rec({kRuntime});
  const auto h2d = cudaMemcpyHostToDevice;
  const auto d2h = cudaMemcpyDeviceToHost;
  const auto d2d = cudaMemcpyDeviceToDevice;
  ASSERT_EQ(cudaMemcpy2DToArray(a, 0, 0, pageable.data(), row, row, 16, h2d), cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DToArray(a, 0, 0, pinned, row, row, 16, h2d), cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DFromArray(pageable.data(), row, a, 0, 0, row, 16, d2h), cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DToArray(a, 0, 0, dev, row, row, 16, d2d), cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DFromArray(dev, row, a, 0, 0, row, 16, d2d), cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DArrayToArray(b, 0, 0, a, 0, 0, row, 16, d2d), cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DToArrayAsync(a, 0, 0, pinned, row, row, 16, h2d, stream), cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DFromArrayAsync(pinned, row, a, 0, 0, row, 16, d2h, stream), cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DToArray(a, 0, 0, pageable.data(), row, row, 16, cudaMemcpyDefault),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DToArray_ptds(a, 0, 0, pageable.data(), row, row, 16, h2d), cudaSuccess);
  const Activity act = collector.Collect();
  std::vector<uint32_t> calls;
  for (const Event& e : rec.Take()) {
    if (e.site == CUPTI_API_ENTER && e.name.find("Array") != std::string::npos) {
      calls.push_back(e.correlation_id);
    }
  }
  ASSERT_EQ(calls.size(), 10u);
  ASSERT_EQ(act.memcpy.size(), 10u);
  const struct {
    uint8_t copy_kind;
    uint8_t src;
    uint8_t dst;
    bool async;
    double gbps;
  } expected[] = {
      {CUPTI_ACTIVITY_MEMCPY_KIND_HTOA, kPageable, kArray, false, m.bw_pageable},
      {CUPTI_ACTIVITY_MEMCPY_KIND_HTOA, kPinned, kArray, false, m.bw_pinned},
      {CUPTI_ACTIVITY_MEMCPY_KIND_ATOH, kArray, kPageable, false, m.bw_pageable},
      {CUPTI_ACTIVITY_MEMCPY_KIND_DTOA, kDevice, kArray, false, m.bw_device},
      {CUPTI_ACTIVITY_MEMCPY_KIND_ATOD, kArray, kDevice, false, m.bw_device},
      {CUPTI_ACTIVITY_MEMCPY_KIND_ATOA, kArray, kArray, false, m.bw_device},
      {CUPTI_ACTIVITY_MEMCPY_KIND_HTOA, kPinned, kArray, true, m.bw_pinned},
      {CUPTI_ACTIVITY_MEMCPY_KIND_ATOH, kArray, kPinned, true, m.bw_pinned},
      {CUPTI_ACTIVITY_MEMCPY_KIND_HTOA, kPageable, kArray, false, m.bw_pageable},
      {CUPTI_ACTIVITY_MEMCPY_KIND_HTOA, kPageable, kArray, false, m.bw_pageable},
  };
  for (size_t i = 0; i < act.memcpy.size(); ++i) {
    SCOPED_TRACE(i);
    const CUpti_ActivityMemcpy6& r = act.memcpy[i];
    EXPECT_EQ(r.copyKind, expected[i].copy_kind);
    EXPECT_EQ(r.srcKind, expected[i].src);
    EXPECT_EQ(r.dstKind, expected[i].dst);
    EXPECT_EQ(r.bytes, bytes);
    EXPECT_EQ(r.end - r.start, m.CopyNs(bytes, expected[i].gbps));
    EXPECT_EQ(r.flags, expected[i].async ? CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC : 0);
    if (expected[i].async) {
      EXPECT_EQ(r.streamId, stream_id);
    }
    EXPECT_EQ(r.deviceId, 0u);
    EXPECT_EQ(r.correlationId, calls[i]);
    EXPECT_EQ(r.runtimeCorrelationId, 0u);  // GWSIM_CORRELATION=shared
    if (i > 0) {
      EXPECT_EQ(r.start, act.memcpy[i - 1].end);
    }
  }
  cudaStreamDestroy(stream);
  cudaFree(dev);
  cudaFreeHost(pinned);
  cudaFreeArray(a);
  cudaFreeArray(b);
}

TEST_F(Arrays, DriverOneDimensionalCopies) {
  const Model m = ReadModel();
  CUDA_ARRAY_DESCRIPTOR d = FloatArray(256);
  CUarray arr = nullptr;
  CUarray arr2 = nullptr;
  ASSERT_EQ(cuArrayCreate(&arr, &d), CUDA_SUCCESS);
  ASSERT_EQ(cuArrayCreate(&arr2, &d), CUDA_SUCCESS);
  CUdeviceptr dev = 0;
  CUdeviceptr dev2 = 0;
  ASSERT_EQ(cuMemAlloc(&dev, 1024), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAlloc(&dev2, 1024), CUDA_SUCCESS);
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, 0), CUDA_SUCCESS);
  const auto in = Floats(256, 1);
  const auto in2 = Floats(256, 1000);
  std::vector<float> out(256);
  size_t seen_offset = 0;
  CUarray seen_array = nullptr;
  const void* seen_src = nullptr;
  ActivityCollector collector({CUPTI_ACTIVITY_KIND_MEMCPY});
  Recorder rec(
      {kDriver}, [&](CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
        if (const auto* p =
                ParamsAt<cuMemcpyHtoA_v2_params>(kDriver, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoA_v2,
                                                 CUPTI_API_ENTER, domain, cbid, data)) {
          seen_array = p->dstArray;
          seen_src = p->srcHost;
          seen_offset = p->dstOffset;
        }
      });
  ASSERT_EQ(cuMemcpyHtoA(arr, 0, in.data(), 1024), CUDA_SUCCESS);
  EXPECT_EQ(seen_array, arr);
  EXPECT_EQ(seen_src, in.data());
  EXPECT_EQ(seen_offset, 0u);
  ASSERT_EQ(cuMemcpyAtoH(out.data(), arr, 0, 1024), CUDA_SUCCESS);
  EXPECT_EQ(out, in);
  ASSERT_EQ(cuMemcpyHtoA(arr, 64, in2.data(), 128), CUDA_SUCCESS);  // elements 16..47
  EXPECT_EQ(seen_src, in2.data());
  EXPECT_EQ(seen_offset, 64u);
  ASSERT_EQ(cuMemcpyAtoH_v2_ptds(out.data(), arr, 0, 1024), CUDA_SUCCESS);
  std::vector<float> expected = in;
  std::copy(in2.begin(), in2.begin() + 32, expected.begin() + 16);
  EXPECT_EQ(out, expected);
  ASSERT_EQ(cuMemcpyHtoA_v2_ptds(arr, 0, in.data(), 1024), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyAtoD(dev, arr, 0, 1024), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoA(arr2, 0, dev, 1024), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyAtoA(arr, 512, arr2, 0, 512), CUDA_SUCCESS);  // first half over the second
  ASSERT_EQ(cuMemcpyAtoD_v2_ptds(dev2, arr, 0, 1024), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoH(out.data(), dev2, 1024), CUDA_SUCCESS);
  expected = in;
  std::copy(in.begin(), in.begin() + 128, expected.begin() + 128);
  EXPECT_EQ(out, expected);
  ASSERT_EQ(cuMemcpyDtoA_v2_ptds(arr2, 0, dev2, 1024), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyAtoA_v2_ptds(arr, 0, arr2, 0, 1024), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyHtoAAsync(arr, 0, in2.data(), 1024, stream), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyAtoHAsync(out.data(), arr, 0, 1024, stream), CUDA_SUCCESS);
  EXPECT_EQ(out, in2);
  ASSERT_EQ(cuMemcpyHtoAAsync_v2_ptsz(arr, 0, in.data(), 1024, stream), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyAtoHAsync_v2_ptsz(out.data(), arr, 0, 1024, stream), CUDA_SUCCESS);
  EXPECT_EQ(out, in);

  const struct {
    const char* name;
    CUpti_CallbackId cbid;
    uint8_t copy_kind;
    uint8_t src;
    uint8_t dst;
    double gbps;
    uint64_t bytes;
  } expect[] = {
      {GWSIM_COPY(cuMemcpyHtoA_v2, HTOA), kPageable, kArray, m.bw_pageable, 1024},
      {GWSIM_COPY(cuMemcpyAtoH_v2, ATOH), kArray, kPageable, m.bw_pageable, 1024},
      {GWSIM_COPY(cuMemcpyHtoA_v2, HTOA), kPageable, kArray, m.bw_pageable, 128},
      {GWSIM_COPY(cuMemcpyAtoH_v2_ptds, ATOH), kArray, kPageable, m.bw_pageable, 1024},
      {GWSIM_COPY(cuMemcpyHtoA_v2_ptds, HTOA), kPageable, kArray, m.bw_pageable, 1024},
      {GWSIM_COPY(cuMemcpyAtoD_v2, ATOD), kArray, kDevice, m.bw_device, 1024},
      {GWSIM_COPY(cuMemcpyDtoA_v2, DTOA), kDevice, kArray, m.bw_device, 1024},
      {GWSIM_COPY(cuMemcpyAtoA_v2, ATOA), kArray, kArray, m.bw_device, 512},
      {GWSIM_COPY(cuMemcpyAtoD_v2_ptds, ATOD), kArray, kDevice, m.bw_device, 1024},
      {GWSIM_COPY(cuMemcpyDtoH_v2, DTOH), kDevice, kPageable, m.bw_pageable, 1024},
      {GWSIM_COPY(cuMemcpyDtoA_v2_ptds, DTOA), kDevice, kArray, m.bw_device, 1024},
      {GWSIM_COPY(cuMemcpyAtoA_v2_ptds, ATOA), kArray, kArray, m.bw_device, 1024},
      {GWSIM_COPY(cuMemcpyHtoAAsync_v2, HTOA), kPageable, kArray, m.bw_pageable, 1024},
      {GWSIM_COPY(cuMemcpyAtoHAsync_v2, ATOH), kArray, kPageable, m.bw_pageable, 1024},
      {GWSIM_COPY(cuMemcpyHtoAAsync_v2_ptsz, HTOA), kPageable, kArray, m.bw_pageable, 1024},
      {GWSIM_COPY(cuMemcpyAtoHAsync_v2_ptsz, ATOH), kArray, kPageable, m.bw_pageable, 1024},
  };
  const auto exits = Driver(rec.Take(), CUPTI_API_EXIT);
  const Activity act = collector.Collect();
  ASSERT_EQ(exits.size(), std::size(expect));
  ASSERT_EQ(act.memcpy.size(), std::size(expect));
  for (size_t i = 0; i < std::size(expect); ++i) {
    SCOPED_TRACE(expect[i].name);
    EXPECT_EQ(exits[i].cbid, expect[i].cbid);
    EXPECT_EQ(exits[i].name, expect[i].name);
    EXPECT_EQ(exits[i].result, CUDA_SUCCESS);
    const CUpti_ActivityMemcpy6& r = act.memcpy[i];
    EXPECT_EQ(r.copyKind, expect[i].copy_kind);
    EXPECT_EQ(r.srcKind, expect[i].src);
    EXPECT_EQ(r.dstKind, expect[i].dst);
    EXPECT_EQ(r.bytes, expect[i].bytes);
    EXPECT_EQ(r.end - r.start, m.CopyNs(expect[i].bytes, expect[i].gbps));
    EXPECT_EQ(r.flags, i >= 12 ? CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC : 0);
    EXPECT_EQ(r.correlationId, exits[i].correlation_id);
    EXPECT_EQ(r.runtimeCorrelationId, 0u);
  }

  // 1D only, whole elements, inside the array, elements of the same size, a live array.
  CUDA_ARRAY_DESCRIPTOR d2 = d;
  d2.Height = 4;
  CUarray flat = nullptr;
  ASSERT_EQ(cuArrayCreate(&flat, &d2), CUDA_SUCCESS);
  EXPECT_EQ(cuMemcpyHtoA(flat, 0, in.data(), 64), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemcpyHtoA(arr, 2, in.data(), 64), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemcpyHtoA(arr, 0, in.data(), 62), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemcpyHtoA(arr, 1020, in.data(), 8), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemcpyAtoD(dev, arr, 0, 2048), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemcpyDtoA(arr, 0, reinterpret_cast<CUdeviceptr>(in.data()), 64),
            CUDA_ERROR_INVALID_VALUE);  // not device memory
  CUDA_ARRAY_DESCRIPTOR bytes_desc = d;
  bytes_desc.Format = CU_AD_FORMAT_UNSIGNED_INT8;
  CUarray bytes = nullptr;
  ASSERT_EQ(cuArrayCreate(&bytes, &bytes_desc), CUDA_SUCCESS);
  EXPECT_EQ(cuMemcpyAtoA(bytes, 0, arr, 0, 64), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuArrayDestroy(arr2), CUDA_SUCCESS);
  EXPECT_EQ(cuMemcpyAtoH(out.data(), arr2, 0, 64), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemcpyHtoA(nullptr, 0, in.data(), 64), CUDA_ERROR_INVALID_VALUE);
  for (CUarray x : {arr, flat, bytes}) ASSERT_EQ(cuArrayDestroy(x), CUDA_SUCCESS);
  cuStreamDestroy(stream);
  cuMemFree(dev);
  cuMemFree(dev2);
}

TEST_F(Arrays, ResetReleasesArraysAndTheirHandles) {
  const cudaChannelFormatDesc f1 = Float1();
  cudaArray_t a = nullptr;
  ASSERT_EQ(cudaMallocArray(&a, &f1, 1024, 1024), cudaSuccess);  // 4 MiB
  const size_t with_array = FreeBytes();
  ASSERT_EQ(cudaDeviceReset(), cudaSuccess);
  InitCuda();
  EXPECT_GE(FreeBytes(), with_array + (4u << 20));
  cudaExtent extent{};
  EXPECT_EQ(cudaArrayGetInfo(nullptr, &extent, nullptr, a), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFreeArray(a), cudaErrorInvalidValue);
  cudaGetLastError();
}

// Every driver 2D/3D copy entry point: traced with its cbid and params, a MEMCPY record each.
TEST(Copy2D3D, EveryDriverEntryPointIsTracedWithItsDescriptor) {
  InitCuda();
  const Model m = ReadModel();
  CUcontext ctx = nullptr;
  ASSERT_EQ(cuCtxGetCurrent(&ctx), CUDA_SUCCESS);
  CUDA_ARRAY_DESCRIPTOR d = FloatArray(64, 16);
  CUarray arr = nullptr;
  CUarray arr2 = nullptr;
  ASSERT_EQ(cuArrayCreate(&arr, &d), CUDA_SUCCESS);
  ASSERT_EQ(cuArrayCreate(&arr2, &d), CUDA_SUCCESS);
  CUDA_ARRAY3D_DESCRIPTOR d3 = FloatArray3D(16, 8, 4);
  CUarray cube = nullptr;
  ASSERT_EQ(cuArray3DCreate(&cube, &d3), CUDA_SUCCESS);
  const size_t row = 256;
  const size_t plane = row * 16;             // 4096 bytes: the 2D array
  const size_t volume = size_t{64} * 8 * 4;  // 2048 bytes: the 3D array
  CUdeviceptr dev = 0;
  CUdeviceptr dev2 = 0;
  ASSERT_EQ(cuMemAlloc(&dev, plane), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAlloc(&dev2, plane), CUDA_SUCCESS);
  const auto in = Floats(1024, 3);
  std::vector<float> host(1024);
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, 0), CUDA_SUCCESS);

  auto two_d = [&](CUmemorytype st, const void* sh, CUdeviceptr sd, CUarray sa, CUmemorytype dt,
                   void* dh, CUdeviceptr dd, CUarray da) {
    CUDA_MEMCPY2D c{};
    SetEnds(&c, st, sh, sd, sa, dt, dh, dd, da, row, row);
    c.WidthInBytes = row;
    c.Height = 16;
    return c;
  };
  auto three_d = [&](CUmemorytype st, const void* sh, CUdeviceptr sd, CUarray sa, CUmemorytype dt,
                     void* dh, CUdeviceptr dd, CUarray da) {
    CUDA_MEMCPY3D c{};
    SetEnds(&c, st, sh, sd, sa, dt, dh, dd, da, 64, 64);
    c.srcHeight = 8;
    c.dstHeight = 8;
    c.WidthInBytes = 64;
    c.Height = 8;
    c.Depth = 4;
    return c;
  };
  auto peer = [&](const CUDA_MEMCPY3D& c) {
    CUDA_MEMCPY3D_PEER p{};
    SetEnds(&p, c.srcMemoryType, c.srcHost, c.srcDevice, c.srcArray, c.dstMemoryType, c.dstHost,
            c.dstDevice, c.dstArray, c.srcPitch, c.dstPitch);
    p.srcContext = ctx;
    p.dstContext = ctx;
    p.srcHeight = c.srcHeight;
    p.dstHeight = c.dstHeight;
    p.WidthInBytes = c.WidthInBytes;
    p.Height = c.Height;
    p.Depth = c.Depth;
    return p;
  };
  const auto H = CU_MEMORYTYPE_HOST;
  const auto D = CU_MEMORYTYPE_DEVICE;
  const auto A = CU_MEMORYTYPE_ARRAY;
  const CUDA_MEMCPY2D c2[] = {
      two_d(H, in.data(), 0, nullptr, A, nullptr, 0, arr),        // HTOA
      two_d(A, nullptr, 0, arr, H, host.data(), 0, nullptr),      // ATOH
      two_d(D, nullptr, dev, nullptr, A, nullptr, 0, arr2),       // DTOA
      two_d(A, nullptr, 0, arr2, D, nullptr, dev2, nullptr),      // ATOD
      two_d(H, in.data(), 0, nullptr, D, nullptr, dev, nullptr),  // HTOD
      two_d(A, nullptr, 0, arr, A, nullptr, 0, arr2),             // ATOA
  };
  const CUDA_MEMCPY3D c3[] = {
      three_d(H, in.data(), 0, nullptr, A, nullptr, 0, cube),    // HTOA
      three_d(A, nullptr, 0, cube, H, host.data(), 0, nullptr),  // ATOH
      three_d(D, nullptr, dev, nullptr, A, nullptr, 0, cube),    // DTOA
      three_d(A, nullptr, 0, cube, D, nullptr, dev2, nullptr),   // ATOD
  };
  const CUDA_MEMCPY3D_PEER cp[] = {
      peer(three_d(D, nullptr, dev, nullptr, D, nullptr, dev2, nullptr)),  // DTOD
      peer(three_d(A, nullptr, 0, cube, D, nullptr, dev, nullptr)),        // ATOD
      peer(three_d(D, nullptr, dev2, nullptr, A, nullptr, 0, cube)),       // DTOA
      peer(three_d(H, in.data(), 0, nullptr, D, nullptr, dev, nullptr)),   // HTOD
  };
  struct Call {
    const char* name;
    CUpti_CallbackId cbid;
    uint8_t copy_kind;
    const void* descriptor;
    bool async;
    uint8_t src;
    uint8_t dst;
    double gbps;
    uint64_t bytes;
  };
  const uint8_t P = kPageable;
  const double dev_bw = m.bw_device;
  const double host_bw = m.bw_pageable;
  const Call calls[] = {
      {GWSIM_COPY(cuMemcpy2D_v2, HTOA), &c2[0], false, P, kArray, host_bw, plane},
      {GWSIM_COPY(cuMemcpy2D_v2_ptds, ATOH), &c2[1], false, kArray, P, host_bw, plane},
      {GWSIM_COPY(cuMemcpy2DUnaligned_v2, DTOA), &c2[2], false, kDevice, kArray, dev_bw, plane},
      {GWSIM_COPY(cuMemcpy2DUnaligned_v2_ptds, ATOD), &c2[3], false, kArray, kDevice, dev_bw,
       plane},
      {GWSIM_COPY(cuMemcpy2DAsync_v2, HTOD), &c2[4], true, P, kDevice, host_bw, plane},
      {GWSIM_COPY(cuMemcpy2DAsync_v2_ptsz, ATOA), &c2[5], true, kArray, kArray, dev_bw, plane},
      {GWSIM_COPY(cuMemcpy3D_v2, HTOA), &c3[0], false, P, kArray, host_bw, volume},
      {GWSIM_COPY(cuMemcpy3D_v2_ptds, ATOH), &c3[1], false, kArray, P, host_bw, volume},
      {GWSIM_COPY(cuMemcpy3DAsync_v2, DTOA), &c3[2], true, kDevice, kArray, dev_bw, volume},
      {GWSIM_COPY(cuMemcpy3DAsync_v2_ptsz, ATOD), &c3[3], true, kArray, kDevice, dev_bw, volume},
      {GWSIM_COPY(cuMemcpy3DPeer, DTOD), &cp[0], false, kDevice, kDevice, dev_bw, volume},
      {GWSIM_COPY(cuMemcpy3DPeer_ptds, ATOD), &cp[1], false, kArray, kDevice, dev_bw, volume},
      {GWSIM_COPY(cuMemcpy3DPeerAsync, DTOA), &cp[2], true, kDevice, kArray, dev_bw, volume},
      {GWSIM_COPY(cuMemcpy3DPeerAsync_ptsz, HTOD), &cp[3], true, P, kDevice, host_bw, volume},
  };
  // Every params struct of these entry points starts with pCopy; the async ones then hStream.
  struct Seen {
    const void* descriptor = nullptr;
    CUstream stream = nullptr;
  };
  std::vector<Seen> seen;
  ActivityCollector collector({CUPTI_ACTIVITY_KIND_MEMCPY});
  Recorder rec({kDriver}, [&](CUpti_CallbackDomain, CUpti_CallbackId cbid, const void* data) {
    const auto* cb = static_cast<const CUpti_CallbackData*>(data);
    if (cb->callbackSite != CUPTI_API_ENTER || cb->functionParams == nullptr) return;
    struct Prefix {
      const void* pCopy;
      CUstream hStream;
    };
    const auto* p = static_cast<const Prefix*>(cb->functionParams);
    const bool async = cbid == CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DAsync_v2 ||
                       cbid == CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DAsync_v2_ptsz ||
                       cbid == CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DAsync_v2 ||
                       cbid == CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DAsync_v2_ptsz ||
                       cbid == CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeerAsync ||
                       cbid == CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeerAsync_ptsz;
    seen.push_back(Seen{p->pCopy, async ? p->hStream : nullptr});
  });
  ASSERT_EQ(cuMemcpy2D(&c2[0]), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpy2D_v2_ptds(&c2[1]), CUDA_SUCCESS);
  EXPECT_EQ(host, in);
  ASSERT_EQ(cuMemcpy2DUnaligned(&c2[2]), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpy2DUnaligned_v2_ptds(&c2[3]), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpy2DAsync(&c2[4], stream), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpy2DAsync_v2_ptsz(&c2[5], stream), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpy3D(&c3[0]), CUDA_SUCCESS);
  std::fill(host.begin(), host.end(), 0.0f);
  ASSERT_EQ(cuMemcpy3D_v2_ptds(&c3[1]), CUDA_SUCCESS);
  EXPECT_TRUE(std::equal(in.begin(), in.begin() + 512, host.begin()));
  ASSERT_EQ(cuMemcpy3DAsync(&c3[2], stream), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpy3DAsync_v2_ptsz(&c3[3], stream), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpy3DPeer(&cp[0]), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpy3DPeer_ptds(&cp[1]), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpy3DPeerAsync(&cp[2], stream), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpy3DPeerAsync_ptsz(&cp[3], stream), CUDA_SUCCESS);
  std::fill(host.begin(), host.end(), 0.0f);
  ASSERT_EQ(cuMemcpyDtoH(host.data(), dev, volume), CUDA_SUCCESS);
  EXPECT_TRUE(std::equal(in.begin(), in.begin() + 512, host.begin()));

  const auto exits = Driver(rec.Take(), CUPTI_API_EXIT);
  const Activity act = collector.Collect();
  ASSERT_EQ(seen.size(), std::size(calls) + 1);  // + the cuMemcpyDtoH
  ASSERT_EQ(exits.size(), std::size(calls) + 1);
  ASSERT_EQ(act.memcpy.size(), std::size(calls) + 1);
  for (size_t i = 0; i < std::size(calls); ++i) {
    const Call& c = calls[i];
    SCOPED_TRACE(c.name);
    EXPECT_EQ(exits[i].cbid, c.cbid);
    EXPECT_EQ(exits[i].name, c.name);
    EXPECT_EQ(exits[i].result, CUDA_SUCCESS);
    EXPECT_EQ(seen[i].descriptor, c.descriptor);
    EXPECT_EQ(seen[i].stream, c.async ? stream : nullptr);
    const CUpti_ActivityMemcpy6& r = act.memcpy[i];
    EXPECT_EQ(r.copyKind, c.copy_kind);
    EXPECT_EQ(r.srcKind, c.src);
    EXPECT_EQ(r.dstKind, c.dst);
    EXPECT_EQ(r.bytes, c.bytes);
    EXPECT_EQ(r.end - r.start, m.CopyNs(c.bytes, c.gbps));
    EXPECT_EQ(r.flags, c.async ? CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC : 0);
    EXPECT_EQ(r.correlationId, exits[i].correlation_id);
  }
  for (CUarray x : {arr, arr2, cube}) ASSERT_EQ(cuArrayDestroy(x), CUDA_SUCCESS);
  cuStreamDestroy(stream);
  cuMemFree(dev);
  cuMemFree(dev2);
}

TEST(Copy2D3D, DescriptorsAreValidated) {
  InitCuda();
  CUDA_ARRAY_DESCRIPTOR d = FloatArray(16, 4);
  CUarray arr = nullptr;
  ASSERT_EQ(cuArrayCreate(&arr, &d), CUDA_SUCCESS);
  std::vector<char> host(1024);
  CUDA_MEMCPY2D c{};
  c.srcMemoryType = CU_MEMORYTYPE_HOST;
  c.srcHost = host.data();
  c.srcPitch = 64;
  c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
  c.dstArray = arr;
  c.WidthInBytes = 64;
  c.Height = 4;
  ASSERT_EQ(cuMemcpy2D(&c), CUDA_SUCCESS);
  CUDA_MEMCPY2D bad = c;
  bad.dstXInBytes = 2;  // not a whole element
  bad.WidthInBytes = 32;
  EXPECT_EQ(cuMemcpy2D(&bad), CUDA_ERROR_INVALID_VALUE);
  bad = c;
  bad.dstY = 1;  // rows 1..4 of 4
  EXPECT_EQ(cuMemcpy2D(&bad), CUDA_ERROR_INVALID_VALUE);
  bad = c;
  bad.WidthInBytes = 68;
  bad.srcPitch = 68;
  EXPECT_EQ(cuMemcpy2D(&bad), CUDA_ERROR_INVALID_VALUE);
  bad = c;
  bad.dstMemoryType = static_cast<CUmemorytype>(0);
  EXPECT_EQ(cuMemcpy2D(&bad), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemcpy2D(nullptr), CUDA_ERROR_INVALID_VALUE);
  CUDA_MEMCPY3D c3{};
  c3.srcMemoryType = CU_MEMORYTYPE_HOST;
  c3.srcHost = host.data();
  c3.srcPitch = 64;
  c3.srcHeight = 4;
  c3.dstMemoryType = CU_MEMORYTYPE_ARRAY;
  c3.dstArray = arr;
  c3.WidthInBytes = 64;
  c3.Height = 4;
  c3.Depth = 1;
  ASSERT_EQ(cuMemcpy3D(&c3), CUDA_SUCCESS);
  CUDA_MEMCPY3D bad3 = c3;
  bad3.dstLOD = 1;  // "must be set to 0"
  EXPECT_EQ(cuMemcpy3D(&bad3), CUDA_ERROR_INVALID_VALUE);
  bad3 = c3;
  bad3.reserved0 = host.data();  // "must be NULL"
  EXPECT_EQ(cuMemcpy3D(&bad3), CUDA_ERROR_INVALID_VALUE);
  bad3 = c3;
  bad3.Depth = 2;  // a 2D array has one slice
  EXPECT_EQ(cuMemcpy3D(&bad3), CUDA_ERROR_INVALID_VALUE);
  CUDA_MEMCPY3D_PEER p{};
  p.srcMemoryType = CU_MEMORYTYPE_HOST;
  p.srcHost = host.data();
  p.srcPitch = 64;
  p.dstMemoryType = CU_MEMORYTYPE_ARRAY;
  p.dstArray = arr;  // the context of an array side is ignored
  p.WidthInBytes = 64;
  p.Height = 4;
  p.Depth = 1;
  EXPECT_EQ(cuMemcpy3DPeer(&p), CUDA_ERROR_INVALID_CONTEXT);  // no source context
  CUcontext ctx = nullptr;
  ASSERT_EQ(cuCtxGetCurrent(&ctx), CUDA_SUCCESS);
  p.srcContext = ctx;
  EXPECT_EQ(cuMemcpy3DPeer(&p), CUDA_SUCCESS);
  EXPECT_EQ(cuMemcpy3DPeer(nullptr), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuArrayDestroy(arr), CUDA_SUCCESS);
  EXPECT_EQ(cuMemcpy2D(&c), CUDA_ERROR_INVALID_VALUE);  // a destroyed array
}

TEST(Copy2D3D, PeerCopiesBetweenDevicesThroughTheRuntime) {
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  if (count < 2) GTEST_SKIP() << "needs GWSIM_DEVICE_COUNT >= 2";
  InitCuda();
  const auto in = Floats(size_t{16} * 4, 9);
  void* src = nullptr;
  ASSERT_EQ(cudaMalloc(&src, 256), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(src, in.data(), 256, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  void* dst = nullptr;
  cudaArray_t arr = nullptr;
  const cudaChannelFormatDesc f1 = Float1();
  ASSERT_EQ(cudaMalloc(&dst, 256), cudaSuccess);
  ASSERT_EQ(cudaMallocArray(&arr, &f1, 16, 4), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ActivityCollector collector({CUPTI_ACTIVITY_KIND_MEMCPY});
  Recorder rec({kRuntime, kDriver});
  cudaMemcpy3DPeerParms p{};
  p.srcPtr = cudaPitchedPtr{src, 64, 16, 4};
  p.srcDevice = 0;
  p.dstPtr = cudaPitchedPtr{dst, 64, 16, 4};
  p.dstDevice = 1;
  p.extent = cudaExtent{64, 4, 1};
  ASSERT_EQ(cudaMemcpy3DPeer(&p), cudaSuccess);
  cudaMemcpy3DPeerParms to_array{};
  to_array.srcPtr = cudaPitchedPtr{src, 64, 16, 4};
  to_array.srcDevice = 0;
  to_array.dstArray = arr;
  to_array.dstDevice = 1;
  to_array.extent = cudaExtent{16, 4, 1};  // elements of the array
  ASSERT_EQ(cudaMemcpy3DPeerAsync(&to_array, nullptr), cudaSuccess);
  const auto events = rec.Take();
  std::vector<std::string> names;
  for (const Event& e : events) {
    if (e.site == CUPTI_API_ENTER) names.push_back(e.name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"cudaMemcpy3DPeer", "cuMemcpy3DPeer",
                                             "cudaMemcpy3DPeerAsync", "cuMemcpy3DPeerAsync"}));
  const Activity a = collector.Collect();
  ASSERT_EQ(a.memcpy.size(), 2u);
  EXPECT_EQ(a.memcpy[0].copyKind, CUPTI_ACTIVITY_MEMCPY_KIND_PTOP);
  EXPECT_EQ(a.memcpy[0].bytes, 256u);
  EXPECT_EQ(a.memcpy[1].copyKind, CUPTI_ACTIVITY_MEMCPY_KIND_DTOA);
  EXPECT_EQ(a.memcpy[1].flags, CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  std::vector<float> out(in.size());
  ASSERT_EQ(cudaMemcpy(out.data(), dst, 256, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(out, in);
  std::fill(out.begin(), out.end(), 0.0f);
  ASSERT_EQ(cudaMemcpy2DFromArray(out.data(), 64, arr, 0, 0, 64, 4, cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(out, in);
  cudaFreeArray(arr);
  cudaFree(dst);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  cudaFree(src);
}

}  // namespace
}  // namespace gwsim::test
