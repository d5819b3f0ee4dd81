// bench_decode_seed.cu — `muh bench decode --grid seed [--emulate bi-v100 [--no-portable]]
//                        [--kv-dtype auto,fp8_e4m3] [--out DIR] [--iters N] [--l2-hint auto|on|off]
//                        [--wide-row auto|on|off]`:
//                        the seed's own decode (issue 18), and over an fp8 cache (issue 20).
//
// Cells: fp16, head_dim 256, one KV head with 4 or 6 query heads (the seed's Qwen3.6-class models
// at tensor parallel 4), batch 1 and 2, every sequence kv_len ∈ {8192, 32768, 100000, 262144}
// long, page 16, vLLM's cache layout (key [blocks, 1, 32, 16, 8], value [blocks, 1, 256, 16]):
// a K region then a V region at the pool's base, each holding the cell's batch × kv_len / 16
// blocks in random order. Per (cell, agent), each figure the median µs of --iters (≥ 30) calls,
// every call after a 256 MB L2 flush on its stream (untimed):
//   V1     force_splits 1 — what the seed runs (V1 forced);
//   plan   the plan's own split count, planned for the stream's SMs (stream_profile());
//   best   the fastest of V1, the plan and a sweep of forced split counts: powers of two and
//          counts that make the CTAs a multiple of the SM count, up to 4 waves of the policy's
//          resident CTAs (more cannot help: nothing is left to fill; plan.cpp's bound);
//   floor  the size-matched read floor: bench::streaming_read_us over the cell's K/V bytes on
//          the same stream and SMs, the faster of .cs and .cg loads;
// each with floor ÷ time. The whole GPU runs the device's own plan (target -1). --emulate
// bi-v100 adds the cells on a 16-SM green partition (check/green_partition.hpp; the BI-V100's
// SM count) for the portable agent (forced target 0: the BI-V100 profile's agent and its
// 48 KB row; the launcher gives the kernel exactly its policy's footprint of shared memory) and
// for the device's own agent, both planned with stream_profile(green stream) = 16 SMs.
//
// Device time is scarce, so the sweep skips what cannot win: a split run's CTAs each read 1/s of
// a sequence at no more than the rate of V1's lone CTA, so t(s) ≥ t_V1 / s. Counts are timed from
// the largest down, and s is skipped when 0.8 · t_V1 / s is above the best so far (0.8 leaves
// room for noise; the JSON lists the skipped counts). One warm-up call per figure (it loads the
// kernel). What remains is dominated by V1 itself: the portable agent's V1 at 256k is one CTA
// streaming 268 MB (~0.2 s a call at the ~1.5 GB/s per CTA of issue 18's table). A CPU dry run of
// this file with synthetic times (the plan's cost model for the sm80 agent, that per-CTA rate for
// the portable one) came to ~70 s of device time for --emulate bi-v100, 2/3 of it the portable
// agent's V1 calls; the budget is 3 minutes. The run prints its wall time.
//
// --kv-dtype (cache types, comma-separated; default auto = fp16): each cell once per type, one
// after the other (so an fp8 cache's figures stand beside the 16-bit cache's of the same run),
// with that type's own floor (an fp8 cache: half the bytes). The fp8 cells read the pool's bytes
// as codes (scales 1; the fill's bf16 bit patterns, a few of them NaN codes: a timing only — the
// kernels' work does not depend on the values), in vLLM's fp8 layout (the key's x is 16).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_common.hpp"
#include "bench_decode.hpp"
#include "commands.hpp"
#include "bench_emulate.hpp"
#include "green_partition.hpp"
#include "muh/attention.hpp"
#include "muh/build_config.hpp"

namespace muh::cli {
namespace {

constexpr int kHeadDim = 256, kKvHeads = 1, kPage = 16;
constexpr int kQHeads[] = {4, 6};
constexpr int kBatches[] = {1, 2};
constexpr int kLens[] = {8192, 32768, 100000, 262144};
constexpr std::size_t kPageBytes = std::size_t(kPage) * kKvHeads * kHeadDim * 2;  // 8 KB of K (or V)
constexpr long long kMaxPages = 2LL * 262144 / kPage;                            // the largest cell
constexpr double kPruneSlack = 0.8;  // see the top of the file

struct SeedPool {
  bench::DeviceMemory kv, q, out, table, lens, ws;
};

// Where a run executes: its stream and the profile its plans see (stream_profile()).
struct Where {
  std::string name;  // "whole-gpu" / "green-16sm"
  cudaStream_t stream = nullptr;
  HardwareCapability hw;
};

struct Timing {
  int splits = 0, partition = 0, ctas = 0;
  bool wide = false;  // the plan ran the target's wide row (DecodePlan::wide)
  double median_us = 0, min_us = 0, max_us = 0;
};

// The size-matched read floor of a cell on one stream: .cs and .cg loads, and the faster of them.
struct Floor {
  double us = 0, cs_us = 0, cg_us = 0;
};

struct SeedRow {
  std::string where, agent;
  KVDType kv = KVDType::same;  // the cache's element type (--kv-dtype)
  int sms = 0, target = -1, q_heads = 0, batch = 0, kv_len = 0;
  bool l2_evict_first = false;
  Timing v1, plan, best;
  std::string best_kind;        // "v1", "plan" or "forced"
  std::vector<Timing> sweep;    // forced split counts timed
  std::vector<int> pruned;      // forced split counts skipped (cannot beat the best)
  Floor floor;
};

std::string len_label(int len) { return len % 1024 == 0 ? std::to_string(len / 1024) + "k" : std::to_string(len / 1000) + "k"; }
std::string cache_name(KVDType kv) { return is_fp8(kv) ? std::string(kv_dtype_name(kv)) : std::string("fp16"); }
std::string cell_label(const SeedRow& r) {
  return "b" + std::to_string(r.batch) + " " + std::to_string(r.q_heads) + "q/1kv " + len_label(r.kv_len) +
         (is_fp8(r.kv) ? " " + cache_name(r.kv) : std::string());
}

// The cell's block table (a random permutation of its own pages) and lengths, uploaded; its K
// region at the pool's base and its V region right after, so the K/V bytes are one run for the
// floor. kv: the cache's element type (an fp8 cache's pages are half the bytes).
DecodeParams setup_cell(SeedPool& pool, int q_heads, int batch, int len, KVDType kv) {
  const int blocks = (len + kPage - 1) / kPage;
  const long long n = static_cast<long long>(batch) * blocks;
  std::vector<int> table(static_cast<std::size_t>(n));
  std::iota(table.begin(), table.end(), 0);
  std::mt19937 rng(static_cast<unsigned>(batch * 100003 + len));
  std::shuffle(table.begin(), table.end(), rng);
  const std::vector<int> lens(batch, len);
  bench::cuda_check(cudaMemcpy(pool.table.p, table.data(), table.size() * 4, cudaMemcpyHostToDevice), "table");
  bench::cuda_check(cudaMemcpy(pool.lens.p, lens.data(), lens.size() * 4, cudaMemcpyHostToDevice), "lens");
  DecodeParams p;
  p.dtype = DType::fp16;
  p.layout = KVLayout::vllm;
  p.q = pool.q.p;
  p.k_cache = pool.kv.p;
  p.v_cache = pool.kv.as<unsigned char>() + static_cast<std::size_t>(n) * kPageBytes / (is_fp8(kv) ? 2 : 1);
  p.kv = KVQuant{kv, 1.f, 1.f};
  p.out = pool.out.p;
  p.block_table = pool.table.as<int>();
  p.seq_lens = pool.lens.as<int>();
  p.num_seqs = batch;
  p.num_q_heads = q_heads;
  p.num_kv_heads = kKvHeads;
  p.head_dim = kHeadDim;
  p.page_size = kPage;
  p.num_pages = static_cast<int>(n);
  p.max_blocks_per_seq = blocks;
  p.max_seq_len = len;
  return p;
}

struct Timer {
  const Where& w;
  SeedPool& pool;
  bench::L2Flusher& flusher;
  int iters, l2, wide;
  Timing operator()(const DecodeParams& p, int target, int splits, DecodePlan* plan_out = nullptr) const {
    const TimedDecode t = time_decode(p, w.hw, PlanOptions{target, splits, false, l2, wide}, pool.ws, flusher,
                                      w.stream, iters, 1);
    if (plan_out) *plan_out = t.plan;
    return Timing{t.plan.num_splits, t.plan.partition_tokens, t.plan.ctas, t.plan.wide, bench::median(t.us),
                  t.us.front(), t.us.back()};
  }
};

// The forced split counts to try, largest first (effective counts, as the plan makes them).
std::vector<int> sweep_counts(const DecodeParams& p, const Where& w, int target, const DecodePlan& v1) {
  const long long base = std::max(1, v1.ctas);  // CTAs of V1: batch · kv heads · head chunks
  const long long max_ctas = 4LL * w.hw.sm_count * std::max(1, v1.policy.ctas_per_sm);
  const long long max_s = std::min<long long>({65535, (p.max_seq_len + 15) / 16, max_ctas / base});
  std::set<long long> asked;
  for (long long s = 2; s <= max_s; s *= 2) asked.insert(s);
  for (long long k = 1; k * w.hw.sm_count <= max_ctas; ++k) asked.insert((k * w.hw.sm_count + base - 1) / base);
  std::set<int> eff;
  for (long long s : asked) {
    if (s < 2 || s > max_s) continue;
    DecodePlan plan;
    if (plan_decode(p, w.hw, PlanOptions{target, static_cast<int>(s)}, &plan).ok() && plan.num_splits > 1)
      eff.insert(plan.num_splits);
  }
  return std::vector<int>(eff.rbegin(), eff.rend());
}

// V1, the plan and the sweep of one (cell, agent) on `w`.
SeedRow run_agent(const DecodeParams& p, const Where& w, int target, const Timer& time) {
  SeedRow r;
  DecodePlan v1_plan, plan;
  r.v1 = time(p, target, 1, &v1_plan);
  r.plan = time(p, target, 0, &plan);
  r.where = w.name;
  r.sms = w.hw.sm_count;
  r.target = plan.target;
  r.agent = std::string(agent_name(plan.policy.agent)) + " t" + std::to_string(plan.target);
  r.l2_evict_first = plan.l2_evict_first;
  r.best = r.plan.median_us <= r.v1.median_us ? r.plan : r.v1;
  r.best_kind = r.plan.median_us <= r.v1.median_us ? "plan" : "v1";
  for (int s : sweep_counts(p, w, target, v1_plan)) {
    if (kPruneSlack * r.v1.median_us / s > r.best.median_us) {
      r.pruned.push_back(s);
      continue;
    }
    r.sweep.push_back(time(p, target, s));
    if (r.sweep.back().median_us < r.best.median_us) {
      r.best = r.sweep.back();
      r.best_kind = "forced";
    }
  }
  return r;
}

// The size-matched read floor of the cell on `w`: the faster of .cs and .cg loads.
Floor measure_floor(const DecodeParams& p, const Where& w, SeedPool& pool, bench::L2Flusher& flusher, int iters) {
  const std::size_t bytes = 2 * static_cast<std::size_t>(p.num_pages) * kPageBytes / (is_fp8(p.kv.dtype) ? 2 : 1);
  auto before = [&] { flusher.flush(w.stream); };
  Floor f;
  f.cs_us = bench::streaming_read_us(pool.kv.p, bytes, 16, iters, w.stream, before, true, w.hw.sm_count, 1);
  f.cg_us = bench::streaming_read_us(pool.kv.p, bytes, 16, iters, w.stream, before, false, w.hw.sm_count, 1);
  f.us = std::min(f.cs_us, f.cg_us);
  return f;
}

void print_progress(const SeedRow& r, double elapsed_s) {
  std::fprintf(stderr, "  %3d SMs %-12s %-14s V1 %9.1f  plan %8.1f (%d%s)  best %8.1f (%d%s)  floor %7.1f  [%.0f s]\n",
               r.sms, r.agent.c_str(), cell_label(r).c_str(), r.v1.median_us, r.plan.median_us, r.plan.splits,
               r.plan.wide ? "w" : "", r.best.median_us, r.best.splits, r.best.wide ? "w" : "", r.floor.us, elapsed_s);
}

void print_table(const BenchDevice& d, const std::vector<SeedRow>& rows, int iters) {
  std::printf("\nmuh paged decode, the seed's cells, on %s (sm_%d, %d SMs; SM clock %d MHz max, memory %d MHz):\n"
              "fp16 q (cache: fp16 unless the cell names fp8), head_dim 256, 1 KV head, page 16, vLLM layout, random\n"
              "page order, cold L2; median µs of %d "
              "calls (splits; w: the wide row) [floor ÷ time]; best = fastest of V1, the plan and forced split "
              "counts\n\n",
              d.hw.name, d.hw.compute_capability, d.hw.sm_count, d.sm_clock_khz / 1000, d.mem_clock_khz / 1000, iters);
  std::printf("| SMs | agent | cell | V1 forced | plan | best | floor | plan ÷ best |\n"
              "|---|---|---|---|---|---|---|---|\n");
  for (const SeedRow& r : rows) {
    auto f = [&](const Timing& t) { return t.median_us > 0 ? r.floor.us / t.median_us : 0.0; };
    auto w = [](const Timing& t) { return t.wide ? "w" : ""; };
    std::printf("| %d | %s | %s | %.1f [%.2f] | %.1f (%d%s) [%.2f] | %.1f (%d%s) [%.2f] | %.1f | %.2f |\n", r.sms,
                r.agent.c_str(), cell_label(r).c_str(), r.v1.median_us, f(r.v1), r.plan.median_us, r.plan.splits,
                w(r.plan), f(r.plan), r.best.median_us, r.best.splits, w(r.best), f(r.best), r.floor.us,
                r.best.median_us > 0 ? r.plan.median_us / r.best.median_us : 0.0);
  }
}

nlohmann::json timing_json(const Timing& t, double floor_us) {
  return {{"splits", t.splits},       {"partition_tokens", t.partition}, {"ctas", t.ctas}, {"wide", t.wide},
          {"median_us", t.median_us}, {"min_us", t.min_us},              {"max_us", t.max_us},
          {"floor_over_time", t.median_us > 0 ? floor_us / t.median_us : 0.0}};
}

void write_files(const BenchDecodeOptions& o, const BenchDevice& d, const std::vector<SeedRow>& rows, double wall_s) {
  const std::string stem = o.out + "/decode-seed-" + bench::device_slug(d.hw.name) + "-" + bench::utc_date();
  std::ofstream csv(stem + ".csv");
  if (!csv) throw UsageError("muh bench decode: cannot write " + stem + ".csv");
  csv << "run,sms,agent,target,head_dim,q_heads,kv_heads,batch,kv_len,kind,splits,partition_tokens,ctas,median_us,"
         "min_us,max_us,floor_us,floor_over_time,is_best,l2_evict_first,cache,wide\n";
  nlohmann::json j;
  j["device"] = device_json(d);
  j["date_utc"] = bench::utc_date();
  j["muh_version"] = MUH_VERSION_STRING;
  j["cuda_architectures"] = MUH_CUDA_ARCHITECTURES_STRING;
  j["emulate"] = o.emulate;
  j["wall_seconds"] = wall_s;
  j["method"] = {{"dtype", "fp16"},
                 {"head_dim", kHeadDim},
                 {"kv_heads", kKvHeads},
                 {"page_size", kPage},
                 {"cache_layout", "vllm: key [blocks, kv_heads, head_dim/8, 16, 8], value [blocks, kv_heads, head_dim, 16]"},
                 {"fp8_cache", "rows with cache fp8_*: 1-byte codes (key x = 16: [blocks, kv_heads, head_dim/16, 16, 16]), "
                               "scales 1, the pool's bytes as codes; floor over their bytes"},
                 {"page_order", "random permutation of the cell's own batch x kv_len / 16 blocks"},
                 {"l2", "256 MB buffer overwritten on the run's stream before each timed call (untimed)"},
                 {"statistic", "median of CUDA-event-timed calls after 1 warm-up call"},
                 {"iterations", o.iters},
                 {"floor", "streaming read of the cell's K/V bytes on the same stream and SMs (16 CTAs x 256 "
                           "threads per SM), faster of ld.global.cs / .cg, same flush, same statistic"},
                 {"sweep", "forced split counts: powers of two and CTA counts that are multiples of the SM count, up "
                           "to 4 x SMs x ctas_per_sm CTAs; a count s is skipped when 0.8 x V1 / s > the best so far"}};
  j["rows"] = nlohmann::json::array();
  for (const SeedRow& r : rows) {
    auto line = [&](const char* kind, const Timing& t) {
      const bool best = t.splits == r.best.splits && t.median_us == r.best.median_us;
      csv << r.where << ',' << r.sms << ',' << r.agent << ',' << r.target << ',' << kHeadDim << ',' << r.q_heads << ','
          << kKvHeads << ',' << r.batch << ',' << r.kv_len << ',' << kind << ',' << t.splits << ',' << t.partition << ','
          << t.ctas << ',' << t.median_us << ',' << t.min_us << ',' << t.max_us << ',' << r.floor.us << ','
          << (t.median_us > 0 ? r.floor.us / t.median_us : 0) << ',' << int(best) << ',' << int(r.l2_evict_first)
          << ',' << cache_name(r.kv) << ',' << int(t.wide) << '\n';
    };
    line("v1", r.v1);
    line("plan", r.plan);
    nlohmann::json sweep = nlohmann::json::array();
    for (const Timing& t : r.sweep) {
      line("forced", t);
      sweep.push_back(timing_json(t, r.floor.us));
    }
    nlohmann::json best = timing_json(r.best, r.floor.us);
    best["kind"] = r.best_kind;
    j["rows"].push_back({{"run", r.where},        {"sms", r.sms},          {"agent", r.agent},
                         {"target", r.target},    {"q_heads", r.q_heads},  {"batch", r.batch},
                         {"kv_len", r.kv_len},    {"l2_evict_first", r.l2_evict_first},
                         {"cache", cache_name(r.kv)},
                         {"v1", timing_json(r.v1, r.floor.us)},            {"plan", timing_json(r.plan, r.floor.us)},
                         {"best", best},          {"sweep", sweep},        {"pruned_splits", r.pruned},
                         {"floor_us", r.floor.us}, {"floor_cs_us", r.floor.cs_us}, {"floor_cg_us", r.floor.cg_us}});
  }
  std::ofstream js(stem + ".json");
  if (!js) throw UsageError("muh bench decode: cannot write " + stem + ".json");
  js << j.dump(2) << '\n';
  std::fprintf(stderr, "wrote %s.csv and %s.json\n", stem.c_str(), stem.c_str());
}

// The options --grid seed takes; any other given is refused (exit 2) before the GPU is touched.
void check_seed_options(const BenchDecodeOptions& o) {
  for (const std::string& g : o.given)
    if (g != "--out" && g != "--iters" && g != "--l2-hint" && g != "--emulate" && g != "--grid" && g != "--no-portable" &&
        g != "--kv-dtype" && g != "--wide-row")
      throw UsageError("muh bench decode: --grid seed does not take " + g +
                       " (it takes --out, --iters, --l2-hint, --wide-row, --emulate, --no-portable and --kv-dtype)");
  if (o.no_portable && o.emulate.empty())
    throw UsageError("muh bench decode: --no-portable drops the portable agent's cells of --emulate bi-v100: add it");
}

// The 16-SM green partition of --emulate bi-v100 (bench_emulate.hpp).
Where make_emulated(check::GreenPartition& green, const HardwareCapability& device) {
  const EmulatedRun e = emulate_bi_v100(green, "muh bench decode: --emulate bi-v100: ", device.name);
  return Where{"green-16sm", e.stream, e.hw};
}

}  // namespace

void add_bench_decode_seed_options(CLI::App& cmd, BenchDecodeOptions& o) {
  cmd.add_option("--grid", o.grid,
                 "default (the cells above) or seed: fp16 hd256 4q/1kv and 6q/1kv, batch 1-2, kv 8k..256k, vLLM "
                 "layout; V1, the plan, the best split count and the read floor (with --out, --iters, --l2-hint, "
                 "--emulate, --no-portable, --kv-dtype only)")
      ->check(CLI::IsMember({"default", "seed"}));
  cmd.add_option("--emulate", o.emulate,
                 "bi-v100 (with --grid seed): also the cells on a 16-SM green partition, portable agent (target 0, "
                 "48 KB) and the device's own agent, planned for 16 SMs")
      ->check(CLI::IsMember({"bi-v100"}));
  cmd.add_flag("--no-portable", o.no_portable,
               "with --emulate bi-v100: only the device's own agent on the partition (an A/B of that agent in a "
               "fraction of the device time)");
}

void run_bench_decode_seed(const BenchDecodeOptions& o) {
  check_seed_options(o);
  const std::vector<KVDType> kv_types = parse_kv_types(o);  // (an unknown type: exit 2, before the device)
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  const BenchDevice device = open_bench_device("muh bench decode");
  check::GreenPartition green;
  std::vector<Where> runs(1);
  runs[0].name = "whole-gpu";
  bench::cuda_check(cudaStreamCreateWithFlags(&runs[0].stream, cudaStreamNonBlocking), "stream");
  const Status s = stream_profile(runs[0].stream, &runs[0].hw);
  if (!s.ok()) throw UsageError("muh bench decode: " + s.message());
  if (!o.emulate.empty()) runs.push_back(make_emulated(green, device.hw));
  std::fprintf(stderr, "muh bench decode --grid seed%s: %s (sm_%d, %d SMs), %d timed calls per figure\n",
               o.emulate.empty() ? "" : " --emulate bi-v100", device.hw.name, device.hw.compute_capability,
               device.hw.sm_count, o.iters);

  // One pool for all cells: the largest (2 × 262144 tokens) has 32768 blocks of 8 KB each of K
  // and V (512 MiB). The fill writes bf16 bit patterns of uniform(−1, 1); read as fp16 they are
  // finite values in (−2, 2), which is all a timing needs.
  SeedPool pool;
  pool.kv.reset(2 * static_cast<std::size_t>(kMaxPages) * kPageBytes);
  bench::fill_bf16_uniform(pool.kv.as<std::uint16_t>(), pool.kv.n / 2, 1, runs[0].stream);
  pool.q.reset(std::size_t(2) * 6 * kHeadDim * 2);
  pool.out.reset(pool.q.n);
  bench::fill_bf16_uniform(pool.q.as<std::uint16_t>(), pool.q.n / 2, 3, runs[0].stream);
  pool.table.reset(static_cast<std::size_t>(kMaxPages) * 4);
  pool.lens.reset(2 * 4);
  bench::cuda_check(cudaStreamSynchronize(runs[0].stream), "pool fill");
  bench::L2Flusher flusher;

  std::vector<SeedRow> rows;
  for (const Where& w : runs) {
    // The whole GPU: the device's own plan; the partition: the portable agent beside it.
    const std::vector<int> targets =
        &w == &runs[0] || o.no_portable ? std::vector<int>{-1} : std::vector<int>{-1, 0};
    const Timer time{w, pool, flusher, o.iters, l2_hint_option(o.l2_hint), wide_row_option(o.wide_row)};
    for (int q_heads : kQHeads)
      for (int batch : kBatches)
        for (int len : kLens)
          for (KVDType kv : kv_types) {
            const DecodeParams p = setup_cell(pool, q_heads, batch, len, kv);
            const Floor floor = measure_floor(p, w, pool, flusher, o.iters);
            for (int target : targets) {
              SeedRow r = run_agent(p, w, target, time);
              r.kv = kv;
              r.q_heads = q_heads;
              r.batch = batch;
              r.kv_len = len;
              r.floor = floor;
              print_progress(r, elapsed());
              rows.push_back(r);
            }
          }
  }
  print_table(device, rows, o.iters);
  const double wall = elapsed();
  std::printf("\nwall time: %.1f s\n", wall);
  write_files(o, device, rows, wall);
  cudaStreamDestroy(runs[0].stream);
}

}  // namespace muh::cli
