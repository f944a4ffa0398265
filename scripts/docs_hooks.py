"""mkdocs build hooks of the docs site.

- Before the files are collected, write the generated pages (scripts/gen_docs.py), so that
  ``mkdocs build --strict`` from a fresh clone has the reference and the benchmark tables.
- The nav of ``mkdocs.yml`` may name pages that other work adds later (``extra.optional_pages``): an entry
  whose page is not in the tree yet is left out of the nav, not an error.
- A page that the nav does not name is still listed, under "More", so every page is reachable; the build log
  names it, for whoever places it in ``mkdocs.yml``.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

_GEN = Path(__file__).resolve().parent / "gen_docs.py"
log = logging.getLogger("mkdocs.hooks.mgmatch")


def on_pre_build(config, **kwargs) -> None:
    spec = importlib.util.spec_from_file_location("gen_docs", _GEN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.generate()


def _prune(nav, docs_dir: Path, optional: set[str]):
    """The nav without the entries of optional pages that do not exist (sections left empty dropped)."""
    out = []
    for item in nav:
        if isinstance(item, dict):
            (title, value), = item.items()
            if isinstance(value, list):
                inner = _prune(value, docs_dir, optional)
                if inner:
                    out.append({title: inner})
                continue
            if value in optional and not (docs_dir / value).exists():
                log.info("optional page %s is not in the tree: left out of the nav", value)
                continue
        elif isinstance(item, str) and item in optional and not (docs_dir / item).exists():
            continue
        out.append(item)
    return out


def _named(nav) -> set[str]:
    pages: set[str] = set()
    for item in nav or []:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        if isinstance(value, list):
            pages |= _named(value)
        elif isinstance(value, str):
            pages.add(value)
    return pages


def on_config(config, **kwargs):
    optional = set(config.get("extra", {}).get("optional_pages", []))
    if config.get("nav") and optional:
        config["nav"] = _prune(config["nav"], Path(config["docs_dir"]), optional)
    return config


def on_files(files, config, **kwargs):
    if not config.get("nav"):
        return files
    named = _named(config["nav"])
    extra = sorted(f.src_uri for f in files.documentation_pages() if f.src_uri not in named)
    if extra:
        log.info("pages not named in mkdocs.yml's nav, listed under More: %s", ", ".join(extra))
        config["nav"].append({"More": extra})
    return files
