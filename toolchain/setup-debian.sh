#!/usr/bin/env bash
# Prepares a Debian or Ubuntu x86_64 host to cross-compile this workspace for aarch64 Linux
# (Jetson, DRIVE OS) and to run the aarch64 tests under qemu-user. Safe to run again.
#
#   toolchain/setup-debian.sh [--zig]
#
# Installs:
#   rustup target aarch64-unknown-linux-gnu
#   gcc-aarch64-linux-gnu, libc6-dev-arm64-cross   cross linker and the aarch64 C library
#   qemu-user                                       qemu-aarch64, the cargo runner for tests
#   libclang-dev                                    for the `bindgen` feature of nvsci-sys
# With --zig, then runs toolchain/setup-zig.sh: the pinned zig and cargo-zigbuild, which build for
# an older glibc than Debian's (toolchain/bundle.sh --glibc 2.31, for JetPack 5 and DRIVE OS 6).
# Uses sudo for apt-get when not run as root.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
zig=
for arg in "$@"; do
  case $arg in
    --zig) zig=1 ;;
    -h | --help)
      sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
      exit 0
      ;;
    *)
      echo "unknown argument: $arg (see --help)" >&2
      exit 2
      ;;
  esac
done

packages=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user libclang-dev)

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null; then
    echo "not root and sudo is not available: install ${packages[*]} as root" >&2
    exit 1
  fi
  sudo=(sudo)
fi

if ! command -v apt-get >/dev/null; then
  echo "apt-get not found: this script is for Debian and Ubuntu hosts" >&2
  exit 1
fi

echo "== apt-get update"
"${sudo[@]}" apt-get update
echo "== apt-get install ${packages[*]}"
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${packages[@]}"

echo "== rustup target add aarch64-unknown-linux-gnu"
if ! command -v rustup >/dev/null; then
  echo "rustup not found: install Rust from https://rustup.rs, then run this script again" >&2
  exit 1
fi
rustup target add aarch64-unknown-linux-gnu

if [ -n "$zig" ]; then
  "$here/setup-zig.sh"
fi

echo
echo "ready: cargo --config toolchain/cargo-aarch64.toml test --target aarch64-unknown-linux-gnu"
