"""The documentation's links resolve: every relative link of README.md, docs/*.md, BENCHMARKS.md
and benchmarks/README.md names a file of the repository, and its ``#anchor`` a heading of that
file, under both the code host's heading ids (the pages are read in the repository) and mkdocs'
(the site, ``make docs``). No network: links with a scheme are not followed. ``make docs``
(``mkdocs build --strict``) checks the built site as well."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", ROOT / "BENCHMARKS.md", ROOT / "benchmarks" / "README.md",
                *(ROOT / "docs").glob("*.md")])

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[[^\]]*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def prose(text: str) -> str:
    """The markdown without fenced code blocks and inline code (links there are code, not links)."""
    return _CODE.sub("", _FENCE.sub("", text))


def links(text: str) -> list[str]:
    return _LINK.findall(prose(text))


def _heading_text(raw: str) -> str:
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", raw)  # a link in a heading reads as its text
    return text.replace("`", "").replace("*", "")


def github_slug(heading: str) -> str:
    """The id a code host gives a heading: lower case, punctuation dropped, each space a hyphen."""
    text = _heading_text(heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def mkdocs_slug(heading: str) -> str:
    """The id mkdocs gives it (Python-Markdown's toc.slugify)."""
    text = unicodedata.normalize("NFKD", _heading_text(heading)).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(path: Path) -> set[str]:
    """Heading ids that both renderings give (a link must work on the code host and on the site)."""
    out = set()
    for h in _HEADING.findall(_FENCE.sub("", path.read_text(encoding="utf-8"))):
        if github_slug(h) == mkdocs_slug(h):
            out.add(github_slug(h))
    return out


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    bad = []
    for target in links(page.read_text(encoding="utf-8")):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue  # http:, https:, mailto: — not followed (no network)
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            bad.append(f"{target}: no file {dest}")
        elif root not in dest.parents:
            bad.append(f"{target}: outside the repository")
        elif anchor and (dest.suffix != ".md" or anchor not in anchors(dest)):
            bad.append(f"{target}: no heading #{anchor} in {dest.relative_to(root)}")
    return bad


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_resolves(page: Path) -> None:
    assert page.exists()
    assert broken_links(page) == []


def test_the_site_lists_every_page() -> None:
    """mkdocs.yml's nav has every docs/ page and the three outside it (scripts/mkdocs_hooks.py)."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    nav = {next(iter(item.values())) for item in config["nav"]}
    docs = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert nav == docs | {"index.md", "BENCHMARKS.md", "benchmark-scripts.md"}


def test_the_checker_finds_broken_links(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    (tmp_path / "x.md").write_text("# X\n")
    (root / "b.md").write_text("# Soak test (`pando soak`)\n\n## A — B\n")
    page = root / "a.md"
    page.write_text("[ok](b.md#soak-test-pando-soak) [gone](c.md) [anchor](b.md#nope) [dash](b.md#a--b)\n"
                    "[web](https://example.org/x) `[code](c.md)`\n```\n[fence](c.md)\n```\n"
                    "[self](#missing) [up](../x.md)\n")
    assert links(page.read_text()) == ["b.md#soak-test-pando-soak", "c.md", "b.md#nope", "b.md#a--b",
                                       "https://example.org/x", "#missing", "../x.md"]
    bad = broken_links(page, root=root)
    # "A — B" is #a--b on the code host but #a-b in mkdocs: a link to it works in one place only
    assert [b.split(": ")[0] for b in bad] == ["c.md", "b.md#nope", "b.md#a--b", "#missing", "../x.md"]
    assert bad[-1] == "../x.md: outside the repository"
