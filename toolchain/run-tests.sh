#!/usr/bin/env bash
# Runs the tests and reports what ran: 'N passed, S skipped, F failed'.
#
#   toolchain/run-tests.sh [--gpu] [--require LIST] [CARGO TEST ARGS...] [-- TEST ARGS...]
#       from the source tree: `cargo test` with the arguments given (e.g. `-j2 --workspace`)
#   toolchain/run-tests.sh --bundle DIR [--gpu] [--require LIST] [TEST ARGS...]
#   DIR/run.sh [--gpu] [--require LIST] [TEST ARGS...]
#       every test binary of a bundle (DIR/tests/*: toolchain/bundle.sh, which copies this script
#       into the bundle as run.sh, or the GPU host bundle's .gpu folder), ignored (GPU) tests
#       included; TEST ARGS (test name filters, --exact, --test-threads=1, ...) go to every binary
#
#   --gpu            a CUDA GPU is required (adds `gpu` to NVSCI_REQUIRE)
#   --require LIST   capabilities that are required: comma-separated, gpu, vulkan, nvsci, linux
#   --no-ignored     (bundles) leave the ignored tests out, where no GPU can run them
#
# A test that finds a capability it needs missing (tests/common/require.rs) records a skip in
# $NVSCI_SKIP_DIR/skipped, which this script sets; libtest counts such a test as passed, and the
# count printed here moves it from the passes to the skips. A capability that is required
# (NVSCI_REQUIRE, NVSCI_REQUIRE_GPU=1, ...) and missing fails the test instead. Only the summary
# lines of the test binaries themselves are counted (tests that start a second process of their
# binary mark that process's output as the child's).
#
# BUNDLE_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu" runs a bundle's binaries through an
# emulator (to try an aarch64 bundle on an x86_64 host); the tests that start a second process of
# themselves start it through the same runner (NVSCI_CHILD_RUNNER, unless already set).
#
# The exit status is non-zero when a test failed or a binary did not finish.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

usage() {
  sed -n '2,/^set -u/{/^set -u/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
}

bundle=
# A copy of this script at the top of a bundle runs that bundle.
[ -d "$here/tests" ] && [ ! -f "$here/../Cargo.toml" ] && bundle=$here
require=${NVSCI_REQUIRE:-}
args=()
ignored=(--include-ignored)
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --gpu) require=${require:+$require,}gpu; shift ;;
    --require) require=${require:+$require,}${2:?--require needs a list}; shift 2 ;;
    --require=*) require=${require:+$require,}${1#--require=}; shift ;;
    --no-ignored) ignored=(); shift ;;
    --bundle) bundle=$(cd "${2:?--bundle needs a folder}" && pwd) || exit 2; shift 2 ;;
    --bundle=*) bundle=$(cd "${1#--bundle=}" && pwd) || exit 2; shift ;;
    *) args=("$@"); break ;;
  esac
done
[ -n "$require" ] && export NVSCI_REQUIRE=$require

skips=$(mktemp -d)
trap 'rm -rf "$skips"' EXIT

# Sums the `test result:` lines of libtest output on stdin: prints "passed failed ignored".
count_results() {
  sed -n 's/^test result: .*\. \([0-9]*\) passed; \([0-9]*\) failed; \([0-9]*\) ignored.*/\1 \2 \3/p' |
    awk '{p += $1; f += $2; i += $3} END {print p + 0, f + 0, i + 0}'
}

# The tests recorded as skipped under folder $1, once each: "binary test reason".
skipped_tests() {
  [ -f "$1/skipped" ] || return 0
  sed -n 's/^SKIPPED //p' "$1/skipped" | sort -u -k1,2 | awk '!seen[$1 " " $2]++'
}

# Entry points that are not tests of their own (tests/common/require.rs `not_a_test`), recorded
# under folder $1 as NOTRUN, once each: counted as not run, not as passed.
not_tests() {
  [ -f "$1/skipped" ] || return 0
  sed -n 's/^NOTRUN //p' "$1/skipped" | sort -u -k1,2 | awk '!seen[$1 " " $2]++' | wc -l
}

passed=0
skipped=0
failed=0
not_run=0
bad=()

if [ -n "$bundle" ]; then
  # The Vulkan loader and the GL dispatch libraries that the NVIDIA Vulkan ICD needs, where the
  # bundle carries them (the GPU host bundle) and the host lacks them.
  if compgen -G "$bundle/deb/*.deb" >/dev/null &&
    { ! ldconfig -p 2>/dev/null | grep -q 'libGLdispatch.so.0 ' || ! ldconfig -p 2>/dev/null | grep -q 'libvulkan.so.1 '; }; then
    for f in "$bundle"/deb/*.deb; do dpkg -x "$f" / || echo "note: could not unpack $f" >&2; done
    ldconfig 2>/dev/null || true
  fi
  for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json; do
    if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$icd" ]; then export VK_DRIVER_FILES=$icd; fi
  done
  export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  runner=()
  if [ -n "${BUNDLE_RUNNER:-}" ]; then
    read -r -a runner <<<"$BUNDLE_RUNNER"
    export NVSCI_CHILD_RUNNER=${NVSCI_CHILD_RUNNER:-$BUNDLE_RUNNER}
  fi
  echo "bundle for $(cat "$bundle/TARGET" 2>/dev/null || echo '?') on $(uname -m); NVSCI_LIB_DIR=${NVSCI_LIB_DIR:-<unset>}"
  echo "required: ${NVSCI_REQUIRE:-nothing}${NVSCI_REQUIRE_GPU:+ (NVSCI_REQUIRE_GPU=$NVSCI_REQUIRE_GPU)}"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null

  for t in "$bundle"/tests/*; do
    [ -f "$t" ] && [ -x "$t" ] || continue
    name=$(basename "$t")
    echo "=== $name"
    mkdir -p "$skips/$name"
    res=$(NVSCI_SKIP_DIR=$skips/$name ${runner[@]+"${runner[@]}"} "$t" ${ignored[@]+"${ignored[@]}"} ${args[@]+"${args[@]}"} 2>&1)
    rc=$?
    printf '%s\n' "$res" | grep -E '^(test .* \.\.\. (FAILED|ignored)|failures:|---- |thread .* panicked)' | head -n 60
    read -r p f i < <(printf '%s\n' "$res" | count_results)
    not_run=$((not_run + i))
    s=$(skipped_tests "$skips/$name" | wc -l)
    n=$(not_tests "$skips/$name")
    not_run=$((not_run + n))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
      # Crashed or aborted before reporting: count the binary itself as a failure.
      printf '%s\n' "$res" | tail -n 20
      f=1
    fi
    p=$((p - s - n))
    [ "$p" -lt 0 ] && p=0
    passed=$((passed + p))
    skipped=$((skipped + s))
    failed=$((failed + f))
    if [ "$rc" -ne 0 ]; then
      bad+=("$name")
      echo "--- $name: FAILED ($p passed, $s skipped, $f failed, exit $rc)"
    else
      echo "--- $name: ok ($p passed, $s skipped)"
    fi
  done
  cat "$skips"/*/skipped 2>/dev/null >"$skips/skipped"
else
  cd "$here/.."
  log=$skips/log
  # cargo's own output and the tests' both shown as they come; counted afterwards.
  NVSCI_SKIP_DIR=$skips cargo test ${args[@]+"${args[@]}"} 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  read -r p f i < <(count_results <"$log")
  s=$(skipped_tests "$skips" | wc -l)
  n=$(not_tests "$skips")
  passed=$((p - s - n))
  [ "$passed" -lt 0 ] && passed=0
  skipped=$s
  failed=$f
  not_run=$((i + n))
  if [ "$rc" -ne 0 ]; then
    bad+=("cargo test (exit $rc)")
    [ "$failed" -eq 0 ] && failed=1
  fi
fi

if [ "$skipped" -gt 0 ]; then
  echo "skipped:"
  skipped_tests "$skips" | sed 's/^/  /'
fi
[ ${#bad[@]} -gt 0 ] && echo "failing: ${bad[*]}"
[ "$not_run" -gt 0 ] && echo "not run: $not_run (ignored GPU or host tests, run with --include-ignored where they can run; entry points of child processes)"
echo "$passed passed, $skipped skipped, $failed failed"
[ "$failed" -eq 0 ] && [ ${#bad[@]} -eq 0 ]
