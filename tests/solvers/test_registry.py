"""The solver registry: what each method declares (predictor, seed) and the one factory that obeys it."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from mgmatch.core.errors import InvalidInput
from mgmatch.solvers.base import make_solver, method_info, methods, register


def _params(factory) -> set[str]:
    target = factory.__init__ if inspect.isclass(factory) else factory
    return {p.name for p in inspect.signature(target).parameters.values()
            if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}


class _Uniform:
    version = "uniform"

    def predict(self, problems):
        return [np.full((len(p.instance.players), p.instance.teams), 0.5) for p in problems]


def test_declarations_match_what_each_factory_takes():
    names = list(methods())
    assert {"mgmatch", "bgcn", "random", "exact", "surrogate"} <= set(names)
    for name in names:
        info = method_info(name)
        takes = _params(info.factory)
        # a randomized solver names its seed; a method declared seeded must accept one
        assert info.seeded == ("seed" in takes), name
        if info.needs_predictor:
            assert "predictor" in takes, name
    assert {n for n in names if method_info(n).needs_predictor} == {"mgmatch", "bgcn"}
    assert {n for n in names if method_info(n).seeded} == {"random", "optmatch", "eomm", "local-search", "lobby"}


def test_factory_refuses_a_predictor_method_without_its_predictor():
    for name in ("mgmatch", "bgcn"):
        with pytest.raises(InvalidInput, match="needs a solution predictor") as err:
            make_solver(name, seed=3)
        assert err.value.field == "predictor"
    solver = make_solver("bgcn", predictor=_Uniform(), seed=3)  # the seed is not for it: not passed
    assert solver.name == "bgcn" and solver.predictor.version == "uniform"


def test_factory_passes_the_seed_to_seeded_methods_only_and_ignores_unneeded_predictors():
    assert make_solver("random", seed=11).seed == 11
    assert make_solver("optmatch", seed=5).seed == 5
    # methods that take neither get neither (their constructors would reject unknown keywords)
    for name in methods():
        if not method_info(name).needs_predictor:
            assert make_solver(name, predictor=_Uniform(), seed=2) is not None


def test_unknown_method_names_the_field():
    with pytest.raises(InvalidInput, match="unknown method 'nope'") as err:
        make_solver("nope")
    assert err.value.field == "method"
    with pytest.raises(InvalidInput) as err:
        method_info("nope", field="pools[0].method")
    assert err.value.field == "pools[0].method"


def test_predictor_name_convention():
    assert method_info("mgmatch").predictor_name("3v3") == "3v3"
    assert method_info("bgcn").predictor_name("12v12") == "12v12-bgcn"
    assert method_info("bgcn").predictor_name("3v3", "my-export") == "my-export"
    assert method_info("mgmatch").predictor_name(None) is None  # an anonymous model names no predictor
    assert method_info("random").predictor_name("3v3", "x") is None


def test_register_rejects_a_suffix_without_a_predictor():
    with pytest.raises(ValueError, match="predictor_suffix"):
        register("odd", "never registered", predictor_suffix="-x")
    assert "odd" not in methods()
