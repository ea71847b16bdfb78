"""What a question asks, for the offline planner: its intent, by the nearest example questions of
``prompts/intents.yaml`` in the all-MiniLM-L6-v2 embedding space, then its slots (steps, ranks, an
op class or collective, a factor, a bottleneck category, trace or op names) read from the words.

No regex decides the intent: paraphrases land near the examples of their intent whatever their
wording; the patterns here only read numbers and names out of a question already classified.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

import numpy as np

from bottleneck_oracle.graphdb.embedding import Embedder, cached_embed
from bottleneck_oracle.graphdb.memory import default_embedder
from bottleneck_oracle.prompts import load_yaml

__all__ = ["INTENTS", "ON_PIPELINE", "Intent", "Slots", "classify", "embedder", "read_slots"]

VOTES = 5  # nearest examples that vote
NEAR = 0.9  # at least this similar to an example, a question takes its intent
FLOOR = 0.33  # below this similarity to every example, a question is out of scope


def embedder() -> Embedder:
    """The sentence model, loaded once per process: the one the findings' search uses too."""
    return default_embedder()


@functools.cache
def _examples() -> tuple[tuple[str, ...], tuple[str, ...], np.ndarray]:
    raw = load_yaml("intents")
    labels = tuple(intent for intent, questions in raw.items() for _ in questions)
    texts = tuple(q for questions in raw.values() for q in questions)
    return labels, texts, cached_embed(texts, embedder)  # the model loads only when the examples changed


INTENTS = ("why_slow", "straggler", "critical_path", "compare_steps", "compare_ranks", "compare_runs", "whatif", "optimize",
           "seen_before", "list_steps", "gpu_busy", "list_traces", "cypher", "step_time", "top_ops", "job_bound",
           "rank_like_peers", "whatif_run", "slowest_step", "explain_category", "hang", "stragglers", "out_of_scope")

# asked with a pipeline job's op table alone (``oracle ask --pipeline``), these can only mean the job's
# straggler analysis: "what if rank 37 were healthy?" is rank_like_peers on a trace, stragglers on an op table
ON_PIPELINE = frozenset({"straggler", "rank_like_peers", "whatif", "whatif_run", "why_slow", "optimize", "job_bound",
                         "compare_ranks", "hang", "stragglers"})


@dataclass(frozen=True, slots=True)
class Intent:
    """The intent of a question, how close its nearest example was, and that example."""

    name: str
    similarity: float
    nearest: str


@functools.lru_cache(maxsize=512)
def classify(question: str) -> Intent:
    """The intent of ``question``: a similarity-weighted vote of its nearest examples."""
    labels, texts, vectors = _examples()
    sims = vectors @ embedder().embed([_normalized(question)])[0]
    order = np.argsort(-sims)[:VOTES]
    if sims[order[0]] < FLOOR:
        return Intent("out_of_scope", float(sims[order[0]]), texts[order[0]])
    if sims[order[0]] >= NEAR:  # the question is (almost) an example: no vote needed
        return Intent(labels[order[0]], float(sims[order[0]]), texts[order[0]])
    votes: dict[str, float] = {}
    for i in order:
        votes[labels[i]] = votes.get(labels[i], 0.0) + float(sims[i])
    best = max(votes, key=lambda k: (votes[k], k == labels[order[0]]))
    top = next(i for i in order if labels[i] == best)
    return Intent(best, float(sims[top]), texts[top])


def _normalized(question: str) -> str:
    """The question with its numbers made alike, so 'step 37' is as near 'step 3' as 'step 4' is."""
    return re.sub(r"\d+(\.\d+)?", "3", question.lower())


_STEP = re.compile(r"\b(?:profilerstep#|step|iteration|iter|it)\s*#?\s*(\d+)", re.I)
_STEPS = re.compile(r"\b(?:steps|iterations)\s+(\d+)\s*(?:and|,|&|vs\.?|versus|to|with)\s*(\d+)", re.I)
_ORDINAL = re.compile(r"\b(\d+)(?:st|nd|rd|th)\s+(?:step|iteration)", re.I)
_RANK = re.compile(r"\b(?:rank|gpu|worker|process|device)\s*#?\s*(\d+)", re.I)
_RANKS = re.compile(r"\b(?:ranks|gpus|workers|devices)\s+(\d+)\s*(?:and|,|&|vs\.?|versus|to|with)\s*(\d+)", re.I)
_FACTOR = re.compile(r"(\d+(?:\.\d+)?)\s*(?:x|×|times)\b", re.I)
_WORD_FACTORS = {r"\btwice\b|\bdouble\b|\bhalf the time\b|\bhalved\b": 2.0, r"\bthree times\b|\btriple": 3.0,
                 r"\bfour times\b": 4.0, r"\bten times\b": 10.0}
# a change asked the other way, a slow-down: "2x slower", "3 times longer", "twice as slow", "half as fast"
_SLOWER_FACTOR = re.compile(r"(\d+(?:\.\d+)?)\s*(?:x|×|times)\s+(?:slower|longer|as slow|as long)\b", re.I)
_SLOWER_WORDS = re.compile(r"\btwice as (?:slow|long)\b|\bhalf as fast\b|\bhalf the speed\b", re.I)
_SLOWER = re.compile(r"\bslower\b|\bslow(?:s|ed)? down\b|\bdegraded\b", re.I)
_FASTER = re.compile(r"\bfaster\b|\bquicker\b|\bspeed ?up\b|\bhalved\b|\bhalf the time\b", re.I)
_REMOVE = re.compile(r"\b(removed?|eliminated?|gone|without|no time|took nothing|skipped?|dropped?)\b", re.I)
_FIX = re.compile(r"\b(fix(ed)?|solved?|resolved?|cured?|went away|disappeared|healthy)\b", re.I)
_DP = re.compile(r"(\d+)\s*(?:data[- ]?parallel|dp\b|replicas|ranks\b|gpus\b)", re.I)
_MICRO = re.compile(r"(\d+)\s*micro-?batch", re.I)
# a pipeline job's what-ifs (``oracle stragglers --whatif``): a layer moved between stages, the layers each
# stage holds, equal work per micro-batch; and a question weighing a bad worker against the stage split
_MOVE = re.compile(r"move_layer\s+(\d+)\s*->\s*(\d+)"
                   r"|\bstage\s*(\d+)\s*(?:->|→|to|onto|into)\s*(?:stage\s*)?(\d+)", re.I)
_LAYERS = re.compile(r"\blayers\s*=\s*(\d+)|(\d+)\s+layers\s+(?:per|a|each|in each|on each|in every)\s+stage"
                     r"|\b(?:each|every)\s+stage\s+(?:holds|has|having|with|of)\s+(\d+)\s+layers"
                     r"|stages\s+of\s+(\d+)\s+layers", re.I)
_EVEN = re.compile(r"even_microbatches|\b(?:even|equal|balanced|same[- ]sized?|uniform)\s+(?:micro-?batch|work|token"
                   r"|sequence)|\bpack(?:ed|ing)?\s+(?:the\s+)?sequences|micro-?batch\w*\s+(?:were|was|are|is)\s+"
                   r"(?:even|equal|balanced)", re.I)
_NODE = re.compile(r"\b(?:node|machine|host|gpu|worker|rank|hardware|server)s?\b", re.I)
_SPLIT = re.compile(r"\b(?:split|stages?|balanc\w*|imbalance|unbalanced|partition\w*|layers?|micro-?batch\w*)\b", re.I)
# a question put for a yes or a no: it opens with an auxiliary verb ("did any ...", "is the GPU ...", "are there ...")
_YES_NO = re.compile(r"^\s*(?:(?:so|and|but|ok|okay)[, ]+)?(?:did|does|do|is|are|was|were|has|have|had|can|could|will|"
                     r"would|should)\b", re.I)
# what a run may be bound by (``whatif/run_verdict.py``'s causes), as a question names it
_BOUNDS = (("gpu", r"\bgpu[- ]?bound|\bcompute[- ]?bound|bound by (?:the )?(?:gpu|compute)"),
           ("input", r"\binput[- ]?bound|data[- ]?load\w*[- ]bound|bound by (?:the )?(?:input|data)"
                     r"|limited by (?:the )?data"),
           ("host", r"\bhost[- ]?bound|\bcpu[- ]?bound|bound by (?:the )?(?:host|cpu)"),
           ("communication", r"communication[- ]?bound|network[- ]?bound"
                             r"|bound by (?:the )?(?:communication|network)"),
           ("launch", r"launch[- ]?bound|bound by (?:kernel )?launch"))
_OP_NAME = re.compile(r"\b[\w.]+::[\w.]+\b|'([^']{2,80})'|\"([^\"]{2,80})\"")
# what a question may name as the thing to change: (pattern, selector of the edit language)
TARGETS: tuple[tuple[str, str], ...] = (
    (r"all[- _]?reduce", "op=allreduce"), (r"all[- _]?gather", "op=allgather"),
    (r"reduce[- _]?scatter", "op=reducescatter"), (r"send|recv|p2p|point[- ]to[- ]point", "op=sendrecv"),
    (r"gemm|mat-?muls?|matrix mult|linear layer|\bmm\b", "op=gemm"), (r"attention|sdpa|flash", "op=attention"),
    (r"optimi[sz]er", "op=optimizer"), (r"layer ?norm|rms ?norm|\bnorms?\b", "op=norm"), (r"softmax", "op=softmax"),
    (r"embedding", "op=embedding"), (r"communication|collectives?|nccl|gloo|network", "kind=comm"),
    (r"kernels?\b", "kind=kernel"),
)
# words that name a bottleneck category (DESIGN's vocabulary)
CATEGORY_WORDS: tuple[tuple[str, str], ...] = (
    (r"host[- ]?pause|\bpause|\bgc\b|garbage collect|\bsleep", "host_pause"),
    (r"data ?loader|data[- ]load|input pipeline|dataloading", "dataloader_stall"),
    (r"straggl|late rank|slow rank", "straggler_rank"),
    (r"\bsync|synchroni[sz]|\.item\(\)|blocking copy", "host_sync"),
    (r"checkpoint", "checkpoint_stall"), (r"launch overhead|kernel launch|tiny kernels", "launch_overhead"),
    (r"bubble", "pipeline_bubble"), (r"exposed comm|communication on the critical path", "exposed_communication"),
    (r"slow compute|slower compute|slow kernels?", "slow_compute"), (r"memory pressure|out of memory", "memory_pressure"),
)


@dataclass(frozen=True, slots=True)
class Slots:
    """What a question names: steps in the order written, ranks, the change it asks about."""

    steps: tuple[int, ...] = ()
    ranks: tuple[int, ...] = ()
    factor: float | None = None
    target: str | None = None
    category: str | None = None
    removal: bool = False
    fix: bool = False
    data_parallel: int | None = None
    microbatches: int | None = None
    names: tuple[str, ...] = field(default=())
    stage_move: tuple[int, int] | None = None  # a layer moved from the first stage to the second
    layers: int | None = None  # the layers each pipeline stage holds
    even_work: bool = False  # every micro-batch the same work
    either: bool = False  # weighs a bad worker against the pipeline split ("one bad node or the split?")
    yes_no: bool = False  # asked to be answered yes or no ("did any step run abnormally long?")
    bounds: tuple[str, ...] = ()  # what the run may be bound by, as named ("is the job input-bound?": input)

    @property
    def step(self) -> int | None:
        return self.steps[0] if self.steps else None

    @property
    def rank(self) -> int | None:
        return self.ranks[0] if self.ranks else None


def _ordered_unique(values: list[int]) -> tuple[int, ...]:
    return tuple(dict.fromkeys(values))


def read_slots(question: str) -> Slots:
    """The slots of ``question`` (empty ones where it names nothing)."""
    q = question
    steps = [(m.start(), int(m.group(1))) for m in _STEP.finditer(q)]
    steps += [(m.start(k), int(m.group(k))) for m in _STEPS.finditer(q) for k in (1, 2)]
    steps += [(m.start(), int(m.group(1))) for m in _ORDINAL.finditer(q)]
    factor = next((float(m.group(1)) for m in _FACTOR.finditer(q)), None)
    if factor is None:
        factor = next((v for p, v in _WORD_FACTORS.items() if re.search(p, q, re.I)), None)
    target = next((sel for p, sel in TARGETS if re.search(p, q, re.I)), None)
    if slower := _SLOWER_FACTOR.search(q):  # a slow-down is a speed-up below 1: "2x slower" is x0.5
        factor = 1 / float(slower.group(1))
    elif _SLOWER_WORDS.search(q) or (factor is None and target and _SLOWER.search(q) and not _FASTER.search(q)):
        factor = 0.5  # "twice as slow", "what if the network were slower"
    words = q.replace("_", " ")  # "host_pause" names its category as "host pause" does
    category = next((c for p, c in CATEGORY_WORDS if re.search(p, words, re.I)), None)
    names = tuple(m.group(1) or m.group(2) or m.group(0) for m in _OP_NAME.finditer(q))
    dp, micro = _DP.search(q), _MICRO.search(q)
    move = _MOVE.search(q) if re.search(r"\blayers?\b|move_layer", q, re.I) else None
    held = _LAYERS.search(q)
    return Slots(
        steps=_ordered_unique([s for _, s in sorted(steps)]),
        ranks=_ordered_unique([r for _, r in sorted([(m.start(), int(m.group(1))) for m in _RANK.finditer(q)]
                                                    + [(m.start(k), int(m.group(k))) for m in _RANKS.finditer(q)
                                                       for k in (1, 2)])]),
        factor=factor, target=target, category=category, removal=bool(_REMOVE.search(q)), fix=bool(_FIX.search(q)),
        data_parallel=int(dp.group(1)) if dp else None, microbatches=int(micro.group(1)) if micro else None,
        names=names, stage_move=tuple(int(g) for g in move.groups() if g) if move else None,  # type: ignore[arg-type]
        layers=int(next(g for g in held.groups() if g)) if held else None, even_work=bool(_EVEN.search(q)),
        either=bool(re.search(r"\bor\b", q, re.I) and _NODE.search(q) and _SPLIT.search(q)),
        yes_no=bool(_YES_NO.search(q)) and not re.search(r"\bor\b", q, re.I),  # "is it X or Y?" asks which
        bounds=tuple(b for b, p in _BOUNDS if re.search(p, q, re.I)),
    )
