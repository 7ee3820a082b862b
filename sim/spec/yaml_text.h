// Small pieces for writing YAML files the loader reads back (calibration files): a double-quoted
// scalar and a fixed-point number.
#pragma once

#include <cstdio>
#include <string>

namespace moesim {

inline std::string yaml_quoted(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch == '\n' ? ' ' : ch;
  }
  return out + "\"";
}

inline std::string yaml_fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace moesim
