#!/usr/bin/env bash
# Checks that ELF programs and shared objects need no glibc symbol version newer than a given one,
# i.e. that they start on a system with that glibc (2.31: JetPack 5, DRIVE OS 6).
#
#   toolchain/check-glibc.sh MAX_VERSION FILE_OR_FOLDER...
#
# For every ELF file named, or found in the folders named (other files are skipped), prints the
# newest GLIBC_x.y version it needs (the version references the dynamic linker checks at start)
# and, when that is newer than MAX_VERSION, the dynamic symbols that need the newer versions.
# Exits with status 1 when any file needs a newer version, 2 on a usage error.
#
# OBJDUMP names the objdump to use (default: aarch64-linux-gnu-objdump when installed, else
# objdump; Debian's objdump also reads aarch64 files).
set -euo pipefail

usage() {
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
}

case ${1:-} in
  -h | --help) usage; exit 0 ;;
esac
if [ $# -lt 2 ] || ! [[ $1 =~ ^2\.[0-9]+$ ]]; then
  usage >&2
  exit 2
fi
max=$1
shift

if [ -z "${OBJDUMP:-}" ]; then
  if command -v aarch64-linux-gnu-objdump >/dev/null; then
    OBJDUMP=aarch64-linux-gnu-objdump
  else
    OBJDUMP=objdump
  fi
fi
if ! command -v "$OBJDUMP" >/dev/null; then
  echo "$OBJDUMP not found (binutils)" >&2
  exit 1
fi

is_elf() {
  [ -f "$1" ] && [ "$(head -c 4 "$1" | od -An -c | tr -d ' ')" = '177ELF' ]
}

# True when version $1 is newer than version $2.
newer() {
  [ "$1" != "$2" ] && [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | tail -n 1)" = "$1" ]
}

files=()
for arg in "$@"; do
  if [ -d "$arg" ]; then
    while IFS= read -r -d '' f; do
      is_elf "$f" && files+=("$f")
    done < <(find "$arg" -type f -print0 | sort -z)
  elif is_elf "$arg"; then
    files+=("$arg")
  elif [ -e "$arg" ]; then
    echo "skipped (not an ELF file): $arg"
  else
    echo "not found: $arg" >&2
    exit 2
  fi
done
if [ ${#files[@]} -eq 0 ]; then
  echo "no ELF files found in: $*" >&2
  exit 2
fi

bad=0
for f in "${files[@]}"; do
  # "Version References" of `objdump -p`: the versions the dynamic linker requires.
  headers=""
  if ! headers=$("$OBJDUMP" -p "$f"); then
    echo "$f: $OBJDUMP could not read it" >&2
    bad=1
    continue
  fi
  newest=$(printf '%s\n' "$headers" | awk '/^Version References:/ { on = 1; next } on && /^[^ \t]/ { on = 0 } on' |
    grep -oE 'GLIBC_[0-9]+(\.[0-9]+)+' | sed 's/^GLIBC_//' | sort -Vu | tail -n 1 || true)
  if [ -z "$newest" ]; then
    if printf '%s\n' "$headers" | grep -qE 'NEEDED +libc\.so'; then
      echo "$f: links libc but lists no GLIBC version references" >&2
      bad=1
    else
      echo "$f: no GLIBC versions (static, or no glibc symbols)"
    fi
    continue
  fi
  if newer "$newest" "$max"; then
    echo "$f: needs GLIBC_$newest, newer than $max; symbols:"
    "$OBJDUMP" -T "$f" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\(?GLIBC_[0-9.]+\)?$/) { v = $i; gsub(/[()]/, "", v); print v, $NF } }' |
      sort -V -u | while read -r v sym; do
      if newer "${v#GLIBC_}" "$max"; then
        echo "    $v $sym"
      fi
    done
    bad=1
  else
    echo "$f: GLIBC_$newest"
  fi
done
if [ "$bad" -ne 0 ]; then
  echo "some files need a glibc newer than $max" >&2
  exit 1
fi
echo "none of the ${#files[@]} ELF files needs a glibc newer than $max"
