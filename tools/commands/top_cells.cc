#include "tools/commands/top_cells.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace gpuwatch::tools::top_cells {

size_t Columns(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80 ? 1 : 0;
  return n;
}

std::string Fit(const std::string& s, size_t width, bool pad) {
  std::string out;
  size_t cols = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if ((c & 0xC0) != 0x80) {
      if (cols == width) break;
      ++cols;
    }
    out += s[i];
  }
  if (pad && cols < width) out.append(width - cols, ' ');
  return out;
}

std::string Right(const std::string& s, size_t width) {
  const size_t cols = Columns(s);
  return cols >= width ? s : std::string(width - cols, ' ') + s;
}

std::string Short(double bytes) {
  const char* units = "BKMGTP";
  const bool negative = bytes < 0;
  double v = std::fabs(bytes);
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0) {
    std::snprintf(buf, sizeof(buf), "%s%.0f", negative ? "-" : "", v);
  } else {
    std::snprintf(buf, sizeof(buf), "%s%.*f%c", negative ? "-" : "", v < 10 ? 1 : 0, v, units[u]);
  }
  return buf;
}

std::string Signed(const std::optional<double>& v) {
  if (!v.has_value()) return "-";
  if (*v == 0) return "0";
  return (*v > 0 ? "+" : "") + Short(*v);
}

std::string Rate(const std::optional<double>& v) { return v.has_value() ? Short(*v) + "/s" : "-"; }

std::string Uptime(uint64_t ns) {
  const uint64_t s = ns / 1000000000ULL;
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof(buf), "%lluh%02llum", static_cast<unsigned long long>(s / 3600),
                  static_cast<unsigned long long>(s / 60 % 60));
  } else {
    std::snprintf(buf, sizeof(buf), "%llum%02llus", static_cast<unsigned long long>(s / 60),
                  static_cast<unsigned long long>(s % 60));
  }
  return buf;
}

std::string Sparkline(const std::vector<std::optional<uint64_t>>& values, size_t width, bool utf8) {
  static const char* const kBlocks[] = {"\u2581", "\u2582", "\u2583", "\u2584",
                                        "\u2585", "\u2586", "\u2587", "\u2588"};
  static const char kAscii[] = "_.-:=+*#";
  if (values.empty()) return std::string(width, ' ');
  const size_t n = values.size();
  double top = 0;
  for (const std::optional<uint64_t>& v : values) {
    if (v.has_value()) top = std::max(top, Bytes(*v));
  }
  std::string out;
  // The newest samples at the right edge; fewer samples than columns: padded left.
  const size_t per = (n + width - 1) / width;
  const size_t used = (n + per - 1) / per;
  out.append(width - std::min(width, used), ' ');
  for (size_t c = 0; c < used; ++c) {
    double m = -1;
    for (size_t i = c * per; i < std::min(n, (c + 1) * per); ++i) {
      if (values[i].has_value()) m = std::max(m, Bytes(*values[i]));
    }
    if (m < 0) {
      out += '?';
      continue;
    }
    const int level = top <= 0 ? 0 : std::min(7, static_cast<int>(std::lround(m / top * 7.0)));
    if (utf8) {
      out += kBlocks[level];
    } else {
      out += kAscii[level];
    }
  }
  return out;
}

std::string Ago(uint64_t ms) { return Uptime(ms * 1000000) + " ago"; }

std::string FitCut(const std::string& s, size_t width, const std::string& ellipsis) {
  if (Columns(s) <= width) return s;
  return Fit(s, width - std::min(width, Columns(ellipsis)), false) + ellipsis;
}

std::string ShortPath(const std::string& path, size_t width, const std::string& ellipsis) {
  const size_t cols = Columns(path);
  if (cols <= width) return path;
  size_t skip = cols - width + Columns(ellipsis);
  size_t at = 0;
  while (at < path.size() && (skip > 0 || (static_cast<unsigned char>(path[at]) & 0xC0) == 0x80)) {
    if ((static_cast<unsigned char>(path[at]) & 0xC0) != 0x80) --skip;
    ++at;
  }
  // From a directory's start where one is left.
  if (const size_t slash = path.find('/', at); slash != std::string::npos) at = slash;
  return ellipsis + path.substr(at);
}

}  // namespace gpuwatch::tools::top_cells
