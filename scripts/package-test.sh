#!/usr/bin/env bash
# The Debian package, end to end, as root: builds it with cargo-deb (installed first where
# missing), installs it with `dpkg -i`, runs the test app naming no layer (the implicit manifest
# alone must bring the layer in) twice on RADV null hardware: the first run keeps its pipelines,
# the second finds them; checks that `man pipekeep` shows the man page and that bash completes the
# subcommands; then `dpkg -r` and checks that nothing of the package is left but the
# store. With --i386, the 32-bit layer's package too (pipekeep-i386, beside pipekeep), built
# with Debian's own Rust toolchain (scripts/setup-i386.sh installs it) and tested with the 32-bit
# test app on 32-bit RADV: each process loads the layer of its own ABI, keeps and finds.
#
#   scripts/package-test.sh [--i386]
#
# It installs into the system (/usr; with --i386 it adds the i386 architecture and packages too,
# through scripts/setup-i386.sh): run it on a test machine or in CI, never beside an install of the
# package you mean to keep (it skips when the package is already installed). On a machine others
# use, PIPEKEEP_PACKAGE_TEST_ISOLATED=1 runs it all in a private mount namespace with /usr, /var
# and /etc overlaid (root and overlayfs needed): dpkg and apt work as ever, and no other process
# sees what they install, for an implicit layer is on for every Vulkan program of the machine.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${PIPEKEEP_PACKAGE_TEST_ISOLATED:-}" = 1 ] && [ -z "${PIPEKEEP_PACKAGE_TEST_INSIDE:-}" ]; then
  upper=$(mktemp -d)
  rc=0
  PIPEKEEP_PACKAGE_TEST_INSIDE=1 unshare -m --propagation private bash -c '
    set -e
    for d in usr var etc; do
      mkdir -p "$0/$d/upper" "$0/$d/work"
      mount -t overlay overlay -o "lowerdir=/$d,upperdir=$0/$d/upper,workdir=$0/$d/work" "/$d"
    done
    exec "$@"' "$upper" "$PWD/scripts/package-test.sh" "$@" || rc=$?
  rm -rf "$upper"
  exit "$rc"
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
fail() { echo "package-test: FAIL: $*" >&2; exit 1; }
i386=0
[ "${1:-}" = --i386 ] && i386=1

for p in pipekeep pipekeep-i386; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    # dpkg -r at the end would take away an install someone relies on.
    echo "package-test: the $p package is already installed here; not touching it (skipped)" >&2
    exit 0
  fi
done

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
debs=("$deb")
pkgs=(pipekeep)
if [ "$i386" -eq 1 ]; then
  scripts/setup-i386.sh
  # Debian's rustc-web with its i686 standard library, no rustup; a target directory of its own,
  # so the two compilers never rebuild each other's host artifacts.
  i686() {
    env PATH="/usr/bin:$PATH" RUSTC=/usr/bin/rustc CARGO_TARGET_DIR="$PWD/target/i686" \
      CARGO_TARGET_I686_UNKNOWN_LINUX_GNU_LINKER=i686-linux-gnu-gcc "$@"
  }
  # The deb profile strips already; cargo-deb's own strip would want i686 binutils.
  deb32=$(i686 cargo deb --locked --variant i386 --target i686-unknown-linux-gnu --no-strip | tail -n1)
  [ -f "$deb32" ] || fail "cargo deb made no i386 package (last line: $deb32)"
  # In the package's profile: its dependencies are built already.
  i686 cargo build --locked --profile deb --target i686-unknown-linux-gnu --bin pipekeep-testapp
  app32="$PWD/target/i686/i686-unknown-linux-gnu/deb/pipekeep-testapp"
  debs+=("$deb32")
  pkgs+=(pipekeep-i386)
fi

lib=/usr/lib/x86_64-linux-gnu/libpipekeep.so
manifest=/usr/share/vulkan/implicit_layer.d/VK_LAYER_PIPEKEEP_pipeline_store.x86_64.json
cmd=/usr/bin/pipekeep
doc=/usr/share/doc/pipekeep
man1=/usr/share/man/man1
completions=(/usr/share/bash-completion/completions/pipekeep /usr/share/zsh/vendor-completions/_pipekeep
  /usr/share/fish/vendor_completions.d/pipekeep.fish)
lib32=/usr/lib/i386-linux-gnu/libpipekeep.so
manifest32=/usr/share/vulkan/implicit_layer.d/VK_LAYER_PIPEKEEP_pipeline_store.i686.json

tmp=$(mktemp -d)
installed=0
cleanup() {
  # A failed check must not leave an implicit layer on for every program of the machine.
  # (dpkg -i may fail half-way, at configure, leaving the packages unpacked: removed all the same.)
  if [ "$installed" -eq 1 ]; then
    $SUDO dpkg -r "${pkgs[@]}" >/dev/null 2>&1 || true
    $SUDO dpkg --configure -a >/dev/null 2>&1 || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

echo "package-test: installing ${debs[*]}"
installed=1
$SUDO dpkg -i "${debs[@]}"
units=(/usr/lib/systemd/user/pipekeep-rebuild.path /usr/lib/systemd/user/pipekeep-rebuild.service)
for f in "$lib" "$manifest" "$cmd" "$doc/README.md" "${units[@]}" "${completions[@]}" \
  "$man1/pipekeep.1.gz" "$man1/pipekeep-replay.1.gz" "$man1/pipekeep-stats.1.gz"; do
  [ -f "$f" ] || fail "$f is not installed"
done
# The man page as man finds and shows it (through files: `head` leaving early would break a pipe).
[ "$(man -w pipekeep)" = "$man1/pipekeep.1.gz" ] || fail "man -w pipekeep does not find $man1/pipekeep.1.gz"
MANWIDTH=80 man pipekeep > "$tmp/man.txt" 2>&1 || { cat "$tmp/man.txt"; fail "man pipekeep failed"; }
head -n 5 "$tmp/man.txt" > "$tmp/man-head.txt"
grep -q '^NAME' "$tmp/man-head.txt" && grep -Eq '^ +pipekeep +- ' "$tmp/man-head.txt" \
  || { cat "$tmp/man-head.txt"; fail "man pipekeep shows no NAME section naming pipekeep"; }
# The bash completion as bash-completion loads it: it completes the subcommands.
words=$(bash -c 'source /usr/share/bash-completion/completions/pipekeep
  COMP_WORDS=(pipekeep st); COMP_CWORD=1; _pipekeep pipekeep st pipekeep; echo "${COMPREPLY[*]}"') \
  || fail "the bash completion does not load"
[ "$words" = stats ] || fail "the bash completion of 'pipekeep st' is '$words', not 'stats'"
# The user units (a driver update rebuilds the stores) as systemd reads them, where it is here.
if command -v systemd-analyze >/dev/null; then
  mkdir -p "$tmp/units-runtime" && chmod 700 "$tmp/units-runtime"
  verdict=$(XDG_RUNTIME_DIR="$tmp/units-runtime" systemd-analyze verify --user "${units[@]}" 2>&1) \
    || { echo "$verdict"; fail "systemd does not take the user units"; }
  [ -z "$verdict" ] || { echo "$verdict"; fail "systemd complains of the user units"; }
fi
libs=("$lib")
[ "$i386" -eq 0 ] || libs+=("$lib32")
for l in "${libs[@]}"; do
  [ -f "$l" ] || fail "$l is not installed"
  if command -v readelf >/dev/null && readelf -S "$l" | grep -q '\.debug_'; then
    fail "$l ships debug sections: not stripped"
  fi
done
grep -q "\"library_path\": \"$lib\"" "$manifest" || fail "$manifest does not name $lib"
[ "$i386" -eq 0 ] || grep -q "\"library_path\": \"$lib32\"" "$manifest32" || fail "$manifest32 does not name $lib32"

mkdir -p "$tmp/runtime" "$tmp/data" && chmod 700 "$tmp/runtime"
# No layer named, nothing on the layer paths; an empty XDG_DATA_HOME hides a user's own
# install.sh manifest, so only the package's can bring the layer in.
# run APP [TITLE]: the loader's warnings and errors shown (its lines begin with their level).
run() {
  local prog="${1:-$app}" title="${2:-package-test}"
  env -u VK_INSTANCE_LAYERS -u VK_LOADER_LAYERS_ENABLE -u VK_LAYER_PATH -u VK_ADD_LAYER_PATH \
    -u PIPEKEEP_DISABLE -u PIPEKEEP_TITLE -u PIPEKEEP_LOG_FILE \
    XDG_RUNTIME_DIR="$tmp/runtime" XDG_DATA_HOME="$tmp/data" PIPEKEEP_DIR="$tmp/store" \
    PIPEKEEP_LOG=info MESA_SHADER_CACHE_DISABLE=true RADV_FORCE_FAMILY=navi21 \
    VK_DRIVER_FILES=/usr/share/vulkan/icd.d/radeon_icd.json VK_LOADER_DEBUG=error,warn \
    "$prog" --compute 12 --graphics 6 --threads 2 --app-name "$title" 2>&1
}
# The loader's complaints: none, with one manifest of each ABI for one layer name.
complaints() { grep -E '^(WARNING|ERROR)' || true; }
# The last compile-watch line's found= count.
found() { grep -o ' found=[0-9]*' | tail -n1 | cut -d= -f2; }

out=$(run) || { echo "$out"; fail "the test app failed (cold run)"; }
echo "$out" | grep -q "pipekeep is active on a device" || { echo "$out"; fail "the layer is not active without being named"; }
entries=$(find "$tmp/store" -name '*.entry' | wc -l)
[ "$entries" -gt 0 ] || { echo "$out"; fail "no entry kept under $tmp/store"; }
echo "package-test: cold run kept $entries entries"
[ -z "$(echo "$out" | complaints)" ] || { echo "$out"; fail "the loader complained"; }

out=$(run) || { echo "$out"; fail "the test app failed (warm run)"; }
n=$(echo "$out" | found)
[ "${n:-0}" -gt 0 ] || { echo "$out"; fail "the warm run found nothing (found=${n:-none})"; }
echo "package-test: warm run found $n"
entries=$(find "$tmp/store" -name '*.entry' | wc -l)

# (Through a file: `grep -q` leaving early would break the command's pipe.)
"$cmd" where > "$tmp/where.txt" || fail "pipekeep where failed"
grep -q "$manifest" "$tmp/where.txt" || fail "pipekeep where does not see $manifest"

if [ "$i386" -eq 1 ]; then
  # The 64-bit process's title: each ABI keeps its own identity directory (RADV mixes the pointer
  # size into its cache UUID), and neither takes the other's for another driver's.
  out=$(run "$app32" package-test) || { echo "$out"; fail "the 32-bit test app failed (cold run)"; }
  echo "$out" | grep -q "pipekeep is active on a device" || { echo "$out"; fail "the 32-bit layer is not active"; }
  [ -z "$(echo "$out" | complaints)" ] || { echo "$out"; fail "the loader complained (32-bit)"; }
  kept32=$(( $(find "$tmp/store/package-test" -name '*.entry' | wc -l) - entries ))
  [ "$kept32" -gt 0 ] || { echo "$out"; fail "the 32-bit run kept nothing"; }
  # Alternately: the 64-bit process still finds all it found, then the 32-bit one all its own.
  out=$(run) || { echo "$out"; fail "the test app failed (after the 32-bit run)"; }
  [ "$(echo "$out" | found)" = "$n" ] || { echo "$out"; fail "the 64-bit run lost entries to the 32-bit one"; }
  out=$(run "$app32" package-test) || { echo "$out"; fail "the 32-bit test app failed (warm run)"; }
  n32=$(echo "$out" | found)
  [ "${n32:-0}" -gt 0 ] || { echo "$out"; fail "the 32-bit warm run found nothing (found=${n32:-none})"; }
  echo "package-test: 32-bit beside 64-bit on one title: kept $kept32, found $n32; the 64-bit run found $n again"
  entries=$(find "$tmp/store" -name '*.entry' | wc -l)
fi

$SUDO dpkg -r "${pkgs[@]}"
installed=0
for f in "$lib" "$manifest" "$cmd" "$doc" "$lib32" "$manifest32" "${units[@]}" "${completions[@]}" \
  "$man1/pipekeep.1.gz"; do
  [ ! -e "$f" ] || fail "$f is left after dpkg -r"
done
for p in "${pkgs[@]}"; do
  ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || fail "dpkg still lists $p"
done
[ "$(find "$tmp/store" -name '*.entry' | wc -l)" -eq "$entries" ] || fail "the store changed at dpkg -r"
echo "package-test: ok (${pkgs[*]}: installed, active for a program naming no layer, kept, found, removed)"
