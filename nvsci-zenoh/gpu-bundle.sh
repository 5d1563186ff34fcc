#!/usr/bin/env bash
# Build the Zenoh bridge's GPU test binary (tests/cuda_frames.rs) and its benchmark (zenoh_bench)
# in release, into a folder laid out as the root's ../shared/gpu/bundle.sh lays out its bundle,
# for a Linux x86_64 host with an NVIDIA GPU and no Rust toolchain:
#   tests/cuda_frames      the GPU tests (#[ignore]d elsewhere; run.sh passes --include-ignored)
#   examples/zenoh_bench   the benchmark (run it with --cuda for the CUDA rows)
#   run.sh                 the root bundle's runner, where ../shared/gpu/run.sh exists
# The mock NvSci is linked into both binaries; nothing else is needed there but the NVIDIA driver.
#
# Usage (from the project root or anywhere):
#   nvsci-zenoh/gpu-bundle.sh [cargo args...]
#   GPU_BUNDLE_DIR=.gpu-zenoh (default, relative to the current folder)   output folder
# On the GPU host:
#   bash <folder>/run.sh                    (or: <folder>/tests/cuda_frames --include-ignored)
#   <folder>/examples/zenoh_bench --frames 300 --cuda
# The two binaries can also be copied into the root bundle's tests/ and examples/ folders.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${GPU_BUNDLE_DIR:-.gpu-zenoh}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

rm -rf "$out"
mkdir -p "$out/tests" "$out/examples"
echo "building tests/cuda_frames and examples/zenoh_bench (release $*)" >&2
CARGO_PROFILE_RELEASE_DEBUG=0 cargo test --release --no-run --manifest-path "$here/Cargo.toml" \
  --test cuda_frames --message-format=json "$@" >"$log"
CARGO_PROFILE_RELEASE_DEBUG=0 cargo build --release --manifest-path "$here/Cargo.toml" \
  --example zenoh_bench --message-format=json "$@" >>"$log"

python3 - "$log" "$out" <<'EOF'
import json, shutil, sys, os
log, out = sys.argv[1], sys.argv[2]
for line in open(log):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    kinds, name = m["target"]["kind"], m["target"]["name"]
    if m["profile"].get("test") and name == "cuda_frames":
        dest = os.path.join(out, "tests", name)
    elif "example" in kinds and name == "zenoh_bench":
        dest = os.path.join(out, "examples", name)
    else:
        continue
    shutil.copy2(m["executable"], dest)
    print(dest)
EOF
for f in "$out"/tests/* "$out"/examples/*; do
  strip --strip-debug "$f" 2>/dev/null || true
done
for t in tests/cuda_frames examples/zenoh_bench; do
  [ -x "$out/$t" ] || { echo "error: $t was not built" >&2; exit 1; }
done
if [ -f "$here/../../shared/gpu/run.sh" ]; then
  cp "$here/../../shared/gpu/run.sh" "$out/run.sh"
  chmod +x "$out/run.sh"
else
  echo "note: ../shared/gpu/run.sh not found: run $out/tests/cuda_frames --include-ignored there" >&2
fi
du -sh "$out" >&2
tar -cJf "$out.tar.xz" -C "$(dirname "$out")" "$(basename "$out")"
du -sh "$out.tar.xz" >&2
