// tests/portable/clang_shim/texture_fetch_functions.h — empty on purpose. clang's CUDA wrapper
// (__clang_cuda_runtime_wrapper.h, clang 19) includes this header unconditionally; CUDA 13 no
// longer ships it (texture references were removed in CUDA 12). Nothing in muh uses textures.
#pragma once
