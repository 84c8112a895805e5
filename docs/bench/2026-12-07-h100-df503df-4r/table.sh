# The table on the lent NVIDIA machine: rounds $1..$2 of five configurations, interleaved.
set -u
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export XDG_RUNTIME_DIR=/tmp/xdg; mkdir -p $XDG_RUNTIME_DIR
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/gpu.txt; cat /tmp/gpu.txt
mkdir -p /tmp/res; cp /tmp/gpu.txt /tmp/res/
start=$(date +%s)
for r in $(seq $1 $2); do
 for cfg in ${CONFIGS:-pygfx:16 pygfx:4 pygfx:1 ncnn:16 ncnn:4}; do
   wl=${cfg%%:*}; th=${cfg##*:}
   extra=""; { [ $wl = ncnn ] || [ $th = 16 ]; } && extra="--driver-floor"
   rm -rf /tmp/o
   python3 scripts/bench.py --driver nvidia --bin-dir .carry/bin --corpus .carry/corpus --out /tmp/o --runs-in-a-row --replayer .carry/bin/fossilize-replay --no-own-replay --every-extension --workloads $wl --threads $th --rounds 1 $extra > /tmp/res/$wl$th-r$r.log 2>&1
   cp /tmp/o/nvidia-users.json /tmp/res/$wl$th-r$r.json
   echo "round $r $wl $th done at $(( $(date +%s) - start )) s"
   (cd /tmp && tar czf $OUT/res.tgz res)
 done
done
