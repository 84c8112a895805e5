#!/usr/bin/env bash
# Issue 61 by hand: the game = `pipekeep replay DB` without the layer, recorded by Fossilize's layer;
# that recording precompiled through pipekeep by Valve's replayer and by `pipekeep replay`; then the game
# through pipekeep: what it finds. Usage: r61.sh BIN FOSSIL_LAYER_DIR REPLAYER DB THREADS OUT
set -u
BIN=$1 FL=$2 REPLAYER=$3 DB=$4 T=$5 OUT=$6
W=$(mktemp -d)
cat > $W/pipekeep.json <<J
{"file_format_version":"1.2.0","layer":{"name":"VK_LAYER_PIPEKEEP_pipeline_store","type":"GLOBAL","library_path":"$(realpath $BIN)/libpipekeep.so","api_version":"1.3.0","implementation_version":"1","description":"pipekeep","disable_environment":{"PIPEKEEP_DISABLE":"1"}}}
J
mkdir -p $W/pk; cp $W/pipekeep.json $W/pk/
export XDG_RUNTIME_DIR=$W/rt; mkdir -p $XDG_RUNTIME_DIR; chmod 700 $XDG_RUNTIME_DIR
PK="env VK_ADD_LAYER_PATH=$W/pk VK_INSTANCE_LAYERS=VK_LAYER_PIPEKEEP_pipeline_store"
game() { /usr/bin/time -f "wall %e s" $BIN/pipekeep replay --threads $T --json "$DB" 2>&1 | tail -c 600; }
found() { tail -n1 "$1"/*/runs.jsonl 2>/dev/null | python3 -c 'import sys,json
for l in sys.stdin:
  if l.startswith("{"): r=json.loads(l); print({k:r[k] for k in r if k in ("built","found","compiled","unkeyed","passed","refused")})'; }
echo "== record the game with Fossilize's layer"
VK_ADD_LAYER_PATH=$FL VK_INSTANCE_LAYERS=VK_LAYER_fossilize FOSSILIZE_DUMP_PATH=$W/rec $BIN/pipekeep replay --threads $T "$DB" >/dev/null 2>&1; ls -la $W/rec* | tail -2
REC=$(ls $W/rec*.foz | head -1)
echo "== the game cold, no layer"; game
for who in valve pipekeep; do
  export PIPEKEEP_DIR=$W/store-$who
  echo "== precompile by $who through pipekeep"
  if [ $who = valve ]; then /usr/bin/time -f "wall %e s" $PK $REPLAYER --num-threads $T "$REC" 2>&1 | grep -E "Replayed|wall|rror" | tail -3
  else /usr/bin/time -f "wall %e s" $PK $BIN/pipekeep replay --threads $T "$REC" 2>&1 | tail -2; fi
  found $PIPEKEEP_DIR
  echo "== the game through pipekeep after $who's precompile"; $PK bash -c "$(declare -f game); BIN=$BIN T=$T DB=$DB game"
  found $PIPEKEEP_DIR
done
cp $REC $OUT/ 2>/dev/null; true
