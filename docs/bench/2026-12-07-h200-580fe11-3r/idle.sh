#!/usr/bin/env bash
# On NVIDIA: the layer's threads' wakes over 3 s of an idle application (the test app lingering), and pygfx found.
set -u
for deb in .gl/*.deb; do dpkg -x "$deb" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json XDG_RUNTIME_DIR=/tmp/xdg
mkdir -p $XDG_RUNTIME_DIR /tmp/man
for v in head:.carry/head bin:.carry/bin; do mkdir -p /tmp/man-${v%%:*}
cat > /tmp/man-${v%%:*}/pk.json <<J
{"file_format_version":"1.2.0","layer":{"name":"VK_LAYER_PIPEKEEP_pipeline_store","type":"GLOBAL","library_path":"$PWD/${v#*:}/libpipekeep.so","api_version":"1.4.309","implementation_version":"1","description":"pipekeep","disable_environment":{"PIPEKEEP_DISABLE":"1"}}}
J
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat .carry/COMMIT
export VK_INSTANCE_LAYERS=VK_LAYER_PIPEKEEP_pipeline_store __GL_SHADER_DISK_CACHE=0 PIPEKEEP_LOG=info
snap() { for t in /proc/$1/task/*; do echo "$(cat $t/comm | tr ' ' _) $(grep voluntary_ctxt_switches: $t/status | awk '{print $2}')"; done | sort; }
app=.carry/bin/pipekeep-testapp
for build in head bin; do echo "== $build"; export PIPEKEEP_DIR=/tmp/pk-$build VK_ADD_LAYER_PATH=/tmp/man-$build
$app --compute 40 --graphics 10 --threads 1 2>&1 | grep "compile watch" | tail -1 | grep -oE "found=[0-9]+ compiled=[0-9]+"
for what in "none:--compute 0 --graphics 0" "found:--compute 40 --graphics 10"; do
  $app ${what#*:} --threads 1 --linger-ms 6000 > /tmp/app.log 2>&1 & pid=$!
  sleep 2; a=$(snap $pid); sleep 3; b=$(snap $pid); wait $pid
  echo "${what%%:*}: $(join <(echo "$a") <(echo "$b") | awk '{printf "%s +%d; ", $1, $3-$2}')"
  grep "compile watch" /tmp/app.log | tail -1 | grep -oE "found=[0-9]+ compiled=[0-9]+"
done; done
export VK_ADD_LAYER_PATH=/tmp/man-bin; rm -rf /tmp/pk2
for l in 1 2; do PIPEKEEP_DIR=/tmp/pk2 .carry/bin/fossilize-replay --num-threads 16 .carry/corpus/pygfx*.foz 2>&1 | grep -E "Replayed"; done
PIPEKEEP_DIR=/tmp/pk2 .carry/bin/pipekeep verify 2>&1 | tail -2
