#!/usr/bin/env python3
"""Checks that a report's keys are written in libgpuwatch/report/ only: the
typed model (report_model.h and the model_*.h beside it) states each key
once, and everything else reads and writes members. Prints one line per
string literal used as a report key outside libgpuwatch/report/ (in a JSON
subscript, an initializer pair, or the key argument of a JSON accessor) and
exits 1; silent and 0 when clean.

The report's keys are taken from libgpuwatch/report/: the X-lists' members
(`X(bytes, kSum)`), the schema's key constants and every lowercase string
literal of the model's files. Files that write JSON of another format whose
keys may coincide (the live protocol, Chrome's trace format) are listed in
OTHER_FORMATS with what they write; a line whose literal only looks like a
key (a command-line choice) ends with `// not a report key: WHY`.

  scripts/check-report-keys.py [SOURCE_DIR]
"""
import os
import re
import sys

# Where the report's keys are stated (relative to libgpuwatch/report/).
MODEL_FILES = re.compile(r"^(report_model|model_\w+|report_schema|report_field_reader)\.(h|cc)$")
# Folders whose files must not spell a report key.
CHECKED = ["tools", "interpose", "libgpuwatch/session", "libgpuwatch/analysis"]
# Files that write or read JSON of another format, not the report's.
OTHER_FORMATS = {
    "tools/formats/perfetto_format.cc": "Chrome's trace event format",
    "tools/live/live_client.cc": "the live protocol (docs/live.md)",
    "tools/live/live_answer.cc": "the live protocol (docs/live.md)",
    "tools/live/live_metrics.cc": "the live protocol (docs/live.md)",
    "tools/commands/top_command.cc": "the live protocol (docs/live.md)",
    "tools/commands/exporter_command.cc": "the live protocol (docs/live.md)",
    "interpose/agent/live.cc": "the live protocol (docs/live.md)",
}

XLIST_MEMBER = re.compile(r"\bX\((\w+),\s*k(?:Sum|Max|Min)\)")
KEY_CONSTANT = re.compile(r'constexpr\s+char\s+k\w+\[\]\s*=\s*"([a-z][a-z0-9_]*)"')
LITERAL = re.compile(r'"([a-z][a-z0-9_]*)"')
# A literal in a key position: j["key"], {"key", value}, Accessor(obj, "key"),
# obj.value("key", ...), obj.contains("key"), obj.at("key").
KEY_USES = [
    r'\[\s*"([a-z][a-z0-9_]*)"\s*\]',
    r'\{\s*"([a-z][a-z0-9_]*)"\s*,',
    r'\b(?:U64|Str|Sub|Number|CountAt|TextAt|IntegerAt|RealAt|ObjectAt|ArrayAt|Member)'
    r'\([^()"]*,\s*"([a-z][a-z0-9_]*)"',
    r'\.(?:value|contains|at|find|erase|count)\(\s*"([a-z][a-z0-9_]*)"',
]
KEY_USE = re.compile("|".join(f"(?:{u})" for u in KEY_USES))
# A line whose literal only looks like a key (a command-line choice) says so.
NOT_A_KEY = "// not a report key"


def report_keys(report_dir):
    keys = set()
    for f in sorted(os.listdir(report_dir)):
        if not MODEL_FILES.match(f):
            continue
        with open(os.path.join(report_dir, f), encoding="utf-8") as fh:
            text = fh.read()
        keys.update(XLIST_MEMBER.findall(text))
        keys.update(KEY_CONSTANT.findall(text))
        keys.update(LITERAL.findall(text))
    return keys


def strip_comments(text):
    return re.sub(r"//[^\n]*", "", text)


def main():
    src = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                          os.path.join(os.path.dirname(__file__), ".."))
    keys = report_keys(os.path.join(src, "libgpuwatch", "report"))
    problems = []
    for folder in CHECKED:
        top = os.path.join(src, folder)
        for root, _, files in os.walk(top):
            for f in sorted(files):
                if not f.endswith((".cc", ".h")):
                    continue
                path = os.path.join(root, f)
                rel = os.path.relpath(path, src)
                if rel in OTHER_FORMATS:
                    continue
                with open(path, encoding="utf-8") as fh:
                    raw = fh.read().split("\n")
                for n, line in enumerate(raw, 1):
                    if NOT_A_KEY in line:
                        continue
                    line = strip_comments(line)
                    for m in KEY_USE.finditer(line):
                        key = next(g for g in m.groups() if g is not None)
                        if key in keys:
                            problems.append(f"{rel}:{n}: report key \"{key}\" spelled outside "
                                            "libgpuwatch/report/ (read or write the model's member)")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
