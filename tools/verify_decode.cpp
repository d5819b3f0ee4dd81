// verify_decode.cpp — the decode part of `muh verify`: every compiled decode policy the present
// device can run, forced, over the shapes of check/decode_case.hpp (the very check of
// tests/gpu/test_decode.cu), against the CPU reference; then the same over every compiled fp8 KV
// cache on every target (decode_fp8_sweep_cases). One row per (target, dtype,
// head_dim, cache type), each covering both KV layouts and every shape family.
#include <cuda_runtime_api.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "decode_case.hpp"
#include "muh/select.hpp"
#include "muh/tuning/policy_io.hpp"
#include "muh/tuning/selectors.hpp"
#include "verify.hpp"

namespace muh::cli {

namespace {
// "target 90 bf16 hd128: sm80 w4 64tok s3 c2 p128 tma"
std::string describe(int target, DType t, int d, KVDType kv) {
  return "target " + target_name(target) + " " + std::string(dtype_name(t)) + " hd" + std::to_string(d) +
         (is_fp8(kv) ? " " + std::string(kv_dtype_name(kv)) + " cache" : std::string()) + ": " +
         to_string(decode_policy(target, t, d));
}
}  // namespace

std::vector<VerifyRow> verify_decode(const VerifyOptions& opt, const VerifyProgress& progress) {
  std::vector<VerifyRow> rows;
  HardwareCapability hw;
  // --emulate: the profile of the checks' stream (its SMs); else the device's.
  if (const Status s = opt.stream ? stream_profile(opt.stream, &hw) : device_profile(-1, &hw); !s.ok()) {
    rows.push_back({"decode", "(none)", 0, 0, 0, false, s.message() + ": nothing verified"});
    return rows;
  }

  // The cases of every forced row this device can run (the selection: a target newer than the
  // device, or a row bigger than its shared memory, is left out, not failed).
  std::vector<check::DecodeCase> cases;
  auto add = [&](const std::vector<check::DecodeCase>& sweep) {
    for (const auto& c : sweep)
      if ((opt.only_target < 0 || c.target == opt.only_target) &&
          choose_decode(hw, c.dtype, c.head_dim, SelectOptions{c.target}).ok())
        cases.push_back(c);
  };
  add(check::decode_sweep_cases(opt.quick, opt.seed));
  add(check::decode_fp8_sweep_cases(opt.quick, opt.seed));
  if (cases.empty() && opt.only_target >= 0)
    rows.push_back({"decode", "(none)", 0, 0, 0, false,
                    "target " + std::to_string(opt.only_target) + " is not compiled into this build"});
  std::map<std::tuple<int, int, int, int>, std::size_t> row_of;  // (target, dtype, head_dim, cache) → row
  double* worst = nullptr;
  std::vector<double> worst_ratio;
  int done = 0;
  for (const auto& c : cases) {
    const auto key = std::make_tuple(c.target, static_cast<int>(c.dtype), c.head_dim, static_cast<int>(c.kv));
    auto it = row_of.find(key);
    if (it == row_of.end()) {
      it = row_of.emplace(key, rows.size()).first;
      rows.push_back({"decode", describe(c.target, c.dtype, c.head_dim, c.kv), 0, 0, 0, true, ""});
      worst_ratio.push_back(-1);
    }
    VerifyRow& row = rows[it->second];
    worst = &worst_ratio[it->second];
    check::DecodeProblem pr(c);
    if (opt.stream != nullptr) pr.set_stream(opt.stream);
    std::string err = pr.upload();
    check::DecodeOutcome r;
    if (err.empty()) r = pr.run(hw, c.force_splits);
    else r.error = err;
    ++row.shapes;
    if (r.error.empty()) keep_worst(row, *worst, r.max_err, r.tol);
    if (!r.pass()) {
      row.pass = false;
      if (row.note.size() < 300)
        row.note += (c.layout == KVLayout::nhd ? "nhd/" : "vllm/") + c.shape + ": " + r.summary() + "; ";
    }
    if (progress) progress(++done, static_cast<int>(cases.size()), c.name());
  }
  return rows;
}

}  // namespace muh::cli
