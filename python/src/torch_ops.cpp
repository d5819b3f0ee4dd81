// torch_ops.cpp — torch.ops.muh: muh's host API (attention.hpp, plan.hpp) as PyTorch custom ops.
//
//   paged_attention_v1 / _v2   vLLM's torch.ops._C schemas, argument for argument, on vLLM's cache
//                              layout (key [blocks, kv_heads, d/x, block, x], value [blocks,
//                              kv_heads, d, block]); alibi_slopes is the ALiBi variant;
//                              kv_cache_dtype 'auto' (the cache holds the query's dtype) or an fp8
//                              cache: 'fp8' (= 'fp8_e4m3', vLLM's meaning on CUDA), 'fp8_e4m3',
//                              'fp8_e5m2' — uint8 (or the kind's torch.float8) codes, x = 16,
//                              dequantised by k_scale / v_scale (muh/kv_quant.hpp; sm_80+ GPUs).
//                              Block-sparse raises.
//   flash_attn_varlen          FlashAttention's varlen convention; returns (out, lse).
//   paged_decode               NHD cache [pages, page_size, kv_heads, d], muh's own decode plan.
//   paged_prefill              varlen prefill whose K/V come from a paged cache (NHD or vLLM's
//                              layout) through a block table: flash_attn_varlen_func(block_table=).
//                              A torch.float8_e4m3fn / float8_e5m2 cache is an fp8 cache, its
//                              per-tensor scales k_descale / v_descale (vLLM's fork's names).
//                              With cu_seqlens_q_host / seqused_k_host (CPU copies of the
//                              lengths) a plain call without lse runs as a mixed batch
//                              (mixed_plan.hpp: plan_mixed, paged_attention).
//   context_attention_fwd      vLLM 0.6.3's chunked prefill over a cached prefix (prefix_prefill.py);
//                              kv_cache_dtype 'auto' or an fp8 cache as paged_attention_v1/v2's
//                              (the .tensor_scales overload: later vLLM's tensor k_scale / v_scale).
//
// An fp8 KV cache (muh/kv_quant.hpp) is read by the paged decode and by the paged prefill (the sm80
// agent's rows, sm_80+ GPUs; the portable agent's elsewhere), with fp16 / bf16 queries, the
// attention variants included.
//
// Every op checks devices, dtypes, shapes and strides first and raises ValueError (or
// NotImplementedError for what muh does not do) naming the argument; no kernel runs on bad input.
// The ops launch on torch's current stream, allocate only through torch's caching allocator and
// never synchronise, so they can be captured in a CUDA graph — with one exception: an fp8 call
// given its scales as CUDA tensors (paged_attention_v1/v2's and context_attention_fwd's
// .tensor_scales overloads, flash_attn_varlen_func's k_descale / v_descale) reads them to the
// host, a sync per call that capture refuses (torch_ops_common.hpp's kv_scale()). Their fake
// (meta) implementations, for torch.compile, are in muh/ops.py.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/GradMode.h>
#include <torch/library.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

#include "muh/attention.hpp"
#include "muh/kv_quant.hpp"
#include "muh/merge_states.hpp"
#include "muh/mixed_plan.hpp"
#include "muh/plan.hpp"
#include "torch_ops_common.hpp"

namespace muh::torch_ops {
namespace {

// ---- The profile a launch on torch's current stream sees: muh's own cache (hardware.hpp,
// stream_profile(): the device read once, the SMs of the stream's green context if it has one).
// The callers hold a CUDAGuard for the tensor's device, so the current device is its device.
HardwareCapability stream_profile_of(const at::Tensor& on, const char* op) {
  HardwareCapability hw;
  const Status s = stream_profile(at::cuda::getCurrentCUDAStream(on.get_device()).stream(), &hw);
  if (!s.ok()) throw_status(s, op);
  return hw;
}

// ---- Bad device-side inputs (muh/input_errors.hpp) ------------------------------------------------
// Block ids, seq_lens and cu_seqlens are read by the kernels, which guard them (a bad one drops
// its sequence, never reads outside the tensors) and flag the kind in 16 int32 words: here pinned
// host memory mapped for the device, one set per device, so that the host can look at them
// without a sync. MUH_VALIDATE (read once):
//   1 (default)  every op first looks at its device's words (a host read, no CUDA call) and raises
//                ValueError if an earlier launch flagged something — the error surfaces at the
//                next muh call, or at muh.ops.check_errors() (which synchronises);
//   sync         each op also synchronises its stream after launching and raises for its own
//                inputs (costly: for debugging; under graph capture it behaves as 1);
//   0            the words are not looked at by the ops (muh.ops.check_errors() still reads them).
// Under CUDA-graph capture nothing synchronises: the captured kernels flag the same words on
// every replay, and the next eager muh call (or check_errors()) raises.
enum class Validate { off, deferred, sync };

Validate validate_mode() {
  static const Validate mode = [] {
    const char* v = std::getenv("MUH_VALIDATE");
    const std::string s = v ? v : "";
    if (s.empty() || s == "1") return Validate::deferred;
    if (s == "0") return Validate::off;
    if (s == "sync") return Validate::sync;
    TORCH_CHECK_VALUE(false, "muh: MUH_VALIDATE must be 0, 1 or sync, got '" + s + "'");
    return Validate::deferred;
  }();
  return mode;
}

// The device's flag words, host view and device view; allocated on the first call outside graph
// capture (an allocation there may be refused); {nullptr, nullptr} until then — the kernels then
// flag the library's own words (read by check_errors()).
struct HostFlags {
  int* host = nullptr;
  int* device = nullptr;
  bool failed = false;  // the allocation was refused outside capture: not tried again
};
HostFlags host_flags(int device) {
  static std::mutex mu;
  static std::array<HostFlags, 64> flags{};
  if (device < 0 || device >= static_cast<int>(flags.size())) return {};
  const std::lock_guard<std::mutex> lock(mu);
  HostFlags& f = flags[device];
  if (f.host == nullptr && !f.failed && !capturing()) {
    void* h = nullptr;
    void* d = nullptr;
    if (cudaHostAlloc(&h, kInputErrorWords * sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable) == cudaSuccess &&
        cudaHostGetDevicePointer(&d, h, 0) == cudaSuccess) {
      std::memset(h, 0, kInputErrorWords * sizeof(int));
      f.host = static_cast<int*>(h);
      f.device = static_cast<int*>(d);
    } else {
      cudaGetLastError();
      if (h) cudaFreeHost(h);
      f.failed = true;
    }
  }
  return f;
}

// Raises ValueError for what `mask` holds (nothing for 0).
void raise_input_errors(const char* op, std::uint32_t mask, bool earlier) {
  if (mask == 0) return;
  TORCH_CHECK_VALUE(false, cat("muh.", op, ": ", earlier ? "an earlier muh call on this device was given " : "",
                               "bad device-side input: ", describe_input_errors(mask),
                               earlier ? " (flagged by the kernels; that call computed no output for the sequences "
                                         "concerned; MUH_VALIDATE=sync raises at the call itself)"
                                       : " (flagged by the kernels; no output for the sequences concerned)"));
}

RunOptions run_options(const at::Tensor& on, const char* op) {
  RunOptions ro;
  ro.stream = at::cuda::getCurrentCUDAStream(on.get_device()).stream();
  const HostFlags f = host_flags(on.get_device());
  ro.input_errors = f.device;
  if (f.host != nullptr && validate_mode() != Validate::off) raise_input_errors(op, take_input_errors(f.host), true);
  return ro;
}

// MUH_VALIDATE=sync: after the launch, its own inputs.
void check_after_launch(const char* op, const RunOptions& ro) {
  if (validate_mode() != Validate::sync || capturing()) return;
  const cudaError_t e = cudaStreamSynchronize(ro.stream);
  TORCH_CHECK(e == cudaSuccess, cat("muh.", op, ": ", cudaGetErrorString(e)));
  std::uint32_t mask = 0;
  if (ro.input_errors != nullptr) {
    int device = 0;
    cudaGetDevice(&device);
    mask = take_input_errors(host_flags(device).host);
  } else {
    const Status s = read_input_errors(ro.stream, &mask);
    if (!s.ok()) throw_status(s, op);
  }
  raise_input_errors(op, mask, false);
}

// torch.ops.muh.check_input_errors() (muh.ops.check_errors()): synchronises the current stream of
// the current device and raises for every kind flagged since the last look — on the ops' words and
// on the library's own (flagged by calls made before the ops' words existed, e.g. under capture).
void check_input_errors_op() {
  constexpr const char* op = "check_errors";
  int device = 0, count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0 || cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return;  // no device: nothing can have been flagged
  }
  TORCH_CHECK(!capturing(), "muh.check_errors synchronises: call it outside CUDA-graph capture");
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream(device).stream();
  std::uint32_t mask = 0;
  const Status s = read_input_errors(stream, &mask);  // synchronises `stream`
  if (!s.ok()) throw_status(s, op);
  const HostFlags f = host_flags(device);
  if (f.host != nullptr) mask |= take_input_errors(f.host);
  raise_input_errors(op, mask, false);
}

// Plans and runs one decode. `workspace_hint` (vLLM v2's tmp_out) is used as muh's workspace when
// it is contiguous and large enough; otherwise the workspace comes from torch's caching allocator
// (stream-ordered, and from the graph's private pool under capture).
void run_decode(const char* op, const DecodeParams& p, PlanOptions po, const at::Tensor& query,
                const at::Tensor* workspace_hint) {
  po.cuda_graph = po.cuda_graph || capturing();
  DecodePlan plan;
  Status s = plan_decode(p, stream_profile_of(query, op), po, &plan);
  if (!s.ok()) throw_status(s, op);
  void* ws = nullptr;
  std::size_t ws_bytes = 0;
  at::Tensor ws_tensor;
  if (plan.workspace_bytes > 0) {
    // 256 B: the caching allocator's own alignment, ample for muh's 16-byte vector accesses.
    if (workspace_hint && workspace_hint->is_contiguous() &&
        static_cast<std::size_t>(workspace_hint->nbytes()) >= plan.workspace_bytes &&
        reinterpret_cast<std::uintptr_t>(workspace_hint->data_ptr()) % 256 == 0) {
      ws = workspace_hint->data_ptr();
      ws_bytes = workspace_hint->nbytes();
    } else {
      ws_tensor = at::empty({static_cast<int64_t>(plan.workspace_bytes)}, query.options().dtype(at::kByte));
      ws = ws_tensor.data_ptr();
      ws_bytes = plan.workspace_bytes;
    }
  }
  const RunOptions ro = run_options(query, op);
  s = paged_decode(p, plan, ws, ws_bytes, ro);
  if (!s.ok()) throw_status(s, op);
  check_after_launch(op, ro);
}

// ---- vLLM's paged_attention_v1 / v2 --------------------------------------------------------------
// What muh does not do raises instead of computing something else. alibi_slopes (fp32
// [num_heads], vLLM's bias slope · (j − seq_len + 1)) is the ALiBi variant (muh/variant.hpp),
// on the decode agent the plan selects (both have the variant hooks).
// kv_cache_dtype, vLLM's strings (muh/kv_quant.hpp's parse_kv_dtype): 'auto' — the cache holds the
// query's dtype and k_scale / v_scale are not read (as in vLLM); 'fp8' (= 'fp8_e4m3', vLLM's
// meaning on CUDA), 'fp8_e4m3', 'fp8_e5m2' — a cache of 1-byte codes (check_kv_cache_dtype(), torch_ops_common.hpp),
// dequantised = code · k_scale (K) / v_scale (V). Any other string raises NotImplementedError
// naming it. Returns the cache's element type.
KVDType check_vllm_unsupported(const char* op, const std::optional<at::Tensor>& /*alibi_slopes*/,
                               std::string_view kv_cache_dtype, int64_t blocksparse_vert_stride) {
  const KVDType kv = kv_dtype_of(op, kv_cache_dtype);
  // vLLM's kernels switch to block-sparse when blocksparse_vert_stride > 1.
  MUH_NOT_IMPLEMENTED_CHECK(blocksparse_vert_stride <= 1, "muh.", op,
                              ": block-sparse attention (blocksparse_vert_stride=",
                              blocksparse_vert_stride, ") is not supported; pass 0");
  return kv;
}

DecodeParams vllm_params(const Args& a, at::Tensor& out, const at::Tensor& query_in,
                         const at::Tensor& key_cache, const at::Tensor& value_cache,
                         int64_t num_kv_heads, double scale, const at::Tensor& block_tables,
                         const at::Tensor& seq_lens, int64_t block_size, int64_t max_seq_len,
                         KVDType kv, std::string_view kv_cache_dtype, at::Tensor* query_keep) {
  a.cuda(query_in, "query");
  a.dim(query_in, "query", 3, "[num_seqs, num_heads, head_size]");
  const DType t = a.element(query_in, "query");
  MUH_NOT_IMPLEMENTED_CHECK(!is_fp8(kv) || t != DType::fp32, "muh.", a.op, ": query is float32 with kv_cache_dtype='",
                            kv_cache_dtype, "': muh reads an fp8 KV cache with a float16 or bfloat16 query only");
  // vLLM slices query out of a fused qkv buffer: rows may be strided, heads must be packed.
  *query_keep = a.rows(query_in, "query");
  const at::Tensor& query = *query_keep;
  const int64_t num_seqs = query.size(0), num_heads = query.size(1), head_size = query.size(2);

  a.cuda(out, "out");
  a.dtype(out, "out", query.scalar_type());
  MUH_ARG_CHECK(out.sizes() == query.sizes(), a.op, "out must have query's shape ", query.sizes(),
                ", got ", out.sizes());
  a.contiguous(out, "out");

  // x = 16 bytes / the cache's element size: vLLM packs the key's head dim in 16-byte groups
  // (16 for an fp8 cache).
  const int64_t x = 16 / kv_elem_size(kv, static_cast<int>(query.element_size()));
  a.cuda(key_cache, "key_cache");
  check_kv_cache_dtype(a, key_cache, "key_cache", query, "query", kv, kv_cache_dtype);
  a.dim(key_cache, "key_cache", 5, "[num_blocks, num_kv_heads, head_size/x, block_size, x]");
  a.contiguous(key_cache, "key_cache");
  a.cuda(value_cache, "value_cache");
  check_kv_cache_dtype(a, value_cache, "value_cache", query, "query", kv, kv_cache_dtype);
  a.dim(value_cache, "value_cache", 4, "[num_blocks, num_kv_heads, head_size, block_size]");
  a.contiguous(value_cache, "value_cache");
  const int64_t num_blocks = key_cache.size(0);
  MUH_ARG_CHECK(num_kv_heads >= 1 && num_heads % num_kv_heads == 0, a.op, "num_kv_heads (", num_kv_heads,
                ") must divide query's num_heads (", num_heads, ")");
  MUH_ARG_CHECK(block_size >= 1, a.op, "block_size must be >= 1, got ", block_size);
  a.size(key_cache, "key_cache", 1, num_kv_heads, "num_kv_heads");
  a.size(key_cache, "key_cache", 2, head_size / x, "head_size / x");
  a.size(key_cache, "key_cache", 3, block_size, "block_size");
  a.size(key_cache, "key_cache", 4, x, "x = 16 / the cache's element size");
  MUH_ARG_CHECK(head_size % x == 0, a.op, "query's head_size (", head_size, ") must be a multiple of x = ", x);
  a.size(value_cache, "value_cache", 0, num_blocks, "num_blocks, as key_cache");
  a.size(value_cache, "value_cache", 1, num_kv_heads, "num_kv_heads");
  a.size(value_cache, "value_cache", 2, head_size, "head_size");
  a.size(value_cache, "value_cache", 3, block_size, "block_size");

  a.index(block_tables, "block_tables", 2, "[num_seqs, max_num_blocks_per_seq]");
  a.size(block_tables, "block_tables", 0, num_seqs, "num_seqs");
  a.index(seq_lens, "seq_lens", 1, "[num_seqs]");
  a.size(seq_lens, "seq_lens", 0, num_seqs, "num_seqs");
  MUH_ARG_CHECK(max_seq_len >= 0, a.op, "max_seq_len must be >= 0, got ", max_seq_len);
  MUH_ARG_CHECK(std::isfinite(scale) && scale > 0, a.op, "scale must be a finite number > 0, got ", scale);

  DecodeParams p;
  p.dtype = t;
  p.layout = KVLayout::vllm;
  p.q = query.data_ptr();
  p.k_cache = key_cache.data_ptr();
  p.v_cache = value_cache.data_ptr();
  p.out = out.data_ptr();
  p.lse = nullptr;
  p.block_table = block_tables.data_ptr<int>();
  p.seq_lens = seq_lens.data_ptr<int>();
  p.num_seqs = a.to_int(num_seqs, "num_seqs");
  p.num_q_heads = a.to_int(num_heads, "num_heads");
  p.num_kv_heads = a.to_int(num_kv_heads, "num_kv_heads");
  p.head_dim = a.to_int(head_size, "head_size");
  p.page_size = a.to_int(block_size, "block_size");
  p.num_pages = a.to_int(num_blocks, "num_blocks");
  p.max_blocks_per_seq = a.to_int(block_tables.size(1), "max_num_blocks_per_seq");
  p.max_seq_len = a.to_int(max_seq_len, "max_seq_len");
  p.softmax_scale = static_cast<float>(scale);
  return p;
}

// ScaleArg: double (vLLM 0.6.3's float k_scale / v_scale, the default overloads) or const
// at::Tensor& (vLLM 0.7+'s 0-dim tensors, the .tensor_scales overloads).
template <class ScaleArg>
void paged_attention_v1(at::Tensor& out, const at::Tensor& query, const at::Tensor& key_cache,
                        const at::Tensor& value_cache, int64_t num_kv_heads, double scale,
                        const at::Tensor& block_tables, const at::Tensor& seq_lens, int64_t block_size,
                        int64_t max_seq_len, const std::optional<at::Tensor>& alibi_slopes,
                        c10::string_view kv_cache_dtype, ScaleArg k_scale,
                        ScaleArg v_scale, int64_t /*tp_rank*/,
                        int64_t /*blocksparse_local_blocks*/, int64_t blocksparse_vert_stride,
                        int64_t /*blocksparse_block_size*/, int64_t /*blocksparse_head_sliding_step*/) {
  // k_scale / v_scale only scale an fp8 cache (with 'auto' they are not read, as in vLLM), and
  // tp_rank only places block-sparse heads: without block sparsity vLLM ignores it too.
  constexpr const char* op = "paged_attention_v1";
  const std::string_view kv_name(kv_cache_dtype.data(), kv_cache_dtype.size());
  const KVDType kv = check_vllm_unsupported(op, alibi_slopes, kv_name, blocksparse_vert_stride);
  const Args a{op, query.device()};
  at::Tensor q;
  DecodeParams p = vllm_params(a, out, query, key_cache, value_cache, num_kv_heads, scale,
                               block_tables, seq_lens, block_size, max_seq_len, kv, kv_name, &q);
  p.variant = a.variant(-1, -1, 0.0, alibi_slopes, std::nullopt, p.num_q_heads);
  const c10::cuda::CUDAGuard guard(query.device());
  p.kv = kv_quant_of(a, kv, kv_name, k_scale, v_scale);  // a CUDA tensor scale: a sync (see there)
  if (p.num_seqs == 0) return;
  // V1 as the name says: one pass per sequence, no workspace (vLLM's caller chose V1).
  PlanOptions po;
  po.force_splits = 1;
  run_decode(op, p, po, q, nullptr);
}

template <class ScaleArg>
void paged_attention_v2(at::Tensor& out, at::Tensor& exp_sums, at::Tensor& max_logits,
                        at::Tensor& tmp_out, const at::Tensor& query, const at::Tensor& key_cache,
                        const at::Tensor& value_cache, int64_t num_kv_heads, double scale,
                        const at::Tensor& block_tables, const at::Tensor& seq_lens, int64_t block_size,
                        int64_t max_seq_len, const std::optional<at::Tensor>& alibi_slopes,
                        c10::string_view kv_cache_dtype, ScaleArg k_scale,
                        ScaleArg v_scale, int64_t /*tp_rank*/,
                        int64_t /*blocksparse_local_blocks*/, int64_t blocksparse_vert_stride,
                        int64_t /*blocksparse_block_size*/, int64_t /*blocksparse_head_sliding_step*/) {
  constexpr const char* op = "paged_attention_v2";
  const std::string_view kv_name(kv_cache_dtype.data(), kv_cache_dtype.size());
  const KVDType kv = check_vllm_unsupported(op, alibi_slopes, kv_name, blocksparse_vert_stride);
  const Args a{op, query.device()};
  at::Tensor q;
  DecodeParams p = vllm_params(a, out, query, key_cache, value_cache, num_kv_heads, scale,
                               block_tables, seq_lens, block_size, max_seq_len, kv, kv_name, &q);
  p.variant = a.variant(-1, -1, 0.0, alibi_slopes, std::nullopt, p.num_q_heads);
  // vLLM's scratch buffers: [num_seqs, num_heads, max_num_partitions(, head_size)]. muh keeps its
  // own partials layout (o, lse in fp32) and uses tmp_out's bytes for it when they suffice; it
  // leaves exp_sums and max_logits untouched (vLLM's callers never read them).
  a.cuda(exp_sums, "exp_sums");
  a.dtype(exp_sums, "exp_sums", at::kFloat);
  a.cuda(max_logits, "max_logits");
  a.dtype(max_logits, "max_logits", at::kFloat);
  a.cuda(tmp_out, "tmp_out");
  const c10::cuda::CUDAGuard guard(query.device());
  p.kv = kv_quant_of(a, kv, kv_name, k_scale, v_scale);  // a CUDA tensor scale: a sync (see there)
  if (p.num_seqs == 0) return;
  run_decode(op, p, PlanOptions{}, q, &tmp_out);  // muh's plan picks the split count
}

// Plans and runs one prefill (contiguous or paged K/V) on torch's current stream with `ro`
// (run_options(): the stream, the input-guard words). The plan is made on the device's cached
// profile; the tail split's scratch (muh/prefill_plan.hpp) comes from torch's caching allocator:
// no cudaMalloc per call, and freed back to the pool on return (stream-ordered).
void run_prefill(const char* op, const PrefillParams& p, const at::Tensor& on, const RunOptions& ro) {
  PrefillPlan plan;
  Status s = plan_prefill(p, stream_profile_of(on, op), PrefillPlanOptions{}, &plan);
  if (!s.ok()) throw_status(s, op);
  at::Tensor ws;
  if (plan.workspace_bytes > 0)
    ws = at::empty({static_cast<int64_t>(plan.workspace_bytes)}, on.options().dtype(at::kByte));
  s = prefill(p, plan, plan.workspace_bytes > 0 ? ws.data_ptr() : nullptr, plan.workspace_bytes, ro);
  if (!s.ok()) throw_status(s, op);
}

// A paged call given the host copies of its lengths, planned as a mixed batch (mixed_plan.hpp):
// its q_len-1 rows, and the short rows leading with them, through the decode kernel where the
// plan's model says so, the rest through the paged prefill — one call's results either way, within
// the tolerance. Plain calls without lse only (plan_mixed refuses variants; a split writes no lse).
void run_mixed(const char* op, const PrefillParams& p, const int* cu_host, const int* used_host, const at::Tensor& on,
               const RunOptions& ro) {
  MixedPlan plan;
  Status s = plan_mixed(p, cu_host, used_host, stream_profile_of(on, op), MixedPlanOptions{}, &plan);
  if (!s.ok()) throw_status(s, op);
  at::Tensor ws;
  if (plan.workspace_bytes > 0)
    ws = at::empty({static_cast<int64_t>(plan.workspace_bytes)}, on.options().dtype(at::kByte));
  s = paged_attention(p, plan, plan.workspace_bytes > 0 ? ws.data_ptr() : nullptr, plan.workspace_bytes, ro);
  if (!s.ok()) throw_status(s, op);
}

// ---- FlashAttention-style varlen prefill ---------------------------------------------------------
std::tuple<at::Tensor, at::Tensor> flash_attn_varlen(
    const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in,
    const at::Tensor& cu_seqlens_q, const at::Tensor& cu_seqlens_k, int64_t max_seqlen_q,
    int64_t max_seqlen_k, std::optional<double> softmax_scale, bool causal, bool return_lse, int64_t window_left,
    int64_t window_right, double softcap, const std::optional<at::Tensor>& alibi_slopes,
    const std::optional<at::Tensor>& s_aux) {
  const Args a{"flash_attn_varlen_func", q_in.device()};
  a.cuda(q_in, "q");
  a.dim(q_in, "q", 3, "[total_q, num_heads, head_dim]");
  const DType t = a.element(q_in, "q");
  a.cuda(k_in, "k");
  a.dim(k_in, "k", 3, "[total_k, num_kv_heads, head_dim]");
  a.dtype(k_in, "k", q_in.scalar_type());
  a.cuda(v_in, "v");
  a.dim(v_in, "v", 3, "[total_k, num_kv_heads, head_dim]");
  a.dtype(v_in, "v", q_in.scalar_type());
  MUH_ARG_CHECK(v_in.sizes() == k_in.sizes(), a.op, "v must have k's shape ", k_in.sizes(), ", got ",
                v_in.sizes());
  a.size(k_in, "k", 2, q_in.size(2), "head_dim, as q");
  const int64_t hq = q_in.size(1), hkv = k_in.size(1);
  MUH_ARG_CHECK(hkv >= 1 && hq % hkv == 0, a.op, "q's num_heads (", hq,
                ") must be a multiple of k's num_kv_heads (", hkv, ")");
  a.index(cu_seqlens_q, "cu_seqlens_q", 1, "[batch + 1]");
  a.index(cu_seqlens_k, "cu_seqlens_k", 1, "[batch + 1]");
  MUH_ARG_CHECK(cu_seqlens_q.numel() >= 1, a.op, "cu_seqlens_q must hold batch + 1 >= 1 offsets");
  a.size(cu_seqlens_k, "cu_seqlens_k", 0, cu_seqlens_q.numel(), "batch + 1, as cu_seqlens_q");
  MUH_ARG_CHECK(max_seqlen_q >= 0, a.op, "max_seqlen_q must be >= 0, got ", max_seqlen_q);
  MUH_ARG_CHECK(max_seqlen_k >= 0, a.op, "max_seqlen_k must be >= 0, got ", max_seqlen_k);
  const float scale = a.scale(softmax_scale, "softmax_scale");
  const Variant variant = a.variant(window_left, window_right, softcap, alibi_slopes, s_aux, hq);

  const at::Tensor q = a.rows(q_in, "q"), k = a.rows(k_in, "k"), v = a.rows(v_in, "v");
  at::Tensor out = at::empty(q.sizes(), q.options());
  at::Tensor lse = return_lse ? at::empty({hq, q.size(0)}, q.options().dtype(at::kFloat))
                              : at::empty({0}, q.options().dtype(at::kFloat));
  const int64_t batch = cu_seqlens_q.numel() - 1;
  if (batch == 0 || q.size(0) == 0) return {out, lse};

  PrefillParams p;
  p.dtype = t;
  p.q = q.data_ptr();
  p.k = k.data_ptr();
  p.v = v.data_ptr();
  p.out = out.data_ptr();
  p.lse = return_lse ? lse.data_ptr<float>() : nullptr;
  p.cu_seqlens_q = cu_seqlens_q.data_ptr<int>();
  p.cu_seqlens_k = cu_seqlens_k.data_ptr<int>();
  p.batch = a.to_int(batch, "batch");
  p.total_q = a.to_int(q.size(0), "total_q");
  p.total_k = a.to_int(k.size(0), "total_k");
  p.max_seqlen_q = a.to_int(max_seqlen_q, "max_seqlen_q");
  p.max_seqlen_k = a.to_int(max_seqlen_k, "max_seqlen_k");
  p.num_q_heads = a.to_int(hq, "num_heads");
  p.num_kv_heads = a.to_int(hkv, "num_kv_heads");
  p.head_dim = a.to_int(q.size(2), "head_dim");
  p.softmax_scale = scale;
  p.causal = causal;
  p.variant = variant;
  const c10::cuda::CUDAGuard guard(q.device());
  const RunOptions ro = run_options(q, a.op);
  run_prefill(a.op, p, q, ro);
  check_after_launch(a.op, ro);
  return {out, lse};
}

// The cache of a paged prefill: NHD (k_cache and v_cache 4-D [num_pages, page_size, kv_heads, d])
// or vLLM's (k_cache 5-D [num_pages, kv_heads, d/x, page_size, x], v_cache 4-D [num_pages,
// kv_heads, d, page_size]), told apart by k_cache's rank.
struct PagedCache {
  KVLayout layout = KVLayout::nhd;
  int64_t num_pages = 0, page_size = 0, num_kv_heads = 0;
};

// The fp8 kind a cache's torch dtype names (torch.float8_e4m3fn / float8_e5m2), else `same`.
KVDType fp8_kind_of(at::ScalarType t) {
  if (t == at::kFloat8_e4m3fn) return KVDType::fp8_e4m3;
  if (t == at::kFloat8_e5m2) return KVDType::fp8_e5m2;
  return KVDType::same;
}

// The caches' element type for a call over `kv` (muh/kv_quant.hpp). context_attention_fwd names it
// by kv_cache_dtype (vLLM's string, passed here): the rule of paged_attention_v1/v2
// (check_kv_cache_dtype: 'auto' = q's dtype; fp8 = uint8 or the kind's torch.float8).
// flash_attn_varlen_func has no such argument (kv_cache_dtype empty here): its kind is its caches'
// torch.float8 dtype (fp8_kind_of), a uint8 cache does not say which kind it holds.
void check_paged_cache_dtype(const Args& a, const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                             const char* kname, const char* vname, KVDType kv, std::string_view kv_cache_dtype) {
  if (!kv_cache_dtype.empty()) {
    check_kv_cache_dtype(a, k_cache, kname, q, "q", kv, kv_cache_dtype);
    check_kv_cache_dtype(a, v_cache, vname, q, "q", kv, kv_cache_dtype);
    return;
  }
  if (is_fp8(kv)) {
    MUH_ARG_CHECK(v_cache.scalar_type() == k_cache.scalar_type(), a.op, vname, " must be ", k_cache.scalar_type(),
                  " as ", kname, " is (one fp8 kind for both caches), got ", v_cache.scalar_type());
    return;
  }
  MUH_NOT_IMPLEMENTED_CHECK(k_cache.scalar_type() != at::kByte && v_cache.scalar_type() != at::kByte, "muh.", a.op,
                            ": ", kname, "/", vname, " dtype ", k_cache.scalar_type(), "/", v_cache.scalar_type(),
                            ": a uint8 cache does not say which fp8 kind it holds; pass it as "
                            "cache.view(torch.float8_e4m3fn) or cache.view(torch.float8_e5m2)");
  MUH_NOT_IMPLEMENTED_CHECK(k_cache.scalar_type() == q.scalar_type() && v_cache.scalar_type() == q.scalar_type(),
                            "muh.", a.op, ": ", kname, "/", vname, " dtype ", k_cache.scalar_type(), "/",
                            v_cache.scalar_type(), " differs from the query's ", q.scalar_type(),
                            " (muh's paged prefill reads a cache of q's dtype, or an fp8 one as "
                            "torch.float8_e4m3fn / torch.float8_e5m2 with k_descale / v_descale)");
}

// kv: the call's cache element type (an fp8 cache holds 1-byte codes: x = 16 in vLLM's layout);
// kv_cache_dtype: check_paged_cache_dtype's.
PagedCache paged_cache(const Args& a, const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                       const char* kname, const char* vname, KVDType kv, std::string_view kv_cache_dtype) {
  a.cuda(k_cache, kname);
  a.cuda(v_cache, vname);
  check_paged_cache_dtype(a, q, k_cache, v_cache, kname, vname, kv, kv_cache_dtype);
  MUH_NOT_IMPLEMENTED_CHECK(!is_fp8(kv) || q.scalar_type() != at::kFloat, "muh.", a.op, ": q is float32 with an ",
                            kv_dtype_name(kv), " KV cache: muh reads an fp8 KV cache with a float16 or bfloat16 "
                            "query only");
  a.contiguous(k_cache, kname);
  a.contiguous(v_cache, vname);
  const int64_t d = q.size(2);
  PagedCache c;
  if (k_cache.dim() == 5) {
    // x = 16 bytes / the cache's element size: 16 for an fp8 cache (as vLLM's cache write).
    const int64_t x = 16 / kv_elem_size(kv, static_cast<int>(q.element_size()));
    c.layout = KVLayout::vllm;
    c.num_pages = k_cache.size(0);
    c.num_kv_heads = k_cache.size(1);
    c.page_size = k_cache.size(3);
    a.size(k_cache, kname, 2, d / x, "head_dim / x");
    a.size(k_cache, kname, 4, x, "x = 16 / the cache's element size");
    a.dim(v_cache, vname, 4, "[num_blocks, num_kv_heads, head_dim, block_size] (vLLM's layout, as the 5-D key cache)");
    a.size(v_cache, vname, 0, c.num_pages, "num_blocks, as the key cache");
    a.size(v_cache, vname, 1, c.num_kv_heads, "num_kv_heads, as the key cache");
    a.size(v_cache, vname, 2, d, "head_dim, as q");
    a.size(v_cache, vname, 3, c.page_size, "block_size, as the key cache");
  } else {
    a.dim(k_cache, kname, 4, "[num_pages, page_size, num_kv_heads, head_dim] (NHD), or 5-D in vLLM's layout");
    c.num_pages = k_cache.size(0);
    c.page_size = k_cache.size(1);
    c.num_kv_heads = k_cache.size(2);
    a.size(k_cache, kname, 3, d, "head_dim, as q");
    MUH_ARG_CHECK(v_cache.sizes() == k_cache.sizes(), a.op, vname, " must have ", kname, "'s shape ",
                  k_cache.sizes(), ", got ", v_cache.sizes());
  }
  MUH_ARG_CHECK(c.num_kv_heads >= 1 && q.size(1) % c.num_kv_heads == 0, a.op, "q's num_heads (", q.size(1),
                ") must be a multiple of the cache's num_kv_heads (", c.num_kv_heads, ")");
  return c;
}

// An fp8 call's descale (flash_attn_varlen_func's k_descale / v_descale, vLLM's fork's names):
// None → 1; else one value — a 0-dim or 1-element tensor, or one value expanded to any shape (stride
// 0 in every dim of size > 1: vLLM passes layer._k_scale.expand(batch, num_kv_heads), whose
// size-1 dim keeps its stride, e.g. shape [3, 1] strides [0, 1]) — read to the host as
// kv_scale() reads a tensor scale (a sync for a CUDA tensor, refused under capture). muh's fp8
// cache has per-tensor scales: distinct values per sequence or head raise NotImplementedError.
float descale_of(const Args& a, const std::optional<at::Tensor>& t, const char* name) {
  if (!t.has_value()) return 1.f;
  MUH_ARG_CHECK(t->defined(), a.op, name, " is undefined");
  bool one_value = t->numel() == 1;
  if (t->numel() > 1) {
    one_value = true;
    for (int64_t d = 0; d < t->dim(); ++d) one_value = one_value && (t->size(d) == 1 || t->stride(d) == 0);
  }
  MUH_NOT_IMPLEMENTED_CHECK(one_value || t->numel() == 0, "muh.", a.op, ": ", name, " of shape ", t->sizes(),
                            " (strides ", t->strides(), ") holds more than one value: muh takes per-tensor "
                            "descales only (one value: a 0-dim or 1-element tensor, a float, or one value "
                            "expanded, as vLLM's layer._k_scale.expand(...))");
  // (numel 0: kv_scale() says it must hold one value.)
  const float v = kv_scale(a, t->numel() > 1 ? t->as_strided(at::IntArrayRef{}, at::IntArrayRef{}) : *t, name);
  MUH_ARG_CHECK(std::isfinite(v) && v > 0.f, a.op, name, " must be finite and > 0 (as a float32), got ",
                static_cast<double>(v));
  return v;
}

// ---- Prefill over a paged KV cache (vLLM V1's flash_attn_varlen_func(..., block_table=)) ----------
// Writes out; returns lse [num_heads, total_q] (or an empty tensor). A torch.float8_e4m3fn /
// float8_e5m2 cache is an fp8 one (muh/kv_quant.hpp), dequantised by k_descale / v_descale
// (descale_of); for a cache of q's dtype they are not read (as FlashAttention 3 applies them to
// fp8 inputs only).
at::Tensor paged_prefill(at::Tensor& out, const at::Tensor& q_in, const at::Tensor& k_cache,
                         const at::Tensor& v_cache, const at::Tensor& cu_seqlens_q, const at::Tensor& seqused_k,
                         const at::Tensor& block_table, int64_t max_seqlen_q, int64_t max_seqlen_k,
                         std::optional<double> softmax_scale, bool causal, bool return_lse, int64_t window_left,
                         int64_t window_right, double softcap, const std::optional<at::Tensor>& alibi_slopes,
                         const std::optional<at::Tensor>& s_aux, const std::optional<at::Tensor>& k_descale,
                         const std::optional<at::Tensor>& v_descale,
                         const std::optional<at::Tensor>& cu_seqlens_q_host,
                         const std::optional<at::Tensor>& seqused_k_host) {
  const Args a{"flash_attn_varlen_func", q_in.device()};
  a.cuda(q_in, "q");
  a.dim(q_in, "q", 3, "[total_q, num_heads, head_dim]");
  const DType t = a.element(q_in, "q");
  const at::Tensor q = a.rows(q_in, "q");
  const KVDType kv = fp8_kind_of(k_cache.scalar_type());
  const PagedCache c = paged_cache(a, q, k_cache, v_cache, "k (the key cache)", "v (the value cache)", kv, "");
  a.cuda(out, "out");
  a.dtype(out, "out", q.scalar_type());
  MUH_ARG_CHECK(out.sizes() == q.sizes(), a.op, "out must have q's shape ", q.sizes(), ", got ", out.sizes());
  a.contiguous(out, "out");
  a.index(cu_seqlens_q, "cu_seqlens_q", 1, "[batch + 1]");
  MUH_ARG_CHECK(cu_seqlens_q.numel() >= 1, a.op, "cu_seqlens_q must hold batch + 1 >= 1 offsets");
  const int64_t batch = cu_seqlens_q.numel() - 1;
  a.index(seqused_k, "seqused_k", 1, "[batch]");
  a.size(seqused_k, "seqused_k", 0, batch, "batch = len(cu_seqlens_q) - 1");
  a.index(block_table, "block_table", 2, "[batch, max_blocks_per_seq]");
  a.size(block_table, "block_table", 0, batch, "batch = len(cu_seqlens_q) - 1");
  MUH_ARG_CHECK(max_seqlen_q >= 0, a.op, "max_seqlen_q must be >= 0, got ", max_seqlen_q);
  MUH_ARG_CHECK(max_seqlen_k >= 0, a.op, "max_seqlen_k must be >= 0, got ", max_seqlen_k);
  const float scale = a.scale(softmax_scale, "softmax_scale");
  const int64_t hq = q.size(1);
  const Variant variant = a.variant(window_left, window_right, softcap, alibi_slopes, s_aux, hq);
  // The host copies of the lengths (vLLM's query_start_loc_cpu, seq_lens_cpu): both or neither,
  // CPU int32 of the device arrays' shapes.
  MUH_ARG_CHECK(cu_seqlens_q_host.has_value() == seqused_k_host.has_value(), a.op,
                "give cu_seqlens_q_host and seqused_k_host together, or neither");
  const bool host_lengths = cu_seqlens_q_host.has_value();
  if (host_lengths) {
    for (const auto& [t, name, n] : {std::tuple{&*cu_seqlens_q_host, "cu_seqlens_q_host", batch + 1},
                                      std::tuple{&*seqused_k_host, "seqused_k_host", batch}}) {
      MUH_ARG_CHECK(t->device().is_cpu(), a.op, name, " must be a CPU tensor (the host copy), got ", t->device());
      MUH_ARG_CHECK(t->scalar_type() == at::kInt, a.op, name, " must be int32, got ", t->scalar_type());
      MUH_ARG_CHECK(t->dim() == 1 && t->size(0) == n && t->is_contiguous(), a.op, name, " must be a contiguous 1-D "
                    "tensor of ", n, " values (as its device array), got shape ", t->sizes());
    }
  }
  at::Tensor lse = return_lse ? at::empty({hq, q.size(0)}, q.options().dtype(at::kFloat))
                              : at::empty({0}, q.options().dtype(at::kFloat));
  const c10::cuda::CUDAGuard guard(q.device());
  KVQuant kvq;  // (a cache of q's dtype: the descales are not read)
  if (is_fp8(kv)) kvq = KVQuant{kv, descale_of(a, k_descale, "k_descale"), descale_of(a, v_descale, "v_descale")};
  if (batch == 0 || q.size(0) == 0) return lse;

  PrefillParams shape;
  shape.dtype = t;
  shape.q = q.data_ptr();
  shape.out = out.data_ptr();
  shape.lse = return_lse ? lse.data_ptr<float>() : nullptr;
  shape.cu_seqlens_q = cu_seqlens_q.data_ptr<int>();
  shape.batch = a.to_int(batch, "batch");
  shape.total_q = a.to_int(q.size(0), "total_q");
  shape.max_seqlen_q = a.to_int(max_seqlen_q, "max_seqlen_q");
  shape.max_seqlen_k = a.to_int(max_seqlen_k, "max_seqlen_k");
  shape.num_q_heads = a.to_int(hq, "num_heads");
  shape.num_kv_heads = a.to_int(c.num_kv_heads, "num_kv_heads");
  shape.head_dim = a.to_int(q.size(2), "head_dim");
  shape.softmax_scale = scale;
  shape.causal = causal;
  shape.variant = variant;
  PrefillParams p = make_paged_prefill(
      shape, c.layout, k_cache.data_ptr(), v_cache.data_ptr(), block_table.data_ptr<int>(),
      seqused_k.data_ptr<int>(), a.to_int(c.page_size, "page_size"), a.to_int(c.num_pages, "num_pages"),
      a.to_int(block_table.size(1), "max_blocks_per_seq"));
  p.kv = kvq;
  const RunOptions ro = run_options(q, a.op);
  if (host_lengths && variant_kind(variant) == VariantKind::plain && !return_lse)
    run_mixed(a.op, p, cu_seqlens_q_host->data_ptr<int>(), seqused_k_host->data_ptr<int>(), q, ro);
  else
    run_prefill(a.op, p, q, ro);
  check_after_launch(a.op, ro);
  return lse;
}

// MUH_CONTEXT_FUSE (read once): 1, context_attention_fwd runs its two parts in one launch where
// plan_context_prefill fuses them; unset or 0, as two parts and a merge — the same result within
// fp32 rounding. Off by default: measured no faster (H100, the seed's 512-token chunks: 8k 99.1–99.7
// µs fused against 97.5–98.7 as two parts, 32k equal within noise; bench/results/
// 2026-12-07-context-fused, call42).
bool context_fuse() {
  static const bool on = [] {
    const char* v = std::getenv("MUH_CONTEXT_FUSE");
    const std::string s = v ? v : "";
    TORCH_CHECK_VALUE(s.empty() || s == "0" || s == "1", "muh: MUH_CONTEXT_FUSE must be 0 or 1, got '" + s + "'");
    return s == "1";
  }();
  return on;
}

// ---- vLLM 0.6.3's context_attention_fwd (vllm/attention/ops/prefix_prefill.py) ------------------
// Chunked prefill with a cached prefix: sequence b's new tokens (q, k, v rows b_start_loc[b] ..,
// b_seq_len[b] − b_ctx_len[b] of them) attend to its b_ctx_len[b] cached tokens, read from vLLM's
// 5-D/4-D cache through b_loc, and causally to the chunk's own k/v — as vLLM's kernel reads them:
// the chunk from k and v, not from the cache. muh computes the two parts as two attentions and
// merges them by their LSE (merge_states.hpp; exact up to fp32 rounding):
//   prefix  paged prefill, not causal (every new token sees the whole prefix), lse → temp
//   chunk   dense prefill over k, v with cu_seqlens = b_start_loc, causal, into o — on a second
//           stream beside the prefix part (below), joined before the merge
//   o       merge_attn_states(o ← prefix, chunk)  (in place in o)
// — or, with MUH_CONTEXT_FUSE=1 where plan_context_prefill fuses them (equal chunks of at most 8 q
// tiles whose prefix part is the sm80 agent's key split of every tile: the seed's 512-token
// chunks), as one launch whose CTAs take pieces of both parts and one merge of both into o
// (context_prefill, attention.hpp).
// A sequence with no prefix gets lse −inf from the first part, and the merge then keeps the chunk
// bit for bit. alibi_slopes (fp32 [num_heads]) and sliding_window (vLLM's: key j is seen by query
// position i' when i' − j < sliding_window, i.e. window_size left = sliding_window − 1) are the
// attention variants (muh/variant.hpp) of both parts: the chunk's positions are relative to the
// chunk (the same distances), the prefix part's queries sit after all its keys
// (Variant::queries_after_keys: i' = ctx_len + i).
// kv_cache_dtype as paged_attention_v1/v2's (check_kv_cache_dtype): 'auto' — the cache holds q's
// dtype, k_scale / v_scale are not read; 'fp8' (= 'fp8_e4m3'), 'fp8_e4m3', 'fp8_e5m2' — uint8 (or
// the kind's torch.float8) codes, x = 16, dequantised by k_scale / v_scale: floats (vLLM 0.6.3, the
// default overload) or one-element tensors (later vLLM, .tensor_scales; a CUDA one is read to the
// host: kv_scale()). Only the prefix part reads the cache (its PrefillParams::kv, with the
// variant: an fp8 instance's general kind); the chunk's k, v are q's dtype as in vLLM.
// The chunk lengths are taken from b_start_loc (the offsets vLLM passes); b_seq_len is checked for
// its shape only — a b_seq_len ≠ b_ctx_len + chunk length is not detected (it lives on the device).
// ScaleArg: double (the default overload) or const at::Tensor& (.tensor_scales), as
// paged_attention_v1's.
template <class ScaleArg>
void context_attention_fwd(const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in, at::Tensor& o,
                           c10::string_view kv_cache_dtype, const at::Tensor& k_cache, const at::Tensor& v_cache,
                           const at::Tensor& b_loc, const at::Tensor& b_start_loc, const at::Tensor& b_seq_len,
                           const at::Tensor& b_ctx_len, int64_t max_input_len, ScaleArg k_scale, ScaleArg v_scale,
                           const std::optional<at::Tensor>& alibi_slopes, std::optional<int64_t> sliding_window,
                           std::optional<double> sm_scale) {
  const Args a{"context_attention_fwd", q_in.device()};
  const std::string_view kv_name(kv_cache_dtype.data(), kv_cache_dtype.size());
  const KVDType kv = kv_dtype_of(a.op, kv_name);
  MUH_ARG_CHECK(!sliding_window.has_value() || *sliding_window >= 0, a.op, "sliding_window must be >= 0 "
                "(None or 0: no window), got ", sliding_window.value_or(0));
  a.cuda(q_in, "q");
  a.dim(q_in, "q", 3, "[num_tokens, num_heads, head_size]");
  const DType t = a.element(q_in, "q");
  const at::Tensor q = a.rows(q_in, "q");
  a.cuda(k_in, "k");
  a.dim(k_in, "k", 3, "[num_tokens, num_kv_heads, head_size]");
  a.dtype(k_in, "k", q.scalar_type());
  a.cuda(v_in, "v");
  a.dtype(v_in, "v", q.scalar_type());
  MUH_ARG_CHECK(v_in.sizes() == k_in.sizes(), a.op, "v must have k's shape ", k_in.sizes(), ", got ", v_in.sizes());
  a.size(k_in, "k", 0, q.size(0), "num_tokens, as q");
  a.size(k_in, "k", 2, q.size(2), "head_size, as q");
  const at::Tensor k = a.rows(k_in, "k"), v = a.rows(v_in, "v");
  MUH_ARG_CHECK(k_cache.dim() == 5, a.op, "k_cache must be 5-D [num_blocks, num_kv_heads, head_size/x, block_size, x] "
                "(vLLM's layout), got shape ", k_cache.sizes());
  const PagedCache c = paged_cache(a, q, k_cache, v_cache, "k_cache", "v_cache", kv, kv_name);
  a.size(k, "k", 1, c.num_kv_heads, "num_kv_heads, as k_cache");
  a.cuda(o, "o");
  a.dtype(o, "o", q.scalar_type());
  MUH_ARG_CHECK(o.sizes() == q.sizes(), a.op, "o must have q's shape ", q.sizes(), ", got ", o.sizes());
  a.contiguous(o, "o");
  a.index(b_seq_len, "b_seq_len", 1, "[batch]");
  const int64_t batch = b_seq_len.numel();
  a.index(b_ctx_len, "b_ctx_len", 1, "[batch]");
  a.size(b_ctx_len, "b_ctx_len", 0, batch, "batch, as b_seq_len");
  a.index(b_loc, "b_loc", 2, "[batch, max_blocks_per_seq]");
  a.size(b_loc, "b_loc", 0, batch, "batch, as b_seq_len");
  a.index(b_start_loc, "b_start_loc", 1, "[batch + 1] (or [batch])");
  MUH_ARG_CHECK(b_start_loc.numel() == batch + 1 || b_start_loc.numel() == batch, a.op,
                "b_start_loc must hold batch + 1 (or batch) query offsets, batch = ", batch, ", got ",
                b_start_loc.numel());
  MUH_ARG_CHECK(max_input_len >= 0, a.op, "max_input_len must be >= 0, got ", max_input_len);
  const float scale = a.scale(sm_scale, "sm_scale");
  const int64_t window = sliding_window.value_or(0);
  const Variant variant = a.variant(window > 0 ? window - 1 : -1, -1, 0.0, alibi_slopes, std::nullopt, q.size(1),
                                    "sliding_window - 1");
  const c10::cuda::CUDAGuard guard(q.device());
  const KVQuant kvq = kv_quant_of(a, kv, kv_name, k_scale, v_scale);  // a CUDA tensor scale: a sync (see there)
  if (batch == 0 || q.size(0) == 0) return;

  const RunOptions ro = run_options(q, a.op);
  // vLLM 0.6.3 passes query_start_loc, [batch + 1]; its kernel reads only the first batch entries
  // and derives each chunk's length from b_seq_len − b_ctx_len. With [batch], the chunks are packed
  // back to back and the last one ends at num_tokens.
  at::Tensor cu_q = b_start_loc;
  if (b_start_loc.numel() == batch)
    cu_q = at::cat({b_start_loc, at::full({1}, q.size(0), b_start_loc.options())});
  const int max_prefix = a.to_int(b_loc.size(1) * c.page_size, "b_loc capacity (max_blocks_per_seq * block_size)");

  PrefillParams base;
  base.dtype = t;
  base.q = q.data_ptr();
  base.cu_seqlens_q = cu_q.data_ptr<int>();
  base.batch = a.to_int(batch, "batch");
  base.total_q = a.to_int(q.size(0), "num_tokens");
  base.max_seqlen_q = a.to_int(max_input_len, "max_input_len");
  base.num_q_heads = a.to_int(q.size(1), "num_heads");
  base.num_kv_heads = a.to_int(c.num_kv_heads, "num_kv_heads");
  base.head_dim = a.to_int(q.size(2), "head_size");
  base.softmax_scale = scale;

  // The chunk: dense, causal (q and k of one length), written into o with its lse.
  const int64_t hq = q.size(1);
  at::Tensor chunk_lse = at::empty({hq, q.size(0)}, q.options().dtype(at::kFloat));
  PrefillParams chunk = base;
  chunk.k = k.data_ptr();
  chunk.v = v.data_ptr();
  chunk.out = o.data_ptr();
  chunk.lse = chunk_lse.data_ptr<float>();
  chunk.cu_seqlens_k = cu_q.data_ptr<int>();
  chunk.total_k = base.total_q;
  chunk.max_seqlen_k = base.max_seqlen_q;
  chunk.causal = true;
  chunk.variant = variant;

  // The prefix: paged, every new token sees all of it.
  at::Tensor prefix_out = at::empty(q.sizes(), q.options());
  at::Tensor prefix_lse = at::empty({hq, q.size(0)}, q.options().dtype(at::kFloat));
  PrefillParams prefix = base;
  prefix.out = prefix_out.data_ptr();
  prefix.lse = prefix_lse.data_ptr<float>();
  prefix.max_seqlen_k = max_prefix;
  prefix.causal = false;
  prefix.variant = variant;
  prefix.variant.queries_after_keys = true;  // new token i sits at position b_ctx_len + i
  prefix = make_paged_prefill(prefix, KVLayout::vllm, k_cache.data_ptr(), v_cache.data_ptr(), b_loc.data_ptr<int>(),
                              b_ctx_len.data_ptr<int>(), a.to_int(c.page_size, "block_size"),
                              a.to_int(c.num_pages, "num_blocks"), a.to_int(b_loc.size(1), "max_blocks_per_seq"));
  prefix.kv = kvq;  // the cache's element type and scales: only the prefix part reads the cache

  // One launch where asked for (context_fuse) and the plan fuses the parts (prefill_plan.hpp,
  // plan_context_prefill: the prefix part the sm80 agent's key split of every q tile — the seed's
  // 512-token chunks): the chunk's causal tiles as pieces beside the prefix's, one merge of both.
  ContextPlan cp;
  if (context_fuse()) {
    const Status s = plan_context_prefill(prefix, chunk, stream_profile_of(q, a.op), PrefillPlanOptions{}, &cp);
    if (!s.ok()) throw_status(s, a.op);
  }
  if (cp.fused) {
    PrefillParams fp = prefix, fc = chunk;
    fp.out = fc.out = o.data_ptr();
    fp.lse = fc.lse = nullptr;
    const at::Tensor ws = at::empty({static_cast<int64_t>(cp.workspace_bytes)}, q.options().dtype(at::kByte));
    const Status s = context_prefill(fp, fc, cp, ws.data_ptr(), cp.workspace_bytes, ro);
    if (!s.ok()) throw_status(s, a.op);
    check_after_launch(a.op, ro);
    return;
  }

  // The two parts are independent until the merge. The prefix part goes first on torch's stream,
  // the chunk on a stream of torch's pool beside it, joined before the merge: the chunk's causal
  // tiles (the heaviest first) take the SMs the prefix part leaves — the key split's last round,
  // the Hopper agent's 64 whole tiles of a 2048-token chunk at 4 heads, the 4 of 132 beside its
  // 128 — instead of waiting for it to end (bench/results/2026-12-07-ncu-prefill). A stream on a
  // green context stays on it: a pool stream would run outside the partition.
  const c10::cuda::CUDAStream current = at::cuda::getCurrentCUDAStream(q.get_device());
  HardwareCapability whole;
  const bool fork = device_profile(q.get_device(), &whole).ok() &&
                    stream_profile_of(q, a.op).sm_count == whole.sm_count;
  if (!fork) {
    run_prefill(a.op, chunk, q, ro);
    run_prefill(a.op, prefix, q, ro);
  } else {
    const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(false, q.get_device());
    at::cuda::CUDAEvent inputs_ready, chunk_done;
    inputs_ready.record(current);
    inputs_ready.block(side);
    run_prefill(a.op, prefix, q, ro);
    {
      const c10::cuda::CUDAStreamGuard on_side(side);
      RunOptions side_ro = ro;
      side_ro.stream = side.stream();
      run_prefill(a.op, chunk, q, side_ro);
    }
    chunk_done.record(side);
    chunk_done.block(current);
  }

  MergeStatesParams m;
  m.dtype = t;
  m.output = o.data_ptr();
  m.prefix_output = prefix_out.data_ptr();
  m.prefix_lse = prefix_lse.data_ptr<float>();
  m.suffix_output = o.data_ptr();
  m.suffix_lse = chunk_lse.data_ptr<float>();
  m.num_tokens = base.total_q;
  m.num_heads = base.num_q_heads;
  m.head_dim = base.head_dim;
  const Status s = merge_attn_states(m, ro);
  if (!s.ok()) throw_status(s, a.op);
  check_after_launch(a.op, ro);
}

// ---- muh's own decode: NHD cache, muh's plan -------------------------------------------------------
std::tuple<at::Tensor, at::Tensor> paged_decode_nhd(
    const at::Tensor& q_in, const at::Tensor& k_cache, const at::Tensor& v_cache,
    const at::Tensor& block_table, const at::Tensor& seq_lens, int64_t max_seq_len,
    std::optional<double> softmax_scale, bool return_lse, int64_t num_splits) {
  const Args a{"paged_decode", q_in.device()};
  a.cuda(q_in, "q");
  a.dim(q_in, "q", 3, "[num_seqs, num_q_heads, head_dim]");
  const DType t = a.element(q_in, "q");
  const at::Tensor q = a.rows(q_in, "q");
  const int64_t num_seqs = q.size(0), hq = q.size(1), d = q.size(2);
  a.cuda(k_cache, "k_cache");
  a.dim(k_cache, "k_cache", 4, "[num_pages, page_size, num_kv_heads, head_dim] (NHD)");
  a.dtype(k_cache, "k_cache", q.scalar_type());
  a.contiguous(k_cache, "k_cache");
  a.cuda(v_cache, "v_cache");
  a.dtype(v_cache, "v_cache", q.scalar_type());
  MUH_ARG_CHECK(v_cache.sizes() == k_cache.sizes(), a.op, "v_cache must have k_cache's shape ",
                k_cache.sizes(), ", got ", v_cache.sizes());
  a.contiguous(v_cache, "v_cache");
  const int64_t page_size = k_cache.size(1), hkv = k_cache.size(2);
  a.size(k_cache, "k_cache", 3, d, "head_dim, as q");
  MUH_ARG_CHECK(hkv >= 1 && hq % hkv == 0, a.op, "q's num_q_heads (", hq,
                ") must be a multiple of k_cache's num_kv_heads (", hkv, ")");
  a.index(block_table, "block_table", 2, "[num_seqs, max_blocks_per_seq]");
  a.size(block_table, "block_table", 0, num_seqs, "num_seqs, as q");
  a.index(seq_lens, "seq_lens", 1, "[num_seqs]");
  a.size(seq_lens, "seq_lens", 0, num_seqs, "num_seqs, as q");
  MUH_ARG_CHECK(num_splits >= 0, a.op, "num_splits must be >= 0 (0 = muh's plan), got ", num_splits);
  // Without a bound from the caller, the block table's capacity bounds every sequence.
  if (max_seq_len < 0) max_seq_len = block_table.size(1) * page_size;
  const float scale = a.scale(softmax_scale, "softmax_scale");

  at::Tensor out = at::empty(q.sizes(), q.options());
  at::Tensor lse = return_lse ? at::empty({num_seqs, hq}, q.options().dtype(at::kFloat))
                              : at::empty({0}, q.options().dtype(at::kFloat));
  if (num_seqs == 0) return {out, lse};

  DecodeParams p;
  p.dtype = t;
  p.layout = KVLayout::nhd;
  p.q = q.data_ptr();
  p.k_cache = k_cache.data_ptr();
  p.v_cache = v_cache.data_ptr();
  p.out = out.data_ptr();
  p.lse = return_lse ? lse.data_ptr<float>() : nullptr;
  p.block_table = block_table.data_ptr<int>();
  p.seq_lens = seq_lens.data_ptr<int>();
  p.num_seqs = a.to_int(num_seqs, "num_seqs");
  p.num_q_heads = a.to_int(hq, "num_q_heads");
  p.num_kv_heads = a.to_int(hkv, "num_kv_heads");
  p.head_dim = a.to_int(d, "head_dim");
  p.page_size = a.to_int(page_size, "page_size");
  p.num_pages = a.to_int(k_cache.size(0), "num_pages");
  p.max_blocks_per_seq = a.to_int(block_table.size(1), "max_blocks_per_seq");
  p.max_seq_len = a.to_int(max_seq_len, "max_seq_len");
  p.softmax_scale = scale;
  PlanOptions po;
  po.force_splits = a.to_int(num_splits, "num_splits");
  const c10::cuda::CUDAGuard guard(q.device());
  run_decode(a.op, p, po, q, nullptr);
  return {out, lse};
}

// ---- No backward: the ops' Autograd kernel --------------------------------------------------------
// Without one, torch ran the forward and backward() returned without a gradient for q, k, v.
// With grad mode on, an input that requires grad raises, naming it; otherwise (no_grad,
// inference_mode, inputs without grad) the call goes on to the kernels below autograd.
void inference_only(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  if (c10::GradMode::is_enabled()) {
    const auto& args = op.schema().arguments();
    const auto values = torch::jit::last(*stack, args.size());
    for (std::size_t i = 0; i < args.size(); ++i) {
      const c10::IValue& v = values[i];
      if (!v.isTensor() || !v.toTensor().defined() || !v.toTensor().requires_grad()) continue;
      std::string name = op.schema().name();
      name = name.substr(name.find("::") + 2);  // "muh::flash_attn_varlen" → "flash_attn_varlen"
      TORCH_CHECK_NOT_IMPLEMENTED(false, cat("muh.", name, ": ", args[i].name(),
                                             " requires grad, but muh's kernels have no backward "
                                             "(inference only): call under torch.no_grad() or "
                                             "torch.inference_mode(), or pass ", args[i].name(),
                                             ".detach()"));
    }
  }
  op.redispatchBoxed(keys & c10::after_autograd_keyset, stack);
}

}  // namespace
}  // namespace muh::torch_ops

// Schemas: paged_attention_v1/v2 are vLLM's (csrc/torch_bindings.cpp), argument for argument, so a
// caller of torch.ops._C.paged_attention_v1(...) can call torch.ops.muh.paged_attention_v1(...):
// the default overloads are vLLM 0.6.3's (float k_scale, v_scale: the seed's deployment), the
// .tensor_scales overloads vLLM 0.7+'s (0-dim tensors).
TORCH_LIBRARY(muh, m) {
  m.set_python_module("muh.ops");  // fake implementations live there
  // The .tensor_scales overloads first: a call tries the overloads in this order, and a 0-dim
  // tensor would also convert to a float (through a device sync, which a CUDA graph capture refuses).
  m.def(
      "paged_attention_v1.tensor_scales(Tensor! out, Tensor query, Tensor key_cache, Tensor value_cache, "
      "int num_kv_heads, float scale, Tensor block_tables, Tensor seq_lens, int block_size, "
      "int max_seq_len, Tensor? alibi_slopes, str kv_cache_dtype, Tensor k_scale, Tensor v_scale, "
      "int tp_rank, int blocksparse_local_blocks, int blocksparse_vert_stride, "
      "int blocksparse_block_size, int blocksparse_head_sliding_step) -> ()");
  m.def(
      "paged_attention_v2.tensor_scales(Tensor! out, Tensor! exp_sums, Tensor! max_logits, Tensor! tmp_out, "
      "Tensor query, Tensor key_cache, Tensor value_cache, int num_kv_heads, float scale, "
      "Tensor block_tables, Tensor seq_lens, int block_size, int max_seq_len, Tensor? alibi_slopes, "
      "str kv_cache_dtype, Tensor k_scale, Tensor v_scale, int tp_rank, int blocksparse_local_blocks, "
      "int blocksparse_vert_stride, int blocksparse_block_size, int blocksparse_head_sliding_step) -> ()");
  m.def(
      "paged_attention_v1(Tensor! out, Tensor query, Tensor key_cache, Tensor value_cache, "
      "int num_kv_heads, float scale, Tensor block_tables, Tensor seq_lens, int block_size, "
      "int max_seq_len, Tensor? alibi_slopes, str kv_cache_dtype, float k_scale, float v_scale, "
      "int tp_rank, int blocksparse_local_blocks, int blocksparse_vert_stride, "
      "int blocksparse_block_size, int blocksparse_head_sliding_step) -> ()");
  m.def(
      "paged_attention_v2(Tensor! out, Tensor! exp_sums, Tensor! max_logits, Tensor! tmp_out, "
      "Tensor query, Tensor key_cache, Tensor value_cache, int num_kv_heads, float scale, "
      "Tensor block_tables, Tensor seq_lens, int block_size, int max_seq_len, Tensor? alibi_slopes, "
      "str kv_cache_dtype, float k_scale, float v_scale, int tp_rank, int blocksparse_local_blocks, "
      "int blocksparse_vert_stride, int blocksparse_block_size, int blocksparse_head_sliding_step) -> ()");
  m.def(
      "flash_attn_varlen(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, "
      "SymInt max_seqlen_q, SymInt max_seqlen_k, float? softmax_scale=None, bool causal=False, "
      "bool return_lse=False, int window_left=-1, int window_right=-1, float softcap=0.0, "
      "Tensor? alibi_slopes=None, Tensor? s_aux=None) -> (Tensor, Tensor)");
  m.def(
      "paged_prefill(Tensor! out, Tensor q, Tensor k_cache, Tensor v_cache, Tensor cu_seqlens_q, "
      "Tensor seqused_k, Tensor block_table, SymInt max_seqlen_q, SymInt max_seqlen_k, "
      "float? softmax_scale=None, bool causal=False, bool return_lse=False, int window_left=-1, "
      "int window_right=-1, float softcap=0.0, Tensor? alibi_slopes=None, Tensor? s_aux=None, "
      "Tensor? k_descale=None, Tensor? v_descale=None, Tensor? cu_seqlens_q_host=None, "
      "Tensor? seqused_k_host=None) -> Tensor");
  // vLLM 0.6.3's signature, and the later keyword sm_scale; .tensor_scales: later vLLM's tensor
  // k_scale / v_scale (first, as paged_attention's: a 0-dim tensor would also convert to a float).
  // muh.ops.context_attention_fwd picks the overload by the scales' type.
  m.def(
      "context_attention_fwd.tensor_scales(Tensor q, Tensor k, Tensor v, Tensor! o, str kv_cache_dtype, "
      "Tensor k_cache, Tensor v_cache, Tensor b_loc, Tensor b_start_loc, Tensor b_seq_len, Tensor b_ctx_len, "
      "int max_input_len, Tensor k_scale, Tensor v_scale, Tensor? alibi_slopes=None, "
      "int? sliding_window=None, float? sm_scale=None) -> ()");
  m.def(
      "context_attention_fwd(Tensor q, Tensor k, Tensor v, Tensor! o, str kv_cache_dtype, Tensor k_cache, "
      "Tensor v_cache, Tensor b_loc, Tensor b_start_loc, Tensor b_seq_len, Tensor b_ctx_len, "
      "int max_input_len, float k_scale=1.0, float v_scale=1.0, Tensor? alibi_slopes=None, "
      "int? sliding_window=None, float? sm_scale=None) -> ()");
  m.def(
      "paged_decode(Tensor q, Tensor k_cache, Tensor v_cache, Tensor block_table, Tensor seq_lens, "
      "int max_seq_len=-1, float? softmax_scale=None, bool return_lse=False, int num_splits=0) "
      "-> (Tensor, Tensor)");
  // No tensor arguments: one kernel for every dispatch key (muh.ops.check_errors()).
  m.def("check_input_errors() -> ()", &muh::torch_ops::check_input_errors_op);
}

// The same kernels serve CPU inputs only to say what is wrong ("query must be a CUDA tensor")
// instead of the dispatcher's "could not run ... with arguments from the CPU backend".
TORCH_LIBRARY_IMPL(muh, CUDA, m) {
  m.impl("paged_prefill", &muh::torch_ops::paged_prefill);
  m.impl("context_attention_fwd", &muh::torch_ops::context_attention_fwd<double>);
  m.impl("context_attention_fwd.tensor_scales", &muh::torch_ops::context_attention_fwd<const at::Tensor&>);
  m.impl("paged_attention_v1", &muh::torch_ops::paged_attention_v1<double>);
  m.impl("paged_attention_v1.tensor_scales", &muh::torch_ops::paged_attention_v1<const at::Tensor&>);
  m.impl("paged_attention_v2", &muh::torch_ops::paged_attention_v2<double>);
  m.impl("paged_attention_v2.tensor_scales", &muh::torch_ops::paged_attention_v2<const at::Tensor&>);
  m.impl("flash_attn_varlen", &muh::torch_ops::flash_attn_varlen);
  m.impl("paged_decode", &muh::torch_ops::paged_decode_nhd);
}
TORCH_LIBRARY_IMPL(muh, CPU, m) {
  m.impl("paged_prefill", &muh::torch_ops::paged_prefill);
  m.impl("context_attention_fwd", &muh::torch_ops::context_attention_fwd<double>);
  m.impl("context_attention_fwd.tensor_scales", &muh::torch_ops::context_attention_fwd<const at::Tensor&>);
  m.impl("paged_attention_v1", &muh::torch_ops::paged_attention_v1<double>);
  m.impl("paged_attention_v1.tensor_scales", &muh::torch_ops::paged_attention_v1<const at::Tensor&>);
  m.impl("paged_attention_v2", &muh::torch_ops::paged_attention_v2<double>);
  m.impl("paged_attention_v2.tensor_scales", &muh::torch_ops::paged_attention_v2<const at::Tensor&>);
  m.impl("flash_attn_varlen", &muh::torch_ops::flash_attn_varlen);
  m.impl("paged_decode", &muh::torch_ops::paged_decode_nhd);
}
TORCH_LIBRARY_IMPL(muh, Autograd, m) {
  for (const char* op : {"paged_attention_v1", "paged_attention_v1.tensor_scales", "paged_attention_v2",
                         "paged_attention_v2.tensor_scales", "flash_attn_varlen", "paged_decode",
                         "paged_prefill", "context_attention_fwd", "context_attention_fwd.tensor_scales"})
    m.impl(op, torch::CppFunction::makeFromBoxedFunction<&muh::torch_ops::inference_only>());
}
