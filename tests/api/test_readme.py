"""The README's Python quick start runs as written (docs stay true to code)."""

import re
from pathlib import Path


REPO = Path(__file__).resolve().parents[2]


def test_quick_start_runs(monkeypatch, capsys):
    text = (REPO / "README.md").read_text()
    section = text.split("## Quick start", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    monkeypatch.chdir(REPO)
    exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out.split("\n")
    assert abs(float(out[0]) - 1 / 6) < 1e-6
    assert out[2].startswith("13 20")


def test_ci_runs_the_readme_commands():
    ci = (REPO / ".ci" / "run").read_text()
    assert "ci:commands" in ci
    block = (REPO / "README.md").read_text().split("<!-- ci:commands -->")[1]
    lines = [ln for ln in block.split("<!-- /ci:commands -->")[0].splitlines()
             if ln.strip() and not ln.startswith("```")]  # fmt: skip
    assert len(lines) == 2 and "pip install" in lines[0] and "pytest" in lines[1]
