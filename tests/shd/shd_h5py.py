"""shd_h5py.py - writes an SHD look-alike split with h5py, laid out as the published files
(Cramer et al. 2020; compneuro.net / zenkelab.org: root/spikes/{times,units}, root/labels,
root/extra/{speaker,keys,meta_info/...}), for tests/test_data_shd.c to read back with the C
reader: the proof that what the C test writes with the HDF5 C API and what h5py writes are read
the same way.

    python3 tests/shd/shd_h5py.py OUT.h5 TIMES_DTYPE        # TIMES_DTYPE: float16 or float32

Sample i (0..4) holds 70 + i spikes; spike k at time (k + i) / 64 seconds (exact in float16)
on unit (37 k + 11 i) mod 700; label i mod 20. test_data_shd.c computes the same by hand.
"""
import sys

import h5py
import numpy as np


def main():
    path, times_dtype = sys.argv[1], np.dtype(sys.argv[2])
    samples = 5
    with h5py.File(path, "w") as f:
        spikes = f.create_group("spikes")
        times = spikes.create_dataset("times", (samples,), dtype=h5py.vlen_dtype(times_dtype))
        units = spikes.create_dataset("units", (samples,), dtype=h5py.vlen_dtype(np.uint16))
        for i in range(samples):
            k = np.arange(70 + i)
            times[i] = ((k + i) / 64.0).astype(times_dtype)
            units[i] = ((37 * k + 11 * i) % 700).astype(np.uint16)
        f.create_dataset("labels", data=np.arange(samples, dtype=np.uint16) % 20)
        extra = f.create_group("extra")
        extra.create_dataset("speaker", data=np.arange(samples, dtype=np.uint16))
        extra.create_dataset("keys", data=np.array([b"zero", b"one"], dtype="S8"))
        meta = extra.create_group("meta_info")
        meta.create_dataset("gender", data=np.array([b"female"], dtype="S8"))
        meta.create_dataset("age", data=np.array([30], dtype=np.uint16))
    return 0


if __name__ == "__main__":
    sys.exit(main())
