"""bench: named workloads on real TCP loopback, written as JSON-lines result rows.

Run with `python -m bench run WORKLOAD [--out DIR] [--quick]` (bench/__main__.py); the
row format is in bench/_rows.py, the workload registry in bench/workloads/.
"""

from bench._rows import ROW_FIELDS, RowWriter, git_sha, new_run_id, open_rows, read_rows

__all__ = ["ROW_FIELDS", "RowWriter", "git_sha", "new_run_id", "open_rows", "read_rows"]
