// Report-time merging of native and Python frames into one stack.
//
// A stack captured in a Python process holds native pcs and Python frame
// tokens (python_frames.h). The report shows them as py-spy --native does:
// in call order, with each C-level call of the interpreter's eval loop
// (_PyEval_EvalFrameDefault) replaced by the Python frames it was running,
// and the rest of the interpreter's own call machinery dropped. Up to 3.10
// every Python frame has an eval loop call of its own; from 3.11 one call runs
// several, and the tokens mark where each call's frames end. When the native
// stack was cut short (GPUWATCH_DEPTH), the Python frames left over follow
// the last native frame.
//
// Trimming. As for native stacks, gpuwatch's, CUPTI's, the driver's and
// cudart's frames are dropped from the top. When the stack has Python frames,
// so are the frames that only bridge a Python call to C above the innermost
// Python frame: the interpreter's (already dropped), ctypes' (_ctypes*),
// cffi's (_cffi_backend*) and libffi's. So a script that calls cudaMalloc
// through ctypes reads: its own line first.
//
// Python frames have module "python", file the script's path as the
// interpreter knows it (co_filename), function the qualified name
// (co_qualname from 3.11, co_name before), and a line.
//
// Nothing here runs in a CUDA callback. Not thread-safe beyond what
// Symbolizer allows (one instance per thread).
#ifndef GPUWATCH_LIBGPUWATCH_SYMBOLIZE_MIXED_STACK_H_
#define GPUWATCH_LIBGPUWATCH_SYMBOLIZE_MIXED_STACK_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "libgpuwatch/symbolize/symbolizer.h"

namespace gpuwatch {

class PyFrameTable;

// The module of every Python frame.
inline constexpr std::string_view kPythonModule = "python";

// True for a frame that came from a Python token.
bool IsPythonFrame(const Frame& frame);

// True for a Python file of the standard library or of an installed package:
// a path with /site-packages/ or /dist-packages/ or under lib/python3.N/, or a
// frozen module ("<frozen ...>").
bool IsLibraryPythonFile(std::string_view file);

// True for native frames that bridge a Python call to C: ctypes, cffi, libffi.
bool IsPythonBridgeFrame(const Frame& frame);

// How the merge treats the frames of one native pc.
enum class NativeKind {
  kOther,        // kept
  kEvalLoop,     // replaced by the next group of Python frames
  kInterpreter,  // dropped
};

// The frames of one native pc (its inline chain, innermost first).
struct NativeUnit {
  NativeKind kind = NativeKind::kOther;
  std::vector<Frame> frames;
};

// The merge itself, on symbolized input (tests drive it directly). `units` is
// the native stack, innermost first; `groups` the Python frames, innermost
// group first, each group innermost frame first. Tool frames are trimmed from
// the top first (IsToolFrame), bridge frames after the merge when any Python
// frame is present. Never returns an empty stack for non-empty input.
std::vector<Frame> MergeMixedStack(std::vector<NativeUnit> units,
                                   const std::vector<std::vector<Frame>>& groups);

// Symbolizes a captured stack (native pcs, then Python tokens) into frames,
// innermost first, trimmed as described above, and appends them to *out.
// A stack without tokens reads exactly as Symbolizer::SymbolizeStack followed
// by TrimTop(IsToolFrame). Python tokens are resolved through
// `python_frames` (the stack table's: StackTable::python_frames(); null:
// none) and eval loop and interpreter pcs recognised with
// IsPythonEvalPc() / IsPythonInterpreterPc() (python_stack.h), or by the name
// _PyEval_EvalFrameDefault*.
void SymbolizeMixedStack(Symbolizer* symbolizer, const PyFrameTable* python_frames,
                         std::span<const uintptr_t> pcs, std::vector<Frame>* out);

// A stack without Python tokens as SymbolizeMixedStack reads it, with no
// frame copied: appends pointers into the symbolizer's cache (valid for the
// symbolizer's life), trimmed as described above. A report resolves
// thousands of stacks, and copies of their frames, kilobytes per stack
// allocated amid what the report keeps, left the kept objects scattered over
// pages that malloc cannot return (docs/BENCHMARKS.md, issue 33, stop 50).
// False, appending nothing, when the stack has Python tokens: their merge
// makes frames of its own (SymbolizeMixedStack).
bool SymbolizeNativeStackInPlace(Symbolizer* symbolizer, std::span<const uintptr_t> pcs,
                                 std::vector<const Frame*>* out);
// TrimTop over the pointers of one stack, those from `begin` on: drops them
// from the front while `drop` is true, never the last. Returns the number
// dropped.
size_t TrimTopRefs(std::vector<const Frame*>* refs, size_t begin,
                   const std::function<bool(const Frame&)>& drop);

// The frame that names an allocation site (its `location`): the first frame
// with a file and line, except that when that frame is a Python frame, the
// innermost Python frame outside library code (IsLibraryPythonFile) is taken
// when there is one. nullptr when no frame has a line.
const Frame* SiteFrame(const std::vector<Frame>& frames);
// The same over pointers to frames (SymbolizeNativeStackInPlace's), as an
// index: frames.size() when no frame has a line.
size_t SiteFrameIndex(std::span<const Frame* const> frames);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_SYMBOLIZE_MIXED_STACK_H_
