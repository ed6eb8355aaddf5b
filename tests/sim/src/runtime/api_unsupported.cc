// Exported runtime API that the simulator links but does not simulate: calls a CUDA build of
// PyTorch (libtorch_cuda.so, libc10_cuda.so, libtorch_nvshmem.so) references, so that the
// library loads (Python opens extension modules with RTLD_NOW), but that none of the paths the
// simulator's tests run calls. Each is traced under its own cbid, records
// cudaErrorNotSupported as the thread's last error and returns it, as NVIDIA's runtime does for
// a feature the device lacks: a program that does call one fails cleanly, never with a wrong
// answer. tests/sim/README.md ("Linked, not simulated") lists them.
#include "runtime/core.h"
#include "runtime/cuda_headers.h"

namespace gwsim::rt {
namespace {

// Initialises the driver (as every call that needs it does) and refuses.
cudaError_t NotSimulated() {
  if (cudaError_t e = EnsureInit(); e != cudaSuccess) return e;
  return cudaErrorNotSupported;
}

}  // namespace
}  // namespace gwsim::rt

using namespace gwsim::rt;  // NOLINT(google-build-using-namespace): the C ABI shims below

// CUDA graphs: conditional nodes, user objects, dependency queries

GWSIM_RT_TRACED(cudaGraphConditionalHandleCreate, v12030, false,
                (cudaGraphConditionalHandle * pHandle_out, cudaGraph_t graph,
                 unsigned int defaultLaunchValue, unsigned int flags),
                (pHandle_out, graph, defaultLaunchValue, flags), { return NotSimulated(); })

GWSIM_RT_TRACED(cudaGraphNodeGetDependencies, v12030, false,
                (cudaGraphNode_t node, cudaGraphNode_t* pDependencies, cudaGraphEdgeData* edgeData,
                 size_t* pNumDependencies),
                (node, pDependencies, edgeData, pNumDependencies), { return NotSimulated(); })

GWSIM_RT_TRACED(cudaStreamUpdateCaptureDependencies, v12030, false,
                (cudaStream_t stream, cudaGraphNode_t* dependencies,
                 const cudaGraphEdgeData* dependencyData, size_t numDependencies,
                 unsigned int flags),
                (stream, dependencies, dependencyData, numDependencies, flags),
                { return NotSimulated(); })

GWSIM_RT_TRACED(cudaUserObjectCreate, v11030, false,
                (cudaUserObject_t * object_out, void* ptr, cudaHostFn_t destroy,
                 unsigned int initialRefcount, unsigned int flags),
                (object_out, ptr, destroy, initialRefcount, flags), { return NotSimulated(); })

GWSIM_RT_TRACED(cudaUserObjectRelease, v11030, false, (cudaUserObject_t object, unsigned int count),
                (object, count), { return NotSimulated(); })

GWSIM_RT_TRACED(cudaGraphRetainUserObject, v11030, false,
                (cudaGraph_t graph, cudaUserObject_t object, unsigned int count,
                 unsigned int flags),
                (graph, object, count, flags), { return NotSimulated(); })

// Events shared between processes

GWSIM_RT_TRACED(cudaIpcGetEventHandle, v4010, false,
                (cudaIpcEventHandle_t * handle, cudaEvent_t event), (handle, event),
                { return NotSimulated(); })

GWSIM_RT_TRACED(cudaIpcOpenEventHandle, v4010, false,
                (cudaEvent_t * event, cudaIpcEventHandle_t handle), (event, handle),
                { return NotSimulated(); })

// Cooperative launches and per-device kernel attributes

GWSIM_RT_TRACED(cudaLaunchCooperativeKernel, v9000, false,
                (const void* func, dim3 gridDim, dim3 blockDim, void** args, size_t sharedMem,
                 cudaStream_t stream),
                (func, gridDim, blockDim, args, sharedMem, stream), { return NotSimulated(); })

GWSIM_RT_TRACED(cudaKernelSetAttributeForDevice, v12060, false,
                (cudaKernel_t kernel, enum cudaFuncAttribute attr, int value, int device),
                (kernel, attr, value, device), { return NotSimulated(); })

// The library API (context-independent modules)

GWSIM_RT_TRACED(cudaLibraryLoadData, v12060, false,
                (cudaLibrary_t * library, const void* code, enum cudaJitOption* jitOptions,
                 void** jitOptionsValues, unsigned int numJitOptions,
                 enum cudaLibraryOption* libraryOptions, void** libraryOptionValues,
                 unsigned int numLibraryOptions),
                (library, code, jitOptions, jitOptionsValues, numJitOptions, libraryOptions,
                 libraryOptionValues, numLibraryOptions),
                { return NotSimulated(); })

GWSIM_RT_TRACED(cudaLibraryLoadFromFile, v12060, false,
                (cudaLibrary_t * library, const char* fileName, enum cudaJitOption* jitOptions,
                 void** jitOptionsValues, unsigned int numJitOptions,
                 enum cudaLibraryOption* libraryOptions, void** libraryOptionValues,
                 unsigned int numLibraryOptions),
                (library, fileName, jitOptions, jitOptionsValues, numJitOptions, libraryOptions,
                 libraryOptionValues, numLibraryOptions),
                { return NotSimulated(); })

GWSIM_RT_TRACED(cudaLibraryUnload, v12060, false, (cudaLibrary_t library), (library),
                { return NotSimulated(); })

GWSIM_RT_TRACED(cudaLibraryGetKernel, v12060, false,
                (cudaKernel_t * pKernel, cudaLibrary_t library, const char* name),
                (pKernel, library, name), { return NotSimulated(); })

GWSIM_RT_TRACED(cudaLibraryGetKernelCount, v12060, false, (unsigned int* count, cudaLibrary_t lib),
                (count, lib), { return NotSimulated(); })

GWSIM_RT_TRACED(cudaLibraryGetGlobal, v12060, false,
                (void** dptr, size_t* bytes, cudaLibrary_t library, const char* name),
                (dptr, bytes, library, name), { return NotSimulated(); })

GWSIM_RT_TRACED(cudaLibraryGetManaged, v12060, false,
                (void** dptr, size_t* bytes, cudaLibrary_t library, const char* name),
                (dptr, bytes, library, name), { return NotSimulated(); })

GWSIM_RT_TRACED(cudaLibraryGetUnifiedFunction, v12060, false,
                (void** fptr, cudaLibrary_t library, const char* symbol), (fptr, library, symbol),
                { return NotSimulated(); })
