# three launches (cold, then two later) of pygfx at 2 threads for old and new, interleaved rounds
for round in 1 2 3 4; do for w in old new; do
  S=/tmp/kc/ab-$w; rm -rf $S /tmp/kc/mesa-$w
  for l in 1 2 3; do
    t0=$(date +%s%N)
    out=$(env XDG_CACHE_HOME=/tmp/kc/mesa-$w PIPEKEEP_DIR=$S PIPEKEEP_LOG=info VK_ADD_LAYER_PATH=/tmp/kc/$w VK_INSTANCE_LAYERS=VK_LAYER_PIPEKEEP_pipeline_store RADV_FORCE_FAMILY=navi21 VK_DRIVER_FILES=/usr/share/vulkan/icd.d/radeon_icd.json /tmp/fossilize/build/cli/fossilize-replay --num-threads 2 /work/shared/corpus/pygfx-1008variants.foz 2>&1)
    t1=$(date +%s%N)
    ready=$(echo "$out" | grep -o "Replayed [0-9]* objects in [0-9]* ms" | grep -o "in [0-9]*" | cut -d' ' -f2)
    endms=$(echo "$out" | grep -o "end_ms=[0-9.]*" | tail -1)
    ew=$(echo "$out" | grep -o "earlier_written=[0-9]*" | tail -1)
    echo "$round $w L$l ready=$ready wall=$(( (t1-t0)/1000000 )) $endms $ew"
  done
done; done
