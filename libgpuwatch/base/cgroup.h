// Who a process runs for, as its cgroup says: the container, the systemd
// unit and the Kubernetes pod, read from /proc/self/cgroup (cgroup v2's
// "0::/path" line, else a v1 hierarchy's path) for the exporter's labels
// (docs/prometheus.md, "Container and pod labels"). Pure: the text in, the
// labels out; the agent reads the file once at attach.
//
// Thread-safety: any thread.
#ifndef GPUWATCH_LIBGPUWATCH_BASE_CGROUP_H_
#define GPUWATCH_LIBGPUWATCH_BASE_CGROUP_H_

#include <string>
#include <string_view>

namespace gpuwatch {

struct CgroupLabels {
  // The container's id, 64 hex digits, from a scope or directory that a
  // runtime names after it: docker-<id>.scope, cri-containerd-<id>.scope,
  // crio-<id>.scope, libpod-<id>.scope, or <id> alone (cgroupfs drivers:
  // /docker/<id>, /kubepods/.../pod<uid>/<id>). "" when none.
  std::string container_id;
  // The innermost systemd unit of the path that is not the container's own
  // scope: a service, a scope or a slice ("ssh.service", "session-3.scope",
  // "kubepods-burstable-pod<uid>.slice"). "" when the path has none.
  std::string systemd_unit;
  // The Kubernetes pod's UID (8-4-4-4-12 hex digits), from the kubelet's
  // layout: kubepods-<qos>-pod<uid with _>.slice (systemd driver) or
  // kubepods/<qos>/pod<uid> (cgroupfs driver). "" outside a pod.
  std::string pod_uid;
  // The pod's namespace and name, from the environment (the Downward API's
  // usual POD_NAMESPACE and POD_NAME); "" when not set.
  std::string pod_namespace;
  std::string pod_name;
};

// Each label value is cut to this many bytes (a unit's name is the only one
// that can be long); a value with bytes outside printable ASCII is dropped.
inline constexpr size_t kMaxCgroupLabelBytes = 128;

// The labels of the /proc/<pid>/cgroup text (several lines, each
// "hierarchy-id:controllers:path"); all "" for text it cannot read. The
// environment fields are left "".
CgroupLabels ParseCgroup(std::string_view proc_cgroup);

// The environment's part: POD_NAMESPACE and POD_NAME, through `get_env`
// (std::getenv, or a test's), each checked and cut as above.
template <typename GetEnv>
void AddPodEnvironment(GetEnv get_env, CgroupLabels* labels);

// A label value as kept: printable ASCII cut to kMaxCgroupLabelBytes, else "".
std::string CgroupLabelValue(std::string_view value);

template <typename GetEnv>
void AddPodEnvironment(GetEnv get_env, CgroupLabels* labels) {
  const char* ns = get_env("POD_NAMESPACE");
  const char* name = get_env("POD_NAME");
  if (ns != nullptr) labels->pod_namespace = CgroupLabelValue(ns);
  if (name != nullptr) labels->pod_name = CgroupLabelValue(name);
}

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_BASE_CGROUP_H_
