// libgpuwatch/base/cgroup.cc and device_identity.cc: the container, unit and
// pod labels of real /proc/<pid>/cgroup texts (docker, containerd and cri-o
// under Kubernetes with the systemd and cgroupfs drivers, podman, a systemd
// user session, a plain service, none), and a device's UUID and PCI bus id as
// dcgm-exporter spells them.
#include "libgpuwatch/base/cgroup.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>

#include "libgpuwatch/base/device_identity.h"

namespace gpuwatch {
namespace {

constexpr char kId[] = "4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b";
constexpr char kPod[] = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
constexpr char kPodUnderscores[] = "0f1e2d3c_4b5a_6978_8796_a5b4c3d2e1f0";

struct Case {
  const char* name;
  std::string text;
  std::string container_id, systemd_unit, pod_uid;
};

void Expect(const Case& c) {
  SCOPED_TRACE(c.name);
  const CgroupLabels l = ParseCgroup(c.text);
  EXPECT_EQ(l.container_id, c.container_id);
  EXPECT_EQ(l.systemd_unit, c.systemd_unit);
  EXPECT_EQ(l.pod_uid, c.pod_uid);
  EXPECT_EQ(l.pod_namespace, "");
  EXPECT_EQ(l.pod_name, "");
}

TEST(Cgroup, ContainersPodsAndUnitsOfRealCgroupFiles) {
  const std::string id = kId;
  const std::string pod = kPod;
  const Case cases[] = {
      {"docker, systemd driver, cgroup v2", "0::/system.slice/docker-" + id + ".scope\n", id,
       "system.slice", ""},
      {"docker, cgroupfs driver, cgroup v1",
       "12:pids:/docker/" + id + "\n11:memory:/docker/" + id + "\n1:name=systemd:/docker/" + id +
           "\n",
       id, "", ""},
      {"containerd under Kubernetes, systemd driver (v2)",
       "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" +
           std::string(kPodUnderscores) + ".slice/cri-containerd-" + id + ".scope\n",
       id, "kubepods-burstable-pod" + std::string(kPodUnderscores) + ".slice", pod},
      {"containerd under Kubernetes, cgroupfs driver (v1)",
       "13:memory:/kubepods/besteffort/pod" + pod + "/" + id +
           "\n1:name=systemd:/kubepods/besteffort/pod" + pod + "/" + id + "\n",
       id, "", pod},
      {"a guaranteed pod (no QoS slice), systemd driver",
       "0::/kubepods.slice/kubepods-pod" + std::string(kPodUnderscores) + ".slice/cri-containerd-" +
           id + ".scope\n",
       id, "kubepods-pod" + std::string(kPodUnderscores) + ".slice", pod},
      {"cri-o, systemd driver, crun's container subgroup",
       "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" +
           std::string(kPodUnderscores) + ".slice/crio-" + id + ".scope/container\n",
       id, "kubepods-besteffort-pod" + std::string(kPodUnderscores) + ".slice", pod},
      {"cri-o's conmon is not the container",
       "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" +
           std::string(kPodUnderscores) + ".slice/crio-conmon-" + id + ".scope\n",
       "", "crio-conmon-" + id + ".scope", pod},
      {"podman, rootless",
       "0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" + id + ".scope\n", id,
       "user.slice", ""},
      {"podman, cgroupfs", "0::/libpod_parent/libpod-" + id + "\n", id, "", ""},
      {"a systemd user session", "0::/user.slice/user-1000.slice/session-3.scope\n", "",
       "session-3.scope", ""},
      {"a service", "0::/system.slice/slurmd.service\n", "", "slurmd.service", ""},
      {"a v1 hybrid: the unified line wins",
       "12:memory:/user.slice\n1:name=systemd:/user.slice/user-1000.slice/session-4.scope\n"
       "0::/user.slice/user-1000.slice/session-4.scope\n",
       "", "session-4.scope", ""},
      {"none (a private cgroup namespace)", "0::/\n", "", "", ""},
      {"a pod directory outside kubepods is no pod", "0::/pod" + pod + "/x\n", "", "", ""},
      {"not a cgroup file", "hello\n:::\n", "", "", ""},
      {"empty", "", "", "", ""},
  };
  for (const Case& c : cases) Expect(c);
}

TEST(Cgroup, PodNamesFromTheEnvironmentAreCheckedAndCut) {
  std::map<std::string, std::string> env = {{"POD_NAMESPACE", "ml-team"},
                                            {"POD_NAME", std::string(200, 'p')}};
  const auto get = [&env](const char* n) -> const char* {
    const auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  CgroupLabels l;
  AddPodEnvironment(get, &l);
  EXPECT_EQ(l.pod_namespace, "ml-team");
  EXPECT_EQ(l.pod_name, std::string(kMaxCgroupLabelBytes, 'p'));
  env["POD_NAME"] = "bad\x1b[31mname";
  env.erase("POD_NAMESPACE");
  CgroupLabels bad;
  AddPodEnvironment(get, &bad);
  EXPECT_EQ(bad.pod_name, "");
  EXPECT_EQ(bad.pod_namespace, "");
}

TEST(DeviceIdentity, UuidAndPciBusIdAsDcgmExporterSpellsThem) {
  const unsigned char bytes[16] = {0x3b, 0x7d, 0x5e, 0x1a, 0x00, 0xff, 0x12, 0x34,
                                   0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x02};
  EXPECT_EQ(UuidText(bytes), "GPU-3b7d5e1a-00ff-1234-5678-9abcdef00102");
  EXPECT_EQ(PciBusIdText("0000:3b:00.0"), "00000000:3B:00.0");
  EXPECT_EQ(PciBusIdText("00000001:AF:1F.7"), "00000001:AF:1F.7");
  EXPECT_EQ(PciBusIdText("0000:3b:00"), "");
  EXPECT_EQ(PciBusIdText("0000:3b:00.0 "), "");
  EXPECT_EQ(PciBusIdText("0000:100:00.0"), "");
  EXPECT_EQ(PciBusIdText(""), "");
  EXPECT_EQ(PciBusIdText(nullptr), "");
}

}  // namespace
}  // namespace gpuwatch
