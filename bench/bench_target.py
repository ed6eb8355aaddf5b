"""What bench/overhead.py, bench/live_poll.py, bench/scrape_cost.py and
bench/fixed_cost.py share: their parser, with the options that say where the
build is and whether the load runs on a GPU or on the simulator, how they
stop, a run under callgrind, the environment of a load under gpuwatch, and a
thread's CPU time."""

import argparse
import os
import re
import shutil
import subprocess
import sys


def die(msg):
    """The script's name and `msg` on stderr; exit status 2."""
    print(f"{os.path.basename(sys.argv[0])}: {msg}", file=sys.stderr)
    sys.exit(2)


def parser(doc):
    """A parser described by `doc`, with --build, --gpu and --sim."""
    ap = argparse.ArgumentParser(description=doc,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build", help="the build directory (default: build)")
    ap.add_argument("--gpu", action="store_true", default=None,
                    help="run on the real driver (default: when nvidia-smi works)")
    ap.add_argument("--sim", dest="gpu", action="store_false", help="run on the simulator")
    return ap


def resolve_gpu(args):
    """args.gpu, decided when neither --gpu nor --sim was given: whether
    nvidia-smi works."""
    if args.gpu is None:
        args.gpu = shutil.which("nvidia-smi") is not None and subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True).returncode == 0
    return args.gpu


def callgrind(argv, env, out, extra=()):
    """Runs `argv` under callgrind (with the options `extra`), its profile
    written to `out` and its stdin empty; the instructions counted in all."""
    valgrind = shutil.which("valgrind")
    if not valgrind:
        die("the instruction counts need valgrind")
    p = subprocess.run([valgrind, "--tool=callgrind", f"--callgrind-out-file={out}", *extra]
                       + argv, env=env, input="", capture_output=True, text=True)
    if p.returncode != 0:
        die(f"callgrind {' '.join(argv)}: exit {p.returncode}\n{p.stderr[-2000:]}")
    if not os.path.exists(out):
        die(f"callgrind {' '.join(argv)} wrote no profile at {out}")
    return profile_total(out)


def profile_total(path):
    """The instructions a callgrind profile counted; 0 when it cannot be read
    or is not written whole yet."""
    total = 0
    try:
        with open(path) as f:
            for line in f:
                m = re.match(r"(?:summary|totals):\s+(\d+)", line)
                if m:
                    total = int(m.group(1))
    except OSError:
        pass
    return total


def check_built(args, paths, deps):
    """Dies unless every path exists; then whether the load runs on a GPU
    (resolve_gpu), dying when it would need the simulator and it is not
    built."""
    for path in paths:
        if not os.path.exists(path):
            die(f"{path} is missing: build it with `ninja -C {args.build} {deps}`")
    sim = os.path.join(os.path.abspath(args.build), "tests", "sim", "lib")
    gpu = resolve_gpu(args)
    if not gpu and not os.path.isdir(sim):
        die(f"no GPU and no simulator at {sim}")
    return gpu


def add_load_options(ap, per_site):
    """live_load's options (bench/programs/live_load.cu): allocations per site
    (default `per_site`) and bytes per allocation."""
    ap.add_argument("--per-site", type=int, default=per_site,
                    help=f"allocations per site (default {per_site})")
    ap.add_argument("--bytes", type=int, default=4096, help="bytes per allocation (default 4096)")


def base_env(gpu, sim, extra_paths=()):
    """This process's environment without gpuwatch's, the simulator's and any
    injection's variables (a benchmark sets the ones it measures), with the
    simulator's libraries (`sim`) first on LD_LIBRARY_PATH unless `gpu`, then
    `extra_paths`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GPUWATCH_", "GWSIM_")) and
           k not in ("LD_PRELOAD", "CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH")}
    paths = ([] if gpu else [sim]) + [p for p in extra_paths if p]
    if env.get("LD_LIBRARY_PATH"):
        paths.append(env["LD_LIBRARY_PATH"])
    if paths:
        env["LD_LIBRARY_PATH"] = ":".join(paths)
    return env


def load_env(args, live_dir):
    """The environment of a load under gpuwatch (LD_PRELOAD) serving its live
    view in `live_dir`, its reports there too: base_env's, on the simulator
    unless args.gpu."""
    b = os.path.abspath(args.build)
    env = base_env(args.gpu, os.path.join(b, "tests", "sim", "lib"))
    env["LD_PRELOAD"] = os.path.join(b, "lib", "libgpuwatch.so")
    env["GPUWATCH_LIVE_DIR"] = live_dir
    env["GPUWATCH_OUTPUT"] = os.path.join(live_dir, "report.%p.json")
    env["GPUWATCH_SUMMARY"] = "0"
    return env


def schedstat_ns(path):
    """The first field of a schedstat file: ns spent on a CPU."""
    with open(path) as f:
        return int(f.read().split()[0])


def find_thread(pid, name):
    """The id of a thread of `pid` named `name`, or None."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if f.read().strip() == name:
                    return tid
        except FileNotFoundError:
            pass
    return None
