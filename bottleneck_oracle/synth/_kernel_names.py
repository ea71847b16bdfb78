"""Kernel names as CUDA 12 / PyTorch 2.x bf16 training traces show them (cuBLAS, flash attention, ATen)."""

from __future__ import annotations

__all__ = ["GEMM", "NAMES", "elementwise"]

_NS = "at::native::(anonymous namespace)::"
_BF = "c10::BFloat16"

GEMM = {  # by architecture; {} is the layout: tn forward, nn data gradient, nt weight gradient
    "sm80": "ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_64x3_{}",
    "sm90": ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_{}_n_tilesize128x256x64_warpgroupsize2x1x1"
             "_execute_segment_k_off_kernel__5x_cublas"),
}


def elementwise(functor: str, arity: int) -> str:
    """An ATen vectorized elementwise kernel around ``functor`` with ``arity`` tensors."""
    return (f"void at::native::vectorized_elementwise_kernel<4, {functor}, at::detail::Array<char*, {arity}> >"
            f"(int, {functor}, at::detail::Array<char*, {arity}>)")


NAMES = {
    "flash_fwd": ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
                  "cutlass::bfloat16_t>, false, true, false, false, true, true, false, false>"
                  "(pytorch_flash::Flash_fwd_params)"),
    "flash_bwd": ("void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128, 64, "
                  "128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t>, true, false, false, false, false>"
                  "(pytorch_flash::Flash_bwd_params)"),
    "ln_fwd": (f"void {_NS}vectorized_layer_norm_kernel<{_BF}, float>(int, float, {_BF} const*, {_BF} const*, "
               f"{_BF} const*, float*, float*, {_BF}*)"),
    "ln_bwd": (f"void {_NS}layer_norm_grad_input_kernel_vectorized<{_BF}, float>({_BF} const*, {_BF} const*, "
               f"float const*, float const*, {_BF} const*, {_BF}*, int)"),
    "add": elementwise(f"at::native::CUDAFunctor_add<{_BF}>", 3),
    "mul": elementwise(f"at::native::binary_internal::MulFunctor<{_BF}>", 3),
    "silu": elementwise(f"at::native::silu_kernel(at::TensorIteratorBase&)::{{lambda({_BF})#1}}", 2),
    "silu_bwd": elementwise(
        f"at::native::silu_backward_kernel(at::TensorIteratorBase&)::{{lambda({_BF}, {_BF})#1}}", 3),
    "gelu": elementwise(
        f"at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{{lambda({_BF})#1}}", 2),
    "gelu_bwd": elementwise(
        "at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::"
        f"{{lambda({_BF}, {_BF})#1}}", 3),
    "fill": elementwise("at::native::FillFunctor<float>", 1),
    "embed_fwd": (f"void {_NS}indexSelectLargeIndex<{_BF}, long, unsigned int, 2, 2, -2, true>"
                  f"(at::cuda::detail::TensorInfo<{_BF}, unsigned int>, at::cuda::detail::TensorInfo<{_BF} const, "
                  "unsigned int>, at::cuda::detail::TensorInfo<long const, unsigned int>, int, int, unsigned int, "
                  "unsigned int, long)"),
    "embed_bwd": (f"void {_NS}embedding_backward_feature_kernel<{_BF}, float, long>"
                  f"(long const*, {_BF} const*, {_BF}*, int, long, int)"),
    "softmax": (f"void {_NS}cunn_SoftMaxForward<4, {_BF}, float, {_BF}, {_NS}LogSoftMaxForwardEpilogue>"
                f"({_BF}*, {_BF} const*, int)"),
    "softmax_bwd": (f"void {_NS}cunn_SoftMaxBackward<4, {_BF}, float, {_BF}, {_NS}LogSoftMaxBackwardEpilogue>"
                    f"({_BF}*, {_BF} const*, {_BF} const*, long)"),
    "nll": (f"void {_NS}nll_loss_forward_reduce_cuda_kernel_2d<{_BF}, float, long>({_BF}*, {_BF}*, {_BF} const*, "
            f"long const*, {_BF} const*, bool, long, long, long, long)"),
    "nll_bwd": (f"void {_NS}nll_loss_backward_reduce_cuda_kernel_2d<{_BF}, long>({_BF}*, {_BF} const*, long const*, "
                f"{_BF} const*, {_BF} const*, bool, int, int, long, long)"),
    "foreach": (f"void {_NS}multi_tensor_apply_kernel<{_NS}TensorListMetadata<{{0}}>, {_NS}{{1}}, float>"
                f"({_NS}TensorListMetadata<{{0}}>, {_NS}{{1}}, float)"),
}
