"""Model-free surrogate: MGMatch's pipeline with the engagement gradient in place of the network.

``--method surrogate`` runs :class:`~mgmatch.solvers.mgmatch.MGMatchSolver` (surrogate MIP over
the same compiled rules in SCIP → polish on the true engagement → search of the big-M engagement
MIP from the polished answer) with p_ij taken from the
engagement model itself: the first-order gain ∂EnG/∂x_ij at the uniform fractional assignment
(:func:`mgmatch.core.engagement.engagement_gradient`, the encoder's ``eng_grad`` column),
min–max scaled per instance to [0, 1]. No trained predictor, no torch, no onnxruntime: it is what
the service falls back to when the predictor is down or late, because SCIP on the rules finds a
feasible assignment of a 12v12 pool in a few milliseconds where the big-M model often finds none
in what is left of the budget; polishing then climbs the true objective, and the big-M search
starts from that incumbent and its cutoff.
"""

from __future__ import annotations

from .gradient import GradientPredictor
from .interface import register
from .mgmatch import MGMatchSolver

__all__ = ["GradientPredictor", "surrogate_solver"]


@register("surrogate", "Model-free MGMatch: engagement-gradient surrogate MIP (SCIP) → polish → engagement-MIP search; the predictor fallback")
def surrogate_solver(predictor=None, **options) -> MGMatchSolver:
    # a predictor handed in is ignored: this method's point is not to need one
    return MGMatchSolver(GradientPredictor(), name="surrogate", **options)
