#include "libgpuwatch/symbolize/symbol_table.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace gpuwatch {

using internal::LibdwApi;

namespace {

// Binding preference when several symbols share an address: GLOBAL names
// are what a user wrote, WEAK next, LOCAL last.
int BindingRank(unsigned char info) {
  switch (GELF_ST_BIND(info)) {
    case STB_GLOBAL:
      return 2;
    case STB_WEAK:
      return 1;
    default:
      return 0;
  }
}

bool IsFunctionType(unsigned char info) {
  const int type = GELF_ST_TYPE(info);
  return type == STT_FUNC || type == STT_GNU_IFUNC;
}

// How far FindSymbol looks back from the nearest start for a larger symbol
// that holds a small one.
constexpr int kLookBack = 8;

// FindSymbol's test of one entry, from the nearest start down.
bool Holds(uintptr_t start, uintptr_t size, uintptr_t addr) {
  return addr < start + std::max<uintptr_t>(size, 1) || size == 0;
}

// ReadFunctionSymbols' order: by start; among equal starts the best binding
// last, and of one binding the first in the table last.
bool SortedBefore(const SymbolEntry& a, const SymbolEntry& b) {
  if (a.start != b.start) return a.start < b.start;
  return a.rank != b.rank ? a.rank < b.rank : a.index > b.index;
}

// The name libdw reads for table entry `e`, or nullptr when it reads the
// entry otherwise than the raw table says (its address, size or type).
const char* NameAsLibdwReads(const LibdwApi& dw, Dwfl_Module* mod, const SymbolEntry& e) {
  GElf_Sym sym{};
  GElf_Addr value = 0;
  GElf_Word shndx = 0;
  const char* name =
      dw.dwfl_module_getsym_info(mod, e.index, &sym, &value, &shndx, nullptr, nullptr);
  if (name == nullptr || name[0] == '\0' || shndx == SHN_UNDEF || !IsFunctionType(sym.st_info) ||
      value != e.start || sym.st_size != e.size) {
    return nullptr;
  }
  return name;
}

}  // namespace

std::vector<SymbolEntry> ReadFunctionSymbols(const LibdwApi& dw, Dwfl_Module* mod) {
  std::vector<SymbolEntry> entries;
  const int count = dw.dwfl_module_getsymtab(mod);
  for (int i = 1; i < count; ++i) {  // 0 is the null symbol
    GElf_Sym sym{};
    GElf_Addr addr = 0;
    GElf_Word shndx = 0;
    const char* name = dw.dwfl_module_getsym_info(mod, i, &sym, &addr, &shndx, nullptr, nullptr);
    if (name == nullptr || name[0] == '\0' || shndx == SHN_UNDEF) continue;
    if (!IsFunctionType(sym.st_info)) continue;
    entries.push_back({addr, sym.st_size, name, BindingRank(sym.st_info), i});
  }
  std::sort(entries.begin(), entries.end(), SortedBefore);
  return entries;
}

const char* FindSymbol(const std::vector<SymbolEntry>& entries, uintptr_t addr) {
  auto it = std::upper_bound(entries.begin(), entries.end(), addr,
                             [](uintptr_t a, const SymbolEntry& e) { return a < e.start; });
  // The nearest start at or below addr, then a few steps back in case a
  // small symbol sits inside a larger one.
  for (int steps = 0; it != entries.begin() && steps < kLookBack; ++steps) {
    --it;
    if (Holds(it->start, it->size, addr)) return it->name;
  }
  return nullptr;
}

namespace {

// The raw table libdw read for `mod`, the file it is in, and that file's
// bias; false when it cannot be read here as libdw reads it.
struct RawTable {
  const Elf64_Sym* symbols = nullptr;
  size_t count = 0;
  GElf_Addr bias = 0;
  std::vector<bool> alloc;  // per section index: SHF_ALLOC
};

bool FindRawTable(const LibdwApi& dw, Dwfl_Module* mod, RawTable* out) {
  const int count = dw.dwfl_module_getsymtab(mod);
  if (count <= 1) return false;
  GElf_Sym sym{};
  GElf_Addr value = 0;
  GElf_Word shndx = 0;
  Elf* elf = nullptr;
  Dwarf_Addr bias = 0;
  if (dw.dwfl_module_getsym_info(mod, 1, &sym, &value, &shndx, &elf, &bias) == nullptr ||
      elf == nullptr || dw.gelf_getclass(elf) != ELFCLASS64) {
    return false;
  }
  // libdw reads .symtab, else .dynsym. A count that is not the section's
  // own is a table merged with another file's (minidebuginfo): not read here.
  Elf_Scn* table = nullptr;
  Elf64_Word table_type = SHT_NULL;
  for (Elf_Scn* scn = dw.elf_nextscn(elf, nullptr); scn != nullptr;
       scn = dw.elf_nextscn(elf, scn)) {
    GElf_Shdr hdr{};
    if (dw.gelf_getshdr(scn, &hdr) == nullptr) return false;
    const size_t index = dw.elf_ndxscn(scn);
    if (out->alloc.size() <= index) out->alloc.resize(index + 1, false);
    out->alloc[index] = (hdr.sh_flags & SHF_ALLOC) != 0;
    if (hdr.sh_type == SHT_SYMTAB || (hdr.sh_type == SHT_DYNSYM && table_type != SHT_SYMTAB)) {
      if (hdr.sh_entsize != sizeof(Elf64_Sym) ||
          hdr.sh_size / sizeof(Elf64_Sym) != static_cast<size_t>(count)) {
        table = nullptr;
        table_type = hdr.sh_type;
        continue;
      }
      table = scn;
      table_type = hdr.sh_type;
    }
  }
  if (table == nullptr) return false;
  const Elf_Data* data = dw.elf_getdata(table, nullptr);
  if (data == nullptr || data->d_buf == nullptr || data->d_type != ELF_T_SYM ||
      data->d_size < static_cast<size_t>(count) * sizeof(Elf64_Sym)) {
    return false;
  }
  out->symbols = static_cast<const Elf64_Sym*>(data->d_buf);
  out->count = static_cast<size_t>(count);
  out->bias = bias;
  return true;
}

struct Candidate {
  uintptr_t start = 0;
  uintptr_t size = 0;
  int rank = 0;
  int index = 0;
};

// Before in FindSymbol's walk (from the nearest start down): a later start,
// then a better binding, then the first in the table (ReadFunctionSymbols'
// order, reversed).
bool WalkedFirst(const Candidate& a, const Candidate& b) {
  if (a.start != b.start) return a.start > b.start;
  return a.rank != b.rank ? a.rank > b.rank : a.index < b.index;
}

}  // namespace

bool FindSymbolInOnePass(const LibdwApi& dw, Dwfl_Module* mod, uintptr_t addr, const char** name,
                         SymbolWindow* window) {
  RawTable raw;
  if (!FindRawTable(dw, mod, &raw)) return false;
  SymbolWindow near;
  near.lo = addr > kSymbolWindowBytes ? addr - kSymbolWindowBytes : 0;
  near.hi = addr + std::min(kSymbolWindowBytes, UINTPTR_MAX - addr);
  // The kLookBack entries FindSymbol would walk: the last ones at or below
  // addr in its order, kept in walk order.
  std::array<Candidate, kLookBack> walk{};
  size_t held = 0;
  for (size_t i = 1; i < raw.count; ++i) {
    const Elf64_Sym& s = raw.symbols[i];
    if (!IsFunctionType(s.st_info) || s.st_shndx == SHN_UNDEF || s.st_name == 0) continue;
    if (s.st_shndx == SHN_XINDEX) return false;  // its section is elsewhere
    // libdw adds the bias to a symbol of a loaded section (and of a special
    // index); what it reads otherwise is checked below.
    const bool loaded =
        s.st_shndx >= SHN_LORESERVE || (s.st_shndx < raw.alloc.size() && raw.alloc[s.st_shndx]);
    const Candidate c{s.st_value + (loaded ? raw.bias : 0), s.st_size, BindingRank(s.st_info),
                      static_cast<int>(i)};
    if (window != nullptr && c.start >= near.lo && c.start <= near.hi) {
      near.entries.push_back({c.start, c.size, nullptr, c.rank, c.index});
    }
    if (c.start > addr) continue;
    if (held == kLookBack && !WalkedFirst(c, walk[held - 1])) continue;
    size_t at = held < kLookBack ? held++ : held - 1;
    for (; at > 0 && WalkedFirst(c, walk[at - 1]); --at) walk[at] = walk[at - 1];
    walk[at] = c;
  }
  // Each one as libdw reads it: the same address, size and type, a name.
  std::array<const char*, kLookBack> names{};
  for (size_t k = 0; k < held; ++k) {
    names[k] = NameAsLibdwReads(
        dw, mod, {walk[k].start, walk[k].size, nullptr, walk[k].rank, walk[k].index});
    if (names[k] == nullptr) return false;
  }
  if (window != nullptr) {
    std::sort(near.entries.begin(), near.entries.end(), SortedBefore);
    *window = std::move(near);
  }
  *name = nullptr;
  for (size_t k = 0; k < held; ++k) {
    if (Holds(walk[k].start, walk[k].size, addr)) {
      *name = names[k];
      break;
    }
  }
  return true;
}

bool FindSymbolInWindow(const LibdwApi& dw, Dwfl_Module* mod, const SymbolWindow& window,
                        uintptr_t addr, const char** name) {
  if (window.entries.empty() || addr < window.lo || addr > window.hi) return false;
  // FindSymbol's walk: every entry of the whole table that it passes before
  // one below the window is in the window (all that start in [lo, hi]).
  auto it = std::upper_bound(window.entries.begin(), window.entries.end(), addr,
                             [](uintptr_t a, const SymbolEntry& e) { return a < e.start; });
  for (int steps = 0; steps < kLookBack; ++steps) {
    if (it == window.entries.begin()) return false;  // the walk goes on below the window
    --it;
    // Each entry walked as libdw reads it, as FindSymbolInOnePass checks them.
    const char* read = NameAsLibdwReads(dw, mod, *it);
    if (read == nullptr) return false;
    if (Holds(it->start, it->size, addr)) {
      *name = read;
      return true;
    }
  }
  *name = nullptr;
  return true;
}

}  // namespace gpuwatch
