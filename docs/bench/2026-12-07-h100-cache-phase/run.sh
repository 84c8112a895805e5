set -u
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json XDG_RUNTIME_DIR=/tmp/xdg; mkdir -p /tmp/xdg
nvidia-smi --query-gpu=name,driver_version --format=csv
one() { # name threads db diskcache
  d=/tmp/run-$1; rm -rf $d; mkdir -p $d/driver
  if [ $4 = on ]; then dc="__GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_PATH=$d/driver __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1 __GL_SHADER_DISK_CACHE_SIZE=10000000000"; else dc="__GL_SHADER_DISK_CACHE=0"; fi
  s=$(date +%s%N); env $dc PIPEKEEP_DIR=$d/store VK_ADD_LAYER_PATH=.carry/inst VK_INSTANCE_LAYERS=VK_LAYER_PIPEKEEP_pipeline_store PIPEKEEP_LOG=info .carry/bin/fossilize-replay --num-threads $2 .carry/corpus/$3 > $d/log 2>&1; echo "wall $(( ($(date +%s%N) - s) / 1000000 )) ms" >> $d/log
  echo "== $1 ($2 threads, disk cache $4)"; grep -E "INST|Replayed|built=" $d/log | sed -e 's/shaders=0.*//' -e 's/^.*INFO //' | cut -c1-420; grep wall $d/log
  mkdir -p /tmp/logs; cp $d/log /tmp/logs/$1.log; (cd /tmp && tar czf $OUT/logs.tgz logs)
}
for i in 1 2 3 4; do one pygfx16-$i 16 pygfx-1008variants.foz on; done
one pygfx16-off-1 16 pygfx-1008variants.foz off
one pygfx16-off-2 16 pygfx-1008variants.foz off
one pygfx4 4 pygfx-1008variants.foz on
one pygfx1 1 pygfx-1008variants.foz on
one ncnn16 16 ncnn-35nets-sg32.foz on
