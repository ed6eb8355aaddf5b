"""Sizes as gpuwatch's tools and the pytest plugin read and write them."""

import re

_UNITS = {"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
          # pytest-memray's units, 1024-based as it reads them ("24 MB" is 24 MiB)
          "kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30, "tb": 1 << 40, "pb": 1 << 50}


def parse_bytes(value):
    """Bytes from an int or a text such as "0", "512KiB", "1.5 GiB" (the
    units of gpuwatch check) or "24 MB" (pytest-memray's: KB, MB, GB, TB,
    PB, 1024-based). ValueError names the problem."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise ValueError("%d is negative" % value)
        return value
    if not isinstance(value, str):
        raise ValueError("%r is not a size" % (value,))
    match = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-z]*)\s*", value)
    if match is None or match.group(2).lower() not in _UNITS:
        raise ValueError("%r is not a size (bytes, or a number with B, KiB, MiB, GiB or TiB, "
                         "or pytest-memray's KB, MB, GB)" % value)
    return int(round(float(match.group(1)) * _UNITS[match.group(2).lower()]))


def format_bytes(n):
    """As gpuwatch's reports write sizes: "512 B", "1.5 MiB"."""
    if n < 1024:
        return "%d B" % n
    value, unit = float(n), 0
    while value >= 1024.0 and unit < 4:
        value /= 1024.0
        unit += 1
    return "%.1f %s" % (value, ("B", "KiB", "MiB", "GiB", "TiB")[unit])
