#!/usr/bin/env bash
# Issue 58's table on the lent NVIDIA machine: rounds $1..$2 of each configuration, interleaved
# (one round runs every configuration once), through scripts/bench.py with Valve's replayer.
#
# Run in the repository root there, through the `device` tool, carrying two ignored folders:
#   .gl/     the Debian debs of the Vulkan loader and glvnd that NVIDIA's ICD needs (libvulkan1,
#            libglvnd0, libglx0, libegl1, libgl1, libgles2, libopengl0), `apt-get download`ed here;
#   .carry/  bin/ (stripped release libpipekeep.so, pipekeep, pipekeep-testapp, and
#            fossilize-replay from shared/tools/fossilize/build.sh) and corpus/ (the .foz files).
# CONFIGS: workload:threads, each a round (default below); FLOOR: those that also run the
# driver's own keeping cost (no layer, a cache a pipeline: bench.py --driver-floor); OWN: those that
# also run `pipekeep replay` with no layer, so that its wall beside the cache-a-pipeline mode (the same
# tool; name the configuration in FLOOR too) gives the driver's own floor of a later launch's time to ready.
# Results go to $OUT/res.tgz after each configuration: a call cut short keeps what it finished.
set -u
for deb in .gl/*.deb; do dpkg -x "$deb" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export XDG_RUNTIME_DIR=/tmp/xdg
mkdir -p "$XDG_RUNTIME_DIR" /tmp/res
nvidia-smi --query-gpu=name,driver_version --format=csv | tee /tmp/res/gpu.txt
start=$(date +%s)
for r in $(seq "$1" "$2"); do
  for cfg in ${CONFIGS:-pygfx:16 pygfx:4 pygfx:1 ncnn:16 ncnn:4}; do
    wl=${cfg%%:*} th=${cfg##*:} floor="" own=--no-own-replay
    case " ${FLOOR:-ncnn:16 ncnn:4 pygfx:16} " in *" $cfg "*) floor=--driver-floor ;; esac
    case " ${OWN:-} " in *" $cfg "*) own="" ;; esac
    rm -rf /tmp/o
    python3 scripts/bench.py --driver nvidia --bin-dir .carry/bin --corpus .carry/corpus --out /tmp/o \
      --runs-in-a-row --replayer .carry/bin/fossilize-replay $own --every-extension \
      --workloads "$wl" --threads "$th" --rounds 1 $floor > "/tmp/res/$wl$th-r$r.log" 2>&1
    cp /tmp/o/nvidia-users.json "/tmp/res/$wl$th-r$r.json"
    echo "round $r $wl $th done at $(( $(date +%s) - start )) s"
    (cd /tmp && tar czf "$OUT/res.tgz" res)
  done
done
