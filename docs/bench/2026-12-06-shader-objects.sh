#!/usr/bin/env bash
# Shader objects on NVIDIA: the test app's --shader-objects N, no layer and through pipekeep, three
# launches in a row, the driver's disk cache on (fresh a mode) and off. Usage: so.sh BIN N OUT
set -u
BIN=$1 N=$2 OUT=$3
W=$(mktemp -d)
cat > $W/pipekeep.json <<J
{"file_format_version":"1.2.0","layer":{"name":"VK_LAYER_PIPEKEEP_pipeline_store","type":"GLOBAL","library_path":"$(realpath $BIN)/libpipekeep.so","api_version":"1.3.0","implementation_version":"1","description":"pipekeep","disable_environment":{"PIPEKEEP_DISABLE":"1"}}}
J
mkdir -p $W/pk; cp $W/pipekeep.json $W/pk/
export XDG_RUNTIME_DIR=$W/rt; mkdir -p $XDG_RUNTIME_DIR; chmod 700 $XDG_RUNTIME_DIR
run() { # mode cache launch
  local out; out=$($BIN/pipekeep-testapp --compute 0 --graphics 0 --shader-objects $N --threads 1 2>&1)
  local so; so=$(echo "$out" | grep -oE '"shader_objects":\{[^}]*\}')
  local w; w=$(echo "$out" | grep -oE "shaders_from_entries=[0-9]+ shaders_compiled=[0-9]+ shaders_unkeyed=[0-9]+" | tail -1)
  echo "$1 disk-cache=$2 launch=$3 $so $w"
}
for cache in on off; do
  for round in 1 2; do
    for mode in none pipekeep; do
      D=$W/$cache-$round-$mode; mkdir -p $D/glcache
      for launch in 1 2 3; do
        if [ $cache = on ]; then export __GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_PATH=$D/glcache __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1; else export __GL_SHADER_DISK_CACHE=0; fi
        if [ $mode = pipekeep ]; then VK_ADD_LAYER_PATH=$W/pk VK_INSTANCE_LAYERS=VK_LAYER_PIPEKEEP_pipeline_store PIPEKEEP_DIR=$D/store PIPEKEEP_LOG=info run $mode $cache $launch; else run $mode $cache $launch; fi
      done
      du -sk $D/glcache $D/store 2>/dev/null | tr '\n' ' '; echo
    done
  done
done
