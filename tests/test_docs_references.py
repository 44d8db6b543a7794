"""References from the code to the documentation resolve: every ``docs/…`` file a docstring,
comment or document names exists, and every section of ``docs/algorithms.md`` it names is a
heading there (the math reference the kernels and accountants cite lives in the repository)."""

import re

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted(
    p for folder in ("pymc_dp", "tests", "benchmarks", "scripts", "examples", "docs")
    for p in (ROOT / folder).rglob("*") if p.suffix in {".py", ".md"}
) + [ROOT / "README.md"]
# the first quoted section after a mention of the page, then any that follow it
# (`"DP penalty" step 2–3 and "DP HMC"`, `"DP Barker", "Subsampled Gaussian"`)
FIRST = re.compile(r'algorithms\.md`*[,\s(]*"([A-Z][^"]*)"')
NEXT = re.compile(r'(?:\s|,|and|step [\d–-]+)*"([A-Z][^"]*)"')


def _text(path: Path) -> str:
    """The file with line breaks, comment marks and indentation folded to single spaces, so
    that a section name broken over two lines reads as one."""
    lines = (line.strip().lstrip("#").strip() for line in path.read_text().splitlines())
    return " ".join(lines)


def _headings() -> set[str]:
    page = (ROOT / "docs" / "algorithms.md").read_text().splitlines()
    return {line.lstrip("#").strip() for line in page if line.startswith("#")}


def _sections_named(text: str) -> list[str]:
    names = []
    for match in FIRST.finditer(text):
        names.append(match.group(1))
        end = match.end()
        while (more := NEXT.match(text, end)) is not None:
            names.append(more.group(1))
            end = more.end()
    return names


def test_every_named_section_of_the_algorithms_page_is_a_heading_there():
    headings = _headings()
    named = {(path.relative_to(ROOT).as_posix(), name)
             for path in SOURCES for name in _sections_named(_text(path))}
    assert len(named) >= 20  # (the kernels, accountants and steps cite it)
    missing = sorted((path, name) for path, name in named if name not in headings)
    assert not missing, missing


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_docs_file_named_exists_and_no_sheet_outside_the_repository(path):
    text = path.read_text()
    assert "ALGORITHMS" + ".md" not in text  # (the sheet the library was built from: not shipped)
    for name in re.findall(r"docs/([\w-]+\.md)", text):
        assert (ROOT / "docs" / name).is_file(), name


def test_the_reference_finder_sees_a_broken_section_name():
    assert _sections_named('(docs/algorithms.md, "DP penalty" step 2–3 and "DP HMC")') == [
        "DP penalty", "DP HMC"
    ]
    assert "DP Penaltyy" not in _headings()


@pytest.mark.parametrize("path", [p for p in SOURCES if p.suffix == ".md"],
                         ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_package_path_a_page_names_exists(path):
    # (a page that still names a module the layout moved would send readers nowhere)
    for name in re.findall(r"`(pymc_dp/[\w/.]+)`", path.read_text()):
        assert (ROOT / name.rstrip("/")).exists(), name
