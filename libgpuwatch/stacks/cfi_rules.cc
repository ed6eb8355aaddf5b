// The parser half of gpuwatch's stack walker (cfi_unwind.h): from a pc to
// the rule that unwinds its frame, read from the module's `.eh_frame_hdr`
// (its binary search table) and `.eh_frame` (the CIE and FDE that cover the
// pc, whose call frame instructions are run up to it). Nothing is cached
// here; cfi_unwind.cc keeps the rules by pc.
#include "libgpuwatch/stacks/cfi_rules.h"

#include <link.h>

#include <cstddef>
#include <cstring>

namespace gpuwatch::internal {
namespace {

// DWARF register numbers on x86-64.
constexpr uint64_t kRegRbp = 6;
constexpr uint64_t kRegRsp = 7;

// Sanity bounds on the tables: anything larger is treated as corrupt.
constexpr uint64_t kMaxEntryBytes = 1 << 24;
constexpr int kMaxRememberedStates = 8;
constexpr int kMaxModuleRanges = 16;

// The readable loaded ranges of one module. Every read of its unwind tables
// is checked against them, so corrupt tables cannot make us read unmapped
// memory.
struct Module {
  uintptr_t eh_frame_hdr = 0;
  int count = 0;
  uintptr_t begin[kMaxModuleRanges] = {};
  uintptr_t end[kMaxModuleRanges] = {};

  bool Contains(uintptr_t at, uint64_t n) const {
    for (int i = 0; i < count; ++i) {
      if (at >= begin[i] && at <= end[i] && n <= end[i] - at) return true;
    }
    return false;
  }
};

// Reads DWARF data from a module's mapped tables, bounded by `end` and by the
// module's ranges. A failed read makes ok() false and returns 0.
class Reader {
 public:
  Reader(const Module& module, uintptr_t at, uintptr_t end)
      : module_(&module), pos_(at), end_(end) {}

  bool ok() const { return ok_; }
  uintptr_t pos() const { return pos_; }
  bool AtEnd() const { return !ok_ || pos_ >= end_; }
  void Fail() { ok_ = false; }

  void Skip(uint64_t n) {
    if (Take(n)) pos_ += n;
  }

  template <typename T>
  T Fixed() {
    T value{};
    if (!Take(sizeof(T))) return value;
    // Reading mapped tables by address is the point.
    std::memcpy(&value, reinterpret_cast<const void*>(pos_),  // NOLINT(performance-no-int-to-ptr)
                sizeof(T));
    pos_ += sizeof(T);
    return value;
  }
  uint8_t U8() { return Fixed<uint8_t>(); }

  uint64_t Uleb() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      const uint8_t byte = U8();
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    Fail();
    return 0;
  }

  int64_t Sleb() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64;) {
      const uint8_t byte = U8();
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      shift += 7;
      if ((byte & 0x80) == 0) {
        if (shift < 64 && (byte & 0x40) != 0) value |= ~uint64_t{0} << shift;
        return static_cast<int64_t>(value);
      }
    }
    Fail();
    return 0;
  }

  // A pointer in DW_EH_PE_* encoding `enc`. `datarel` is the base of
  // DW_EH_PE_datarel (the .eh_frame_hdr section), 0 where it is not allowed.
  // DW_EH_PE_indirect is not followed: only personality pointers use it, and
  // they are skipped unread.
  uint64_t Encoded(uint8_t enc, uintptr_t datarel) {
    const uintptr_t at = pos_;
    uint64_t value = 0;
    switch (enc & 0x0f) {
      case 0x00:  // absptr
      case 0x04:  // udata8
      case 0x0c:  // sdata8
        value = Fixed<uint64_t>();
        break;
      case 0x01:
        value = Uleb();
        break;
      case 0x02:
        value = Fixed<uint16_t>();
        break;
      case 0x03:
        value = Fixed<uint32_t>();
        break;
      case 0x09:
        value = static_cast<uint64_t>(Sleb());
        break;
      case 0x0a:
        value = static_cast<uint64_t>(static_cast<int64_t>(Fixed<int16_t>()));
        break;
      case 0x0b:
        value = static_cast<uint64_t>(static_cast<int64_t>(Fixed<int32_t>()));
        break;
      default:
        Fail();
        return 0;
    }
    switch (enc & 0x70) {
      case 0x00:
        break;
      case 0x10:  // pcrel
        value += at;
        break;
      case 0x30:  // datarel
        if (datarel == 0) Fail();
        value += datarel;
        break;
      default:  // textrel, funcrel, aligned: not used on x86-64 Linux
        Fail();
        return 0;
    }
    return ok_ ? value : 0;
  }

  // An entry's length field; `wide` is set for the 64-bit DWARF format.
  // Returns 0 on failure or for a zero terminator.
  uint64_t Length(bool* wide) {
    uint64_t length = Fixed<uint32_t>();
    *wide = length == 0xffffffff;
    if (*wide) length = Fixed<uint64_t>();
    if (length > kMaxEntryBytes) Fail();
    return ok_ ? length : 0;
  }

 private:
  bool Take(uint64_t n) {
    if (ok_ && pos_ <= end_ && n <= end_ - pos_ && module_->Contains(pos_, n)) return true;
    ok_ = false;
    return false;
  }

  const Module* module_;
  uintptr_t pos_;
  uintptr_t end_;
  bool ok_ = true;
};

struct Cie {
  uint64_t code_align = 1;
  int64_t data_align = -8;
  uint64_t ra_reg = 16;
  uint8_t fde_encoding = 0;  // absptr
  bool augmented = false;    // 'z': FDEs carry an augmentation length
  uintptr_t instructions = 0;
  uintptr_t end = 0;
};

bool ParseCie(const Module& module, uintptr_t at, Cie* cie) {
  Reader r(module, at, at + 12);
  bool wide = false;
  const uint64_t length = r.Length(&wide);
  if (length == 0) return false;
  cie->end = r.pos() + length;
  r = Reader(module, r.pos(), cie->end);
  const uint64_t id = wide ? r.Fixed<uint64_t>() : r.Fixed<uint32_t>();
  const uint8_t version = r.U8();
  if (!r.ok() || id != 0 || (version != 1 && version != 3 && version != 4)) return false;
  char augmentation[8] = {};
  for (size_t i = 0;; ++i) {
    const char c = static_cast<char>(r.U8());
    if (!r.ok() || i == sizeof(augmentation)) return false;
    augmentation[i] = c;
    if (c == '\0') break;
  }
  if (version == 4) r.Skip(2);  // address size, segment selector size
  cie->code_align = r.Uleb();
  cie->data_align = r.Sleb();
  cie->ra_reg = version == 1 ? r.U8() : r.Uleb();
  if (augmentation[0] == 'z') {
    cie->augmented = true;
    const uint64_t size = r.Uleb();
    const uintptr_t data_end = r.pos() + size;
    for (const char* c = augmentation + 1; *c != '\0' && r.ok(); ++c) {
      if (*c == 'R') {
        cie->fde_encoding = r.U8();
      } else if (*c == 'P') {
        const uint8_t enc = r.U8();
        r.Encoded(static_cast<uint8_t>(enc & 0x7f), 0);  // the personality routine: not needed
      } else if (*c == 'L') {
        r.U8();  // LSDA encoding
      } else if (*c != 'B' && *c != 'G') {
        // 'S', a signal frame: every register is restored from a context.
        // Anything unknown: its data could be skipped (it ends at data_end),
        // but not what it means for the FDEs. Either way the CIE is not used.
        return false;
      }
    }
    if (!r.ok() || data_end < r.pos()) return false;
    r.Skip(data_end - r.pos());
  } else if (augmentation[0] != '\0') {
    return false;  // e.g. GCC 2's "eh": its layout is not known
  }
  cie->instructions = r.pos();
  return r.ok() && cie->code_align != 0;
}

// How one register is recovered in the caller.
struct RegRule {
  enum Kind : uint8_t { kSame, kOffset, kUndefined, kOther };
  Kind kind = kSame;
  int64_t offset = 0;  // kOffset: saved at CFA + offset
};

struct Row {
  uint64_t cfa_reg = kRegRsp;
  int64_t cfa_offset = 8;
  bool cfa_expression = false;
  RegRule rbp;
  RegRule ra;
};

// value * factor, wrapping: the tables are not trusted, and an absurd offset
// is refused later (RuleOf) rather than overflowing here.
int64_t Scale(uint64_t value, int64_t factor) {
  return static_cast<int64_t>(value * static_cast<uint64_t>(factor));
}

// Runs call frame instructions from `r` until the row that covers `pc`.
// `loc` is the address of the row being built; `initial` is the row after
// the CIE's instructions (for DW_CFA_restore). Returns false on anything not
// understood.
bool Execute(Reader r, const Cie& cie, uintptr_t pc, uintptr_t* loc, Row* row, const Row& initial) {
  Row stack[kMaxRememberedStates];
  int depth = 0;
  auto set = [&](uint64_t reg, RegRule rule) {
    if (reg == kRegRbp) row->rbp = rule;
    if (reg == cie.ra_reg) row->ra = rule;
  };
  auto restore = [&](uint64_t reg) {
    if (reg == kRegRbp) row->rbp = initial.rbp;
    if (reg == cie.ra_reg) row->ra = initial.ra;
  };
  auto offset = [&](uint64_t reg, int64_t off) { set(reg, {RegRule::kOffset, off}); };
  auto advance = [&](uint64_t delta) {
    *loc += delta * cie.code_align;
    return *loc > pc;
  };
  const auto data_align = cie.data_align;
  while (!r.AtEnd()) {
    const uint8_t op = r.U8();
    const uint8_t low = op & 0x3f;
    switch (op & 0xc0) {
      case 0x40:  // DW_CFA_advance_loc
        if (advance(low)) return true;
        continue;
      case 0x80:  // DW_CFA_offset
        offset(low, Scale(r.Uleb(), data_align));
        continue;
      case 0xc0:  // DW_CFA_restore
        restore(low);
        continue;
      default:
        break;
    }
    switch (op) {
      case 0x00:  // nop
        break;
      case 0x01:  // set_loc
        *loc = r.Encoded(cie.fde_encoding, 0);
        if (*loc > pc) return r.ok();
        break;
      case 0x02:
        if (advance(r.U8())) return r.ok();
        break;
      case 0x03:
        if (advance(r.Fixed<uint16_t>())) return r.ok();
        break;
      case 0x04:
        if (advance(r.Fixed<uint32_t>())) return r.ok();
        break;
      case 0x05: {  // offset_extended
        const uint64_t reg = r.Uleb();
        offset(reg, Scale(r.Uleb(), data_align));
        break;
      }
      case 0x06:  // restore_extended
        restore(r.Uleb());
        break;
      case 0x07:  // undefined
        set(r.Uleb(), {RegRule::kUndefined, 0});
        break;
      case 0x08:  // same_value
        set(r.Uleb(), {RegRule::kSame, 0});
        break;
      case 0x09: {  // register
        const uint64_t reg = r.Uleb();
        r.Uleb();
        set(reg, {RegRule::kOther, 0});
        break;
      }
      case 0x0a:  // remember_state
        if (depth == kMaxRememberedStates) return false;
        stack[depth++] = *row;
        break;
      case 0x0b:  // restore_state
        if (depth == 0) return false;
        *row = stack[--depth];
        break;
      case 0x0c:  // def_cfa
        row->cfa_reg = r.Uleb();
        row->cfa_offset = static_cast<int64_t>(r.Uleb());
        row->cfa_expression = false;
        break;
      case 0x0d:  // def_cfa_register
        row->cfa_reg = r.Uleb();
        row->cfa_expression = false;
        break;
      case 0x0e:  // def_cfa_offset
        row->cfa_offset = static_cast<int64_t>(r.Uleb());
        break;
      case 0x0f:  // def_cfa_expression
        r.Skip(r.Uleb());
        row->cfa_expression = true;
        break;
      case 0x10:    // expression
      case 0x16: {  // val_expression
        const uint64_t reg = r.Uleb();
        r.Skip(r.Uleb());
        set(reg, {RegRule::kOther, 0});
        break;
      }
      case 0x11: {  // offset_extended_sf
        const uint64_t reg = r.Uleb();
        offset(reg, Scale(static_cast<uint64_t>(r.Sleb()), data_align));
        break;
      }
      case 0x12:  // def_cfa_sf
        row->cfa_reg = r.Uleb();
        row->cfa_offset = Scale(static_cast<uint64_t>(r.Sleb()), data_align);
        row->cfa_expression = false;
        break;
      case 0x13:  // def_cfa_offset_sf
        row->cfa_offset = Scale(static_cast<uint64_t>(r.Sleb()), data_align);
        break;
      case 0x14:    // val_offset
      case 0x15: {  // val_offset_sf
        const uint64_t reg = r.Uleb();
        if (op == 0x14) {
          r.Uleb();
        } else {
          r.Sleb();
        }
        set(reg, {RegRule::kOther, 0});
        break;
      }
      case 0x2e:  // GNU_args_size
        r.Uleb();
        break;
      case 0x2f: {  // GNU_negative_offset_extended
        const uint64_t reg = r.Uleb();
        offset(reg, Scale(0 - r.Uleb(), data_align));
        break;
      }
      default:
        return false;
    }
  }
  return r.ok();
}

bool FitsIn(int64_t value, int bits) {
  const int64_t limit = int64_t{1} << (bits - 1);
  return value >= -limit && value < limit;
}

CfiRule RuleOf(const Row& row) {
  CfiRule rule;
  if (row.cfa_expression || (row.cfa_reg != kRegRsp && row.cfa_reg != kRegRbp)) return rule;
  if (row.ra.kind == RegRule::kUndefined) {
    rule.ok = true;
    rule.outermost = true;
    return rule;
  }
  if (row.ra.kind != RegRule::kOffset || !FitsIn(row.ra.offset, 12)) return rule;
  if (row.rbp.kind == RegRule::kOffset) {
    if (!FitsIn(row.rbp.offset, 12)) return rule;
    rule.rbp_saved = true;
    rule.rbp_offset = static_cast<int32_t>(row.rbp.offset);
  } else if (row.rbp.kind != RegRule::kSame) {
    return rule;
  }
  if (!FitsIn(row.cfa_offset, 32)) return rule;
  rule.ok = true;
  rule.cfa_from_rbp = row.cfa_reg == kRegRbp;
  rule.cfa_offset = static_cast<int32_t>(row.cfa_offset);
  rule.ra_offset = static_cast<int32_t>(row.ra.offset);
  return rule;
}

// The FDE whose range holds `pc`, by binary search of .eh_frame_hdr's table;
// 0 when there is none or the table is not in the usual form.
uintptr_t FindFde(const Module& module, uintptr_t pc) {
  const uintptr_t hdr = module.eh_frame_hdr;
  Reader r(module, hdr, hdr + 64);
  const uint8_t version = r.U8();
  const uint8_t frame_ptr_enc = r.U8();
  const uint8_t count_enc = r.U8();
  const uint8_t table_enc = r.U8();
  if (!r.ok() || version != 1 || count_enc == 0xff) return 0;
  r.Encoded(frame_ptr_enc, hdr);
  const uint64_t count = r.Encoded(count_enc, hdr);
  // DW_EH_PE_datarel | DW_EH_PE_sdata4: what every linker writes.
  if (!r.ok() || table_enc != 0x3b || count == 0 || count > kMaxEntryBytes) return 0;
  const uintptr_t table = r.pos();
  if (!module.Contains(table, count * 8)) return 0;
  auto entry = [&](uint64_t i, int field) {
    int32_t value = 0;
    const uintptr_t at = table + i * 8 + static_cast<uint64_t>(field) * 4;
    std::memcpy(&value, reinterpret_cast<const void*>(at), 4);  // NOLINT(performance-no-int-to-ptr)
    return hdr + static_cast<intptr_t>(value);
  };
  if (pc < entry(0, 0)) return 0;
  uint64_t lo = 0;
  uint64_t hi = count;  // the answer is in [lo, hi)
  while (hi - lo > 1) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (entry(mid, 0) <= pc) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return entry(lo, 1);
}

CfiRule RuleFromModule(const Module& module, uintptr_t pc) {
  const uintptr_t fde = FindFde(module, pc);
  if (fde == 0) return {};
  Reader r(module, fde, fde + 12);
  bool wide = false;
  const uint64_t length = r.Length(&wide);
  if (length == 0) return {};
  const uintptr_t end = r.pos() + length;
  r = Reader(module, r.pos(), end);
  const uintptr_t cie_field = r.pos();
  const uint64_t cie_offset = wide ? r.Fixed<uint64_t>() : r.Fixed<uint32_t>();
  Cie cie;
  if (!r.ok() || cie_offset == 0 || cie_offset > cie_field ||
      !ParseCie(module, cie_field - cie_offset, &cie)) {
    return {};
  }
  const uintptr_t begin = r.Encoded(cie.fde_encoding, 0);
  const uintptr_t range = r.Encoded(cie.fde_encoding & 0x0f, 0);
  if (!r.ok() || pc < begin || pc - begin >= range) return {};
  if (cie.augmented) r.Skip(r.Uleb());
  if (!r.ok()) return {};
  Row row;
  uintptr_t loc = begin;
  if (!Execute(Reader(module, cie.instructions, cie.end), cie, pc, &loc, &row, row)) return {};
  const Row initial = row;
  loc = begin;
  if (!Execute(Reader(module, r.pos(), end), cie, pc, &loc, &row, initial)) return {};
  return RuleOf(row);
}

struct FindModuleArg {
  uintptr_t pc;
  Module* module;
  bool found;
  unsigned long long subs;
};

int FindModule(dl_phdr_info* info, size_t size, void* data) {
  auto* arg = static_cast<FindModuleArg*>(data);
  if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
    arg->subs = info->dlpi_subs;
  }
  bool holds = false;
  for (int i = 0; i < info->dlpi_phnum && !holds; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    holds = ph.p_type == PT_LOAD && arg->pc >= start && arg->pc - start < ph.p_memsz;
  }
  if (!holds) return 0;
  Module* m = arg->module;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_GNU_EH_FRAME) m->eh_frame_hdr = start;
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_R) != 0 && m->count < kMaxModuleRanges) {
      m->begin[m->count] = start;
      m->end[m->count] = start + ph.p_filesz;  // what the file maps; the rest is zeroed memory
      ++m->count;
    }
  }
  arg->found = true;
  return 1;
}

}  // namespace

CfiRule ComputeCfiRule(uintptr_t pc, unsigned long long* loader_unloads) {
  Module module;
  FindModuleArg arg{pc, &module, false, 0};
  dl_iterate_phdr(&FindModule, &arg);
  if (loader_unloads != nullptr) *loader_unloads = arg.subs;
  if (!arg.found || module.eh_frame_hdr == 0) return {};
  return RuleFromModule(module, pc);
}

CfiRule CfiRuleFromTables(const void* begin, size_t size, size_t hdr_offset, uintptr_t pc) {
  Module module;
  module.count = 1;
  module.begin[0] = reinterpret_cast<uintptr_t>(begin);
  module.end[0] = module.begin[0] + size;
  if (hdr_offset >= size) return {};
  module.eh_frame_hdr = module.begin[0] + hdr_offset;
  return RuleFromModule(module, pc);
}

}  // namespace gpuwatch::internal
