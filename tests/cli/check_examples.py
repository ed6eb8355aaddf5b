#!/usr/bin/env python3
"""Every command of docs/examples.md runs as written, on the CUDA simulator the
page names, and prints the lines the page quotes under it.

A command is an indented line (four spaces) that runs something under build/,
or a `$ ` line of a fenced block; what it prints is the fenced block after it
(up to the next command). The commands run with bash in a temporary
directory where build/ is the build tree (a symbolic link), so their paths are
the page's; the page's report paths (/tmp/ls1/...) are that directory's.

Usage: check_examples.py SOURCE_DIR BUILD_DIR
"""
import os
import subprocess
import sys
import tempfile

DOC_DIR = "/tmp/ls1"  # where the page's excerpts were made


def commands(markdown):
    """[(command, [expected lines])] in page order."""
    found = []
    fenced = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced and line.startswith("$ "):
            found.append((line[2:], []))
        elif not fenced and line.startswith("    ") and "build/" in line:
            found.append((line.strip(), []))
        elif fenced and found and line.strip():
            found[-1][1].append(line)
    return found


def main():
    source, build = sys.argv[1], sys.argv[2]
    with open(os.path.join(source, "docs", "examples.md")) as f:
        page = f.read()
    steps = commands(page)
    if len(steps) < 4:
        print("FAIL: expected at least 4 commands in docs/examples.md, found %d" % len(steps))
        return 1
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GPUWATCH_", "GWSIM_")) and
           k not in ("LD_PRELOAD", "LD_LIBRARY_PATH", "CUDA_INJECTION64_PATH")}
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        os.symlink(os.path.abspath(build), os.path.join(tmp, "build"))
        for command, expected in steps:
            if "LD_LIBRARY_PATH=build/tests/sim/lib" not in command and " run " in command:
                problems.append("%s: runs a program without the simulator's line" % command)
            ran = subprocess.run(["bash", "-c", command], cwd=tmp, env=env, capture_output=True,
                                 text=True, timeout=240)
            said = ran.stdout + ran.stderr
            if "gpuwatch: nothing was recorded" in said or "gpuwatch:" not in said and not expected:
                problems.append("%s: gpuwatch recorded nothing:\n%s" % (command, said))
            for line in expected:
                want = line.replace(DOC_DIR, os.path.realpath(tmp)).rstrip()
                if want not in said:
                    problems.append("%s: does not print %r; it printed:\n%s" % (command, want, said))
            print("ran (exit %d): %s" % (ran.returncode, command))
    for p in problems:
        print("FAIL: " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
