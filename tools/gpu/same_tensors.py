#!/usr/bin/env python3
"""same_tensors.py A B - whether two safetensors files hold the same tensors, byte for byte
(names, dtypes, shapes and data), whatever their metadata says: a checkpoint written by a newer
snn-train may carry more metadata (its training configuration) over the same weights.
Prints one line; exit 0 when the tensors are the same, 1 otherwise. Standard library only."""
import json
import struct
import sys


def tensors(path):
    with open(path, "rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(size))
        data = f.read()
    header.pop("__metadata__", None)
    return {name: (h["dtype"], h["shape"], data[h["data_offsets"][0]:h["data_offsets"][1]])
            for name, h in header.items()}


a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
differ = sorted(n for n in a.keys() | b.keys() if a.get(n) != b.get(n))
if differ:
    print(f"   {len(differ)} of {len(a.keys() | b.keys())} tensors differ, e.g. {differ[:3]}")
    sys.exit(1)
print(f"   the same {len(a)} tensors, byte for byte (metadata aside)")
