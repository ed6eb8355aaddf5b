#include "libgpuwatch/base/cgroup.h"

#include <algorithm>
#include <array>
#include <vector>

namespace gpuwatch {
namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool IsHex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// The path of the line that says most: cgroup v2's "0::" line, else the v1
// hierarchy systemd manages, else the memory controller's, else the first.
std::string_view PickPath(std::string_view text) {
  std::string_view systemd;
  std::string_view memory;
  std::string_view first;
  while (!text.empty()) {
    const size_t end = std::min(text.find('\n'), text.size());
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(std::min(end + 1, text.size()));
    const size_t a = line.find(':');
    const size_t b = a == std::string_view::npos ? a : line.find(':', a + 1);
    if (b == std::string_view::npos) continue;
    const std::string_view id = line.substr(0, a);
    const std::string_view controllers = line.substr(a + 1, b - a - 1);
    const std::string_view path = line.substr(b + 1);
    if (path.empty() || path[0] != '/') continue;
    if (id == "0" && controllers.empty()) return path;
    if (controllers == "name=systemd" && systemd.empty()) systemd = path;
    if (memory.empty()) {
      // "memory" among comma-separated controllers.
      std::string_view rest = controllers;
      while (!rest.empty()) {
        const size_t comma = std::min(rest.find(','), rest.size());
        if (rest.substr(0, comma) == "memory") memory = path;
        rest.remove_prefix(std::min(comma + 1, rest.size()));
      }
    }
    if (first.empty()) first = path;
  }
  if (!systemd.empty()) return systemd;
  if (!memory.empty()) return memory;
  return first;
}

std::vector<std::string_view> Components(std::string_view path) {
  std::vector<std::string_view> out;
  while (!path.empty()) {
    const size_t slash = std::min(path.find('/'), path.size());
    if (slash > 0) out.push_back(path.substr(0, slash));
    path.remove_prefix(std::min(slash + 1, path.size()));
  }
  return out;
}

// The container id a component names, or "".
std::string_view ContainerId(std::string_view c) {
  if (EndsWith(c, ".scope")) c.remove_suffix(6);
  constexpr std::array<std::string_view, 5> kPrefixes = {"docker-", "cri-containerd-", "crio-",
                                                         "libpod-", "containerd-"};
  for (std::string_view p : kPrefixes) {
    if (StartsWith(c, p)) {
      c.remove_prefix(p.size());
      break;
    }
  }
  if (c.size() != 64 || !std::all_of(c.begin(), c.end(), IsHex)) return {};
  return c;
}

bool IsUnit(std::string_view c) {
  return EndsWith(c, ".service") || EndsWith(c, ".scope") || EndsWith(c, ".slice");
}

// A pod UID as the kubelet writes it in a cgroup name (with '_' for '-' in
// the systemd driver's), normalised to dashes; "" when it is not one.
std::string PodUid(std::string_view raw) {
  std::string uid(raw);
  std::replace(uid.begin(), uid.end(), '_', '-');
  if (uid.size() != 36) return {};
  for (size_t i = 0; i < uid.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? uid[i] != '-' : !IsHex(uid[i])) return {};
  }
  return uid;
}

std::string PodUidOf(const std::vector<std::string_view>& parts) {
  bool in_kubepods = false;
  for (std::string_view c : parts) {
    if (StartsWith(c, "kubepods")) {
      in_kubepods = true;
      // systemd driver: kubepods-burstable-pod<uid>.slice, kubepods-pod<uid>.slice
      const size_t pod = c.find("-pod");
      if (pod != std::string_view::npos && EndsWith(c, ".slice")) {
        std::string uid = PodUid(c.substr(pod + 4, c.size() - pod - 4 - 6));
        if (!uid.empty()) return uid;
      }
      continue;
    }
    // cgroupfs driver: kubepods/burstable/pod<uid>
    if (in_kubepods && StartsWith(c, "pod")) {
      std::string uid = PodUid(c.substr(3));
      if (!uid.empty()) return uid;
    }
  }
  return {};
}

}  // namespace

std::string CgroupLabelValue(std::string_view value) {
  if (!std::all_of(value.begin(), value.end(), [](char c) { return c >= 0x20 && c < 0x7f; })) {
    return {};
  }
  return std::string(value.substr(0, kMaxCgroupLabelBytes));
}

CgroupLabels ParseCgroup(std::string_view proc_cgroup) {
  CgroupLabels out;
  const std::vector<std::string_view> parts = Components(PickPath(proc_cgroup));
  size_t container_at = parts.size();
  for (size_t i = parts.size(); i-- > 0;) {
    const std::string_view id = ContainerId(parts[i]);
    if (!id.empty()) {
      out.container_id = CgroupLabelValue(id);
      container_at = i;
      break;
    }
  }
  for (size_t i = parts.size(); i-- > 0;) {
    if (i != container_at && IsUnit(parts[i])) {
      out.systemd_unit = CgroupLabelValue(parts[i]);
      break;
    }
  }
  out.pod_uid = PodUidOf(parts);
  return out;
}

}  // namespace gpuwatch
