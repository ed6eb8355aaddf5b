// CPython's structure layouts, as python_stack.cc reads them without the
// interpreter's help (no GIL, inside a CUDA callback). Included by
// python_stack.cc only.
//
// Byte offsets on LP64 (x86-64, AArch64), from each version's headers
// (Include/cpython/pystate.h, frameobject.h, code.h, unicodeobject.h and, from
// 3.11, Include/internal/pycore_frame.h). They are stable within a minor
// version. Every object read is type-checked before its fields are trusted.
//
// - Innermost frame of a thread state: PyThreadState.frame (3.8-3.10, a
//   PyFrameObject), PyThreadState.cframe->current_frame (3.11, 3.12, a
//   _PyInterpreterFrame), PyThreadState.current_frame (3.13).
// - Frame: its code object (f_code; f_executable in 3.13), the next outer
//   frame (f_back; previous from 3.11) and the instruction: f_lasti (3.8-3.9
//   in bytes, 3.10 in code units), prev_instr (3.11, 3.12) or instr_ptr
//   (3.13), a pointer into the code object's co_code_adaptive.
// - From 3.11 one C-level call of _PyEval_EvalFrameDefault runs several
//   Python frames. 3.11 flags the first one (is_entry); 3.12 and 3.13 put a
//   shim frame owned by the C stack (owner == 3) outside it.
// - Code object: co_filename, co_name (co_qualname from 3.11),
//   co_firstlineno, and its size in code units (ob_size, 3.11+).
// - str: compact ASCII data follows PyASCIIObject, other compact strings
//   follow PyCompactUnicodeObject; `state` holds kind, compact, ascii (and
//   ready up to 3.11).
#ifndef GPUWATCH_LIBGPUWATCH_STACKS_PYTHON_LAYOUTS_H_
#define GPUWATCH_LIBGPUWATCH_STACKS_PYTHON_LAYOUTS_H_

namespace gpuwatch::python_layouts {

struct Layout {
  int minor;
  int tstate_frame;   // offset of the innermost frame pointer, or -1
  int tstate_cframe;  // offset of the _PyCFrame pointer, or -1
  int cframe_current;
  bool frame_objects;  // 3.8-3.10: frames are PyFrameObjects
  int frame_back;
  int frame_code;
  int frame_lasti;     // int f_lasti (3.8-3.10), or -1
  int frame_instr;     // _Py_CODEUNIT* (3.11+), or -1
  int frame_owner;     // char owner (3.11+), or -1
  int frame_is_entry;  // bool is_entry (3.11), or -1
  int lasti_bytes;     // bytes per unit of the instruction offset
  int code_filename;
  int code_name;
  int code_firstlineno;
  int code_adaptive;  // co_code_adaptive (3.11+), or -1
  int str_ascii_data;
  int str_compact_data;
  bool str_ready_bit;
};

// clang-format off
constexpr Layout kLayouts[] = {
    {.minor = 8,  .tstate_frame = 24, .tstate_cframe = -1, .cframe_current = 0,
     .frame_objects = true,  .frame_back = 24, .frame_code = 32, .frame_lasti = 104,
     .frame_instr = -1, .frame_owner = -1, .frame_is_entry = -1, .lasti_bytes = 1,
     .code_filename = 104, .code_name = 112, .code_firstlineno = 40, .code_adaptive = -1,
     .str_ascii_data = 48, .str_compact_data = 72, .str_ready_bit = true},
    {.minor = 9,  .tstate_frame = 24, .tstate_cframe = -1, .cframe_current = 0,
     .frame_objects = true,  .frame_back = 24, .frame_code = 32, .frame_lasti = 104,
     .frame_instr = -1, .frame_owner = -1, .frame_is_entry = -1, .lasti_bytes = 1,
     .code_filename = 104, .code_name = 112, .code_firstlineno = 40, .code_adaptive = -1,
     .str_ascii_data = 48, .str_compact_data = 72, .str_ready_bit = true},
    {.minor = 10, .tstate_frame = 24, .tstate_cframe = -1, .cframe_current = 0,
     .frame_objects = true,  .frame_back = 24, .frame_code = 32, .frame_lasti = 96,
     .frame_instr = -1, .frame_owner = -1, .frame_is_entry = -1, .lasti_bytes = 2,
     .code_filename = 104, .code_name = 112, .code_firstlineno = 40, .code_adaptive = -1,
     .str_ascii_data = 48, .str_compact_data = 72, .str_ready_bit = true},
    {.minor = 11, .tstate_frame = -1, .tstate_cframe = 56, .cframe_current = 8,
     .frame_objects = false, .frame_back = 48, .frame_code = 32, .frame_lasti = -1,
     .frame_instr = 56, .frame_owner = 69, .frame_is_entry = 68, .lasti_bytes = 2,
     .code_filename = 112, .code_name = 128, .code_firstlineno = 72, .code_adaptive = 184,
     .str_ascii_data = 48, .str_compact_data = 72, .str_ready_bit = true},
    {.minor = 12, .tstate_frame = -1, .tstate_cframe = 56, .cframe_current = 0,
     .frame_objects = false, .frame_back = 8,  .frame_code = 0,  .frame_lasti = -1,
     .frame_instr = 56, .frame_owner = 70, .frame_is_entry = -1, .lasti_bytes = 2,
     .code_filename = 112, .code_name = 128, .code_firstlineno = 68, .code_adaptive = 192,
     .str_ascii_data = 40, .str_compact_data = 56, .str_ready_bit = false},
    {.minor = 13, .tstate_frame = 72, .tstate_cframe = -1, .cframe_current = 0,
     .frame_objects = false, .frame_back = 8,  .frame_code = 0,  .frame_lasti = -1,
     .frame_instr = 56, .frame_owner = 70, .frame_is_entry = -1, .lasti_bytes = 2,
     .code_filename = 112, .code_name = 128, .code_firstlineno = 68, .code_adaptive = 200,
     .str_ascii_data = 40, .str_compact_data = 56, .str_ready_bit = false},
};
// clang-format on

constexpr int kObType = 8;   // PyObject.ob_type
constexpr int kObSize = 16;  // PyVarObject.ob_size
constexpr int kStrLength = 16;
constexpr int kStrState = 32;
constexpr char kOwnedByCStack = 3;  // FRAME_OWNED_BY_CSTACK (3.12+)
// 3.8 only: &_PyRuntime.ceval.pending.finishing. Once set, Py_AddPendingCall
// prints a SystemError instead of queueing.
constexpr int kFinishingOffset38 = 600;
// Frames visited per capture at most (shim frames included): a bound, should
// a chain ever loop.
constexpr int kMaxVisited = 4096;

}  // namespace gpuwatch::python_layouts

#endif  // GPUWATCH_LIBGPUWATCH_STACKS_PYTHON_LAYOUTS_H_
