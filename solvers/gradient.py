"""The engagement gradient as a solution predictor: what ``surrogate`` runs MGMatch's pipeline with, and what
MGMatch itself falls back to where its trained predictor does not pay (no torch, no onnxruntime)."""

from __future__ import annotations

import numpy as np

from mgmatch.core.engagement import engagement_gradient
from mgmatch.core.problem import Problem


class GradientPredictor:
    """p_ij = the engagement gradient at x̄ = K_j / N, scaled to [0, 1] per instance."""

    version = "engagement-gradient"

    def predict(self, problems: list[Problem]) -> list[np.ndarray]:
        out = []
        for pr in problems:
            g = engagement_gradient(pr.model, pr.embeddings, pr.instance.sizes)
            lo, hi = float(g.min()), float(g.max())
            out.append((g - lo) / (hi - lo) if hi > lo else np.full_like(g, 0.5))
        return out
