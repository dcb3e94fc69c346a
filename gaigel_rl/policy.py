"""A masked linear softmax policy over the observation tensor, saved as a small ``.npz`` file.

``logits = W @ tensor + b`` over the 165 action ids; illegal actions are masked out before
the softmax, so the policy never chooses one. numpy only: the worked training example
(``examples/rl/train_masked_policy.py``) trains it with REINFORCE, and the bot of
:mod:`gaigel_rl.bot` plays it over gRPC.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from gaigel.actions import NUM_ACTIONS
from gaigel_rl.tensor import Vector

FORMAT = "gaigel-linear-policy-v1"


@dataclasses.dataclass
class LinearPolicy:
    """Weights for one table size (the tensor's length depends on players and sides)."""

    players: int
    sides: int
    weights: npt.NDArray[np.float32]
    """Shape (165, tensor size)."""
    bias: npt.NDArray[np.float32]
    """Shape (165,)."""

    @classmethod
    def zeros(cls, players: int, sides: int, size: int) -> LinearPolicy:
        """A uniform policy (every legal action equally likely)."""
        return cls(players, sides, np.zeros((NUM_ACTIONS, size), np.float32), np.zeros(NUM_ACTIONS, np.float32))

    def probabilities(self, tensor: Vector, legal: Sequence[int]) -> npt.NDArray[np.float64]:
        """The softmax over *legal* (in their order) of the logits of *tensor*."""
        idx = np.asarray(legal)
        z = np.asarray(self.weights[idx] @ tensor + self.bias[idx], np.float64)
        z = np.exp(z - z.max())
        return np.asarray(z / z.sum())

    def best(self, tensor: Vector, legal: Sequence[int]) -> int:
        """The legal action with the highest logit (the lowest id on a tie)."""
        idx = np.asarray(legal)
        return int(idx[int(np.argmax(self.weights[idx] @ tensor + self.bias[idx]))])

    def save(self, path: str | os.PathLike[str]) -> None:
        """Writes the policy (weights as float16: the file stays small)."""
        np.savez_compressed(
            path,
            format=np.array(FORMAT),
            players=np.array(self.players),
            sides=np.array(self.sides),
            weights=self.weights.astype(np.float16),
            bias=self.bias.astype(np.float16),
        )

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> LinearPolicy:
        """Reads a policy written by :meth:`save`.

        :raises ValueError: when the file is not such a policy.
        """
        try:
            with np.load(path) as data:
                if str(data["format"]) != FORMAT:
                    raise ValueError(f"{path}: not a {FORMAT} file (format {data['format']})")
                return cls(
                    int(data["players"]),
                    int(data["sides"]),
                    data["weights"].astype(np.float32),
                    data["bias"].astype(np.float32),
                )
        except (OSError, KeyError, EOFError) as e:
            raise ValueError(f"{path}: cannot read a policy ({e})") from None
