// verify.hpp — `muh verify`: every compiled policy the present device can run, forced, against
// the CPU reference. One function per kernel family; cmd_verify.cpp prints progress and the table.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <string>
#include <vector>

namespace muh::cli {

struct VerifyOptions {
  bool quick = false;     // fewer shapes per policy
  unsigned seed = 1;
  std::string emulate;    // --emulate: "" or bi-v100
  // Set by cmd_verify.cpp for --emulate bi-v100: the checks run on this stream (a 16-SM green
  // partition) with plans from stream_profile(stream), and only for this dispatch target (0, the
  // portable agent); nullptr / -1: the current device's own streams and every target it runs.
  cudaStream_t stream = nullptr;
  int only_target = -1;
};

struct VerifyRow {
  std::string family;     // "decode" / "prefill" / "paged"
  std::string policy;     // target, dtype, head dim and the policy (policy_io.hpp), e.g.
                          // "target 90 bf16 hd128: sm80 w4 64tok s3 c2 p128 tma"
  int shapes = 0;         // shapes tried
  double max_err = 0;     // max |out − ref|
  double tol = 0;         // the tolerance it was held to
  bool pass = true;
  std::string note;
};

// The dispatch targets a prefill family checks: every compiled target the device (compute
// capability cc) runs, or opt.only_target alone; when that one is not compiled, a failing row of
// `family` says so (verify_targets.cpp).
std::vector<int> verify_targets(const VerifyOptions& opt, int cc, const char* family, std::vector<VerifyRow>* rows);

// A row's error and tolerance are those of its worst shape (the largest max_err / tol):
// `worst_ratio` holds that ratio so far (start it at −1).
inline void keep_worst(VerifyRow& row, double& worst_ratio, double max_err, double tol) {
  const double ratio = tol > 0 ? max_err / tol : 0;
  if (ratio <= worst_ratio) return;
  worst_ratio = ratio;
  row.max_err = max_err;
  row.tol = tol;
}

// Called after each shape: done of total, and what ran.
using VerifyProgress = std::function<void(int done, int total, const std::string& what)>;

std::vector<VerifyRow> verify_decode(const VerifyOptions& opt, const VerifyProgress& progress);   // verify_decode.cpp
std::vector<VerifyRow> verify_prefill(const VerifyOptions& opt, const VerifyProgress& progress);  // verify_prefill.cpp
std::vector<VerifyRow> verify_paged_prefill(const VerifyOptions& opt,
                                            const VerifyProgress& progress);  // verify_paged_prefill.cpp

}  // namespace muh::cli
