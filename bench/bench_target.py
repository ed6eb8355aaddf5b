"""What bench/overhead.py and bench/live_poll.py share: their parser, with the
options that say where the build is and whether the load runs on a GPU or on
the simulator, and how they stop."""

import argparse
import os
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
