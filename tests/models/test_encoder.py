"""The numpy graph encoder: Table 7/8 features, batching offsets, and a sound big-M linearization."""

from __future__ import annotations

import numpy as np
import pytest

from mgmatch.core.compiler import cond_eval
from mgmatch.core.engagement import load_engagement
from mgmatch.core.instance import load_instance, parse_instance
from mgmatch.core.presets import generate_instances, load_model
from mgmatch.core.problem import Problem
from mgmatch.models.encoder import (
    COND_COLUMNS,
    CONS_COLUMNS,
    FEATURE_VERSION,
    VAR_COLUMNS,
    _BigM,
    batch,
    encode,
)

V = {c: k for k, c in enumerate(VAR_COLUMNS)}
C = {c: k for k, c in enumerate(CONS_COLUMNS)}


@pytest.fixture
def example(example_paths) -> Problem:
    return Problem(load_instance(example_paths["instance"]), load_engagement(example_paths["engagement"]))


def test_nodes_edges_and_raw_features_follow_the_compiled_form(example):
    comp = example.compiled
    g = encode(example)
    n_lin, n_log = len(comp.rows), len(comp.logical)
    assert FEATURE_VERSION and g.var_feat.shape == (comp.n_vars, len(VAR_COLUMNS))
    assert g.cons_feat.shape == (n_lin + n_log, len(CONS_COLUMNS))
    rows = comp.rows + [lr.then for lr in comp.logical]
    assert g.edge_index.shape[1] == sum(len(r.vars) for r in rows)
    # linear-or-logical flag: base/linear rows first, then one node per logical consequent
    assert g.cons_feat[:n_lin, C["is_linear"]].tolist() == [1.0] * n_lin
    assert g.cons_feat[n_lin:, C["is_linear"]].tolist() == [0.0] * n_log
    # sense one-hot, rhs and coefficient sums per row
    for c, r in enumerate(rows):
        onehot = g.cons_feat[c, [C["sense_le"], C["sense_ge"], C["sense_eq"]]]
        assert onehot.sum() == 1 and onehot[{"<=": 0, ">=": 1, "==": 2}[r.sense]] == 1
        assert g.cons_feat[c, C["rhs"]] == pytest.approx(r.rhs)
        assert g.cons_feat[c, C["coef_sum"]] == pytest.approx(r.coefs.sum(), rel=1e-6)
        assert g.cons_feat[c, C["n_terms"]] == len(r.vars)
    assert g.cons_feat[0, C["serial"]] == 0 and g.cons_feat[-1, C["serial"]] == 1
    # variable degree and min/max coefficient agree with the rows that mention it
    for v in range(comp.n_vars):
        coefs = [c for r in rows for vv, c in zip(r.vars, r.coefs, strict=True) if vv == v]
        assert g.var_feat[v, V["out_degree"]] == len(coefs)
        if coefs:
            assert g.var_feat[v, V["coef_max"]] == pytest.approx(max(coefs), rel=1e-6)
            assert g.var_feat[v, V["coef_min"]] == pytest.approx(min(coefs), rel=1e-6)
    assert (g.var_feat[:, V["is_binary"]] == 1).all()
    assert g.var_feat[:, V["is_x"]].sum() == comp.n_x
    # x_ij → variable i*D + j, player embeddings from the engagement model
    N, D = example.instance.n, example.instance.teams
    assert g.x_index.shape == (N, D) and g.x_index[3, 1] == comp.x(3, 1)
    np.testing.assert_allclose(g.player_emb, example.embeddings, rtol=1e-6)


def test_logical_features_are_plus_one_selected_minus_one_negated(example):
    # rule 7: if (p01 on team 0 AND NOT p08 on team 1) then x[p02,1] + x[p03,1] <= 0
    comp = example.compiled
    g = encode(example)
    idx = example.instance.index
    sign = COND_COLUMNS.index("sign")
    lits = {(int(v), int(c)): float(f[sign]) for v, c, f in zip(g.cond_index[0], g.cond_index[1], g.cond_feat, strict=True)}
    node = len(comp.rows)  # the only logical constraint node
    assert lits == {(comp.x(idx["p01"], 0), node): 1.0, (comp.x(idx["p08"], 1), node): -1.0}
    assert g.var_feat[comp.x(idx["p08"], 1), V["cond_degree"]] == 1


def test_linear_encoding_drops_the_logical_rows(example):
    g = encode(example, "linear")
    assert g.cons_feat.shape[0] == len(example.compiled.rows)
    assert g.cond_index.shape == (2, 0) and (g.cons_feat[:, C["is_linear"]] == 1).all()
    with pytest.raises(ValueError):
        encode(example, "nope")


def test_batch_offsets_padding_and_split():
    m = load_model("3v3")
    probs = [Problem(i, m) for i in generate_instances("3v3", 3, seed=5)]
    gs = [encode(p) for p in probs]
    gb = batch(gs)
    ns = [p.instance.n for p in probs]
    assert gb.player_emb.shape == (3, max(ns), m.embed_dim)
    assert gb.player_mask.sum(1).tolist() == ns
    v0, c0 = gs[0].var_feat.shape[0], gs[0].cons_feat.shape[0]
    e0, q0 = gs[0].edge_index.shape[1], gs[0].cond_index.shape[1]
    np.testing.assert_array_equal(gb.edge_index[:, e0:e0 + gs[1].edge_index.shape[1]], gs[1].edge_index + [[v0], [c0]])
    np.testing.assert_array_equal(gb.cond_index[:, q0:q0 + gs[1].cond_index.shape[1]], gs[1].cond_index + [[v0], [c0]])
    # x of graph 1, player 2, team 1: its variable node and its token in the [B, Nmax, D] grid
    k = ns[0] * 2 + 2 * 2 + 1
    assert gb.x_var[k] == v0 + gs[1].x_index[2, 1]
    assert gb.x_token[k] == (1 * max(ns) + 2) * 2 + 1
    parts = gb.split(np.arange(len(gb.x_var)))
    assert [p.shape for p in parts] == [(n, 2) for n in ns]
    assert parts[2][0, 0] == 2 * (ns[0] + ns[1])


def _activations(model, emb, team_of):
    t = np.concatenate([(team_of == j).astype(float) @ emb for j in range(model.teams)])
    pre, h = [], t
    for k, (w, b) in enumerate(model.head_weights):
        a = w @ h + b
        pre.append(a)
        h = np.maximum(a, 0) if k < len(model.head_weights) - 1 else a
    return pre


def test_bigm_rows_are_a_sound_linearization_of_engagement_and_logic():
    rng = np.random.default_rng(0)
    m = load_model("3v3")
    inst = generate_instances("3v3", 1, seed=11)[0]
    prob = Problem(inst, m)
    comp = prob.compiled
    emb = prob.embeddings
    lin = _BigM(comp, m, emb)
    assert any(n[3] is not None for n in lin.neurons)  # some neuron is unstable: a binary and big-M rows
    n_all = comp.n_vars + len(lin.binary)
    N, D = inst.n, inst.teams
    for _ in range(40):
        team_of = np.full(N, -1)
        chosen = rng.permutation(N)[: sum(inst.sizes)]
        team_of[chosen] = np.repeat(np.arange(D), inst.sizes)
        xhat = np.zeros(n_all)
        xhat[[comp.x(i, team_of[i]) for i in range(N) if team_of[i] >= 0]] = 1
        pre = _activations(m, emb, team_of)
        for li, k, y, h, lo, hi in lin.neurons:
            a = pre[li - 1][k]
            assert lo - 1e-6 <= a <= hi + 1e-6  # interval bounds hold over every team assignment
            if y >= 0:
                xhat[y] = max(a, 0.0)
            if h is not None:
                xhat[h] = float(a > 0)
        for w, c in lin.cond_aux:
            xhat[w] = float(cond_eval(c, xhat))
        # the engagement rows hold at the true activations, and the objective is EnG's value
        assert all(r.holds(xhat, tol=1e-6) for r in lin.rows if r.tag.startswith("relu"))
        assert float(xhat[lin.obj_vars] @ lin.obj_coefs + lin.obj_const) == pytest.approx(prob.objective(team_of), abs=1e-6)
        # each logical row: the big-M rows hold exactly when (condition ⇒ consequent)
        for k, lr in enumerate(comp.logical):
            mine = [r for r in lin.rows if r.tag.startswith(f"lc{k}.")]
            want = (not cond_eval(lr.cond, xhat)) or bool(lr.then.holds(xhat))
            assert all(r.holds(xhat) for r in mine) == want


def test_bigm_encoding_marks_continuous_neurons_and_objective(example_paths):
    inst = parse_instance({"teams": 2, "team_size": 1, "players": [{"id": f"p{i}", "features": [i, 1, 0, 2]} for i in range(3)],
                           "rules": [{"kind": "if", "when": {"any": [["p0", 0], ["p1", 1]]},
                                      "then": {"terms": [["p2", 0, 1]], "sense": "==", "rhs": 0}}]})
    prob = Problem(inst, load_engagement(example_paths["engagement"]))
    g = encode(prob, "bigm")
    cont = g.var_feat[:, V["is_binary"]] == 0
    assert cont.any() and (g.var_feat[cont, V["obj_coef"]] != 0).any()
    assert (g.var_feat[: prob.compiled.n_x, V["obj_coef"]] == 0).all()
    assert g.cond_index.shape == (2, 0) and (g.cons_feat[:, C["is_linear"]] == 1).all()


def test_engagement_gradient_matches_finite_differences():
    from mgmatch.models.encoder import engagement_gradient

    m = load_model("12v12")
    inst = generate_instances("12v12", 1, seed=2)[0]
    prob = Problem(inst, m)
    emb = prob.embeddings
    N, D = inst.n, inst.teams
    xbar = np.tile(np.asarray(inst.sizes, dtype=float) / N, (N, 1))

    def eng(x):
        return float(m.head(np.concatenate([x[:, j] @ emb for j in range(D)])))

    g = engagement_gradient(m, emb, inst.sizes)
    eps = 1e-6
    for i, j in [(0, 0), (3, 1), (N - 1, 1)]:
        x = xbar.copy()
        x[i, j] += eps
        assert g[i, j] == pytest.approx((eng(x) - eng(xbar)) / eps, rel=1e-3, abs=1e-6)
    col = VAR_COLUMNS.index("eng_grad")
    np.testing.assert_allclose(encode(prob).var_feat[: N * D, col], g.reshape(-1), rtol=1e-5, atol=1e-6)


def _random_model(teams: int, feature_dim: int, seed: int):
    from mgmatch.core.engagement import parse_engagement

    r = np.random.default_rng(seed)

    def layer(o, i):
        return {"weight": r.normal(0, 0.5, (o, i)).tolist(), "bias": r.normal(0, 0.1, o).tolist()}

    return parse_engagement({"format": "mgmatch-engagement/v1", "teams": teams, "feature_dim": feature_dim,
                             "player_layers": [layer(8, feature_dim), layer(4, 8)],
                             "head_layers": [layer(6, 4 * teams), layer(1, 6)]})


def _own_instance(n: int, sizes: list[int], feature_dim: int, seed: int):
    r = np.random.default_rng(seed)
    players = [{"id": f"u{k}", "features": r.normal(0, 1, feature_dim).round(4).tolist(),
                "skill": float(1500 + 100 * r.normal())} for k in range(n)]
    return parse_instance({"format": "mgmatch-instance/v1", "teams": len(sizes), "team_sizes": sizes,
                           "players": players, "rules": [{"kind": "skill_balance", "max_diff": 300.0},
                                                         {"kind": "avoid", "players": ["u0", "u1"],
                                                          "scope": "team"}]})


@pytest.mark.parametrize("encoding", ["logical", "linear", "bigm"])
def test_any_team_count_sizes_and_feature_width_encode_and_batch(encoding):
    """No preset assumed: 3 teams of sizes 2, 3, 1 and 4 features, batched with a pool of another size."""
    from mgmatch.core.engagement import engagement_gradient

    m = _random_model(3, 4, seed=1)
    probs = [Problem(_own_instance(n, [2, 3, 1], 4, seed=n), m) for n in (8, 11)]
    gs = [encode(p, encoding) for p in probs]
    for p, g in zip(probs, gs, strict=True):
        N = p.instance.n
        assert g.x_index.shape == (N, 3) and g.player_emb.shape == (N, 4)
        grad = engagement_gradient(m, p.embeddings, (2, 3, 1))
        np.testing.assert_allclose(g.var_feat[g.x_index.reshape(-1), V["eng_grad"]], grad.reshape(-1), rtol=1e-5,
                                   atol=1e-6)
        # the team-size rows Σ_i x_ij = K_j, one per team with its own size
        eq = [(int(g.cons_feat[c, C["n_terms"]]), float(g.cons_feat[c, C["rhs"]])) for c in range(len(g.cons_feat))
              if g.cons_feat[c, C["sense_eq"]] == 1 and g.cons_feat[c, C["n_terms"]] == N]
        assert sorted(rhs for _, rhs in eq) == [1.0, 2.0, 3.0]
    gb = batch(gs)
    assert gb.player_emb.shape == (2, 11, 4) and gb.shapes == [(8, 3), (11, 3)]
    k = 8 * 3 + 5 * 3 + 2  # graph 1, player 5, team 2
    assert gb.x_token[k] == (1 * 11 + 5) * 3 + 2
    assert gb.x_var[k] == gs[0].var_feat.shape[0] + gs[1].x_index[5, 2]
