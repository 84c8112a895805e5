#!/usr/bin/env bash
# Removes what scripts/install.sh wrote: the implicit manifest and the installed library.
# The pipeline store itself ($PIPEKEEP_DIR, default ~/.cache/pipekeep) is left; `pipekeep clear`
# removes it.
set -euo pipefail
data="${XDG_DATA_HOME:-$HOME/.local/share}"
rm -f "$data/vulkan/implicit_layer.d/VK_LAYER_PIPEKEEP_pipeline_store.json"
rm -f "$data/pipekeep/lib/libpipekeep.so"
rmdir "$data/pipekeep/lib" "$data/pipekeep" 2>/dev/null || true
echo "pipekeep uninstalled from $data"
