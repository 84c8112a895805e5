#!/usr/bin/env bash
# The Debian package, end to end, as root: builds it with cargo-deb (installed first where
# missing), installs it with `dpkg -i`, runs the test app naming no layer (the implicit manifest
# alone must bring the layer in) twice on RADV null hardware: the first run keeps its pipelines,
# the second finds them; then `dpkg -r` and checks that nothing of the package is left but the
# store.
#
#   scripts/package-test.sh
#
# It installs into the system (/usr): run it on a test machine or in CI, never beside an install
# of the package you mean to keep (it refuses when the package is already installed).
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
fail() { echo "package-test: FAIL: $*" >&2; exit 1; }

if dpkg-query -W -f='${Status}' pipekeep 2>/dev/null | grep -q 'install ok installed'; then
  # dpkg -r at the end would take away an install someone relies on.
  echo "package-test: the pipekeep package is already installed here; not touching it (skipped)" >&2
  exit 0
fi

# A pinned version, so CI builds the same packager every time.
if ! cargo deb --version >/dev/null 2>&1; then
  cargo install cargo-deb --version 3.8.0 --locked
fi

# cargo-deb builds the `deb` profile (stripped) itself; the test app is the debug one the test
# suite already built.
deb=$(cargo deb --locked | tail -n1)
[ -f "$deb" ] || fail "cargo deb made no package (last line: $deb)"
cargo build --locked --bin pipekeep-testapp
app="$PWD/target/debug/pipekeep-testapp"

lib=/usr/lib/x86_64-linux-gnu/libpipekeep.so
manifest=/usr/share/vulkan/implicit_layer.d/VK_LAYER_PIPEKEEP_pipeline_store.x86_64.json
cmd=/usr/bin/pipekeep
doc=/usr/share/doc/pipekeep

tmp=$(mktemp -d)
installed=0
cleanup() {
  # A failed check must not leave an implicit layer on for every program of the machine.
  if [ "$installed" -eq 1 ]; then $SUDO dpkg -r pipekeep >/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

echo "package-test: installing $deb"
$SUDO dpkg -i "$deb"
installed=1
for f in "$lib" "$manifest" "$cmd" "$doc/README.md"; do
  [ -f "$f" ] || fail "$f is not installed"
done
if command -v readelf >/dev/null && readelf -S "$lib" | grep -q '\.debug_'; then
  fail "$lib ships debug sections: not stripped"
fi
grep -q "\"library_path\": \"$lib\"" "$manifest" || fail "$manifest does not name $lib"

mkdir -p "$tmp/runtime" "$tmp/data" && chmod 700 "$tmp/runtime"
# No layer named, nothing on the layer paths; an empty XDG_DATA_HOME hides a user's own
# install.sh manifest, so only the package's can bring the layer in.
run() {
  env -u VK_INSTANCE_LAYERS -u VK_LOADER_LAYERS_ENABLE -u VK_LAYER_PATH -u VK_ADD_LAYER_PATH \
    -u PIPEKEEP_DISABLE -u PIPEKEEP_TITLE -u PIPEKEEP_LOG_FILE \
    XDG_RUNTIME_DIR="$tmp/runtime" XDG_DATA_HOME="$tmp/data" PIPEKEEP_DIR="$tmp/store" \
    PIPEKEEP_LOG=info MESA_SHADER_CACHE_DISABLE=true RADV_FORCE_FAMILY=navi21 \
    VK_DRIVER_FILES=/usr/share/vulkan/icd.d/radeon_icd.json \
    "$app" --compute 12 --graphics 6 --threads 2 --app-name package-test 2>&1
}
# The last compile-watch line's found= count.
found() { grep -o ' found=[0-9]*' | tail -n1 | cut -d= -f2; }

out=$(run) || { echo "$out"; fail "the test app failed (cold run)"; }
echo "$out" | grep -q "pipekeep is active on a device" || { echo "$out"; fail "the layer is not active without being named"; }
entries=$(find "$tmp/store" -name '*.entry' | wc -l)
[ "$entries" -gt 0 ] || { echo "$out"; fail "no entry kept under $tmp/store"; }
echo "package-test: cold run kept $entries entries"

out=$(run) || { echo "$out"; fail "the test app failed (warm run)"; }
n=$(echo "$out" | found)
[ "${n:-0}" -gt 0 ] || { echo "$out"; fail "the warm run found nothing (found=${n:-none})"; }
echo "package-test: warm run found $n"
entries=$(find "$tmp/store" -name '*.entry' | wc -l)

"$cmd" where | grep -q "$manifest" || fail "pipekeep where does not see $manifest"

$SUDO dpkg -r pipekeep
installed=0
for f in "$lib" "$manifest" "$cmd" "$doc"; do
  [ ! -e "$f" ] || fail "$f is left after dpkg -r"
done
! dpkg-query -W -f='${Status}' pipekeep 2>/dev/null | grep -q 'install ok installed' || fail "dpkg still lists pipekeep"
[ "$(find "$tmp/store" -name '*.entry' | wc -l)" -eq "$entries" ] || fail "the store changed at dpkg -r"
echo "package-test: ok (installed, active for a program naming no layer, kept $entries, found $n, removed)"
