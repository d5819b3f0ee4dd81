// bench_paged_seed.cu — `muh bench paged [--emulate bi-v100] [--out DIR] [--iters N]`: the seed's
// chunked prefill over the paged cache (issue 17), where the seed's deployment runs it.
//
// Cells: fp16, head_dim 256, one KV head with 4 or 6 query heads (the seed's models at tensor
// parallel 4), one sequence, a cached prefix of {0, 8192} tokens and a chunk of {512, 2048} new
// tokens, page 16, vLLM's cache layout (key [blocks, 1, 32, 16, 8], value [blocks, 1, 256, 16],
// pages in random order). Per (where, agent, cell), two calls timed one after the other in the same
// process, each call after a 256 MB L2 flush (untimed), median of --iters:
//   dense  muh::prefill over contiguous K/V of prefix + chunk keys (causal, bottom-right): what
//          paging is measured against (issue 17's target: paged >= 0.95x dense);
//   paged  the same attention with K/V read through the block table (make_paged_prefill, vLLM
//          layout; the chunk's keys already in the cache, as vLLM V1 writes them first).
// Where: the whole GPU with the device's own plan; with --emulate bi-v100 also a 16-SM green
// partition (check/green_partition.hpp; the BI-V100's SM count) for the portable agent (forced
// target 0: the BI-V100 profile's 48 KB row, the seed's own kernel) and the device's own agent,
// both planned for the stream's 16 SMs (stream_profile()). The grid stops at 8k + 2048 because
// the portable agent on 16 SMs takes ~0.1 s a call there (issue 17's 32k and 100k prefixes are
// bench/paged_prefill.py's, on the whole GPU). Results: a table on stdout, paged-seed-<device>-
// <date>.csv / .json under --out; max |paged − dense| per cell says both computed the same thing.
// --kv-dtype fp8_e4m3 | fp8_e5m2: a third call per cell (the device's agent, whole GPU), the same
// paged attention over an fp8 cache holding the K/V's codes (scales 1; the sm80 agent's row, the
// only one that reads fp8: prefill_agent_reads_kv), timed beside the other two; its max |fp8 −
// dense| is the codes' rounding, not a bug.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench.hpp"
#include "bench_common.hpp"
#include "commands.hpp"
#include "bench_emulate.hpp"
#include "green_partition.hpp"
#include "muh/attention.hpp"
#include "muh/tuning/policy_io.hpp"

namespace muh::cli {
namespace {

constexpr int kHeadDim = 256, kPage = 16, kX = 8;  // vLLM's x: 16 bytes of fp16
constexpr int kQHeads[] = {4, 6};
constexpr int kPrefixes[] = {0, 8192};
constexpr int kChunks[] = {512, 2048};
constexpr int kMaxKeys = 8192 + 2048;

struct Where {
  std::string name;
  cudaStream_t stream = nullptr;
  HardwareCapability hw;
};

// One sequence's q, its keys contiguous (dense) and in a vLLM-layout paged cache (pages shuffled).
struct Pool {
  bench::DeviceMemory q, k, v, k_cache, v_cache, out_dense, out_paged, table, used, cu_q, cu_k, ws;
  bench::DeviceMemory k_codes, v_codes, out_fp8;  // --kv-dtype: the same cache as fp8 codes (x = 16)
  int blocks = 0;
};

void fill_pool(Pool& pool, KVDType fp8) {
  const int blocks = (kMaxKeys + kPage - 1) / kPage;
  pool.blocks = blocks;
  std::mt19937 rng(20261202);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const std::size_t kv_elems = std::size_t(kMaxKeys) * kHeadDim;
  std::vector<__half> k(kv_elems), v(kv_elems), q(std::size_t(2048) * 6 * kHeadDim);
  for (auto& x : k) x = __float2half(u(rng));
  for (auto& x : v) x = __float2half(u(rng));
  for (auto& x : q) x = __float2half(u(rng));
  std::vector<int> table(blocks);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  const std::size_t page_elems = std::size_t(kPage) * kHeadDim;
  std::vector<__half> kc(std::size_t(blocks) * page_elems, __float2half(0.f)), vc(kc.size(), __float2half(0.f));
  for (int n = 0; n < kMaxKeys; ++n) {
    const std::size_t page = std::size_t(table[n / kPage]) * page_elems;
    const int slot = n % kPage;
    for (int d = 0; d < kHeadDim; ++d) {
      kc[page + (std::size_t(d / kX) * kPage + slot) * kX + d % kX] = k[std::size_t(n) * kHeadDim + d];
      vc[page + std::size_t(d) * kPage + slot] = v[std::size_t(n) * kHeadDim + d];
    }
  }
  auto up = [](bench::DeviceMemory& m, const void* src, std::size_t bytes, const char* what) {
    m.reset(bytes);
    bench::cuda_check(cudaMemcpy(m.p, src, bytes, cudaMemcpyHostToDevice), what);
  };
  up(pool.q, q.data(), q.size() * 2, "q");
  up(pool.k, k.data(), k.size() * 2, "k");
  up(pool.v, v.data(), v.size() * 2, "v");
  up(pool.k_cache, kc.data(), kc.size() * 2, "k_cache");
  up(pool.v_cache, vc.data(), vc.size() * 2, "v_cache");
  up(pool.table, table.data(), table.size() * 4, "block_table");
  if (is_fp8(fp8)) {  // vLLM's fp8 layout: key [blocks, 1, D/16, page, 16], value [blocks, 1, D, page]
    std::vector<std::uint8_t> kq(std::size_t(blocks) * page_elems, 0), vq(kq.size(), 0);
    for (int n = 0; n < kMaxKeys; ++n) {
      const std::size_t page = std::size_t(table[n / kPage]) * page_elems;
      const int slot = n % kPage;
      for (int d = 0; d < kHeadDim; ++d) {
        kq[page + (std::size_t(d / 16) * kPage + slot) * 16 + d % 16] =
            float_to_fp8(__half2float(k[std::size_t(n) * kHeadDim + d]), fp8);
        vq[page + std::size_t(d) * kPage + slot] = float_to_fp8(__half2float(v[std::size_t(n) * kHeadDim + d]), fp8);
      }
    }
    up(pool.k_codes, kq.data(), kq.size(), "k_cache (fp8)");
    up(pool.v_codes, vq.data(), vq.size(), "v_cache (fp8)");
    pool.out_fp8.reset(q.size() * 2);
  }
  pool.out_dense.reset(q.size() * 2);
  pool.out_paged.reset(q.size() * 2);
  pool.used.reset(4);
  pool.cu_q.reset(8);
  pool.cu_k.reset(8);
}

struct Row {
  std::string where, agent, dense_policy, paged_policy, fp8_policy;
  int sms = 0, q_heads = 0, prefix = 0, chunk = 0;
  double dense_us = 0, paged_us = 0, max_diff = 0;
  double fp8_us = 0, fp8_diff = 0;  // --kv-dtype (0: not run)
  double flops() const {
    const double keys = double(chunk) * prefix + double(chunk) * (chunk + 1) / 2;  // causal, bottom-right
    return 4.0 * kHeadDim * q_heads * keys;
  }
};

double max_abs_diff(const bench::DeviceMemory& x, const bench::DeviceMemory& y, std::size_t n) {
  std::vector<__half> a(n), b(n);
  bench::cuda_check(cudaMemcpy(a.data(), x.p, n * 2, cudaMemcpyDeviceToHost), "out");
  bench::cuda_check(cudaMemcpy(b.data(), y.p, n * 2, cudaMemcpyDeviceToHost), "out");
  double m = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double d = std::fabs(double(__half2float(a[i])) - double(__half2float(b[i])));
    m = std::isnan(d) ? INFINITY : std::max(m, d);
  }
  return m;
}

// Times one prefill call (planned for w's SMs with target `target`), its policy in *policy.
double time_call(const PrefillParams& p, const Where& w, int target, Pool& pool, bench::L2Flusher& flusher, int iters,
                 std::string* policy) {
  PrefillPlan plan;
  const Status s = plan_prefill(p, w.hw, PrefillPlanOptions{target, kPrefillTailAuto}, &plan);
  if (!s.ok()) throw std::runtime_error("bench paged: " + s.message());
  pool.ws.reset(std::max<std::size_t>(plan.workspace_bytes, 16));
  RunOptions opt;
  opt.stream = w.stream;
  *policy = to_string(plan.policy) + (plan.split.split() ? " +tail" : "");
  const Status run = prefill(p, plan, pool.ws.p, plan.workspace_bytes, opt);  // a bad status before timing
  if (!run.ok()) throw std::runtime_error("bench paged: prefill: " + run.message());
  const auto us = bench::time_calls_us([&] { (void)prefill(p, plan, pool.ws.p, plan.workspace_bytes, opt); },
                                       [&] { flusher.flush(w.stream); }, w.stream, iters, 1);
  return bench::median(us);
}

Row run_cell(Pool& pool, const Where& w, int target, int hq, int prefix, int chunk, bench::L2Flusher& flusher,
             int iters, KVDType fp8) {
  const int keys = prefix + chunk;
  const int cu_q[2] = {0, chunk}, cu_k[2] = {0, keys};
  bench::cuda_check(cudaMemcpy(pool.cu_q.p, cu_q, 8, cudaMemcpyHostToDevice), "cu_seqlens_q");
  bench::cuda_check(cudaMemcpy(pool.cu_k.p, cu_k, 8, cudaMemcpyHostToDevice), "cu_seqlens_k");
  bench::cuda_check(cudaMemcpy(pool.used.p, &keys, 4, cudaMemcpyHostToDevice), "seqused_k");
  PrefillParams d;
  d.dtype = DType::fp16;
  d.batch = 1;
  d.total_q = d.max_seqlen_q = chunk;
  d.total_k = d.max_seqlen_k = keys;
  d.num_q_heads = hq;
  d.num_kv_heads = 1;
  d.head_dim = kHeadDim;
  d.causal = true;
  d.q = pool.q.p;
  d.k = pool.k.p;
  d.v = pool.v.p;
  d.cu_seqlens_q = pool.cu_q.as<int>();
  d.cu_seqlens_k = pool.cu_k.as<int>();
  PrefillParams pg = make_paged_prefill(d, KVLayout::vllm, pool.k_cache.p, pool.v_cache.p, pool.table.as<int>(),
                                        pool.used.as<int>(), kPage, pool.blocks, pool.blocks);
  d.out = pool.out_dense.p;
  pg.out = pool.out_paged.p;
  Row r;
  r.where = w.name;
  r.sms = w.hw.sm_count;
  r.agent = target == 0 ? "portable t0" : "device's";
  r.q_heads = hq;
  r.prefix = prefix;
  r.chunk = chunk;
  r.dense_us = time_call(d, w, target, pool, flusher, iters, &r.dense_policy);
  r.paged_us = time_call(pg, w, target, pool, flusher, iters, &r.paged_policy);
  if (is_fp8(fp8) && target < 0 && w.name == "whole-gpu") {
    PrefillParams p8 = pg;
    p8.k_cache = pool.k_codes.p;
    p8.v_cache = pool.v_codes.p;
    p8.kv = KVQuant{fp8, 1.f, 1.f};
    p8.out = pool.out_fp8.p;
    r.fp8_us = time_call(p8, w, target, pool, flusher, iters, &r.fp8_policy);
  }
  bench::cuda_check(cudaStreamSynchronize(w.stream), "sync");
  r.max_diff = max_abs_diff(pool.out_dense, pool.out_paged, std::size_t(chunk) * hq * kHeadDim);
  if (r.fp8_us > 0) r.fp8_diff = max_abs_diff(pool.out_dense, pool.out_fp8, std::size_t(chunk) * hq * kHeadDim);
  return r;
}

struct Options {
  std::string out, emulate, kv_dtype = "auto";
  int iters = 30;
};

void write_results(const std::vector<Row>& rows, const std::string& dir, const std::string& device) {
  if (dir.empty()) return;
  const std::string base = dir + "/paged-seed-" + bench::device_slug(device) + "-" + bench::utc_date();
  std::ofstream csv(base + ".csv");
  if (!csv) throw std::runtime_error("cannot write " + base + ".csv");
  csv << "where,sms,agent,q_heads,prefix,chunk,dense_policy,paged_policy,dense_us,paged_us,dense_over_paged,"
         "paged_tflops,max_abs_diff,fp8_policy,fp8_us,paged_over_fp8,fp8_max_abs_diff\n";
  nlohmann::json j;
  j["device"] = device;
  j["date"] = bench::utc_date();
  j["method"] = "fp16 hd256 1 kv head, page 16, vLLM layout, random pages; L2 flushed before every call; median µs";
  for (const Row& r : rows) {
    csv << r.where << ',' << r.sms << ',' << r.agent << ',' << r.q_heads << ',' << r.prefix << ',' << r.chunk << ','
        << r.dense_policy << ',' << r.paged_policy << ',' << r.dense_us << ',' << r.paged_us << ','
        << r.dense_us / r.paged_us << ',' << r.flops() / (r.paged_us * 1e-6) / 1e12 << ',' << r.max_diff << ','
        << r.fp8_policy << ',' << r.fp8_us << ',' << (r.fp8_us > 0 ? r.paged_us / r.fp8_us : 0.0) << ',' << r.fp8_diff
        << '\n';
    j["rows"].push_back({{"where", r.where}, {"sms", r.sms}, {"agent", r.agent}, {"q_heads", r.q_heads},
                         {"prefix", r.prefix}, {"chunk", r.chunk}, {"dense_policy", r.dense_policy},
                         {"paged_policy", r.paged_policy}, {"dense_us", r.dense_us}, {"paged_us", r.paged_us},
                         {"max_abs_diff", r.max_diff}, {"fp8_policy", r.fp8_policy}, {"fp8_us", r.fp8_us},
                         {"fp8_max_abs_diff", r.fp8_diff}});
  }
  std::ofstream(base + ".json") << j.dump(2) << '\n';
  std::printf("wrote %s.csv / .json\n", base.c_str());
}

void run(const Options& o) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) throw UsageError("muh bench paged: no CUDA device");
  if (!o.out.empty()) {
    const std::string probe_path = o.out + "/.muh-write-test";
    if (!std::ofstream(probe_path)) throw UsageError("muh bench paged: --out " + o.out + " is not a writable directory");
    std::remove(probe_path.c_str());
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Where> wheres(1);
  wheres[0].name = "whole-gpu";
  {
    const Status s = device_profile(-1, &wheres[0].hw);
    if (!s.ok()) throw UsageError("muh bench paged: " + s.message());
  }
  check::GreenPartition green;
  if (!o.emulate.empty()) {
    const EmulatedRun e = emulate_bi_v100(green, "muh bench paged: --emulate bi-v100: ", wheres[0].hw.name);
    wheres.push_back(Where{"green-16sm", e.stream, e.hw});
  }
  const KVDType fp8 = parse_kv_dtype(o.kv_dtype).value_or(KVDType::same);
  Pool pool;
  fill_pool(pool, fp8);
  bench::L2Flusher flusher;
  std::vector<Row> rows;
  std::printf("%-10s %3s %-12s %5s %6s %5s %10s %10s %8s %8s %9s  %s\n", "where", "sms", "agent", "heads", "prefix",
              "chunk", "dense us", "paged us", "d/p", "TFLOP/s", "max diff", "paged policy");
  if (is_fp8(fp8)) std::printf("  (fp8 rows: the same call over an %s cache, its time, paged/fp8, max |fp8 - dense|)\n",
                               o.kv_dtype.c_str());
  for (const Where& w : wheres)
    for (int target : {-1, 0}) {
      if (w.name == "whole-gpu" && target == 0) continue;  // the portable agent: emulated only
      for (int hq : kQHeads)
        for (int prefix : kPrefixes)
          for (int chunk : kChunks) {
            Row r = run_cell(pool, w, target, hq, prefix, chunk, flusher, target == 0 ? std::max(10, o.iters / 3) : o.iters,
                             fp8);
            std::printf("%-10s %3d %-12s %3d/1 %6d %5d %10.1f %10.1f %8.3f %8.1f %9.2e  %s\n", r.where.c_str(), r.sms,
                        r.agent.c_str(), r.q_heads, r.prefix, r.chunk, r.dense_us, r.paged_us, r.dense_us / r.paged_us,
                        r.flops() / (r.paged_us * 1e-6) / 1e12, r.max_diff, r.paged_policy.c_str());
            if (r.fp8_us > 0)
              std::printf("%-10s %3s %-12s %5s %6s %5s %10s %10.1f %8.3f %8.1f %9.2e  %s\n", "  fp8", "", "", "", "", "",
                          "", r.fp8_us, r.paged_us / r.fp8_us, r.flops() / (r.fp8_us * 1e-6) / 1e12, r.fp8_diff,
                          r.fp8_policy.c_str());
            std::fflush(stdout);
            rows.push_back(std::move(r));
          }
    }
  cudaDeviceProp prop{};
  bench::cuda_check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  write_results(rows, o.out, prop.name);
  std::printf("wall time %.1f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

}  // namespace

void add_bench_paged(CLI::App& bench) {
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = bench.add_subcommand(
      "paged", "the seed's chunked prefill over the paged cache against dense (fp16 hd256, 4-6 q / 1 kv, page 16)");
  cmd->add_option("--out", opt->out, "directory for paged-seed-<device>-<date>.csv and .json");
  cmd->add_option("--iters", opt->iters, "timed calls per figure (median; the portable agent a third of them, >= 10)")
      ->check(CLI::Range(10, 1000));
  cmd->add_option("--emulate", opt->emulate,
                  "bi-v100: also the cells on a 16-SM green partition, portable agent (target 0) and the device's")
      ->check(CLI::IsMember({"bi-v100"}));
  cmd->add_option("--kv-dtype", opt->kv_dtype,
                  "fp8_e4m3 or fp8_e5m2: also each whole-GPU cell over an fp8 cache of the same K/V (auto: not)")
      ->check(CLI::IsMember({"auto", "fp8", "fp8_e4m3", "fp8_e5m2"}));
  cmd->callback([opt] { run(*opt); });
}

}  // namespace muh::cli
