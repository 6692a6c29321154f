"""The README's programs run as written: each is taken from README.md and run in its own
Python process (real TCP on 127.0.0.1, real temporary directories), so the README cannot
drift from the code."""

import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _blocks(section: str, language: str) -> list[str]:
    """The fenced `language` blocks of the README section headed `section`."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(f"\n{section}\n")
    end = text.find("\n## ", start + 1)
    body = text[start : end if end != -1 else len(text)]
    return re.findall(rf"^```{language}\n(.*?)^```$", body, flags=re.DOTALL | re.MULTILINE)


def _run(program: str, tmp_path: pathlib.Path) -> subprocess.CompletedProcess:
    script = tmp_path / "program.py"
    script.write_text(program, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)}
    return subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )


def test_the_embedding_program_prints_what_the_readme_shows(tmp_path):
    program = _blocks("## Embedding kcore in a Trio program", "python")[0]
    expected = _blocks("## Embedding kcore in a Trio program", "text")[0]
    assert "kcore.open_cluster(" in program and program.rstrip().endswith("trio.run(main)")
    done = _run(program, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == expected
    assert not list(tmp_path.glob("kcore-*")), "the cluster's temporary directory is left"


def test_the_embedded_cluster_program_for_tests_runs(tmp_path):
    [program] = _blocks("## An embedded cluster for tests", "python")
    done = _run(program, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    crashed, successor = re.fullmatch(
        r"broker (\d) crashed; broker (\d) took over as controller\n", done.stdout
    ).groups()
    assert crashed != successor
