"""The HTML page's capped tables (check_html.py calls this): growth suspects,
transfer sites and pool regions past the first 50 rows end with one summary
row that counts the rest and sums their bytes, as the leak tables do, and no
"... and N more" note is left under them."""
import json
import os
import re

ROWS = 50  # the page's TOP
MIB = 1 << 20

# (section id, path to the list in the report, the field summed, the row's words)
TABLES = [
    ("gw-growth", ("growth", "suspects"), "growth_bytes", "more suspects, %s of growth"),
    ("gw-transfers", ("transfers", "sites"), "bytes", "more sites, %s copied"),
    ("gw-regions", ("regions", "sites"), "bytes", "more sites, %s"),
]


def shift_stacks(value, by):
    """Every "stack" (frame table indices) in `value` moved by `by`."""
    if isinstance(value, list):
        for item in value:
            shift_stacks(item, by)
    elif isinstance(value, dict):
        for k, v in value.items():
            if k == "stack" and isinstance(v, list):
                value[k] = [i + by for i in v]
            else:
                shift_stacks(v, by)


def check_capped_tables(reports, tmp, render, dom_of, fail):
    """`reports`: report dicts that between them have a growth suspect, a
    transfer site and a region site; `render(path, name)` gives the page,
    `dom_of(page, what)` its DOM once it ran."""
    merged = json.loads(json.dumps(reports[0]))
    extra = 12
    for section, (top, key), field, _ in TABLES:
        source = next((r for r in reports if r.get(top, {}).get(key)), None)
        if source is None:
            fail("no report to take a %s.%s entry from" % (top, key))
        if top not in merged or not merged[top].get(key):
            # Its stacks point into its own frame table: appended to ours.
            section = json.loads(json.dumps(source[top]))
            shift_stacks(section, len(merged["frame_table"]))
            merged["frame_table"] += source["frame_table"]
            merged[top] = section
        first = merged[top][key][0]
        rows = []
        for i in range(ROWS + extra):
            s = json.loads(json.dumps(first))
            s[field] = MIB if i >= ROWS else 64 * MIB - i
            rows.append(s)
        merged[top][key] = rows
    path = os.path.join(tmp, "capped.json")
    with open(path, "w") as f:
        json.dump(merged, f)
    dom = dom_of(render(path, "capped"), "capped tables")
    for section, _, _, words in TABLES:
        body = re.search(r'<section id="%s">(.*?)</section>' % section, dom, re.S)
        if body is None:
            fail("the page has no section %s" % section)
        text = body.group(1)
        summary = re.findall(r'<tr class="gw-more"><td colspan="\d+" class="note">(.*?)</td></tr>', text)
        want = "\u2026 and %d %s" % (extra, words % "12.0 MiB")
        if summary != [want]:
            fail("%s: the summary rows are %s, expected [%r]" % (section, summary, want))
        if "more sites in the report" in text or "more suspects in the report" in text:
            fail("%s still ends with the old note" % section)
        print("%s: %s" % (section, summary[0]))
