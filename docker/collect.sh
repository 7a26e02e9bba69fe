#!/bin/bash
# Builds the programs the images ship and lays them out for the runtime stages (docker/Dockerfile):
#   collect.sh BUILD_DIR OUT_DIR JOBS
# OUT/appliance/{bin,lib}, OUT/worker/{bin,lib}: the files, as they go under /usr/local.
# OUT/appliance.packages, OUT/worker.packages: the Debian packages whose shared libraries those
# files need (ldd, then dpkg -S), one per line: the runtime stages install exactly these.
set -eu
source "$(dirname "${BASH_SOURCE[0]}")/../tools/lib/fail-loudly.sh"
[ $# = 3 ] || { echo "usage: collect.sh BUILD_DIR OUT_DIR JOBS" >&2; exit 2; }
build=$1 out=$2 jobs=$3

has_target() { cmake --build "$build" --target help | grep -q "^\.\.\. $1\$"; }
targets="sumcastd sumcastctl sumcast-allreduce sumcast"
for t in sumcast-pcapgen sumcast_mpi; do
  if has_target "$t"; then targets="$targets $t"; fi
done
echo "collect: building $targets"
# shellcheck disable=SC2086
cmake --build "$build" -j"$jobs" --target $targets

mkdir -p "$out/appliance/bin" "$out/worker/bin" "$out/worker/lib"
find_one() { find "$build" -name "$1" -type f -perm -u+x | head -n 1; }
cp "$(find_one sumcastd)" "$(find_one sumcastctl)" "$out/appliance/bin/"
cp "$(find_one sumcast-allreduce)" "$out/worker/bin/"
cp "$(find_one sumcastctl)" "$out/worker/bin/"
pcapgen=$(find_one sumcast-pcapgen)
[ -z "$pcapgen" ] || cp "$pcapgen" "$out/worker/bin/"
# Shared libraries with their SONAME links.
for lib in libsumcast.so libsumcast_mpi.so; do
  f=$(find "$build" -name "$lib*" -type f | head -n 1)
  [ -n "$f" ] || continue
  cp -P "$(dirname "$f")/$lib"* "$out/worker/lib/"
done
strip --strip-unneeded "$out"/appliance/bin/* "$out"/worker/bin/* "$out"/worker/lib/*.so* 2>/dev/null || true

# ldd -> file -> package. Libraries we ship ourselves (libsumcast) are not packages.
packages() {
  for f in "$@"; do
    LD_LIBRARY_PATH="$out/worker/lib" ldd "$f" | awk '/=> \// { print $3 }'
  done | sort -u | while read -r lib; do
    case "$lib" in "$out"/*) continue ;; esac
    real=$(readlink -f "$lib")
    dpkg -S "$lib" 2>/dev/null || dpkg -S "$real" 2>/dev/null || echo "collect: no package owns $lib" >&2
  done | cut -d: -f1 | sort -u
}
packages "$out"/appliance/bin/* >"$out/appliance.packages"
packages "$out"/worker/bin/* "$out"/worker/lib/*.so >"$out/worker.packages"
echo "collect: appliance needs $(wc -l <"$out/appliance.packages") package(s), worker $(wc -l <"$out/worker.packages")"
