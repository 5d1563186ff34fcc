#!/usr/bin/env bash
# The Python package's cross-process proof on a GPU host: a PyTorch consumer process and a CuPy
# consumer process, each attached to the Rust camera of examples/camera_ipc.rs (the mock NvSci
# library in its GPU mode, NvSciIpc the mock's Unix sockets), every frame verified on the GPU.
#
# Run from the repository root on a Linux host with an NVIDIA GPU, torch (with CUDA) and CuPy,
# the nvsci wheel installed, and the examples built into the bundle of ../shared/gpu/bundle.sh
# (camera_ipc in $GPU_BUNDLE_DIR/examples, default .gpu/examples); no Rust toolchain needed:
#
#   bash examples/python/gpu_proof.sh            # FRAMES=1000 WIDTH=640 HEIGHT=480 PYTHON=python3
#
# Prints each consumer's account (frames verified / mismatched / missing) and a last line
# `gpu_proof: torch <verdict>, cupy <verdict>`; exits non-zero when either consumer found a
# mismatching, missing or out-of-order frame, failed, or could not run (no GPU, torch, CuPy,
# wheel or camera_ipc: a proof that did not run is not a pass).
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 2
py=${PYTHON:-python3}
frames=${FRAMES:-1000}
width=${WIDTH:-640}
height=${HEIGHT:-480}
camera=${GPU_BUNDLE_DIR:-.gpu}/examples/camera_ipc

if [ ! -x "$camera" ]; then
  echo "gpu_proof: $camera not found (build the bundle: ../shared/gpu/bundle.sh)" >&2
  exit 2
fi
if ! "$py" -c 'import nvsci, sys; sys.exit(0 if nvsci.Backend.mock().has_cuda else 1)'; then
  echo "gpu_proof: nvsci is not installed for $py, or finds no CUDA GPU" >&2
  exit 2
fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader

run() {
  local name=$1
  shift
  echo "=== $name: $*"
  "$py" "$@"
  local rc=$?
  [ $rc -eq 0 ] && verdict[$name]=pass || verdict[$name]="FAIL (exit $rc)"
}

declare -A verdict
run torch examples/python/camera_ipc_consumer.py --camera "$camera" --cuda \
  --frames "$frames" --width "$width" --height "$height"
run cupy examples/python/cupy_consumer.py --camera "$camera" \
  --frames "$frames" --width "$width" --height "$height"
echo "gpu_proof: torch ${verdict[torch]}, cupy ${verdict[cupy]}"
[ "${verdict[torch]}" = pass ] && [ "${verdict[cupy]}" = pass ]
