#!/usr/bin/env bash
# Issue 3 benchmark (not a test): durable capture of a 200 000-row-change binlog into L,
# against a native MariaDB replica applying the same binlog and the Python
# mysql-replication decoder, plus peak memory for one huge transaction.
# Usage: scripts/bench-capture.sh [ROWS]   (changes = 2 x ROWS, default ROWS=100000)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-mariadb
python3 -c 'import pymysqlreplication' 2>/dev/null || pip install --quiet mysql-replication
exec cargo run --release --quiet -p kernel --example bench_capture -- "${1:-100000}"
