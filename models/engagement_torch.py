"""The engagement network in torch (spec §3 form), for fitting, and its export to the spec JSON.

EnG(X, I) = head(concat_j Σ_{i∈team j} e_i), e_i = player_mlp((I_i − mean) / scale); ReLU
between consecutive layers of each stack, none after the last layer. The head must stay small:
the exact solver spends one binary per unstable ReLU of the head.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from mgmatch.core.engagement import ENGAGEMENT_FORMAT, EngagementModel, parse_engagement


def _stack(widths: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for k in range(len(widths) - 1):
        layers.append(nn.Linear(widths[k], widths[k + 1]))
        if k < len(widths) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def _team_stack(widths: list[int]) -> nn.Sequential:
    """The set form's team network: ReLU after every layer (its outputs are pooled over the teams)."""
    layers: list[nn.Module] = []
    for k in range(len(widths) - 1):
        layers += [nn.Linear(widths[k], widths[k + 1]), nn.ReLU()]
    return nn.Sequential(*layers)


class EngagementNet(nn.Module):
    """Player MLP → sum per team → head MLP (dense form), or → team MLP shared over the teams →
    sum or mean over the teams → head MLP (set form, ``team_hidden`` given; see
    :mod:`mgmatch.core.engagement_sets`).

    Args:
        feature_dim: raw features per player.
        teams: D.
        player_hidden: hidden widths of the player MLP.
        embed_dim: E, the player embedding width.
        head_hidden: hidden widths of the head (keep to one small layer for the exact MIP).
        feature_mean, feature_scale: input normalization stored as buffers.
        target_mean, target_scale: the output is ``target_mean + target_scale · raw``; both are
            folded into the last head layer on export.
        team_hidden: widths of the set form's team network (None: the dense form).
        team_pool: ``sum`` or ``mean`` over the teams (set form only).
    """

    def __init__(self, feature_dim: int, teams: int, player_hidden: tuple[int, ...] = (64, 32),
                 embed_dim: int = 12, head_hidden: tuple[int, ...] = (16,),
                 feature_mean: np.ndarray | None = None, feature_scale: np.ndarray | None = None,
                 target_mean: float = 0.0, target_scale: float = 1.0,
                 team_hidden: tuple[int, ...] | None = None, team_pool: str = "sum"):
        super().__init__()
        self.feature_dim, self.teams, self.embed_dim = feature_dim, teams, embed_dim
        self.player_hidden, self.head_hidden = tuple(player_hidden), tuple(head_hidden)
        self.team_hidden = None if team_hidden is None else tuple(team_hidden)
        self.team_pool = team_pool
        self.player = _stack([feature_dim, *player_hidden, embed_dim])
        if self.team_hidden is None:
            self.team = None
            self.head = _stack([teams * embed_dim, *head_hidden, 1])
        else:
            if not self.team_hidden:
                raise ValueError("team_hidden needs at least one layer")
            self.team = _team_stack([embed_dim, *self.team_hidden])
            self.head = _stack([self.team_hidden[-1], *head_hidden, 1])
        mean = np.zeros(feature_dim) if feature_mean is None else np.asarray(feature_mean)
        scale = np.ones(feature_dim) if feature_scale is None else np.asarray(feature_scale)
        self.register_buffer("feature_mean", torch.as_tensor(mean, dtype=torch.float32))
        self.register_buffer("feature_scale", torch.as_tensor(scale, dtype=torch.float32))
        self.target_mean, self.target_scale = float(target_mean), float(target_scale)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """Shapes: [..., feature_dim] → [..., E]."""
        return self.player((x - self.feature_mean) / self.feature_scale)

    def raw(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Normalized output (before the target scaling).

        Shapes: x [B, D, K, feature_dim] (team members' raw features), mask [B, D, K] (1 for a
        real member, 0 for padding of a smaller team; None: every slot is a member) → [B].
        """
        e = self.embed(x)                                  # [B, D, K, E]
        if mask is not None:
            e = e * mask.unsqueeze(-1)
        t = e.sum(2)                                       # [B, D, E]
        if self.team is not None:
            u = self.team(t)                               # [B, D, H]
            pooled = u.mean(1) if self.team_pool == "mean" else u.sum(1)
            return self.head(pooled)[:, 0]
        return self.head(t.reshape(t.shape[0], -1))[:, 0]

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Predicted engagement. Shapes: x [B, D, K, feature_dim], mask [B, D, K] or None → [B]."""
        return self.target_mean + self.target_scale * self.raw(x, mask)

    def architecture(self) -> dict[str, Any]:
        if self.team_hidden is not None:
            return {"player_layers": [self.feature_dim, *self.player_hidden, self.embed_dim],
                    "team_layers": [self.embed_dim, *self.team_hidden],
                    "head_layers": [self.team_hidden[-1], *self.head_hidden, 1],
                    "activation": "relu", "pooling": f"sum per team, then {self.team_pool} over teams"}
        return {"player_layers": [self.feature_dim, *self.player_hidden, self.embed_dim],
                "head_layers": [self.teams * self.embed_dim, *self.head_hidden, 1],
                "activation": "relu", "pooling": "sum per team"}


def _layer(lin: nn.Linear, scale: float = 1.0, shift: float = 0.0) -> dict:
    w = lin.weight.detach().double().numpy() * scale
    b = lin.bias.detach().double().numpy() * scale + shift
    return {"weight": w.tolist(), "bias": b.tolist()}


def export_json(net: EngagementNet, name: str | None = None, training: dict | None = None) -> dict:
    """The spec JSON (``mgmatch-engagement/v1``) of ``net``, with the target scaling folded in."""
    plin = [m for m in net.player if isinstance(m, nn.Linear)]
    hlin = [m for m in net.head if isinstance(m, nn.Linear)]
    head = [_layer(m) for m in hlin[:-1]] + [_layer(hlin[-1], net.target_scale, net.target_mean)]
    out: dict[str, Any] = {
        "format": ENGAGEMENT_FORMAT, "teams": net.teams, "feature_dim": net.feature_dim,
        "feature_mean": net.feature_mean.double().tolist(),
        "feature_scale": net.feature_scale.double().tolist(),
        "player_layers": [_layer(m) for m in plin], "head_layers": head,
    }
    if net.team is not None:
        out["team_layers"] = [_layer(m) for m in net.team if isinstance(m, nn.Linear)]
        out["team_pool"] = net.team_pool
    if name is not None:
        out["name"] = name
    if training is not None:
        out["training"] = training
    return out


def to_engagement_model(net: EngagementNet, name: str | None = None, training: dict | None = None) -> EngagementModel:
    return parse_engagement(export_json(net, name, training))


def from_engagement_model(model: EngagementModel) -> EngagementNet:
    """A torch network with the weights of a spec model (for checks and fine-tuning)."""
    ph = [len(layer.bias) for layer in model.player_layers[:-1]]
    hh = [len(layer.bias) for layer in model.head_layers[:-1]]
    th = None if model.team_layers is None else tuple(len(layer.bias) for layer in model.team_layers)
    net = EngagementNet(model.feature_dim, model.teams, tuple(ph), model.embed_dim, tuple(hh),
                        model.feature_mean, model.feature_scale, team_hidden=th, team_pool=model.team_pool or "sum")
    stacks = [net.player] + ([net.team] if net.team is not None else []) + [net.head]
    lins = [m for st in stacks for m in st if isinstance(m, nn.Linear)]
    spec = list(model.player_layers) + list(model.team_layers or []) + list(model.head_layers)
    for lin, layer in zip(lins, spec, strict=True):
        with torch.no_grad():
            lin.weight.copy_(torch.as_tensor(np.asarray(layer.weight), dtype=torch.float32))
            lin.bias.copy_(torch.as_tensor(np.asarray(layer.bias), dtype=torch.float32))
    return net
