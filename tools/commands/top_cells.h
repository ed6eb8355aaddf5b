// The cells of `gpuwatch top`'s screen: text cut or padded to a width in
// columns (UTF-8, one column a code point), byte counts in top's short form,
// times, and the history sparkline. Pure functions of their arguments, so
// that the frame's layout (top_command.cc) reads as layout.
#ifndef GPUWATCH_TOOLS_COMMANDS_TOP_CELLS_H_
#define GPUWATCH_TOOLS_COMMANDS_TOP_CELLS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpuwatch::tools::top_cells {

// Columns a UTF-8 string takes (each code point one column).
size_t Columns(const std::string& s);
// `s` cut to `width` columns (never inside a code point), or padded to it.
std::string Fit(const std::string& s, size_t width, bool pad = true);
// `s` right-aligned in `width` columns (as it is when wider).
std::string Right(const std::string& s, size_t width);
// `s` in `width` columns: cut, with `ellipsis` at its end, when longer.
std::string FitCut(const std::string& s, size_t width, const std::string& ellipsis);
// A path in at most `width` columns: its start dropped for `ellipsis`, up
// to a slash where it can.
std::string ShortPath(const std::string& path, size_t width, const std::string& ellipsis);

// Bytes in top's short form: "512", "3.2K", "6.2M", "1.5G" (powers of 1024).
std::string Short(double bytes);
// A change in bytes: "+3.2K", "-1.0M", "0"; "-" when unknown.
std::string Signed(const std::optional<double>& v);
// Bytes a second: "3.2K/s"; "-" when unknown.
std::string Rate(const std::optional<double>& v);
inline double Bytes(uint64_t v) { return static_cast<double>(v); }

// "1h02m", "3m07s".
std::string Uptime(uint64_t ns);
// Uptime of `ms` milliseconds and " ago".
std::string Ago(uint64_t ms);

// `values` (null: unknown) as `width` characters, oldest left, scaled to the
// largest; each character the largest of the samples it covers.
std::string Sparkline(const std::vector<std::optional<uint64_t>>& values, size_t width, bool utf8);

}  // namespace gpuwatch::tools::top_cells

#endif  // GPUWATCH_TOOLS_COMMANDS_TOP_CELLS_H_
