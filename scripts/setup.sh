#!/usr/bin/env bash
# Installs every system package pipekeep needs on a fresh Debian bookworm machine, idempotently:
# Mesa 25 from bookworm-backports (RADV, run on null hardware, and lavapipe), the Vulkan loader and
# headers, the Khronos validation layers, vulkaninfo and glslang (to rebuild the test shaders).
set -euo pipefail

need=()
have() { dpkg-query -W -f='${Status} ${Version}\n' "$1" 2>/dev/null | grep -q '^install ok installed'; }
mesa_ok() { dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null | grep -q '^25\.'; }

for p in libvulkan1 libvulkan-dev vulkan-validationlayers vulkan-tools glslang-tools; do
  have "$p" || need+=("$p")
done

if [ ${#need[@]} -eq 0 ] && mesa_ok; then
  echo "setup: all packages present"
  exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive

if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  echo "deb http://deb.debian.org/debian bookworm-backports main" | $SUDO tee /etc/apt/sources.list.d/pipekeep-backports.list >/dev/null
fi
$SUDO apt-get update -q
[ ${#need[@]} -eq 0 ] || $SUDO apt-get install -y -q --no-install-recommends "${need[@]}"
mesa_ok || $SUDO apt-get install -y -q --no-install-recommends -t bookworm-backports mesa-vulkan-drivers
echo "setup: mesa-vulkan-drivers $(dpkg-query -W -f='${Version}' mesa-vulkan-drivers)"
