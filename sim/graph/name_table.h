// Names of the IR's enums: a table of (value, name) pairs and the two look-ups, shared by the
// files that define the enums' to_string / parse functions.
#pragma once

#include <array>
#include <optional>
#include <string_view>
#include <utility>

namespace moesim {

template <typename E, std::size_t N>
using NameTable = std::array<std::pair<E, std::string_view>, N>;

template <typename E, std::size_t N>
std::string_view name_in(const NameTable<E, N>& table, E e) {
  for (const auto& [value, name] : table)
    if (value == e) return name;
  return "?";
}

template <typename E, std::size_t N>
std::optional<E> parse_in(const NameTable<E, N>& table, std::string_view s) {
  for (const auto& [value, name] : table)
    if (name == s) return value;
  return std::nullopt;
}

}  // namespace moesim
