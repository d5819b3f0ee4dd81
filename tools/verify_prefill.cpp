// verify_prefill.cpp — prefill part of `muh verify` (placeholder until the prefill kernels land).
#include "verify.hpp"

namespace muh::cli {
std::vector<VerifyRow> verify_prefill(const VerifyOptions&, const VerifyProgress&) {
  return {VerifyRow{"prefill", "(none)", 0, 0, 0, false, "prefill kernels not implemented yet"}};
}
}  // namespace muh::cli
