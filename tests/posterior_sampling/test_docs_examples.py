"""The examples of docs/posterior-sampling.md's sections on Lemmas 20/22 and Assumption 2 run
and print what the text says they print."""

import contextlib
import io
import re

from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "posterior-sampling.md"
SECTIONS = ("## Scale families", "## No (ε, δ) version from Assumption 2")


def _blocks(heading: str) -> list[str]:
    text = DOC.read_text()
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return re.findall(r"```python\n(.*?)```", text[start:end if end != -1 else None], re.S)


def _run(code: str) -> list[str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(DOC), "exec"), {})
    return out.getvalue().splitlines()


@pytest.mark.filterwarnings("ignore")
def test_scale_family_examples():
    laplace_block, normal_block = _blocks(SECTIONS[0])
    L, T = (float(v) for v in _run(laplace_block)[0].split())
    assert L == pytest.approx(10.0) and T == pytest.approx(0.01)
    lines = _run(normal_block)
    assert "Lemma 22" in lines[0] and float(lines[1]) == pytest.approx(4.0)


def test_assumption_2_counterexample_example():
    (block,) = _blocks(SECTIONS[1])
    delta9, actual = (float(v) for v in _run(block))
    assert delta9 == pytest.approx(0.0010, abs=1e-4)
    assert actual == pytest.approx(0.0045, abs=1e-4)
    assert actual > 4 * delta9
