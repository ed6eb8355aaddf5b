// A module's function symbols, for the symbolizer's names: read whole into a
// sorted index (ReadFunctionSymbols, FindSymbol), or searched once for one
// address without it (FindSymbolInOnePass). Included by symbolizer.cc and
// symbol_table.cc only (it needs libdw's headers).
#ifndef GPUWATCH_LIBGPUWATCH_SYMBOLIZE_SYMBOL_TABLE_H_
#define GPUWATCH_LIBGPUWATCH_SYMBOLIZE_SYMBOL_TABLE_H_

#include <cstdint>
#include <vector>

#include "libgpuwatch/symbolize/libdw.h"

namespace gpuwatch {

// A function symbol, at its run-time address.
struct SymbolEntry {
  uintptr_t start = 0;
  uintptr_t size = 0;
  const char* name = nullptr;  // owned by libelf, valid for the session
  int rank = 0;                // binding preference among equal addresses
  int index = 0;               // in the table: the first listed wins a tie
};

// The function symbols of `mod` (STT_FUNC and STT_GNU_IFUNC, defined, with a
// name), sorted by start; among equal starts the best binding last, and of
// one binding the first in the table last (libc's debug file lists
// `__libc_start_main@@GLIBC_2.34` and `__libc_start_main@GLIBC_2.2.5`, and
// `clone3` beside two aliases: one name, always the same). The caller holds
// LibdwMutex().
std::vector<SymbolEntry> ReadFunctionSymbols(const internal::LibdwApi& dw, Dwfl_Module* mod);

// The name of the function that contains `addr` in `entries`: the nearest
// start at or below it, looking a few entries back for a larger symbol that
// holds a small one; nullptr when none does.
const char* FindSymbol(const std::vector<SymbolEntry>& entries, uintptr_t addr);

// FindSymbol's answer for `addr` in ReadFunctionSymbols(dw, mod), from one
// pass over the module's raw symbol table: no libdw call per symbol and no
// sort (libc's table from its debug file: about 10,000 symbols, 5 million
// instructions read and sorted, for the one name of a start-up frame).
// True with `*name` set (nullptr: no symbol holds it); false when this pass
// cannot read the table as libdw does (a table merged from two files, an
// entry whose address it places otherwise), and the whole table must be
// read. The caller holds LibdwMutex().
//
// With `window`, the pass also keeps the function symbols that start within
// kSymbolWindowBytes of `addr` (sorted as ReadFunctionSymbols sorts them): a
// stack's other start-up frame of the same module lies there (libc's
// __libc_start_call_main beside __libc_start_main), and FindSymbolInWindow
// answers for it without another pass.
struct SymbolWindow {
  uintptr_t lo = 0;
  uintptr_t hi = 0;
  std::vector<SymbolEntry> entries;  // names not read: FindSymbolInWindow reads the one it needs
};
inline constexpr uintptr_t kSymbolWindowBytes = uintptr_t{16} << 10;
bool FindSymbolInOnePass(const internal::LibdwApi& dw, Dwfl_Module* mod, uintptr_t addr,
                         const char** name, SymbolWindow* window = nullptr);

// FindSymbol's answer for `addr` in ReadFunctionSymbols(dw, mod) from the
// window a pass kept: true with `*name` set when the window decides it (the
// walk back from `addr` holds it or ends inside the window), false when it
// cannot and a pass must. The caller holds LibdwMutex().
bool FindSymbolInWindow(const internal::LibdwApi& dw, Dwfl_Module* mod, const SymbolWindow& window,
                        uintptr_t addr, const char** name);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_SYMBOLIZE_SYMBOL_TABLE_H_
