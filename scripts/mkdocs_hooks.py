"""mkdocs hooks: the site is README.md, docs/*.md, BENCHMARKS.md and benchmarks/README.md.

The pages are written to be read in the repository (on a code host or in a clone), so their links
are relative repository paths (``docs/LAYOUT.md`` from the README, ``../BENCHMARKS.md`` from
docs/). mkdocs reads only ``docs_dir`` (docs/): the files outside it are added here under a site
path, and every relative link of every page is rewritten from repository paths to site paths. A
link to a file that is not a page stays as it is, and ``mkdocs build --strict`` fails on it.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File, Files

REPO = Path(__file__).resolve().parents[1]
DOCS = "docs"
# repository path → site path of the files outside docs/ (pages, and the LICENSE the README links)
OUTSIDE = {"README.md": "index.md", "BENCHMARKS.md": "BENCHMARKS.md", "benchmarks/README.md": "benchmark-scripts.md",
           "LICENSE": "LICENSE"}
_SITE_TO_REPO = {site: repo for repo, site in OUTSIDE.items()}
_LINK = re.compile(r"\]\(([^()\s]+)\)")


def on_files(files: Files, config) -> Files:
    for repo_path, site_path in OUTSIDE.items():
        files.append(File.generated(config, site_path, abs_src_path=str(REPO / repo_path)))
    return files


def repo_path(site_path: str) -> str:
    return _SITE_TO_REPO.get(site_path, posixpath.join(DOCS, site_path))


def site_path(repo: str) -> str | None:
    if repo in OUTSIDE:
        return OUTSIDE[repo]
    if repo.startswith(DOCS + "/"):
        return repo[len(DOCS) + 1:]
    return None


def rewrite_link(target: str, page_site_path: str) -> str:
    """``target`` as written in the page's repository file → the same file's site-relative link."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith(("#", "/")):
        return target
    path, sep, anchor = target.partition("#")
    here = posixpath.dirname(repo_path(page_site_path))
    dest = site_path(posixpath.normpath(posixpath.join(here, path)))
    if dest is None:
        return target
    return posixpath.relpath(dest, posixpath.dirname(page_site_path) or ".") + sep + anchor


def on_page_markdown(markdown: str, page, config, files) -> str:
    return _LINK.sub(lambda m: f"]({rewrite_link(m.group(1), page.file.src_uri)})", markdown)
