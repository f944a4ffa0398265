"""``mgmatch models list|verify --config FILE``: the models a service config names, and whether they load.

Named: every ``models.engagement`` / ``models.predictors`` entry (pools' own ``{path, sha256}`` files
included), every engagement model a pool, an experiment arm or ``default_engagement_model`` names,
and every predictor a pool's or an arm's method loads (``mgmatch``: ``<model>``, ``bgcn``:
``<model>-bgcn``, or the pool's ``predictor``). ``verify`` checks each: the file exists, matches its
pin and loads — an engagement JSON parses; an ONNX predictor gets an onnxruntime session and is
run once on a generated pool of the game that uses it. Exit 0 when all pass, 1 with one line per
problem on stderr otherwise, 2 for a config that does not parse.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from mgmatch.app.cli import cli, emit

models_app = typer.Typer(help="The models a service config names: list them, verify them (pins, loading).",
                         no_args_is_help=True)
cli.add_typer(models_app, name="models")

_CONFIG_HELP = "Service config (YAML)."


@dataclass
class Named:
    """One model the config names.

    Attributes:
        kind: ``engagement`` or ``predictor``.
        name: The name pools and solves use.
        source: ``file`` (config entry), ``shipped`` (package data) or ``unknown``.
        path: The file, when there is one.
        sha256: The pin (config, or the exporter's sidecar for an unpinned ONNX entry).
        config_field: The config field that names the file (``pools[0].predictor``, ``models.engagement[x]``).
        used_by: Pools / arms / defaults that use it.
    """

    kind: str
    name: str
    source: str
    path: str | None = None
    sha256: str | None = None
    config_field: str | None = None
    used_by: list[str] = dataclasses.field(default_factory=list)


def named_models(config) -> list[Named]:
    """Every model ``config`` (a :class:`~mgmatch.app.config.ServiceConfig`) names, in a stable order."""
    from mgmatch.app.models_hub import entry_field, pin_for
    from mgmatch.core.presets import model_names
    from mgmatch.solvers.base import method_info

    out: dict[tuple[str, str], Named] = {}
    for section, kind, entries in (("engagement", "engagement", config.models.engagement),
                                   ("predictors", "predictor", config.models.predictors)):
        for e in entries:
            pin = e.sha256 if kind == "engagement" else pin_for(e)
            out[(kind, e.name)] = Named(kind, e.name, "file", str(e.path), pin, entry_field(e, section))

    def use(kind: str, name: str | None, who: str) -> None:
        if name is None:
            return
        if (kind, name) not in out:
            if kind == "engagement":
                source = "shipped" if name in model_names() else "unknown"
            else:
                from mgmatch.models.runtime import SHIPPED, shipped_names

                source = "shipped" if name in shipped_names() else "unknown"
            n = Named(kind, name, source)
            if kind == "predictor" and source == "shipped":
                n.path = str(SHIPPED / f"{name}.onnx")
                n.sha256 = json.loads((SHIPPED / f"{name}.json").read_text()).get("sha256")
            out[(kind, name)] = n
        out[(kind, name)].used_by.append(who)

    def use_method(method: str, model: str | None, predictor: str | None, who: str) -> None:
        try:
            name = method_info(method).predictor_name(model, predictor)
        except Exception:  # an unknown method is the service's start-up error, not a model's
            return
        use("predictor", name, who)

    for p in config.pools:
        use("engagement", p.engagement_model, f"pool {p.name}")
        use_method(p.method, p.engagement_model, p.predictor, f"pool {p.name}")
        for e in config.experiments:
            if e.pools and p.name not in e.pools:
                continue
            for a in e.arms:
                who = f"pool {p.name} arm {e.name}/{a.name}"
                model = a.engagement_model or p.engagement_model
                if a.engagement_model is not None:
                    use("engagement", a.engagement_model, who)
                use_method(a.method or p.method, model, a.predictor or p.predictor, who)
    use("engagement", config.default_engagement_model, "default_engagement_model")
    use_method(config.solve.method, config.default_engagement_model, None, "solve")
    return sorted(out.values(), key=lambda n: (n.kind != "engagement", n.name))


def _probe_problem(model, teams: int, sizes: tuple[int, ...], seed: int = 0):
    """A generated pool (no rules) of ``sizes`` teams with two spare players per team, scored by ``model``."""
    import numpy as np

    from mgmatch.core.instance import parse_instance
    from mgmatch.core.problem import Problem

    rng = np.random.default_rng(seed)
    n = sum(sizes) + 2 * teams
    feats = rng.normal(size=(n, model.feature_dim))
    if model.feature_mean is not None and model.feature_scale is not None:
        feats = feats * np.asarray(model.feature_scale) + np.asarray(model.feature_mean)
    obj = {"teams": teams, "team_sizes": list(sizes),
           "players": [{"id": f"probe{i}", "features": [float(v) for v in row]} for i, row in enumerate(feats)]}
    return Problem(parse_instance(obj), model, model_name=model.name)


def _synthetic_model(teams: int, emb_dim: int, seed: int = 0):
    """A small random engagement model making ``emb_dim``-wide embeddings (for a predictor no pool uses)."""
    import numpy as np

    from mgmatch.core.engagement import parse_engagement

    rng = np.random.default_rng(seed)
    fdim = 4

    def layer(out: int, inp: int) -> dict[str, Any]:
        return {"weight": rng.normal(scale=0.3, size=(out, inp)).tolist(), "bias": [0.0] * out}

    return parse_engagement({"teams": teams, "feature_dim": fdim, "player_layers": [layer(emb_dim, fdim)],
                             "head_layers": [layer(1, emb_dim * teams)]}, "probe")


def verify(config) -> tuple[list[dict[str, Any]], list[str]]:
    """Check every named model; returns (one result per model, problem lines)."""
    from mgmatch.app.models_hub import EngagementModels, verify_pin
    from mgmatch.core.errors import InvalidInput

    named = named_models(config)
    hub = EngagementModels(config.models)
    engagement: dict[str, Any] = {}
    results, problems = [], []
    for n in named:
        if n.kind != "engagement":
            continue
        try:
            engagement[n.name] = hub.get(n.name)
            results.append({**asdict(n), "ok": True})
        except InvalidInput as err:
            msg = f"engagement {n.name}: {err}" if n.source == "file" else f"engagement {n.name}: {err.message}"
            problems.append(msg)
            results.append({**asdict(n), "ok": False, "problem": msg})
    # which pool shape and engagement model each predictor serves
    shape: dict[str, tuple[Any, int, tuple[int, ...]]] = {}
    for p in config.pools:
        from mgmatch.solvers.base import method_info

        model = engagement.get(p.engagement_model) if p.engagement_model else None
        for method, pred in [(p.method, p.predictor)] + [(a.method or p.method, a.predictor or p.predictor)
                                                         for e in config.experiments
                                                         if not e.pools or p.name in e.pools for a in e.arms]:
            try:
                name = method_info(method).predictor_name(p.engagement_model, pred)
            except InvalidInput:
                continue
            if name is not None and name not in shape:
                shape[name] = (model, p.teams, p.sizes)
    for n in named:
        if n.kind != "predictor":
            continue
        try:
            if n.source == "unknown":
                raise InvalidInput(n.name, "no models.predictors entry and no shipped predictor of that name")
            from mgmatch.app.config import ModelFile
            from mgmatch.models.runtime import OnnxPredictor

            if n.source == "file":
                entry = next(e for e in config.models.predictors if e.name == n.name)
            else:
                entry = ModelFile(name=n.name, path=Path(n.path), sha256=n.sha256)
            if n.sha256 is None:
                raise InvalidInput(f"{n.config_field}.sha256", f"{entry.path}: no pinned sha256 (config or sidecar)")
            verify_pin(entry, "predictors")
            pred = OnnxPredictor(entry.path, sha256=n.sha256)
            model, teams, sizes = shape.get(n.name, (None, pred.teams, (1,) * pred.teams))
            if model is None or model.embed_dim != pred.emb_dim or teams != pred.teams:
                if model is not None:
                    raise InvalidInput(n.name, f"the predictor reads {pred.emb_dim}-wide embeddings of {pred.teams} "
                                               f"teams; its pool's model makes {model.embed_dim}-wide of {teams}")
                model = _synthetic_model(pred.teams, pred.emb_dim)
            problem = _probe_problem(model, teams, sizes)
            (p,) = pred.predict([problem])
            import numpy as np

            if p.shape != (problem.instance.n, teams) or not np.isfinite(p).all():
                raise InvalidInput(n.name, f"the network answered {p.shape} (finite: {bool(np.isfinite(p).all())}), "
                                           f"expected ({problem.instance.n}, {teams}) finite numbers")
            results.append({**asdict(n), "ok": True, "version": pred.version, "device": pred.device})
        except Exception as err:  # a user's file fails in onnxruntime's own ways (InvalidProtobuf, Fail, …)
            text = str(err).strip().splitlines()
            msg = f"predictor {n.name}: {text[0] if text else type(err).__name__}"
            problems.append(msg)
            results.append({**asdict(n), "ok": False, "problem": msg})
    return results, problems


def _table(rows: list[dict[str, Any]], status: bool) -> str:
    head = ["kind", "name", "source", "sha256", "path", "used_by"] + (["status"] if status else [])
    lines = ["\t".join(head)]
    for r in rows:
        cells = [r["kind"], r["name"], r["source"], (r.get("sha256") or "-")[:12], r.get("path") or "-",
                 ", ".join(r.get("used_by") or []) or "-"]
        if status:
            cells.append("ok" if r["ok"] else "FAIL")
        lines.append("\t".join(cells))
    return "\n".join(lines)


@models_app.command("list", help="List the engagement models and predictors a service config names (name, source, "
                                 "pinned SHA-256, path, who uses it). Tab-separated; --json for one JSON document.")
def list_cmd(
    config: Annotated[Path, typer.Option("--config", help=_CONFIG_HELP)],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    from mgmatch.app.config import load_config

    rows = [asdict(n) for n in named_models(load_config(config))]
    if as_json:
        emit({"models": rows})
    else:
        sys.stdout.write(_table(rows, status=False) + "\n")


@models_app.command("verify", help="Check every model a service config names: the file exists, matches its pinned "
                                   "SHA-256 and loads (engagement JSON parsed; ONNX session created and run once on a "
                                   "generated pool). Exit 0 when all pass, 1 with one line per problem on stderr.")
def verify_cmd(
    config: Annotated[Path, typer.Option("--config", help=_CONFIG_HELP)],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    from mgmatch.app.config import load_config

    results, problems = verify(load_config(config))
    if as_json:
        emit({"ok": not problems, "models": results})
    else:
        sys.stdout.write(_table(results, status=True) + "\n")
    for line in problems:
        sys.stderr.write(f"mgmatch: {line.splitlines()[0]}\n")
    if problems:
        raise typer.Exit(1)
