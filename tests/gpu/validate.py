#!/usr/bin/env python3
"""gpuwatch's validation on a machine with an NVIDIA GPU (see tests/gpu/README.md).

Run it through tests/gpu/run.sh. Parts, in order (each prints PASS/FAIL/SKIP
lines; results go to --out, or $OUT, or ./gpu-results):

  env        what the machine has: GPU, driver, CUDA libraries, PyTorch,
             compute-sanitizer, libunwind/libdw (system or carried)
  programs   the examples and e2e test programs, shared and static cudart,
             each under LD_PRELOAD and under CUDA_INJECTION64_PATH, their
             reports checked as the simulator tests check them (checks.py)
  triage     issue 35 (triage.py): kernel_fault, whose kernel faults, under
             gpuwatch: the report's sticky error at the call where the program
             saw it, the kernels before it, and the question where a fault
             surfaces on this driver; hung_copy hung in a copy behind a kernel
             that never finishes: `gpuwatch why PID` names the call and its line,
             then SIGKILL and wait
  sequences  every program also under a CUPTI recorder, on the GPU and on the
             simulator; compare_sequences.py diffs what gpuwatch would see
  torch_leak examples/torch_leak.py under each PyTorch allocator mode
  torch_counters gpuwatch's live bytes against PyTorch's memory_reserved()
             and memory_allocated(), a pinned non_blocking copy and an
             OutOfMemoryError, per allocator mode (tests/gpu/torch_counters.py)
  torch_pytest the pytest plugin on PyTorch tests under each allocator mode:
             tests/e2e/programs/torch_pytest (exact), tests/gpu/torch_pytest
             (a module fixture's nn.Linear: cuBLAS's workspace)
  torch_phases torch.cuda.nvtx ranges and gpuwatch.phase as phases
             (tests/gpu/torch_phases.py): does libtorch's NVTX load gpuwatch
             through NVTX_INJECTION64_PATH, and are the bytes per phase exact
  torch_modes tests/e2e/programs/torch_{expandable,pinned,oom,nvtx}.py, which
             tests/e2e/torch_modes_test.cc runs on the simulator: VMM bytes ==
             memory_reserved() under expandable segments, pinned host memory ==
             host_memory_stats(), the OOM report's live bytes == reserved at the
             failing line, the bytes per NVTX phase
  sanitizer  compute-sanitizer --leak-check full on the leaky examples, its
             leaked bytes, allocations, sites and wall time against gpuwatch's
  torch_step the time of a PyTorch training step with and without gpuwatch
  overhead   bench/overhead.py on the real driver: ns added per event

--sim runs everything that can run without a GPU on the simulator (the shared
builds, the sequences of the simulator against itself, the overhead
benchmark, triage with the simulator's GWSIM_FAULT_KERNEL and GWSIM_HANG_KERNEL,
and the PyTorch parts that need no cuBLAS: torch_counters,
torch_pytest, torch_phases), which is how this script is tested where there
is no GPU. PyTorch's parts run under --python (default: $GPUWATCH_TORCH_PYTHON,
else python3); scripts/torch-env.sh prints one for the simulator.
--dry-run prints what would run, and runs nothing.

Exit status: 0 when nothing failed, 1 when something did, 2 on bad usage.
"""

import argparse
import json
import os
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, HERE)
import checks  # noqa: E402
import compare_sequences  # noqa: E402
import triage  # noqa: E402

SOURCE_DIR = os.path.dirname(os.path.dirname(HERE))
# In the order they run: what the next parts need first, and what a short
# lease must not miss (the simulator's questions, PyTorch) before the longest.
PARTS = ["env", "programs", "questions", "cupti_clients", "live", "triage", "sequences",
         "torch_leak", "torch_counters", "torch_pytest", "torch_phases", "torch_profiler",
         "torch_modes", "torch_step", "overhead", "launches", "sanitizer"]


def no_args(directory, names):
    """(name, directory, no arguments, exit status 0) for each of `names`."""
    return [(name, directory, [], 0) for name in names]


# (name, directory under the build, args, expected exit status)
SHARED_PROGRAMS = (
    no_args("examples", ["leaky_loop", "oom", "pool_and_driver"])
    + no_args("tests/programs", ["api_mix", "leak_sites", "transfers", "threads", "snapshot_signal"])
    + [("exit_with", "tests/programs", ["3"], 3)]
    + no_args("tests/programs", [
        # Issue 16's programs: address reuse across threads, zero-copy, findings, arrays, graphs.
        "reuse_race", "zero_copy", "copy_findings", "arrays", "graphs", "graph_reuse",
        # Issue 29: VMM per physical handle, an imported handle.
        "vmm_handles",
        # Issue 20: pool regions through NVTX's memory extension.
        "nvtx_pool"])
    # Issue 29: CUDA IPC between a parent and the child it runs (the child
    # opens the parent's memory, checks its bytes and closes it).
    + [("ipc_pair", "tests/programs", ["parent", "close"], 0)])
# Programs that need two devices (skipped on a machine with one).
TWO_DEVICE_PROGRAMS = no_args("tests/programs", ["default_copies", "vmm_striped"])
STATIC_PROGRAMS = ["leaky_loop", "oom", "pool_and_driver", "api_mix", "leak_sites", "transfers"]
# Programs whose CUPTI sequence is compared (oom's length depends on the device's memory).
SEQUENCE_PROGRAMS = ["leaky_loop", "api_mix", "leak_sites", "transfers", "threads",
                     "pool_and_driver", "exit_with", "nvcc_program"]
# Programs whose threads race with an attach inside the first CUDA call
# (injection): which calls were in flight then differs run to run.
RACY_PROGRAMS = ["threads"]
TORCH_MODES = [  # (name, environment, the memory kind the leak must show up as)
    ("caching", {}, "device"),
    ("no_caching", {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}, "device"),
    ("expandable_segments", {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}, "vmm"),
    ("cudaMallocAsync", {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"}, "pool"),
]
# What a PyTorch run on the simulator stops at, by the text it prints, and what it lacks.
SIM_GAPS = [("Can't find cuMemRetainAllocationHandle",
             "cuMemRetainAllocationHandle (expandable_segments:True)"),
            ("CUBLAS_STATUS_NOT_INITIALIZED", "cuBLAS"), ("CUDNN_STATUS_NOT_INITIALIZED", "cuDNN")]
DEP_SONAMES = ["libunwind.so.8", "libdw.so.1", "libelf.so.1"]
CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED = 13  # cupti_callbacks.h


def parse_sanitizer(text):
    """(leaked bytes, allocations, sites) from compute-sanitizer --leak-check
    full output; a site is the first host frame of a leak outside the CUDA
    libraries, as FILE:LINE when the frame has one (as gpuwatch's locations),
    else FUNCTION in MODULE. Bytes and allocations are None without a LEAK
    SUMMARY line. Numbers may carry thousands separators ("262,144 bytes")."""
    def number(s):
        return int(s.replace(",", ""))
    m = re.search(r"LEAK SUMMARY:\s*([\d,]+)\s*bytes leaked in\s*([\d,]+)\s*allocations", text)
    nbytes, count = (number(m.group(1)), number(m.group(2))) if m else (None, None)
    sites = set()
    for block in re.split(r"=+\s*Leaked [\d,]+ bytes", text)[1:]:
        for fm in re.finditer(r"Host Frame:\s*(.*?)\s*(?:\[(0x[0-9a-f]+)\])?\s+in\s+(\S+)\s*$",
                              block, re.M):
            module = os.path.basename(fm.group(3))
            if re.match(r"lib(cuda|cudart|cupti)", module):
                continue
            where = re.search(r" in (\S+:\d+)$", fm.group(1) or "")
            sites.add(os.path.basename(where.group(1)) if where else
                      f"{fm.group(1) or fm.group(2)} in {module}")
            break
    return nbytes, count, sites


class Validator:
    def __init__(self, args):
        self.args = args
        self.build = os.path.abspath(args.build)
        self.out = os.path.abspath(args.out)
        self.sim_dir = os.path.join(self.build, "tests", "sim", "lib")
        self.lib = os.path.join(self.build, "lib", "libgpuwatch.so")
        self.recorder = os.path.join(self.build, "tests", "gpu", "libgwgpu_recorder.so")
        self.target = "simulator" if args.sim else "gpu"
        # Expected lines come from the sources the programs were built from:
        # a bundle carries them (src/), a build directory's are the tree's.
        self.source_dir = SOURCE_DIR
        carried = os.path.join(self.build, "src")
        if os.path.isdir(carried):
            self.source_dir = carried
        else:
            try:
                with open(os.path.join(self.build, "CMakeCache.txt")) as f:
                    for line in f:
                        if line.startswith("CMAKE_HOME_DIRECTORY:INTERNAL="):
                            self.source_dir = line.split("=", 1)[1].strip()
            except OSError:
                pass
        self.results = []
        self.start = time.monotonic()
        self.deadline = self.start + args.budget
        self.extra_ld = []  # carried libraries the system lacks, and the system's cudart
        self.env_info = {}
        os.makedirs(self.out, exist_ok=True)
        self.log = open(os.path.join(self.out, "commands.log"), "a")

    # --- bookkeeping -----------------------------------------------------

    def record(self, status, name, detail=""):
        line = f"{status} {name}" + (f": {detail}" if detail else "")
        print(line, flush=True)
        self.results.append({"status": status, "name": name, "detail": detail})

    def left(self):
        return self.deadline - time.monotonic()

    def out_path(self, *parts):
        path = os.path.join(self.out, *parts)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return path

    def base_env(self, sim=None):
        sim = self.args.sim if sim is None else sim
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("GPUWATCH_", "GWSIM_", "GWREC_", "PYTORCH_CUDA_ALLOC_CONF"))
               and k not in ("LD_PRELOAD", "CUDA_INJECTION64_PATH",
                             "PYTORCH_NO_CUDA_MEMORY_CACHING")}
        paths = ([self.sim_dir] if sim else []) + self.extra_ld
        if env.get("LD_LIBRARY_PATH"):
            paths.append(env["LD_LIBRARY_PATH"])
        if paths:
            env["LD_LIBRARY_PATH"] = ":".join(paths)
        return env

    def run(self, argv, env, timeout, cwd=None, label=""):
        """Runs a command; returns (exit code or None on timeout, stdout, stderr, seconds)."""
        shown = {k: v for k, v in env.items() if os.environ.get(k) != v}
        cmd = " ".join(f"{k}={v}" for k, v in sorted(shown.items())) + " " + " ".join(argv)
        self.log.write(f"[{time.monotonic() - self.start:7.1f}s] {label}: {cmd}\n")
        self.log.flush()
        if self.args.dry_run:
            print(f"DRY {label}: {cmd}")
            return 0, "", "", 0.0
        t0 = time.monotonic()
        try:
            p = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True,
                               timeout=max(1, min(timeout, self.left())), errors="replace")
            return p.returncode, p.stdout, p.stderr, time.monotonic() - t0
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
            return None, out, err, time.monotonic() - t0
        except OSError as e:
            return 127, "", str(e), time.monotonic() - t0

    def have_time(self, name, need):
        if self.args.dry_run or self.left() >= need:
            return True
        self.record("SKIP", name, f"out of time ({self.left():.0f} s left of the "
                    f"{self.args.budget} s budget, needs about {need} s)")
        return False

    # --- env ---------------------------------------------------------------

    def find_library(self, soname, extra_dirs=()):
        """The path the dynamic loader would use for soname, or a file in extra_dirs."""
        ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
        try:
            p = subprocess.run([ldconfig, "-p"], capture_output=True, text=True)
            for line in p.stdout.splitlines():
                if line.strip().startswith(soname + " ") and "x86-64" in line:
                    return line.rsplit("=>", 1)[1].strip()
        except OSError:
            pass
        for d in extra_dirs:
            path = os.path.join(d, soname)
            if os.path.exists(path):
                return path
        return None

    def python_site_dirs(self):
        py = shutil.which(self.args.python)
        if not py:
            return []
        p = subprocess.run([py, "-c", "import site, sys; print('\\n'.join(site.getsitepackages()"
                            " + [site.getusersitepackages()]))"], capture_output=True, text=True)
        return [d for d in p.stdout.split() if os.path.isdir(d)]

    def part_env(self):
        info = {"target": self.target, "build": self.build}
        if not os.path.exists(self.lib):
            self.record("FAIL", "env libgpuwatch", f"{self.lib} is missing: build or carry it "
                        "(tests/gpu/run.sh --bundle DIR prepares a directory to carry)")
            return False
        # The library must need nothing but libc (and the loader).
        p = subprocess.run(["ldd", self.lib], capture_output=True, text=True)
        needed = [l.split()[0] for l in p.stdout.splitlines() if "=>" in l or "ld-linux" in l]
        odd = [n for n in needed if not re.match(r"(libc\.so|libm\.so|ld-linux|linux-vdso|"
                                                  r"libpthread|libdl|librt)", os.path.basename(n))]
        info["libgpuwatch_needs"] = needed
        self.record("PASS" if not odd else "FAIL", "env libgpuwatch dependencies",
                    "only libc" if not odd else "also needs " + ", ".join(odd))
        # Libraries gpuwatch dlopens: the system's, else carried ones, else absent (degraded).
        deps_dir = os.path.join(self.build, "deps")
        for soname in DEP_SONAMES:
            system = None if self.args.use_carried_deps else self.find_library(soname)
            carried = os.path.join(deps_dir, soname)
            if system:
                info[soname] = system
                self.record("PASS", f"env {soname}", f"system: {system}")
            elif os.path.exists(carried):
                info[soname] = carried
                if deps_dir not in self.extra_ld:
                    self.extra_ld.append(deps_dir)
                self.record("PASS", f"env {soname}", f"carried: {carried}")
            else:
                info[soname] = None
                self.record("INFO", f"env {soname}",
                            "absent: gpuwatch degrades (slower stacks or no file:line), "
                            "report checks that need file:line will fail")
        if self.args.sim:
            self.env_info = info
            self.record("INFO", "env target", "simulator (--sim): GPU-only parts are skipped")
            self.check_torch(info)
            return True
        code, out, err, _ = self.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                                      "--format=csv,noheader"], os.environ.copy(), 30,
                                     label="nvidia-smi")
        info["gpu"] = out.strip()
        if self.args.dry_run:
            self.record("DRY", "env GPU", "not checked")
        elif code != 0:
            self.record("FAIL", "env GPU", f"nvidia-smi failed ({err.strip()[:200]}); use --sim "
                        "to run the simulator parts on a machine without a GPU")
            self.env_info = info
            return False
        else:
            self.record("PASS", "env GPU", out.strip().replace("\n", "; "))
        # The shared cudart the test programs need (no RPATH): the system's or
        # the toolkit's or PyTorch's wheel.
        dirs = []
        for root in filter(None, [os.environ.get("CUDA_HOME"), "/usr/local/cuda"]):
            dirs += [os.path.join(root, "lib64"), os.path.join(root, "targets/x86_64-linux/lib")]
        for site in self.python_site_dirs():
            dirs += [os.path.join(site, "nvidia", "cu13", "lib"),
                     os.path.join(site, "nvidia", "cuda_runtime", "lib")]
        cudart = self.find_library("libcudart.so.13", dirs)
        info["libcudart.so.13"] = cudart
        if cudart and not self.find_library("libcudart.so.13"):
            self.extra_ld.append(os.path.dirname(cudart))
        self.record("PASS" if cudart else "FAIL", "env libcudart.so.13",
                    cudart or "not found: the shared-cudart programs cannot start")
        cupti = self.find_library("libcupti.so.13", dirs + [
            os.path.join(r, "extras/CUPTI/lib64")
            for r in filter(None, [os.environ.get("CUDA_HOME"), "/usr/local/cuda"])])
        info["libcupti.so.13"] = cupti
        self.record("PASS" if cupti else "FAIL", "env libcupti.so.13",
                    cupti or "not found: gpuwatch cannot attach")
        if cupti:
            os.environ.setdefault("GWREC_CUPTI", cupti)
        if not self.cupti_delivers(info):
            self.env_info = info
            return False
        sanitizer = shutil.which("compute-sanitizer") or next(
            (p for p in ["/usr/local/cuda/bin/compute-sanitizer",
                         "/usr/local/cuda/compute-sanitizer/compute-sanitizer"]
             if os.path.exists(p)), None)
        info["compute-sanitizer"] = sanitizer
        self.record("INFO", "env compute-sanitizer", sanitizer or "not found")
        self.check_torch(info)
        self.env_info = info
        return True

    def check_torch(self, info):
        """Whether --python imports torch and sees a CUDA device (the
        simulator's under --sim)."""
        code, out, err, _ = self.run([self.args.python, "-c", "import torch; print("
                                      "torch.__version__, torch.version.cuda, "
                                      "torch.cuda.is_available())"],
                                     self.base_env(), 120, label="torch version")
        info["torch"] = out.strip() if code == 0 else None
        self.record("INFO", "env PyTorch", f"{self.args.python}: " + (
            out.strip() if code == 0 else "not importable"))

    def cupti_delivers(self, info):
        """The first question on a new machine (gVisor, a new driver): does
        CUPTI subscribe and deliver callbacks and activity records at all?
        Everything after this needs it; without it, what gpuwatch does then
        (one line, the program unchanged) is the last thing checked."""
        if self.args.dry_run:
            return True
        info["kernel"] = os.uname().release
        path = self.out_path("env", "cupti_check.txt")
        code, err = self.record_sequence("leaky_loop", False, path, "preload")
        try:
            with open(path) as f:
                lines = [l.rstrip("\n").split("\t") for l in f]
        except OSError:
            lines = []
        cbs = sum(1 for l in lines if l[0] == "cb")
        acts = {}
        for l in lines:
            if l[0] == "act" and len(l) > 1:
                acts[l[1]] = acts.get(l[1], 0) + 1
        errors = ["\t".join(l) for l in lines if l[0] == "error"]
        info["cupti_callbacks"] = cbs
        info["cupti_records"] = acts
        detail = (f"{cbs} callbacks, activity records {acts or 'none'} from leaky_loop under "
                  f"the recorder (kernel {info['kernel']}, exit {code})"
                  + (f"; {'; '.join(errors)}" if errors else "")
                  + (f"; stderr: {err.strip()[-300:]}" if code != 0 and err else ""))
        if cbs > 0:
            self.record("PASS", "env CUPTI delivers callbacks", detail)
            if not acts:
                self.record("FAIL", "env CUPTI delivers activity records",
                            "none: copy timing, bandwidth and kernel names will be missing")
            return True
        self.record("FAIL", "env CUPTI delivers callbacks", detail)
        # What gpuwatch does on such a machine: one clear line, the program's
        # own exit status, no crash.
        report = self.out_path("env", "no_cupti_report.json")
        env = self.gpuwatch_env("preload", report)
        code, out, err, _ = self.run([self.program_path("leaky_loop", "examples", False)], env,
                                     60, label="gpuwatch without CUPTI")
        said = [l for l in err.splitlines() if l.startswith("gpuwatch")]
        self.record("PASS" if code == 0 else "FAIL", "env gpuwatch where CUPTI fails",
                    f"leaky_loop exit {code}; gpuwatch said: {' | '.join(said[:3]) or 'nothing'}")
        return False

    # --- programs ------------------------------------------------------------

    def program_path(self, name, directory, static):
        if static:
            return os.path.join(self.build, "tests", "gpu", "static", name)
        if name == "nvcc_program":
            return os.path.join(self.build, "tests", "sim", "test", "nvcc_program")
        return os.path.join(self.build, directory, name)

    def gpuwatch_env(self, mode, report, sim=None):
        env = self.base_env(sim)
        env["GPUWATCH_OUTPUT"] = report
        if mode == "preload":
            env["LD_PRELOAD"] = self.lib
        else:
            env["CUDA_INJECTION64_PATH"] = self.lib
        return env

    def run_program(self, name, directory, args, expect_exit, static, mode):
        flavor = "static" if static else "shared"
        label = f"program {name} {flavor} {mode}"
        path = self.program_path(name, directory, static)
        if not os.path.exists(path):
            self.record("FAIL", label, f"{path} is missing from the build")
            return
        rdir = self.out_path("programs", f"{name}.{flavor}.{mode}", "x")
        rdir = os.path.dirname(rdir)
        for f in os.listdir(rdir):
            os.unlink(os.path.join(rdir, f))
        report = os.path.join(rdir, "report.json")
        env = self.gpuwatch_env(mode, report)
        if self.args.sim and name == "oom":
            env["GWSIM_DEVICE_MEMORY"] = str(1024 << 20)  # as the e2e test
        if self.args.sim and any(name == p[0] for p in TWO_DEVICE_PROGRAMS):
            env["GWSIM_DEVICE_COUNT"] = "2"
        code, out, err, secs = self.run([path] + args, env, 300, cwd=rdir, label=label)
        if self.args.dry_run:
            return
        with open(os.path.join(rdir, "stdout.txt"), "w") as f:
            f.write(out)
        with open(os.path.join(rdir, "stderr.txt"), "w") as f:
            f.write(err)
        if code is None:
            self.record("FAIL", label, "timed out")
            return
        # Static cudart loads the driver with dlopen after the preload
        # constructor: gpuwatch then attaches through the injection path,
        # unless the program links libcuda itself (seen on the first GPU run).
        attach = "preload"
        if mode == "injection" or (static and not self.links_driver(path)):
            attach = "injection"
        results = checks.check(name, {"report_path": report, "stdout": out, "stderr": err,
                                      "exit_code": code, "expect_exit": expect_exit,
                                      "attach": attach, "source_dir": self.source_dir,
                                      "static": static, "target": self.target})
        failed = [t for ok, t in results if not ok]
        with open(os.path.join(rdir, "checks.txt"), "w") as f:
            for ok, t in results:
                f.write(f"{'ok  ' if ok else 'FAIL'} {t}\n")
        if failed:
            self.record("FAIL", label, f"{len(failed)} of {len(results)} checks failed: "
                        + "; ".join(failed[:4]) + (" ..." if len(failed) > 4 else "")
                        + f" ({rdir})")
        else:
            self.record("PASS", label, f"{len(results)} checks, {secs:.1f} s")

    @staticmethod
    def links_driver(path):
        """Whether the program needs libcuda.so.1 (found or not)."""
        try:
            p = subprocess.run(["ldd", path], capture_output=True, text=True)
        except OSError:
            return False
        return "libcuda.so.1" in p.stdout

    def stack_frames(self):
        """How many frames of gpuwatch, CUPTI, the driver and the runtime sit
        above the user's call: the capture unwinds them besides GPUWATCH_DEPTH
        and leaves them out (the report's `tool_frames`), and the report must
        still keep exactly GPUWATCH_DEPTH frames of the user's."""
        exe = os.path.join(self.build, "bench", "overhead_workload")
        if not os.path.exists(exe):
            return
        rdir = os.path.dirname(self.out_path("programs", "stack_frames", "x"))
        report = os.path.join(rdir, "report.json")
        env = self.gpuwatch_env("preload", report)
        env["GPUWATCH_DEPTH"] = "4"
        code, out, err, _ = self.run([exe, "--events", "50", "--warmup", "0", "--sites", "1",
                                      "--phases", "cuda_alloc,copy"], env, 60, cwd=rdir,
                                     label="stack frames")
        if self.args.dry_run:
            return
        rep = checks.load(report)
        if code != 0 or rep is None:
            self.record("FAIL", "program stack frames", f"exit {code}, report {rep is not None}")
            return
        kept = {}
        for api, sites in (("cudaMalloc", rep.get("sites", [])),
                           ("cudaMemcpy", checks.get(rep, "transfers", "sites", default=[]))):
            for site in sites or []:
                frames = [f for f in site.get("frames", []) if not f.get("inlined")]
                if frames:
                    kept[api] = max(kept.get(api, 0), len(frames))
        # unwind_fallbacks: stacks gpuwatch's CFI walker declined (through the
        # real driver and CUPTI it may meet frames it cannot express).
        detail = (f"{rep.get('tool_frames')} tool frames above the user's call; user frames kept "
                  + ", ".join(f"{api}: {k}" for api, k in sorted(kept.items()))
                  + f"; unwinder {rep.get('unwinder')}, "
                  f"{rep.get('unwind_fallbacks')} captures left to libunwind")
        ok = kept and all(k == 4 for k in kept.values())
        self.record("INFO" if ok else "FAIL", "program stack frames",
                    detail + ("" if ok else " (expected 4 each)"))

    def part_programs(self):
        self.stack_frames()
        flavors = [False] if self.args.sim else [False, True]
        if self.args.sim:
            self.record("SKIP", "programs static cudart",
                        "the simulator cannot run static-cudart programs (tests/sim/README.md)")
        for static in flavors:
            names = STATIC_PROGRAMS if static else [p[0] for p in SHARED_PROGRAMS]
            for name in names:
                directory, args, expect = next((d, a, e) for n, d, a, e in SHARED_PROGRAMS
                                               if n == name)
                for mode in ("preload", "injection"):
                    if not self.have_time(f"program {name}", 20):
                        return
                    self.run_program(name, directory, args, expect, static, mode)

    # --- sequences -------------------------------------------------------------

    def record_sequence(self, name, sim, path, mode):
        prog_dir = next((d for n, d, _, _ in SHARED_PROGRAMS if n == name), "tests/programs")
        args = next((a for n, _, a, _ in SHARED_PROGRAMS if n == name), [])
        exe = self.program_path(name, prog_dir, False)
        env = self.base_env(sim)
        env["LD_PRELOAD" if mode == "preload" else "CUDA_INJECTION64_PATH"] = self.recorder
        env["GWREC_OUTPUT"] = path
        if sim:
            env.pop("GWREC_CUPTI", None)
        else:
            env["GWSIM_ANY_DEVICE"] = "1"  # nvcc_program insists on the simulator's device
        code, out, err, _ = self.run([exe] + args, env, 120, cwd=os.path.dirname(path),
                                     label=f"sequence {name} {mode} {'sim' if sim else 'gpu'}")
        return code, err

    def part_sequences(self):
        if not os.path.exists(self.recorder):
            self.record("FAIL", "sequences", f"{self.recorder} is missing (ninja gwgpu_all)")
            return
        if not os.path.isdir(self.sim_dir):
            self.record("FAIL", "sequences", f"no simulator at {self.sim_dir} to compare with")
            return
        # Subscribed before main (LD_PRELOAD) for every program; inside the
        # first CUDA call (injection) too, except where threads race with it.
        plan = [(n, "preload") for n in SEQUENCE_PROGRAMS]
        plan += [(n, "injection") for n in SEQUENCE_PROGRAMS if n not in RACY_PROGRAMS]
        for name, mode in plan:
            if not self.have_time(f"sequence {name} {mode}", 15):
                return
            real = self.out_path("sequences", f"{name}.{mode}.real.txt")
            sim = self.out_path("sequences", f"{name}.{mode}.sim.txt")
            # On the simulator the "real" side is the simulator again: a
            # self-test of the recorder and the comparison (must be identical).
            code_r, err_r = self.record_sequence(name, self.args.sim, real, mode)
            code_s, err_s = self.record_sequence(name, True, sim, mode)
            if self.args.dry_run:
                continue
            if code_r is None or code_s is None:
                self.record("FAIL", f"sequence {name} {mode}", "timed out")
                continue
            ok, summary = compare_sequences.compare(real, sim, f"{name}.{mode}",
                                                    os.path.dirname(real))
            self.record("PASS" if ok else "FAIL", f"sequence {name} {mode}",
                        summary + f" (diff: {os.path.dirname(real)}/{name}.{mode}.gw.diff)")

    # --- questions -------------------------------------------------------------

    def recorded(self, name, mode="preload"):
        """Callback and record lines of `name` run under the CUPTI recorder."""
        path = self.out_path("questions", f"{name}.{mode}.txt")
        code, err = self.record_sequence(name, self.args.sim, path, mode)
        if self.args.dry_run or code is None:
            return None
        try:
            with open(path) as f:
                return [line.rstrip("\n").split("\t") for line in f]
        except OSError:
            return None

    def part_questions(self):
        """What only a real driver can tell (tests/sim/README.md keeps both
        answers as switches; the e2e tests run gpuwatch under both)."""
        if not os.path.exists(self.recorder):
            self.record("FAIL", "questions", f"{self.recorder} is missing (ninja gwgpu_all)")
            return
        if not self.have_time("questions", 30):
            return
        lines = self.recorded("transfers")
        if lines is None:
            self.record("FAIL", "question nested driver callbacks", "the recorder did not run")
            return
        cbs = [l for l in lines if l[0] == "cb" and len(l) >= 12]
        rt_enters = [l for l in cbs if l[3] == "rt" and l[4] == "enter"]
        nested = [l for l in cbs if l[3] == "drv" and int(l[2]) > 0]
        self.record("INFO", "question nested driver callbacks",
                    f"{'yes' if nested else 'no'}: {len(nested)} driver callbacks inside "
                    f"{len(rt_enters)} runtime calls (GWSIM_NESTED_DRIVER_CALLBACKS="
                    f"{1 if nested else 0} is the model that matches)")
        memcpy = [l for l in rt_enters if l[6] == "cudaMemcpy"]
        self.record("PASS" if len(memcpy) == 24 else "FAIL", "question plain cudaMemcpy seen",
                    f"{len(memcpy)} cudaMemcpy runtime callbacks (transfers.cu makes 24)")
        rt_ids = {l[11] for l in rt_enters}
        drv_ids = {l[11] for l in cbs if l[3] == "drv"}
        ids = [l for l in lines if l[0] == "ids" and len(l) >= 5]
        joined_rt = sum(1 for l in ids if l[3] in rt_ids)
        shared = sum(1 for l in ids if l[2] in rt_ids)
        own = sum(1 for l in ids if l[2] in drv_ids and l[2] not in rt_ids)
        model = "shared" if shared else ("own" if own or joined_rt else "unjoinable")
        self.record("INFO", "question correlation ids",
                    f"{len(ids)} MEMCPY records: runtimeCorrelationId names a runtime call in "
                    f"{joined_rt}, correlationId is the runtime call's in {shared}, a driver "
                    f"call's of its own in {own} (GWSIM_CORRELATION={model} matches)")
        graph = self.recorded("graphs")
        if graph is not None:
            created = [l for l in graph if l[0] == "cb" and l[3] == "res"
                       and l[5] == str(CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED)]
            inside = [l for l in created if int(l[2]) > 0]
            node_records = [l for l in graph if l[0] == "ids" and len(l) >= 5 and l[4] != "0"]
            ok = created and len(inside) == len(created)
            self.record("PASS" if ok else "FAIL", "question graph nodes made inside their call",
                        f"{len(inside)} of {len(created)} GRAPHNODE_CREATED callbacks came inside "
                        "the API call that made the node (gpuwatch relies on it to move a "
                        "captured copy's or allocation's work to the graph's launches); "
                        f"{len(node_records)} MEMCPY records carry a graphNodeId")
        two = self.env_info.get("gpu", "").count("\n") >= 1 or self.args.sim
        for name, directory, args, expect in TWO_DEVICE_PROGRAMS:
            if not two:
                self.record("SKIP", f"program {name}", "needs two devices")
                continue
            self.run_program(name, directory, args, expect, False, "preload")

    # --- live -------------------------------------------------------------------

    def part_live(self):
        """Issue 18's live view on the real driver (and under gVisor): the
        socket a process serves (Unix sockets, SO_PEERCRED), exact bytes of a
        loop leaking 1 MiB per step, the device's memory from cuDeviceTotalMem
        called on gpuwatch's thread without a context (a question the simulator
        answers as documented), and `gpuwatch top --once` when the command's
        libraries are here (deps/cli in a bundle)."""
        if not self.have_time("live", 30) or self.args.dry_run:
            return
        import socket
        live = self.out_path("live", "dir", "x").rsplit("/", 1)[0]
        env = self.gpuwatch_env("preload", self.out_path("live", "report.json"))
        env["GPUWATCH_LIVE_DIR"] = live
        prog = self.program_path("live_steps", "tests/programs", False)
        p = subprocess.Popen([prog], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        try:
            ok = p.stdout.readline() == "live_steps: ready\n"
            p.stdin.write("step 3\n")
            p.stdin.flush()
            ok = ok and p.stdout.readline() == "live_steps: steps 3\n"
            state = None
            if ok:
                with socket.socket(socket.AF_UNIX) as sock:
                    sock.settimeout(10)
                    sock.connect(os.path.join(live, f"{p.pid}.sock"))
                    sock.sendall(b"top 50\n")
                    data = b""
                    while chunk := sock.recv(65536):
                        data += chunk
                state = json.loads(data)
            mib = 1 << 20
            leak = next((x for x in (state or {}).get("sites", [])
                         if "live_steps.cu" in x.get("location", "") and
                         x.get("live_bytes") == 3 * mib), None)
            device = (state or {}).get("device", {})
            good = (state is not None and device.get("live_bytes") == 3 * mib + 256 * 1024 and
                    leak is not None and leak.get("growth_per_mark") == mib)
            self.record("PASS" if good else "FAIL", "live state over the socket",
                        f"device {device}; leak site {leak}" if state else "no state read")
            self.device_identity_question(state)
            totals = [d.get("total_bytes") for d in (state or {}).get("devices", [])]
            self.record("INFO", "question cuDeviceTotalMem from gpuwatch's thread",
                        f"devices' total_bytes {totals} (null: the driver did not answer "
                        "without a context on that thread)")
            cli, cli_env = self.cli()
            code, out, err, _ = self.run([cli, "top", "--once", "--dir", live], cli_env, 30,
                                         label="live top")
            shown = f"{p.pid} " in out and "live_steps.cu" in out
            self.record("PASS" if code == 0 and shown else "INFO", "live gpuwatch top --once",
                        f"exit {code}; " + (out.splitlines()[2] if shown and len(
                            out.splitlines()) > 2 else (err.strip()[:200] or out[:200])))
        finally:
            p.stdin.close()
            p.wait(timeout=60)
        gone = not os.path.exists(os.path.join(live, f"{p.pid}.sock"))
        self.record("PASS" if gone else "FAIL", "live entry removed at exit",
                    "the socket's name went with the process" if gone else "it stayed")

    def device_identity_question(self, state):
        """Issue 34: the live state's device identity (UUID, PCI bus id, NVML's
        index) from the real driver and NVML, against nvidia-smi's for the
        same GPU (the simulator's are its own); and what /proc/self/cgroup
        gives a process under gVisor (the container labels)."""
        devices = [d for d in (state or {}).get("devices", []) if d.get("live_bytes")]
        if not devices:
            self.record("FAIL", "question device identity", "no device with memory in the state")
            return
        d = devices[0]
        smi = shutil.which("nvidia-smi")
        rows = []
        if smi:
            code, out, _, _ = self.run([smi, "--query-gpu=uuid,pci.bus_id,index",
                                        "--format=csv,noheader"], self.base_env(), 30,
                                       label="nvidia-smi")
            rows = [[x.strip() for x in line.split(",")] for line in out.splitlines()
                    if code == 0 and line.count(",") == 2]
        match = next((r for r in rows if r[0] == d.get("uuid")), None)
        if match is None:
            self.record("FAIL" if rows else "INFO", "question device identity",
                        f"state {d.get('uuid')} {d.get('pci_bus_id')} gpu {d.get('gpu')}; "
                        f"nvidia-smi: {rows or 'not available'}")
        else:
            same = match[1] == d.get("pci_bus_id") and str(d.get("gpu")) == match[2]
            self.record("PASS" if same else "FAIL", "question device identity",
                        f"state {d.get('uuid')} {d.get('pci_bus_id')} gpu {d.get('gpu')}; "
                        f"nvidia-smi {match}")
        self.record("INFO", "question cgroup labels",
                    f"state cgroup {state.get('cgroup')}")

    def cli(self):
        """The gpuwatch command and its environment: its libraries from deps/cli
        in a bundle (the GPU machine has none of Debian's)."""
        env = self.base_env()
        deps = os.path.join(self.build, "deps", "cli")
        if os.path.isdir(deps):
            env["LD_LIBRARY_PATH"] = ":".join([deps] + [x for x in [env.get("LD_LIBRARY_PATH")]
                                                        if x])
        return os.path.join(self.build, "bin", "gpuwatch"), env

    # --- triage -------------------------------------------------------------------

    def part_triage(self):
        """Issue 35 on a real driver (triage.py): a kernel's fault in the report,
        where it surfaced (a question), and `gpuwatch why` of a copy hung behind a
        kernel that never finishes. On the simulator, GWSIM_FAULT_KERNEL and
        GWSIM_HANG_KERNEL make them fault and hang."""
        if not self.have_time("triage", 45):
            return
        self.triage_fault()
        self.triage_hang([], "cudaMemcpy", "HUNG:copy")
        # hung_copy sync (cudaDeviceSynchronize in place of the copy), where the
        # sources it was built from have it.
        source = triage.program_source(self.source_dir, "hung_copy.cu")
        if checks.line_of(source, "HUNG:sync") and self.have_time("triage hung_copy sync", 30):
            self.triage_hang(["sync"], "cudaDeviceSynchronize", "HUNG:sync")

    def triage_fault(self):
        label = "triage kernel_fault"
        path = self.program_path("kernel_fault", "tests/programs", False)
        if not os.path.exists(path) and not self.args.dry_run:
            self.record("FAIL", label, f"{path} is missing from the build (ninja gwgpu_all)")
            return
        rdir = os.path.dirname(self.out_path("triage", "kernel_fault", "x"))
        report = os.path.join(rdir, "report.json")
        env = self.gpuwatch_env("preload", report)
        if self.args.sim:
            env["GWSIM_FAULT_KERNEL"] = "Scatter"
        code, out, err, secs = self.run([path], env, 60, cwd=rdir, label=label)
        if self.args.dry_run:
            return
        with open(os.path.join(rdir, "output.txt"), "w") as f:
            f.write(out + "\n--- stderr ---\n" + err)
        if code != 1:
            self.record("FAIL", label, "timed out" if code is None else
                        f"exit {code}, expected 1 (the kernel's fault seen): {err.strip()[-300:]}")
            return
        doc = checks.load(report)
        self.record("INFO", "question where a kernel fault surfaces", triage.surfaced(doc, err))
        results = triage.fault_checks(doc, err, self.source_dir)
        with open(os.path.join(rdir, "checks.txt"), "w") as f:
            for ok, t in results:
                f.write(f"{'ok  ' if ok else 'FAIL'} {t}\n")
        failed = [t for ok, t in results if not ok]
        if failed:
            self.record("FAIL", f"{label} error in the report",
                        f"{len(failed)} of {len(results)} checks failed: "
                        + "; ".join(failed[:4]) + f" ({rdir}/checks.txt)")
        else:
            self.record("PASS", f"{label} error in the report",
                        f"{len(results)} checks, {secs:.1f} s")

    def triage_hang(self, args, call, marker):
        """hung_copy ARGS hung in `call`: `gpuwatch why PID` must name it with
        its line (the line marked `marker`) within 20 s; then SIGKILL, and the
        process must be gone within 30 s."""
        label = " ".join(["triage hung_copy"] + args)
        path = self.program_path("hung_copy", "tests/programs", False)
        cli, cli_env = self.cli()
        rdir = os.path.dirname(self.out_path("triage", ".".join(["hung_copy"] + args), "x"))
        live = os.path.join(rdir, "live")
        env = self.gpuwatch_env("preload", os.path.join(rdir, "report.json"))
        env["GPUWATCH_LIVE_DIR"] = live
        if self.args.sim:
            env["GWSIM_HANG_KERNEL"] = "never_ends"
        if self.args.dry_run:
            self.run([path] + args, env, 0, label=label)
            self.run([cli, "why", "PID", "--dir", live], cli_env, 0, label=f"{label} why")
            return
        if not os.path.exists(path):
            self.record("FAIL", label, f"{path} is missing from the build (ninja gwgpu_all)")
            return
        source = triage.program_source(self.source_dir, "hung_copy.cu")
        site = f"hung_copy.cu:{checks.line_of(source, marker)}"
        self.log.write(f"[{time.monotonic() - self.start:7.1f}s] {label}: {path} "
                       f"{' '.join(args)} (GPUWATCH_LIVE_DIR={live})\n")
        with open(os.path.join(rdir, "stderr.txt"), "w") as err_file:
            p = subprocess.Popen([path] + args, env=env, stdout=subprocess.PIPE, stderr=err_file)
        try:
            if self.reached(p, b"hung_copy: copying\n", label):
                self.why_hung(p, label, call, site, cli, cli_env, live)
        finally:
            self.kill_and_wait(p, label)

    def reached(self, p, text, label, seconds=30):
        """Whether `p` printed `text` within `seconds` (FAIL when not)."""
        printed = b""
        deadline = time.monotonic() + seconds
        while text not in printed and time.monotonic() < deadline:
            if select.select([p.stdout], [], [], 0.5)[0]:
                chunk = os.read(p.stdout.fileno(), 4096)
                if not chunk:
                    break
                printed += chunk
        if text not in printed:
            self.record("FAIL", label, f"no {text!r} within {seconds} s (exit {p.poll()}): "
                        f"{printed.decode(errors='replace')[-200:]!r}")
        return text in printed

    def why_hung(self, p, label, call, site, cli, cli_env, live):
        """Polls `gpuwatch why PID` for 20 s at most until it names `call` at `site`."""
        shown, out, err, t0 = None, "", "", time.monotonic()
        while shown is None and time.monotonic() < t0 + 20 and self.left() > 5:
            _, out, err, _ = self.run([cli, "why", str(p.pid), "--dir", live], cli_env, 10,
                                      label=f"{label} why")
            shown = triage.why_shows(out, call, site)
            if shown is None:
                time.sleep(0.25)  # the page's site is written by gpuwatch's thread each second
        with open(os.path.join(os.path.dirname(live), "why.txt"), "w") as f:
            f.write(out + ("" if shown else f"\n--- stderr ---\n{err}"))
        hung = p.poll() is None
        if shown and hung:
            self.record("PASS", f"{label} why", f"after {time.monotonic() - t0:.1f} s: {shown}")
        else:
            self.record("FAIL", f"{label} why",
                        f"no 'in {call} for ... at {site}' within 20 s (still running: {hung}): "
                        + (out.strip() or err.strip())[-300:])

    def kill_and_wait(self, p, label):
        """SIGKILL to a process still running; FAIL unless it is gone within 30 s."""
        t0 = time.monotonic()
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            try:
                code = p.wait(timeout=30)
                self.record("PASS" if code == -signal.SIGKILL else "FAIL", f"{label} killed",
                            f"exit {code} {time.monotonic() - t0:.1f} s after SIGKILL")
            except subprocess.TimeoutExpired:
                self.record("FAIL", f"{label} killed", "still there 30 s after SIGKILL "
                            f"({triage.proc_state(p.pid)}); left running")
        p.stdout.close()

    # --- torch_leak --------------------------------------------------------------

    def torch_ok(self):
        return bool(self.env_info.get("torch")) and "True" in self.env_info.get("torch", "")

    def no_torch_because(self, sim_reason=None):
        """Why a torch part is skipped: on the simulator what it needs that the
        simulator lacks, else that --python has no PyTorch with CUDA."""
        if self.args.sim and sim_reason and self.torch_ok():
            return f"needs a GPU: {sim_reason} (tests/sim/README.md)"
        return f"needs PyTorch with CUDA under --python ({self.args.python})"

    def run_torch_mode(self, part, mode, extra, argv):
        """Runs `argv` under gpuwatch (preload) for one allocator mode of a
        torch part, its output kept in output.txt beside the report:
        (exit status, stdout, the report's path, seconds), or None when the
        lease has no time left for it."""
        if not self.have_time(f"{part} {mode}", 60):
            return None
        rdir = os.path.dirname(self.out_path(part, mode, "x"))
        report = os.path.join(rdir, "report.json")
        env = self.gpuwatch_env("preload", report)
        env.update(extra)
        code, out, err, secs = self.run(argv, env, 180, cwd=rdir, label=f"{part} {mode}")
        if code in (134, -6) and "terminate called without an active exception" in err:
            # PyTorch 2.15's exit race, not gpuwatch's (docs/pytorch.md; tests/e2e/common.h,
            # IsTorchExitRace): run once more, as the e2e tests do.
            self.log.write(f"{part} {mode}: PyTorch's exit race aborted the run; once more\n")
            code, out, err, secs = self.run(argv, env, 180, cwd=rdir, label=f"{part} {mode}")
        if not self.args.dry_run:
            with open(os.path.join(rdir, "output.txt"), "w") as f:
                f.write(out + "\n--- stderr ---\n" + err)
        return code, out, report, secs

    def torch_script_runs(self, part, script):
        """Runs tests/gpu/SCRIPT with the gpuwatch package on its path under
        each allocator mode, as run_torch_mode does; yields (mode, exit status,
        stdout, the report's path, seconds) for each run. SKIP without
        PyTorch; nothing under --dry-run."""
        package = os.path.join(self.build, "share", "gpuwatch", "python")
        if not self.torch_ok():
            self.record("SKIP", part, self.no_torch_because())
            return
        for mode, extra, _ in TORCH_MODES:
            ran = self.run_torch_mode(part, mode, dict(extra, PYTHONPATH=package),
                                      [self.args.python, os.path.join(HERE, script)])
            if ran is None:
                return
            if not self.args.dry_run and not self.sim_lacks(f"{part} {mode}", ran[0], ran[2]):
                yield (mode,) + ran

    def sim_lacks(self, label, code, report_path):
        """On the simulator, a run that failed on what the simulator does
        not provide (tests/sim/README.md) is a SKIP naming it: True then."""
        if not self.args.sim or code == 0:
            return False
        try:
            with open(os.path.join(os.path.dirname(report_path), "output.txt")) as f:
                text = f.read()
        except OSError:
            return False
        for needle, what in SIM_GAPS:
            if needle in text:
                self.record("SKIP", label, f"the simulator lacks {what} (tests/sim/README.md)")
                return True
        return False

    def part_torch_leak(self):
        script = os.path.join(SOURCE_DIR, "examples", "torch_leak.py")
        if not os.path.exists(script):
            self.record("SKIP", "torch_leak", "examples/torch_leak.py does not exist yet "
                        "(another issue adds it); nothing to run")
            return
        if self.args.sim or not self.torch_ok():
            self.record("SKIP", "torch_leak", self.no_torch_because("nn.Linear needs cuBLAS"))
            return
        # The line that allocates what the loop keeps (docs/pytorch.md).
        leak_line = (checks.line_of(script, "kept by the loop") or
                     checks.line_of(script, "torch.relu("))
        for mode, extra, kind in TORCH_MODES:
            ran = self.run_torch_mode("torch_leak", mode, extra, [self.args.python, script])
            if ran is None:
                return
            code, out, report, secs = ran
            if not self.args.dry_run:
                self.check_torch_leak(mode, kind, code, out, report, leak_line, secs)

    def check_torch_leak(self, mode, kind, code, out, report_path, leak_line, secs):
        """examples/torch_leak.py keeps 8 MiB of activations per step and marks
        each step: the leak shows as growth per mark (docs/pytorch.md), at the
        line that allocates them when Python frames are recorded."""
        label = f"torch_leak {mode}"
        report = checks.load(report_path)
        problems = []
        if code != 0:
            problems.append(f"exit status {code}")
        if "gpuwatch is attached" not in out:
            problems.append("the script did not find gpuwatch's API (gpuwatch_mark)")
        if report is None:
            self.record("FAIL", label, "; ".join(problems + ["no report"]))
            return
        steps = int(m.group(1)) if (m := re.search(r"torch_leak: (\d+) steps", out)) else 20
        per_step = 8 << 20
        growth = checks.get(report, "growth", default={}) or {}
        suspects = growth.get("suspects", []) or []
        if growth.get("basis") != "mark":
            problems.append(f"growth basis {growth.get('basis')!r}, expected 'mark'")
        rate = sum(s.get("rate", 0) for s in suspects if s.get("unit") == "mark")
        # Per-tensor modes grow by exactly one tensor per mark; the caching
        # modes by segments of 20 MiB every few steps (8 MiB per mark on average).
        exact = mode in ("no_caching", "cudaMallocAsync")
        lo, hi = (0.95, 1.05) if exact else (0.5, 2.0)
        if not lo * per_step <= rate <= hi * per_step:
            problems.append(f"growth {rate / 2**20:.1f} MiB/mark over {len(suspects)} suspects, "
                            f"expected about 8 MiB/mark")
        allocs = checks.get(report, "totals", "kinds", kind, "allocs", default=0) or 0
        if allocs <= 0:
            problems.append(f"no allocation of kind {kind}")
        top = suspects[0] if suspects else {}
        location = top.get("location", "<none>")
        py = any((f.get("file") or "").endswith("torch_leak.py")
                 for s in suspects for f in s.get("frames", []))
        want = f"torch_leak.py:{leak_line}"
        if py and exact and not any(s.get("location") == want for s in suspects):
            problems.append(f"no growth suspect at {want} (top: {location})")
        marks = checks.get(report, "timeline", "marks", "total")
        if marks is not None and marks != steps:
            problems.append(f"{marks} marks, expected {steps}")
        detail = (f"growth {rate / 2**20:.1f} MiB/mark, top suspect {location}"
                  f"{'' if py else ' (no Python frames in this build)'}; {kind} allocations "
                  f"{allocs}; live at exit {checks.get(report, 'leaks', 'device', 'bytes')} B; "
                  f"{secs:.1f} s")
        self.record("FAIL" if problems else "PASS", label,
                    ("; ".join(problems) + "; " if problems else "") + detail)

    # --- torch_counters --------------------------------------------------------

    def part_torch_counters(self):
        """gpuwatch against PyTorch's counters per allocator mode
        (tests/gpu/torch_counters.py): live bytes = memory_reserved() under the
        caching modes, memory_allocated() where every tensor is an allocation;
        the pinned non_blocking copy at its line; the OutOfMemoryError's
        report at its line."""
        script = os.path.join(HERE, "torch_counters.py")
        line = {m: "torch_counters.py:%d" % checks.line_of(script, "TORCH_COUNTERS:" + m)
                for m in ("pinned", "oom")}
        for mode, code, out, report_path, secs in self.torch_script_runs("torch_counters",
                                                                          "torch_counters.py"):
            got = next((json.loads(l) for l in reversed(out.splitlines()) if l.startswith("{")),
                       {})
            # The segments, memory_allocated(), or (no_caching: PyTorch counts
            # nothing with its cache off) the tensors' own bytes.
            want = {"no_caching": got.get("tensors"), "cudaMallocAsync": got.get("allocated")}.get(
                mode, got.get("reserved"))
            report = checks.load(report_path)
            pinned = [t for t in (checks.get(report, "transfers", "sites", default=[]) or [])
                      if t.get("location") == line["pinned"]]
            pinned_copies = checks.get(pinned[0] if pinned else {}, "hosts", "pinned", "count")
            oom = checks.get(checks.load(report_path + ".oom-1"), "oom", default={}) or {}
            # PyTorch's uncached path raises its generic error for cudaMalloc's.
            error = "AcceleratorError" if mode == "no_caching" else "OutOfMemoryError"
            problems = []
            if code != 0 or not got.get("attached"):
                problems.append(f"exit {code}, attached {got.get('attached')}")
            if got.get("live") != want:
                problems.append(f"live {got.get('live')} != {want}")
            if pinned_copies != 1 or got.get("pinned_live") != 4 << 20:
                problems.append(f"pinned copies at {line['pinned']}: {pinned_copies}, pinned "
                                f"live {got.get('pinned_live')} (expected 1 and 4 MiB)")
            if got.get("oom") != error or oom.get("location") != line["oom"]:
                problems.append(f"raised {got.get('oom')}, oom report at {oom.get('location')} "
                                f"(expected {error} and {line['oom']})")
            detail = (f"live {got.get('live')}, reserved {got.get('reserved')}, allocated "
                      f"{got.get('allocated')}, tensors {got.get('tensors')}; pinned copy "
                      f"x{pinned_copies}; {got.get('oom')}, oom {oom.get('api')} at "
                      f"{oom.get('location')}, then reserved {got.get('oom_reserved')} "
                      f"allocated {got.get('oom_allocated')}; {secs:.1f} s")
            self.record("FAIL" if problems else "PASS", f"torch_counters {mode}",
                        ("; ".join(problems) + "; " if problems else "") + detail)

    # --- torch_pytest ----------------------------------------------------------

    def part_torch_pytest(self):
        """The pytest plugin on PyTorch tests, per allocator mode:
        tests/e2e/programs/torch_pytest must fail exactly its two tests (the
        kept tensor at its line, the peak over limit_gpu_memory), as
        tests/e2e/torch_pytest_test.cc checks on the simulator;
        tests/gpu/torch_pytest (a module fixture's nn.Linear, whose cuBLAS
        workspace PyTorch keeps) is reported, on a GPU only."""
        package = os.path.join(self.build, "share", "gpuwatch", "python")
        if not self.torch_ok():
            self.record("SKIP", "torch_pytest", self.no_torch_because())
            return
        if not os.path.exists(os.path.join(package, "gpuwatch", "pytest_plugin.py")):
            self.record("FAIL", "torch_pytest", f"no gpuwatch/pytest_plugin.py under {package}")
            return
        suites = [("e2e", os.path.join(SOURCE_DIR, "tests", "e2e", "programs", "torch_pytest"),
                   "test_torch_suite.py", "TORCH_SUITE:leak",
                   ["test_keeps_a_tensor", "test_needs_more_than_its_limit"])]
        if not self.args.sim:
            suites.append(("gpu", os.path.join(HERE, "torch_pytest"), "test_torch_gates.py",
                           "TORCH_PYTEST:leak", None))
        for name, suite, test_file, marker, want in suites:
            leak = "%s:%d" % (test_file, checks.line_of(os.path.join(suite, test_file), marker))
            for mode, extra, _ in TORCH_MODES:
                label = f"torch_pytest {name} {mode}"
                if not self.have_time(label, 60):
                    return
                rdir = os.path.dirname(self.out_path("torch_pytest", name, mode, "x"))
                env = self.gpuwatch_env("preload", os.path.join(rdir, "report.json"))
                env.update(extra)
                env.update({"PYTHONPATH": package, "COLUMNS": "200", "CI": "1",
                            "PYTHONDONTWRITEBYTECODE": "1"})
                code, out, err, secs = self.run(
                    [self.args.python, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:memray",
                     "-p", "gpuwatch.pytest_plugin", "-rfE", "--gpuwatch", "--gpuwatch-max-leak=0",
                     suite], env, 180, cwd=rdir, label=label)
                if self.args.dry_run:
                    continue
                with open(os.path.join(rdir, "output.txt"), "w") as f:
                    f.write(out + "\n--- stderr ---\n" + err)
                if self.sim_lacks(label, code, os.path.join(rdir, "report.json")):
                    continue
                failed = sorted(line.split(" ")[1].split("::")[-1] for line in out.splitlines()
                                if line.startswith(("FAILED ", "ERROR ")))
                detail = f"exit {code}; failed: {', '.join(failed) or 'none'}; {secs:.1f} s"
                if want is None:  # the question: does cuBLAS's workspace fail a test?
                    self.record("INFO", label, detail)
                    continue
                ok = code == 1 and failed == want and f"at {leak} (test_keeps_a_tensor)" in out
                self.record("PASS" if ok else "FAIL", label, detail + (
                    "" if ok else f"; expected {', '.join(want)}, the leak at {leak}"))

    # --- torch_phases ---------------------------------------------------------

    def part_torch_phases(self):
        """NVTX ranges from PyTorch (torch.cuda.nvtx, libtorch's own NVTX) and
        gpuwatch.phase, per allocator mode: the bytes per phase
        (tests/gpu/torch_phases.py), exact where every tensor is an allocation."""
        for mode, code, _, report_path, secs in self.torch_script_runs("torch_phases",
                                                                        "torch_phases.py"):
            report = checks.load(report_path + ".snapshot-1")  # taken while `kept` lives
            paths = {p.get("path"): p for p in
                     (checks.get(report, "phases", "paths", default=[]) or [])}
            fwd = paths.get("step/forward", {})
            bwd = paths.get("step/backward", {})
            detail = (f"exit {code}; phases {sorted(paths)}; forward allocated "
                      f"{fwd.get('alloc_bytes')} live {fwd.get('live_bytes')} peak "
                      f"{fwd.get('peak_bytes')}; backward allocated {bwd.get('alloc_bytes')}; "
                      f"{secs:.1f} s")
            if mode in ("no_caching", "cudaMallocAsync"):
                mib = 1 << 20
                ok = (code == 0 and fwd.get("alloc_bytes") == 48 * mib and
                      fwd.get("live_bytes") == 48 * mib and bwd.get("alloc_bytes") == 24 * mib and
                      bwd.get("live_bytes") == 0)
                self.record("PASS" if ok else "FAIL", f"torch_phases {mode}",
                            detail + ("" if ok else "; expected forward 48 MiB allocated and "
                                      "live, backward 24 MiB allocated and none live"))
            else:  # segments: what the caching allocator's requests look like per phase
                self.record("INFO", f"torch_phases {mode}", detail)

    # --- other CUPTI clients beside gpuwatch -------------------------------------

    def part_cupti_clients(self):
        """The real question of sharing CUPTI (interpose/cupti/cupti_mux.h): does a
        client linked against libcupti, and one that dlsyms it, see under
        gpuwatch (preload) exactly what it sees alone, on the real CUPTI?"""
        for program in ("cupti_client", "cupti_client_dlsym"):
            exe = self.program_path(program, "tests/programs", False)
            if not self.args.dry_run and not os.path.exists(exe):
                self.record("FAIL", f"cupti_clients {program}", f"{exe} is missing")
                continue
            for mode in ("callbacks", "activity", "both", "finalize"):
                if not self.have_time(f"cupti_clients {program} {mode}", 20):
                    return
                name = f"cupti_clients {program} {mode}"
                env = self.base_env(self.args.sim)
                code, alone, err, _ = self.run([exe, mode, "late"], env, 60, label=name + " alone")
                report = self.out_path("cupti_clients", f"{program}.{mode}.json")
                code2, shared, err2, _ = self.run([exe, mode, "late"],
                                                  self.gpuwatch_env("preload", report, self.args.sim),
                                                  60, label=name + " under gpuwatch")
                if self.args.dry_run:
                    continue
                with open(self.out_path("cupti_clients", f"{program}.{mode}.txt"), "w") as f:
                    f.write(alone + "\n--- under gpuwatch ---\n" + shared + "\n--- stderr ---\n" + err2)
                same = code == 0 and code2 == 0 and alone == shared
                saw = "subscribe: 0" in alone or "records of kind" in alone
                self.record("PASS" if same and saw else "FAIL", name,
                            f"exit {code}/{code2}; client output {'the same' if alone == shared else 'differs'}"
                            f" under gpuwatch; {len(alone.splitlines())} lines"
                            + ("" if saw else "; the client saw nothing of CUPTI even alone"))

    def part_torch_profiler(self):
        """torch.profiler (Kineto, a second CUPTI client) beside gpuwatch: its
        CUDA kernels and copies are there, the same as without gpuwatch, and
        gpuwatch's report is the same with and without the profiler window."""
        script = os.path.join(HERE, "torch_profiler.py")
        if self.args.sim or not self.torch_ok():
            self.record("SKIP", "torch_profiler", self.no_torch_because(
                "nn.Linear needs cuBLAS, and the simulator makes no activity records for Kineto"))
            return
        if not self.have_time("torch_profiler", 90):
            return
        env = self.base_env(False)
        code, alone, err, _ = self.run([self.args.python, script, "--profile"], env, 180,
                                       label="torch_profiler alone")
        runs = {}
        for profile in (True, False):
            tag = "profiled" if profile else "plain"
            report = self.out_path("torch_profiler", f"{tag}.json")
            argv = [self.args.python, script] + (["--profile"] if profile else [])
            runs[tag] = self.run(argv, self.gpuwatch_env("preload", report), 180,
                                 label=f"torch_profiler {tag} under gpuwatch") + (report,)
        if self.args.dry_run:
            return

        def last_json(text):
            for line in reversed(text.splitlines()):
                if line.startswith("{"):
                    return json.loads(line)
            return {}

        base = last_json(alone)
        shared = last_json(runs["profiled"][1])
        ok = (code == 0 and runs["profiled"][0] == 0 and base.get("gpu_kernels", 0) > 0 and
              base.get("gpu_kernels") == shared.get("gpu_kernels") and
              base.get("gpu_copies") == shared.get("gpu_copies"))
        self.record("PASS" if ok else "FAIL", "torch_profiler sees its CUDA events",
                    f"alone {base}; under gpuwatch {shared}")
        plain = checks.load(runs["plain"][4])
        profiled = checks.load(runs["profiled"][4])
        keys = ("allocs", "alloc_bytes", "frees", "current_bytes")
        a = {k: checks.get(plain, "totals", "kinds", "device", k) for k in keys}
        b = {k: checks.get(profiled, "totals", "kinds", "device", k) for k in keys}
        la = checks.get(plain, "totals", "kernel_launches")
        lb = checks.get(profiled, "totals", "kernel_launches")
        self.record("PASS" if a == b and la == lb else "FAIL",
                    "torch_profiler gpuwatch report unchanged by the window",
                    f"device {a} / {b}; launches {la} / {lb}")

    # --- torch_modes ----------------------------------------------------------

    def part_torch_modes(self):
        """The scripts of tests/e2e/torch_modes_test.cc on the real driver: do the
        figures the simulator tests assert hold there (they are PyTorch's own)?"""
        programs = os.path.join(SOURCE_DIR, "tests", "e2e", "programs")
        package = os.path.join(self.build, "share", "gpuwatch", "python")
        if self.args.sim or not self.torch_ok():
            self.record("SKIP", "torch_modes", "needs PyTorch with CUDA on a GPU")
            return
        runs = [("expandable", {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
                ("pinned", {}), ("oom", {"TORCH_OOM_BYTES": str(1 << 50)}),
                ("nvtx", {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"})]
        for name, extra in runs:
            script = os.path.join(programs, f"torch_{name}.py")
            # The shim as `gpuwatch run` puts it: PyTorch's out-of-memory observer.
            path = os.path.join(package, "gpuwatch", "torch_shim") + os.pathsep + package
            ran = self.run_torch_mode("torch_modes", name, dict(extra, PYTHONPATH=path),
                                      ["python3", script])
            if ran is None:
                return
            if not self.args.dry_run:
                self.check_torch_mode(name, script, *ran)

    def check_torch_mode(self, name, script, code, out, report_path, secs):
        """The figures of one torch_modes script (its output and report)."""
        mib = 1 << 20
        values = {}
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1].lstrip("-").isdigit():
                values[parts[0]] = int(parts[1])
        if name == "expandable":
            points = ("first", "fits", "grown", "shrunk", "empty", "exit")
            ok = code == 0 and all(values.get(f"{p}.reserved") == values.get(f"{p}.vmm")
                                   for p in points)
            detail = ", ".join(f"{p} {values.get(p + '.reserved')}/{values.get(p + '.vmm')}"
                               for p in points)
            self.record("PASS" if ok else "FAIL", "torch_modes expandable reserved == vmm",
                        f"exit {code}; {detail}; {secs:.1f} s")
        elif name == "pinned":
            report = checks.load(report_path)
            hosts = {s.get("location"): sorted((s.get("hosts") or {}).keys()) for s in
                     checks.get(report, "transfers", "sites", default=[]) or []}
            want = {f"torch_pinned.py:{checks.line_of(script, m)}": [h] for m, h in
                    (("COPY:pinned", "pinned"), ("COPY:pageable", "pageable"))}
            ok = (code == 0 and values.get("host_allocated") == values.get("host_live") ==
                  8 * mib and all(hosts.get(k) == v for k, v in want.items()))
            self.record("PASS" if ok else "FAIL", "torch_modes pinned",
                        f"exit {code}; host {values.get('host_allocated')}/"
                        f"{values.get('host_live')}; copies {hosts}")
        elif name == "oom":
            oom = checks.load(report_path + ".oom-1")
            where = f"torch_oom.py:{checks.line_of(script, 'OOM:c')}"
            live = checks.get(oom, "leaks", "device", "bytes")
            torch = checks.get(oom, "oom", "torch", default={}) or {}
            ok = (code == 0 and values.get("oom") == 1 and
                  checks.get(oom, "oom", "location") == where and
                  live == values.get("reserved") and
                  torch.get("allocated_bytes") == values.get("allocated") and
                  torch.get("reserved_bytes") == values.get("reserved"))
            self.record("PASS" if ok else "FAIL", "torch_modes oom",
                        f"exit {code}; at {checks.get(oom, 'oom', 'location')} (want {where}); "
                        f"live {live}, reserved {values.get('reserved')}; oom.torch {torch} "
                        f"(want allocated {values.get('allocated')})")
        else:
            report = checks.load(report_path)
            paths = {p.get("path"): p.get("alloc_bytes") for p in
                     checks.get(report, "phases", "paths", default=[]) or []}
            want = {"load": 4 * mib, "step": 8 * mib, "step/forward": 12 * mib}
            ok = code == 0 and all(paths.get(k) == v for k, v in want.items())
            self.record("PASS" if ok else "FAIL", "torch_modes nvtx", f"exit {code}; {paths}")

    # --- sanitizer ------------------------------------------------------------

    def part_sanitizer(self):
        sanitizer = self.env_info.get("compute-sanitizer")
        if self.args.sim or not sanitizer:
            self.record("SKIP", "sanitizer", "needs a GPU and compute-sanitizer")
            return
        targets = [("leaky_loop", [self.program_path("leaky_loop", "examples", False)]),
                   ("leak_sites", [self.program_path("leak_sites", "tests/programs", False)])]
        script = os.path.join(SOURCE_DIR, "examples", "torch_leak.py")
        if os.path.exists(script) and self.torch_ok():
            targets.append(("torch_leak", [self.args.python, script]))
        summary = {}
        for name, argv in targets:
            if not self.have_time(f"sanitizer {name}", 90 if name == "torch_leak" else 30):
                break
            summary[name] = self.compare_with_sanitizer(name, argv, sanitizer)
        with open(self.out_path("sanitizer", "summary.json"), "w") as f:
            json.dump(summary, f, indent=2)

    def compare_with_sanitizer(self, name, argv, sanitizer):
        rdir = os.path.dirname(self.out_path("sanitizer", name, "x"))
        env = self.base_env()
        code0, _, _, plain_s = self.run(argv, env, 300, cwd=rdir, label=f"plain {name}")
        report = os.path.join(rdir, "gpuwatch.json")
        code1, _, err1, gw_s = self.run(argv, self.gpuwatch_env("preload", report), 300, cwd=rdir,
                                        label=f"gpuwatch {name}")
        code2, out2, err2, cs_s = self.run(
            [sanitizer, "--leak-check", "full", "--print-limit", "100000"] + argv, env,
            600 if name == "torch_leak" else 300, cwd=rdir, label=f"compute-sanitizer {name}")
        if self.args.dry_run:
            return {}
        text = out2 + "\n" + err2
        with open(os.path.join(rdir, "compute-sanitizer.txt"), "w") as f:
            f.write(text)
        cs_bytes, cs_count, cs_sites = parse_sanitizer(text)
        rep = checks.load(report)
        gw_bytes = checks.get(rep, "leaks", "device", "bytes")
        gw_count = checks.get(rep, "leaks", "device", "count")
        gw_sites = [s.get("location") for s in checks.get(rep, "leaks", "device", "sites",
                                                           default=[]) or []]
        result = {"plain_s": plain_s, "gpuwatch_s": gw_s, "sanitizer_s": cs_s,
                  "sanitizer_exit": code2, "sanitizer_bytes": cs_bytes,
                  "sanitizer_allocations": cs_count, "sanitizer_sites": sorted(cs_sites),
                  "gpuwatch_bytes": gw_bytes, "gpuwatch_allocations": gw_count,
                  "gpuwatch_sites": gw_sites}
        detail = (f"leaked bytes gpuwatch {gw_bytes} / sanitizer {cs_bytes}; allocations "
                  f"{gw_count} / {cs_count}; sites {len(gw_sites)} / {len(cs_sites)}; wall "
                  f"plain {plain_s:.1f} s, gpuwatch {gw_s:.1f} s, sanitizer {cs_s:.1f} s")
        if cs_bytes is None:
            self.record("INFO", f"sanitizer {name}", "no LEAK SUMMARY in compute-sanitizer's "
                        f"output (see {rdir}/compute-sanitizer.txt); " + detail)
        elif name == "leaky_loop":
            # One kind of memory (cudaMalloc): the two must agree exactly.
            same = cs_bytes == gw_bytes and cs_count == gw_count
            self.record("PASS" if same else "FAIL", f"sanitizer {name}", detail)
        else:
            # Pool, managed, VMM and pinned leaks: the sanitizer may not see
            # every kind; the difference is the finding.
            self.record("INFO", f"sanitizer {name}", detail)
        return result

    # --- torch_step --------------------------------------------------------------

    def part_torch_step(self):
        if self.args.sim or not self.torch_ok():
            self.record("SKIP", "torch_step", self.no_torch_because("a GPU's time"))
            return
        step = os.path.join(HERE, "torch_step.py")
        # null: a CUPTI client that enables gpuwatch's callbacks and does
        # nothing (bench/null_subscriber.cc), to tell CUPTI's share.
        null = os.path.join(self.build, "bench", "libgwbench_null_subscriber.so")
        configs = ["plain", "gpuwatch"] + (["null"] if os.path.exists(null) else [])
        runs = {c: [] for c in configs}
        rdir = os.path.dirname(self.out_path("torch_step", "x"))
        # Processes of one configuration differed by up to 30% (December 4th):
        # every process is pinned to the same two cores, and the order of the
        # configurations alternates round by round, so that a drift of the
        # machine falls on each alike; the overhead is the median over rounds
        # of gpuwatch's step time over the plain one of the same round.
        pin = ["taskset", "-c", self.args.step_cpus] if (
            self.args.step_cpus and shutil.which("taskset")) else []
        for i in range(self.args.step_repeat):
            for config in (configs if i % 2 == 0 else configs[::-1]):
                if not self.have_time("torch_step", 30):
                    break
                if config == "gpuwatch":
                    env = self.gpuwatch_env("preload", os.path.join(rdir, f"report.{i}.json"))
                else:
                    env = self.base_env()
                    if config == "null":
                        env["CUDA_INJECTION64_PATH"] = null
                code, out, err, _ = self.run(pin + [self.args.python, step, "--steps",
                                                    str(self.args.steps)],
                                             env, 240, cwd=rdir, label=f"torch_step {config}")
                if self.args.dry_run:
                    continue
                if code != 0:
                    self.record("FAIL", f"torch_step {config}", f"exit {code}: {err[-300:]}")
                    return
                runs[config].append({json.loads(l)["model"]: json.loads(l)
                                     for l in out.splitlines() if l.startswith("{")})
        if self.args.dry_run or not runs["plain"] or not runs["gpuwatch"]:
            return
        result = {}
        for model in runs["plain"][0]:
            in_order = {c: [r[model]["median_ms"] for r in runs[c]] for c in configs if runs[c]}
            each = {c: sorted(xs) for c, xs in in_order.items()}
            plain = statistics.median(each["plain"])
            gw = statistics.median(each["gpuwatch"])
            # Paired by round: gpuwatch's process against the plain one next to it.
            ratios = sorted(g / p for g, p in zip(in_order["gpuwatch"], in_order["plain"]))
            pct = (statistics.median(ratios) - 1) * 100
            result[model] = {"plain_ms": plain, "gpuwatch_ms": gw, "overhead_pct": pct,
                             "round_ratios": ratios, "runs_ms": in_order,
                             "pinned": " ".join(pin)}
            spread = "; ".join(f"{c} " + "/".join(f"{x:.2f}" for x in xs)
                               for c, xs in each.items())
            null_note = ""
            if each.get("null"):
                null_ms = statistics.median(each["null"])
                result[model]["null_ms"] = null_ms
                null_note = (f", {null_ms:.3f} ms under a null CUPTI client "
                             f"({(null_ms - plain) / plain * 100:+.2f}%)")
            # The target (2%) is on a training step; the launch-bound MLP is
            # the worst case and reported for information.
            status = ("PASS" if pct <= 2.0 else "FAIL") if model == "transformer" else "INFO"
            self.record(status, f"torch_step {model}",
                        f"median step {plain:.3f} ms without, {gw:.3f} ms with gpuwatch; "
                        f"paired by round {pct:+.2f}% (rounds {(ratios[0] - 1) * 100:+.1f}% to "
                        f"{(ratios[-1] - 1) * 100:+.1f}%; target <= 2%){null_note}; "
                        f"each run's median ms: {spread}")
        with open(os.path.join(rdir, "summary.json"), "w") as f:
            json.dump({"runs": runs, "result": result}, f, indent=2)

    # --- overhead ----------------------------------------------------------------

    def run_overhead(self, part, need_s, timeout_s, extra):
        """Runs bench/overhead.py for `part` (its tables into PART/PART.md, its
        figures into PART/PART.json); the figures, or None when it did not run."""
        script = os.path.join(SOURCE_DIR, "bench", "overhead.py")
        if not os.path.exists(os.path.join(self.build, "bench", "overhead_workload")):
            self.record("SKIP", part, "bench/overhead_workload is not in the build")
            return None
        if not self.have_time(part, need_s):
            return None
        argv = [sys.executable, script, "--build", self.build, "--events",
                str(self.args.overhead_events), "--repeat", "3", "--json",
                self.out_path(part, f"{part}.json")] + extra
        argv.append("--sim" if self.args.sim else "--gpu")
        if self.extra_ld:
            argv += ["--extra-ld-path", ":".join(self.extra_ld)]
        code, out, err, secs = self.run(argv, os.environ.copy(), timeout_s, label=part)
        if self.args.dry_run:
            return None
        with open(self.out_path(part, f"{part}.md"), "w") as f:
            f.write(out)
        if code != 0:
            self.record("FAIL", part, f"exit {code}: {err[-300:]}")
            return None
        fig = json.load(open(self.out_path(part, f"{part}.json")))
        fig["secs"] = secs
        return fig

    def part_overhead(self):
        fig = self.run_overhead("overhead", 60, 240, [])
        if fig is None:
            return
        added = fig["comparison"]["figures"]["added"]
        alloc = added["gpuwatch: added per cudaMalloc (32-frame stack)"]
        launch = added["gpuwatch: added per kernel launch"]
        self.record("INFO", "overhead", f"{fig['comparison']['target']}: +{alloc:.0f} ns per "
                    f"cudaMalloc with a stack, +{launch:.0f} ns per launch ({fig['secs']:.0f} s; "
                    f"table in {self.out_path('overhead', 'overhead.md')})")

    def part_launches(self):
        """CUPTI's price per launch for each set of launch callbacks enabled
        (none, runtime, driver, both), against gpuwatch's."""
        fig = self.run_overhead("launches", 40, 120, ["--only", "launches", "--no-heaptrack"])
        if fig is None:
            return
        self.record("INFO", "launches", "added ns per launch: " + ", ".join(
            f"{c} {v['added']:.0f}" for c, v in fig["launches"].items() if c != "base") +
            f" ({fig['secs']:.0f} s)")

    # --- main --------------------------------------------------------------------

    def finish(self):
        counts = {}
        for r in self.results:
            counts[r["status"]] = counts.get(r["status"], 0) + 1
        elapsed = time.monotonic() - self.start
        summary = {"target": self.target, "elapsed_s": elapsed, "counts": counts,
                   "env": self.env_info, "results": self.results}
        with open(os.path.join(self.out, "results.json"), "w") as f:
            json.dump(summary, f, indent=2)
        with open(os.path.join(self.out, "summary.txt"), "w") as f:
            for r in self.results:
                f.write(f"{r['status']} {r['name']}" + (f": {r['detail']}" if r["detail"] else "")
                        + "\n")
        line = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
        verdict = "FAIL" if counts.get("FAIL") else "PASS"
        print(f"{verdict} gpu-validation ({self.target}): {line}; {elapsed:.0f} s; "
              f"results in {self.out}", flush=True)
        return 1 if counts.get("FAIL") else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", required=True, help="build directory or carried bundle")
    ap.add_argument("--out", default=os.environ.get("OUT") or "gpu-results")
    ap.add_argument("--sim", action="store_true", help="no GPU: run the simulator parts")
    ap.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    ap.add_argument("--only", default="", help="comma-separated parts (default: all)")
    ap.add_argument("--skip", default="", help="comma-separated parts to skip")
    ap.add_argument("--budget", type=int, default=450, help="seconds for everything (450)")
    ap.add_argument("--steps", type=int, default=150, help="training steps timed per run")
    ap.add_argument("--step-repeat", type=int, default=2, help="runs per torch_step config")
    ap.add_argument("--step-cpus", default="2,3",
                    help="taskset CPU list for every torch_step process ('' : not pinned)")
    ap.add_argument("--overhead-events", type=int, default=50000)
    ap.add_argument("--python", default=os.environ.get("GPUWATCH_TORCH_PYTHON") or "python3",
                    help="the interpreter of the PyTorch parts ($GPUWATCH_TORCH_PYTHON, else "
                         "python3)")
    ap.add_argument("--use-carried-deps", action="store_true",
                    help="use the bundle's libunwind/libdw/libelf even where the system has them")
    args = ap.parse_args()
    only = [p for p in args.only.split(",") if p]
    skip = [p for p in args.skip.split(",") if p]
    for p in only + skip:
        if p not in PARTS:
            print(f"validate.py: unknown part '{p}' (parts: {', '.join(PARTS)})", file=sys.stderr)
            return 2
    v = Validator(args)
    print(f"== gpuwatch GPU validation: target {v.target}, build {v.build}, results {v.out}, "
          f"budget {args.budget} s", flush=True)
    if not v.part_env():
        return v.finish()
    for part in PARTS[1:]:
        if (only and part not in only) or part in skip:
            continue
        getattr(v, f"part_{part}")()
    return v.finish()


if __name__ == "__main__":
    sys.exit(main())
