"""The reference `nir` package's side of tests/test_nir_interop.c: it reads what snn.c writes and
writes graphs for snn.c to read. Run with the vendored package on the path:

    PYTHONPATH=../shared/vendor /usr/bin/python3 tests/nir/nir_interop.py check FILE...
    PYTHONPATH=../shared/vendor /usr/bin/python3 tests/nir/nir_interop.py same A B
    PYTHONPATH=../shared/vendor /usr/bin/python3 tests/nir/nir_interop.py write DIR

check: nir.read (with its type check) opens each file; prints "ok FILE NODES EDGES" per file,
    or "fail FILE: why"; exits 1 if any failed.
same: A and B hold the same nodes, types, parameters (array for array) and edges.
write: nir.write writes graphs that use every node type snn.c reads (per-neuron parameters, a
    cycle, delays, padding 'same') into DIR, and DIR/manifest.txt describes them for the C test:
        graph NAME NODES EDGES DT
        order NODE...              (an order to run them in; an edge backwards is recurrent)
        array NODE PARAM COUNT SUM (every numeric parameter)
        end
"""
import os
import sys

import numpy as np

import nir


def check(files):
    failed = 0
    for f in files:
        try:
            g = nir.read(f)
            print(f"ok {f} {len(g.nodes)} {len(g.edges)}")
        except Exception as e:  # noqa: BLE001 - the test reports whatever went wrong
            print(f"fail {f}: {type(e).__name__}: {e}")
            failed += 1
    return 1 if failed else 0


def params(node):
    """The node's numeric parameters, by name."""
    out = {}
    for k, v in node.to_dict().items():
        if k in ("type", "metadata") or isinstance(v, (str, dict)):
            continue
        a = np.asarray(v)
        if a.dtype.kind in "fiu":
            out[k] = a
    return out


def same(a_file, b_file):
    a, b = nir.read(a_file), nir.read(b_file)
    problems = []
    if set(a.nodes) != set(b.nodes):
        problems.append(f"nodes {sorted(a.nodes)} vs {sorted(b.nodes)}")
    for name in set(a.nodes) & set(b.nodes):
        x, y = a.nodes[name], b.nodes[name]
        if type(x) is not type(y):
            problems.append(f"{name}: {type(x).__name__} vs {type(y).__name__}")
            continue
        px, py = params(x), params(y)
        for k in set(px) | set(py):
            if k not in px or k not in py or not np.array_equal(px[k], py[k]):
                problems.append(f"{name}.{k} differs")
    if sorted(map(tuple, a.edges)) != sorted(map(tuple, b.edges)):
        problems.append("edges differ")
    for p in problems:
        print(f"differ {a_file} {b_file}: {p}")
    if not problems:
        print(f"same {a_file} {b_file}")
    return 1 if problems else 0


def uniform(rng, shape, lo, hi):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def graphs(rng):
    """(name, graph, order) for each graph written."""
    n = 6
    lif = nir.LIF(tau=uniform(rng, n, 2e-3, 6e-3), r=uniform(rng, n, 0.8, 1.5),
                  v_leak=uniform(rng, n, 0.0, 0.2), v_threshold=uniform(rng, n, 0.7, 1.2),
                  v_reset=uniform(rng, n, -0.1, 0.0))
    li = nir.LI(tau=uniform(rng, 3, 3e-3, 5e-3), r=np.ones(3, np.float32),
                v_leak=np.zeros(3, np.float32))
    cuba_li = nir.CubaLI(tau_syn=uniform(rng, 3, 2e-3, 3e-3), tau_mem=uniform(rng, 3, 3e-3, 6e-3),
                         r=uniform(rng, 3, 1.0, 2.0), v_leak=uniform(rng, 3, -0.1, 0.1),
                         w_in=uniform(rng, 3, 0.5, 1.5))
    g1 = nir.NIRGraph(
        nodes={"input": nir.Input(input_type=np.array([8])),
               "fc": nir.Affine(weight=uniform(rng, (n, 8), -0.8, 0.8),
                                bias=uniform(rng, n, -0.2, 0.2)),
               "lif": lif,
               "fc2": nir.Linear(weight=uniform(rng, (3, n), -1.0, 1.0)),
               "cuba_li": cuba_li,
               "li": li,
               "output": nir.Output(output_type=np.array([3]))},
        edges=[("input", "fc"), ("fc", "lif"), ("lif", "fc2"), ("fc2", "cuba_li"),
               ("cuba_li", "li"), ("li", "output")],
        metadata={"dt": 1e-3})
    yield "py_lif", g1, ["input", "fc", "lif", "fc2", "cuba_li", "li", "output"]

    cuba = nir.CubaLIF(tau_syn=uniform(rng, n, 2e-3, 4e-3), tau_mem=uniform(rng, n, 4e-3, 8e-3),
                       r=uniform(rng, n, 1.0, 2.0), v_leak=np.zeros(n, np.float32),
                       v_threshold=uniform(rng, n, 0.5, 1.0), v_reset=np.zeros(n, np.float32),
                       w_in=uniform(rng, n, 1.0, 2.0))
    delay = nir.Delay(delay=(np.arange(n) % 3).astype(np.float32) * 1e-3)
    g2 = nir.NIRGraph(
        nodes={"input": nir.Input(input_type=np.array([4])),
               "fc_in": nir.Affine(weight=uniform(rng, (n, 4), -1.5, 1.5),
                                   bias=uniform(rng, n, 0.0, 0.5)),
               "cuba": cuba,
               "fc_rec": nir.Linear(weight=uniform(rng, (n, n), -0.5, 0.5)),
               "delay": delay,
               "fc_out": nir.Affine(weight=uniform(rng, (2, n), -1.0, 1.0),
                                    bias=uniform(rng, 2, -0.1, 0.1)),
               "integ": nir.I(r=np.full(2, 300.0, np.float32)),
               "th": nir.Threshold(threshold=uniform(rng, 2, -0.2, 0.2)),
               "output": nir.Output(output_type=np.array([2]))},
        edges=[("input", "fc_in"), ("fc_in", "cuba"), ("cuba", "fc_rec"), ("fc_rec", "cuba"),
               ("cuba", "delay"), ("delay", "fc_out"), ("fc_out", "integ"), ("integ", "th"),
               ("th", "output")],
        metadata={"dt": 1e-3})
    yield "py_recurrent", g2, ["input", "fc_in", "cuba", "fc_rec", "delay", "fc_out", "integ",
                               "th", "output"]

    c = 3
    g3 = nir.NIRGraph(
        nodes={"input": nir.Input(input_type=np.array([2, 10, 10])),
               "conv": nir.Conv2d(input_shape=(10, 10),
                                  weight=uniform(rng, (c, 2, 3, 3), -0.6, 0.6), stride=1,
                                  padding="same", dilation=1, groups=1,
                                  bias=uniform(rng, c, 0.0, 0.3)),
               "if": nir.IF(r=np.full((c, 10, 10), 1000.0, np.float32),
                            v_threshold=uniform(rng, (c, 10, 10), 0.5, 1.5),
                            v_reset=np.zeros((c, 10, 10), np.float32)),
               "sum": nir.SumPool2d(kernel_size=np.array([2, 2]), stride=np.array([2, 2]),
                                    padding=np.array([0, 0])),
               "avg": nir.AvgPool2d(kernel_size=np.array([1, 1]), stride=np.array([1, 1]),
                                    padding=np.array([0, 0])),
               "flat": nir.Flatten(input_type={"input": np.array([c, 5, 5])}, start_dim=0,
                                   end_dim=-1),
               "scale": nir.Scale(scale=uniform(rng, c * 25, 0.5, 1.5)),
               "fc": nir.Affine(weight=uniform(rng, (4, c * 25), -0.3, 0.3),
                                bias=uniform(rng, 4, -0.1, 0.1)),
               "output": nir.Output(output_type=np.array([4]))},
        edges=[("input", "conv"), ("conv", "if"), ("if", "sum"), ("sum", "avg"), ("avg", "flat"),
               ("flat", "scale"), ("scale", "fc"), ("fc", "output")],
        metadata={"dt": 1e-3})
    yield "py_conv", g3, ["input", "conv", "if", "sum", "avg", "flat", "scale", "fc", "output"]


def write(folder):
    rng = np.random.default_rng(5)
    lines = []
    for name, g, order in graphs(rng):
        nir.write(os.path.join(folder, name + ".nir"), g)
        lines.append(f"graph {name} {len(g.nodes)} {len(g.edges)} {g.metadata['dt']!r}")
        lines.append("order " + " ".join(order))
        for node_name, node in g.nodes.items():
            for k, a in params(node).items():
                if k in ("input_type", "output_type"):
                    continue
                total = float(np.sum(a, dtype=np.float64))
                lines.append(f"array {node_name} {k} {a.size} {total!r}")
        lines.append("end")
    with open(os.path.join(folder, "manifest.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "check":
        sys.exit(check(args))
    if mode == "same":
        sys.exit(same(args[0], args[1]))
    if mode == "write":
        sys.exit(write(args[0]))
    sys.exit(f"unknown mode {mode}")
