#!/bin/bash
# The appliance container's entrypoint (docker/Dockerfile): checks what sumcastd needs before it
# starts it, and says plainly what is missing.
#   1. the configuration: $SUMCAST_CONFIG (default /etc/sumcast/agg.conf) exists and is valid
#      (sumcastd --check: syntax, ranges, cross-field checks, the token file);
#   2. hugepages, as its eal.huge_pages asks: "on" needs hugetlbfs mounted (e.g. -v /dev/hugepages:/dev/hugepages)
#      and eal.memory_mb free in it; "auto" goes on with a warning (sumcastd falls back to --no-huge);
#   3. the data port: a PCI device needs /dev/vfio or /dev/uio* (or a bifurcated driver such as mlx5
#      with /dev/infiniband); an af_packet/af_xdp vdev needs its interface in this network namespace.
# Then it execs sumcastd -c CONFIG -- "$@" (arguments are EAL arguments).
# Exit status: 64 no configuration, 65 invalid configuration, 66 hugepages missing, 67 port missing.
set -uo pipefail
# The tree's ERR trap (tools/lib/fail-loudly.sh): the image has it in /usr/local/lib/sumcast.
fail_loudly=$(dirname "${BASH_SOURCE[0]}")/../tools/lib/fail-loudly.sh
[ -r "$fail_loudly" ] || fail_loudly=/usr/local/lib/sumcast/fail-loudly.sh
# shellcheck source=../tools/lib/fail-loudly.sh
source "$fail_loudly"

config=${SUMCAST_CONFIG:-/etc/sumcast/agg.conf}
say() { printf 'sumcast-entrypoint: %s\n' "$*" >&2; }

if [ "${1:-}" = "sumcastctl" ] || [ "${1:-}" = "sumcastd" ] || [ "${1:-}" = "bash" ] || [ "${1:-}" = "sh" ]; then
  exec "$@"  # tools in a running appliance's image: podman exec/run ... sumcastctl stats
fi

if [ ! -e "$config" ]; then
  say "no configuration at $config."
  say "Mount yours: -v /path/to/agg.conf:$config:ro (and its control.token_file), or set SUMCAST_CONFIG."
  say "A commented example is in the image: /usr/local/share/sumcast/agg.conf.example (docs/agg.conf.md)."
  exit 64
fi
if ! check=$(sumcastd -c "$config" --check 2>&1); then
  say "invalid configuration: $check"
  exit 65
fi
summary=$(sumcastctl check --json "$config" 2>&1) || { say "$summary"; exit 65; }
field() { printf '%s\n' "$summary" | sed -n "s/^ *\"$1\": *\"\{0,1\}\([^\",]*\)\"\{0,1\},\{0,1\}\$/\1/p" | head -n 1; }
huge=$(field huge_pages)
memory_mb=$(field memory_mb)
device=$(field device)

# Hugepages: mounted hugetlbfs and enough free 2 MiB / 1 GiB pages.
huge_mounted=no
grep -qs ' hugetlbfs ' /proc/mounts && huge_mounted=yes
free_mb=0
for d in /sys/kernel/mm/hugepages/hugepages-*kB; do
  [ -r "$d/free_hugepages" ] || continue
  kb=${d##*hugepages-}; kb=${kb%kB}
  free_mb=$((free_mb + $(cat "$d/free_hugepages") * kb / 1024))
done
case "$huge" in
  on)
    if [ "$huge_mounted" = no ]; then
      say "eal.huge_pages = \"on\" but no hugetlbfs is mounted in the container."
      say "Reserve pages on the host (echo 1024 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages),"
      say "mount hugetlbfs there, and pass -v /dev/hugepages:/dev/hugepages (Kubernetes: a hugepages-2Mi limit)."
      exit 66
    fi
    if [ "$free_mb" -lt "${memory_mb:-0}" ]; then
      say "eal.huge_pages = \"on\" and eal.memory_mb = $memory_mb, but only $free_mb MiB of hugepages are free."
      say "Reserve more on the host or lower eal.memory_mb."
      exit 66
    fi
    ;;
  auto)
    if [ "$huge_mounted" = no ] || [ "$free_mb" -lt "${memory_mb:-0}" ]; then
      say "warning: hugepages not usable here (mounted: $huge_mounted, free: $free_mb MiB, wanted: ${memory_mb} MiB):"
      say "sumcastd will run with --no-huge (correct, about 3x slower). Pass -v /dev/hugepages:/dev/hugepages for speed."
    fi
    ;;
esac

# The data port.
if [[ "$device" =~ ^([0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$ ]]; then
  if [ ! -e /dev/vfio/vfio ] && ! ls /dev/uio* >/dev/null 2>&1 && [ ! -d /dev/infiniband ]; then
    say "port.device $device is a PCI device, but neither /dev/vfio, /dev/uio* nor /dev/infiniband is in the container."
    say "Bind the NIC (or its SR-IOV VF) to vfio-pci and pass --device /dev/vfio/vfio --device /dev/vfio/<group>,"
    say "or, for mlx5, pass --device /dev/infiniband (see docs/deployment.md)."
    exit 67
  fi
else
  iface=$(printf '%s\n' "$summary" | sed -n 's/.*iface=\([^,"]*\).*/\1/p' | head -n 1)
  if [ -n "$iface" ] && [ ! -e "/sys/class/net/$iface" ]; then
    say "eal.vdevs names interface $iface, which this container does not have (ip link shows: $(ls /sys/class/net | tr '\n' ' '))."
    say "Run with --network host, or move the interface (or an SR-IOV VF) into the container's namespace."
    exit 67
  fi
fi

say "configuration $config OK (huge_pages $huge, memory ${memory_mb} MiB, port $device); starting sumcastd"
exec sumcastd -c "$config" -- "$@"
