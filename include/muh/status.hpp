// status.hpp — the error type of every host entry point: a code and one line that says what is wrong.
#pragma once

#include <string>
#include <utility>

namespace muh {

enum class StatusCode : int {
  ok = 0,
  invalid_argument,   // bad shape, pointer, length, head_dim, dtype, ... (no kernel was launched)
  unsupported,        // valid request that this build or this device cannot serve
  not_compiled,       // the policy/arch asked for is not compiled into this binary
  no_device,          // no CUDA device present
  cuda_error,         // the CUDA runtime reported an error
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  bool ok() const { return code_ == StatusCode::ok; }
  explicit operator bool() const { return ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::ok;
  std::string message_;
};

inline Status invalid_argument(std::string m) { return {StatusCode::invalid_argument, std::move(m)}; }
inline Status unsupported(std::string m) { return {StatusCode::unsupported, std::move(m)}; }

const char* status_code_name(StatusCode c);

}  // namespace muh

// Early-return on a non-ok Status.
#define MUH_TRY(expr)                 \
  do {                                \
    ::muh::Status muh_try_s_ = (expr); \
    if (!muh_try_s_.ok()) return muh_try_s_; \
  } while (0)
