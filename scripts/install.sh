#!/usr/bin/env bash
# Installs pipekeep as an implicit Vulkan layer for this user: on for every application, with no
# variable set (or, with --opt-in, only where PIPEKEEP=1). PIPEKEEP_DISABLE=1 always turns it off.
#
#   scripts/install.sh [--opt-in] [--library PATH]
#
# The release library is built and copied to $XDG_DATA_HOME/pipekeep/lib/ (a stable place a
# rebuild does not touch); the manifest goes to $XDG_DATA_HOME/vulkan/implicit_layer.d/ with an
# absolute library_path. XDG_DATA_HOME defaults to ~/.local/share. --library installs a library
# already built (tests use it to install into a temporary XDG_DATA_HOME).
set -euo pipefail

opt_in=0
library=""
while [ $# -gt 0 ]; do
  case "$1" in
    --opt-in) opt_in=1 ;;
    --library) library="$2"; shift ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
  esac
  shift
done

root="$(cd "$(dirname "$0")/.." && pwd)"
data="${XDG_DATA_HOME:-$HOME/.local/share}"
if [ -z "$library" ]; then
  (cd "$root" && cargo build --release --lib)
  library="$root/target/release/libpipekeep.so"
fi
[ -f "$library" ] || { echo "install.sh: no library at $library" >&2; exit 1; }

lib_dir="$data/pipekeep/lib"
manifest_dir="$data/vulkan/implicit_layer.d"
manifest="$manifest_dir/VK_LAYER_PIPEKEEP_pipeline_store.json"
mkdir -p "$lib_dir" "$manifest_dir"
# Copy then rename, so a running application never maps a half-written library.
install -m 0755 "$library" "$lib_dir/libpipekeep.so.new"
mv -f "$lib_dir/libpipekeep.so.new" "$lib_dir/libpipekeep.so"

# The build tree's manifest (the settings Vulkan Configurator shows included), with an absolute
# library_path and, opt-in, an enable_environment.
enable=()
if [ "$opt_in" -eq 1 ]; then
  enable=(-e '/"disable_environment"/i\        "enable_environment": { "PIPEKEEP": "1" },')
fi
sed -e "s|\"library_path\": \"[^\"]*\"|\"library_path\": \"$lib_dir/libpipekeep.so\"|" "${enable[@]}" \
  "$root/manifest/VK_LAYER_PIPEKEEP_pipeline_store.json" > "$manifest.new"
mv -f "$manifest.new" "$manifest"
if [ "$opt_in" -eq 1 ]; then
  echo "pipekeep installed (opt-in): run an application with PIPEKEEP=1 to use it"
else
  echo "pipekeep installed: on for every Vulkan application; PIPEKEEP_DISABLE=1 turns it off"
fi
echo "  manifest: $manifest"
echo "  library:  $lib_dir/libpipekeep.so"
