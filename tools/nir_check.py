#!/usr/bin/env python3
"""nir_check.py - runs a NIR file written by snn-export-nir in plain PyTorch (h5py + torch only,
no `nir` package) on the Fashion-MNIST test set and compares its predictions with snn-eval's.

The graph is read from the HDF5 layout of the nir package (/node/nodes/<name>/{type, params},
/node/edges) and run step by step, T steps at dt = 1, with NIR's node semantics written out
here from the NIR spec (docs/nir.md): converging edges sum; LIF is the Euler step of
tau dv/dt = (v_leak - v) + r I, IF of dv/dt = r I, both firing at v >= v_threshold (snn.c's
Heaviside(0) = 1) and resetting to v_reset; SumPool2d sums k x k windows; Threshold is
(x > threshold); Flatten flattens (C, H, W). The logits are the mean of the Output over T.

    build/bin/snn-eval --checkpoint ckpt.safetensors --predictions pred.txt
    build/bin/snn-export-nir --checkpoint ckpt.safetensors -o model.nir
    python3 tools/nir_check.py model.nir --predictions pred.txt [--data DIR] [--device cuda]

Prints the accuracy of the NIR run and how many predictions agree with snn-eval's; exits 1 when
fewer than --min-agreement (default 0.999) of them agree.
"""
import argparse
import gzip
import os
import sys

import h5py
import numpy as np
import torch
import torch.nn.functional as F


def text(value):
    return value.decode("utf8") if isinstance(value, bytes) else str(value)


def read_graph(path):
    with h5py.File(path, "r") as f:
        node = f["node"]
        assert text(node["type"][()]) == "NIRGraph", "not a NIR graph"
        nodes = {}
        for name, group in node["nodes"].items():
            params = {k: v[()] for k, v in group.items() if isinstance(v, h5py.Dataset) and k != "type"}
            nodes[name] = (text(group["type"][()]), params)
        edges = [(text(a), text(b)) for a, b in node["edges"][()]]
        steps = int(node["metadata"]["time_steps"][()]) if "metadata" in node else 0
    return nodes, edges, steps


def topological(nodes, edges):
    indegree = {n: 0 for n in nodes}
    for _, b in edges:
        indegree[b] += 1
    order = [n for n in nodes if indegree[n] == 0]
    for v in order:
        for a, b in edges:
            if a == v:
                indegree[b] -= 1
                if indegree[b] == 0:
                    order.append(b)
    assert len(order) == len(nodes), "the graph has a cycle"
    return order


def pair(value):
    value = np.atleast_1d(value).astype(int)
    return (int(value[0]), int(value[-1]))


class Graph:
    """The NIR graph as PyTorch ops on (N, ...) tensors, one time step per call of step()."""

    def __init__(self, nodes, edges, device):
        self.nodes, self.order = nodes, topological(nodes, edges)
        self.inputs = {n: [a for a, b in edges if b == n] for n in nodes}
        t = lambda a: torch.as_tensor(np.asarray(a, dtype=np.float32), device=device)
        self.params = {n: {k: (t(v) if np.asarray(v).dtype.kind == "f" else v) for k, v in p.items()}
                       for n, (_, p) in nodes.items()}
        self.state = {}

    def reset(self):
        self.state = {}

    def step(self, x):
        out = {}
        for name in self.order:
            kind, p = self.nodes[name][0], self.params[name]
            if kind == "Input":
                out[name] = x
                continue
            h = sum(out[a] for a in self.inputs[name])
            if kind == "Conv2d":
                bias = p.get("bias")
                y = F.conv2d(h, p["weight"], bias, stride=pair(p.get("stride", 1)),
                             padding=pair(p.get("padding", 0)), dilation=pair(p.get("dilation", 1)),
                             groups=int(np.asarray(p.get("groups", 1)).reshape(-1)[0]))
            elif kind in ("Affine", "Linear"):
                y = h @ p["weight"].T + (p["bias"] if kind == "Affine" else 0)
            elif kind in ("LIF", "IF"):
                v_reset = p.get("v_reset", torch.zeros_like(p["v_threshold"]))
                v = self.state.get(name, v_reset.expand_as(h).clone())
                if kind == "LIF":   # Euler step, dt = 1: v += (dt / tau) ((v_leak - v) + r I)
                    v = v + ((p["v_leak"] - v) + p["r"] * h) / p["tau"]
                else:               # v += dt r I
                    v = v + p["r"] * h
                spike = (v >= p["v_threshold"]).to(h.dtype)
                self.state[name] = torch.where(spike > 0, v_reset.expand_as(v), v)
                y = spike
            elif kind in ("SumPool2d", "AvgPool2d"):
                k, s = pair(p["kernel_size"]), pair(p["stride"])
                y = F.avg_pool2d(h, k, s, padding=pair(p.get("padding", 0)))
                if kind == "SumPool2d":
                    y = y * (k[0] * k[1])
            elif kind == "Threshold":
                y = (h > p["threshold"]).to(h.dtype)
            elif kind == "Flatten":
                y = h.flatten(1)
            elif kind == "Output":
                y = h
            else:
                raise ValueError(f"node {name}: type {kind} not handled by this checker")
            out[name] = y
        return out[[n for n in self.order if self.nodes[n][0] == "Output"][0]]


def read_idx(path, offset):
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
        return np.frombuffer(bytearray(f.read()), dtype=np.uint8, offset=offset)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("nir")
    ap.add_argument("--predictions", required=True, help="snn-eval --predictions output")
    ap.add_argument("--data", default=None, help="Fashion-MNIST folder (default: $SNN_DATA_DIR/"
                    "fashion-mnist or /usr/share/datasets/fashion-mnist)")
    ap.add_argument("--mean", type=float, default=0.2860)
    ap.add_argument("--std", type=float, default=0.3530)
    ap.add_argument("--T", type=int, default=0, help="time steps (default: the file's metadata)")
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--min-agreement", type=float, default=0.999)
    args = ap.parse_args()
    torch.backends.cudnn.allow_tf32 = False          # fp32 like snn.c's default
    torch.backends.cuda.matmul.allow_tf32 = False

    data = args.data
    if data is None:
        root = os.environ.get("SNN_DATA_DIR")
        data = os.path.join(root, "fashion-mnist") if root else "/usr/share/datasets/fashion-mnist"
        if root and not os.path.isdir(data):
            data = root
    name = lambda stem: os.path.join(data, stem + ".gz") if os.path.exists(
        os.path.join(data, stem + ".gz")) else os.path.join(data, stem)
    images = read_idx(name("t10k-images-idx3-ubyte"), 16).reshape(-1, 1, 28, 28)
    labels = read_idx(name("t10k-labels-idx1-ubyte"), 8)
    want = np.loadtxt(args.predictions, dtype=np.int64).reshape(-1)
    n = len(want)
    images, labels = images[:n], labels[:n]

    nodes, edges, steps = read_graph(args.nir)
    T = args.T or steps
    assert T > 0, "no time steps: pass --T"
    graph = Graph(nodes, edges, args.device)
    got = []
    with torch.no_grad():
        for start in range(0, n, args.batch):
            x = torch.as_tensor(images[start:start + args.batch], dtype=torch.float32, device=args.device)
            x = (x / 255.0 - args.mean) / args.std
            graph.reset()
            logits = sum(graph.step(x) for _ in range(T)) / T
            got.append(logits.argmax(1).cpu().numpy())
    got = np.concatenate(got)
    agree = float((got == want).mean())
    types = {}
    for kind, _ in nodes.values():
        types[kind] = types.get(kind, 0) + 1
    print(f"nir_check: {args.nir}: {len(nodes)} nodes {types}, {len(edges)} edges, T={T}, "
          f"device {args.device}")
    print(f"nir_check: {n} test images: NIR-in-PyTorch accuracy {100 * (got == labels).mean():.2f}%, "
          f"snn-eval accuracy {100 * (want == labels).mean():.2f}%, "
          f"same prediction for {int((got == want).sum())}/{n} ({100 * agree:.2f}%)")
    ok = agree >= args.min_agreement
    print("nir_check: PASS" if ok else f"nir_check: FAIL (agreement below {100 * args.min_agreement:.1f}%)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
