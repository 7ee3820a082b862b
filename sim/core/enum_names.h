// Name tables of enumerations: to_string, parse_* and the list of names from one table of
// (value, name) pairs, so that each enumeration's names are written once.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace moesim {

template <typename E, std::size_t N>
using EnumNames = std::array<std::pair<E, std::string_view>, N>;

template <typename E, std::size_t N>
std::optional<E> parse_from(const EnumNames<E, N>& table, std::string_view s) {
  for (const auto& [value, name] : table) {
    if (name == s) return value;
  }
  return std::nullopt;
}

template <typename E, std::size_t N>
std::string_view name_of(const EnumNames<E, N>& table, E e) {
  for (const auto& [value, name] : table) {
    if (value == e) return name;
  }
  return "?";
}

template <typename E, std::size_t N>
std::vector<std::string> names_of(const EnumNames<E, N>& table) {
  std::vector<std::string> out;
  for (const auto& entry : table) out.emplace_back(entry.second);
  return out;
}

}  // namespace moesim
