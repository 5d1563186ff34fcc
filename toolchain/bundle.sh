#!/usr/bin/env bash
# Build the workspace's test binaries and examples for one target and gather them into a folder that
# runs on a machine without a Rust toolchain (a Jetson, a DRIVE target, or an x86_64 GPU host).
#
# Usage (from anywhere inside the repository):
#   toolchain/bundle.sh [--target TRIPLE] [--glibc VERSION] [--out DIR] [-- CARGO ARGS...]
#
#   --target TRIPLE   target to build for (default: the host). aarch64-unknown-linux-gnu is
#                     cross-compiled with toolchain/cargo-aarch64.toml.
#   --glibc VERSION   link against glibc VERSION (e.g. 2.31 for JetPack 5 and DRIVE OS 6) instead
#                     of the C library installed for the target: builds with cargo-zigbuild, which
#                     links with zig for TRIPLE.VERSION (install both with toolchain/setup-zig.sh).
#                     Only for *-linux-gnu targets. Builds in the glibc-VERSION/ folder of the
#                     target directory, so that it does not rebuild what the default build built.
#   --out DIR         output folder (default: target/bundle-<target>, with --glibc
#                     target/bundle-<target>-glibc<VERSION>); replaced if it exists.
#   -- CARGO ARGS     passed to both cargo invocations, e.g. `-- --features vulkan` or
#                     `-- --release -p nvsci`. Without -p/--package the whole workspace is built.
#
# The folder holds:
#   tests/<package>[-<test>]   test harness binaries (stripped of debug info)
#   examples/<example>         example binaries (stripped of debug info)
#   lib/libnvsci_mock.so       the mock NvSci library, when the build produced it
#   run.sh                     runs every test binary and prints 'N passed, S skipped, F failed'
#                              (toolchain/run-tests.sh); see `run.sh --help`
#
# Copy the folder to the target (scp -r, rsync) and run `./run.sh` (or `./run.sh --gpu`) there.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)

usage() {
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
}

host=$(rustc -vV | sed -n 's/^host: //p')
target=$host
glibc=
out=
cargo_args=()
while [ $# -gt 0 ]; do
  case $1 in
    --target) target=${2:?--target needs a value}; shift 2 ;;
    --target=*) target=${1#--target=}; shift ;;
    --glibc) glibc=${2:?--glibc needs a value}; shift 2 ;;
    --glibc=*) glibc=${1#--glibc=}; shift ;;
    --out) out=${2:?--out needs a value}; shift 2 ;;
    --out=*) out=${1#--out=}; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; cargo_args=("$@"); break ;;
    *) echo "unknown argument: $1 (cargo arguments go after --)" >&2; usage >&2; exit 2 ;;
  esac
done
out=${out:-$root/target/bundle-$target${glibc:+-glibc$glibc}}
case $out in /*) ;; *) out=$PWD/$out ;; esac

# Cargo invocation for the target. The host build uses the default target directory layout so that
# it shares artifacts with ordinary `cargo test` runs.
cargo_cmd=(cargo)
target_args=()
if [ -n "$glibc" ]; then
  # cargo-zigbuild reads the glibc version from a suffix of the target triple and sets zig as the
  # linker, which links against the symbol versions of that glibc release. Its `test` and `build`
  # subcommands take cargo's arguments.
  if ! [[ $glibc =~ ^2\.[0-9]+$ ]]; then
    echo "--glibc needs a version like 2.31, not '$glibc'" >&2
    exit 2
  fi
  case $target in
    *-linux-gnu*) ;;
    *) echo "--glibc is only for *-linux-gnu targets, not $target" >&2; exit 2 ;;
  esac
  if ! command -v cargo-zigbuild >/dev/null; then
    echo "cargo-zigbuild not found (needed for --glibc): run toolchain/setup-zig.sh" >&2
    exit 1
  fi
  # The zig that toolchain/setup-zig.sh installed, unless cargo-zigbuild is told where zig is.
  if [ -z "${CARGO_ZIGBUILD_PYTHON_PATH:-}" ] && [ -z "${CARGO_ZIGBUILD_ZIG_PATH:-}" ]; then
    zig_venv=${NVSCI_ZIG_VENV:-${XDG_DATA_HOME:-$HOME/.local/share}/nvsci/zig-venv}
    if [ -x "$zig_venv/bin/python3" ]; then
      export CARGO_ZIGBUILD_PYTHON_PATH=$zig_venv/bin/python3
    fi
  fi
  # The same search as cargo-zigbuild's: `python3 -m ziglang` first, then `zig`.
  zig_version=$("${CARGO_ZIGBUILD_PYTHON_PATH:-python3}" -m ziglang version 2>/dev/null ||
    "${CARGO_ZIGBUILD_ZIG_PATH:-zig}" version 2>/dev/null || true)
  if [ -z "$zig_version" ]; then
    echo "zig not found (needed for --glibc): run toolchain/setup-zig.sh" >&2
    exit 1
  fi
  echo "linking with zig $zig_version ($(cargo-zigbuild --version)) for glibc $glibc" >&2
  cargo_cmd=(cargo-zigbuild)
  target_args=(--target "$target.$glibc")
  # zig as the linker changes every unit's fingerprint: a folder of its own keeps the default
  # build's artifacts.
  if ! tdir=$(cargo metadata --no-deps --format-version 1 --manifest-path "$root/Cargo.toml" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])' 2>/dev/null ||
    cargo metadata --no-deps --format-version 1 --manifest-path "$root/Cargo.toml" | jq -r .target_directory) ||
    [ -z "$tdir" ]; then
    echo "could not read the target directory from cargo metadata (python3 or jq is needed)" >&2
    exit 1
  fi
  export CARGO_TARGET_DIR=$tdir/glibc-$glibc
  case $target in
    "$host") strip_tool=strip ;;
    aarch64-unknown-linux-gnu) strip_tool=aarch64-linux-gnu-strip ;;
    *) strip_tool= ;;
  esac
elif [ "$target" = "$host" ]; then
  strip_tool=strip
else
  target_args=(--target "$target")
  case $target in
    aarch64-unknown-linux-gnu)
      cargo_cmd+=(--config "$here/cargo-aarch64.toml")
      strip_tool=aarch64-linux-gnu-strip
      ;;
    *) strip_tool= ;;
  esac
fi
if [ -n "$strip_tool" ] && ! command -v "$strip_tool" >/dev/null; then
  echo "note: $strip_tool not found; binaries are left unstripped" >&2
  strip_tool=
fi

selection=(--workspace)
for a in ${cargo_args[@]+"${cargo_args[@]}"}; do
  case $a in
    -p|--package|--package=*|-p?*|--workspace|--all) selection=() ;;
  esac
done

if command -v python3 >/dev/null; then
  parser=python3
elif command -v jq >/dev/null; then
  parser=jq
else
  echo "bundle.sh needs python3 or jq to read cargo's JSON output" >&2
  exit 1
fi

log=$(mktemp)
meta=$(mktemp)
trap 'rm -f "$log" "$meta"' EXIT

cd "$root"
export CARGO_PROFILE_DEV_DEBUG=${CARGO_PROFILE_DEV_DEBUG:-0}
echo "building test binaries and examples for $target${glibc:+ (glibc $glibc)} (${cargo_args[*]:-no extra cargo args})" >&2
"${cargo_cmd[@]}" test --no-run --message-format=json-render-diagnostics ${selection[@]+"${selection[@]}"} \
  ${target_args[@]+"${target_args[@]}"} ${cargo_args[@]+"${cargo_args[@]}"} >"$log"
"${cargo_cmd[@]}" build --examples --message-format=json-render-diagnostics ${selection[@]+"${selection[@]}"} \
  ${target_args[@]+"${target_args[@]}"} ${cargo_args[@]+"${cargo_args[@]}"} >>"$log"
cargo metadata --no-deps --format-version 1 >"$meta"

rm -rf "$out"
mkdir -p "$out/tests" "$out/examples" "$out/lib"

# Prints "kind<TAB>source<TAB>name" for every artifact to copy: kind is tests, examples or lib.
list_python() {
  python3 - "$log" "$meta" <<'EOF'
import json, os, sys

log, meta = sys.argv[1], sys.argv[2]
packages = {p["manifest_path"]: p["name"] for p in json.load(open(meta))["packages"]}
for line in open(log):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact":
        continue
    pkg = packages.get(m.get("manifest_path"), m["target"]["name"])
    kinds = m["target"]["kind"]
    exe = m.get("executable")
    if exe and m["profile"].get("test"):
        if set(kinds) & {"lib", "rlib", "cdylib", "dylib", "staticlib", "proc-macro"}:
            name = pkg
        else:
            name = pkg + "-" + m["target"]["name"]
        print("tests\t%s\t%s" % (exe, name))
    elif exe and "example" in kinds:
        print("examples\t%s\t%s" % (exe, m["target"]["name"]))
    elif not exe:
        for f in m.get("filenames", []):
            if os.path.basename(f) == "libnvsci_mock.so":
                print("lib\t%s\t%s" % (f, "libnvsci_mock.so"))
EOF
}

list_jq() {
  jq -r --slurpfile meta "$meta" '
    select(.reason == "compiler-artifact")
    | (.manifest_path as $mp | ($meta[0].packages | map(select(.manifest_path == $mp)) | .[0].name)) as $pkg
    | if (.executable != null) and .profile.test then
        "tests\t\(.executable)\t\(if (.target.kind | any(. == "lib" or . == "rlib" or . == "cdylib" or . == "dylib" or . == "staticlib" or . == "proc-macro")) then $pkg else "\($pkg)-\(.target.name)" end)"
      elif (.executable != null) and (.target.kind | index("example")) then
        "examples\t\(.executable)\t\(.target.name)"
      elif .executable == null then
        (.filenames[] | select(endswith("/libnvsci_mock.so")) | "lib\t\(.)\tlibnvsci_mock.so")
      else empty end' "$log"
}

copied=0
while IFS=$'\t' read -r kind src name; do
  dest="$out/$kind/$name"
  [ -e "$dest" ] && continue
  cp "$src" "$dest"
  chmod u+w "$dest"
  if [ -n "$strip_tool" ]; then
    "$strip_tool" --strip-debug "$dest"
  fi
  echo "$dest"
  copied=$((copied + 1))
done < <(if [ "$parser" = python3 ]; then list_python; else list_jq; fi)

# The mock cdylib sits next to the test binaries when it was built only as a dependency.
if [ ! -e "$out/lib/libnvsci_mock.so" ]; then
  tdir=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["target_directory"])' "$meta" 2>/dev/null ||
    jq -r .target_directory "$meta")
  triple_dir=$tdir
  [ ${#target_args[@]} -gt 0 ] && triple_dir=$tdir/$target
  for f in "$triple_dir"/debug/deps/libnvsci_mock.so "$triple_dir"/release/deps/libnvsci_mock.so; do
    if [ -f "$f" ]; then
      cp "$f" "$out/lib/"
      [ -n "$strip_tool" ] && "$strip_tool" --strip-debug "$out/lib/libnvsci_mock.so"
      echo "$out/lib/libnvsci_mock.so"
      break
    fi
  done
fi

if [ "$copied" -eq 0 ]; then
  echo "no test binaries or examples were built" >&2
  exit 1
fi

echo "$target${glibc:+ (glibc $glibc)}" >"$out/TARGET"

# The runner: every test binary, ignored (GPU) tests included, counted as passed, skipped and
# failed (`run.sh --help`).
cp "$here/run-tests.sh" "$out/run.sh"
chmod +x "$out/run.sh"
du -sh "$out" >&2
