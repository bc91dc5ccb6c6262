"""
ncu_summary.py - totals of `ncu --print-summary per-kernel` output: GPU time per kernel, largest
first, with its share, so the time of a training step can be read off one table.

    python3 tools/ncu_summary.py ncu.txt [divide_by]

divide_by: how many steps the profiled run made (the totals are divided by it).
"""
import re
import sys

SCALE = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0, "msecond": 1.0}


def main(path, divide_by=1.0):
    totals, name, calls = {}, None, 0
    for line in open(path, errors="replace"):
        head = re.match(r"^  (\S[^(]*)\(.*Invocations (\d+)", line)
        if head:
            name, calls = head.group(1).strip(), int(head.group(2))
            name = re.sub(r"^void ", "", name)[:72]
            continue
        m = re.match(r"\s*gpu__time_duration\.sum\s+(\S+)\s+([\d.,]+)\s+([\d.,]+)\s+([\d.,]+)", line)
        if m and name:
            ms = float(m.group(4).replace(",", "")) * SCALE.get(m.group(1), 1e-6) * calls
            t, c = totals.get(name, (0.0, 0))
            totals[name] = (t + ms / divide_by, c + calls)
            name = None
    total = sum(t for t, _ in totals.values())
    print(f"{'kernel':72s} {'calls':>6s} {'ms/step':>9s} {'share':>6s}")
    for k, (t, c) in sorted(totals.items(), key=lambda kv: -kv[1][0])[:25]:
        print(f"{k:72s} {c:6d} {t:9.3f} {100 * t / total:5.1f}%")
    print(f"{'total':72s} {sum(c for _, c in totals.values()):6d} {total:9.3f}")


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 1.0)
