// status.cpp — names of status codes (for messages and the C ABI).
#include "muh/status.hpp"

namespace muh {

const char* status_code_name(StatusCode c) {
  switch (c) {
    case StatusCode::ok: return "ok";
    case StatusCode::invalid_argument: return "invalid argument";
    case StatusCode::unsupported: return "unsupported";
    case StatusCode::not_compiled: return "not compiled";
    case StatusCode::no_device: return "no CUDA device";
    case StatusCode::cuda_error: return "CUDA error";
  }
  return "unknown";
}

}  // namespace muh
