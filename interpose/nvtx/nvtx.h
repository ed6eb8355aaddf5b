// Phases from NVTX ranges and gpuwatch_phase_push/pop (libgpuwatch/record/
// phases.h): NVTX's injection entry point (InitializeInjectionNvtx2, in
// nvtx.cc), each thread's stack of open ranges, and the phase every
// allocation, copy and launch records.
//
// NVTX loads a tool only from NVTX_INJECTION64_PATH (it does not look in
// libraries already loaded), so the preload constructor points it at
// libgpuwatch.so when it is unset (PointNvtxAtSelf), as `gpuwatch run` does.
// Ranges may open before gpuwatch attaches (before the program's first CUDA
// call): the phase table is the process's, made on first use, and the
// session is given it at attach (Session's `phases` argument) and counts
// into it from then on. The NVTX state of nvtx.cc (domains, the chained
// tool's domain and string handle maps, each thread's range stack) is the
// process's for the same reason: nvtxDomainCreate, nvtxDomainRegisterString
// and the pushes they name come before the first CUDA call as often as
// after, and a fork child keeps them. The Session reaches that state only
// through the phase table (phase paths hold domain and range names).
#ifndef GPUWATCH_INTERPOSE_NVTX_NVTX_H_
#define GPUWATCH_INTERPOSE_NVTX_NVTX_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "interpose/nvtx/name_cache.h"
#include "libgpuwatch/record/phases.h"

namespace gpuwatch {

// The process's phase table; never destroyed.
PhaseTable& ProcessPhases();

namespace nvtx_internal {
// The calling thread's stack of open ranges, the names it pushed last by
// pointer, and whether its exit is watched (nvtx.cc; use CurrentPhase). Read
// by every allocation, copy and launch callback: initial-exec, with a
// constant initializer, so that no TLS wrapper runs, and inlined
// (CurrentPhase).
struct ThreadPhases {
  PhaseStack stack;
  NameCache names;
  bool watched = false;
};
extern constinit thread_local ThreadPhases t_phases __attribute__((tls_model("initial-exec")));
}  // namespace nvtx_internal

// The phase (path id) open on the calling thread; 0: none. A thread-local
// read: on every allocation, copy and launch.
inline uint32_t CurrentPhase() { return nvtx_internal::t_phases.stack.current(); }

// gpuwatch_phase_push/pop: a range of NVTX's default domain (`name`:
// NUL-terminated, not null).
void PushPhase(const char* name);
bool PopPhase();

// NVTX's injection entry point (InitializeInjectionNvtx2, exported by
// attach.cc): fills the calling NVTX instance's function table. 1: done; 0:
// the table could not be read (NVTX then makes its calls no-ops).
using NvtxExportTableGetter = const void* (*)(uint32_t export_table_id);
int InitializeNvtx(NvtxExportTableGetter get_export_table);
// With gpuwatch disabled: the tool gpuwatch would chain to alone (its answer;
// 0 when there is none), so that it keeps its ranges.
int InitializeNvtxChainOnly(NvtxExportTableGetter get_export_table);

namespace nvtx_internal {
// The entry point of the tool gpuwatch chains to (nvtx_chain.cc), looked up
// once; null when there is none (said in one line when it cannot be loaded).
using NvtxEntryPoint = int (*)(NvtxExportTableGetter get_export_table);
NvtxEntryPoint ChainedEntryPoint();
}  // namespace nvtx_internal

// A symbol of the NVTX tool gpuwatch chains to (GPUWATCH_NVTX_CHAIN); null
// when there is none or it lacks the symbol.
void* ChainedNvtxSymbol(const char* name);

// NVTX's memory extension (nvtx_mem.cc): the extensions' injection entry
// point (InitializeInjectionNvtxExtension, exported by attach.cc). Takes the
// heap and region functions of the memory module into the recording's
// RegionTable (libgpuwatch/record/regions.h); the tool gpuwatch chains to
// is initialized first and called after gpuwatch. `module_info` is NVTX's
// nvtxExtModuleInfo_t. 1: taken; 0: a module gpuwatch does not take.
int InitializeNvtxExtension(void* module_info);
// With gpuwatch disabled: the chained tool's answer alone (0: none).
int InitializeNvtxExtensionChainOnly(void* module_info);

// From the preload constructor (single-threaded): sets NVTX_INJECTION64_PATH
// to `self` when unset. When it names another library, remembers it for
// NvtxNotice().
void PointNvtxAtSelf(const std::string& self);
// One line for attach time, or "" when there is nothing to say: another
// tool holds NVTX_INJECTION64_PATH, so ranges are not seen.
std::string NvtxNotice();

}  // namespace gpuwatch

#endif  // GPUWATCH_INTERPOSE_NVTX_NVTX_H_
