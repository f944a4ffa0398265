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


class EngagementNet(nn.Module):
    """Player MLP → sum per team → head MLP.

    Args:
        feature_dim: raw features per player.
        teams: D.
        player_hidden: hidden widths of the player MLP.
        embed_dim: E, the player embedding width.
        head_hidden: hidden widths of the head (keep to one small layer for the exact MIP).
        feature_mean, feature_scale: input normalization stored as buffers.
        target_mean, target_scale: the output is ``target_mean + target_scale · raw``; both are
            folded into the last head layer on export.
    """

    def __init__(self, feature_dim: int, teams: int, player_hidden: tuple[int, ...] = (64, 32),
                 embed_dim: int = 12, head_hidden: tuple[int, ...] = (16,),
                 feature_mean: np.ndarray | None = None, feature_scale: np.ndarray | None = None,
                 target_mean: float = 0.0, target_scale: float = 1.0):
        super().__init__()
        self.feature_dim, self.teams, self.embed_dim = feature_dim, teams, embed_dim
        self.player_hidden, self.head_hidden = tuple(player_hidden), tuple(head_hidden)
        self.player = _stack([feature_dim, *player_hidden, embed_dim])
        self.head = _stack([teams * embed_dim, *head_hidden, 1])
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
        return self.head(t.reshape(t.shape[0], -1))[:, 0]

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Predicted engagement. Shapes: x [B, D, K, feature_dim], mask [B, D, K] or None → [B]."""
        return self.target_mean + self.target_scale * self.raw(x, mask)

    def architecture(self) -> dict[str, Any]:
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
    net = EngagementNet(model.feature_dim, model.teams, tuple(ph), model.embed_dim, tuple(hh),
                        model.feature_mean, model.feature_scale)
    lins = [m for m in net.player if isinstance(m, nn.Linear)] + [m for m in net.head if isinstance(m, nn.Linear)]
    for lin, layer in zip(lins, list(model.player_layers) + list(model.head_layers), strict=True):
        with torch.no_grad():
            lin.weight.copy_(torch.as_tensor(np.asarray(layer.weight), dtype=torch.float32))
            lin.bias.copy_(torch.as_tensor(np.asarray(layer.bias), dtype=torch.float32))
    return net
