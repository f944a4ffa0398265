"""The generated pages of the docs site (scripts/gen_docs.py) hold everything their source declares."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gen():
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def openapi(gen):
    return gen.openapi_schema()


def test_http_reference_has_every_route_and_schema_of_the_live_openapi(gen, openapi):
    page = gen.http_page(openapi)
    for path, item in openapi["paths"].items():
        for method in item:
            assert f"### `{method.upper()} {path}`" in page, (method, path)
    for name in openapi["components"]["schemas"]:
        assert f"### {name}\n" in page, name
    # a field of a request body, with its limit
    assert "`ttl_s`" in page and "`players`" in page


def test_error_table_names_each_routes_error_statuses(gen, openapi):
    table = gen.errors_snippet(openapi)
    row = next(line for line in table.splitlines() if line.startswith("| `POST /v1/tickets` |"))
    assert "422" in row and "409" in row, row


def test_grpc_reference_has_every_rpc_and_every_field_of_the_proto(gen):
    proto = ROOT / "app" / "rpc" / "matchmaker.proto"
    page = gen.grpc_page(proto)
    text = proto.read_text()
    for rpc in re.findall(r"rpc\s+(\w+)\s*\(", text):
        assert f"| `{rpc}` |" in page, rpc
    fields = re.findall(r"^\s*(?:optional\s+|repeated\s+)?(?:map<[^>]+>|[\w.]+)\s+(\w+)\s*=\s*(\d+);", text, re.M)
    assert len(fields) > 40
    for name, number in fields:
        assert re.search(rf"\| `{name}` \| [^|]+ \| {number} \|", page), (name, number)


def test_config_reference_has_every_setting_and_every_config_field(gen):
    from mgmatch.app.config import PoolConfig, ServiceConfig
    from mgmatch.app.settings import Settings

    page = gen.config_page()
    for name in Settings.model_fields:
        assert f"`MGMATCH_{name.upper()}`" in page, name
    for model in (ServiceConfig, PoolConfig):
        section = page.split(f"### {model.__name__}\n", 1)[1].split("\n### ", 1)[0]
        for name in model.model_fields:
            assert f"| `{name}` |" in section, (model.__name__, name)
    assert "| `MGMATCH_STORE` | `'memory' \\| 'redis'` | `'memory'` |" in page
    assert "| `MGMATCH_API_KEYS` | `list[str]` |" in page
    # types read as types: no validator reprs, no addresses that change from run to run
    assert "BeforeValidator" not in page and " at 0x" not in page


def test_generated_pages_are_the_same_on_every_run(gen, openapi):
    assert gen.config_page() == gen.config_page()
    assert gen.http_page(openapi) == gen.http_page(gen.openapi_schema())


def test_cli_reference_has_every_command_and_option(gen):
    import typer

    from mgmatch.app.cli import _load_commands, cli
    from mgmatch.cli import COMMANDS

    page = gen.cli_page()
    _load_commands(COMMANDS)
    root = typer.main.get_command(cli)
    for group in ("bench", "simulate", "models"):
        for name in root.commands[group].commands:
            assert f"`mgmatch {group} {name}`" in page, (group, name)
    solve = page.split("`mgmatch solve`", 1)[1].split("\n#", 1)[0]
    for option in ("--method", "--time-limit-ms", "--engagement", "--predictor"):
        assert f"`{option}`" in solve, option


def test_metrics_reference_has_every_documented_metric(gen):
    from mgmatch.app import metrics

    page = gen.metrics_page()
    for name in metrics.DOCUMENTED:
        assert f"| `{name}` |" in page, name
    assert "| `mgmatch_tickets_wait_seconds` | histogram | `pool`, `arm` |" in page


def _budget_run(base: Path, budgets: dict[int, dict[str, float]]) -> None:
    for ms, gaps in budgets.items():
        folder = base / "world" / f"{ms}ms"
        folder.mkdir(parents=True)
        methods = {m: {"mean_gap": g, "p99_time_ms": ms * 0.9, "feasible_rate": 1.0} for m, g in gaps.items()}
        (folder / "quality-x.json").write_text(json.dumps(
            {"count": 4, "seed": 7, "time_limit_ms": float(ms), "methods": methods}))


def test_budgets_table_orders_budgets_by_value_and_bolds_the_best(gen, tmp_path, monkeypatch):
    monkeypatch.setattr(gen, "RESULTS", tmp_path)
    _budget_run(tmp_path / "run", {100: {"mgmatch": 0.0, "scip": 0.01}, 20: {"mgmatch": 0.003, "scip": 0.5},
                                   10: {"mgmatch": 0.02, "scip": 0.01}})
    table = gen.budgets_snippet("run", "world", "W")
    rows = [line for line in table.splitlines() if re.match(r"\| \d", line)]
    assert [r.split(" | ")[0] for r in rows] == ["| 10", "| 20", "| 100"]
    assert rows[0] == "| 10 | 2.00% / 9.0 / 100% | **1.00%** / 9.0 / 100% |"
    assert rows[1].startswith("| 20 | **0.30%** / 18.0 / 100% | 50.00% /")
    assert "4 held-out pools (seed 7)" in table


def test_a_page_is_written_only_when_its_text_changes(gen, tmp_path):
    page = tmp_path / "a" / "page.md"
    assert gen._write(page, "one\n") is True
    mtime = page.stat().st_mtime_ns
    assert gen._write(page, "one\n") is False and page.stat().st_mtime_ns == mtime
    assert gen._write(page, "two\n") is True and page.read_text() == "two\n"


def test_every_benchmark_table_comes_from_a_result_file_in_the_repository(gen):
    snippets = gen.benchmark_snippets()
    for name, text in snippets.items():
        source = re.search(r"generated by scripts/gen_docs.py from (.+?); edit", text).group(1)
        for path in re.findall(r"results/[\w./*-]+", source):
            assert list(ROOT.glob(path)), (name, path)
        assert "|---|" in text, name
