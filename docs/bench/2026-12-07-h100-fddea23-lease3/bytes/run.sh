#!/usr/bin/env bash
# Probe: where an NVIDIA store's bytes go (pygfx, 16 threads, two launches, driver cache on, fresh).
set -u
for deb in .gl/*.deb; do dpkg -x "$deb" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json XDG_RUNTIME_DIR=/tmp/xdg
mkdir -p $XDG_RUNTIME_DIR /tmp/man
cat > /tmp/man/pk.json <<J
{"file_format_version":"1.2.0","layer":{"name":"VK_LAYER_PIPEKEEP_pipeline_store","type":"GLOBAL","library_path":"$PWD/.carry/bin/libpipekeep.so","api_version":"1.4.309","implementation_version":"1","description":"pipekeep","disable_environment":{"PIPEKEEP_DISABLE":"1"}}}
J
nvidia-smi --query-gpu=name,driver_version --format=csv
for wl in ${WLS:-pygfx-1008variants}; do
  rm -rf /tmp/pk /tmp/gl /tmp/gl0; mkdir -p /tmp/pk /tmp/gl /tmp/gl0
  for l in 1 2; do
    env __GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_PATH=/tmp/gl __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1 __GL_SHADER_DISK_CACHE_SIZE=10000000000 \
      PIPEKEEP_DIR=/tmp/pk VK_ADD_LAYER_PATH=/tmp/man VK_INSTANCE_LAYERS=VK_LAYER_PIPEKEEP_pipeline_store \
      .carry/bin/fossilize-replay --num-threads 16 .carry/corpus/$wl*.foz 2>&1 | grep -i "replayed" 
  done
  env __GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_PATH=/tmp/gl0 __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1 __GL_SHADER_DISK_CACHE_SIZE=10000000000 \
      .carry/bin/fossilize-replay --num-threads 16 .carry/corpus/$wl*.foz 2>&1 | grep -i "replayed"
  echo "== $wl store"; python3 .carry/probe/breakdown.py /tmp/pk
  echo "== driver cache beside the layer"; find /tmp/gl -type f -printf '%s %P\n' | sort -k2 | head -20
  echo "== driver cache, no layer"; find /tmp/gl0 -type f -printf '%s %P\n' | sort -k2 | head -20
  mkdir -p $OUT/$wl; cp -r /tmp/pk $OUT/$wl/store; cp -r /tmp/gl0 $OUT/$wl/glcache
done
