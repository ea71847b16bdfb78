"""Named transformer sizes, and the ops of one layer with their roofline cost.

Shapes are per micro-batch and per tensor-parallel shard (Megatron: QKV and the
first MLP GEMM split by columns, the output projections by rows). A GEMM of
m×k by k×n costs 2·m·n·k FLOPs and moves 2·(m·k + k·n + m·n) bf16 bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from bottleneck_oracle.synth._kernel_names import GEMM, NAMES
from bottleneck_oracle.synth.hardware import Hardware
from bottleneck_oracle.vocabulary import KernelClass

__all__ = [
    "MODELS", "Kernel", "Leaf", "ModelSpec", "Op", "Shard", "TpAllReduce", "embedding_ops",
    "gemm", "head_ops", "layer_backward", "layer_forward", "layer_params", "loss_grad_op", "optimizer_ops",
    "roofline_s",
]

BF16 = 2


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A decoder-only transformer and its default micro-batch.

    Attributes:
        name: the model's name.
        layers, d_model, heads, ffn, vocab: the architecture (ffn is the MLP width).
        seq_len: tokens per sample.
        micro_batch: samples per micro-batch.
        gated_mlp: SwiGLU (gate and up projections, silu·mul) instead of a GELU MLP.
    """

    name: str
    layers: int
    d_model: int
    heads: int
    ffn: int
    vocab: int
    seq_len: int
    micro_batch: int
    gated_mlp: bool = False

    def padded_vocab(self, tp: int) -> int:
        """Vocabulary padded to a multiple of 128·tp, as Megatron does."""
        unit = 128 * tp
        return -(-self.vocab // unit) * unit


MODELS: dict[str, ModelSpec] = {
    "tiny": ModelSpec("tiny", layers=4, d_model=256, heads=4, ffn=1024, vocab=8192, seq_len=256, micro_batch=4),
    "gpt2-small": ModelSpec("gpt2-small", 12, 768, 12, 3072, 50257, 1024, 8),
    "1b": ModelSpec("1b", 16, 2048, 32, 8192, 32000, 2048, 4, gated_mlp=True),
    "7b": ModelSpec("7b", 32, 4096, 32, 11008, 32000, 4096, 1, gated_mlp=True),
    "13b": ModelSpec("13b", 40, 5120, 40, 13824, 32000, 4096, 1, gated_mlp=True),
}


@dataclass(frozen=True, slots=True)
class Kernel:
    """One GPU kernel: its name, class and the work it does."""

    name: str
    kernel_class: KernelClass
    flops: float
    nbytes: float


@dataclass(frozen=True, slots=True)
class Leaf:
    """An innermost CPU op chain (outermost name first) that launches one kernel."""

    names: tuple[str, ...]
    kernel: Kernel
    input_dims: tuple[tuple[int, ...], ...] = ()


@dataclass(frozen=True, slots=True)
class Op:
    """A framework op: optional wrappers (autograd frames) around leaves run in order.

    ``autograd`` marks a forward op that has a backward (it carries a sequence number)
    and, on a backward op, the key of the forward op it differentiates.
    """

    key: str
    wrappers: tuple[str, ...]
    leaves: tuple[Leaf, ...]
    autograd: str = ""


@dataclass(frozen=True, slots=True)
class TpAllReduce:
    """A blocking tensor-parallel all-reduce of ``nelems`` bf16 values."""

    nelems: int


@dataclass(frozen=True, slots=True)
class Shard:
    """Sizes one rank works on: a micro-batch of ``batch`` samples, one of ``tp`` shards."""

    batch: int
    seq: int
    tp: int

    @property
    def tokens(self) -> int:
        """Tokens per micro-batch."""
        return self.batch * self.seq


def roofline_s(flops: float, nbytes: float, hw: Hardware, efficiency: float) -> float:
    """Kernel time: max(FLOPs / (peak · efficiency), bytes / HBM bandwidth, the shortest kernel)."""
    return max(flops / (hw.peak_flops * efficiency), nbytes / hw.hbm_bytes_per_s, hw.min_kernel_s)


def _ew(name: str, nbytes: float, flops: float = 0.0) -> Kernel:
    return Kernel(NAMES[name], KernelClass.ELEMENTWISE, flops, float(nbytes))


def gemm(name: str, m: int, n: int, k: int) -> Kernel:
    """The kernel of an m×k by k×n bf16 GEMM: 2·m·n·k FLOPs, 2·(m·k + k·n + m·n) bytes."""
    return Kernel(name, KernelClass.GEMM, 2.0 * m * n * k, float(BF16 * (m * k + k * n + m * n)))


def _linear(key: str, arch: str, sh: Shard, n: int, k: int) -> Op:
    kern = gemm(GEMM[arch].format("tn"), sh.tokens, n, k)
    leaf = Leaf(("aten::linear", "aten::addmm"), kern, ((sh.batch, sh.seq, k), (n, k), (n,)))
    return Op(key, (), (leaf,), autograd=key)


def _linear_backward(key: str, arch: str, sh: Shard, n: int, k: int) -> Op:
    dgrad = gemm(GEMM[arch].format("nn"), sh.tokens, k, n)
    wgrad = gemm(GEMM[arch].format("nt"), n, k, sh.tokens)
    leaves = (Leaf(("aten::mm",), dgrad, ((sh.tokens, n), (n, k))),
              Leaf(("aten::mm",), wgrad, ((n, sh.tokens), (sh.tokens, k))))
    return Op(key, ("autograd::engine::evaluate_function: AddmmBackward0", "AddmmBackward0"), leaves, autograd=key)


def _simple(key: str, names: tuple[str, ...], kernel: Kernel, dims: tuple[tuple[int, ...], ...],
            differentiated: bool = True) -> Op:
    return Op(key, (), (Leaf(names, kernel, dims),), autograd=key if differentiated else "")


def _backward(key: str, fn: str, names: tuple[str, ...], kernel: Kernel) -> Op:
    return Op(key, (f"autograd::engine::evaluate_function: {fn}", fn), (Leaf(names, kernel),), autograd=key)


def _layer_norm(key: str, sh: Shard, h: int) -> Op:
    kern = _ew("ln_fwd", 2 * BF16 * sh.tokens * h, 8.0 * sh.tokens * h)
    return _simple(key, ("aten::layer_norm", "aten::native_layer_norm"), kern, ((sh.batch, sh.seq, h), (h,), (h,)))


def _layer_norm_backward(key: str, sh: Shard, h: int) -> Op:
    kern = _ew("ln_bwd", 3 * BF16 * sh.tokens * h, 10.0 * sh.tokens * h)
    return _backward(key, "NativeLayerNormBackward0", ("aten::native_layer_norm_backward",), kern)


def _attention_flops(sh: Shard, h: int) -> float:
    """Causal flash attention forward: 4·b·s²·(h/tp) halved by the mask."""
    return 2.0 * sh.batch * sh.seq * sh.seq * h / sh.tp


def layer_forward(spec: ModelSpec, sh: Shard, arch: str) -> tuple[Op | TpAllReduce, ...]:
    """The ops of one layer's forward, in launch order, with the TP all-reduces (Megatron)."""
    h, t, f = spec.d_model, sh.tp, spec.ffn
    tokens, up = sh.tokens, (2 if spec.gated_mlp else 1)
    act, wide = (sh.batch, sh.seq, h), (sh.batch, sh.seq, f // t)
    attn = Kernel(NAMES["flash_fwd"], KernelClass.ATTENTION, _attention_flops(sh, h), 4.0 * BF16 * tokens * h / t)
    sdpa = ("aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention")
    ops: list[Op | TpAllReduce] = [
        _layer_norm("ln1", sh, h), _linear("qkv", arch, sh, 3 * h // t, h),
        _simple("attn", sdpa, attn, ((sh.batch, spec.heads // t, sh.seq, h // spec.heads),) * 3),
        _linear("proj", arch, sh, h, h // t),
    ]
    ops += [TpAllReduce(tokens * h)] if t > 1 else []
    ops += [_simple("add1", ("aten::add",), _ew("add", 3 * BF16 * tokens * h), (act, act), differentiated=False),
            _layer_norm("ln2", sh, h), _linear("fc1", arch, sh, up * f // t, h)]
    if spec.gated_mlp:
        ops += [_simple("silu", ("aten::silu",), _ew("silu", 2 * BF16 * tokens * f / t), (wide,)),
                _simple("mul", ("aten::mul",), _ew("mul", 3 * BF16 * tokens * f / t), (wide, wide))]
    else:
        ops += [_simple("gelu", ("aten::gelu",), _ew("gelu", 2 * BF16 * tokens * f / t), (wide,))]
    ops += [_linear("fc2", arch, sh, h, f // t)]
    ops += [TpAllReduce(tokens * h)] if t > 1 else []
    ops += [_simple("add2", ("aten::add",), _ew("add", 3 * BF16 * tokens * h), (act, act), differentiated=False)]
    return tuple(ops)


def layer_backward(spec: ModelSpec, sh: Shard, arch: str) -> tuple[Op | TpAllReduce, ...]:
    """The ops of one layer's backward, in launch order (reverse of the forward)."""
    h, t, f = spec.d_model, sh.tp, spec.ffn
    tokens, up = sh.tokens, (2 if spec.gated_mlp else 1)
    ew_bytes = 3 * BF16 * tokens * f / t
    ops: list[Op | TpAllReduce] = [_linear_backward("fc2", arch, sh, h, f // t)]
    if spec.gated_mlp:
        ops += [_backward("mul", "MulBackward0", ("aten::mul",), _ew("mul", 2 * ew_bytes)),
                _backward("silu", "SiluBackward0", ("aten::silu_backward",), _ew("silu_bwd", ew_bytes))]
    else:
        ops += [_backward("gelu", "GeluBackward0", ("aten::gelu_backward",), _ew("gelu_bwd", ew_bytes))]
    ops += [_linear_backward("fc1", arch, sh, up * f // t, h)]
    ops += [TpAllReduce(tokens * h)] if t > 1 else []
    attn = Kernel(NAMES["flash_bwd"], KernelClass.ATTENTION, 2.5 * _attention_flops(sh, h), 8.0 * BF16 * tokens * h / t)
    ops += [_layer_norm_backward("ln2", sh, h), _linear_backward("proj", arch, sh, h, h // t),
            _backward("attn", "ScaledDotProductFlashAttentionBackward0",
                      ("aten::_scaled_dot_product_flash_attention_backward",), attn),
            _linear_backward("qkv", arch, sh, 3 * h // t, h)]
    ops += [TpAllReduce(tokens * h)] if t > 1 else []
    ops += [_layer_norm_backward("ln1", sh, h)]
    return tuple(ops)


def layer_params(spec: ModelSpec, tp: int) -> int:
    """Parameters of one layer held by one TP shard: attention 4h², MLP (1 or 2)+1 · h·ffn, two norms."""
    h, up = spec.d_model, (2 if spec.gated_mlp else 1)
    return (4 * h * h + (up + 1) * h * spec.ffn) // tp + 4 * h


def embedding_ops(spec: ModelSpec, sh: Shard) -> tuple[Op, Op, int]:
    """Forward and backward op of the (vocabulary-parallel) input embedding, and its parameters."""
    h, vocab = spec.d_model, spec.padded_vocab(sh.tp) // sh.tp
    fwd = _ew("embed_fwd", 2.0 * BF16 * sh.tokens * h)
    bwd = _ew("embed_bwd", BF16 * (sh.tokens * h + 2 * vocab * h), float(sh.tokens * h))
    forward = _simple("embed", ("aten::embedding", "aten::index_select"), fwd, ((vocab, h), (sh.batch, sh.seq)))
    backward = _backward("embed", "EmbeddingBackward0", ("aten::embedding_backward", "aten::embedding_dense_backward"),
                         bwd)
    return forward, backward, vocab * h


def head_ops(spec: ModelSpec, sh: Shard, arch: str) -> tuple[tuple[Op, ...], tuple[Op, ...], int]:
    """Forward and backward ops of the final norm, LM head and cross-entropy loss, and their parameters."""
    h, vocab, tokens = spec.d_model, spec.padded_vocab(sh.tp) // sh.tp, sh.tokens
    logits = tokens * vocab
    softmax = _ew("softmax", 2.0 * BF16 * logits, 5.0 * logits)
    nll = _ew("nll", BF16 * tokens + 8 * tokens, float(tokens))
    loss = Op("loss", ("aten::cross_entropy_loss",), (
        Leaf(("aten::log_softmax", "aten::_log_softmax"), softmax, ((tokens, vocab),)),
        Leaf(("aten::nll_loss_nd", "aten::nll_loss_forward"), nll, ((tokens, vocab), (tokens,))),
    ), autograd="loss")
    forward = (_layer_norm("final_ln", sh, h), _linear("lm_head", arch, sh, vocab, h), loss)
    softmax_bwd = Leaf(("aten::_log_softmax_backward_data",), _ew("softmax_bwd", 3.0 * BF16 * logits, 3.0 * logits))
    backward = (
        _backward("loss", "NllLossBackward0", ("aten::nll_loss_backward",), _ew("nll_bwd", BF16 * logits, tokens)),
        Op("loss_sm", ("autograd::engine::evaluate_function: LogSoftmaxBackward0", "LogSoftmaxBackward0"),
           (softmax_bwd,)),
        _linear_backward("lm_head", arch, sh, vocab, h), _layer_norm_backward("final_ln", sh, h),
    )
    return forward, backward, vocab * h + 2 * h


def loss_grad_op() -> Op:
    """``loss.backward()``'s seed gradient on the main thread: ``aten::ones_like`` filling one value."""
    return Op("ones_like", ("aten::ones_like",), (Leaf(("aten::fill_",), _ew("fill", 4.0), ((),)),))


_FOREACH = (  # AdamW with foreach=True: (op, functor, fp32 tensors streamed per parameter)
    ("aten::_foreach_mul_", "BinaryOpScalarFunctor<float, 1, 1, 0>, std::multiplies<float>", 2),
    ("aten::_foreach_lerp_", "TernaryOpScalarFunctor<float, 2, 2, 0>, at::native::LerpFunctor<float>", 3),
    ("aten::_foreach_mul_", "BinaryOpScalarFunctor<float, 1, 1, 0>, std::multiplies<float>", 2),
    ("aten::_foreach_addcmul_", "PointwiseOpScalarFunctor<float, 3, 3, 0>, std::multiplies<float>", 4),
    ("aten::_foreach_sqrt", "UnaryOpFunctor<float, 2, 1, 1>, at::native::Sqrt<float>", 2),
    ("aten::_foreach_div_", "BinaryOpScalarFunctor<float, 1, 1, 0>, std::divides<float>", 2),
    ("aten::_foreach_add_", "BinaryOpScalarFunctor<float, 1, 1, 0>, std::plus<float>", 2),
    ("aten::_foreach_addcdiv_", "PointwiseOpScalarFunctor<float, 3, 3, 0>, std::divides<float>", 4),
)
TENSORS_PER_KERNEL = 48


def optimizer_ops(params: int, tensors: int) -> tuple[tuple[str, Kernel, int], ...]:
    """AdamW's foreach ops over ``params`` fp32 parameters in ``tensors`` tensors.

    Returns:
        ``(op name, kernel, launches)`` per op; each launch handles up to 48 tensors and an
        equal share of the bytes (4 bytes per parameter and tensor streamed).
    """
    launches = max(1, -(-tensors // TENSORS_PER_KERNEL))
    return tuple(
        (name, Kernel(NAMES["foreach"].format(min(streams, 4), functor), KernelClass.OPTIMIZER, params / launches,
                      4.0 * streams * params / launches), launches)
        for name, functor, streams in _FOREACH
    )
