// decode_check.hpp — input checks shared by plan_decode() (plan.cpp) and paged_decode()
// (decode.cu). Internal, not installed. Nothing here looks at device memory or calls CUDA, so
// every failure is reported on a machine without a GPU.
#pragma once

#include <cstddef>
#include <string>

#include "muh/attention.hpp"
#include "muh/params.hpp"
#include "muh/plan.hpp"
#include "muh/status.hpp"

namespace muh::detail {

// dtype, head_dim (supported), KV layout, heads, page size, lengths, block-table coverage,
// softmax scale. Whether the (dtype, head_dim) instance is compiled, and the pointers, are
// paged_decode()'s business (a plan is a host value, made for any supported shape).
Status check_decode_shape(const DecodeParams& p);

// The KV cache's element type and scales (part of check_decode_shape).
Status check_kv_quant(const DecodeParams& p);

// q, k_cache, v_cache, out, block_table, seq_lens non-null; tensors 16-byte aligned, lse /
// block_table / seq_lens 4-byte aligned. (The workspace is checked against the plan.)
Status check_decode_pointers(const DecodeParams& p);

// Everything about a call's inputs that needs no device: the shape and, where there is work, the
// instance (compiled) and the pointers — in that order. paged_decode() and muh_paged_decode()
// call it once, before any CUDA call.
Status check_decode_call(const DecodeParams& p);

// plan_decode() after its check_decode_shape(), and paged_decode() after its check_decode_call(),
// for a caller that ran them (the C ABI: each input checked once per call).
Status plan_decode_unchecked(const DecodeParams& p, const HardwareCapability& hw, const PlanOptions& opt,
                             DecodePlan* plan);
Status paged_decode_unchecked(const DecodeParams& p, const DecodePlan& plan, void* workspace,
                              std::size_t workspace_bytes, const RunOptions& opt);

}  // namespace muh::detail
