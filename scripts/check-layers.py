#!/usr/bin/env python3
"""Checks the layers (libgpuwatch/README.md, interpose/README.md,
tools/README.md): libgpuwatch's folders include only the folders below them
(and tools/' folders likewise)
and nothing of interpose/ or tools/; tools/ includes only what reading a
report needs, never interpose/, and links no part of the core above report/;
interpose's call registry (the gpuwatch_calls library) includes only itself,
base/ and record/'s event types; the callbacks' library (gpuwatch_interpose)
includes nothing of libgpuwatch.so's own files (the agent, the reports): it
reaches the Session through interpose/current_session.h; interpose/ reaches the
tables only through the Session's event API (no recording(), no Recording&). Prints one line per offending include or
link and exits 1; silent and 0 when clean.

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
PROJECT_INCLUDE = re.compile(r'^\s*#\s*include\s+"((?:interpose|tools)/[^"]+)"', re.M)
# The call registry (interpose/CMakeLists.txt's gpuwatch_calls): the parse
# step's files, which the benchmarks' null client and the GPU recorder link
# without the rest of interpose/.
CALLS_FILES = {"calls/calls.cc", "calls/calls.h", "calls/call_readers.h", "calls/copy_readers.h"}
CALLS_MAY = {"interpose/" + f for f in CALLS_FILES} | {"interpose/cupti/cupti_loader.h"}
CALLS_CORE_MAY = {"base", "record"}
# What tools/ may link of the project's own libraries.
TOOLS_LINK_MAY_NOT = {"gpuwatch", "gpuwatch_core", "gpuwatch_session", "gpuwatch_interpose",
                      "gpuwatch_calls"}
LINK = re.compile(r"target_link_libraries\(\s*gpuwatch_tools\b([^)]*)\)", re.S)


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
    problems += project_includes(src) + calls_includes(src) + tools_links(src)
    problems += interpose_includes(src) + tools_folders(src) + interpose_events(src)
    for p in problems:
        print(p)
    return 1 if problems else 0


# tools/' folders (tools/README.md) and the folders each may include besides
# itself; main.cc and commands.h at the top may include every one. The
# generated headers (tools/report_html.h, tools/pprof/) are the formats'.
TOOLS_FOLDERS = {
    "reading": set(),
    "formats": {"reading", "pprof", "report_html.h"},
    "live": {"reading"},
    "commands": {"reading", "formats", "live", "commands.h"},
    "cli": {"commands", "commands.h"},
}
TOOLS_INCLUDE = re.compile(r'^\s*#\s*include\s+"tools/([^"/]+)', re.M)


def tools_folders(src):
    """tools/' folders include one another downwards only."""
    problems = []
    top = os.path.join(src, "tools")
    for path in sources(top):
        rel = os.path.relpath(path, src)
        parts = rel.split(os.sep)
        if len(parts) == 2:
            if parts[1].endswith((".cc", ".h")) and parts[1] not in ("main.cc", "commands.h"):
                problems.append(f"{rel}: outside tools/' folders ({', '.join(TOOLS_FOLDERS)})")
            continue
        folder = parts[1]
        if folder not in TOOLS_FOLDERS:
            problems.append(f"tools/{folder}/: not a known folder; add it to {__file__}")
            continue
        for target in TOOLS_INCLUDE.findall(open(path, encoding="utf-8").read()):
            if target != folder and target not in TOOLS_FOLDERS[folder]:
                problems.append(f"{rel}: includes tools/{target}; tools/{folder}/ may include "
                                f"only {', '.join(sorted(TOOLS_FOLDERS[folder])) or 'itself'}")
    return problems


def project_includes(src):
    """libgpuwatch/ includes nothing of interpose/ or tools/; tools/ nothing of interpose/."""
    problems = []
    for top, may_not in (("libgpuwatch", ("interpose/", "tools/")), ("tools", ("interpose/",))):
        for path in sources(os.path.join(src, top)):
            rel = os.path.relpath(path, src)
            for inc in PROJECT_INCLUDE.findall(open(path, encoding="utf-8").read()):
                if inc.startswith(may_not):
                    problems.append(f"{rel}: includes {inc}; {top}/ may not include "
                                    f"{' or '.join(may_not)}")
    return problems


def calls_includes(src):
    """The call registry includes only itself, cupti_loader.h, base/ and record/."""
    problems = []
    for f in sorted(CALLS_FILES):
        rel = f"interpose/{f}"
        text = open(os.path.join(src, rel), encoding="utf-8").read()
        for inc in PROJECT_INCLUDE.findall(text):
            if inc not in CALLS_MAY:
                problems.append(f"{rel}: includes {inc}; the call registry may include only "
                                f"{', '.join(sorted(CALLS_MAY))}")
        for inc in INCLUDE.findall(text):
            if inc.split("/")[1] not in CALLS_CORE_MAY:
                problems.append(f"{rel}: includes {inc}; the call registry may include only "
                                "libgpuwatch/base and libgpuwatch/record")
    return problems


def library_sources(text, name):
    """The sources of add_library(NAME ...) in a CMakeLists.txt's text."""
    m = re.search(r"add_library\(\s*" + name + r"\s+(?:STATIC|SHARED)\s+([^)]*)\)", text)
    return m.group(1).split() if m else []


def interpose_includes(src):
    """gpuwatch_interpose includes none of libgpuwatch.so's own headers."""
    text = open(os.path.join(src, "interpose", "CMakeLists.txt"), encoding="utf-8").read()
    shared = {"interpose/agent/agent.h"} | {"interpose/" + f[:-3] + ".h"
                                      for f in library_sources(text, "gpuwatch") if f.endswith(".cc")}
    problems = []
    for f in library_sources(text, "gpuwatch_interpose"):
        for name in (f, f[:-3] + ".h"):
            path = os.path.join(src, "interpose", name)
            if not os.path.exists(path):
                continue
            for inc in PROJECT_INCLUDE.findall(open(path, encoding="utf-8").read()):
                if inc in shared:
                    problems.append(f"interpose/{name}: includes {inc}, a header of "
                                    "libgpuwatch.so's; the callbacks' library reaches the "
                                    "Session through interpose/callbacks/current_session.h")
    return problems


# interpose/ records what the process does, and reads what it recorded,
# through the Session's event API (libgpuwatch/session/events.h): it never
# names the Recording or its tables.
TABLE_ACCESS = re.compile(r"\brecording\(\)|\bTables\(\)|\bRecording\b[&*]")


def interpose_events(src):
    """interpose/ reaches the tables only through the event API."""
    problems = []
    for path in sources(os.path.join(src, "interpose")):
        rel = os.path.relpath(path, src)
        for n, line in enumerate(open(path, encoding="utf-8"), 1):
            code = line.split("//", 1)[0]
            if TABLE_ACCESS.search(code):
                problems.append(f"{rel}:{n}: reaches the Recording's tables; record and read "
                                "through the event API (Session::events(), "
                                "libgpuwatch/session/events.h)")
    return problems


def tools_links(src):
    """gpuwatch_tools links no part of the core above report/, nor interpose/."""
    text = open(os.path.join(src, "tools", "CMakeLists.txt"), encoding="utf-8").read()
    problems = []
    for args in LINK.findall(text):
        for lib in args.split():
            if lib in TOOLS_LINK_MAY_NOT:
                problems.append(f"tools/CMakeLists.txt: gpuwatch_tools links {lib}; tools/ "
                                "links only gpuwatch_report and the folders below it")
    return problems


if __name__ == "__main__":
    sys.exit(main())
