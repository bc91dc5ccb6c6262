#!/usr/bin/env bash
# .ci/fuzz.sh - builds the libFuzzer targets (fuzz/fuzz_{idx,tar,cifar,nmnist,dvs_gesture,
# cifar10_dvs}.c for the parsers of data/, fuzz/fuzz_safetensors.c for the checkpoint reader of
# nn/) with clang, writes a small seed corpus, and runs each target for a bounded time. Exits
# non-zero when a target crashes, trips ASan/UBSan, leaks (the targets check snn_live_bytes) or
# fails to build.
#
#   .ci/fuzz.sh                       # 20 s per target, build in build-fuzz/
#   SNN_FUZZ_SECONDS=300 .ci/fuzz.sh  # longer
#   SNN_FUZZ_TARGETS=fuzz_safetensors SNN_FUZZ_SECONDS=600 .ci/fuzz.sh   # one target
#
# Crash inputs are kept as build-fuzz/artifacts/<target>-crash-*; replay one with
#   build-fuzz/bin/fuzz_idx build-fuzz/artifacts/fuzz_idx-crash-...
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${SNN_FUZZ_BUILD:-$root/build-fuzz}
seconds=${SNN_FUZZ_SECONDS:-20}
read -r -a targets <<< "${SNN_FUZZ_TARGETS:-fuzz_idx fuzz_tar fuzz_cifar fuzz_nmnist fuzz_dvs_gesture fuzz_cifar10_dvs fuzz_safetensors}"

command -v clang >/dev/null || { echo "fuzz.sh: clang not found" >&2; exit 2; }

# 1. Build through CMake with clang (fuzz/CMakeLists.txt): the targets, and fuzz_make_seeds.
#    -O1 -g, as libFuzzer's docs suggest: the build of the library is most of this script's
#    time in CI, and -O1 compiles it faster than RelWithDebInfo's -O2 (the targets are bounded
#    by time, not by inputs, so the slower code costs only inputs per second).
cmake -S "$root" -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" \
      -DSNN_CUDA=OFF -DSNN_FUZZ=ON -DSNN_BUILD_TESTS=OFF -DSNN_NATIVE=OFF >/dev/null
cmake --build "$build" --target "${targets[@]}" fuzz_make_seeds -j2 >"$build/build.log" 2>&1 ||
  { echo "fuzz.sh: building the fuzz targets with clang failed:" >&2
    tail -n 30 "$build/build.log" >&2; exit 2; }

# 2. Seeds: valid inputs of each format, plain and gzip, written with standard tools.
seeds="$build/seeds"
rm -rf "$seeds" && mkdir -p "$seeds"/{fuzz_idx,fuzz_tar,fuzz_cifar,fuzz_nmnist,fuzz_dvs_gesture,fuzz_cifar10_dvs,fuzz_safetensors}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

printf '\x00\x00\x08\x01\x00\x00\x00\x04\x01\x02\x09\x00' > "$seeds/fuzz_idx/labels"
{ printf '\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00\x00\x03\x00\x00\x00\x02'; head -c 12 /dev/urandom; } \
  > "$seeds/fuzz_idx/images"
gzip -c "$seeds/fuzz_idx/labels" > "$seeds/fuzz_idx/labels.gz"
gzip -c "$seeds/fuzz_idx/images" > "$seeds/fuzz_idx/images.gz"

# A CIFAR-10 and a CIFAR-100 layout with one record per batch file.
mkdir -p "$work/c10/cifar-10-batches-bin" "$work/c100/cifar-100-binary"
for f in data_batch_1 data_batch_2 data_batch_3 data_batch_4 data_batch_5 test_batch; do
  { printf '\x03'; head -c 3072 /dev/zero; } > "$work/c10/cifar-10-batches-bin/$f.bin"
done
echo airplane > "$work/c10/cifar-10-batches-bin/batches.meta.txt"
for f in train test; do
  { printf '\x05\x2a'; head -c 3072 /dev/zero; } > "$work/c100/cifar-100-binary/$f.bin"
done
tar -C "$work/c10" --format=ustar -cf "$work/c10.tar" cifar-10-batches-bin
tar -C "$work/c100" --format=gnu -cf "$work/c100.tar" cifar-100-binary
gzip -c "$work/c10.tar" > "$work/c10.tar.gz"
gzip -c "$work/c100.tar" > "$work/c100.tar.gz"
cp "$work/c10.tar" "$work/c10.tar.gz" "$work/c100.tar.gz" "$seeds/fuzz_tar/"
{ printf '\x00'; cat "$work/c10.tar.gz"; } > "$seeds/fuzz_cifar/c10-train"
{ printf '\x04'; cat "$work/c10.tar"; } > "$seeds/fuzz_cifar/c10-test"
{ printf '\x01'; cat "$work/c100.tar.gz"; } > "$seeds/fuzz_cifar/c100-fine"
{ printf '\x06'; cat "$work/c100.tar.gz"; } > "$seeds/fuzz_cifar/c100-coarse"
{ printf '\x03'; cat "$work/c10/cifar-10-batches-bin/test_batch.bin"; } > "$seeds/fuzz_cifar/records"

# Checkpoints as snn.c writes them (fuzz/make_seeds.c), one written by PyTorch's safetensors,
# and bare JSON headers.
"$build/bin/fuzz_make_seeds" "$seeds/fuzz_safetensors"
cp "$root/tests/ref/tiny_resnet.safetensors" "$seeds/fuzz_safetensors/"
printf '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"k":"v\\u00e9"}}' \
  > "$seeds/fuzz_safetensors/header.json"

# Event sets: raw N-MNIST events, an AEDAT 3.1 recording with its labels and split list (tar and
# tar.gz), an AEDAT 2.0 recording; the zips only where python3 is there to write them.
nm='\x01\x02\x80\x00\x10\x21\x20\x00\x01\x00'                 # 2 events of N-MNIST
printf "\x02$nm" > "$seeds/fuzz_nmnist/raw"
aedat3() { printf '#!AER-DAT3.1\r\n#!END-HEADER\r\n\x01\x00\x00\x00\x08\x00\x00\x00\x04\x00\x00\x00'
           printf '\x00\x00\x00\x00\x02\x00\x00\x00\x02\x00\x00\x00\x02\x00\x00\x00'
           printf '\x17\x00\x06\x00\x0a\x00\x00\x00\x15\x00\x0c\x00\x32\x00\x00\x00'; }
mkdir -p "$work/g/DvsGesture"
aedat3 > "$work/g/DvsGesture/user01_led.aedat"
printf 'class,startTime_usec,endTime_usec\r\n3,0,40\r\n5,40,60\r\n' > "$work/g/DvsGesture/user01_led_labels.csv"
printf 'user01_led.aedat\n' > "$work/g/DvsGesture/trials_to_train.txt"
printf 'user01_led.aedat\n' > "$work/g/DvsGesture/trials_to_test.txt"
tar -C "$work/g" --format=ustar -cf "$work/g.tar" DvsGesture
{ printf '\x00'; cat "$work/g.tar"; } > "$seeds/fuzz_dvs_gesture/tar"
{ printf '\x01'; gzip -c "$work/g.tar"; } > "$seeds/fuzz_dvs_gesture/tar-gz"
{ printf '\x02'; aedat3; } > "$seeds/fuzz_dvs_gesture/aedat"
{ printf '\x03'; cat "$work/g/DvsGesture/user01_led_labels.csv"; } > "$seeds/fuzz_dvs_gesture/csv"
aedat2() { printf '#!AER-DAT2.0\r\n# raw\r\n\x00\x00\x05\x0b\x00\x00\x00\x10\x00\x00\x7f\x00\x00\x00\x00\x20'; }
{ printf '\x01'; aedat2; } > "$seeds/fuzz_cifar10_dvs/aedat"
if command -v python3 >/dev/null; then
  aedat2 > "$work/rec.aedat"
  python3 - "$work" "$seeds" <<'PY'
import sys, zipfile
work, seeds = sys.argv[1], sys.argv[2]
def make(path, members):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members:
            z.writestr(name, data)
nm = bytes([1, 2, 0x80, 0, 0x10, 0x21, 0x20, 0, 1, 0])
make(work + "/nm.zip", [("Train/3/00001.bin", nm), ("Train/7/00002.bin", nm[:5])])
make(work + "/c.zip", [("bird/cifar10_bird_%d.aedat" % i, open(work + "/rec.aedat", "rb").read())
                       for i in range(3)])
open(seeds + "/fuzz_nmnist/zip", "wb").write(b"\x00" + open(work + "/nm.zip", "rb").read())
open(seeds + "/fuzz_cifar10_dvs/zip", "wb").write(b"\x20" + open(work + "/c.zip", "rb").read())
open(seeds + "/fuzz_cifar10_dvs/zip-test", "wb").write(b"\x22" + open(work + "/c.zip", "rb").read())
PY
fi

# 3. Run each target for a bounded time; the corpus grows in build-fuzz/corpus/<target>.
mkdir -p "$build/artifacts"
status=0
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t"
  mkdir -p "$corpus"
  echo "fuzz.sh: $t for ${seconds}s"
  if ! "$build/bin/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -max_len=65536 -print_final_stats=1 -artifact_prefix="$build/artifacts/$t-" \
        "$corpus" "$seeds/$t" > "$build/$t.log" 2>&1; then
    echo "fuzz.sh: $t FAILED; tail of $build/$t.log:" >&2
    tail -n 40 "$build/$t.log" >&2
    status=1
  else
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$build/$t.log" | grep -o '[0-9]*$' || true)
    echo "fuzz.sh: $t ok, ${runs:-?} inputs, no crash"
  fi
done
exit $status
