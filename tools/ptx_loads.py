"""
ptx_loads.py - how many global loads each CUDA kernel has in flight, read statically from its
PTX: for every load from global memory, the loads issued from it up to the first instruction
that uses what it loaded (itself included). A kernel whose loads each wait for their own use
keeps one load a thread in flight, and a memory-bound kernel then runs at a fraction of the
bandwidth however many threads it has (docs/benchmarks.md, "The copies' loads first": the
channels-last copies went from 2.5 to 4.0 TB/s on an H200 when their eight loads were issued
before the first was used).

    nvcc -DSNN_WITH_CUDA=1 -I. -Itensor -O3 -DNDEBUG -arch=sm_90 --expt-relaxed-constexpr \
         -ptx kernels/cuda/lif.cu -o lif.ptx          (from the repository root, as the build)
    python3 tools/ptx_loads.py lif.ptx [NAME_REGEX]

One row a kernel: its global loads (as written in the PTX, after nvcc's unrolling), and the
fewest, the median and the most loads in flight at a load's first use. It reads the PTX in
program order: a use behind a branch counts where it stands in the text, and a loop's loads
are counted once, as one trip. A first use is an instruction that reads a register the load
wrote, or a barrier (bar.sync), which no load is taken past. Rows are sorted by the most in
flight, fewest first.

Reading it: one load in flight is fine for an elementwise kernel that gives each thread one
element of a large grid (the GPU keeps enough warps resident to cover the latency); it is what
to look for in kernels that give each thread several elements (tiled copies, reductions, the
neuron kernels' time steps), and in kernels whose grids are small. GEMM kernels that stage
their operands with cp.async show only their epilogue's loads. ptxas may still hoist loads the
PTX shows waiting: a row here is a suspect for ncu, not a verdict.
"""
import re
import statistics
import sys

ENTRY = re.compile(r"^\s*\.(?:visible\s+)?entry\s+([\w$]+)")
LOAD = re.compile(r"^\s*(?:@!?%\w+\s+)?ld\.global[\w.]*\s+(.*?);")
REGISTER = re.compile(r"%[a-z]+\d+")


def kernels(lines):
    """(name, body lines) of each .entry in the PTX."""
    name, body, depth = None, [], 0
    for line in lines:
        m = ENTRY.match(line)
        if m:
            name, body, depth = m.group(1), [], 0
            continue
        if name is None:
            continue
        body.append(line)
        depth += line.count("{") - line.count("}")
        if depth == 0 and "}" in line:
            yield name, body
            name = None


def destinations(operands):
    """The registers a load writes: those before its address, [ ... ]."""
    return set(REGISTER.findall(operands.split("[", 1)[0]))


def in_flight(body):
    """For each global load of the kernel, the loads issued up to its first use."""
    code = [l.split("//", 1)[0].strip() for l in body]
    code = [l for l in code if l and not l.endswith(":") and not l.startswith(".")]
    counts = []
    for i, line in enumerate(code):
        m = LOAD.match(line)
        if not m:
            continue
        wrote, loads = destinations(m.group(1)), 1
        for later in code[i + 1:]:
            if later.startswith("bar.sync"):
                break
            operands = later.split(None, 1)[1] if " " in later else ""
            if LOAD.match(later):
                # a load reading what this one wrote (an address) is a use
                if wrote & set(REGISTER.findall(operands.split("[", 1)[-1])):
                    break
                loads += 1
                continue
            # an instruction's first operand is what it writes (or, for a store, an address)
            read = REGISTER.findall(operands)
            if not later.startswith("st.") and read:
                read = read[1:]
            if wrote & set(read):
                break
        counts.append(loads)
    return counts


def main(path, pattern=None):
    with open(path, errors="replace") as f:
        lines = f.readlines()
    rows = []
    for name, body in kernels(lines):
        if pattern and not re.search(pattern, name):
            continue
        counts = in_flight(body)
        if counts:
            rows.append((name, len(counts), min(counts), statistics.median(counts), max(counts)))
    print(f"{'kernel (PTX name)':<72} {'loads':>5} {'min':>4} {'median':>6} {'max':>4}")
    for name, n, lo, med, hi in sorted(rows, key=lambda r: (r[4], r[3], r[0])):
        print(f"{name[:72]:<72} {n:>5} {lo:>4} {med:>6g} {hi:>4}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
