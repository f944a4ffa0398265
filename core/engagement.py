"""The engagement model (``mgmatch-engagement/v1``) and its numpy evaluator.

EnG(X, I) = head(concat_j Σ_{i∈team j} e_i), with e_i = player_mlp((I_i − mean) / scale).
ReLU between consecutive layers of a stack, none after the last layer of either stack.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from .errors import InvalidInput, from_pydantic
from .jsontypes import Integer, Number
from .limits import MAX_ABS_FEATURE, MAX_ABS_WEIGHT, MAX_FEATURES, MAX_TEAMS, MIN_ABS_SCALE

ENGAGEMENT_FORMAT = "mgmatch-engagement/v1"


Weight = Annotated[Number, Field(ge=-MAX_ABS_WEIGHT, le=MAX_ABS_WEIGHT)]
Normalizer = Annotated[Number, Field(ge=-MAX_ABS_FEATURE, le=MAX_ABS_FEATURE)]


class Layer(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False, extra="forbid")

    weight: list[list[Weight]] = Field(description="[out][in], as torch.nn.Linear.weight")
    bias: list[Weight] = Field(description="[out]")


class EngagementModel(BaseModel):
    """A ReLU engagement network in the spec's JSON shape, with a fast numpy evaluator.

    Extra optional field ``training`` records how a shipped model was produced. Numbers are finite
    and bounded (:data:`~mgmatch.core.limits.MAX_ABS_WEIGHT`, so that the float32 batch evaluator
    cannot overflow on a weight); a shape error names the layer (``head_layers[0].weight``).
    """

    model_config = ConfigDict(allow_inf_nan=False, extra="ignore", arbitrary_types_allowed=True)

    format: str = ENGAGEMENT_FORMAT
    teams: Integer = Field(ge=2, le=MAX_TEAMS)
    feature_dim: Integer = Field(ge=1, le=MAX_FEATURES)
    feature_mean: list[Normalizer] | None = None
    feature_scale: list[Normalizer] | None = None
    player_layers: list[Layer] = Field(min_length=1)
    head_layers: list[Layer] = Field(min_length=1)
    #: the set form (:mod:`mgmatch.core.engagement_sets`): a team network shared over the teams, pooled
    team_layers: list[Layer] | None = Field(default=None, min_length=1)
    team_pool: Literal["sum", "mean"] | None = None
    name: str | None = None
    training: dict[str, Any] | None = None
    #: SHA-256 of the file the model was read from (see :attr:`file_sha256`)
    _file_sha256: str | None = PrivateAttr(default=None)

    @property
    def file_sha256(self) -> str | None:
        """Hex SHA-256 of the file this model was read from (what labels and the predictors trained on
        them pin); None for a model built in memory. Kept by ``model_copy``."""
        return self._file_sha256

    @model_validator(mode="after")
    def _shapes(self) -> EngagementModel:
        if self.format != ENGAGEMENT_FORMAT:
            raise InvalidInput("format", f"must be {ENGAGEMENT_FORMAT!r}")
        for key in ("feature_mean", "feature_scale"):
            v = getattr(self, key)
            if v is not None and len(v) != self.feature_dim:
                raise InvalidInput(key, f"has {len(v)} numbers, feature_dim is {self.feature_dim}")
        if self.feature_scale is not None:
            for k, x in enumerate(self.feature_scale):
                if abs(x) < MIN_ABS_SCALE:
                    raise InvalidInput(f"feature_scale[{k}]", f"must not be 0 (|scale| ≥ {MIN_ABS_SCALE:g})")
        if self.team_pool is not None and self.team_layers is None:
            raise InvalidInput("team_pool", "only a model with team_layers (the set form) pools teams")
        # the widths chain player stack → (dense: the D team sums concatenated | set form: the team stack,
        # its outputs pooled) → head, which ends in one output
        set_form = self.team_layers is not None
        width = self.feature_dim
        for stack in ("player_layers", "team_layers", "head_layers") if set_form else ("player_layers", "head_layers"):
            for k, layer in enumerate(getattr(self, stack)):
                w = layer.weight
                if not w:
                    raise InvalidInput(f"{stack}[{k}].weight", f"must be [out][{width}], got no rows")
                for r, row in enumerate(w):
                    if len(row) != width:
                        raise InvalidInput(f"{stack}[{k}].weight[{r}]",
                                           f"has {len(row)} numbers; the layer's input is {width} wide")
                if len(layer.bias) != len(w):
                    raise InvalidInput(f"{stack}[{k}].bias", f"must have {len(w)} numbers, got {len(layer.bias)}")
                width = len(w)
            if stack == "player_layers" and not set_form:
                width = width * self.teams
        if width != 1:
            raise InvalidInput(f"head_layers[{len(self.head_layers) - 1}].weight",
                               f"the last head layer must have exactly one output, got {width}")
        self._views()
        return self

    # ------------------------------------------------------------------ numpy views

    def _views(self) -> None:
        """The numpy arrays the evaluator uses (built once the shapes are known to be right)."""
        self._pw = [(np.asarray(layer.weight, dtype=np.float64), np.asarray(layer.bias, dtype=np.float64))
                    for layer in self.player_layers]
        self._hw = [(np.asarray(layer.weight, dtype=np.float64), np.asarray(layer.bias, dtype=np.float64))
                    for layer in self.head_layers]
        if self.team_layers is not None:
            from .engagement_sets import dense_head, team_weights, transposed

            self._tw, self._hl = team_weights(self), self._hw
            self._tw32 = [(w.astype(np.float32), b.astype(np.float32)) for w, b in self._tw]
            self._hl32 = [(w.astype(np.float32), b.astype(np.float32)) for w, b in self._hl]
            self._twt, self._hlt = transposed(self._tw), transposed(self._hl)
            self._tw32t, self._hl32t = transposed(self._tw32), transposed(self._hl32)
            self._hw = dense_head(self)
        self._hw32 = [(w.astype(np.float32), b.astype(np.float32)) for w, b in self._hw]
        self._mean = None if self.feature_mean is None else np.asarray(self.feature_mean)
        self._scale = None if self.feature_scale is None else np.asarray(self.feature_scale)

    @property
    def embed_dim(self) -> int:
        return len(self.player_layers[-1].bias)

    @property
    def player_weights(self) -> list[tuple[np.ndarray, np.ndarray]]:
        return self._pw

    @property
    def head_weights(self) -> list[tuple[np.ndarray, np.ndarray]]:
        return self._hw

    def embed(self, features: np.ndarray) -> np.ndarray:
        """Player embeddings.

        Shapes: features [N, feature_dim] → [N, embed_dim].
        """
        h = np.asarray(features, dtype=np.float64)
        if self._mean is not None:
            h = h - self._mean
        if self._scale is not None:
            h = h / self._scale
        return _mlp(h, self._pw)

    def head(self, team_embeddings: np.ndarray) -> np.ndarray:
        """Engagement from concatenated team embeddings.

        Shapes: [..., teams * embed_dim] → [...].
        """
        if self.team_layers is not None:
            from .engagement_sets import set_head

            return set_head(self, team_embeddings)
        return _mlp(team_embeddings, self._hw)[..., 0]

    def evaluate(self, embeddings: np.ndarray, team_of: np.ndarray, chunk: int = 65536) -> np.ndarray | float:
        """Engagement of one assignment or a batch.

        Args:
            embeddings: player embeddings from :meth:`embed`, [N, E].
            team_of: team index per player, −1 for the bench; [N] or [B, N].
        Returns:
            a float for one assignment, an array [B] for a batch.
        """
        t = np.asarray(team_of)
        if t.ndim == 1:  # one assignment: float64 for an exact report
            team_emb = np.concatenate([(t == j).astype(np.float64) @ embeddings for j in range(self.teams)])
            return float(self.head(team_emb))
        E = np.asarray(embeddings, dtype=np.float32)
        out = np.empty(t.shape[0], dtype=np.float64)
        for s in range(0, t.shape[0], chunk):
            tb = t[s:s + chunk]
            team_emb = np.concatenate([(tb == j).astype(np.float32) @ E for j in range(self.teams)], axis=1)
            if self.team_layers is not None:
                from .engagement_sets import set_head

                out[s:s + chunk] = set_head(self, team_emb, np.float32)
            else:
                out[s:s + chunk] = _mlp(team_emb, self._hw32)[:, 0]
        return out

    def to_json(self) -> dict:
        return self.model_dump(mode="json", exclude_none=True)


def _mlp(h: np.ndarray, layers: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    for k, (w, b) in enumerate(layers):
        h = h @ w.T + b
        if k < len(layers) - 1:
            h = np.maximum(h, 0.0)
    return h


def parse_engagement(obj: Any, where: str = "engagement") -> EngagementModel:
    if not isinstance(obj, dict):
        raise InvalidInput(where, "an engagement model must be a JSON object")
    try:
        return EngagementModel.model_validate(obj)
    except ValidationError as err:
        e = from_pydantic(err, where)
        raise e from None


def load_engagement(path: str | Path) -> EngagementModel:
    from .files import sha256_file
    from .instance import read_json

    model = parse_engagement(read_json(path), str(path))
    model._file_sha256 = sha256_file(path)
    return model


def save_engagement(model: EngagementModel, path: str | Path) -> None:
    Path(path).write_text(json.dumps(model.to_json()))


def head_gradient(model: EngagementModel, t: np.ndarray) -> np.ndarray:
    """∂head/∂t: the head MLP's gradient at the concatenated team embeddings ``t`` (backpropagation
    through its ReLU layers; the output layer is linear). Shapes: t [D·E] → [D·E]."""
    layers = model.head_weights
    acts, h = [], t
    for k, (w, b) in enumerate(layers):
        a = w @ h + b
        acts.append(a)
        h = np.maximum(a, 0.0) if k < len(layers) - 1 else a
    g = np.ones(1)
    for k in range(len(layers) - 1, -1, -1):
        if k < len(layers) - 1:
            g = g * (acts[k] > 0)
        g = layers[k][0].T @ g
    return g


def engagement_gradient(model: EngagementModel, emb: np.ndarray, sizes: tuple[int, ...]) -> np.ndarray:
    """∂EnG/∂x_ij at the uniform fractional assignment x̄_ij = K_j / N (column ``eng_grad``).

    The nonlinear objective's analogue of the objective coefficient a MIP encoder gives each
    variable: the first-order gain of putting player i on team j. Shapes: emb [N, E] → [N, D].
    """
    N, E = emb.shape
    D = len(sizes)
    t = np.concatenate([emb.sum(0) * (sizes[j] / N) for j in range(D)])
    return emb @ head_gradient(model, t).reshape(D, E).T
