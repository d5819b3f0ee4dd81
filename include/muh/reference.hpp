// reference.hpp — CPU reference attention: the one answer every compiled policy is checked
// against. Inputs are float (tests round them to the storage dtype first), accumulation is
// double, output float. Slow and obvious on purpose.
#pragma once

#include <cstdint>
#include <vector>

#include "muh/dtype.hpp"
#include "muh/paged_kv.hpp"
#include "muh/variant.hpp"

namespace muh::ref {

// Dense varlen prefill (FlashAttention's convention).
//   q   [total_q, num_q_heads, head_dim]      k, v [total_k, num_kv_heads, head_dim]
//   cu_seqlens_q/k [batch + 1]                out  [total_q, num_q_heads, head_dim]
//   lse [num_q_heads, total_q] (natural log of Σ exp(scale·q·k)); nullptr to skip.
// GQA: query head h reads KV head h / (num_q_heads / num_kv_heads).
// Causal is bottom-right aligned: query i of a sequence with lengths (sq, sk) sees keys
// j <= i + sk − sq. A query that sees no key gets out = 0 and lse = −inf.
void prefill(const float* q, const float* k, const float* v, const int* cu_seqlens_q,
             const int* cu_seqlens_k, int batch, int num_q_heads, int num_kv_heads, int head_dim,
             float softmax_scale, bool causal, float* out, float* lse);

// The same with an attention variant (muh/variant.hpp): a window, soft-capping, ALiBi, sinks —
// each as variant.hpp defines it, computed in double. Here the variant's sinks and alibi_slopes
// are HOST pointers [num_q_heads]. A query that sees no key gets out = 0 and lse = −inf, or
// lse = sink with a sink.
void prefill(const float* q, const float* k, const float* v, const int* cu_seqlens_q,
             const int* cu_seqlens_k, int batch, int num_q_heads, int num_kv_heads, int head_dim,
             float softmax_scale, bool causal, const Variant& variant, float* out, float* lse);

// Paged prefill (PrefillParams::kv_source paged): q varlen with cu_seqlens_q [batch + 1];
// sequence b's keys 0 .. seqused_k[b] − 1 are read through block_table row b from the paged
// cache (kv.layout), gathered into dense K/V and handed to prefill() above — so a paged call and
// a dense call over the gathered K/V give the same answer by construction, and what the tests
// check against it is the kernels' paging. Causal is bottom-right aligned (the last query of a
// sequence sees all its keys).
void paged_prefill(const float* q, const float* k_cache, const float* v_cache, const PagedKVShape& kv,
                   const int* block_table, int max_blocks_per_seq, const int* cu_seqlens_q,
                   const int* seqused_k, int batch, int num_q_heads, float softmax_scale, bool causal,
                   float* out, float* lse);

// Paged decode: one query token per sequence.
//   q [num_seqs, num_q_heads, head_dim], block_table [num_seqs, max_blocks_per_seq],
//   seq_lens [num_seqs], k_cache / v_cache in kv.layout, out [num_seqs, num_q_heads, head_dim],
//   lse [num_seqs, num_q_heads] or nullptr. A sequence of length 0 gives out = 0, lse = −inf.
// [kv_begin, kv_end) restricts every sequence to a key range (a V2 partition); kv_end < 0 means
// the whole sequence.
void paged_decode(const float* q, const float* k_cache, const float* v_cache,
                  const PagedKVShape& kv, const int* block_table, int max_blocks_per_seq,
                  const int* seq_lens, int num_seqs, int num_q_heads, float softmax_scale,
                  float* out, float* lse, int kv_begin = 0, int kv_end = -1);

// Paged decode with an attention variant (host sinks / alibi_slopes): the query of sequence s is
// its last token (i' = seq_len − 1), so a window (left, ·) keeps keys [seq_len − 1 − left,
// seq_len); ALiBi's distance is seq_len − 1 − j. A sequence of length 0 gives out = 0 and
// lse = −inf also with a sink (padding rows of a CUDA-graph batch, as the kernels).
void paged_decode(const float* q, const float* k_cache, const float* v_cache,
                  const PagedKVShape& kv, const int* block_table, int max_blocks_per_seq,
                  const int* seq_lens, int num_seqs, int num_q_heads, float softmax_scale,
                  const Variant& variant, float* out, float* lse);

// Gathers one sequence's K and V from the paged cache into dense [seq_len, num_kv_heads, head_dim]
// (used to check paged == dense).
void gather_kv(const float* k_cache, const float* v_cache, const PagedKVShape& kv,
               const int* block_row, int seq_len, float* k_dense, float* v_dense);

// Rounds float values to the storage type's precision, in place (fp32: unchanged).
void round_to_bf16(float* x, std::size_t n);
void round_to_fp16(float* x, std::size_t n);

// Storage conversions for tests and tools that build device inputs: float ↔ 16-bit bit patterns
// (round to nearest even; NaN stays NaN).
std::uint16_t float_to_bf16_bits(float f);
float bf16_bits_to_float(std::uint16_t h);
std::uint16_t float_to_fp16_bits(float f);
float fp16_bits_to_float(std::uint16_t h);

// The same for whole buffers, as the GPU tests and `muh verify` build device inputs: one value
// rounded to t's precision; host floats → t's storage bytes; element i of such bytes → float.
float round_to(float x, DType t);
std::vector<unsigned char> to_storage(const std::vector<float>& x, DType t);
float from_storage(const unsigned char* bytes, std::size_t i, DType t);

// Unit roundoff of a storage type: the relative error of one rounding to it (bf16 2^-8,
// fp16 2^-11, fp32 2^-24) — the scale of a naive same-precision implementation's error.
constexpr double unit_roundoff(DType t) {
  return t == DType::bf16 ? 1.0 / 256 : t == DType::fp16 ? 1.0 / 2048 : 1.0 / 16777216;
}

}  // namespace muh::ref
