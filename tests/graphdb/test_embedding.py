"""The bundled all-MiniLM-L6-v2: unit vectors of 384 floats, nearer for texts that mean the same.

Slow: loading the model imports torch (about 5 s).
"""

from __future__ import annotations

import numpy as np
import pytest

from bottleneck_oracle.graphdb.embedding import Embedder
from bottleneck_oracle.graphdb.schema import EMBEDDING_DIM

pytestmark = pytest.mark.slow


def test_embeddings_are_unit_vectors(embedder: Embedder) -> None:
    vectors = embedder.embed(["the GPU waits for the data loader", "all-reduce is exposed"])
    assert vectors.shape == (2, EMBEDDING_DIM) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embedder.embed([]).shape == (0, EMBEDDING_DIM)


def test_similar_questions_are_nearer(embedder: Embedder) -> None:
    q, near, far = embedder.embed(["why is the data loader slow?", "the DataLoader stalls the training step",
                                   "checkpoint saving blocks the optimizer"])
    assert float(q @ near) > float(q @ far)


def test_embedding_is_deterministic(embedder: Embedder) -> None:
    text = ["one rank arrives late at the all-reduce"]
    assert np.array_equal(embedder.embed(text), embedder.embed(text))
