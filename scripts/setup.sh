#!/usr/bin/env bash
# Installs every system package pipekeep needs on a fresh Debian bookworm machine, idempotently:
# Mesa 25 from bookworm-backports (RADV, run on null hardware, and lavapipe), the Vulkan loader and
# headers, the Khronos validation layers, vulkaninfo and glslang (to rebuild the test shaders),
# man-db (the package test reads the package's man page) and python3 (the import-circle check).
set -euo pipefail

need=()
have() { dpkg-query -W -f='${Status} ${Version}\n' "$1" 2>/dev/null | grep -q '^install ok installed'; }
mesa_ok() { dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null | grep -q '^25\.'; }

# man-db: scripts/package-test.sh reads the package's man page through `man`.
for p in libvulkan1 libvulkan-dev vulkan-validationlayers vulkan-tools glslang-tools man-db; do
  have "$p" || need+=("$p")
done
command -v python3 >/dev/null || need+=(python3)

if [ ${#need[@]} -eq 0 ] && mesa_ok; then
  echo "setup: all packages present"
  exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive

# The mirror this machine already uses for bookworm itself (a one-line `sources.list` entry or a
# deb822 `.sources` stanza), so that the backports suite comes from wherever its main suite does.
debian_mirror() {
  local line
  line=$(grep -hsE '^[[:space:]]*deb[[:space:]]+(\[[^]]*\][[:space:]]+)?[a-z]+://[^[:space:]]+[[:space:]]+bookworm[[:space:]]' \
    /etc/apt/sources.list /etc/apt/sources.list.d/*.list | head -n1 || true)
  if [ -n "$line" ]; then
    echo "$line" | sed -E 's/^[[:space:]]*deb[[:space:]]+(\[[^]]*\][[:space:]]+)?//' | awk '{print $1}'
    return
  fi
  # deb822: the URIs of the first stanza whose Suites name bookworm.
  awk 'BEGIN { RS = ""; FS = "\n" }
       /(^|\n)Suites:[^\n]*(^|[[:space:]])bookworm([[:space:]]|$)/ {
         for (i = 1; i <= NF; i++) if ($i ~ /^URIs:/) { sub(/^URIs:[[:space:]]*/, "", $i); split($i, u, " "); print u[1]; exit }
       }' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1
}

if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  mirror=$(debian_mirror)
  if [ -z "$mirror" ]; then
    echo "setup: no bookworm entry in this machine's apt sources to take a mirror from" >&2
    exit 1
  fi
  echo "setup: adding bookworm-backports from $mirror"
  echo "deb $mirror bookworm-backports main" | $SUDO tee /etc/apt/sources.list.d/pipekeep-backports.list >/dev/null
fi
$SUDO apt-get update -q
[ ${#need[@]} -eq 0 ] || $SUDO apt-get install -y -q --no-install-recommends "${need[@]}"
mesa_ok || $SUDO apt-get install -y -q --no-install-recommends -t bookworm-backports mesa-vulkan-drivers
echo "setup: mesa-vulkan-drivers $(dpkg-query -W -f='${Version}' mesa-vulkan-drivers)"
