// dtype.hpp — the element types muh computes on, their sizes and names.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace muh {

// Storage type of q, k, v and out. Accumulation is always fp32.
enum class DType : std::uint8_t { fp16 = 0, bf16 = 1, fp32 = 2 };

constexpr int dtype_size(DType t) { return t == DType::fp32 ? 4 : 2; }

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::fp16: return "fp16";
    case DType::bf16: return "bf16";
    case DType::fp32: return "fp32";
  }
  return "?";
}

// Accepts muh's names and the usual PyTorch / Hugging Face spellings.
constexpr std::optional<DType> parse_dtype(std::string_view s) {
  if (s == "fp16" || s == "float16" || s == "half" || s == "torch.float16") return DType::fp16;
  if (s == "bf16" || s == "bfloat16" || s == "torch.bfloat16") return DType::bf16;
  if (s == "fp32" || s == "float32" || s == "float" || s == "torch.float32") return DType::fp32;
  return std::nullopt;
}

}  // namespace muh
