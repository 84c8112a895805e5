#!/usr/bin/env bash
# Shader objects on NVIDIA, cold, warm and rebuilt: the test app's --shader-objects N, the driver's
# disk cache on (fresh a mode and round). No layer: three launches. pipekeep: a cold launch, a warm
# one, then a driver update as the user meets it (the store's identity directories and the
# driver's disk cache emptied), `pipekeep rebuild` from the record (timed), and the launch after.
# Usage: so-rebuilt.sh BIN N ROUNDS
set -u
BIN=$1 N=$2 ROUNDS=$3
W=$(mktemp -d)
mkdir -p $W/pk
cat > $W/pk/pipekeep.json <<J
{"file_format_version":"1.2.0","layer":{"name":"VK_LAYER_PIPEKEEP_pipeline_store","type":"GLOBAL","library_path":"$(realpath $BIN)/libpipekeep.so","api_version":"1.3.0","implementation_version":"1","description":"pipekeep","disable_environment":{"PIPEKEEP_DISABLE":"1"}}}
J
export XDG_RUNTIME_DIR=$W/rt; mkdir -p $XDG_RUNTIME_DIR; chmod 700 $XDG_RUNTIME_DIR
export __GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1
app() { $BIN/pipekeep-testapp --compute 0 --graphics 0 --shader-objects $N --threads 1 2>&1; }
say() { # mode launch output
  local so; so=$(echo "$3" | grep -oE '"shader_objects":\{[^}]*\}')
  local w; w=$(echo "$3" | grep -oE "shaders_from_entries=[0-9]+ shaders_compiled=[0-9]+ shaders_unkeyed=[0-9]+" | tail -1)
  echo "$1 launch=$2 $so $w"
}
for round in $(seq 1 $ROUNDS); do
  D=$W/$round-none; mkdir -p $D/gl; export __GL_SHADER_DISK_CACHE_PATH=$D/gl
  for launch in 1 2 3; do say none $launch "$(app)"; done
  D=$W/$round-pipekeep; mkdir -p $D/gl; export __GL_SHADER_DISK_CACHE_PATH=$D/gl
  export VK_ADD_LAYER_PATH=$W/pk VK_INSTANCE_LAYERS=VK_LAYER_PIPEKEEP_pipeline_store PIPEKEEP_DIR=$D/store PIPEKEEP_LOG=info
  say pipekeep 1 "$(app)"
  say pipekeep 2 "$(app)"
  rm -rf $D/store/*/host-pipelines $D/gl/*
  start=$EPOCHREALTIME
  r=$($BIN/pipekeep rebuild --json 2>&1 | tail -1)
  echo "pipekeep rebuild took_s=$(python3 -c "print(round($EPOCHREALTIME - $start, 3))") $r"
  say pipekeep "3-rebuilt" "$(app)"
  unset VK_ADD_LAYER_PATH VK_INSTANCE_LAYERS PIPEKEEP_DIR PIPEKEEP_LOG
  du -sk $D/gl $D/store | tr '\n' ' '; echo
done
