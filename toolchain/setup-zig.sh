#!/usr/bin/env bash
# Installs the pinned zig and cargo-zigbuild that build the workspace for an older glibc than the
# host's (`toolchain/bundle.sh --target aarch64-unknown-linux-gnu --glibc 2.31`). Safe to run again:
# what is already installed at the pinned version is left as it is.
#
#   toolchain/setup-zig.sh [--debug-cargo-zigbuild]
#
#   --debug-cargo-zigbuild  build cargo-zigbuild without optimizations (`cargo install --debug`),
#                           in about a third of the time (CI). It only rewrites linker arguments
#                           and starts zig, so its own speed hardly matters.
#
# Installs:
#   zig 0.17.0             the `ziglang` wheel from PyPI, checked against its SHA-256, in a Python
#                          virtual environment at $NVSCI_ZIG_VENV
#                          (default: ${XDG_DATA_HOME:-~/.local/share}/nvsci/zig-venv)
#   cargo-zigbuild 0.24.1  cargo install --locked, into cargo's bin directory
#   python3-venv           with apt-get (sudo when not root), only when `python3 -m venv` is missing
#
# bundle.sh finds zig in that virtual environment by itself. To call `cargo zigbuild` directly, point
# cargo-zigbuild at it:
#   export CARGO_ZIGBUILD_PYTHON_PATH=<venv>/bin/python3
# CARGO_BUILD_JOBS limits the parallel jobs of `cargo install`.
set -euo pipefail

# cargo-zigbuild 0.24.1 is tested by its CI with zig 0.11.0, 0.17.0 and zig's development branch.
zig_version=0.17.0
# SHA-256 of the PyPI wheels ziglang-0.17.0-py3-none-manylinux_*_{x86_64,aarch64}.whl (host x86_64 or aarch64).
zig_wheel_sha256=(
  97079827064a7492cce5541ceb438ae8003ce1e54e399676da2d62fb7a5dc08b
  d2804f94f54f7fcf8169f4b212a619ad688a4e2e6592e976f0cf2e58e2cd8af3
)
cargo_zigbuild_version=0.24.1

venv=${NVSCI_ZIG_VENV:-${XDG_DATA_HOME:-$HOME/.local/share}/nvsci/zig-venv}

install_args=()
for arg in "$@"; do
  case $arg in
    -h | --help)
      sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
      exit 0
      ;;
    --debug-cargo-zigbuild) install_args=(--debug) ;;
    *)
      echo "unknown argument: $arg (see --help)" >&2
      exit 2
      ;;
  esac
done

for tool in cargo rustup; do
  if ! command -v "$tool" >/dev/null; then
    echo "$tool not found: install Rust from https://rustup.rs, then run this script again" >&2
    exit 1
  fi
done

# Debian and Ubuntu ship the venv module (and ensurepip, which creates the venv's pip) separately.
if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
  if ! command -v apt-get >/dev/null; then
    echo "python3 with the venv module is needed (to install zig from PyPI); install it and run this script again" >&2
    exit 1
  fi
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null; then
      echo "not root and sudo is not available: install python3-venv as root" >&2
      exit 1
    fi
    sudo=(sudo)
  fi
  echo "== apt-get install python3 python3-venv"
  ${sudo[@]+"${sudo[@]}"} apt-get update -qq
  ${sudo[@]+"${sudo[@]}"} env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    python3 python3-venv >/dev/null
fi

have_zig=
if [ -x "$venv/bin/python3" ]; then
  have_zig=$("$venv/bin/python3" -m ziglang version 2>/dev/null || true)
fi
if [ "$have_zig" = "$zig_version" ]; then
  echo "== zig $zig_version already in $venv"
else
  echo "== zig $zig_version (PyPI wheel ziglang) into $venv"
  mkdir -p "$(dirname "$venv")"
  python3 -m venv --clear "$venv"
  req=$(mktemp)
  trap 'rm -f "$req"' EXIT
  printf 'ziglang==%s' "$zig_version" >"$req"
  printf ' --hash=sha256:%s' "${zig_wheel_sha256[@]}" >>"$req"
  echo >>"$req"
  # --require-hashes: pip refuses a wheel whose SHA-256 is not one of the pinned ones.
  if ! "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check --no-cache-dir \
    --only-binary :all: --require-hashes -r "$req"; then
    echo "installing zig $zig_version from PyPI failed (network, or no wheel with a pinned hash for $(uname -m))" >&2
    exit 1
  fi
  have_zig=$("$venv/bin/python3" -m ziglang version)
  if [ "$have_zig" != "$zig_version" ]; then
    echo "the installed zig reports version '$have_zig', expected $zig_version" >&2
    exit 1
  fi
fi

have_czb=$(cargo-zigbuild --version 2>/dev/null || true)
if [ "$have_czb" = "cargo-zigbuild $cargo_zigbuild_version" ]; then
  echo "== cargo-zigbuild $cargo_zigbuild_version already installed"
else
  echo "== cargo install cargo-zigbuild $cargo_zigbuild_version --locked"
  cargo install cargo-zigbuild --version "=$cargo_zigbuild_version" --locked ${install_args[@]+"${install_args[@]}"}
fi

echo "== rustup target add aarch64-unknown-linux-gnu"
rustup target add aarch64-unknown-linux-gnu

echo
echo "zig $zig_version: $venv/bin/python3 -m ziglang"
echo "ready: toolchain/bundle.sh --target aarch64-unknown-linux-gnu --glibc 2.31"
echo "(or: CARGO_ZIGBUILD_PYTHON_PATH=$venv/bin/python3 cargo zigbuild --target aarch64-unknown-linux-gnu.2.31)"
