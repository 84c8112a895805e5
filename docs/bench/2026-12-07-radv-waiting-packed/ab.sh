#!/bin/bash
# A/B of later launches: new (/tmp/st) and head (/tmp/st2), ncnn at 2 threads, RADV null.
R=/tmp/fossilize/build/cli/fossilize-replay
W=${W:-/work/shared/corpus/ncnn-35nets-sg32.foz}
run() { # dir
  ( . $1/env.sh; s=$(date +%s%N); PIPEKEEP_LOG=debug $R --num-threads 2 $W > $1/log 2>&1; e=$(date +%s%N)
    ready=$(grep -o 'Replayed [0-9]* objects in [0-9]* ms' $1/log | awk '{print $5}')
    take=$(grep -o 'left waiting taken entries=[0-9]* bytes=[0-9]* took_ms=[0-9.]*' $1/log | sed 's/left waiting taken //')
    leave=$(grep -o 'left_waiting=[0-9]*\|leave_ms=[0-9.]*\|took_ms=[0-9.]*$' $1/log | tr '\n' ' ')
    size=$(du -sb $1/pk/*/host-pipelines | awk '{print $1}')
    echo "$(basename $1) ready=$ready proc_ms=$(( (e-s)/1000000 )) store=$size take[$take] end[$leave]" )
}
for d in /tmp/st /tmp/st2; do rm -rf $d/pk $d/mesa; run $d; done
for i in $(seq 1 ${N:-5}); do run /tmp/st; run /tmp/st2; done
