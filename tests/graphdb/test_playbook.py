"""The playbook: curated remedies for every bottleneck category, loaded once, found by meaning."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.graphdb import Capability, GraphStore
from bottleneck_oracle.graphdb.embedding import Embedder
from bottleneck_oracle.graphdb.playbook import (
    PLAYBOOK_PATH,
    embed_playbook,
    ensure_playbook,
    playbook_is_loaded,
    playbook_version,
    read_playbook,
    search_playbook,
    shipped_embeddings,
)
from bottleneck_oracle.vocabulary import Bottleneck


def test_every_category_has_remedies() -> None:
    entries = read_playbook()
    for category in Bottleneck:
        if category is not Bottleneck.NONE:
            assert sum(e.category is category for e in entries) >= 3, category
    assert all(e.signal and e.remedy and e.effect for e in entries)


def test_version_follows_the_content(tmp_path: Path) -> None:
    text = PLAYBOOK_PATH.read_text()
    edited = tmp_path / "playbook.yaml"
    edited.write_text(text.replace("More DataLoader workers", "More DataLoader worker processes"))
    assert playbook_version(read_playbook(edited)) != playbook_version(read_playbook())
    assert playbook_version(read_playbook()) == playbook_version(read_playbook())


@pytest.mark.parametrize("content", ["- id: x\n  category: not_a_category\n  title: t\n  signal: s\n  remedy: r\n"
                                     "  effect: e\n", "- id: x\n  category: host_sync\n", "just: a map\n"])
def test_a_malformed_playbook_is_refused(tmp_path: Path, content: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(ConfigError) as bad:
        read_playbook(path)
    assert "bad.yaml" in str(bad.value)


def test_playbook_loads_once_and_its_vectors_are_searchable(store: GraphStore) -> None:
    if Capability.VECTOR_SEARCH not in store.capabilities:
        pytest.skip("no vector index on this backend")
    entries = read_playbook()
    ensure_playbook(store, entries)  # the shipped embeddings: no model needed
    assert not ensure_playbook(store, entries)  # same version: nothing to do
    assert playbook_is_loaded(store, entries) and not playbook_is_loaded(store, entries[1:])
    assert store.read("playbook_version") == [{"version": playbook_version(entries), "entries": len(entries)}]
    vectors = shipped_embeddings(entries)
    assert vectors is not None
    for i in (0, len(entries) // 2, len(entries) - 1):
        hits = search_playbook(store, vectors[i], k=3)
        assert hits[0]["key"] == entries[i].key and hits[0]["similarity"] == pytest.approx(1.0, abs=1e-4)
        assert hits[0]["similarity"] >= hits[1]["similarity"] >= hits[2]["similarity"]


@pytest.mark.slow
def test_shipped_embeddings_are_the_models(embedder: Embedder) -> None:
    entries = read_playbook()
    shipped = shipped_embeddings(entries)
    assert shipped is not None, "playbook.yaml changed: run python -m bottleneck_oracle.graphdb.playbook"
    assert np.allclose(shipped, embed_playbook(entries, embedder), atol=1e-5)


@pytest.mark.slow
def test_questions_find_the_remedies_of_their_category(store: GraphStore, embedder: Embedder) -> None:
    if Capability.VECTOR_SEARCH not in store.capabilities:
        pytest.skip("no vector index on this backend")
    ensure_playbook(store, read_playbook())
    for question, category in [
        ("the GPU is idle between thousands of tiny kernels, launch calls dominate", Bottleneck.LAUNCH_OVERHEAD),
        ("rank 3 arrives late at the all_reduce and the other ranks wait", Bottleneck.STRAGGLER_RANK),
        ("the step waits for the DataLoader to produce the next batch", Bottleneck.DATALOADER_STALL),
        ("training stops while torch.save writes the checkpoint", Bottleneck.CHECKPOINT_STALL),
        ("pipeline stages sit idle waiting for activations from the previous stage", Bottleneck.PIPELINE_BUBBLE),
        ("loss.item() forces a cudaStreamSynchronize every step", Bottleneck.HOST_SYNC),
    ]:
        hits = search_playbook(store, embedder.embed([question])[0], k=3)
        assert len(hits) == 3 and hits[0]["category"] == category.value, (question, hits[0])
        assert 1.0 >= hits[0]["similarity"] >= hits[1]["similarity"] >= hits[2]["similarity"] > 0.0


@pytest.mark.slow
def test_a_pause_whose_python_is_named_is_not_told_to_profile_it(store: GraphStore, embedder: Embedder) -> None:
    """A with_stack trace names the Python of a pause (findings/python_frames.py): the remedy is to move that
    work, not to capture the stacks it already has; without frames, it is to profile them."""
    if Capability.VECTOR_SEARCH not in store.capabilities:
        pytest.skip("no vector index on this backend")
    ensure_playbook(store, read_playbook())
    named = ("rank 0 step 6: thread 17751 (python3) ran Python but no profiled op for 215.335 ms, between "
             "'cudaDeviceSynchronize' and 'aten::lift_fresh'; its Python frames' own time: "
             "image_transforms.py(390): normalize 104.917 ms, <built-in method astype of numpy.ndarray> 29.819 ms, "
             "video_classification.py(174): read_video_pyav 24.003 ms")
    unnamed = "rank 1 step 5: thread 7 (python3) ran no profiled op for 146.537 ms, between 'aten::add_' and 'aten::mm'"
    assert search_playbook(store, embedder.embed([named])[0], k=1)[0]["key"] == "host-pause-python-work"
    assert search_playbook(store, embedder.embed([unnamed])[0], k=1)[0]["key"] != "host-pause-python-work"
