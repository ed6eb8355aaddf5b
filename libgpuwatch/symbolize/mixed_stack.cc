#include "libgpuwatch/symbolize/mixed_stack.h"

#include <algorithm>

#include "libgpuwatch/stacks/python_frames.h"
#include "libgpuwatch/stacks/python_stack.h"

namespace gpuwatch {

namespace {

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool Contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// "lib/python3.N/" or "lib64/python3.N/" somewhere in the path.
bool UnderPythonLib(std::string_view file) {
  for (size_t at = file.find("/python3."); at != std::string_view::npos;
       at = file.find("/python3.", at + 1)) {
    const std::string_view before = file.substr(0, at);
    if (!(before.ends_with("/lib") || before.ends_with("/lib64") || before == "lib")) continue;
    size_t i = at + 9;
    const size_t digits = i;
    while (i < file.size() && file[i] >= '0' && file[i] <= '9') ++i;
    if (i > digits && i < file.size() && file[i] == '/') return true;
  }
  return false;
}

Frame PythonFrameOf(const PyFrameTable* table, uintptr_t token) {
  Frame frame;
  frame.pc = token;
  frame.module = std::string(kPythonModule);
  PyFrameInfo info;
  if (table != nullptr && table->Get(PythonTokenId(token), &info)) {
    frame.file = std::string(info.file);
    frame.function = std::string(info.function);
    frame.line = info.line;
  } else {
    frame.function = "<unknown Python frame>";
  }
  return frame;
}

bool IsEvalLoopName(std::string_view function) {
  return StartsWith(function, "_PyEval_EvalFrameDefault");
}

// Drops frames from the top of the units while `drop` holds, never the last
// frame of the stack (TrimTop's rule, across units).
template <typename Pred>
void TrimUnitsTop(std::vector<NativeUnit>* units, Pred drop) {
  size_t total = 0;
  for (const NativeUnit& u : *units) total += u.frames.size();
  size_t dropped = 0;
  size_t first_unit = 0;
  for (; first_unit < units->size(); ++first_unit) {
    std::vector<Frame>& frames = (*units)[first_unit].frames;
    size_t n = 0;
    while (n < frames.size() && dropped + 1 < total && drop(frames[n])) {
      ++n;
      ++dropped;
    }
    frames.erase(frames.begin(), frames.begin() + static_cast<std::ptrdiff_t>(n));
    if (!frames.empty()) break;
  }
  units->erase(units->begin(), units->begin() + static_cast<std::ptrdiff_t>(first_unit));
}

}  // namespace

bool IsPythonFrame(const Frame& frame) { return frame.module == kPythonModule; }

bool IsLibraryPythonFile(std::string_view file) {
  return StartsWith(file, "<frozen ") || Contains(file, "/site-packages/") ||
         Contains(file, "/dist-packages/") || UnderPythonLib(file);
}

bool IsPythonBridgeFrame(const Frame& frame) {
  if (IsPythonFrame(frame)) return false;
  const std::string_view module = Basename(frame.module);
  return StartsWith(module, "_ctypes") || StartsWith(module, "_cffi_backend") ||
         StartsWith(module, "libffi.so") || StartsWith(frame.function, "ffi_call") ||
         StartsWith(frame.function, "ffi_closure");
}

std::vector<Frame> MergeMixedStack(std::vector<NativeUnit> units,
                                   const std::vector<std::vector<Frame>>& groups) {
  TrimUnitsTop(&units, IsToolFrame);
  const bool any_eval = std::any_of(units.begin(), units.end(), [](const NativeUnit& u) {
    return u.kind == NativeKind::kEvalLoop;
  });
  std::vector<Frame> out;
  size_t next = 0;
  auto emit_group = [&] {
    const std::vector<Frame>& group = groups[next++];
    out.insert(out.end(), group.begin(), group.end());
  };
  for (NativeUnit& unit : units) {
    switch (unit.kind) {
      case NativeKind::kEvalLoop:
        if (next < groups.size()) emit_group();
        break;
      case NativeKind::kInterpreter:
        // No eval loop frame recognised at all: the Python frames go where
        // the interpreter's frames start, which keeps them in order.
        if (!any_eval) {
          while (next < groups.size()) emit_group();
        }
        break;
      case NativeKind::kOther:
        out.insert(out.end(), std::make_move_iterator(unit.frames.begin()),
                   std::make_move_iterator(unit.frames.end()));
        break;
    }
  }
  while (next < groups.size()) emit_group();
  if (std::any_of(out.begin(), out.end(), IsPythonFrame)) {
    size_t n = 0;
    while (n + 1 < out.size() && IsPythonBridgeFrame(out[n])) ++n;
    out.erase(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(n));
  }
  if (out.empty()) {
    // Everything was interpreter frames without any Python frame: keep the
    // innermost native frame rather than nothing.
    for (const NativeUnit& unit : units) {
      if (!unit.frames.empty()) {
        out.push_back(unit.frames.front());
        break;
      }
    }
  }
  return out;
}

void SymbolizeMixedStack(Symbolizer* symbolizer, const PyFrameTable* python_frames,
                         std::span<const uintptr_t> pcs, std::vector<Frame>* out) {
  const auto first_token = std::find_if(pcs.begin(), pcs.end(), IsPythonToken);
  if (first_token == pcs.end()) {
    std::vector<Frame> frames;
    symbolizer->SymbolizeStack(pcs, &frames);
    TrimTop(&frames, IsToolFrame);
    out->insert(out->end(), std::make_move_iterator(frames.begin()),
                std::make_move_iterator(frames.end()));
    return;
  }
  std::vector<NativeUnit> units;
  for (const uintptr_t pc : pcs) {
    if (IsPythonToken(pc)) continue;
    NativeUnit unit;
    const std::span<const Frame> frames = symbolizer->SymbolizeAll(pc);
    unit.frames.assign(frames.begin(), frames.end());
    const bool eval_name = std::any_of(frames.begin(), frames.end(),
                                       [](const Frame& f) { return IsEvalLoopName(f.function); });
    if (IsPythonEvalPc(pc) || eval_name) {
      unit.kind = NativeKind::kEvalLoop;
    } else if (IsPythonInterpreterPc(pc)) {
      unit.kind = NativeKind::kInterpreter;
    }
    units.push_back(std::move(unit));
  }
  const PyFrameTable* table = python_frames;
  std::vector<std::vector<Frame>> groups;
  std::vector<Frame> group;
  for (auto it = first_token; it != pcs.end(); ++it) {
    if (!IsPythonToken(*it)) continue;
    group.push_back(PythonFrameOf(table, *it));
    if (PythonTokenIsEntry(*it)) {
      groups.push_back(std::move(group));
      group.clear();
    }
  }
  if (!group.empty()) groups.push_back(std::move(group));
  std::vector<Frame> merged = MergeMixedStack(std::move(units), groups);
  out->insert(out->end(), std::make_move_iterator(merged.begin()),
              std::make_move_iterator(merged.end()));
}

bool SymbolizeNativeStackInPlace(Symbolizer* symbolizer, std::span<const uintptr_t> pcs,
                                 std::vector<const Frame*>* out) {
  if (std::any_of(pcs.begin(), pcs.end(), IsPythonToken)) return false;
  const size_t begin = out->size();
  for (const uintptr_t pc : pcs) {
    for (const Frame& f : symbolizer->SymbolizeAll(pc)) out->push_back(&f);
  }
  TrimTopRefs(out, begin, IsToolFrame);
  return true;
}

size_t TrimTopRefs(std::vector<const Frame*>* refs, size_t begin,
                   const std::function<bool(const Frame&)>& drop) {
  size_t n = 0;
  while (begin + n + 1 < refs->size() && drop(*(*refs)[begin + n])) ++n;
  refs->erase(refs->begin() + static_cast<std::ptrdiff_t>(begin),
              refs->begin() + static_cast<std::ptrdiff_t>(begin + n));
  return n;
}

namespace {

// SiteFrame's index over frames or pointers to them (`at(i)` is the i-th
// frame): `size` when no frame has a line.
template <typename At>
size_t SiteFrameIndexOf(size_t size, const At& at) {
  size_t first = 0;
  while (first < size && (at(first).line <= 0 || at(first).file.empty())) ++first;
  if (first == size || !IsPythonFrame(at(first))) return first;
  for (size_t i = first; i < size; ++i) {
    const Frame& f = at(i);
    if (IsPythonFrame(f) && f.line > 0 && !IsLibraryPythonFile(f.file)) return i;
  }
  return first;
}

}  // namespace

const Frame* SiteFrame(const std::vector<Frame>& frames) {
  const size_t i =
      SiteFrameIndexOf(frames.size(), [&frames](size_t k) -> const Frame& { return frames[k]; });
  return i < frames.size() ? &frames[i] : nullptr;
}

size_t SiteFrameIndex(std::span<const Frame* const> frames) {
  return SiteFrameIndexOf(frames.size(),
                          [&frames](size_t k) -> const Frame& { return *frames[k]; });
}

}  // namespace gpuwatch
