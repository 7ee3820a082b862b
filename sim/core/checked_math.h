// Checked 64-bit arithmetic for sizes derived from user input.
//
// Byte counts such as tokens x d_model x bytes x layers overflow silently in 32 bits and can in 64;
// every product of user-given sizes goes through checked_mul, which raises an InputError naming the
// operands instead of returning a wrapped value.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "sim/core/error.h"

namespace moesim {

inline std::int64_t checked_mul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) {
    throw InputError("size overflow: " + std::to_string(a) + " * " + std::to_string(b) +
                     " does not fit in 64 bits");
  }
  return r;
}

inline std::int64_t checked_mul(std::initializer_list<std::int64_t> factors) {
  std::int64_t r = 1;
  for (std::int64_t f : factors) r = checked_mul(r, f);
  return r;
}

inline std::int64_t checked_add(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) {
    throw InputError("size overflow: " + std::to_string(a) + " + " + std::to_string(b) +
                     " does not fit in 64 bits");
  }
  return r;
}

}  // namespace moesim
