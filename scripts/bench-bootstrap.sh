#!/usr/bin/env bash
# Issue 5 benchmark (not a test): bootstrap of a table (every window sealed and applied)
# against `mariadb-dump --single-transaction | mariadb` and `mydumper`/`myloader -t 2`
# (Debian package `mydumper`; skipped with a note when not installed) on the same two
# private servers, in the same run, with the peak RSS of `backfill serve`.
# Usage: scripts/bench-bootstrap.sh [--profile] [ROWS] [WINDOW_ROWS] [PAGE_ROWS]
# (default 1000000 50000 5000); --profile prints where serve's wall time went, per
# protocol step and per window (BACKFILL_PROFILE).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--profile" ]; then export BENCH_PROFILE=1; shift; fi
scripts/ensure-mariadb
command -v mydumper >/dev/null || echo "mydumper not installed (apt-get install -y mydumper): its column is skipped" >&2
cargo build --release --quiet -p bootstrap --bin backfill
BACKFILL_BIN="${CARGO_TARGET_DIR:-target}/release/backfill" \
  exec cargo run --release --quiet -p bootstrap --example bench_bootstrap -- "${1:-1000000}" "${2:-50000}" "${3:-10000}"
