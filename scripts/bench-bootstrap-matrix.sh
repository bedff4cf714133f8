#!/usr/bin/env bash
# Issue 35 item 3 (a benchmark, not a test): every ratio of a bootstrap in one run —
# backfill to STREAMING (full field check) and windows only, against mydumper/myloader -t 2,
# `mariadb-dump | mariadb` and LOAD DATA on two connections (the target's ingest limit) —
# at each size, with and without two secondary indexes, with durable server settings
# (flush_log_at_trx_commit=1, sync_binlog=1) and with the harness's; medians of ROUNDS
# rotating rounds, each configuration on its own fresh servers.
# Usage: scripts/bench-bootstrap-matrix.sh [ROUNDS] [SIZES...]   (default 3, 1000000 5000000)
# Prints one table row per configuration (and each run on stderr).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-mariadb
command -v mydumper >/dev/null || echo "mydumper not installed (apt-get install -y mydumper): its column is -" >&2
rounds="${1:-3}"; shift || true
sizes=("${@:-1000000 5000000}")
cargo build --release --quiet -p bootstrap --bin backfill
cargo build --release --quiet -p bootstrap --example bench_bootstrap
bin="${CARGO_TARGET_DIR:-target}/release"
header=""
rows=()
for size in ${sizes[*]}; do
  for durable in 1 0; do
    for idx in 0 1; do
      out=$(BENCH_ALL=1 BENCH_ROUNDS="$rounds" BENCH_DURABLE="$durable" BENCH_INDEXES="$idx" \
        BACKFILL_BIN="$bin/backfill" "$bin/examples/bench_bootstrap" "$size" 50000 10000)
      echo "$out" >&2
      header=$(echo "$out" | grep '^| rows' -A1)
      rows+=("$(echo "$out" | tail -1)")
    done
  done
done
echo "$header"
printf '%s\n' "${rows[@]}"
