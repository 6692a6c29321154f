"""The Parquet results store (bench/store.py): what `bench run` appends, what `import-jsonl`
adds, read back with pyarrow (no JVM)."""

import json

import attrs
import pyarrow.dataset as ds
import pytest

from bench import open_rows
from bench.__main__ import main as bench_main
from bench.store import HostFacts, RunFacts, append_run, stored_runs
from bench.workloads import WORKLOADS, Workload

STARTED = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC


def _rows(workload, n, start=STARTED):
    return [
        {
            "run_id": "ignored: the run's facts name it",
            "workload": workload,
            "case": f"case-{i % 2}",
            "op": "op",
            "params": {"b": 2, "a": [1, "x"]},
            "git_sha": "ignored",
            "seed": 3,
            "start_time": start + i,
            "latency_ns": 1000 * (i + 1),
            "bytes": 10,
            "count": 1,
            "outcome": "ok",
        }
        for i in range(n)
    ]


def _read(store):
    return ds.dataset(store, format="parquet", partitioning="hive").to_table().to_pylist()


def test_a_run_is_stored_by_workload_and_utc_date(tmp_path):
    host = HostFacts("2-core", "abcdef012345", 2, 1.25)
    run = RunFacts("run1", "sha1", STARTED, host)
    written = append_run(tmp_path, _rows("w-a", 3) + _rows("w-b", 2), run)
    assert [p.relative_to(tmp_path).as_posix() for p in written] == [
        "workload=w-a/date=2023-11-14/run-run1.parquet",
        "workload=w-b/date=2023-11-14/run-run1.parquet",
    ]
    rows = sorted(_read(tmp_path), key=lambda r: (r["workload"], r["start_time"]))
    assert len(rows) == 5
    first = rows[0]
    assert first["run_id"] == "run1" and first["git_sha"] == "sha1"
    assert (first["host_class"], first["host_id"], first["cores"]) == ("2-core", "abcdef012345", 2)
    assert (first["load_1m"], first["run_started"]) == (1.25, STARTED)
    assert json.loads(first["params"]) == {"a": [1, "x"], "b": 2}
    assert first["params"] == '{"a":[1,"x"],"b":2}'  # canonical: sorted keys
    assert [r["latency_ns"] for r in rows[:3]] == [1000, 2000, 3000]
    assert not list(tmp_path.rglob(".*"))  # no partial file left behind


def test_a_run_already_stored_is_not_stored_again(tmp_path):
    run = RunFacts("run1", "sha1", STARTED, HostFacts.unknown())
    assert append_run(tmp_path, _rows("w", 3), run)
    assert append_run(tmp_path, _rows("w", 3), run) == []
    assert len(_read(tmp_path)) == 3
    assert stored_runs(tmp_path) == {("w", "run1")}


def test_the_host_is_named_by_its_cores_and_a_hash():
    host = HostFacts.current()
    assert host.host_class == f"{host.cores}-core"
    assert len(host.host_id) == 12 and int(host.host_id, 16) >= 0


def _write_run(folder, run_id, workloads, start):
    for workload in workloads:
        with open_rows(
            folder / f"{workload}.jsonl", workload=workload, seed=1, run_id=run_id, sha="s1"
        ) as rows:
            for i in range(4):
                rows.write(
                    case="c", op="op", params={}, start_time=start + i, latency_ns=5, count=1
                )


def test_importing_json_lines_twice_adds_them_once(tmp_path, capsys):
    old, older = tmp_path / "old", tmp_path / "older"
    _write_run(old, "run-new", ["w1", "w2"], STARTED + 86_400)
    _write_run(older, "run-old", ["w1"], STARTED)
    (older / "w1.jsonl").open("a").write('{"run_id": "run-old", "cut sh\n')  # interrupted
    store = tmp_path / "store"
    args = ["import-jsonl", str(old), str(older), "--store", str(store), "--host-class", "2-core"]
    assert bench_main(args) == 0
    assert "imported 12 rows of 2 run(s)" in capsys.readouterr().out
    assert bench_main(args) == 0
    assert "imported 0 rows of 0 run(s)" in capsys.readouterr().out
    rows = _read(store)
    assert len(rows) == 12
    assert {(r["workload"], r["run_id"], r["date"]) for r in rows} == {
        ("w1", "run-new", "2023-11-15"),
        ("w2", "run-new", "2023-11-15"),
        ("w1", "run-old", "2023-11-14"),
    }
    assert {r["host_class"] for r in rows} == {"2-core"}
    # An imported run starts at its earliest row; its machine is not on record.
    assert {r["run_started"] for r in rows if r["run_id"] == "run-old"} == {STARTED}
    assert {r["cores"] for r in rows} == {None}


def test_import_rejects_a_missing_folder(tmp_path, capsys):
    assert bench_main(["import-jsonl", str(tmp_path / "nope"), "--store", str(tmp_path)]) == 2
    assert "no such folder" in capsys.readouterr().err


@pytest.fixture
def tiny_workload(monkeypatch):
    async def run(rows, options):
        for i in range(3):
            rows.write(case="c", op="op", params={"i": i}, start_time=STARTED + i, latency_ns=7)
        return [{"case": "c"}]

    monkeypatch.setitem(WORKLOADS, "tiny", Workload("tiny", "three rows", run))
    return "tiny"


def test_bench_run_appends_to_the_store_and_writes_json_lines(tmp_path, tiny_workload):
    out, store = tmp_path / "out", tmp_path / "store"
    assert bench_main(["run", tiny_workload, "--out", str(out), "--store", str(store)]) == 0
    assert len((out / "tiny.jsonl").read_text().splitlines()) == 3
    rows = _read(store)
    assert len(rows) == 3 and {r["workload"] for r in rows} == {"tiny"}
    host = HostFacts.current()
    assert {(r["host_class"], r["cores"]) for r in rows} == {(host.host_class, host.cores)}
    # A second run is a second file of the same partition.
    assert bench_main(["run", tiny_workload, "--out", str(out), "--store", str(store)]) == 0
    assert len({r["run_id"] for r in _read(store)}) == 2


def test_bench_run_without_the_store(tmp_path, tiny_workload):
    out, store = tmp_path / "out", tmp_path / "store"
    assert bench_main(["run", tiny_workload, "--out", str(out), "--no-store"]) == 0
    assert (out / "tiny.jsonl").exists() and not store.exists()


def test_run_facts_name_the_run_date_in_utc():
    late = RunFacts("r", "s", 1_700_006_399.0, HostFacts.unknown())  # 23:59:59 UTC
    assert late.date == "2023-11-14"
    assert attrs.evolve(late, started=1_700_006_400.0).date == "2023-11-15"
