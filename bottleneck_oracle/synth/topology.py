"""Process groups of a dp×tp×pp job, in the order every rank creates them, and their NCCL streams.

Names are the creation index as torch assigns them ("0" is the default group). Pipeline
neighbours talk through two-rank groups, one per direction (activations forward,
gradients backward), so each direction is one FIFO with its own sequence numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

from bottleneck_oracle.synth.config import SynthConfig

__all__ = ["COMPUTE_STREAM", "Group", "Topology", "build_topology"]

COMPUTE_STREAM = 7
_FIRST_NCCL_STREAM = 20
_STREAM_STEP = 4


@dataclass(frozen=True, slots=True)
class Group:
    """One process group.

    Attributes:
        name: ``pg_name`` ("0", "1", ...).
        desc: ``pg_desc`` (``default_pg``, ``TENSOR_MODEL_PARALLEL_GROUP``...).
        ranks: global ranks, ascending except for pipeline pairs (sender first).
    """

    name: str
    desc: str
    ranks: tuple[int, ...]

    @property
    def ranks_text(self) -> str:
        """The ranks as torch writes them in ``Process Group Ranks``: "[0, 1]"."""
        return "[" + ", ".join(map(str, self.ranks)) + "]"


@dataclass(frozen=True, slots=True)
class Topology:
    """Every process group of the job and the NCCL stream each rank uses for each.

    Attributes:
        groups: in creation order.
        tp, dp: index of each rank's tensor- and data-parallel group in ``groups``.
        world: index of the default group.
        forward, backward: (sender, receiver) → index of their pipeline pair group.
        streams: rank → group index → stream id.
    """

    groups: tuple[Group, ...]
    tp: tuple[int, ...]
    dp: tuple[int, ...]
    world: int
    forward: dict[tuple[int, int], int]
    backward: dict[tuple[int, int], int]
    streams: tuple[dict[int, int], ...]

    def groups_of(self, rank: int) -> tuple[Group, ...]:
        """The groups holding ``rank``, in creation order."""
        return tuple(g for g in self.groups if rank in g.ranks)


def _rank(config: SynthConfig, stage: int, dp_index: int, tp_index: int) -> int:
    return stage * config.dp * config.tp + dp_index * config.tp + tp_index


def _pairs(config: SynthConfig) -> list[tuple[int, int]]:
    """(sender, receiver) of activations between neighbouring stages (and last→first when interleaved)."""
    hops = [(s, s + 1) for s in range(config.pp - 1)]
    if config.interleave:
        hops.append((config.pp - 1, 0))
    return [(_rank(config, a, d, t), _rank(config, b, d, t))
            for a, b in hops for d in range(config.dp) for t in range(config.tp)]


def build_topology(config: SynthConfig) -> Topology:
    """The process groups of ``config``'s job, named in creation order, and each rank's streams."""
    groups: list[Group] = [Group("0", "default_pg", tuple(range(config.ranks)))]
    tp_of, dp_of = [0] * config.ranks, [0] * config.ranks

    def add(desc: str, ranks: tuple[int, ...]) -> int:
        groups.append(Group(str(len(groups)), desc, ranks))
        return len(groups) - 1

    for s in range(config.pp):
        for d in range(config.dp):
            members = tuple(_rank(config, s, d, t) for t in range(config.tp))
            index = add("TENSOR_MODEL_PARALLEL_GROUP", members)
            for r in members:
                tp_of[r] = index
    for s in range(config.pp):
        for t in range(config.tp):
            members = tuple(_rank(config, s, d, t) for d in range(config.dp))
            index = add("DATA_PARALLEL_GROUP", members)
            for r in members:
                dp_of[r] = index
    for d in range(config.dp):
        for t in range(config.tp):
            add("PIPELINE_MODEL_PARALLEL_GROUP", tuple(_rank(config, s, d, t) for s in range(config.pp)))
    pairs = _pairs(config)
    forward = {pair: add("PIPELINE_P2P_FORWARD", pair) for pair in pairs}
    backward = {(b, a): add("PIPELINE_P2P_BACKWARD", (b, a)) for a, b in pairs}
    streams: list[dict[int, int]] = [{} for _ in range(config.ranks)]
    for index, group in enumerate(groups):
        if len(group.ranks) < 2 or group.desc == "PIPELINE_MODEL_PARALLEL_GROUP":
            continue
        for r in group.ranks:
            streams[r][index] = _FIRST_NCCL_STREAM + _STREAM_STEP * len(streams[r])
    return Topology(tuple(groups), tuple(tp_of), tuple(dp_of), 0, forward, backward, tuple(streams))
