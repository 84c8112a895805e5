#!/usr/bin/env bash
# Rebuilds the test app's SPIR-V from its GLSL (the .spv files are committed, so a build needs no
# shader compiler; run this after changing a shader).
set -euo pipefail
cd "$(dirname "$0")/../tests/app/shaders"
for s in compute.comp triangle.vert triangle.frag; do
  glslangValidator -V --target-env vulkan1.0 -o "$s.spv" "$s"
done
# The ray-tracing mode's shaders (SPIR-V 1.4 rules: Vulkan 1.2).
for s in raygen.rgen miss.rmiss hit.rchit; do
  glslangValidator -V --target-env vulkan1.2 -o "$s.spv" "$s"
done
