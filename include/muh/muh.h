/* muh.h — muh's C ABI: the host API over raw device pointers, for other languages (ctypes,
 * the comparison scripts). Every function returns 0 on success, otherwise a muh_status code;
 * muh_last_error() gives the message of the calling thread's last failure. No kernel is launched
 * when a call fails validation. */
#ifndef MUH_MUH_H_
#define MUH_MUH_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes (muh::StatusCode). */
enum muh_status {
  MUH_OK = 0,
  MUH_INVALID_ARGUMENT = 1,
  MUH_UNSUPPORTED = 2,
  MUH_NOT_COMPILED = 3,
  MUH_NO_DEVICE = 4,
  MUH_CUDA_ERROR = 5
};

/* Storage dtypes (muh::DType). */
enum muh_dtype { MUH_FP16 = 0, MUH_BF16 = 1, MUH_FP32 = 2 };

/* KV cache layouts (muh::KVLayout). */
enum muh_kv_layout { MUH_KV_NHD = 0, MUH_KV_VLLM = 1 };

/* The message of this thread's last failed call ("" if none). */
const char* muh_last_error(void);
const char* muh_version(void);

/* Prefill; see muh::PrefillParams. workspace (device, 16-byte aligned) may be null: then every
 * q tile runs whole; with one of muh_prefill_workspace_size() bytes the plan may split the
 * tail (muh/prefill_plan.hpp). force_target: -1 = auto, 0 = portable, 75/80/...
 * Every call plans for the SMs `stream` runs on: those of its green context, if it has one
 * (muh::stream_profile); size the workspace for the same stream (the *_on_stream functions). */
int muh_prefill(int dtype, const void* q, const void* k, const void* v, void* out, float* lse,
                const int* cu_seqlens_q, const int* cu_seqlens_k, int batch, int total_q,
                int total_k, int max_seqlen_q, int max_seqlen_k, int num_q_heads,
                int num_kv_heads, int head_dim, float softmax_scale, int causal,
                void* workspace, size_t workspace_bytes, int force_target, void* stream);

/* Attention variants (muh::Variant, muh/variant.hpp): a sliding window in FlashAttention's
 * window_size = (left, right) convention (-1 = unbounded; causal caps right at 0), logit
 * soft-capping (0 = off), sinks (vLLM's s_aux) and ALiBi slopes: fp32 device arrays
 * [num_q_heads], read when use_sinks / use_alibi != 0 (a null array then, or an array without its
 * flag, is MUH_INVALID_ARGUMENT). Start from MUH_VARIANT_NONE: a zeroed struct is a window of 0.
 * A null muh_variant* in the *_variant functions is no variant. */
typedef struct muh_variant {
  int window_left;
  int window_right;
  float softcap;
  int use_sinks;
  const float* sinks;
  int use_alibi;
  const float* alibi_slopes;
} muh_variant;
#define MUH_VARIANT_NONE {-1, -1, 0.0f, 0, NULL, 0, NULL}

/* muh_prefill() with an attention variant (variant may be null). The general variant kind never
 * splits the tail, so the call reads no workspace (workspace may be null). */
int muh_prefill_variant(int dtype, const void* q, const void* k, const void* v, void* out, float* lse,
                        const int* cu_seqlens_q, const int* cu_seqlens_k, int batch, int total_q,
                        int total_k, int max_seqlen_q, int max_seqlen_k, int num_q_heads,
                        int num_kv_heads, int head_dim, float softmax_scale, int causal,
                        void* workspace, size_t workspace_bytes, int force_target, void* stream,
                        const muh_variant* variant);

/* The workspace muh_prefill() can use for this shape on the present device (0: none). */
int muh_prefill_workspace_size(int dtype, int batch, int total_q, int total_k, int max_seqlen_q,
                               int max_seqlen_k, int num_q_heads, int num_kv_heads, int head_dim,
                               int causal, int force_target, size_t* workspace_bytes);

/* The same for the SMs of `stream` (its green context's, if any): what muh_prefill() on that
 * stream needs. muh_prefill_workspace_size() is this with the default stream. */
int muh_prefill_workspace_size_on_stream(int dtype, int batch, int total_q, int total_k,
                                         int max_seqlen_q, int max_seqlen_k, int num_q_heads,
                                         int num_kv_heads, int head_dim, int causal,
                                         int force_target, void* stream, size_t* workspace_bytes);

/* Prefill whose K/V are read from a paged KV cache (chunked prefill, prefix reuse); see
 * muh::PrefillParams (kv_source). layout: MUH_KV_NHD or MUH_KV_VLLM (the cache's, as in
 * muh_paged_decode). q / out [total_q, num_q_heads, head_dim] with cu_seqlens_q [batch + 1];
 * block_table [batch, max_blocks_per_seq] int32, seqused_k [batch] int32 (keys of each sequence:
 * cached prefix + new tokens, which are already in the cache); max_seqlen_k bounds seqused_k.
 * Causal is bottom-right aligned. lse [num_q_heads, total_q] fp32 or null. workspace may be null
 * (then every q tile runs whole); with one of muh_paged_prefill_workspace_size() bytes a
 * non-causal call of few q tiles (a chunk over a long prefix) splits its keys over the SMs, as
 * muh_prefill does. debug_checks != 0: block ids, seqused_k and
 * cu_seqlens_q are copied to the host and checked first (a stream sync). */
int muh_paged_prefill(int dtype, int layout, const void* q, const void* k_cache, const void* v_cache,
                      void* out, float* lse, const int* cu_seqlens_q, const int* block_table,
                      const int* seqused_k, int batch, int total_q, int max_seqlen_q,
                      int max_seqlen_k, int num_q_heads, int num_kv_heads, int head_dim,
                      int page_size, int num_pages, int max_blocks_per_seq, float softmax_scale,
                      int causal, void* workspace, size_t workspace_bytes, int force_target,
                      int debug_checks, void* stream);

/* muh_paged_prefill() with an attention variant (variant may be null). */
int muh_paged_prefill_variant(int dtype, int layout, const void* q, const void* k_cache,
                              const void* v_cache, void* out, float* lse, const int* cu_seqlens_q,
                              const int* block_table, const int* seqused_k, int batch, int total_q,
                              int max_seqlen_q, int max_seqlen_k, int num_q_heads, int num_kv_heads,
                              int head_dim, int page_size, int num_pages, int max_blocks_per_seq,
                              float softmax_scale, int causal, void* workspace,
                              size_t workspace_bytes, int force_target, int debug_checks,
                              void* stream, const muh_variant* variant);

/* The workspace muh_paged_prefill() can use for this shape on the SMs of `stream` (0: none). */
int muh_paged_prefill_workspace_size(int dtype, int layout, int batch, int total_q,
                                     int max_seqlen_q, int max_seqlen_k, int num_q_heads,
                                     int num_kv_heads, int head_dim, int page_size, int num_pages,
                                     int max_blocks_per_seq, int causal, int force_target,
                                     void* stream, size_t* workspace_bytes);

/* A mixed batch over the paged cache (decodes, short rows, prefill chunks) in one call; see
 * muh/mixed_plan.hpp. The arguments of muh_paged_prefill() plus host copies of cu_seqlens_q
 * [batch + 1] and seqused_k [batch] (vLLM's query_start_loc_cpu / seq_lens_cpu; may be null with
 * cuda_graph != 0). The call is planned on the SMs of `stream`: one paged-prefill launch, or the
 * q_len-1 rows that lead the batch through the paged decode and the rest through the paged prefill
 * (then lse must be null: a call with lse is planned as one launch). force_split: -1 = the plan
 * decides, 0 = one launch, 1 = split. cuda_graph != 0: the plan is for maxima (the shape given),
 * graph_num_decodes rows of q_len 1 lead every replay. workspace: at least
 * muh_paged_attention_workspace_size() bytes for the same arguments. */
int muh_paged_attention(int dtype, int layout, const void* q, const void* k_cache, const void* v_cache,
                        void* out, float* lse, const int* cu_seqlens_q, const int* block_table,
                        const int* seqused_k, const int* cu_seqlens_q_host, const int* seqused_k_host,
                        int batch, int total_q, int max_seqlen_q, int max_seqlen_k, int num_q_heads,
                        int num_kv_heads, int head_dim, int page_size, int num_pages,
                        int max_blocks_per_seq, float softmax_scale, int causal, void* workspace,
                        size_t workspace_bytes, int force_target, int force_split, int cuda_graph,
                        int graph_num_decodes, int debug_checks, void* stream);

/* The workspace muh_paged_attention() needs for these arguments on the SMs of `stream`
 * (with_lse: the call passes lse). */
int muh_paged_attention_workspace_size(int dtype, int layout, const int* cu_seqlens_q_host,
                                       const int* seqused_k_host, int batch, int total_q,
                                       int max_seqlen_q, int max_seqlen_k, int num_q_heads,
                                       int num_kv_heads, int head_dim, int page_size, int num_pages,
                                       int max_blocks_per_seq, int causal, int with_lse,
                                       int force_target, int force_split, int cuda_graph,
                                       int graph_num_decodes, void* stream, size_t* workspace_bytes);

/* Decode workspace size for a plan of this shape (V2 partials); 0 for V1. */
int muh_decode_workspace_size(int dtype, int layout, int num_seqs, int num_q_heads,
                              int num_kv_heads, int head_dim, int page_size, int max_seq_len,
                              int force_target, int force_splits, int cuda_graph,
                              size_t* workspace_bytes);

/* The same for the SMs of `stream` (its green context's, if any): what muh_paged_decode() on that
 * stream needs. */
int muh_decode_workspace_size_on_stream(int dtype, int layout, int num_seqs, int num_q_heads,
                                        int num_kv_heads, int head_dim, int page_size,
                                        int max_seq_len, int force_target, int force_splits,
                                        int cuda_graph, void* stream, size_t* workspace_bytes);

/* muh_decode_workspace_size_on_stream() for a cache of element type kv_dtype (a muh_kv_dtype,
 * below): what muh_paged_decode_quant() with that kv->kv_dtype needs. MUH_KV_AUTO is
 * muh_decode_workspace_size_on_stream(). */
int muh_decode_workspace_size_quant(int dtype, int layout, int num_seqs, int num_q_heads,
                                    int num_kv_heads, int head_dim, int page_size, int max_seq_len,
                                    int force_target, int force_splits, int cuda_graph, void* stream,
                                    size_t* workspace_bytes, int kv_dtype);

/* Plans and runs one paged decode; workspace may be null when its size is 0. */
int muh_paged_decode(int dtype, int layout, const void* q, const void* k_cache,
                     const void* v_cache, void* out, float* lse, const int* block_table,
                     const int* seq_lens, int num_seqs, int num_q_heads, int num_kv_heads,
                     int head_dim, int page_size, int num_pages, int max_blocks_per_seq,
                     int max_seq_len, float softmax_scale, void* workspace,
                     size_t workspace_bytes, int force_target, int force_splits, int cuda_graph,
                     void* stream);

/* muh_paged_decode() with an attention variant (variant may be null; muh_variant above): the
 * query is each sequence's last token. Both decode agents have the variant hooks, so a variant
 * runs on the row the selection picks (or force_target's). */
int muh_paged_decode_variant(int dtype, int layout, const void* q, const void* k_cache,
                             const void* v_cache, void* out, float* lse, const int* block_table,
                             const int* seq_lens, int num_seqs, int num_q_heads, int num_kv_heads,
                             int head_dim, int page_size, int num_pages, int max_blocks_per_seq,
                             int max_seq_len, float softmax_scale, void* workspace,
                             size_t workspace_bytes, int force_target, int force_splits,
                             int cuda_graph, void* stream, const muh_variant* variant);
/* An fp8 KV cache (muh::KVQuant, muh/kv_quant.hpp): kv_dtype is a muh_kv_dtype (below:
 * MUH_KV_AUTO, the cache holds dtype; MUH_KV_FP8_E4M3 / MUH_KV_FP8_E5M2, 1-byte codes in `layout`,
 * the vLLM layout's x being 16) with per-tensor scales: dequantised K = code * k_scale, V = code *
 * v_scale (finite, > 0). Start from MUH_KV_QUANT_AUTO. */
typedef struct muh_kv_quant {
  int kv_dtype;
  float k_scale;
  float v_scale;
} muh_kv_quant;
#define MUH_KV_QUANT_AUTO {0, 1.0f, 1.0f}
/* muh_paged_decode_variant() over a cache of element type kv (null: MUH_KV_QUANT_AUTO). An fp8
 * cache needs dtype MUH_FP16 or MUH_BF16 and runs on every decode agent's rows (the sm80 agent's;
 * the portable agent's: force_target 0, or a device older than sm_80). The plan depends on the
 * cache's element type: size the workspace with muh_decode_workspace_size_quant() of the same
 * kv_dtype. */
int muh_paged_decode_quant(int dtype, int layout, const void* q, const void* k_cache,
                           const void* v_cache, void* out, float* lse, const int* block_table,
                           const int* seq_lens, int num_seqs, int num_q_heads, int num_kv_heads,
                           int head_dim, int page_size, int num_pages, int max_blocks_per_seq,
                           int max_seq_len, float softmax_scale, void* workspace,
                           size_t workspace_bytes, int force_target, int force_splits,
                           int cuda_graph, void* stream, const muh_variant* variant,
                           const muh_kv_quant* kv);

/* Writes key and value [num_tokens, num_kv_heads, head_dim] into the paged cache at the slots of
 * slot_mapping (int64 [num_tokens], -1 = padding, skipped); see muh::reshape_and_cache.
 * layout MUH_KV_VLLM is vLLM's reshape_and_cache (key [pages, kv_heads, head_dim/x, page_size, x],
 * value [pages, kv_heads, head_dim, page_size]), MUH_KV_NHD its reshape_and_cache_flash
 * ([pages, page_size, kv_heads, head_dim]). Token strides in elements (0 = packed); heads and
 * caches packed. debug_checks != 0: slot_mapping is copied to the host (a stream sync) and a slot
 * outside [-1, num_pages * page_size) fails the call before the launch; otherwise such a slot is
 * skipped by the kernel. */
int muh_reshape_and_cache(int dtype, int layout, const void* key, const void* value, void* key_cache,
                          void* value_cache, const int64_t* slot_mapping, int num_tokens,
                          int num_kv_heads, int head_dim, int page_size, int num_pages,
                          int64_t key_token_stride, int64_t value_token_stride, int debug_checks,
                          void* stream);

/* KV cache element types (muh::KVDType, muh/kv_quant.hpp): vLLM's kv_cache_dtype "auto" (the
 * caches hold dtype), "fp8" / "fp8_e4m3" and "fp8_e5m2" (1-byte codes). */
enum muh_kv_dtype { MUH_KV_AUTO = 0, MUH_KV_FP8_E4M3 = 1, MUH_KV_FP8_E5M2 = 2 };

/* muh_paged_prefill_variant() over a cache of element type kv (null: MUH_KV_QUANT_AUTO; the
 * struct above). An fp8 cache holds 1-byte codes in `layout`: MUH_KV_NHD [num_pages, page_size,
 * num_kv_heads, head_dim], MUH_KV_VLLM key [num_pages, num_kv_heads, head_dim/16, page_size, 16]
 * (x = 16) and value [num_pages, num_kv_heads, head_dim, page_size], page_size then a multiple of
 * 16. It needs dtype MUH_FP16 or MUH_BF16 (q and out; MUH_FP32 is MUH_INVALID_ARGUMENT), takes
 * any attention variant (the general kind: MUH_NOT_COMPILED where the build has none for this
 * dtype and head_dim), and runs on the sm80 agent's rows or the portable agent's (never the sm90
 * or sm75 agent's: the selection walks past those). k_scale multiplies the logits with
 * softmax_scale (a soft-cap, ALiBi and the window see the dequantised scores), v_scale the
 * output. The plan depends on the cache's element type: size the workspace with
 * muh_paged_prefill_workspace_size_quant() of the same kv_dtype. */
int muh_paged_prefill_quant(int dtype, int layout, const void* q, const void* k_cache,
                            const void* v_cache, void* out, float* lse, const int* cu_seqlens_q,
                            const int* block_table, const int* seqused_k, int batch, int total_q,
                            int max_seqlen_q, int max_seqlen_k, int num_q_heads, int num_kv_heads,
                            int head_dim, int page_size, int num_pages, int max_blocks_per_seq,
                            float softmax_scale, int causal, void* workspace,
                            size_t workspace_bytes, int force_target, int debug_checks,
                            void* stream, const muh_variant* variant, const muh_kv_quant* kv);

/* muh_paged_prefill_workspace_size() for a cache of element type kv_dtype (a muh_kv_dtype):
 * what muh_paged_prefill_quant() with that kv->kv_dtype can use. MUH_KV_AUTO is
 * muh_paged_prefill_workspace_size(). */
int muh_paged_prefill_workspace_size_quant(int dtype, int layout, int batch, int total_q,
                                           int max_seqlen_q, int max_seqlen_k, int num_q_heads,
                                           int num_kv_heads, int head_dim, int page_size,
                                           int num_pages, int max_blocks_per_seq, int causal,
                                           int force_target, void* stream,
                                           size_t* workspace_bytes, int kv_dtype);

/* muh_paged_attention() (a mixed batch) over a cache of element type kv (null:
 * MUH_KV_QUANT_AUTO), as muh_paged_prefill_quant() reads one: both parts — the paged decode of the
 * leading q_len-1 rows and the paged prefill — read the fp8 codes with kv's scales. Size the
 * workspace with muh_paged_attention_workspace_size_quant() of the same kv_dtype. */
int muh_paged_attention_quant(int dtype, int layout, const void* q, const void* k_cache,
                              const void* v_cache, void* out, float* lse, const int* cu_seqlens_q,
                              const int* block_table, const int* seqused_k,
                              const int* cu_seqlens_q_host, const int* seqused_k_host, int batch,
                              int total_q, int max_seqlen_q, int max_seqlen_k, int num_q_heads,
                              int num_kv_heads, int head_dim, int page_size, int num_pages,
                              int max_blocks_per_seq, float softmax_scale, int causal,
                              void* workspace, size_t workspace_bytes, int force_target,
                              int force_split, int cuda_graph, int graph_num_decodes,
                              int debug_checks, void* stream, const muh_kv_quant* kv);

/* muh_paged_attention_workspace_size() for a cache of element type kv_dtype (a muh_kv_dtype). */
int muh_paged_attention_workspace_size_quant(int dtype, int layout, const int* cu_seqlens_q_host,
                                             const int* seqused_k_host, int batch, int total_q,
                                             int max_seqlen_q, int max_seqlen_k, int num_q_heads,
                                             int num_kv_heads, int head_dim, int page_size,
                                             int num_pages, int max_blocks_per_seq, int causal,
                                             int with_lse, int force_target, int force_split,
                                             int cuda_graph, int graph_num_decodes, void* stream,
                                             size_t* workspace_bytes, int kv_dtype);

/* muh_reshape_and_cache into caches of element type kv_dtype (a muh_kv_dtype). MUH_KV_AUTO is
 * muh_reshape_and_cache (the scales are not read). With an fp8 kind, dtype is MUH_FP16 or
 * MUH_BF16 (MUH_FP32: MUH_UNSUPPORTED), k_scale and v_scale are finite and > 0, and each cache
 * element is the 1-byte code of float(key element) / k_scale (value: v_scale), rounded to nearest
 * (ties to even), saturating to the largest finite value (448 e4m3, 57344 e5m2), NaN to NaN
 * (muh::float_to_fp8). The vLLM layout's x is then 16; the caches are arrays of bytes. */
int muh_reshape_and_cache_quant(int dtype, int layout, const void* key, const void* value, void* key_cache,
                                void* value_cache, const int64_t* slot_mapping, int num_tokens,
                                int num_kv_heads, int head_dim, int page_size, int num_pages,
                                int64_t key_token_stride, int64_t value_token_stride, int debug_checks,
                                void* stream, int kv_dtype, float k_scale, float v_scale);

/* vLLM's merge_attn_states: output = merge((prefix_output, prefix_lse), (suffix_output,
 * suffix_lse)); outputs [num_tokens, num_heads, head_dim] packed, lse fp32 [num_heads,
 * num_tokens]; output_lse may be null. See muh::merge_attn_states. */
int muh_merge_attn_states(int dtype, void* output, float* output_lse, const void* prefix_output,
                          const float* prefix_lse, const void* suffix_output, const float* suffix_lse,
                          int num_tokens, int num_heads, int head_dim, void* stream);

/* Bad device-side inputs the kernels met (muh/input_errors.hpp): a decode sequence with a
 * seq_len past its block-table row, or a block id outside [0, num_pages) within its seq_len, is
 * computed as length 0 (out = 0, lse = -inf); a prefill sequence with wrong cu_seqlens offsets
 * writes nothing. The kinds, as bits of a mask (muh::InputError): */
enum muh_input_error {
  MUH_INPUT_ERROR_BLOCK_ID = 1u << 0,           /* block_table: an id outside [0, num_pages) */
  MUH_INPUT_ERROR_SEQ_LEN = 1u << 1,            /* seq_lens: outside [0, max_blocks_per_seq * page_size] */
  MUH_INPUT_ERROR_CU_SEQLENS_Q_START = 1u << 2, /* cu_seqlens_q[0] != 0 */
  MUH_INPUT_ERROR_CU_SEQLENS_Q_ORDER = 1u << 3, /* cu_seqlens_q decreases */
  MUH_INPUT_ERROR_CU_SEQLENS_Q_END = 1u << 4,   /* cu_seqlens_q[batch] != total_q */
  MUH_INPUT_ERROR_CU_SEQLENS_Q_RANGE = 1u << 5, /* an offset outside [0, total_q] */
  MUH_INPUT_ERROR_SEQLEN_Q_MAX = 1u << 6,       /* a q length > max_seqlen_q */
  MUH_INPUT_ERROR_CU_SEQLENS_K_START = 1u << 7,
  MUH_INPUT_ERROR_CU_SEQLENS_K_ORDER = 1u << 8,
  MUH_INPUT_ERROR_CU_SEQLENS_K_END = 1u << 9,
  MUH_INPUT_ERROR_CU_SEQLENS_K_RANGE = 1u << 10,
  MUH_INPUT_ERROR_SEQLEN_K_MAX = 1u << 11
};

/* Synchronises `stream`, then reads and clears the flags the calls of this library made on the
 * current device. 0: none; MUH_INVALID_ARGUMENT: some, named by muh_last_error(), their mask in
 * *mask (may be NULL); MUH_CUDA_ERROR / MUH_NO_DEVICE when the flags cannot be read. */
int muh_check_input_errors(void* stream, uint32_t* mask);

#ifdef __cplusplus
}
#endif

#endif /* MUH_MUH_H_ */
