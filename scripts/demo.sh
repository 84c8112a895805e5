#!/usr/bin/env bash
# The demo: installs what is needed, builds pipekeep, and runs the layer-enabled test app twice
# through the real Vulkan loader on RADV (null hardware: a real compiler, no GPU needed), cold
# then warm, into a fresh store; prints the compile watch of each run and the time saved.
# Nothing is installed into your own XDG_DATA_HOME or cache: the store lives in a temporary folder.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
cargo build --release --locked --lib --bin pipekeep-testapp --bin pipekeep

work="$(mktemp -d /tmp/pipekeep-demo.XXXXXX)"
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$work/runtime}"
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
export RADV_FORCE_FAMILY=navi21 VK_DRIVER_FILES=/usr/share/vulkan/icd.d/radeon_icd.json
export MESA_SHADER_CACHE_DISABLE=true              # so Mesa's own disk cache cannot answer
export PIPEKEEP_DIR="$work/store"
export PIPEKEEP_LOG=info                           # the layer is quiet (warn) unless asked
export VK_ADD_LAYER_PATH="$PWD/manifest" VK_INSTANCE_LAYERS=VK_LAYER_PIPEKEEP_pipeline_store
app=(target/release/pipekeep-testapp --compute 200 --graphics 100 --threads 2 --batch 10)

run() {
  echo
  echo "== $1 run: ${app[*]}"
  # Written whole, then read: a pipe into `head` could end the writer early (SIGPIPE).
  "${app[@]}" 2> "$work/$1.log" > "$work/$1.out"
  sed -n 1p "$work/$1.out"
  grep -E 'store opened|compile watch' "$work/$1.log" | sed 's/^[^ ]* *//'
}
run cold
run warm

ms() { grep -o '"creation_ms":[0-9.]*' "$work/$1.out" | cut -d: -f2; }
cold_ms=$(ms cold) warm_ms=$(ms warm)
echo
awk -v c="$cold_ms" -v w="$warm_ms" 'BEGIN { printf "pipeline creation: cold %.1f ms, warm %.1f ms: %.1fx faster, %.1f ms saved\n", c, w, c / w, c - w }'
echo "the store: $PIPEKEEP_DIR"
target/release/pipekeep list
