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

Message passing uses scatter-add only (exports to ONNX opset 18 exactly; no max aggregation, no
``index_add``). Every input goes through a signed log (sign(v)·log(1+|v|)) and a per-column
standardization fitted on the training graphs and stored as buffers, so big-M coefficients cannot
swamp the rest.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import Tensor, nn

from .encoder import COND_COLUMNS, CONS_COLUMNS, EDGE_COLUMNS, VAR_COLUMNS, GraphBatch

ARCHS = {
    "mgmatch": {"logical": True, "team": True, "encoding": "logical"},
    "bgcn": {"logical": False, "team": False, "encoding": "linear"},
    "bgcn-bigm": {"logical": False, "team": False, "encoding": "bigm"},
    "bgcn-lc": {"logical": True, "team": False, "encoding": "logical"},
    "bgcn-te": {"logical": False, "team": True, "encoding": "linear"},
}


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


def scatter_sum(src: Tensor, index: Tensor, like: Tensor) -> Tensor:
    """Σ of ``src`` rows into rows ``index`` of a zero tensor shaped like ``like``.

    Shapes: src [M, F], index [M] → [like.shape[0], F].
    """
    out = torch.zeros(like.shape[0], src.shape[1], dtype=src.dtype)
    return out.scatter_add(0, index.unsqueeze(-1).expand(-1, src.shape[1]), src)


class Normalizer(nn.Module):
    """sign(v)·log(1+|v|), then (v − mean)/std with statistics fitted once on training data."""

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

    Shapes: x [B, T, d], mask [B, T] (1 real, 0 padding) → [B, T, d].
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

    Args (forward), all tensors of the batch (see GraphBatch):
        var_feat [V, Fv], cons_feat [C, Fc], edge_index [2, E], edge_feat [E, 1],
        cond_index [2, Q], cond_feat [Q, 2], x_var [X], x_token [X],
        player_emb [B, Nmax, Emb], player_mask [B, Nmax].
    Returns:
        logits [X] (apply sigmoid for probabilities; :class:`ProbabilityNet` does for export).
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
        K = cfg.rounds
        self.msg_c = nn.ModuleList(mlp(3 * d, d, d) for _ in range(K))      # MLP_t1 (Eq. 10)
        self.upd_c = nn.ModuleList(mlp(2 * d, d, d) for _ in range(K))      # MLP_c
        self.ln_c = nn.ModuleList(nn.LayerNorm(d) for _ in range(K))
        self.msg_v = nn.ModuleList(mlp(3 * d, d, d) for _ in range(K))      # MLP_t2 (Eq. 14)
        self.upd_v = nn.ModuleList(mlp(2 * d, d, d) for _ in range(K))      # MLP_v
        self.ln_v = nn.ModuleList(nn.LayerNorm(d) for _ in range(K))
        if cfg.logical:
            self.cond = nn.ModuleList(mlp(d + len(COND_COLUMNS), d, d) for _ in range(K))  # MLP_v̂ (Eq. 11)
            self.hyper = nn.ModuleList(nn.Linear(d, d * d + d) for _ in range(K))          # hy(·|φ) (Eq. 12)
            self.msg_q = nn.ModuleList(mlp(2 * d + len(COND_COLUMNS), d, d) for _ in range(K))
            for h in self.hyper:
                nn.init.normal_(h.weight, std=0.3 / d)
                nn.init.zeros_(h.bias)
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

    def fit_normalizers(self, var_feat: Tensor, cons_feat: Tensor, edge_feat: Tensor) -> None:
        self.norm_v.fit(var_feat)
        self.norm_c.fit(cons_feat)
        self.norm_e.fit(edge_feat)

    def forward(self, var_feat: Tensor, cons_feat: Tensor, edge_index: Tensor, edge_feat: Tensor,
                cond_index: Tensor, cond_feat: Tensor, x_var: Tensor, x_token: Tensor,
                player_emb: Tensor, player_mask: Tensor) -> Tensor:
        v = self.emb_v(self.norm_v(var_feat) * self.var_keep)
        c = self.emb_c(self.norm_c(cons_feat))
        e = self.emb_e(self.norm_e(edge_feat))
        ev, ec = edge_index[0], edge_index[1]
        if self.cfg.logical:
            qv, qc = cond_index[0], cond_index[1]
            # a constraint node is logical iff some condition literal points at it
            n_cond = scatter_sum(torch.ones_like(cond_feat[:, :1]), qc, c)
            is_logical = (n_cond > 0).to(c.dtype)
        for k in range(self.cfg.rounds):
            # Eq. 10: constraints ← variables (linear rows and the linear part of logical rows)
            m = self.msg_c[k](torch.cat([c[ec], v[ev], e], dim=1))
            c = c + self.upd_c[k](torch.cat([c, self.ln_c[k](scatter_sum(m, ec, c))], dim=1))
            if self.cfg.logical:
                # Eq. 11: condition embeddings from the condition variables + logical features
                ce = scatter_sum(self.cond[k](torch.cat([v[qv], cond_feat], dim=1)), qc, c) / n_cond.clamp_min(1.0)
                # Eq. 12: the hypernetwork generates the target network ψ = (W [d×d], b [d]) per node
                psi = self.hyper[k](ce)
                d = c.shape[1]
                W = psi[:, : d * d].reshape(-1, d, d)
                b = psi[:, d * d:]
                # Eq. 13: target network on the linear part, Hadamard-gating the logical node
                t = (W @ c.unsqueeze(-1)).squeeze(-1) + b
                c = c + is_logical * (c * torch.tanh(t))
            # Eq. 14: variables ← constraints
            m = self.msg_v[k](torch.cat([c[ec], v[ev], e], dim=1))
            agg = scatter_sum(m, ev, v)
            if self.cfg.logical:
                agg = agg + scatter_sum(self.msg_q[k](torch.cat([c[qc], v[qv], cond_feat], dim=1)), qv, v)
            v = v + self.upd_v[k](torch.cat([v, self.ln_v[k](agg)], dim=1))
        x_embed = self.mlp_f(v[x_var])  # Eq. 15
        if self.cfg.team:
            x_embed = torch.cat([x_embed, self.team_embed(player_emb, player_mask)[x_token]], dim=1)
        return self.head(x_embed).squeeze(-1)  # Eq. 18 (logits)

    def team_embed(self, player_emb: Tensor, player_mask: Tensor) -> Tensor:
        """Eq. 16–17: per-team Transformer encoders, then one across all N×D tokens.

        Shapes: player_emb [B, Nmax, Emb], player_mask [B, Nmax] → [B·Nmax·D, d].
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
        return self(*batch_tensors(gb))


class ProbabilityNet(nn.Module):
    """The exported graph: sigmoid of :class:`SolutionNet`'s logits."""

    def __init__(self, net: SolutionNet):
        super().__init__()
        self.net = net

    def forward(self, *args: Tensor) -> Tensor:
        return torch.sigmoid(self.net(*args))


def batch_tensors(gb: GraphBatch) -> tuple[Tensor, ...]:
    return tuple(torch.from_numpy(a) for a in gb.inputs().values())


def bce_loss(logits: Tensor, target: Tensor) -> Tensor:
    """Eq. 19: mean binary cross-entropy over every x_ij of every instance."""
    return nn.functional.binary_cross_entropy_with_logits(logits, target)


def build(cfg: NetConfig) -> SolutionNet:
    if cfg.arch not in ARCHS:
        raise ValueError(f"unknown arch {cfg.arch!r}; expected one of {', '.join(ARCHS)}")
    return SolutionNet(cfg)
