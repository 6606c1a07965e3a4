"""MkDocs hooks: the repository's own Markdown files become site pages, and every link is checked.

The site is built from ``docs/``, but some pages live elsewhere in the repository because
that is where a reader of the repository looks for them: ``README.md`` (the home page),
``CHANGELOG.md``, ``examples/README.md`` and ``bench/README.md``. They are written with links
relative to their own place in the repository (so they work when read there). This hook

* adds them to the site (``MIRRORED``: repository path -> site path), and
* rewrites, on every page, a relative link by where its target is in the repository: a
  file under ``docs/`` or a mirrored file becomes a link to its site page (MkDocs then
  checks it, anchors included, under ``validation.anchors``); any other file of the
  repository (an example, a source file) becomes a link to it in the hosted repository
  (``repo_url``), after checking that it exists and, for a Markdown file, that the anchor
  names one of its headings. A link to nothing is a warning, which ``mkdocs build --strict``
  (part of ``make test``) turns into a failure.

No network: external links (with a scheme) are left as they are and not fetched.
"""

from __future__ import annotations

import logging
import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

log = logging.getLogger("mkdocs.hooks.repo_links")

ROOT = Path(__file__).resolve().parent.parent

# Repository path -> site path of the Markdown files that live outside docs/.
MIRRORED = {
    "README.md": "index.md",
    "CHANGELOG.md": "changelog.md",
    "examples/README.md": "examples.md",
    "bench/README.md": "benchmarks.md",
}
_SITE_TO_REPO = {site: repo for repo, site in MIRRORED.items()}

# [text](target "title") and ![alt](target); reference definitions "[id]: target".
_INLINE = re.compile(r"(\]\()(<[^>]*>|[^)\s]+)((?:\s+\"[^\"]*\")?\))")
_REFERENCE = re.compile(r"^(\s{0,3}\[[^\]]+\]:\s*)(\S+)", re.MULTILINE)
_FENCE = re.compile(r"^\s*(```|~~~)")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def on_files(files: Files, config: Any) -> Files:
    """Add the mirrored repository files to the site."""
    for repo_path, site_path in MIRRORED.items():
        source = ROOT / repo_path
        if source.exists():
            files.append(
                File.generated(config, site_path, content=source.read_text(encoding="utf-8"))
            )
        else:
            log.warning("%s is missing: the site page %s is not built", repo_path, site_path)
    return files


def on_page_markdown(markdown: str, page: Page, config: Any, files: Files) -> str:
    """Rewrite the page's repository-relative links (see the module docstring)."""
    site_path = page.file.src_uri
    repo_path = _SITE_TO_REPO.get(site_path, f"docs/{site_path}")
    repo_url = str(config.get("repo_url") or "").rstrip("/")

    def rewrite(target: str) -> str:
        bare = target[1:-1] if target.startswith("<") else target
        if not bare or bare.startswith(("#", "/")) or _SCHEME.match(bare):
            return target
        path, _, anchor = bare.partition("#")
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(repo_path), path))
        in_site = _site_path_of(resolved)
        if in_site is not None:
            rel = posixpath.relpath(in_site, posixpath.dirname(site_path) or ".")
            return rel + (f"#{anchor}" if anchor else "")
        full = ROOT / resolved
        if resolved.startswith("..") or not full.exists():
            log.warning("%s: the link %r names %s, which does not exist", repo_path, bare, resolved)
            return target
        if anchor and full.suffix == ".md" and anchor not in _anchors(full):
            log.warning("%s: the link %r: %s has no heading #%s", repo_path, bare, resolved, anchor)
        kind = "tree" if full.is_dir() else "blob"
        return f"{repo_url}/{kind}/main/{resolved}" + (f"#{anchor}" if anchor else "")

    out: list[str] = []
    fenced = False
    for line in markdown.splitlines(keepends=True):
        if _FENCE.match(line):
            fenced = not fenced
        if not fenced:
            line = _INLINE.sub(lambda m: m.group(1) + rewrite(m.group(2)) + m.group(3), line)
            line = _REFERENCE.sub(lambda m: m.group(1) + rewrite(m.group(2)), line)
        out.append(line)
    return "".join(out)


def _site_path_of(repo_path: str) -> str | None:
    if repo_path in MIRRORED:
        return MIRRORED[repo_path]
    if repo_path.startswith("docs/") and repo_path.endswith(".md"):
        return repo_path.removeprefix("docs/")
    return None


def _anchors(markdown_file: Path) -> set[str]:
    """The anchors of a Markdown file's headings, as MkDocs' ``toc`` and GitHub make them."""
    anchors = set()
    fenced = False
    for line in markdown_file.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            anchors.add(slugify(line.lstrip("#").strip()))
    return anchors


def slugify(heading: str) -> str:
    """GitHub's and python-markdown's ``toc`` slug: lower case, punctuation out, spaces to -."""
    text = re.sub(r"[`*_]", "", heading).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return re.sub(r"[\s]+", "-", text.strip())
