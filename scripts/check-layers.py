#!/usr/bin/env python3
"""Checks that libgpuwatch's folders include only the folders below them and
that tools/ includes only what reading a report needs (libgpuwatch/README.md).
Prints one line per offending include and exits 1; silent and 0 when clean.

  scripts/check-layers.py [SOURCE_DIR]
"""
import os
import re
import sys

# Each folder and the folders it may include (besides itself).
BELOW = {
    "base": set(),
    "record": {"base"},
    "stacks": {"base"},
    "symbolize": {"base", "stacks"},
    "analysis": {"base", "stacks", "symbolize"},
    "report": {"base", "record", "stacks", "symbolize", "analysis"},
    "session": {"base", "record", "stacks", "symbolize", "analysis", "report"},
}
# tools/ reads reports: the schema, formats, suppressions and frame names;
# never the live tables, the stack capture or the library's report writer.
TOOLS_MAY = {"base", "symbolize", "analysis", "report"}
TOOLS_MAY_NOT = {"libgpuwatch/report/report.h", "libgpuwatch/report/report_sections.h",
                 "libgpuwatch/report/trace_json.h", "libgpuwatch/report/checkpoint.h"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"(libgpuwatch/[^"]+)"', re.M)


def sources(top):
    for root, _, files in os.walk(top):
        for f in sorted(files):
            if f.endswith((".cc", ".h")):
                yield os.path.join(root, f)


def main():
    src = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                          os.path.join(os.path.dirname(__file__), ".."))
    lib = os.path.join(src, "libgpuwatch")
    problems = []
    for f in sorted(os.listdir(lib)):
        if f.endswith((".cc", ".h")):
            problems.append(f"libgpuwatch/{f}: outside the folders ({', '.join(BELOW)})")
        elif os.path.isdir(os.path.join(lib, f)) and f not in BELOW:
            problems.append(f"libgpuwatch/{f}/: not a known folder; add it to {__file__}")
    for path in list(sources(lib)) + list(sources(os.path.join(src, "tools"))):
        rel = os.path.relpath(path, src)
        parts = rel.split(os.sep)
        text = open(path, encoding="utf-8").read()
        for inc in INCLUDE.findall(text):
            target = inc.split("/")[1] if inc.count("/") >= 2 else "(top)"
            if parts[0] == "libgpuwatch":
                folder = parts[1]
                if target != folder and target not in BELOW.get(folder, set()):
                    problems.append(f"{rel}: includes {inc}, but {folder}/ may include only "
                                    f"{', '.join(sorted(BELOW.get(folder, set()))) or 'itself'}")
            elif target not in TOOLS_MAY or inc in TOOLS_MAY_NOT:
                problems.append(f"{rel}: includes {inc}; tools/ reads reports and may include "
                                f"only {', '.join(sorted(TOOLS_MAY))} (not the writer's "
                                "headers)")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
