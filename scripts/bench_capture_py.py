#!/usr/bin/env python3
"""Decode a binlog range with the Python mysql-replication package (issue 3 benchmark).

Usage: bench_capture_py.py PORT START_FILE START_POS END_FILE END_POS
Prints: ROWS SECONDS
"""
import sys
import time

from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent


def main():
    port, sfile, spos, efile, epos = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
    settings = {"host": "127.0.0.1", "port": int(port), "user": "root", "passwd": ""}
    stream = BinLogStreamReader(
        connection_settings=settings,
        server_id=9999,
        log_file=sfile,
        log_pos=spos,
        resume_stream=True,
        blocking=False,
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
    )
    rows = 0
    t = time.monotonic()
    for ev in stream:
        if (stream.log_file, stream.log_pos) > (efile, epos):
            break
        for row in ev.rows:
            rows += 1
            _ = row.get("values") or row.get("after_values")
    secs = time.monotonic() - t
    stream.close()
    print(rows, f"{secs:.3f}")


if __name__ == "__main__":
    main()
