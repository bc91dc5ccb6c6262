#!/usr/bin/env python3
"""same_tensors.py A B [--except REGEX] - whether two safetensors files hold the same tensors,
byte for byte (names, dtypes, shapes and data), whatever their metadata says: a checkpoint
written by a newer snn-train may carry more metadata (its training configuration) over the same
weights. --except leaves out the tensors whose names match REGEX (re.search) in either file,
and says how many it left out: for a change that alters those on purpose (batch-norm running
statistics, say) while every weight and optimizer moment must stay the same.
Prints one line; exit 0 when the tensors compared are the same, 1 otherwise. Standard library
only."""
import json
import re
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


args = sys.argv[1:]
skip = None
if "--except" in args:
    i = args.index("--except")
    skip = re.compile(args[i + 1])
    del args[i:i + 2]
if len(args) != 2:
    sys.exit("usage: same_tensors.py A B [--except REGEX]")
a, b = tensors(args[0]), tensors(args[1])
names = a.keys() | b.keys()
left_out = sorted(n for n in names if skip and skip.search(n))
compared = [n for n in names if n not in left_out]
differ = sorted(n for n in compared if a.get(n) != b.get(n))
note = f" ({len(left_out)} left out by --except)" if left_out else ""
if differ:
    print(f"   {len(differ)} of {len(compared)} tensors differ{note}, e.g. {differ[:3]}")
    sys.exit(1)
print(f"   the same {len(compared)} tensors, byte for byte (metadata aside){note}")
