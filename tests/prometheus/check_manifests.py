#!/usr/bin/env python3
"""The Kubernetes manifests of deploy/kubernetes, checked offline.

Each resource of a Kubernetes kind is validated by kubernetes-validate (PyPI:
it bundles the Kubernetes OpenAPI schemas) with --strict, which refuses any
field the schema does not have; a copy of the DaemonSet with one misspelled
field must fail, so that the validator is known to look. No offline schema of
the Prometheus Operator's ServiceMonitor CRD is packaged for Debian or PyPI
(for this Python), so the ServiceMonitor is checked by what ties it to the
rest: it selects the Service's labels in its namespace by the Service's port
name; the Service selects the DaemonSet's pods and their port; the exporter
runs in node mode with the node's PID namespace and the node directory, which
the example GPU pod mounts at the same path.

Usage: check_manifests.py DEPLOY_DIR. kubernetes-validate is
$GPUWATCH_KUBERNETES_VALIDATE or found on PATH; exit 77 (skipped) without it
(.ci/run installs it in a virtual environment).
"""
import os
import shutil
import subprocess
import sys
import tempfile

import yaml

SKIP = 77


def fail(message):
    print("FAIL: " + message, file=sys.stderr)
    sys.exit(1)


def validate(tool, paths):
    result = subprocess.run([tool, "--strict", "--no-warn"] + paths,
                            capture_output=True, text=True, check=False)
    return result.returncode, result.stdout + result.stderr


def load(path):
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d]


def main():
    deploy = os.path.join(sys.argv[1], "kubernetes")
    tool = os.environ.get("GPUWATCH_KUBERNETES_VALIDATE") or shutil.which("kubernetes-validate")
    if not tool or not os.access(tool, os.X_OK):
        print("kubernetes-validate is not installed (pip install kubernetes-validate; "
              ".ci/run does): skipped")
        return SKIP
    exporter = os.path.join(deploy, "gpuwatch-exporter.yaml")
    pod = os.path.join(deploy, "example-gpu-pod.yaml")
    monitor = os.path.join(deploy, "servicemonitor.yaml")

    rc, out = validate(tool, [exporter, pod])
    if rc != 0:
        fail("kubernetes-validate refused the manifests:\n" + out)
    passed = sorted(line.split("for resource ")[1].split(" ")[0]
                    for line in out.splitlines() if " passed for resource " in line)
    expected = ["daemonset/gpuwatch-exporter", "namespace/gpuwatch", "pod/train",
                "service/gpuwatch-exporter", "serviceaccount/gpuwatch-exporter"]
    if passed != expected:
        fail(f"validated {passed}, expected {expected}:\n{out}")

    with open(exporter, encoding="utf-8") as f:
        text = f.read()
    with tempfile.TemporaryDirectory() as tmp:
        bad = os.path.join(tmp, "bad.yaml")
        with open(bad, "w", encoding="utf-8") as f:
            f.write(text.replace("hostPID: true", "hostPid: true"))
        rc, out = validate(tool, [bad])
        if rc == 0 or "'hostPid' was unexpected" not in out:
            fail("a misspelled field passed kubernetes-validate --strict:\n" + out)

    docs = {(d["kind"], d["metadata"]["name"]): d for d in load(exporter) + load(pod)}
    daemonset = docs[("DaemonSet", "gpuwatch-exporter")]
    service = docs[("Service", "gpuwatch-exporter")]
    spec = daemonset["spec"]["template"]["spec"]
    labels = daemonset["spec"]["template"]["metadata"]["labels"]
    container = spec["containers"][0]
    if not spec.get("hostPID"):
        fail("the DaemonSet does not share the node's PID namespace")
    if "--node" not in container["args"]:
        fail(f"the exporter does not run in node mode: {container['args']}")
    if not set(service["spec"]["selector"].items()) <= set(labels.items()):
        fail("the Service does not select the DaemonSet's pods")
    port_names = {p["name"] for p in container["ports"]}
    for port in service["spec"]["ports"]:
        if port["targetPort"] not in port_names:
            fail(f"the Service's targetPort {port['targetPort']} is no container port")
    host_dirs = {v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    pod_spec = docs[("Pod", "train")]["spec"]
    pod_dirs = {v["hostPath"]["path"] for v in pod_spec["volumes"] if "hostPath" in v}
    pod_mounts = {m["mountPath"] for m in pod_spec["containers"][0]["volumeMounts"]}
    if host_dirs != {"/run/gpuwatch"} or mounts != host_dirs:
        fail(f"the exporter mounts {host_dirs} at {mounts}, not /run/gpuwatch")
    if pod_dirs != host_dirs or pod_mounts != host_dirs:
        fail(f"the GPU pod mounts {pod_dirs} at {pod_mounts}, not the exporter's {host_dirs}")
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"]
           for e in pod_spec["containers"][0]["env"]}
    if env != {"POD_NAMESPACE": "metadata.namespace", "POD_NAME": "metadata.name"}:
        fail(f"the GPU pod's Downward API environment: {env}")

    [sm] = load(monitor)
    if (sm["apiVersion"], sm["kind"]) != ("monitoring.coreos.com/v1", "ServiceMonitor"):
        fail(f"not a ServiceMonitor: {sm['apiVersion']} {sm['kind']}")
    if not set(sm["spec"]["selector"]["matchLabels"].items()) <= set(
            service["metadata"]["labels"].items()):
        fail("the ServiceMonitor does not select the Service's labels")
    if service["metadata"]["namespace"] not in sm["spec"]["namespaceSelector"]["matchNames"]:
        fail("the ServiceMonitor does not look in the Service's namespace")
    service_ports = {p["name"] for p in service["spec"]["ports"]}
    for endpoint in sm["spec"]["endpoints"]:
        if endpoint["port"] not in service_ports:
            fail(f"the ServiceMonitor scrapes port {endpoint['port']}, not one of {service_ports}")
        if not endpoint.get("honorLabels"):
            fail("the ServiceMonitor renames the series' namespace and pod labels")
    print(f"manifests: {', '.join(passed)} valid (kubernetes-validate --strict); "
          "ServiceMonitor consistent with the Service")
    return 0


if __name__ == "__main__":
    sys.exit(main())
