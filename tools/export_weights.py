"""
export_weights.py - a copy of an snn.c checkpoint without its optimizer state: the model's
parameters and buffers and all of the metadata (model config, training record), which is what
snn-eval and snn-sparse load. A width-64 spiking ResNet-18 goes from ~134 MB to ~45 MB.

    python3 tools/export_weights.py checkpoint.safetensors weights.safetensors

The optimizer's tensors are the ones whose names start with a state prefix (exp_avg.,
exp_avg_sq., momentum_buffer.); everything else is copied byte for byte. Standard library only.
The format (safetensors): an 8-byte little-endian header length, a JSON header naming each
tensor's dtype, shape and [begin, end) byte range in the data that follows.
"""
import json
import struct
import sys

OPTIMIZER_PREFIXES = ("exp_avg.", "exp_avg_sq.", "momentum_buffer.")


def main(src, dst):
    with open(src, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    out_header, chunks, offset = {}, [], 0
    for name, entry in header.items():
        if name == "__metadata__":
            out_header[name] = entry
            continue
        if name.startswith(OPTIMIZER_PREFIXES):
            continue
        begin, end = entry["data_offsets"]
        chunks.append(data[begin:end])
        out_header[name] = dict(entry, data_offsets=[offset, offset + end - begin])
        offset += end - begin
    text = json.dumps(out_header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    with open(dst, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for c in chunks:
            f.write(c)
    kept = sum(1 for k in out_header if k != "__metadata__")
    print(f"{dst}: {kept} tensors, {offset} bytes of data (from {len(header) - 1} tensors)")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: export_weights.py checkpoint.safetensors weights.safetensors")
    main(sys.argv[1], sys.argv[2])
