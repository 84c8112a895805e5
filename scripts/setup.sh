#!/usr/bin/env bash
# Installs every system package pipekeep needs on a fresh Debian bookworm machine, idempotently:
# Mesa 25 from bookworm-backports (RADV, run on null hardware, and lavapipe), the Vulkan loader and
# headers, the Khronos validation layers, vulkaninfo and glslang (to rebuild the test shaders),
# man-db (the package test reads the package's man page), python3 (the import-circle check), and
# for tests/zink.rs a C compiler, the EGL and GL ES headers and Mesa's own GL drivers (zink) from
# the same backports release as its Vulkan drivers.
set -euo pipefail

need=()
have() { dpkg-query -W -f='${Status} ${Version}\n' "$1" 2>/dev/null | grep -q '^install ok installed'; }

# man-db: scripts/package-test.sh reads the package's man page through `man`.
for p in libvulkan1 libvulkan-dev vulkan-validationlayers vulkan-tools glslang-tools man-db; do
  have "$p" || need+=("$p")
done
command -v python3 >/dev/null || need+=(python3)
for p in libegl-dev libgles-dev; do
  have "$p" || need+=("$p")
done
command -v cc >/dev/null || need+=(gcc libc6-dev)
# Mesa's packages of one release: the Vulkan drivers, and zink with the EGL it loads through.
mesa_packages=(mesa-vulkan-drivers libgl1-mesa-dri libegl-mesa0)
mesa_ok() {
  local p
  for p in "${mesa_packages[@]}"; do
    dpkg-query -W -f='${Version}' "$p" 2>/dev/null | grep -q '^25\.' || return 1
  done
}

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
"$(dirname "$0")/apt-update.sh"
[ ${#need[@]} -eq 0 ] || $SUDO apt-get install -y -q --no-install-recommends "${need[@]}"
mesa_ok || $SUDO apt-get install -y -q --no-install-recommends -t bookworm-backports "${mesa_packages[@]}"
echo "setup: mesa-vulkan-drivers $(dpkg-query -W -f='${Version}' mesa-vulkan-drivers)"
