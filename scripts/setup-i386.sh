#!/usr/bin/env bash
# Installs, idempotently, what the 32-bit layer is built and tested with on Debian bookworm
# (amd64), without rustup: the i386 architecture, Debian's Rust toolchain (`rustc-web`,
# `cargo-web` from bookworm-security) with the i686 standard library, the i686 cross linker, and
# for the tests the 32-bit Vulkan loader and Mesa 25's 32-bit drivers (RADV on null hardware)
# from bookworm-backports. Run scripts/setup.sh first (it adds bookworm-backports).
set -euo pipefail

have() { dpkg-query -W -f='${Status}\n' "$1" 2>/dev/null | grep -q '^install ok installed'; }
mesa_ok() { dpkg-query -W -f='${Version}' mesa-vulkan-drivers:i386 2>/dev/null | grep -q '^25\.'; }

need=()
for p in rustc-web cargo-web libstd-rust-web-dev:i386 gcc-i686-linux-gnu libc6-dev-i386-cross libvulkan1:i386; do
  have "$p" || need+=("$p")
done
if dpkg --print-foreign-architectures | grep -qx i386 && [ ${#need[@]} -eq 0 ] && mesa_ok; then
  echo "setup-i386: all packages present"
else
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  dpkg --print-foreign-architectures | grep -qx i386 || $SUDO dpkg --add-architecture i386
  "$(dirname "$0")/apt-update.sh"
  [ ${#need[@]} -eq 0 ] || $SUDO apt-get install -y -q --no-install-recommends "${need[@]}"
  # The 32-bit Mesa must be the 64-bit one's version (multiarch): both from backports.
  mesa_ok || $SUDO apt-get install -y -q --no-install-recommends -t bookworm-backports mesa-vulkan-drivers:i386
fi
# bookworm's own rustc-web (1.85) is older than the crate's rust-version: the security suite's.
minor=$(/usr/bin/rustc --version | sed -E 's/^rustc 1\.([0-9]+).*/\1/')
if [ "${minor:-0}" -lt 89 ]; then
  echo "setup-i386: $(/usr/bin/rustc --version) is older than 1.89: add bookworm-security to apt's sources" >&2
  exit 1
fi
echo "setup-i386: $(/usr/bin/rustc --version), mesa-vulkan-drivers:i386 $(dpkg-query -W -f='${Version}' mesa-vulkan-drivers:i386)"
