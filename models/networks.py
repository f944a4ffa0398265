"""MGMatch's multimodal solution-prediction network and the BGCN baselines (paper §4.2, Table 4).

One class, :class:`SolutionNet`, with two switches reproduces the paper's ablation:

====================  =============  ==========  ===================================
arch                  logical (LC)   team (TE)   graph encoding (models.encoder)
====================  =============  ==========  ===================================
``bgcn``              no             no          ``linear`` (logical rows dropped)
``bgcn-bigm``         no             no          ``bigm`` (big-M linearization)
``bgcn-lc``           yes            no          ``logical``
``bgcn-te``           no             yes         ``linear``
``mgmatch``           yes            yes         ``logical``
====================  =============  ==========  ===================================

The bipartite message passing is written with torch-geometric: :class:`EdgeMLPConv` is a
:class:`~torch_geometric.nn.conv.MessagePassing` layer whose message is an MLP of the endpoint and
edge features, and the variable half-convolution is a :class:`~torch_geometric.nn.HeteroConv` over
the two edge types that reach a variable (coefficient edges and condition edges). Only ``"add"``
and ``"mean"`` aggregation is used: PyG reduces both with ``scatter_add_``, which the ONNX exporter
(opset 18) turns into ``ScatterElements(reduction="add")`` and onnxruntime reproduces to ~1e-7;
PyG's max/min aggregation does not export with torch 2.13 (its ONNX path fails in ``torch.full``). The hypernetwork gate (Eq. 12–13) and the team Transformers
(Eq. 16–17) are per-node / per-token tensor code, not message passing.

Every input goes through a signed log (sign(v)·log(1+|v|)) and a per-column standardization
fitted on the training graphs and stored as buffers, so big-M coefficients cannot swamp the rest.

Parameters are created in the same order, with the same shapes, as the hand-written scatter
version this module replaced (shipped models in ``models/shipped/`` were trained with it), and
that version's state-dict keys are renamed on load (:data:`LEGACY_KEYS`), so its checkpoints load
and compute the same function.
"""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import asdict, dataclass

import torch
from torch import Tensor, nn
from torch_geometric.nn import HeteroConv, MessagePassing
from torch_geometric.utils import degree

from .encoder import COND_COLUMNS, CONS_COLUMNS, EDGE_COLUMNS, VAR_COLUMNS, GraphBatch

ARCHS = {
    "mgmatch": {"logical": True, "team": True, "encoding": "logical"},
    "bgcn": {"logical": False, "team": False, "encoding": "linear"},
    "bgcn-bigm": {"logical": False, "team": False, "encoding": "bigm"},
    "bgcn-lc": {"logical": True, "team": False, "encoding": "logical"},
    "bgcn-te": {"logical": False, "team": True, "encoding": "linear"},
}

#: heterogeneous edge types of the variable half-convolution (Eq. 14): constraint → variable
COEF_TO_VAR = ("cons", "coef", "var")
COND_TO_VAR = ("cons", "cond", "var")

#: state-dict key renames from the hand-written scatter version (regex → replacement)
LEGACY_KEYS = (
    (re.compile(r"^msg_c\.(\d+)\."), r"conv_c.\1.mlp."),
    (re.compile(r"^cond\.(\d+)\."), r"conv_cond.\1.mlp."),
    (re.compile(r"^msg_v\.(\d+)\."), r"conv_v.\1.convs.<cons___coef___var>.mlp."),
    (re.compile(r"^msg_q\.(\d+)\."), r"conv_v.\1.convs.<cons___cond___var>.mlp."),
)


@dataclass
class NetConfig:
    arch: str = "mgmatch"
    teams: int = 2
    emb_dim: int = 8          # EnG player-embedding width
    hidden: int = 32          # d_h
    rounds: int = 2           # K
    heads: int = 4
    team_layers: int = 1      # Transformer encoder layers in each of Eq. 16 and Eq. 17

    @property
    def logical(self) -> bool:
        return ARCHS[self.arch]["logical"]

    @property
    def team(self) -> bool:
        return ARCHS[self.arch]["team"]

    @property
    def encoding(self) -> str:
        return ARCHS[self.arch]["encoding"]

    def to_json(self) -> dict:
        return asdict(self)


def mlp(i: int, h: int, o: int, last_relu: bool = False) -> nn.Sequential:
    """Two-layer perceptron with ReLU."""
    layers: list[nn.Module] = [nn.Linear(i, h), nn.ReLU(), nn.Linear(h, o)]
    if last_relu:
        layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class EdgeMLPConv(MessagePassing):
    """Bipartite message passing with an MLP message: m_e = MLP(z_1 ‖ z_2 ‖ …), aggregated at the target.

    For every edge e = (s → t) the parts named by ``layout`` are concatenated — ``"src"`` the
    source node's features h_s, ``"dst"`` the target's h_t, ``"edge"`` the edge's features — and
    the messages into each target are summed (``aggr="add"``) or averaged (``aggr="mean"``; a
    target without edges gets zeros). Both aggregations export to ONNX exactly.

    Args:
        mlp: the message network; its input width is the sum of the parts' widths.
        layout: the order of the concatenated parts, a subset of ``("src", "dst", "edge")``.
        aggr: ``"add"`` or ``"mean"``.

    Shapes:
        x: (x_src [S, F_s], x_dst [T, F_t]); edge_index [2, E] (row 0 source, row 1 target);
        edge_attr [E, F_e] → [T, F_out].
    """

    def __init__(self, mlp: nn.Module, layout: tuple[str, ...], aggr: str = "add"):
        if aggr not in ("add", "mean"):
            raise ValueError(f"aggr {aggr!r} does not export to ONNX exactly; use 'add' or 'mean'")
        if not layout or set(layout) - {"src", "dst", "edge"} or len(set(layout)) != len(layout):
            raise ValueError(f"layout {layout!r} must name distinct parts among 'src', 'dst', 'edge'")
        super().__init__(aggr=aggr)
        self.mlp = mlp
        self.layout = tuple(layout)

    def forward(self, x: tuple[Tensor, Tensor], edge_index: Tensor, edge_attr: Tensor) -> Tensor:
        return self.propagate(edge_index, x=x, edge_attr=edge_attr)

    def message(self, x_i: Tensor, x_j: Tensor, edge_attr: Tensor) -> Tensor:
        parts = {"src": x_j, "dst": x_i, "edge": edge_attr}
        return self.mlp(torch.cat([parts[p] for p in self.layout], dim=-1))

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(layout={self.layout}, aggr={self.aggr!r})"


def _rename_legacy_keys(module: nn.Module, state_dict: dict, prefix: str, *args) -> None:
    """Load-state-dict pre-hook: rename the scatter version's keys (:data:`LEGACY_KEYS`) in place."""
    for key in [k for k in state_dict if k.startswith(prefix)]:
        rest = key[len(prefix):]
        for pattern, repl in LEGACY_KEYS:
            new, hits = pattern.subn(repl, rest)
            if hits:
                state_dict[prefix + new] = state_dict.pop(key)
                break


class Normalizer(nn.Module):
    """sign(v)·log(1+|v|), then (v − mean)/std with statistics fitted once on training data.

    Args:
        width: the number of feature columns.

    Shapes:
        v [M, width] → [M, width].
    """

    def __init__(self, width: int):
        super().__init__()
        self.register_buffer("mean", torch.zeros(width))
        self.register_buffer("std", torch.ones(width))

    @staticmethod
    def squash(v: Tensor) -> Tensor:
        return torch.sign(v) * torch.log1p(torch.abs(v))

    def fit(self, v: Tensor) -> None:
        s = self.squash(v.double())
        if s.shape[0] > 0:
            self.mean.copy_(s.mean(0).float())
            self.std.copy_(s.std(0, unbiased=False).clamp_min(1e-3).float())

    def forward(self, v: Tensor) -> Tensor:
        return (self.squash(v) - self.mean) / self.std


class MaskedEncoderLayer(nn.Module):
    """A Transformer encoder block (pre-norm, multi-head self-attention + FFN) with a key mask.

    Written with matmul and softmax only, so it exports to ONNX with dynamic batch and length.

    Args:
        d: the token width (divisible by ``heads``).
        heads: attention heads.

    Shapes:
        x [B, T, d], mask [B, T] (1 real, 0 padding) → [B, T, d].
    """

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.h, self.dk = heads, d // heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff = mlp(d, 2 * d, d)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        B, T, d = x.shape[0], x.shape[1], x.shape[2]
        q, k, v = self.qkv(self.n1(x)).reshape(B, T, 3, self.h, self.dk).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.dk) + (mask[:, None, None, :] - 1.0) * 1e9
        att = torch.softmax(scores, dim=-1) @ v  # [B, h, T, dk]
        x = x + self.out(att.transpose(1, 2).reshape(B, T, d))
        return x + self.ff(self.n2(x))


class SolutionNet(nn.Module):
    """P(x_ij = 1) for every x variable of a :class:`~mgmatch.models.encoder.GraphBatch`.

    Per round k (K = ``cfg.rounds``) two half-convolutions of the bipartite graph:

    - constraints ← variables (Eq. 10): ``conv_c[k]``, an :class:`EdgeMLPConv` (add) over the
      coefficient edges, then a residual MLP update with LayerNorm;
    - with LC, logical constraints (Eq. 11–13): ``conv_cond[k]``, an :class:`EdgeMLPConv` (mean)
      over the condition edges, gives each logical node its condition embedding; a hypernetwork
      turns it into a per-node target network ψ = (W, b) that Hadamard-gates the node;
    - variables ← constraints (Eq. 14): ``conv_v[k]``, a :class:`~torch_geometric.nn.HeteroConv`
      summing an :class:`EdgeMLPConv` over the reversed coefficient edges and, with LC, one over
      the reversed condition edges; then a residual MLP update with LayerNorm.

    Args:
        cfg: architecture and sizes (:class:`NetConfig`).

    Forward args: the arrays of :meth:`GraphBatch.inputs` as tensors (see :class:`GraphBatch`).

    Shapes:
        var_feat [V, Fv], cons_feat [C, Fc], edge_index [2, E] (row 0 variable, row 1 constraint),
        edge_feat [E, 1], cond_index [2, Q] (row 0 variable, row 1 logical constraint),
        cond_feat [Q, 2], x_var [X], x_token [X], player_emb [B, Nmax, Emb], player_mask [B, Nmax]
        → logits [X] (apply sigmoid for probabilities; :class:`ProbabilityNet` does for export).
    """

    def __init__(self, cfg: NetConfig):
        super().__init__()
        self.cfg = cfg
        d = cfg.hidden
        self.norm_v = Normalizer(len(VAR_COLUMNS))
        # the engagement gradient belongs to the objective (TE) modality: BGCN without TE never sees it
        keep = torch.ones(len(VAR_COLUMNS))
        if not cfg.team:
            keep[VAR_COLUMNS.index("eng_grad")] = 0.0
        self.register_buffer("var_keep", keep)
        self.norm_c = Normalizer(len(CONS_COLUMNS))
        self.norm_e = Normalizer(len(EDGE_COLUMNS))
        # Eq. 9: initial embeddings
        self.emb_v = mlp(len(VAR_COLUMNS), d, d, last_relu=True)
        self.emb_c = mlp(len(CONS_COLUMNS), d, d, last_relu=True)
        self.emb_e = mlp(len(EDGE_COLUMNS), d, d, last_relu=True)
        K, nq = cfg.rounds, len(COND_COLUMNS)
        # the MLPs are created in the scatter version's order, so a seed gives the same parameters
        self.conv_c = nn.ModuleList(EdgeMLPConv(mlp(3 * d, d, d), ("dst", "src", "edge")) for _ in range(K))  # Eq. 10
        self.upd_c = nn.ModuleList(mlp(2 * d, d, d) for _ in range(K))      # MLP_c
        self.ln_c = nn.ModuleList(nn.LayerNorm(d) for _ in range(K))
        msg_v = [mlp(3 * d, d, d) for _ in range(K)]                         # MLP_t2 (Eq. 14)
        self.upd_v = nn.ModuleList(mlp(2 * d, d, d) for _ in range(K))      # MLP_v
        self.ln_v = nn.ModuleList(nn.LayerNorm(d) for _ in range(K))
        msg_q: list[nn.Module] = []
        if cfg.logical:
            self.conv_cond = nn.ModuleList(                                  # MLP_v̂ (Eq. 11), mean
                EdgeMLPConv(mlp(d + nq, d, d), ("src", "edge"), aggr="mean") for _ in range(K))
            self.hyper = nn.ModuleList(nn.Linear(d, d * d + d) for _ in range(K))  # hy(·|φ) (Eq. 12)
            msg_q = [mlp(2 * d + nq, d, d) for _ in range(K)]                 # condition edges (Eq. 14)
            for h in self.hyper:
                nn.init.normal_(h.weight, std=0.3 / d)
                nn.init.zeros_(h.bias)
        with warnings.catch_warnings():
            # constraints are updated by their own half-convolution (conv_c), not by this one
            warnings.filterwarnings("ignore", message=".*do not get updated during message passing.*")
            self.conv_v = nn.ModuleList(
                HeteroConv({COEF_TO_VAR: EdgeMLPConv(msg_v[k], ("src", "dst", "edge")),
                            **({COND_TO_VAR: EdgeMLPConv(msg_q[k], ("src", "dst", "edge"))} if cfg.logical else {})},
                           aggr="sum")
                for k in range(K))
        self.mlp_f = mlp(d, d, d, last_relu=True)                            # Eq. 15
        head_in = d
        if cfg.team:
            self.team_in = nn.Linear(cfg.emb_dim, d)
            self.intra = nn.ModuleList(
                nn.ModuleList(MaskedEncoderLayer(d, cfg.heads) for _ in range(cfg.team_layers)) for _ in range(cfg.teams))
            self.team_pos = nn.Parameter(torch.zeros(cfg.teams, d))
            self.across = nn.ModuleList(MaskedEncoderLayer(d, cfg.heads) for _ in range(cfg.team_layers))
            self.team_out = nn.LayerNorm(d)
            head_in += d
        self.head = mlp(head_in, d, 1)                                        # MLP_S (Eq. 18)
        self.register_load_state_dict_pre_hook(_rename_legacy_keys)

    def fit_normalizers(self, var_feat: Tensor, cons_feat: Tensor, edge_feat: Tensor) -> None:
        """Fit the three input standardizations on training graphs.

        Shapes:
            var_feat [V, Fv], cons_feat [C, Fc], edge_feat [E, 1].
        """
        self.norm_v.fit(var_feat)
        self.norm_c.fit(cons_feat)
        self.norm_e.fit(edge_feat)

    def forward(self, var_feat: Tensor, cons_feat: Tensor, edge_index: Tensor, edge_feat: Tensor,
                cond_index: Tensor, cond_feat: Tensor, x_var: Tensor, x_token: Tensor,
                player_emb: Tensor, player_mask: Tensor) -> Tensor:
        v = self.emb_v(self.norm_v(var_feat) * self.var_keep)
        c = self.emb_c(self.norm_c(cons_feat))
        e = self.emb_e(self.norm_e(edge_feat))
        edge_index_dict = {COEF_TO_VAR: edge_index.flip(0)}
        edge_attr_dict = {COEF_TO_VAR: e}
        if self.cfg.logical:
            # a constraint node is logical iff some condition literal points at it
            is_logical = (degree(cond_index[1], num_nodes=c.shape[0], dtype=c.dtype) > 0).to(c.dtype).unsqueeze(-1)
            edge_index_dict[COND_TO_VAR] = cond_index.flip(0)
            edge_attr_dict[COND_TO_VAR] = cond_feat
        for k in range(self.cfg.rounds):
            # Eq. 10: constraints ← variables (linear rows and the linear part of logical rows)
            agg = self.conv_c[k]((v, c), edge_index, e)
            c = c + self.upd_c[k](torch.cat([c, self.ln_c[k](agg)], dim=1))
            if self.cfg.logical:
                # Eq. 11: condition embeddings, the mean over the literals of the condition variables
                ce = self.conv_cond[k]((v, c), cond_index, cond_feat)
                c = c + is_logical * self.gate(k, c, ce)
            # Eq. 14: variables ← constraints over both edge types, summed
            agg = self.conv_v[k]({"var": v, "cons": c}, edge_index_dict, edge_attr_dict=edge_attr_dict)["var"]
            v = v + self.upd_v[k](torch.cat([v, self.ln_v[k](agg)], dim=1))
        x_embed = self.mlp_f(v[x_var])  # Eq. 15
        if self.cfg.team:
            x_embed = torch.cat([x_embed, self.team_embed(player_emb, player_mask)[x_token]], dim=1)
        return self.head(x_embed).squeeze(-1)  # Eq. 18 (logits)

    def gate(self, k: int, c: Tensor, ce: Tensor) -> Tensor:
        """Eq. 12–13: the hypernetwork makes ψ = (W [d×d], b [d]) per node; returns c ⊙ tanh(W c + b).

        Args:
            k: the round.
            c: constraint embeddings.
            ce: their condition embeddings.

        Shapes:
            c [C, d], ce [C, d] → [C, d].
        """
        psi = self.hyper[k](ce)
        d = c.shape[1]
        W = psi[:, : d * d].reshape(-1, d, d)
        b = psi[:, d * d:]
        t = (W @ c.unsqueeze(-1)).squeeze(-1) + b
        return c * torch.tanh(t)

    def team_embed(self, player_emb: Tensor, player_mask: Tensor) -> Tensor:
        """Eq. 16–17: per-team Transformer encoders, then one across all N×D tokens.

        Args:
            player_emb: EnG's player embeddings, padded to the largest pool.
            player_mask: 1 for a real player, 0 for padding.

        Shapes:
            player_emb [B, Nmax, Emb], player_mask [B, Nmax] → [B·Nmax·D, d].
        """
        B, n = player_emb.shape[0], player_emb.shape[1]
        h0 = self.team_in(player_emb)
        per_team = []
        for j, enc in enumerate(self.intra):
            h = h0 + self.team_pos[j]
            for layer in enc:
                h = layer(h, player_mask)
            per_team.append(h)
        t = torch.stack(per_team, dim=2)  # [B, Nmax, D, d]
        D, d = t.shape[2], t.shape[3]
        t = t.reshape(B, n * D, d)
        mask = player_mask.unsqueeze(-1).expand(B, n, D).reshape(B, n * D)
        for layer in self.across:
            t = layer(t, mask)
        return self.team_out(t).reshape(B * n * D, d)

    def forward_batch(self, gb: GraphBatch) -> Tensor:
        """The logits [X] of a batch (see :meth:`forward`), on the network's device."""
        return self(*batch_tensors(gb, self.var_keep.device))


class ProbabilityNet(nn.Module):
    """The exported graph: sigmoid of :class:`SolutionNet`'s logits.

    Args:
        net: the network.

    Shapes:
        the inputs of :meth:`SolutionNet.forward` → p [X].
    """

    def __init__(self, net: SolutionNet):
        super().__init__()
        self.net = net

    def forward(self, *args: Tensor) -> Tensor:
        return torch.sigmoid(self.net(*args))


def batch_tensors(gb: GraphBatch, device: torch.device | str | None = None) -> tuple[Tensor, ...]:
    """The batch's input arrays as tensors, in :attr:`GraphBatch.INPUT_NAMES` order.

    Args:
        gb: the batch.
        device: where to put them (None: the CPU tensors sharing the arrays' memory).
    """
    tensors = tuple(torch.from_numpy(a) for a in gb.inputs().values())
    if device is None or torch.device(device).type == "cpu":
        return tensors
    return tuple(t.to(device) for t in tensors)


def bce_loss(logits: Tensor, target: Tensor) -> Tensor:
    """Eq. 19: mean binary cross-entropy over every x_ij of every instance.

    Shapes:
        logits [X], target [X] → [].
    """
    return nn.functional.binary_cross_entropy_with_logits(logits, target)


def build(cfg: NetConfig) -> SolutionNet:
    """A fresh network for ``cfg`` (ValueError for an unknown ``cfg.arch``)."""
    if cfg.arch not in ARCHS:
        raise ValueError(f"unknown arch {cfg.arch!r}; expected one of {', '.join(ARCHS)}")
    return SolutionNet(cfg)
