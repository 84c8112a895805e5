#!/usr/bin/env bash
# The benchmark: installs what it needs, builds the release, runs the store and key
# micro-benchmarks, then every workload under every mode on RADV (null hardware) through
# scripts/bench.py. Results (Markdown tables, JSON, SVG plots) go to bench-out/; BENCHMARKS.md
# holds the figures that were taken, with their machine and driver.
#
#   scripts/bench.sh [bench.py options, e.g. --workloads pygfx,synth --threads 1]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# The plot of the launches (scripts/bench.py) is drawn by matplotlib.
# Debian's package where python3 is Debian's; pip's where it is another (pyenv, a venv).
python3 -c 'import matplotlib' 2>/dev/null || python3 -m pip install -q matplotlib 2>/dev/null || {
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get install -y -q --no-install-recommends python3-matplotlib
}
cargo build --release --locked --bins --lib
mkdir -p bench-out
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/pipekeep-runtime-$(id -u)}"
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
echo "## store and keys ($(nproc) cores, $(uname -m))"
cargo bench --locked --bench micro 2>/dev/null | grep '^|' | tee bench-out/micro.md
echo
python3 scripts/bench.py --driver radv --bin-dir target/release --out bench-out "$@"
