#!/usr/bin/env python3
"""Compares two CUPTI recordings of one program (tests/gpu/cupti_recorder.cc):
the real CUPTI on a GPU against the simulator.

  compare_sequences.py REAL.txt SIM.txt [--name PROGRAM] [--out DIR]

Three views, each written to DIR (default: next to REAL):
  NAME.gw.diff    what gpuwatch sees: only the callback ids gpuwatch enables
                  (GW=1), with nesting depth and the correlation relation
                  recomputed among those alone, per thread (threads matched
                  regardless of their order), top-level calls run-length
                  encoded ("200 x rt enter cudaMemcpyAsync ... | ..."). With
                  --racy (multi-threaded programs) calls in flight at attach
                  and repeat counts are ignored. Differences here change what
                  gpuwatch records: the verdict (PASS/FAIL) is on this view.
  NAME.full.txt   every runtime/driver/resource callback: per API, how often
                  it was entered on each side, and the APIs one side lacks
                  (the runtime's internal driver calls, say). Informative.
  NAME.act.txt    activity records (MEMCPY, MEMCPY2, MEMORY2, kernels) as
                  multisets of their kind-level fields. Informative.

Prints one line, "PASS sequence NAME: ..." or "FAIL sequence NAME: ...", and
exits 0 or 1 (2 when a file cannot be read).
"""

import argparse
import collections
import difflib
import os
import sys


def parse(path):
    """{thread: [fields...]} of callback lines, and the activity lines."""
    threads = collections.defaultdict(list)
    act = []
    errors = []
    with open(path) as f:
        for raw in f:
            parts = raw.rstrip("\n").split("\t")
            if parts[0] == "cb" and len(parts) >= 12:
                rec = {"thread": int(parts[1]), "depth": int(parts[2]), "domain": parts[3],
                       "site": parts[4], "cbid": parts[5], "name": parts[6],
                       "gw": parts[7] == "1", "corr": parts[8], "ret": parts[9],
                       "symbol": parts[10], "corrid": parts[11]}
                threads[rec["thread"]].append(rec)
            elif parts[0] == "act":
                act.append("\t".join(parts[1:]))
            elif parts[0] == "error":
                errors.append("\t".join(parts[1:]))
    return threads, act, errors


def gw_view(seq):
    """Tokens of the callbacks gpuwatch enables, with depth and correlation
    relation recomputed as gpuwatch would see them (only enabled calls nest)."""
    out = []
    stack = []  # (gw, corrid) of open API calls
    for r in seq:
        if r["domain"] == "res":
            if r["gw"]:
                # By id: cuptiGetCallbackName may not name resource callbacks.
                out.append(f"res {r['cbid']}")
            continue
        if r["site"] == "enter":
            enclosing = [c for g, c in stack if g]
            if r["gw"]:
                rel = "top" if not enclosing else (
                    "same" if enclosing[-1] == r["corrid"] else "new")
                out.append(f"{r['domain']} enter {r['name']} depth={len(enclosing)} corr={rel}"
                           f" sym={r['symbol']}")
            stack.append((r["gw"], r["corrid"]))
        else:
            if stack:
                stack.pop()
            if r["gw"]:
                enclosing = [c for g, c in stack if g]
                out.append(f"{r['domain']} exit {r['name']} depth={len(enclosing)} ret={r['ret']}")
    return out


def calls(tokens):
    """Groups tokens into top-level calls (a depth-0 enter up to its exit, the
    nested calls included; a resource callback is a group of its own).
    Returns (groups, leading), leading being the tokens of a call already in
    flight when the recording started (its exit seen, not its enter)."""
    groups, current, leading = [], [], []
    for t in tokens:
        if t.startswith("res "):
            if current:
                current.append(t)
            else:
                groups.append((t,))
            continue
        if " enter " in t and "depth=0 " in t and not current:
            current = [t]
        elif current:
            current.append(t)
            if " exit " in t and "depth=0 " in t:
                groups.append(tuple(current))
                current = []
        else:
            leading.append(t)
    if current:
        groups.append(tuple(current))
    return groups, leading


def run_length(groups, counts=True, max_period=8):
    """Repeated runs of calls collapsed into one line, "N x call || call ...":
    a loop of cudaMalloc, cudaFree is one line, whatever its trip count."""
    lines = []
    i = 0
    while i < len(groups):
        best_p, best_n = 1, 1
        for p in range(1, max_period + 1):
            unit = groups[i:i + p]
            if len(unit) < p:
                break
            n = 1
            while groups[i + n * p:i + (n + 1) * p] == unit:
                n += 1
            if n > 1 and n * p > best_n * best_p:
                best_p, best_n = p, n
        body = " || ".join(" | ".join(g) for g in groups[i:i + best_p])
        lines.append(f"{best_n} x {body}" if counts else body)
        i += best_n * best_p
    return lines


def thread_views(threads, racy=False):
    """Per-thread views (run-length encoded calls), sorted so that threads
    match whatever their ordinal. `racy`: threads race with the attach (a
    multi-threaded program under injection), so calls in flight when CUPTI
    subscribed are dropped and repeat counts are not compared."""
    views = []
    for seq in threads.values():
        groups, leading = calls(gw_view(seq))
        v = run_length(groups, counts=not racy)
        if leading and not racy:
            v = ["(in flight at attach) " + " | ".join(leading)] + v
        if v:
            views.append(v)
    return sorted(views, key=lambda v: (v[:1], len(v)))


def flatten(views):
    lines = []
    for i, v in enumerate(views):
        lines.append(f"--- thread {i} ---")
        lines.extend(v)
    return lines


def full_counts(threads):
    counts = collections.Counter()
    for seq in threads.values():
        for r in seq:
            if r["domain"] == "res":
                counts[("res", f"{r['cbid']} {r['name']}")] += 1
            elif r["site"] == "enter":
                counts[(r["domain"], r["name"])] += 1
    return counts


def compare(real_path, sim_path, name, out_dir, racy=False):
    real, real_act, real_err = parse(real_path)
    sim, sim_act, sim_err = parse(sim_path)
    os.makedirs(out_dir, exist_ok=True)
    notes = []
    if real_err:
        notes.append("real recorder: " + "; ".join(real_err))
    if sim_err:
        notes.append("sim recorder: " + "; ".join(sim_err))

    a = flatten(thread_views(real, racy))
    b = flatten(thread_views(sim, racy))
    diff = list(difflib.unified_diff(a, b, "real CUPTI", "simulator", lineterm="", n=3))
    with open(os.path.join(out_dir, f"{name}.gw.diff"), "w") as f:
        f.write("\n".join(diff) + ("\n" if diff else "(no difference)\n"))
    changed = sum(1 for d in diff if d[:1] in "+-" and not d.startswith(("+++", "---")))

    rc, sc = full_counts(real), full_counts(sim)
    only_real = sorted(k for k in rc if k not in sc)
    only_sim = sorted(k for k in sc if k not in rc)
    # Racy programs lose a few calls to the attach: only a difference beyond
    # 0.1% counts there.
    differ = sorted(k for k in rc if k in sc and rc[k] != sc[k] and
                    (not racy or abs(rc[k] - sc[k]) > max(rc[k], sc[k]) / 1000))
    with open(os.path.join(out_dir, f"{name}.full.txt"), "w") as f:
        f.write(f"# {name}: callbacks entered per API (all of the runtime, driver and "
                "resource domains)\n")
        f.write(f"# real: {sum(rc.values())} callbacks, simulator: {sum(sc.values())}\n\n")
        f.write("## only with the real CUPTI\n")
        for k in only_real:
            f.write(f"{k[0]}\t{k[1]}\t{rc[k]}\n")
        f.write("\n## only on the simulator\n")
        for k in only_sim:
            f.write(f"{k[0]}\t{k[1]}\t{sc[k]}\n")
        f.write("\n## different counts (real, simulator)\n")
        for k in differ:
            f.write(f"{k[0]}\t{k[1]}\t{rc[k]}\t{sc[k]}\n")

    ra, sa = collections.Counter(real_act), collections.Counter(sim_act)
    with open(os.path.join(out_dir, f"{name}.act.txt"), "w") as f:
        f.write(f"# {name}: activity records (count: real, simulator)\n")
        for k in sorted(set(ra) | set(sa)):
            mark = "" if ra[k] == sa[k] else "   <-- differs"
            f.write(f"{ra[k]}\t{sa[k]}\t{k}{mark}\n")
    act_diff = sum(1 for k in set(ra) | set(sa) if ra[k] != sa[k])

    ok = changed == 0 and not real_err and not sim_err
    summary = (f"{len(a)} lines of gpuwatch-visible calls (real) vs {len(b)} (simulator), "
               f"{changed} differing; all callbacks: {len(only_real)} APIs only real, "
               f"{len(only_sim)} only simulated, {len(differ)} with other counts; "
               f"activity: {act_diff} record kinds differ")
    if notes:
        summary += "; " + "; ".join(notes)
    return ok, summary


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("real")
    ap.add_argument("sim")
    ap.add_argument("--name", default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--racy", action="store_true",
                    help="threads race with the attach: ignore calls in flight and repeat counts")
    args = ap.parse_args()
    name = args.name or os.path.basename(args.real).split(".")[0]
    out = args.out or os.path.dirname(os.path.abspath(args.real))
    try:
        ok, summary = compare(args.real, args.sim, name, out, args.racy)
    except OSError as e:
        print(f"FAIL sequence {name}: {e}")
        return 2
    print(f"{'PASS' if ok else 'FAIL'} sequence {name}: {summary}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
