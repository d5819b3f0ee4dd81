// c_api.cpp — the parts of the C ABI (muh.h) shared by every family: errors and version.
// Family entry points live in c_api_decode.cpp and c_api_prefill.cpp.
#include "c_api_common.hpp"
#include "muh/input_errors.hpp"

namespace muh::capi {

thread_local std::string g_last_error;

int report(const Status& s) {
  g_last_error = s.ok() ? std::string() : s.message();
  return static_cast<int>(s.code());
}

Status dtype_of(int dtype, const std::string& who, DType* t) {
  if (dtype < MUH_FP16 || dtype > MUH_FP32)
    return invalid_argument(who + "dtype " + std::to_string(dtype) + " is not one of MUH_FP16, MUH_BF16, MUH_FP32");
  *t = static_cast<DType>(dtype);
  return Status::Ok();
}

Status layout_of(int layout, const std::string& who, KVLayout* l) {
  if (layout < MUH_KV_NHD || layout > MUH_KV_VLLM)
    return invalid_argument(who + "layout " + std::to_string(layout) + " is not one of MUH_KV_NHD, MUH_KV_VLLM");
  *l = static_cast<KVLayout>(layout);
  return Status::Ok();
}

Status kv_dtype_of(int kv_dtype, const std::string& who, const char* name, KVDType* kv) {
  if (kv_dtype < MUH_KV_AUTO || kv_dtype > MUH_KV_FP8_E5M2)
    return invalid_argument(who + name + " " + std::to_string(kv_dtype) +
                            " is not one of MUH_KV_AUTO (0), MUH_KV_FP8_E4M3 (1), MUH_KV_FP8_E5M2 (2)");
  *kv = static_cast<KVDType>(kv_dtype);
  return Status::Ok();
}

Status kv_quant_of(const muh_kv_quant* q, const std::string& who, KVQuant* kv) {
  if (q == nullptr) return Status::Ok();
  MUH_TRY(kv_dtype_of(q->kv_dtype, who, "kv.kv_dtype", &kv->dtype));
  kv->k_scale = q->k_scale;
  kv->v_scale = q->v_scale;
  return Status::Ok();
}

}  // namespace muh::capi

extern "C" const char* muh_last_error(void) { return muh::capi::g_last_error.c_str(); }
extern "C" const char* muh_version(void) { return MUH_VERSION_STRING; }

static_assert(MUH_INPUT_ERROR_BLOCK_ID == muh::input_error_bit(muh::InputError::block_id) &&
                  MUH_INPUT_ERROR_SEQ_LEN == muh::input_error_bit(muh::InputError::seq_len) &&
                  MUH_INPUT_ERROR_CU_SEQLENS_Q_START == muh::input_error_bit(muh::InputError::cu_seqlens_q_start) &&
                  MUH_INPUT_ERROR_SEQLEN_Q_MAX == muh::input_error_bit(muh::InputError::seqlen_q_max) &&
                  MUH_INPUT_ERROR_CU_SEQLENS_K_START == muh::input_error_bit(muh::InputError::cu_seqlens_k_start) &&
                  MUH_INPUT_ERROR_SEQLEN_K_MAX == muh::input_error_bit(muh::InputError::seqlen_k_max) &&
                  muh::kInputErrorKinds == 12,
              "muh.h's MUH_INPUT_ERROR_* are muh::InputError's bits");

extern "C" int muh_check_input_errors(void* stream, uint32_t* mask) {
  std::uint32_t m = 0;
  muh::Status s = muh::read_input_errors(static_cast<cudaStream_t>(stream), &m);
  if (mask != nullptr) *mask = m;
  if (s.ok()) s = muh::input_errors_status(m);
  return muh::capi::report(s);
}
