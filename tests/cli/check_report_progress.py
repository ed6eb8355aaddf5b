#!/usr/bin/env python3
"""`gpuwatch report` of a large file says what it is doing on a terminal, and
only there (tools/commands/report_progress.h):

- stderr a terminal (a pty), a report over 16 MiB, the output to a file: one
  line rewritten in place, "reading R (N MiB)...", then "read ... rendering
  text...", erased at the end; the output is the report as without it;
- the same with stderr a pipe: stderr stays empty;
- a small report on the terminal: nothing either.

Usage: check_report_progress.py GPUWATCH
"""
import json
import os
import pty
import subprocess
import sys
import tempfile

MIB = 1 << 20


def fail(message):
    print("FAIL: " + message, file=sys.stderr)
    sys.exit(1)


def run_with_tty_stderr(argv):
    """Runs argv with stderr on a new pty; returns (status, what the pty read)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=slave)
    os.close(slave)
    read = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        read += chunk
    os.close(master)
    return proc.wait(), read.decode("utf-8", "replace")


def main():
    cli = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        report = {"schema": "gpuwatch-report", "version": 1, "totals": {},
                  "leaks": {"device": {}}, "sites": []}
        small = os.path.join(tmp, "small.json")
        with open(small, "w") as f:
            json.dump(report, f)
        # Over the 16 MiB threshold with fields the command does not read
        # (strings under its 1 MiB limit each).
        big = os.path.join(tmp, "big.json")
        report["padding"] = ["x" * (MIB - 64)] * 17
        with open(big, "w") as f:
            json.dump(report, f)
        size_mib = os.path.getsize(big) / MIB

        out = os.path.join(tmp, "big.txt")
        status, said = run_with_tty_stderr([cli, "report", big, "-o", out])
        if status != 0:
            fail("gpuwatch report %s exited %d: %r" % (big, status, said))
        want = "\rgpuwatch report: reading %s (%.1f MiB)...\x1b[K" % (big, size_mib)
        if not said.startswith(want):
            fail("on a terminal, expected %r first, got %r" % (want, said))
        if "; rendering text...\x1b[K" not in said or not said.endswith("\r\x1b[K"):
            fail("expected the rendering line, then the line erased: %r" % said)
        with open(out) as f:
            rendered = f.read()
        plain = subprocess.run([cli, "report", big], capture_output=True, text=True)
        if plain.returncode != 0 or plain.stdout != rendered or not rendered:
            fail("the output differs with progress shown: %r vs %r" % (rendered, plain.stdout))
        if plain.stderr != "":
            fail("stderr a pipe: expected nothing on it, got %r" % plain.stderr)

        status, said = run_with_tty_stderr([cli, "report", small, "-o", out])
        if status != 0 or said != "":
            fail("a small report on a terminal: expected silence, got %d %r" % (status, said))
    print("ok: progress on a terminal for %.1f MiB, none in a pipe or for a small report" % size_mib)


if __name__ == "__main__":
    main()
