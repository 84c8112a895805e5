#!/usr/bin/env bash
# Installs, idempotently, what the 32-bit layer is built and tested with on Debian bookworm
# (amd64), without rustup: the i386 architecture, Debian's Rust toolchain (`rustc-web`,
# `cargo-web` from bookworm-security) with the i686 standard library, the i686 cross linker, and
# for the tests the 32-bit Vulkan loader and Mesa 25's 32-bit drivers (RADV on null hardware)
# from bookworm-backports. Run scripts/setup.sh first (it adds bookworm-backports).
set -euo pipefail

have() { dpkg-query -W -f='${Status}\n' "$1" 2>/dev/null | grep -q '^install ok installed'; }
mesa_ok() { dpkg-query -W -f='${Version}' mesa-vulkan-drivers:i386 2>/dev/null | grep -q '^25\.'; }

# A mirror's i386 index may lag its amd64 one (seen here for a day: bookworm-security's i386
# index refused, "Mirror sync in progress?", while its amd64 one named rustc-web 1.96), and a
# multiarch package's i386 half must be its amd64 half's very version. For `pkg` (at `version`
# where given, else its amd64 candidate) and every package it depends on (each at its amd64
# candidate, which apt installs on both halves), an i386 version the indexes lack is fetched from
# the pool, where the amd64 record names its path and mirror. Prints what to hand
# `apt-get install` (which resolves the rest): `pkg:i386=version`, then the fetched files.
candidate() { apt-cache policy "$1" | awk '/Candidate:/ {print $2}'; }
i386_has() { apt-cache policy "$1:i386" | awk -v v="$2" '$1 == v || ($1 == "***" && $2 == v) {found = 1} END {exit !found}'; }
i386_as_amd64() {
  local todo=("$1") seen=" " out=() p v file mirror deb dir=/var/cache/pipekeep-i386
  mkdir -p "$dir"
  while [ ${#todo[@]} -gt 0 ]; do
    p=${todo[0]}; todo=("${todo[@]:1}")
    case "$seen" in *" $p "*) continue ;; esac
    seen+="$p "
    v=$(candidate "$p")
    [ "$p" = "$1" ] && [ -n "${2:-}" ] && v=$2
    { [ -z "$v" ] || [ "$v" = "(none)" ]; } && continue
    if apt-cache show "$p=$v" | grep -qx 'Architecture: all'; then
      : # one package for every architecture: nothing of its own to fetch
    elif i386_has "$p" "$v"; then
      [ "$p" = "$1" ] && out+=("$p:i386=$v")
    else
      file=$(apt-cache show "$p=$v" | awk '/^Filename:/ {print $2; exit}')
      mirror=$(apt-cache madison "$p" | awk -F' [|] ' -v v="$v" '$2 == v {split($3, u, " "); print u[1]; exit}')
      deb="$dir/$(basename "${file/_amd64.deb/_i386.deb}")"
      echo "setup-i386: $p:i386 $v taken from $mirror's pool (not in its i386 index)" >&2
      curl -fsS -o "$deb" "$mirror/${file/_amd64.deb/_i386.deb}" || return 1
      out+=("$deb")
    fi
    # Its dependencies by name (versions and alternatives left to apt): one whose indexes agree
    # may still depend on one whose do not.
    for d in $(apt-cache show "$p=$v" | awk '/^(Pre-)?Depends:/ {sub(/^[^:]*: /, ""); print}' | tr ',' '\n' | sed -E 's/[|].*//; s/\(.*//; s/:any//'); do
      todo+=("$d")
    done
  done
  printf '%s\n' "${out[@]}"
}

need=()
for p in rustc-web cargo-web gcc-i686-linux-gnu libc6-dev-i386-cross libvulkan1:i386; do
  have "$p" || need+=("$p")
done
if dpkg --print-foreign-architectures | grep -qx i386 && [ ${#need[@]} -eq 0 ] && have libstd-rust-web-dev:i386 && mesa_ok; then
  echo "setup-i386: all packages present"
else
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  dpkg --print-foreign-architectures | grep -qx i386 || $SUDO dpkg --add-architecture i386
  "$(dirname "$0")/apt-update.sh"
  # The 32-bit standard library must be the 64-bit compiler's very version (multiarch); where
  # the mirror's i386 index is behind its amd64 one, those packages come from the pool instead.
  [ ${#need[@]} -eq 0 ] || $SUDO apt-get install -y -q --no-install-recommends "${need[@]}"
  have libstd-rust-web-dev:i386 ||
    $SUDO apt-get install -y -q --no-install-recommends $(i386_as_amd64 libstd-rust-web-dev)
  # The 32-bit Mesa must be the 64-bit one's version (multiarch): both from backports.
  mesa_ok ||
    $SUDO apt-get install -y -q --no-install-recommends -t bookworm-backports \
      $(i386_as_amd64 mesa-vulkan-drivers "$(dpkg-query -W -f='${Version}' mesa-vulkan-drivers)")
fi
# bookworm's own rustc-web (1.85) is older than the crate's rust-version: the security suite's.
minor=$(/usr/bin/rustc --version | sed -E 's/^rustc 1\.([0-9]+).*/\1/')
if [ "${minor:-0}" -lt 89 ]; then
  echo "setup-i386: $(/usr/bin/rustc --version) is older than 1.89: add bookworm-security to apt's sources" >&2
  exit 1
fi
echo "setup-i386: $(/usr/bin/rustc --version), mesa-vulkan-drivers:i386 $(dpkg-query -W -f='${Version}' mesa-vulkan-drivers:i386)"
