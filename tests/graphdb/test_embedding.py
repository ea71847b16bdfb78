"""The bundled all-MiniLM-L6-v2: unit vectors of 384 floats, nearer for texts that mean the same, the
vectors sentence-transformers gives, and a cache of fixed texts' vectors that follows the texts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bottleneck_oracle.graphdb.embedding import Embedder, cached_embed, model_path
from bottleneck_oracle.graphdb.schema import EMBEDDING_DIM
from bottleneck_oracle.prompts import load_yaml


def test_embeddings_are_unit_vectors(embedder: Embedder) -> None:
    vectors = embedder.embed(["the GPU waits for the data loader", "all-reduce is exposed"])
    assert vectors.shape == (2, EMBEDDING_DIM) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embedder.embed([]).shape == (0, EMBEDDING_DIM)


def test_similar_questions_are_nearer(embedder: Embedder) -> None:
    q, near, far = embedder.embed(["why is the data loader slow?", "the DataLoader stalls the training step",
                                   "checkpoint saving blocks the optimizer"])
    assert float(q @ near) > float(q @ far)


def test_embedding_is_deterministic_and_independent_of_the_batch(embedder: Embedder) -> None:
    text = ["one rank arrives late at the all-reduce"]
    alone = embedder.embed(text)
    assert np.array_equal(alone, embedder.embed(text))
    padded = embedder.embed([*text, "a much longer sentence that makes the batch pad the first one " * 4])
    assert float(alone[0] @ padded[0]) >= 0.99999  # padding gets no attention


@pytest.mark.slow  # sentence-transformers imports torch (seconds)
def test_vectors_are_those_of_sentence_transformers(embedder: Embedder) -> None:
    from sentence_transformers import SentenceTransformer

    texts = [q for questions in load_yaml("intents").values() for q in questions]
    texts += [t["question"] for t in load_yaml("cypher")]
    texts += ["host pause: rank 1 step 5 ran no profiled op for 150.248 ms " * 40, ""]  # truncated at 256 tokens
    reference = SentenceTransformer(str(model_path()), device="cpu", local_files_only=True)
    expected = reference.encode(texts, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
    cosine = (embedder.embed(texts) * expected).sum(axis=1)
    assert cosine.min() >= 0.999, texts[int(cosine.argmin())]


class _Counting:
    """An embedder factory that counts how often the model is asked for."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder, self.calls = embedder, 0

    def __call__(self) -> Embedder:
        self.calls += 1
        return self.embedder


def test_cache_reads_back_and_rebuilds_when_the_examples_change(embedder: Embedder, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORACLE_CACHE", str(tmp_path))
    examples = [q for questions in load_yaml("intents").values() for q in questions][:12]
    factory = _Counting(embedder)
    first = cached_embed(examples, factory)
    assert factory.calls == 1 and len(list(tmp_path.rglob("*.npy"))) == 1
    assert np.array_equal(cached_embed(examples, factory), first) and factory.calls == 1  # read, no model
    edited = [*examples[:-1], "which rank is the slowest one at the barrier?"]  # one example edited
    vectors = cached_embed(edited, factory)
    assert factory.calls == 2 and len(list(tmp_path.rglob("*.npy"))) == 2
    assert np.allclose(vectors, embedder.embed(edited), atol=1e-6)


def test_a_damaged_cache_file_is_embedded_anew(embedder: Embedder, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORACLE_CACHE", str(tmp_path))
    factory = _Counting(embedder)
    cached_embed(["why is step 3 slow?"], factory)
    (file,) = tmp_path.rglob("*.npy")
    file.write_bytes(b"not a numpy file")
    assert np.allclose(cached_embed(["why is step 3 slow?"], factory), embedder.embed(["why is step 3 slow?"]))
    assert factory.calls == 2
