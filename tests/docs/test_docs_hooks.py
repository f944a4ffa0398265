"""The site's build hooks: optional nav pages left out until they exist; unnamed pages listed under More."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "scripts" / "docs_hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _nav():
    return [{"Home": "index.md"},
            {"Guides": [{"Add": "guides/add.md"}, {"A/B": "guides/ab.md"}, {"Typo": "guides/typo.md"}]},
            {"Later": [{"Lift": "benchmarks/lift.md"}]}]


def test_an_optional_page_is_in_the_nav_only_once_it_exists(hooks, tmp_path):
    (tmp_path / "guides").mkdir()
    (tmp_path / "guides" / "ab.md").write_text("# A/B\n")
    config = {"nav": _nav(), "docs_dir": str(tmp_path),
              "extra": {"optional_pages": ["guides/ab.md", "benchmarks/lift.md"]}}
    nav = hooks.on_config(config)["nav"]
    # ab.md exists: kept; lift.md does not: dropped with its now empty section; a page not declared
    # optional stays, so mkdocs still reports a nav entry whose file is missing
    assert nav == [{"Home": "index.md"},
                   {"Guides": [{"Add": "guides/add.md"}, {"A/B": "guides/ab.md"}, {"Typo": "guides/typo.md"}]}]


def test_a_page_the_nav_does_not_name_is_listed_under_more(hooks):
    pages = [SimpleNamespace(src_uri=u) for u in ("index.md", "guides/add.md", "guides/new.md", "zz.md")]
    files = SimpleNamespace(documentation_pages=lambda: pages)
    config = {"nav": [{"Home": "index.md"}, {"Guides": [{"Add": "guides/add.md"}]}]}
    hooks.on_files(files, config)
    assert config["nav"][-1] == {"More": ["guides/new.md", "zz.md"]}


def test_every_optional_page_has_its_place_in_the_nav_of_mkdocs_yml():
    import yaml

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    named = set()

    def walk(nav):
        for item in nav:
            value = next(iter(item.values())) if isinstance(item, dict) else item
            if isinstance(value, list):
                walk(value)
            else:
                named.add(value)

    walk(config["nav"])
    assert set(config["extra"]["optional_pages"]) <= named
    assert (ROOT / "docs" / "index.md").exists() and "index.md" in named
