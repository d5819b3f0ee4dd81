// c_api_common.hpp — shared by the C ABI's translation units (not installed).
#pragma once

#include <string>

#include "muh/build_config.hpp"
#include "muh/muh.h"
#include "muh/status.hpp"

namespace muh::capi {

extern thread_local std::string g_last_error;

// Records s as the thread's last error and returns its code as the C ABI int.
int report(const Status& s);

}  // namespace muh::capi
