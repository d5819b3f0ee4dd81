// verify_decode.cpp — decode part of `muh verify` (placeholder until the decode kernels land).
#include "verify.hpp"

namespace muh::cli {
std::vector<VerifyRow> verify_decode(const VerifyOptions&, const VerifyProgress&) {
  return {VerifyRow{"decode", "(none)", 0, 0, 0, false, "decode kernels not implemented yet"}};
}
}  // namespace muh::cli
