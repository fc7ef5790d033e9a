"""The documentation stays true to itself: the README is a short front page whose first commands are
the two that matter, every page under docs/ is reachable from it, every relative link and anchor
resolves, and every page and section the package's own messages point to exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
README = REPO_ROOT / "README.md"
PAGES = sorted((REPO_ROOT / "docs").glob("*.md"))
DOCUMENTS = [README, REPO_ROOT / "CHANGELOG.md", *PAGES]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
#: ``docs/<page>.md "<Section>"`` (or single quotes) in the package's messages and docstrings.
DOCS_REFERENCE = re.compile(r"""docs/([\w-]+\.md) (?:"([^"]+)"|'([^']+)')""")


def _headings(path: Path) -> list[str]:
    """The document's headings, outside code blocks."""
    headings, fenced = [], False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (found := re.match(r"^#{1,6} (.+)$", line)):
            headings.append(found.group(1).strip())
    return headings


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading."""
    return re.sub(r"[^\w\- ]", "", heading.lower().replace("`", "")).replace(" ", "-")


def test_the_readme_is_a_short_front_page_starting_with_the_two_commands() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 80
    first_block = text.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    assert [line.split("#")[0].strip() for line in first_block[:2]] == ["make demo", "make test"]


def test_every_page_is_linked_from_the_readme_and_the_index() -> None:
    readme_links = set(LINK.findall(README.read_text()))
    index_links = set(LINK.findall((REPO_ROOT / "docs" / "index.md").read_text()))
    for page in PAGES:
        assert f"docs/{page.name}" in readme_links or page.name == "index.md", page.name
        assert page.name in index_links or page.name == "index.md", page.name


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(REPO_ROOT)))
def test_every_relative_link_and_anchor_resolves(document: Path) -> None:
    for target in LINK.findall(document.read_text()):
        if re.match(r"^[a-z]+:", target):
            continue  # https://, mailto:
        path_text, _, anchor = target.partition("#")
        path = (document.parent / path_text).resolve() if path_text else document
        assert path.exists(), f"{document.name}: {target}"
        if anchor:
            assert anchor in {_anchor(h) for h in _headings(path)}, f"{document.name}: {target}"


def test_every_section_the_package_points_to_exists() -> None:
    references = [
        (source, page, double or single)
        for source in sorted((REPO_ROOT / "airflow_provider_mysql_cdc").rglob("*.py"))
        for page, double, single in DOCS_REFERENCE.findall(source.read_text())
    ]
    assert len(references) >= 10  # the messages and docstrings that name a section
    for source, page, section in references:
        path = REPO_ROOT / "docs" / page
        assert path.exists(), f"{source.name}: docs/{page}"
        assert section in _headings(path), f"{source.name}: docs/{page} {section!r}"
    assert "README" not in "".join(s.read_text() for s in (REPO_ROOT / "airflow_provider_mysql_cdc").rglob("*.py"))
