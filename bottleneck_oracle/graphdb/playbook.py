"""The optimization playbook: curated remedies per bottleneck category, embedded and searchable.

Entries are data (``graphdb/playbook.yaml``); each gets an embedding of its title, signal and
remedy by all-MiniLM-L6-v2, and the store keeps them under a vector index. The playbook's
version is a hash of its entries, so a load is skipped when the store holds the same version.
The embeddings of the current version ship beside the file (``playbook_embeddings.npz``, made
by ``python -m bottleneck_oracle.graphdb.playbook``; a test checks them against the model), so
loading the playbook needs no model; a changed playbook is embedded with the model.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.graphdb.embedding import Embedder
from bottleneck_oracle.graphdb.store import GraphStore
from bottleneck_oracle.graphdb.types import Row
from bottleneck_oracle.vocabulary import Bottleneck

__all__ = ["PlaybookEntry", "read_playbook", "playbook_version", "embed_playbook", "shipped_embeddings",
           "load_playbook", "playbook_is_loaded", "ensure_playbook", "search_playbook", "PLAYBOOK_PATH",
           "EMBEDDINGS_PATH"]

PLAYBOOK_PATH = Path(__file__).resolve().parent / "playbook.yaml"
EMBEDDINGS_PATH = Path(__file__).resolve().parent / "playbook_embeddings.npz"
_FIELDS = ("id", "category", "title", "signal", "remedy", "effect")


@dataclass(frozen=True, slots=True)
class PlaybookEntry:
    """One remedy.

    Args:
        key (str): stable id.
        category (Bottleneck): the bottleneck it addresses.
        title (str): one line.
        signal (str): what in a trace identifies the problem.
        remedy (str): what to change.
        effect (str): what to expect.
        edit (str): the what-if edit that predicts its gain (``truth/edits.py``; ``{2m}``: twice the
            trace's micro-batches), or empty; not part of the embedded text or the version.
    """

    key: str
    category: Bottleneck
    title: str
    signal: str
    remedy: str
    effect: str
    edit: str = ""

    @property
    def text(self) -> str:
        """What is embedded: title, signal and remedy."""
        return f"{self.title}. {self.signal} {self.remedy}"


def _entry(raw: Any, path: Path, i: int) -> PlaybookEntry:
    if not isinstance(raw, dict) or any(not isinstance(raw.get(f), str) or not raw[f].strip() for f in _FIELDS):
        raise ConfigError(f"{path}: entry {i} needs non-empty text fields {', '.join(_FIELDS)}")
    try:
        category = Bottleneck(raw["category"])
    except ValueError as e:
        raise ConfigError(f"{path}: entry {raw['id']!r} has unknown category {raw['category']!r}") from e
    edit = raw.get("edit", "")
    if not isinstance(edit, str):
        raise ConfigError(f"{path}: entry {raw['id']!r} has an edit that is not text")
    return PlaybookEntry(raw["id"], category, *(" ".join(raw[f].split()) for f in _FIELDS[2:]), edit=edit.strip())


def read_playbook(path: Path = PLAYBOOK_PATH) -> tuple[PlaybookEntry, ...]:
    """The entries of a playbook file.

    Raises:
        ConfigError: the file is not a list of entries with every field, or ids repeat.
    """
    try:
        raw = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"{path}: cannot read the playbook ({e})") from e
    if not isinstance(raw, list):
        raise ConfigError(f"{path}: the playbook is a YAML list of entries")
    entries = tuple(_entry(r, Path(path), i) for i, r in enumerate(raw))
    if len({e.key for e in entries}) != len(entries):
        raise ConfigError(f"{path}: two entries share an id")
    return entries


def playbook_version(entries: tuple[PlaybookEntry, ...]) -> str:
    """A hash of the entries' text: changes whenever an entry does."""
    digest = hashlib.sha1()
    for e in entries:
        digest.update("\x1f".join((e.key, e.category.value, e.title, e.signal, e.remedy, e.effect)).encode() + b"\x1e")
    return digest.hexdigest()[:16]


def load_playbook(store: GraphStore, entries: tuple[PlaybookEntry, ...], embeddings: np.ndarray) -> int:
    """Writes the entries with their embeddings (float32[len(entries), 384]) and drops other versions.

    Returns:
        how many entries the store holds.
    """
    if embeddings.shape[0] != len(entries):
        raise ValueError(f"{len(entries)} playbook entries but {embeddings.shape[0]} embeddings")
    version = playbook_version(entries)
    store.write("load_playbook", {
        "version": version, "key": [e.key for e in entries], "category": [e.category.value for e in entries],
        "title": [e.title for e in entries], "signal": [e.signal for e in entries],
        "remedy": [e.remedy for e in entries], "effect": [e.effect for e in entries],
        "text": [e.text for e in entries], "embedding": np.asarray(embeddings, dtype=np.float64).tolist(),
    })
    store.write("playbook_prune", {"version": version})
    return len(entries)


def embed_playbook(entries: tuple[PlaybookEntry, ...], embedder: Embedder) -> np.ndarray:
    """float32[len(entries), 384]: the embedding of each entry's text."""
    return embedder.embed([e.text for e in entries])


def shipped_embeddings(entries: tuple[PlaybookEntry, ...], path: Path = EMBEDDINGS_PATH) -> np.ndarray | None:
    """The embeddings shipped for exactly these entries, or None (another version, or no file)."""
    try:
        with np.load(path) as data:
            if str(data["version"]) != playbook_version(entries):
                return None
            return np.asarray(data["vectors"], dtype=np.float32)
    except (OSError, KeyError, ValueError):
        return None


def playbook_is_loaded(store: GraphStore, entries: tuple[PlaybookEntry, ...]) -> bool:
    """Whether the store holds exactly these entries' version of the playbook, and no other."""
    loaded = store.read("playbook_version")
    if len(loaded) != 1:
        return False
    return loaded[0]["version"] == playbook_version(entries) and int(loaded[0]["entries"]) == len(entries)


def ensure_playbook(store: GraphStore, entries: tuple[PlaybookEntry, ...], embedder: Embedder | None = None) -> bool:
    """Loads the playbook unless the store holds this version; True when it loaded it.

    Uses the shipped embeddings when they are of this version, else ``embedder`` (loaded when None).
    """
    if playbook_is_loaded(store, entries):
        return False
    vectors = shipped_embeddings(entries)
    if vectors is None:
        vectors = embed_playbook(entries, embedder or Embedder.load())
    load_playbook(store, entries, vectors)
    return True


def search_playbook(store: GraphStore, vector: np.ndarray, k: int = 5) -> list[Row]:
    """The ``k`` entries nearest to ``vector`` (a question's embedding), most similar first."""
    return store.read("playbook_search", {"vector": np.asarray(vector, dtype=np.float64).tolist(), "k": int(k)})


if __name__ == "__main__":  # python -m bottleneck_oracle.graphdb.playbook: re-embed after editing the YAML
    current = read_playbook()
    np.savez(EMBEDDINGS_PATH, version=np.array(playbook_version(current)),
             vectors=embed_playbook(current, Embedder.load()))
    print(f"wrote {EMBEDDINGS_PATH} for playbook version {playbook_version(current)} ({len(current)} entries)")
