"""
ncu_launches.py - one row per kernel launch from `ncu --csv --metrics ...` output: its time, the
bytes it moved to and from DRAM, the bandwidth that makes, and its occupancy, so a kernel's
launches of different sizes (layer1's against layer4's) can be told apart, which the per-kernel
totals of ncu_summary.py cannot.

    python3 tools/ncu_launches.py ncu.csv [last_fraction] [rows]

The metrics read: gpu__time_duration.sum, dram__bytes.sum, launch__grid_size and
sm__warps_active.avg.pct_of_peak_sustained_active (bench.sh's `launches` stage asks for
them). last_fraction (default 1): keep only that last part of the launches (0.25: the last of
four training steps). rows: how many launches to print, the longest first (default 30); then
the totals per kernel over the launches kept.
"""
import csv
import sys

SCALE_S = {"ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3, "msecond": 1e-3}
SCALE_B = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6, "GB": 1e9}


def number(text):
    return float(text.replace(",", "")) if text not in ("", "n/a") else 0.0


def main(path, last_fraction=1.0, rows=30):
    launches = {}
    with open(path, newline="", errors="replace") as f:
        lines = [l for l in f if l.startswith('"')]  # ncu's own messages are not CSV rows
    for r in csv.DictReader(lines):
        key = int(r["ID"])
        l = launches.setdefault(key, {"name": r["Kernel Name"].split("(")[0].replace("void ", "")})
        unit, value, metric = r["Metric Unit"], number(r["Metric Value"]), r["Metric Name"]
        if metric == "gpu__time_duration.sum":
            l["s"] = value * SCALE_S.get(unit, 1e-9)
        elif metric == "dram__bytes.sum":
            l["bytes"] = value * SCALE_B.get(unit, 1)
        elif metric == "launch__grid_size":
            l["grid"] = int(value)
        elif metric == "sm__warps_active.avg.pct_of_peak_sustained_active":
            l["occupancy"] = value
    ids = sorted(launches)
    ids = ids[int(len(ids) * (1 - last_fraction)):]
    kept = [launches[i] for i in ids if "s" in launches[i]]
    print(f"{'kernel':44s} {'grid':>7s} {'us':>8s} {'MB':>8s} {'GB/s':>7s} {'occ %':>6s}")
    for l in sorted(kept, key=lambda l: -l["s"])[:rows]:
        mb = l.get("bytes", 0) / 1e6
        print(f"{l['name'][:44]:44s} {l.get('grid', 0):7d} {l['s'] * 1e6:8.1f} {mb:8.1f} "
              f"{mb / 1e3 / l['s']:7.0f} {l.get('occupancy', 0):6.1f}")
    totals = {}
    for l in kept:
        t = totals.setdefault(l["name"][:44], [0, 0.0, 0.0])
        t[0] += 1
        t[1] += l["s"]
        t[2] += l.get("bytes", 0)
    print(f"\n{'kernel (launches kept)':44s} {'calls':>7s} {'ms':>8s} {'GB':>8s} {'GB/s':>7s}")
    for name, (calls, s, b) in sorted(totals.items(), key=lambda kv: -kv[1][1]):
        print(f"{name:44s} {calls:7d} {s * 1e3:8.3f} {b / 1e9:8.3f} {b / 1e9 / s:7.0f}")


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 1.0,
         int(sys.argv[3]) if len(sys.argv) > 3 else 30)
