#include "sim/spec/gpu_identity.h"

#include <cctype>

namespace moesim {
namespace {

bool is_letter(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }
bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }
char upper(char c) { return static_cast<char>(std::toupper(static_cast<unsigned char>(c))); }

}  // namespace

GpuIdentity identify_gpu(std::string_view name) {
  GpuIdentity id;
  // Words are runs of letters and digits; "H100", "80GB", "SXM5".
  for (std::size_t i = 0; i < name.size();) {
    if (!is_letter(name[i]) && !is_digit(name[i])) {
      ++i;
      continue;
    }
    std::size_t end = i;
    while (end < name.size() && (is_letter(name[end]) || is_digit(name[end]))) ++end;
    const std::string_view word = name.substr(i, end - i);
    i = end;
    // A chip: one letter then 2..4 digits, and nothing else (not "SXM5", not "HBM3").
    if (id.chip.empty() && word.size() >= 3 && word.size() <= 5 && is_letter(word[0])) {
      bool digits = true;
      for (std::size_t k = 1; k < word.size(); ++k) digits = digits && is_digit(word[k]);
      if (digits) {
        id.chip = std::string(1, upper(word[0])) + std::string(word.substr(1));
        continue;
      }
    }
    // A memory size: digits then "GB" ("80GB"); at most 4 digits, so no overflow.
    if (!id.memory_gb && word.size() >= 3 && word.size() <= 6 && upper(word[word.size() - 2]) == 'G' &&
        upper(word[word.size() - 1]) == 'B') {
      bool digits = true;
      for (std::size_t k = 0; k + 2 < word.size(); ++k) digits = digits && is_digit(word[k]);
      if (digits) id.memory_gb = std::stoi(std::string(word.substr(0, word.size() - 2)));
    }
  }
  return id;
}

std::string gpu_mismatch(std::string_view measured, std::string_view preset) {
  const GpuIdentity m = identify_gpu(measured), p = identify_gpu(preset);
  if (m.chip.empty()) return "no GPU model can be read from '" + std::string(measured) + "'";
  if (p.chip.empty()) return "no GPU model can be read from the preset's name '" + std::string(preset) + "'";
  if (m.chip != p.chip) return "chip " + m.chip + " is not " + p.chip;
  if (m.memory_gb && p.memory_gb && *m.memory_gb != *p.memory_gb)
    return std::to_string(*m.memory_gb) + " GB is not " + std::to_string(*p.memory_gb) + " GB";
  return "";
}

}  // namespace moesim
