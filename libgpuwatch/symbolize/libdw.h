// libdw (elfutils), dlopened at the first report that symbolizes: the
// functions the symbolizer calls, resolved with dlsym. Only libdw's
// declarations are used: `decltype(&::fn)` is an unevaluated use that creates
// no link dependency (symbolize/README.md). Included by symbolizer.cc only.
#ifndef GPUWATCH_LIBGPUWATCH_SYMBOLIZE_LIBDW_H_
#define GPUWATCH_LIBGPUWATCH_SYMBOLIZE_LIBDW_H_

#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>

#include "libgpuwatch/base/mutex.h"

// Every libdw function the symbolizer calls, and the few of libelf (a
// dependency of libdw, so found through its handle) that read a symbol
// table in one pass (symbol_table.cc).
#define GPUWATCH_LIBDW_FUNCTIONS(X) \
  X(dwfl_begin)                     \
  X(dwfl_end)                       \
  X(dwfl_errmsg)                    \
  X(dwfl_linux_proc_find_elf)       \
  X(dwfl_standard_find_debuginfo)   \
  X(dwfl_report_module)             \
  X(dwfl_report_begin)              \
  X(dwfl_report_end)                \
  X(dwfl_addrmodule)                \
  X(dwfl_module_info)               \
  X(dwfl_module_getelf)             \
  X(dwfl_module_getsymtab)          \
  X(dwfl_module_getsym_info)        \
  X(dwfl_module_getsrc)             \
  X(dwfl_lineinfo)                  \
  X(dwfl_module_addrdie)            \
  X(dwarf_getscopes)                \
  X(dwarf_dieoffset)                \
  X(dwarf_child)                    \
  X(dwarf_siblingof)                \
  X(dwarf_haspc)                    \
  X(dwarf_hasattr)                  \
  X(dwarf_ranges)                   \
  X(dwarf_tag)                      \
  X(dwarf_attr)                     \
  X(dwarf_attr_integrate)           \
  X(dwarf_formstring)               \
  X(dwarf_formudata)                \
  X(dwarf_getsrcfiles)              \
  X(dwarf_filesrc)                  \
  X(elf_nextscn)                    \
  X(elf_ndxscn)                     \
  X(elf_getdata)                    \
  X(gelf_getshdr)                   \
  X(gelf_getclass)

namespace gpuwatch {

namespace internal {

struct LibdwApi {
// NOLINTNEXTLINE(bugprone-macro-parentheses): a declaration, not an expression
#define GPUWATCH_LIBDW_MEMBER(name) decltype(&::name) name;
  GPUWATCH_LIBDW_FUNCTIONS(GPUWATCH_LIBDW_MEMBER)
#undef GPUWATCH_LIBDW_MEMBER
};

}  // namespace internal

// Loads `soname` and resolves every function, or warns once and returns
// nullptr. The handle and the table are never released: frames may be
// symbolized again by a later report.
const internal::LibdwApi* LoadLibdw(const char* soname);
// The process-wide libdw (libdw.so.1), loaded on first use (one warning at most).
const internal::LibdwApi* DefaultLibdw();
// Serialises libdw calls across Symbolizer instances: elfutils does not
// promise thread safety, and report writers are not hot.
Mutex& LibdwMutex();

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_SYMBOLIZE_LIBDW_H_
