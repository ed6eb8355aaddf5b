#!/usr/bin/env python3
"""`gpuwatch top` in a real terminal: tmux (80x24) runs it over two training
loops under gpuwatch on the CUDA simulator; the test reads the screen with
capture-pane and presses keys with send-keys: the frame fits, the larger
process comes first and is selected, Down/k move the selection, s changes the
sort, q quits with status 0 and gives the terminal back (the alternate screen
is left). Exits 77 (skipped) without tmux."""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

DEADLINE_S = 60  # a hang guard: each wait ends as soon as the screen shows it


class Failure(Exception):
    pass


def start_loop(args, live_dir, out_dir, name, steps):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GPUWATCH_", "GWSIM_")) and k not in ("LD_PRELOAD",)}
    env.update({"LD_LIBRARY_PATH": args.sim_dir, "LD_PRELOAD": args.lib,
                "GPUWATCH_LIVE_DIR": live_dir,
                "GPUWATCH_OUTPUT": os.path.join(out_dir, name + ".json")})
    err_path = os.path.join(out_dir, name + ".stderr")
    with open(err_path, "w") as err:
        p = subprocess.Popen([os.path.join(args.programs, "live_steps")], env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=err, text=True)
    if p.stdout.readline() != "live_steps: ready\n":
        p.wait()
        with open(err_path) as err:
            raise Failure(f"{name}: live_steps did not start; its stderr:\n{err.read()}")
    p.stdin.write(f"step {steps}\n")
    p.stdin.flush()
    if p.stdout.readline() != f"live_steps: steps {steps}\n":
        raise Failure(f"{name}: live_steps did not step")
    return p


class Tmux:
    def __init__(self, socket_name):
        self.base = ["tmux", "-L", socket_name, "-f", "/dev/null"]

    def run(self, *argv, check=True):
        return subprocess.run(self.base + list(argv), check=check, text=True,
                              capture_output=True)

    def screen(self):
        return self.run("capture-pane", "-p", "-t", "top").stdout

    def wait_for(self, what, test):
        deadline = time.monotonic() + DEADLINE_S
        while True:
            text = self.screen()
            if test(text):
                return text
            if time.monotonic() > deadline:
                raise Failure(f"the screen never showed {what}:\n{text}")
            time.sleep(0.05)  # polling the screen, not a synchronization


def row_of(screen, pid):
    for line in screen.splitlines():
        if line[1:].lstrip().startswith(f"{pid} "):
            return line
    return ""


def main():
    ap = argparse.ArgumentParser()
    for flag in ("--cli", "--lib", "--sim-dir", "--programs"):
        ap.add_argument(flag, required=True)
    args = ap.parse_args()
    if shutil.which("tmux") is None:
        print("SKIP: tmux is not installed (scripts/install-deps.sh installs it)")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        live_dir = os.path.join(tmp, "live")
        small = start_loop(args, live_dir, tmp, "small", 1)
        big = start_loop(args, live_dir, tmp, "big", 3)
        tmux = Tmux(f"gpuwatch-top-test-{os.getpid()}")
        try:
            command = (f"LANG=C.UTF-8 {args.cli} top --dir {live_dir}; "
                       "echo \"top exited $?\"; read line")
            tmux.run("new-session", "-d", "-x", "80", "-y", "24", "-s", "top", "sh", "-c", command)
            screen = tmux.wait_for("both processes", lambda s: row_of(s, small.pid) and
                                   row_of(s, big.pid))
            lines = screen.rstrip("\n").split("\n")
            if len(lines) != 24 or any(len(line) > 80 for line in lines):
                raise Failure(f"the frame does not fit 80x24:\n{screen}")
            if "2 processes  sort: live" not in lines[0]:
                raise Failure(f"first line: {lines[0]!r}")
            if not row_of(screen, big.pid).startswith(">") or row_of(screen, small.pid)[0] != " ":
                raise Failure(f"the larger process is not selected first:\n{screen}")
            if "3.0M" not in screen or "live_steps.cu:" not in screen:
                raise Failure(f"the selected process's sites are not shown:\n{screen}")
            if not lines[-1].startswith("up/down select"):
                raise Failure(f"no key line at the bottom: {lines[-1]!r}")

            tmux.run("send-keys", "-t", "top", "Down")
            tmux.wait_for("the selection on the smaller process",
                          lambda s: row_of(s, small.pid).startswith(">") and
                          row_of(s, big.pid).startswith(" "))
            tmux.run("send-keys", "-t", "top", "k")
            tmux.wait_for("the selection back on the larger process",
                          lambda s: row_of(s, big.pid).startswith(">"))
            tmux.run("send-keys", "-t", "top", "s")
            tmux.wait_for("the growth sort", lambda s: "sort: growth" in s.split("\n")[0])
            tmux.run("send-keys", "-t", "top", "s")
            tmux.wait_for("the peak sort", lambda s: "sort: peak" in s.split("\n")[0])
            tmux.run("send-keys", "-t", "top", "q")
            after = tmux.wait_for("top's exit", lambda s: "top exited" in s)
            if "top exited 0" not in after:
                raise Failure(f"top's status is not 0:\n{after}")
            if "gpuwatch top" in after or "LIVE" in after:
                raise Failure(f"the frame stayed on the terminal after q:\n{after}")
        finally:
            tmux.run("kill-server", check=False)
            for p in (small, big):
                p.stdin.close()
                p.wait(timeout=DEADLINE_S)
    print("PASS: gpuwatch top in tmux (80x24): frame, selection, sort, quit")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Failure as e:
        print(f"FAIL: {e}")
        sys.exit(1)
