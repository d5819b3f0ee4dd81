// prefill_check.cpp — the host-side input checks of prefill (prefill_check.hpp).
#include "prefill_check.hpp"

#include <cmath>
#include <string>

#include "kv_quant_check.hpp"
#include "pointer_checks.hpp"
#include "variant_check.hpp"
#include "muh/build_config.hpp"
#include "muh/instances.hpp"
#include "muh/shapes.hpp"

namespace muh::detail {

Status check_prefill_shape(const PrefillParams& p, const char* where_) {
  const std::string where = where_;
  auto num = [](long long v) { return std::to_string(v); };
  if (p.dtype != DType::fp16 && p.dtype != DType::bf16 && p.dtype != DType::fp32)
    return invalid_argument(where + "dtype " + num(static_cast<int>(p.dtype)) + " is not one of fp16, bf16, fp32");
  if (!is_supported_head_dim(p.head_dim))
    return invalid_argument(where + "head_dim " + num(p.head_dim) + " is not supported (supported: 64, 96, 128, 256)");
  if (p.num_q_heads < 1 || p.num_kv_heads < 1)
    return invalid_argument(where + "num_q_heads (" + num(p.num_q_heads) + ") and num_kv_heads (" +
                            num(p.num_kv_heads) + ") must be >= 1");
  if (p.num_q_heads % p.num_kv_heads != 0)
    return invalid_argument(where + "num_q_heads (" + num(p.num_q_heads) + ") must be a multiple of num_kv_heads (" +
                            num(p.num_kv_heads) + ")");
  if (p.batch < 0 || p.total_q < 0 || p.total_k < 0 || p.max_seqlen_q < 0 || p.max_seqlen_k < 0)
    return invalid_argument(where + "batch, total_q, total_k, max_seqlen_q and max_seqlen_k must be >= 0");
  if (is_paged(p.kv_source)) MUH_TRY(check_paged_prefill_shape(p, where));  // (any other value: not a layout)
  if (p.max_seqlen_q > p.total_q || (!is_paged(p.kv_source) && p.max_seqlen_k > p.total_k))
    return invalid_argument(where + "max_seqlen_q (" + num(p.max_seqlen_q) + ") / max_seqlen_k (" +
                            num(p.max_seqlen_k) + ") exceed total_q (" + num(p.total_q) + ") / total_k (" +
                            num(p.total_k) + ")");
  if (p.batch > 0 && p.total_q > 0 && p.max_seqlen_q == 0)
    return invalid_argument(where + "max_seqlen_q is 0 but total_q is " + num(p.total_q));
  if (!is_paged(p.kv_source) && p.batch > 0 && p.total_k > 0 && p.max_seqlen_k == 0)
    return invalid_argument(where + "max_seqlen_k is 0 but total_k is " + num(p.total_k));
  if (p.batch == 0 && (p.total_q > 0 || p.total_k > 0))
    return invalid_argument(where + "batch is 0 but total_q / total_k are not");
  if (!std::isfinite(p.softmax_scale) || p.softmax_scale < 0.f)
    return invalid_argument(where + "softmax_scale must be finite and > 0 (0 selects 1/sqrt(head_dim))");
  MUH_TRY(check_variant_values(p.variant, where));
  MUH_TRY(check_prefill_kv_quant(p, where));
  // Indices inside the kernels are 64-bit; the grid is one dimension of at most 2^31 − 1 CTAs.
  if (static_cast<long long>(p.max_seqlen_q) * p.batch * p.num_q_heads > 0x7fffffffLL)
    return invalid_argument(where + "max_seqlen_q × batch × num_q_heads exceeds 2^31 − 1");
  return Status::Ok();
}

// The cache's element type (muh/kv_quant.hpp, PrefillParams::kv): an fp8 cache is a paged one
// (contiguous K/V are q's type), read with fp16 / bf16 q (with or without a variant: the fp8
// instances have the general kind where their (dtype, head dim) has it, check_variant_compiled),
// and, in the vLLM layout, with pages of whole 16-slot value chunks (the sm80 agent copies a value
// row's 16 codes = 16 slots of one page at a time).
Status check_prefill_kv_quant(const PrefillParams& p, const std::string& where) {
  MUH_TRY(check_kv_quant_values(p.kv, where));
  if (!is_fp8(p.kv.dtype)) return Status::Ok();
  const std::string kind = "an fp8 KV cache (" + std::string(kv_dtype_name(p.kv.dtype)) + ")";
  if (!is_paged(p.kv_source))
    return invalid_argument(where + kind + " is read from a paged cache only (kv_source paged_nhd or paged_vllm)");
  if (p.dtype == DType::fp32) return invalid_argument(where + kind + " is read with fp16 or bf16 q, not fp32");
  if (p.kv_source == KVSource::paged_vllm && p.page_size % 16 != 0)
    return invalid_argument(where + kind + " in the vllm layout needs page_size a multiple of 16 (got " +
                            std::to_string(p.page_size) + ")");
  return Status::Ok();
}

Status check_paged_prefill_shape(const PrefillParams& p, const std::string& where) {
  auto num = [](long long v) { return std::to_string(v); };
  if (p.kv_source != KVSource::paged_nhd && p.kv_source != KVSource::paged_vllm)
    return invalid_argument(where + "kv_source " + num(static_cast<int>(p.kv_source)) + " is not a paged layout");
  if (p.total_k != 0)
    return invalid_argument(where + "total_k must be 0 for paged K/V (the keys are counted by seqused_k), not " +
                            num(p.total_k));
  // 16-byte rows of keys: a page holds whole 16-byte groups of slots (the vLLM value layout is
  // token-minor, read 16 bytes = 8 slots at a time), so page_size is a multiple of 16 / elem.
  const int group = 16 / static_cast<int>(dtype_size(p.dtype));
  if (p.page_size <= 0 || p.page_size % group != 0)
    return invalid_argument(where + "page_size " + num(p.page_size) + " must be > 0 and a multiple of " +
                            num(group) + " for " + std::string(dtype_name(p.dtype)));
  if (p.num_pages < 1 || p.max_blocks_per_seq < 1)
    return invalid_argument(where + "num_pages (" + num(p.num_pages) + ") and max_blocks_per_seq (" +
                            num(p.max_blocks_per_seq) + ") must be >= 1");
  const long long covered = static_cast<long long>(p.max_blocks_per_seq) * p.page_size;
  if (p.max_seqlen_k > covered)
    return invalid_argument(where + "max_seqlen_k " + num(p.max_seqlen_k) + " exceeds what the block table covers: " +
                            num(p.max_blocks_per_seq) + " blocks x page_size " + num(p.page_size) + " = " + num(covered));
  if (p.max_seqlen_k > 0x7fffffffLL - p.page_size)
    return invalid_argument(where + "max_seqlen_k " + num(p.max_seqlen_k) + " is too large");
  // Causal (bottom-right): a chunk's keys include its own tokens. Not causal, q may be longer than
  // the keys (context_attention_fwd's prefix part: a chunk against a shorter cached prefix).
  if (p.causal && p.max_seqlen_q > p.max_seqlen_k)
    return invalid_argument(where + "max_seqlen_q (" + num(p.max_seqlen_q) + ") exceeds max_seqlen_k (" +
                            num(p.max_seqlen_k) + "): a causal paged call's keys include its queries' own tokens");
  return Status::Ok();
}

Status check_paged_tables_host(const PrefillParams& p, const int* cq, const int* used, const int* bt) {
  const std::string where = "prefill: ";
  auto num = [](long long v) { return std::to_string(v); };
  if (cq[0] != 0) return invalid_argument(where + "cu_seqlens_q[0] is " + num(cq[0]) + ", not 0");
  for (int b = 0; b < p.batch; ++b) {
    const int sq = cq[b + 1] - cq[b];
    if (sq < 0) return invalid_argument(where + "cu_seqlens_q is not monotonic at " + num(b + 1));
    if (sq > p.max_seqlen_q)
      return invalid_argument(where + "sequence " + num(b) + " has " + num(sq) + " queries, above max_seqlen_q " +
                              num(p.max_seqlen_q));
    const int sk = used[b];
    if (sk < 0 || sk > p.max_seqlen_k)
      return invalid_argument(where + "seqused_k[" + num(b) + "] is " + num(sk) + ", outside [0, max_seqlen_k " +
                              num(p.max_seqlen_k) + "] (the block table covers " +
                              num(static_cast<long long>(p.max_blocks_per_seq) * p.page_size) + " keys)");
    if (p.causal && sq > sk)
      return invalid_argument(where + "sequence " + num(b) + " has " + num(sq) + " queries but seqused_k " + num(sk) +
                              ": a causal call's keys include its queries' own tokens");
    const int blocks = (sk + p.page_size - 1) / p.page_size;
    for (int i = 0; i < blocks; ++i) {
      const int id = bt[static_cast<std::size_t>(b) * p.max_blocks_per_seq + i];
      if (id < 0 || id >= p.num_pages)
        return invalid_argument(where + "block_table[" + num(b) + "][" + num(i) + "] is " + num(id) +
                                ", outside [0, num_pages " + num(p.num_pages) + ")");
    }
  }
  if (cq[p.batch] != p.total_q)
    return invalid_argument(where + "cu_seqlens_q[batch] is " + num(cq[p.batch]) + ", not total_q " + num(p.total_q));
  return Status::Ok();
}

Status check_prefill_compiled(const PrefillParams& p) {
  MUH_TRY(check_variant_compiled(p.variant, p.dtype, p.head_dim, "prefill: "));
  if (is_paged(p.kv_source) && !MUH_PAGED_PREFILL)
    return {StatusCode::not_compiled,
            "prefill: paged K/V are not compiled into this build; rebuild with MUH_PAGED_PREFILL=ON"};
  if (is_fp8(p.kv.dtype) && !is_fp8_instance(p.kv.dtype, p.dtype, p.head_dim))
    return {StatusCode::not_compiled, "prefill: the " + std::string(kv_dtype_name(p.kv.dtype)) + " KV cache with " +
                                          std::string(dtype_name(p.dtype)) + " q and head_dim " +
                                          std::to_string(p.head_dim) +
                                          " is not compiled into this build; rebuild with MUH_KV_FP8 / "
                                          "MUH_KV_FP8_HEAD_DIMS including it"};
  if (is_compiled_instance(p.dtype, p.head_dim)) return Status::Ok();
  return {StatusCode::not_compiled, "prefill: " + std::string(dtype_name(p.dtype)) + " with head_dim " +
                                        std::to_string(p.head_dim) + " is not compiled into this build (compiled: " +
                                        describe_compiled_instances() +
                                        "); rebuild with MUH_DTYPES / MUH_HEAD_DIMS including it"};
}

Status check_prefill_call(const PrefillParams& p) {
  MUH_TRY(check_prefill_shape(p, "prefill: "));
  if (p.batch == 0 || p.total_q == 0) return Status::Ok();  // nothing is read or written
  MUH_TRY(check_prefill_compiled(p));
  return check_prefill_pointers(p);
}

Status check_prefill_pointers(const PrefillParams& p) {
  const std::string where = "prefill: ";
  if (p.q == nullptr || p.out == nullptr) return invalid_argument(where + "q and out must not be null");
  if (is_paged(p.kv_source)) {
    if (p.k_cache == nullptr || p.v_cache == nullptr || p.block_table == nullptr || p.seqused_k == nullptr ||
        p.cu_seqlens_q == nullptr)
      return invalid_argument(where + "k_cache, v_cache, block_table, seqused_k and cu_seqlens_q must not be null");
    if (!is_aligned(p.q, 16) || !is_aligned(p.out, 16) || !is_aligned(p.k_cache, 16) || !is_aligned(p.v_cache, 16))
      return invalid_argument(where + "q, k_cache, v_cache and out must be 16-byte aligned");
    if (!is_aligned(p.cu_seqlens_q, 4) || !is_aligned(p.block_table, 4) || !is_aligned(p.seqused_k, 4) ||
        (p.lse && !is_aligned(p.lse, 4)))
      return invalid_argument(where + "cu_seqlens_q, block_table, seqused_k and lse must be 4-byte aligned");
    return Status::Ok();
  }
  if (p.total_k > 0 && (p.k == nullptr || p.v == nullptr))
    return invalid_argument(where + "k and v must not be null when total_k > 0");
  if (p.cu_seqlens_q == nullptr || p.cu_seqlens_k == nullptr)
    return invalid_argument(where + "cu_seqlens_q and cu_seqlens_k must not be null");
  // 16-byte vector loads and stores of rows; head_dim·elem is a multiple of 16 for every supported
  // head dim, so aligned bases give aligned rows.
  if (!is_aligned(p.q, 16) || !is_aligned(p.out, 16) || (p.k && !is_aligned(p.k, 16)) || (p.v && !is_aligned(p.v, 16)))
    return invalid_argument(where + "q, k, v and out must be 16-byte aligned");
  if (!is_aligned(p.cu_seqlens_q, 4) || !is_aligned(p.cu_seqlens_k, 4) || (p.lse && !is_aligned(p.lse, 4)))
    return invalid_argument(where + "cu_seqlens_q, cu_seqlens_k and lse must be 4-byte aligned");
  return Status::Ok();
}

}  // namespace muh::detail
