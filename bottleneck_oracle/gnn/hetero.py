"""StepGraph → PyG ``HeteroData``, and what the model's forward takes; the one place the graph data meets torch."""

from __future__ import annotations

import numpy as np

from bottleneck_oracle.gnn.data import NODE_TYPES, StepGraph

__all__ = ["model_inputs", "to_hetero"]


def to_hetero(sg: StepGraph):  # type: ignore[no-untyped-def]
    """The PyG HeteroData of a StepGraph (node stores keyed by NODE_TYPES, labels attached)."""
    import torch
    from torch_geometric.data import HeteroData

    data = HeteroData()
    position = np.zeros(len(sg), dtype=np.int64)
    for t, name in enumerate(NODE_TYPES):
        idx = np.flatnonzero(sg.ntype == t)
        position[idx] = np.arange(len(idx))
        store = data[name]
        store.x = torch.from_numpy(sg.x[idx])
        store.on_path = torch.from_numpy(sg.on_path[idx].astype(np.float32))
        store.share = torch.from_numpy(sg.share[idx])
        store.index = torch.from_numpy(idx)
    for key, pair in sg.edges.items():
        data[key].edge_index = torch.from_numpy(position[pair])
    data.step_ms = torch.tensor([sg.step_ms], dtype=torch.float32)
    data.has_labels = sg.has_labels
    return data


def model_inputs(sg: StepGraph):  # type: ignore[no-untyped-def]
    """What the model's forward takes, node features and edge indexes by type, plus the HeteroData
    (which holds the labels the loss reads)."""
    data = to_hetero(sg)
    x = {t: data[t].x for t in NODE_TYPES if t in data.node_types and data[t].num_nodes}
    return x, {k: data[k].edge_index for k in data.edge_types}, data
