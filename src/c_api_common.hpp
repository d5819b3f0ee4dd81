// c_api_common.hpp — shared by the C ABI's translation units (not installed).
#pragma once

#include <string>

#include "muh/build_config.hpp"
#include "muh/dtype.hpp"
#include "muh/muh.h"
#include "muh/paged_kv.hpp"
#include "muh/params.hpp"
#include "muh/status.hpp"

namespace muh::capi {

extern thread_local std::string g_last_error;

// Records s as the thread's last error and returns its code as the C ABI int.
int report(const Status& s);

// The C ints of the enums, range-checked (a cast could otherwise wrap onto a valid value); `who`
// prefixes the message (e.g. "muh_paged_prefill: ").
Status dtype_of(int dtype, const std::string& who, DType* t);
Status layout_of(int layout, const std::string& who, KVLayout* l);
// A muh_kv_dtype, range-checked before the cast (an int cast to the 8-bit enum could wrap onto a
// valid value); `name` is the argument's ("kv_dtype", "kv.kv_dtype").
Status kv_dtype_of(int kv_dtype, const std::string& who, const char* name, KVDType* kv);

// A paged-prefill call's shape from the C ABI's ints (pointers unset), with the ABI's own checks of
// dtype and layout (fn names the entry point); c_api_prefill.cpp, shared with c_api_mixed.cpp.
Status paged_shape(int dtype, int layout, int batch, int total_q, int max_seqlen_q, int max_seqlen_k, int num_q_heads,
                   int num_kv_heads, int head_dim, int page_size, int num_pages, int max_blocks_per_seq, int causal,
                   const char* fn, PrefillParams* p);
// Its pointers and scale.
void set_paged_pointers(PrefillParams* p, const void* q, const void* k_cache, const void* v_cache, void* out, float* lse,
                        const int* cu_seqlens_q, const int* block_table, const int* seqused_k, float softmax_scale);

// A muh_variant (null: no variant) as a muh::Variant; the values are checked with the call.
Variant variant_of(const muh_variant* v);

// A muh_kv_quant (null: MUH_KV_QUANT_AUTO, *kv left as it is) as a muh::KVQuant: its kv_dtype
// range-checked (kv_dtype_of, named "kv.kv_dtype"), its scales copied (checked with the call).
Status kv_quant_of(const muh_kv_quant* q, const std::string& who, KVQuant* kv);

}  // namespace muh::capi
