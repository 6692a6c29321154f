"""The results store: every run's rows in one Parquet dataset, for trends across runs.

    bench-results/store/workload=<workload>/date=<YYYY-MM-DD>/run-<run_id>.parquet

One file per (run, workload), in the partition of the workload and the UTC date the run
started. Each row is a result row (bench/_rows.py, `params` as canonical JSON text) plus
the run's facts, the same for every row of a run (`STORE_COLUMNS`):

- `run_started`  wall-clock start of the run (for an imported run: its earliest row);
- `host_class`   what makes runs comparable, e.g. "2-core" (trends compare a case only
                 with runs of the same class);
- `host_id`      a hash of the hostname (which machine, without naming it);
- `cores`, `load_1m`  CPUs and the one-minute load average when the run started (empty
                 for imported runs: the JSON-lines files do not record them).

Written with pyarrow alone, so `bench run` needs no JVM; read with Spark
(bench/aggregate.py) or anything else that reads hive-partitioned Parquet. A file is written
under a dot-name then renamed, so a reader never sees half of one. A (run, workload) is
stored once: appending it again leaves the stored file as it is (`import-jsonl` twice does
not duplicate rows).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import os
import re
import socket
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import attrs

from bench._rows import ROW_FIELDS, read_rows

__all__ = [
    "DEFAULT_STORE",
    "PARTITION_COLUMNS",
    "STORE_COLUMNS",
    "HostFacts",
    "ImportReport",
    "RunFacts",
    "append_run",
    "import_jsonl",
    "is_store",
    "stored_runs",
]

log = logging.getLogger("bench.store")

DEFAULT_STORE = Path("bench-results/store")
PARTITION_COLUMNS = ("workload", "date")
# (name, pyarrow type name) of the columns each file holds; the partition columns are in
# the path only.
STORE_COLUMNS = (
    ("run_id", "string"),
    ("case", "string"),
    ("op", "string"),
    ("params", "string"),
    ("git_sha", "string"),
    ("seed", "int64"),
    ("start_time", "float64"),
    ("latency_ns", "int64"),
    ("bytes", "int64"),
    ("count", "int64"),
    ("outcome", "string"),
    ("run_started", "float64"),
    ("host_class", "string"),
    ("host_id", "string"),
    ("cores", "int32"),
    ("load_1m", "float64"),
)
UNKNOWN_HOST = "unknown"
# Partition values go into paths as they are: keep them to characters that need no escaping.
_SAFE_VALUE = re.compile(r"^[A-Za-z0-9_.+-]+$")
_RUN_FILE = re.compile(r"^run-(?P<run_id>.+)\.parquet$")


@attrs.frozen
class HostFacts:
    host_class: str
    host_id: str
    cores: int | None = None
    load_1m: float | None = None

    @classmethod
    def current(cls) -> HostFacts:
        """This machine now: its CPU count names its class ("2-core")."""
        cores = os.cpu_count()
        try:
            load_1m: float | None = os.getloadavg()[0]
        except OSError:  # not on every platform
            load_1m = None
        return cls(
            host_class=f"{cores}-core" if cores else UNKNOWN_HOST,
            host_id=hostname_hash(socket.gethostname()),
            cores=cores,
            load_1m=load_1m,
        )

    @classmethod
    def unknown(cls, host_class: str = UNKNOWN_HOST) -> HostFacts:
        return cls(host_class=host_class, host_id=UNKNOWN_HOST)


def hostname_hash(hostname: str) -> str:
    return hashlib.sha256(hostname.encode()).hexdigest()[:12]


@attrs.frozen
class RunFacts:
    run_id: str
    git_sha: str
    started: float  # seconds since the epoch
    host: HostFacts

    @property
    def date(self) -> str:
        return datetime.datetime.fromtimestamp(self.started, datetime.UTC).date().isoformat()


def _schema():
    import pyarrow as pa

    return pa.schema([pa.field(name, getattr(pa, kind)()) for name, kind in STORE_COLUMNS])


def is_store(path: str | Path) -> bool:
    """Whether `path` is a store folder (it holds `workload=...` partitions)."""
    path = Path(path)
    return path.is_dir() and any(path.glob("workload=*/date=*/*.parquet"))


def stored_runs(store: str | Path) -> set[tuple[str, str]]:
    """The (workload, run_id) pairs the store holds, from its file names."""
    found = set()
    for path in Path(store).glob("workload=*/date=*/run-*.parquet"):
        match = _RUN_FILE.match(path.name)
        if match:
            found.add((path.parent.parent.name.removeprefix("workload="), match["run_id"]))
    return found


def _check_value(what: str, value: str) -> str:
    if not _SAFE_VALUE.match(value):
        raise ValueError(f"{what} {value!r} is not usable in a store path (letters, digits, _.+-)")
    return value


def _table(rows: Sequence[Mapping[str, object]], run: RunFacts):
    import pyarrow as pa

    columns: dict[str, list] = {name: [] for name, _ in STORE_COLUMNS}
    for row in rows:
        for name in ROW_FIELDS:
            if name in ("workload",):
                continue
            value = row.get(name)
            if name == "params":
                value = json.dumps(value or {}, sort_keys=True, separators=(",", ":"))
            columns[name].append(value)
    n = len(rows)
    columns["run_id"] = [run.run_id] * n
    columns["git_sha"] = [run.git_sha] * n
    columns["run_started"] = [run.started] * n
    columns["host_class"] = [run.host.host_class] * n
    columns["host_id"] = [run.host.host_id] * n
    columns["cores"] = [run.host.cores] * n
    columns["load_1m"] = [run.host.load_1m] * n
    return pa.Table.from_pydict(columns, schema=_schema())


def append_run(
    store: str | Path, rows: Iterable[Mapping[str, object]], run: RunFacts
) -> list[Path]:
    """Stores `rows` (result rows of one run, any workloads) as one file per workload;
    returns the files written. A workload this run already has in the store is left as
    stored (and logged)."""
    import pyarrow.parquet as pq

    store = Path(store)
    by_workload: dict[str, list[Mapping[str, object]]] = defaultdict(list)
    for row in rows:
        by_workload[str(row["workload"])].append(row)
    existing = stored_runs(store)
    written = []
    for workload, members in sorted(by_workload.items()):
        if (workload, run.run_id) in existing:
            log.info("run %s of %s is already in %s", run.run_id, workload, store)
            continue
        folder = store / f"workload={_check_value('workload', workload)}" / f"date={run.date}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"run-{_check_value('run id', run.run_id)}.parquet"
        partial = folder / f".{path.name}.partial"
        pq.write_table(_table(members, run), partial)
        partial.replace(path)
        written.append(path)
    return written


@attrs.frozen
class ImportReport:
    imported: tuple[tuple[str, str], ...]  # (workload, run_id) pairs written
    skipped: tuple[tuple[str, str], ...]  # already in the store
    rows: int  # rows written


def import_jsonl(
    store: str | Path, folders: Sequence[str | Path], *, host_class: str = UNKNOWN_HOST
) -> ImportReport:
    """Imports the `*.jsonl` result files of `folders` (runs written by `bench run` before
    the store, or with `--no-store`). A run's start is its earliest row; its host facts are
    unknown but for `host_class`. Runs already stored are skipped, so importing twice adds
    nothing."""
    rows: list[dict[str, object]] = []
    for folder in folders:
        folder = Path(folder)
        files = sorted(folder.glob("*.jsonl")) if folder.is_dir() else [folder]
        for path in files:
            rows += _readable_rows(path)
    by_run: dict[str, list[dict[str, object]]] = defaultdict(list)
    for row in rows:
        by_run[str(row.get("run_id") or "unknown")].append(row)
    existing = stored_runs(store)
    imported, skipped, count = [], [], 0
    host = HostFacts.unknown(host_class)
    for run_id, members in sorted(by_run.items()):
        workloads = {str(row["workload"]) for row in members}
        skipped += sorted((w, run_id) for w in workloads if (w, run_id) in existing)
        new = [row for row in members if (str(row["workload"]), run_id) not in existing]
        if not new:
            continue
        shas = sorted({str(row.get("git_sha") or "unknown") for row in members})
        run = RunFacts(
            run_id=run_id,
            git_sha=shas[0] if len(shas) == 1 else ",".join(shas),
            started=min(float(row["start_time"]) for row in members),
            host=host,
        )
        append_run(store, new, run)
        imported += sorted((w, run_id) for w in workloads if (w, run_id) not in existing)
        count += len(new)
    return ImportReport(tuple(imported), tuple(skipped), count)


def _readable_rows(path: Path) -> list[dict[str, object]]:
    """The rows of a JSON-lines file with every field; lines cut short are skipped."""
    try:
        return [row for row in read_rows(path) if all(f in row for f in ROW_FIELDS)]
    except json.JSONDecodeError:
        good = []
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict) and all(f in row for f in ROW_FIELDS):
                good.append(row)
        log.warning("%s: skipped malformed line(s)", path)
        return good


def run_facts_now(run_id: str, sha: str) -> RunFacts:
    """The facts of a run starting now on this machine."""
    return RunFacts(run_id=run_id, git_sha=sha, started=time.time(), host=HostFacts.current())
