"""Graph encoder: a :class:`~mgmatch.core.problem.Problem` → the bi-modal bipartite graph (numpy only).

MGMatch §4.2.1 and appendices G/H. Nodes:

- variable nodes: every variable of the compiled standard form (x[i, j] first, index ``i*D + j``,
  then the auxiliaries; in the big-M encoding also the ReLU neurons of the engagement head);
- constraint nodes: the linear rows (including the base rows Σ_j x_ij ≤ 1 and Σ_i x_ij = K_j),
  then the consequent row of each logical row (flag ``is_linear`` = 0);
- coefficient edges variable → constraint (feature: the coefficient);
- condition edges variable → logical constraint, one per literal of the condition (Table 8: +1 if
  the variable is selected, −1 if it is negated by NOT; plus whether the literal sits under an OR);
- the links x[i, j] → (player i, team j) for the team-embedding network: ``x_index`` [N, D] and the
  player embeddings of EnG's feature extractor [N, E].

Three encodings (recorded in a shipped model's sidecar so the runtime re-encodes the same way):
``logical=True`` (MGMatch), ``logical=False`` (BGCN: linear rows only) and ``bigm=True``
(BGCN-BigM: logical rows and the engagement network's ReLUs linearized with big-M and interval
bounds, everything a linear row, no condition edges).

Feature columns are named and versioned: bump :data:`FEATURE_VERSION` when a column changes, and a
shipped model trained on other columns refuses to load.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mgmatch.core.compiler import CAnd, CCond, CLit, Compiled, COr, Row
from mgmatch.core.engagement import EngagementModel, engagement_gradient
from mgmatch.core.problem import Problem

FEATURE_VERSION = "mgmatch-graph/v2"

VAR_COLUMNS = ("out_degree", "coef_mean", "coef_max", "coef_min", "is_binary", "is_x", "obj_coef", "cond_degree",
               "eng_grad")
CONS_COLUMNS = ("coef_mean", "coef_sum", "rhs", "sense_le", "sense_ge", "sense_eq", "serial", "is_linear", "n_terms")
EDGE_COLUMNS = ("coef",)
COND_COLUMNS = ("sign", "in_or")

ENCODINGS = ("logical", "linear", "bigm")

_SENSES = {"<=": 0, ">=": 1, "==": 2}


@dataclass
class Graph:
    """One encoded instance.

    Shapes:
        var_feat [V, len(VAR_COLUMNS)] float32, cons_feat [C, len(CONS_COLUMNS)] float32,
        edge_index [2, E] int64 (row 0 variable, row 1 constraint), edge_feat [E, 1] float32,
        cond_index [2, Q] int64 (row 0 variable, row 1 constraint), cond_feat [Q, 2] float32,
        x_index [N, D] int64 (variable node of x[i, j]), player_emb [N, Emb] float32.
    """

    var_feat: np.ndarray
    cons_feat: np.ndarray
    edge_index: np.ndarray
    edge_feat: np.ndarray
    cond_index: np.ndarray
    cond_feat: np.ndarray
    x_index: np.ndarray
    player_emb: np.ndarray

    @property
    def n_players(self) -> int:
        return int(self.x_index.shape[0])

    @property
    def n_teams(self) -> int:
        return int(self.x_index.shape[1])


@dataclass
class GraphBatch:
    """Several graphs as one disconnected graph (node offsets added), the network's input.

    Player embeddings are padded to the largest pool: ``player_emb`` [B, Nmax, Emb] with
    ``player_mask`` [B, Nmax] (1 = real player). ``x_var`` [X] lists the variable node of every
    x[i, j] of every graph (graph-major, then i, then j) and ``x_token`` [X] its position in the
    flattened [B, Nmax, D] token grid of the team-embedding network. ``shapes[b]`` = (N_b, D).
    """

    var_feat: np.ndarray
    cons_feat: np.ndarray
    edge_index: np.ndarray
    edge_feat: np.ndarray
    cond_index: np.ndarray
    cond_feat: np.ndarray
    x_var: np.ndarray
    x_token: np.ndarray
    player_emb: np.ndarray
    player_mask: np.ndarray
    shapes: list[tuple[int, int]]

    INPUT_NAMES = ("var_feat", "cons_feat", "edge_index", "edge_feat", "cond_index", "cond_feat",
                   "x_var", "x_token", "player_emb", "player_mask")

    def inputs(self) -> dict[str, np.ndarray]:
        """The named arrays fed to the network (torch or ONNX)."""
        return {k: getattr(self, k) for k in self.INPUT_NAMES}

    def split(self, flat: np.ndarray) -> list[np.ndarray]:
        """Cut a per-x output [X] back into one [N_b, D] array per graph."""
        out, s = [], 0
        for n, d in self.shapes:
            out.append(np.asarray(flat[s:s + n * d]).reshape(n, d))
            s += n * d
        return out


def encode(problem: Problem, encoding: str = "logical") -> Graph:
    """Encode one problem.

    Args:
        problem: the instance bound to its engagement model.
        encoding: ``"logical"`` (MGMatch, bi-modal), ``"linear"`` (BGCN: logical rows dropped) or
            ``"bigm"`` (BGCN-BigM: everything linearized with big-M).
    """
    if encoding not in ENCODINGS:
        raise ValueError(f"unknown encoding {encoding!r}; expected one of {ENCODINGS}")
    comp = problem.compiled
    emb = np.asarray(problem.embeddings, dtype=np.float64)
    N, D = comp.n_players, comp.n_teams
    var_binary = [True] * comp.n_vars
    obj = np.zeros(comp.n_vars)
    rows: list[Row] = list(comp.rows)
    logical: list[tuple[CCond, Row]] = []
    if encoding == "logical":
        logical = [(lr.cond, lr.then) for lr in comp.logical]
    elif encoding == "bigm":
        lin = _BigM(comp, problem.model, emb)
        rows += lin.rows
        var_binary += lin.binary
        obj = np.concatenate([obj, np.zeros(len(lin.binary))])
        obj[lin.obj_vars] = lin.obj_coefs
    n_vars = len(var_binary)

    all_rows = rows + [r for _, r in logical]
    C = len(all_rows)
    sizes = np.fromiter((len(r.vars) for r in all_rows), dtype=np.int64, count=C)
    ev = np.concatenate([r.vars for r in all_rows]).astype(np.int64) if C else np.zeros(0, np.int64)
    ec = np.concatenate([r.coefs for r in all_rows]).astype(np.float64) if C else np.zeros(0)
    econs = np.repeat(np.arange(C, dtype=np.int64), sizes)

    deg = np.bincount(ev, minlength=n_vars).astype(np.float64)
    csum = np.bincount(ev, weights=ec, minlength=n_vars)
    cmax = np.full(n_vars, -np.inf)
    cmin = np.full(n_vars, np.inf)
    np.maximum.at(cmax, ev, ec)
    np.minimum.at(cmin, ev, ec)
    has = deg > 0
    cmean = np.where(has, csum / np.maximum(deg, 1), 0.0)
    cmax = np.where(has, cmax, 0.0)
    cmin = np.where(has, cmin, 0.0)

    q_var: list[int] = []
    q_cons: list[int] = []
    q_feat: list[tuple[float, float]] = []
    for g, (cond, _) in enumerate(logical):
        for lit, in_or in _literals(cond, False):
            q_var.append(lit.var)
            q_cons.append(len(rows) + g)
            q_feat.append((-1.0 if lit.negated else 1.0, 1.0 if in_or else 0.0))
    cond_deg = np.bincount(np.asarray(q_var, dtype=np.int64), minlength=n_vars).astype(np.float64)

    is_x = np.zeros(n_vars)
    is_x[:N * D] = 1.0
    grad = np.zeros(n_vars)
    grad[:N * D] = engagement_gradient(problem.model, emb, comp.sizes).reshape(-1)
    var_feat = np.stack([deg, cmean, cmax, cmin, np.asarray(var_binary, dtype=np.float64), is_x, obj, cond_deg, grad],
                        axis=1)

    cons_feat = np.zeros((C, len(CONS_COLUMNS)))
    if C:
        rsum = np.bincount(econs, weights=ec, minlength=C)
        cons_feat[:, 0] = rsum / np.maximum(sizes, 1)
        cons_feat[:, 1] = rsum
        cons_feat[:, 2] = [r.rhs for r in all_rows]
        cons_feat[np.arange(C), 3 + np.asarray([_SENSES[r.sense] for r in all_rows])] = 1.0
        cons_feat[:, 6] = np.arange(C) / max(C - 1, 1)
        cons_feat[:len(rows), 7] = 1.0
        cons_feat[:, 8] = sizes

    return Graph(
        var_feat=var_feat.astype(np.float32),
        cons_feat=cons_feat.astype(np.float32),
        edge_index=np.stack([ev, econs]).astype(np.int64),
        edge_feat=ec.astype(np.float32)[:, None],
        cond_index=np.asarray([q_var, q_cons], dtype=np.int64).reshape(2, -1),
        cond_feat=np.asarray(q_feat, dtype=np.float32).reshape(-1, len(COND_COLUMNS)),
        x_index=np.arange(N * D, dtype=np.int64).reshape(N, D),
        player_emb=emb.astype(np.float32),
    )


def batch(graphs: list[Graph]) -> GraphBatch:
    """Concatenate graphs with node offsets; pad player embeddings to the largest pool."""
    if not graphs:
        raise ValueError("batch() needs at least one graph")
    D = graphs[0].n_teams
    if any(g.n_teams != D for g in graphs):
        raise ValueError("all graphs of a batch must have the same number of teams")
    emb_dim = graphs[0].player_emb.shape[1]
    nmax = max(g.n_players for g in graphs)
    B = len(graphs)
    v_off = np.cumsum([0] + [g.var_feat.shape[0] for g in graphs])
    c_off = np.cumsum([0] + [g.cons_feat.shape[0] for g in graphs])
    player_emb = np.zeros((B, nmax, emb_dim), dtype=np.float32)
    player_mask = np.zeros((B, nmax), dtype=np.float32)
    x_var, x_token = [], []
    for b, g in enumerate(graphs):
        n = g.n_players
        player_emb[b, :n] = g.player_emb
        player_mask[b, :n] = 1.0
        x_var.append(g.x_index.reshape(-1) + v_off[b])
        i, j = np.divmod(np.arange(n * D), D)
        x_token.append((b * nmax + i) * D + j)
    return GraphBatch(
        var_feat=np.concatenate([g.var_feat for g in graphs]),
        cons_feat=np.concatenate([g.cons_feat for g in graphs]),
        edge_index=np.concatenate([g.edge_index + np.asarray([[v_off[b]], [c_off[b]]]) for b, g in enumerate(graphs)], axis=1),
        edge_feat=np.concatenate([g.edge_feat for g in graphs]),
        cond_index=np.concatenate([g.cond_index + np.asarray([[v_off[b]], [c_off[b]]]) for b, g in enumerate(graphs)], axis=1),
        cond_feat=np.concatenate([g.cond_feat for g in graphs]),
        x_var=np.concatenate(x_var).astype(np.int64),
        x_token=np.concatenate(x_token).astype(np.int64),
        player_emb=player_emb,
        player_mask=player_mask,
        shapes=[(g.n_players, D) for g in graphs],
    )


def _literals(c: CCond, in_or: bool) -> list[tuple[CLit, bool]]:
    """Every literal of an NNF condition with whether its nearest connective is an OR."""
    if isinstance(c, CLit):
        return [(c, in_or)]
    out: list[tuple[CLit, bool]] = []
    for a in c.args:
        out.extend(_literals(a, isinstance(c, COr)))
    return out


class _BigM:
    """The big-M linearization (paper appendix D) as extra linear rows and variables.

    Logical rows: an indicator z ≥ condition (one auxiliary per AND/OR node; AND: w ≥ Σ lit − (n−1),
    OR: w ≥ lit each), and the consequent relaxed by M(1 − z) with M from the row's own bounds.
    Engagement head: the first layer's pre-activation is linear in x (a_k = Σ_ij (W_k,j · e_i) x_ij
    + b_k); per-neuron bounds by interval arithmetic over feasible team sums (team j takes K_j
    players, so a bound adds the K_j largest / smallest coefficients); a stably active neuron is
    y = a (one equality), a stably inactive one is dropped (y ≡ 0), an unstable one gets a binary h
    with y ≥ a, y ≤ a − L(1 − h), y ≤ U h. The output layer's weights become objective
    coefficients of the last hidden layer (or of x when the head is a single linear layer).
    """

    def __init__(self, comp: Compiled, model: EngagementModel, emb: np.ndarray):
        self.comp = comp
        self.n = comp.n_vars
        self.rows: list[Row] = []
        self.binary: list[bool] = []
        self.cond_aux: list[tuple[int, CCond]] = []            # indicator variable of each AND/OR node
        self.neurons: list[tuple[int, int, int, int | None, float, float]] = []  # layer, k, y, h, L, U
        self.obj_vars = np.zeros(0, dtype=np.int64)
        self.obj_coefs = np.zeros(0)
        self.obj_const = 0.0
        for k, lr in enumerate(comp.logical):
            z = self._cond_var(lr.cond, f"lc{k}")
            self._relax(lr.then, z, f"lc{k}")
        self._head(model, emb)

    def _var(self, binary: bool) -> int:
        self.binary.append(binary)
        self.n += 1
        return self.n - 1

    def _row(self, terms: dict[int, float], sense: str, rhs: float, tag: str) -> None:
        keys = sorted(v for v, c in terms.items() if c != 0.0)
        self.rows.append(Row(np.asarray(keys, dtype=np.int64), np.asarray([terms[k] for k in keys], dtype=np.float64),
                             sense, float(rhs), origin=-3, tag=tag))

    def _cond_var(self, c: CCond, tag: str) -> tuple[int, bool]:
        """A (variable, negated) pair that is 1 whenever ``c`` holds."""
        if isinstance(c, CLit):
            return c.var, c.negated
        kids = [self._cond_var(a, tag) for a in c.args]
        w = self._var(True)
        self.cond_aux.append((w, c))
        if isinstance(c, CAnd):  # w ≥ Σ lit − (n − 1), lit = x or 1 − x
            terms = {w: 1.0}
            rhs = -(len(kids) - 1.0)
            for v, neg in kids:
                terms[v] = terms.get(v, 0.0) + (1.0 if neg else -1.0)
                rhs += -1.0 if neg else 0.0
            self._row(terms, ">=", rhs, f"{tag}.and")
        else:  # OR: w ≥ lit for each
            for v, neg in kids:
                if neg:  # w ≥ 1 − v
                    self._row({w: 1.0, v: 1.0}, ">=", 1.0, f"{tag}.or")
                else:
                    self._row({w: 1.0, v: -1.0}, ">=", 0.0, f"{tag}.or")
        return w, False

    def _relax(self, row: Row, z: tuple[int, bool], tag: str) -> None:
        zv, zneg = z
        hi = float(np.clip(row.coefs, 0, None).sum())
        lo = float(np.clip(row.coefs, None, 0).sum())
        base = dict(zip(row.vars.tolist(), row.coefs.tolist(), strict=True))
        for sense in ((row.sense,) if row.sense != "==" else ("<=", ">=")):
            # a·x ≤ b + M(1 − z) with M = hi − b; a·x ≥ b − M(1 − z) with M = b − lo
            m = (hi - row.rhs) if sense == "<=" else (row.rhs - lo)
            m = max(m, 0.0)
            sgn = 1.0 if sense == "<=" else -1.0
            terms = dict(base)
            # z literal value ζ = z or 1 − z; term sgn·M·ζ on the left, sgn·M on the right
            if zneg:
                terms[zv] = terms.get(zv, 0.0) - sgn * m
                rhs = row.rhs
            else:
                terms[zv] = terms.get(zv, 0.0) + sgn * m
                rhs = row.rhs + sgn * m
            self._row(terms, sense, rhs, f"{tag}.bigm")

    def _head(self, model: EngagementModel, emb: np.ndarray) -> None:
        comp = self.comp
        N, D, E = comp.n_players, comp.n_teams, emb.shape[1]
        layers = model.head_weights
        W0, b0 = layers[0]
        # coefficient of x[i, j] in neuron k of the first layer: W0[k, jE:(j+1)E] · e_i
        coef = np.stack([emb @ W0[:, j * E:(j + 1) * E].T for j in range(D)], axis=1)  # [N, D, H]
        lo = b0.copy()
        hi = b0.copy()
        for j in range(D):
            K = comp.sizes[j]
            s = np.sort(coef[:, j, :], axis=0)
            lo += s[:K].sum(axis=0)
            hi += s[N - K:].sum(axis=0)
        x_ids = np.arange(N * D)
        # current layer's pre-activations as linear forms over variables
        forms = [(dict(zip(x_ids.tolist(), coef[:, :, k].reshape(-1).tolist(), strict=True)), float(b0[k])) for k in range(len(b0))]
        if len(layers) == 1:
            self.obj_vars = x_ids
            self.obj_coefs = coef[:, :, 0].reshape(-1)
            self.obj_const = float(b0[0])
            return
        for li in range(1, len(layers)):
            outs: list[tuple[int | None, float, float]] = []  # (var or None, lower, upper) post-ReLU
            for k, (terms, bias) in enumerate(forms):
                L, U = float(lo[k]), float(hi[k])
                if U <= 0:
                    outs.append((None, 0.0, 0.0))
                    self.neurons.append((li, k, -1, None, L, U))
                    continue
                y = self._var(False)
                t = {y: 1.0}
                for v, c in terms.items():
                    t[v] = t.get(v, 0.0) - c
                if L >= 0:
                    self._row(t, "==", bias, f"relu{li}.{k}.active")
                    outs.append((y, L, U))
                    self.neurons.append((li, k, y, None, L, U))
                    continue
                h = self._var(True)
                self._row(t, ">=", bias, f"relu{li}.{k}.ge")
                t2 = dict(t)
                t2[h] = -L
                self._row(t2, "<=", bias - L, f"relu{li}.{k}.le")
                self._row({y: 1.0, h: -U}, "<=", 0.0, f"relu{li}.{k}.on")
                outs.append((y, 0.0, U))
                self.neurons.append((li, k, y, h, L, U))
            W, b = layers[li]
            ylo = np.asarray([o[1] for o in outs])
            yhi = np.asarray([o[2] for o in outs])
            if li == len(layers) - 1:
                live = [(k, o[0]) for k, o in enumerate(outs) if o[0] is not None]
                self.obj_vars = np.asarray([v for _, v in live], dtype=np.int64)
                self.obj_coefs = np.asarray([W[0, k] for k, _ in live])
                self.obj_const = float(b[0])
                return
            Wp, Wn = np.clip(W, 0, None), np.clip(W, None, 0)
            lo = Wp @ ylo + Wn @ yhi + b
            hi = Wp @ yhi + Wn @ ylo + b
            forms = [({o[0]: float(W[m, k]) for k, o in enumerate(outs) if o[0] is not None and W[m, k] != 0}, float(b[m]))
                     for m in range(W.shape[0])]
