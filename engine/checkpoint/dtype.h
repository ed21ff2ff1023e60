// Element types a checkpoint may hold and their conversion to f32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/checkpoint/checkpoint.h"

namespace argen::checkpoint {

size_t DTypeSize(DType dtype);
std::string_view DTypeName(DType dtype);  // safetensors spelling: "F32", "F16", "BF16"

// Converts n elements starting at src (any alignment) to f32. One switch per
// call, then a tight loop the compiler vectorises.
void ConvertToF32(DType dtype, const void* src, size_t n, float* dst);

// Scalar conversions, exposed for tests and for backends converting on the fly.
float Bf16ToF32(uint16_t bits);
float F16ToF32(uint16_t bits);

}  // namespace argen::checkpoint
