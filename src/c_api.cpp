// c_api.cpp — the parts of the C ABI (muh.h) shared by every family: errors and version.
// Family entry points live in c_api_decode.cpp and c_api_prefill.cpp.
#include "c_api_common.hpp"

namespace muh::capi {

thread_local std::string g_last_error;

int report(const Status& s) {
  g_last_error = s.ok() ? std::string() : s.message();
  return static_cast<int>(s.code());
}

}  // namespace muh::capi

extern "C" const char* muh_last_error(void) { return muh::capi::g_last_error.c_str(); }
extern "C" const char* muh_version(void) { return MUH_VERSION_STRING; }
