"""The README stays the short version of the docs site, and its links lead somewhere."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def test_readme_is_at_most_200_lines():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; move the detail into a docs page"


def test_every_relative_link_of_the_readme_names_a_file_of_the_repository():
    text = README.read_text(encoding="utf-8")
    links = [t for t in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"[a-z]+:", t)]
    assert len(links) > 20
    for target in links:
        path = target.split("#", 1)[0]
        assert (ROOT / path).exists(), f"README.md links to {target}, which is not in the repository"


def test_every_page_the_readme_links_is_in_the_site_nav():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for target in re.findall(r"\]\(docs/([^)#\s]+\.md)", README.read_text(encoding="utf-8")):
        assert f" {target}" in nav, f"README.md links to docs/{target}, which mkdocs.yml does not list"
