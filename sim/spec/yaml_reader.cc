#include "sim/spec/yaml_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>

#include <yaml-cpp/eventhandler.h>

#include "sim/core/input_file.h"

namespace moesim {
namespace {

std::string format_number(double v) {
  std::ostringstream os;
  os.precision(6);
  os << v;
  return os.str();
}

// A rate in the unit a reader of the message most likely thinks in.
std::string format_rate(double bytes_per_s) { return format_number(bytes_per_s / 1e9) + " GB/s"; }
std::string format_flops(double flops) { return format_number(flops / 1e12) + " TFLOP/s"; }

bool parse_whole_int(std::string_view s, std::int64_t& out) {
  if (s.empty()) return false;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

// Parses a leading number; returns the characters consumed (0 when none).
std::size_t parse_double_prefix(std::string_view s, double& out, bool& out_of_range) {
  out_of_range = false;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec == std::errc::result_out_of_range) {
    out_of_range = true;
    return static_cast<std::size_t>(ptr - s.data());
  }
  if (ec != std::errc()) return 0;
  return static_cast<std::size_t>(ptr - s.data());
}

// YAML spellings of non-finite numbers, and the bare ones from_chars would accept.
bool is_non_finite_spelling(std::string_view s) {
  std::string t(s);
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  if (!t.empty() && (t[0] == '+' || t[0] == '-')) t.erase(0, 1);
  return t == ".nan" || t == ".inf" || t == "nan" || t == "inf" || t == "infinity";
}

struct Unit {
  std::string_view name;
  double factor;              // to the canonical unit
  std::string_view opposite;  // bandwidth: the unit of the other kind (bits <-> bytes)
};

constexpr Unit kSizeUnits[] = {
    {"B", 1, ""},          {"KB", 1e3, ""},       {"MB", 1e6, ""},
    {"GB", 1e9, ""},       {"TB", 1e12, ""},      {"KiB", 1024.0, ""},
    {"MiB", 1048576.0, ""}, {"GiB", 1073741824.0, ""}, {"TiB", 1099511627776.0, ""},
};
constexpr Unit kTimeUnits[] = {{"ns", 1, ""}, {"us", 1e3, ""}, {"ms", 1e6, ""}, {"s", 1e9, ""}};
// Case matters: b is bits, B is bytes (the classic NIC-vs-NVLink confusion).
constexpr Unit kBandwidthUnits[] = {
    {"B/s", 1, ""},
    {"kB/s", 1e3, ""},
    {"KB/s", 1e3, ""},
    {"MB/s", 1e6, "Mb/s"},
    {"GB/s", 1e9, "Gb/s"},
    {"TB/s", 1e12, "Tb/s"},
    {"KiB/s", 1024.0, ""},
    {"MiB/s", 1048576.0, ""},
    {"GiB/s", 1073741824.0, ""},
    {"Mb/s", 1e6 / 8, "MB/s"},
    {"Gb/s", 1e9 / 8, "GB/s"},
    {"Tb/s", 1e12 / 8, "TB/s"},
    {"Mbit/s", 1e6 / 8, "MB/s"},
    {"Gbit/s", 1e9 / 8, "GB/s"},
    {"Tbit/s", 1e12 / 8, "TB/s"},
};
constexpr Unit kFlopUnits[] = {
    {"FLOP/s", 1, ""}, {"GFLOP/s", 1e9, ""}, {"TFLOP/s", 1e12, ""}, {"PFLOP/s", 1e15, ""}};

template <std::size_t N>
std::vector<std::string> unit_names(const Unit (&units)[N]) {
  std::vector<std::string> out;
  for (const Unit& u : units) out.emplace_back(u.name);
  return out;
}

template <std::size_t N>
const Unit* find_unit(const Unit (&units)[N], std::string_view name) {
  for (const Unit& u : units) {
    if (u.name == name) return &u;
  }
  return nullptr;
}

bool in_range(double v, PlausibleRange r) { return v >= r.min && v <= r.max; }

// Rejects flow nesting ([ and {) deeper than kMaxYamlDepth before yaml-cpp recurses into it.
// Quotes open a string only where a YAML scalar may start, so the apostrophe in a plain scalar
// ("NVIDIA's datasheet") does not hide brackets that follow.
void check_flow_nesting(const std::string& text, const std::string& file) {
  enum class State { kNormal, kComment, kSingle, kDouble };
  State state = State::kNormal;
  int depth = 0;
  int line = 1;
  int col = 0;
  char prev = '\n';
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      col = 0;
    } else {
      ++col;
    }
    switch (state) {
      case State::kComment:
        if (c == '\n') state = State::kNormal;
        break;
      case State::kSingle:
        if (c == '\'') {
          if (i + 1 < text.size() && text[i + 1] == '\'') {
            ++i;  // '' is an escaped quote
            ++col;
          } else {
            state = State::kNormal;
          }
        }
        break;
      case State::kDouble:
        if (c == '\\') {
          if (i + 1 < text.size() && text[i + 1] != '\n') {
            ++i;
            ++col;
          }
        } else if (c == '"') {
          state = State::kNormal;
        }
        break;
      case State::kNormal: {
        const bool at_token_start = prev == '\n' || prev == ' ' || prev == '\t' || prev == '[' ||
                                    prev == '{' || prev == ',' || prev == ':';
        if (c == '#' && (prev == '\n' || prev == ' ' || prev == '\t')) {
          state = State::kComment;
        } else if (c == '\'' && at_token_start) {
          state = State::kSingle;
        } else if (c == '"' && at_token_start) {
          state = State::kDouble;
        } else if (c == '[' || c == '{') {
          if (++depth > kMaxYamlDepth) {
            throw InputError(SourceLocation{file, line, col},
                             "nesting deeper than " + std::to_string(kMaxYamlDepth) +
                                 " levels of [ and {; moesim files need at most 4");
          }
        } else if ((c == ']' || c == '}') && depth > 0) {
          --depth;
        }
        break;
      }
    }
    prev = c;
  }
}

void check_tree(const YamlValue& v, const YAML::Node& node, int depth, std::int64_t& count) {
  if (++count > kMaxYamlNodes) {
    YamlValue(node, v.file(), "").fail("document has more than " + std::to_string(kMaxYamlNodes) +
                                       " nodes (aliases expanding?)");
  }
  if (depth > kMaxYamlDepth) {
    YamlValue(node, v.file(), "")
        .fail("nesting deeper than " + std::to_string(kMaxYamlDepth) + " levels");
  }
  if (node.IsMap()) {
    for (auto it = node.begin(); it != node.end(); ++it) {
      check_tree(v, it->first, depth + 1, count);
      check_tree(v, it->second, depth + 1, count);
    }
  } else if (node.IsSequence()) {
    for (auto it = node.begin(); it != node.end(); ++it) check_tree(v, *it, depth + 1, count);
  }
}

// Counts documents, remembering where the second one starts.
class DocumentCounter : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++starts_ == 2) second_start = mark;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

  YAML::Mark second_start = YAML::Mark::null_mark();

 private:
  int starts_ = 0;
};

}  // namespace

int edit_distance(std::string_view a, std::string_view b) {
  std::vector<int> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = static_cast<int>(j);
  for (std::size_t i = 1; i <= a.size(); ++i) {
    int diag = row[0];
    row[0] = static_cast<int>(i);
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const int up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

YamlValue::YamlValue(YAML::Node node, std::string file, std::string key_path)
    : node_(std::move(node)),
      mark_(node_.IsDefined() ? node_.Mark() : YAML::Mark::null_mark()),
      file_(std::move(file)),
      key_path_(std::move(key_path)) {}

YamlValue::YamlValue(YAML::Node node, std::string file, std::string key_path, YAML::Mark mark)
    : node_(std::move(node)), mark_(mark), file_(std::move(file)), key_path_(std::move(key_path)) {}

SourceLocation YamlValue::location() const {
  if (mark_.is_null()) return SourceLocation{file_, 0, 0};
  return SourceLocation{file_, mark_.line + 1, mark_.column + 1};
}

void YamlValue::fail(const std::string& rule) const {
  throw InputError(location(), key_path_.empty() ? rule : key_path_ + ": " + rule);
}

bool YamlValue::is_plain_scalar() const { return node_.IsScalar() && node_.Tag() == "?"; }

std::string YamlValue::describe() const {
  if (!node_.IsDefined() || node_.IsNull()) return "no value (null)";
  if (node_.IsMap()) return "a map";
  if (node_.IsSequence()) return "a list";
  if (is_plain_scalar()) return "'" + node_.Scalar() + "'";
  if (node_.Tag() == "!") return "quoted string \"" + node_.Scalar() + "\" (quoted values are strings)";
  return "'" + node_.Scalar() + "' tagged " + node_.Tag();
}

std::string YamlValue::scalar_text(const char* expected) const {
  if (!node_.IsScalar()) fail(std::string("expected ") + expected + ", found " + describe());
  return node_.Scalar();
}

std::string YamlValue::join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::int64_t YamlValue::as_int(std::int64_t min, std::int64_t max) const {
  const std::string s = scalar_text("an integer");
  std::int64_t v = 0;
  if (!is_plain_scalar() || !parse_whole_int(s, v)) {
    fail("expected an integer, found " + describe());
  }
  if (v < min || v > max) {
    if (min == 1 && v < 1) fail("must be positive (>= 1), found " + std::to_string(v));
    fail("must be in [" + std::to_string(min) + ", " + std::to_string(max) + "], found " +
         std::to_string(v));
  }
  return v;
}

double YamlValue::as_double(double min, double max, bool min_exclusive) const {
  const std::string s = scalar_text("a number");
  if (!is_plain_scalar()) fail("expected a number, found " + describe());
  if (is_non_finite_spelling(s)) fail("must be a finite number, found '" + s + "'");
  double v = 0;
  bool out_of_range = false;
  const std::size_t used = parse_double_prefix(s, v, out_of_range);
  if (used == 0 || used != s.size()) fail("expected a number, found " + describe());
  if (out_of_range || !std::isfinite(v)) fail("number out of range: '" + s + "'");
  const bool below = min_exclusive ? !(v > min) : !(v >= min);
  if (below || v > max) {
    fail("must be in " + std::string(min_exclusive ? "(" : "[") + format_number(min) + ", " +
         format_number(max) + "], found " + format_number(v));
  }
  return v;
}

bool YamlValue::as_bool() const {
  const std::string s = scalar_text("true or false");
  if (!is_plain_scalar() || (s != "true" && s != "false")) {
    fail("expected true or false, found " + describe());
  }
  return s == "true";
}

std::string YamlValue::as_string() const { return scalar_text("a string"); }

std::string YamlValue::as_name() const {
  std::string s = as_string();
  if (s.empty()) fail("must not be empty");
  return s;
}

YamlMap YamlValue::as_map(std::vector<std::string> allowed_keys) const {
  return YamlMap(*this, std::move(allowed_keys));
}

std::vector<YamlValue> YamlValue::as_sequence() const {
  if (!node_.IsSequence()) fail("expected a list, found " + describe());
  std::vector<YamlValue> out;
  std::size_t i = 0;
  for (auto it = node_.begin(); it != node_.end(); ++it, ++i) {
    out.emplace_back(*it, file_, key_path_ + "[" + std::to_string(i) + "]");
  }
  return out;
}

std::pair<double, std::string> YamlValue::quantity(const char* what,
                                                   const std::vector<std::string>& units,
                                                   const char* example) const {
  const std::string s = scalar_text(what);
  const std::string needs_unit = std::string("needs a unit, e.g. '") + example +
                                 "'; accepted units: " + join_names(units);
  std::string_view rest = s;
  while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
  std::string_view number = rest;
  double v = 0;
  bool out_of_range = false;
  std::size_t used = parse_double_prefix(rest, v, out_of_range);
  if (used == 0) {
    // ".nan ms": YAML's spellings of NaN and infinity are no number to from_chars, but are meant as one.
    const std::string_view word = rest.substr(0, rest.find_first_of(" \t"));
    if (is_non_finite_spelling(word)) fail("must be a finite number, found '" + s + "'");
    fail(std::string("expected ") + what + " like '" + example + "', found " + describe());
  }
  number = rest.substr(0, used);
  rest.remove_prefix(used);
  if (out_of_range) fail("number out of range: '" + std::string(number) + "'");
  if (!std::isfinite(v)) fail("must be a finite number, found '" + s + "'");
  while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
  while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\t')) rest.remove_suffix(1);
  if (rest.empty()) fail(needs_unit + "; found " + describe());
  if (std::find(units.begin(), units.end(), rest) == units.end()) {
    fail("unknown unit '" + std::string(rest) + "' in '" + s + "'; accepted units: " +
         join_names(units));
  }
  return {v, std::string(rest)};
}

std::int64_t YamlValue::as_size_bytes(std::int64_t min_bytes) const {
  const auto [v, unit] = quantity("a size", unit_names(kSizeUnits), "40 GiB");
  const double bytes = std::round(v * find_unit(kSizeUnits, unit)->factor);
  // 2^62 bytes is far beyond any device; the cap keeps later products well inside int64.
  if (bytes > 4.611686018427388e18) fail("size too large: '" + node_.Scalar() + "'");
  if (bytes < static_cast<double>(min_bytes)) {
    fail("must be at least " + std::to_string(min_bytes) + " B, found '" + node_.Scalar() + "'");
  }
  return static_cast<std::int64_t>(bytes);
}

TimeNs YamlValue::as_time(TimeNs max_ns) const {
  const auto [v, unit] = quantity("a time", unit_names(kTimeUnits), "3 us");
  const double ns = std::round(v * find_unit(kTimeUnits, unit)->factor);
  if (ns < 0) fail("must not be negative, found '" + node_.Scalar() + "'");
  if (ns > static_cast<double>(max_ns)) {
    fail("must be at most " + format_number(static_cast<double>(max_ns) / 1e3) + " us, found '" +
         node_.Scalar() + "'");
  }
  return static_cast<TimeNs>(ns);
}

double YamlValue::as_bandwidth(PlausibleRange plausible) const {
  const auto [v, unit] = quantity("a bandwidth", unit_names(kBandwidthUnits), "25 GB/s");
  const Unit* u = find_unit(kBandwidthUnits, unit);
  const double bps = v * u->factor;
  if (!(bps > 0)) fail("must be positive, found '" + node_.Scalar() + "'");
  if (in_range(bps, plausible)) return bps;
  const std::string range =
      "plausible range is " + format_rate(plausible.min) + " to " + format_rate(plausible.max);
  if (!u->opposite.empty()) {
    const Unit* other = find_unit(kBandwidthUnits, u->opposite);
    const double alt = v * other->factor;
    if (in_range(alt, plausible)) {
      fail("'" + node_.Scalar() + "' is implausible (" + range + "); did you mean " +
           std::string(other->name) + " instead of " + unit + "? (b = bits, B = bytes)");
    }
  }
  fail("'" + node_.Scalar() + "' = " + format_rate(bps) + " is outside the " + range);
}

double YamlValue::as_flop_rate(PlausibleRange plausible) const {
  const auto [v, unit] = quantity("a FLOP rate", unit_names(kFlopUnits), "312 TFLOP/s");
  const double flops = v * find_unit(kFlopUnits, unit)->factor;
  if (!(flops > 0)) fail("must be positive, found '" + node_.Scalar() + "'");
  if (!in_range(flops, plausible)) {
    fail("'" + node_.Scalar() + "' is outside the plausible range " + format_flops(plausible.min) +
         " to " + format_flops(plausible.max));
  }
  return flops;
}

YamlMap::YamlMap(const YamlValue& value, std::vector<std::string> allowed_keys)
    : value_(value), allowed_(std::move(allowed_keys)) {
  const YAML::Node& node = value_.node();
  if (!node.IsMap()) {
    value_.fail("expected a map with keys " + YamlValue::join_names(allowed_) + ", found " +
                (node.IsSequence() ? std::string("a list")
                 : node.IsScalar() ? "'" + node.Scalar() + "'"
                                   : std::string("no value (null)")));
  }
  for (auto it = node.begin(); it != node.end(); ++it) {
    const YAML::Node key = it->first;
    if (!key.IsScalar()) {
      YamlValue(key, value_.file(), value_.key_path()).fail("map keys must be plain names");
    }
    const std::string name = key.Scalar();
    const YamlValue key_value(key, value_.file(),
                              value_.key_path().empty() ? name : value_.key_path() + "." + name);
    for (const auto& [seen, seen_node] : entries_) {
      if (seen == name) {
        const YAML::Mark first = seen_node.Mark();
        key_value.fail("duplicate key '" + name + "' (first defined at line " +
                       std::to_string(first.line + 1) + ":" + std::to_string(first.column + 1) +
                       ")");
      }
    }
    if (std::find(allowed_.begin(), allowed_.end(), name) == allowed_.end()) {
      std::string suggestion;
      int best = std::numeric_limits<int>::max();
      for (const std::string& a : allowed_) {
        const int d = edit_distance(name, a);
        if (d < best) {
          best = d;
          suggestion = a;
        }
      }
      const int tolerance = std::max<int>(2, static_cast<int>(name.size()) / 3);
      std::string rule = "unknown key '" + name + "'";
      if (best <= tolerance) rule += " (did you mean '" + suggestion + "'?)";
      rule += "; allowed keys: " + YamlValue::join_names(allowed_);
      // The location is the key itself; the key path is the enclosing map.
      YamlValue(key, value_.file(), value_.key_path()).fail(rule);
    }
    // Keep the key node (for positions of duplicates) next to the value.
    entries_.emplace_back(name, key);
  }
}

bool YamlMap::has(std::string_view key) const {
  for (const auto& entry : entries_) {
    if (entry.first == key) return true;
  }
  return false;
}

YamlValue YamlMap::child(const YAML::Node& key_node, const YAML::Node& node,
                         std::string_view key) const {
  const std::string k(key);
  const std::string path = value_.key_path().empty() ? k : value_.key_path() + "." + k;
  if (node.IsNull()) return YamlValue(node, value_.file(), path, key_node.Mark());
  return YamlValue(node, value_.file(), path);
}

std::optional<YamlValue> YamlMap::get(std::string_view key) const {
  MOESIM_CHECK(std::find(allowed_.begin(), allowed_.end(), key) != allowed_.end(),
               "key '" + std::string(key) + "' read but not declared allowed");
  if (!has(key)) return std::nullopt;
  const YAML::Node& node = value_.node();
  for (auto it = node.begin(); it != node.end(); ++it) {
    if (it->first.Scalar() == key) {
      return child(it->first, it->second, key);
    }
  }
  return std::nullopt;
}

YamlValue YamlMap::require(std::string_view key) const {
  if (auto v = get(key)) return *v;
  value_.fail("missing required key '" + std::string(key) + "'");
}

YamlValue parse_yaml_text(const std::string& text, const std::string& file) {
  if (text.size() > kMaxYamlFileBytes) {
    throw InputError(SourceLocation{file, 0, 0},
                     "file larger than " + std::to_string(kMaxYamlFileBytes) + " bytes");
  }
  check_flow_nesting(text, file);
  YAML::Node doc;
  int documents = 0;
  YAML::Mark second_document = YAML::Mark::null_mark();
  try {
    doc = YAML::Load(text);
    // Count documents with a bounded loop: yaml-cpp's LoadAll never terminates on a stray
    // top-level ',' (its document loop makes no progress), so it is not used.
    std::istringstream in(text);
    YAML::Parser parser(in);
    DocumentCounter counter;
    while (documents < 2 && parser.HandleNextDocument(counter)) ++documents;
    second_document = counter.second_start;
  } catch (const YAML::Exception& e) {
    SourceLocation where{file, 0, 0};
    if (!e.mark.is_null()) where = SourceLocation{file, e.mark.line + 1, e.mark.column + 1};
    throw InputError(where, "YAML syntax error: " + e.msg);
  }
  if (documents == 0) throw InputError(SourceLocation{file, 0, 0}, "empty file: expected a map");
  if (documents > 1) {
    SourceLocation where{file, 0, 0};
    if (!second_document.is_null()) {
      where = SourceLocation{file, second_document.line + 1, second_document.column + 1};
    }
    throw InputError(where, "a file holds one YAML document; found a second one (or stray "
                            "tokens after the first)");
  }
  YamlValue root(doc, file, "");
  std::int64_t count = 0;
  check_tree(root, doc, 0, count);
  return root;
}

YamlValue parse_yaml_file(const std::string& path) {
  return parse_yaml_text(read_input_file(path, kMaxYamlFileBytes, "file"), path);
}

}  // namespace moesim
