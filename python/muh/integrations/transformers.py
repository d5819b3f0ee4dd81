"""muh as an attention implementation of Hugging Face transformers.

    import muh.integrations.transformers as muh_hf
    muh_hf.register()                                   # once per process
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="muh")   # or
    model.set_attn_implementation("muh")
    model.generate(...)          # muh's prefill (FlashAttention's varlen call) for every step
    model.generate_batch(...)    # continuous batching: "paged|muh" over transformers' paged cache

``generate()`` passes the attention function (transformers' ``sdpa_attention_forward`` signature)
q [B, H, Lq, D] and the cached k/v [B, Hkv, Lk, D]; muh registers FlashAttention's mask function
for its name, so the mask is None (no padding) or the 2-D padding mask, and the padded batch is
unpadded into one varlen call (bottom-right causal: Lq < Lk when decoding). Continuous batching
(``generate_batch``) calls the ``paged|muh`` function with packed q [1, H, total_q, D],
cu_seq_lens and transformers' ``PagedAttentionCache``: the cache writes the new k/v and gathers
each request's k/v, and muh's varlen prefill attends with the same cu_seq_lens.

What muh cannot compute raises NotImplementedError: a sliding window, soft-capping, sinks
(``s_aux``), dropout while training, ``output_attentions``.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

import torch

from .. import ops

NAME = "muh"
PAGED_NAME = "paged|" + NAME


def _refuse_unsupported(module: torch.nn.Module, dropout: float, kwargs: dict) -> None:
    where = f"muh attention ({type(module).__name__})"
    if getattr(module, "sliding_window", None):
        raise NotImplementedError(f"{where}: sliding_window={module.sliding_window} is not supported")
    if kwargs.get("softcap") or getattr(module, "attn_logit_softcapping", None):
        raise NotImplementedError(f"{where}: logit soft-capping is not supported")
    if kwargs.get("s_aux") is not None or getattr(module, "sinks", None) is not None:
        raise NotImplementedError(f"{where}: attention sinks are not supported")
    if dropout and module.training:
        raise NotImplementedError(f"{where}: dropout={dropout} while training (muh is inference only)")
    if kwargs.get("output_attentions"):
        raise NotImplementedError(f"{where}: output_attentions (muh returns no attention weights)")


def attention_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor,
                      value: torch.Tensor, attention_mask: Optional[torch.Tensor],
                      dropout: float = 0.0, scaling: Optional[float] = None,
                      is_causal: Optional[bool] = None, **kwargs: Any) -> Tuple[torch.Tensor, None]:
    """transformers' attention-function signature (as ``sdpa_attention_forward``): query
    [B, H, Lq, D], key/value [B, Hkv, Lk, D], attention_mask None or the 2-D padding mask
    [B, Lk] (FlashAttention's mask function, registered for "muh"). Returns ([B, Lq, H, D], None)."""
    from transformers.modeling_flash_attention_utils import _pad_input, _unpad_input, _upad_input

    _refuse_unsupported(module, dropout, kwargs)
    causal = bool(is_causal if is_causal is not None else getattr(module, "is_causal", True))
    b, _, lq, _ = query.shape
    lk = key.shape[2]
    q = query.transpose(1, 2)   # [B, Lq, H, D]
    k = key.transpose(1, 2)     # [B, Lk, Hkv, D]
    v = value.transpose(1, 2)
    if attention_mask is not None and attention_mask.dim() != 2:
        raise NotImplementedError(f"muh attention: a {attention_mask.dim()}-D attention mask (a custom mask) "
                                  "is not supported; muh takes the 2-D padding mask")
    if attention_mask is None:  # FlashAttention's mask function gives None when nothing is padded
        dev = query.device
        cu_q = torch.arange(0, (b + 1) * lq, lq, dtype=torch.int32, device=dev)
        cu_k = torch.arange(0, (b + 1) * lk, lk, dtype=torch.int32, device=dev)
        out = ops.flash_attn_varlen_func(q.reshape(b * lq, *q.shape[2:]), k.reshape(b * lk, *k.shape[2:]),
                                         v.reshape(b * lk, *v.shape[2:]), cu_q, cu_k, lq, lk,
                                         softmax_scale=scaling, causal=causal)
        return out.view(b, lq, *out.shape[1:]), None
    q_u, k_u, v_u, indices_q, (cu_q, cu_k), (max_q, max_k) = _upad_input(q, k, v, attention_mask, lq, _unpad_input)
    out_u = ops.flash_attn_varlen_func(q_u, k_u, v_u, cu_q.to(torch.int32), cu_k.to(torch.int32), int(max_q),
                                       int(max_k), softmax_scale=scaling, causal=causal)
    return _pad_input(out_u, indices_q, b, lq), None


def paged_attention_forward(module: torch.nn.Module, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                            attention_mask: Optional[torch.Tensor], cache: Any = None,
                            cu_seq_lens_q: Optional[torch.Tensor] = None, cu_seq_lens_k: Any = None,
                            max_seqlen_q: int = 0, max_seqlen_k: Any = 0,
                            block_table: Optional[torch.Tensor] = None, **kwargs: Any) -> Tuple[torch.Tensor, None]:
    """transformers' continuous batching ("paged|muh"): packed q [1, H, total_q, D], new k/v
    [1, Hkv, total_new, D]; the PagedAttentionCache writes them and gathers every request's k/v
    (read_index / write_index), which muh's varlen prefill attends to, causal bottom-right."""
    if cache is None:
        raise ValueError("paged|muh was called without a paged attention cache (continuous batching "
                         "prepares one); use attn_implementation='muh' for a standard forward")
    if block_table is not None:
        raise NotImplementedError("paged|muh: the decode fast path (block_table) is flash-only in transformers")
    _refuse_unsupported(module, kwargs.pop("dropout", 0.0), kwargs)
    if isinstance(cu_seq_lens_k, dict):
        cu_seq_lens_k = cu_seq_lens_k["full_attention"]
        max_seqlen_k = max_seqlen_k["full_attention"]
    k, v = cache.update(key_states=k, value_states=v, layer_idx=module.layer_idx,
                        read_index=kwargs["read_index"], write_index=kwargs["write_index"])
    out = ops.flash_attn_varlen_func(q.transpose(1, 2).squeeze(0).contiguous(), k.contiguous(), v.contiguous(),
                                     cu_seq_lens_q.to(torch.int32), cu_seq_lens_k.to(torch.int32),
                                     int(max_seqlen_q), int(max_seqlen_k), softmax_scale=module.scaling,
                                     causal=True)
    return out.unsqueeze(0), None


def register() -> None:
    """Registers "muh" (and "paged|muh" for continuous batching) with transformers'
    AttentionInterface, and FlashAttention's mask function for "muh" (no 4-D mask is built)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, flash_attention_mask

    AttentionInterface.register(NAME, attention_forward)
    AttentionInterface.register(PAGED_NAME, paged_attention_forward)
    AttentionMaskInterface.register(NAME, flash_attention_mask)
