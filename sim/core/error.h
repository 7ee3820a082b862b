// Error types shared by every module.
//
// InputError: the user's input is wrong (a config file, a flag, a graph file). It carries where
// (file:line:col, 1-based) and the rule that was broken; the CLI prints it and exits 2.
// InternalError: an invariant of moesim itself failed (a bug); the CLI exits 1. MOESIM_CHECK
// raises it with the source position, so a bug is reported with context instead of a crash.
#pragma once

#include <stdexcept>
#include <string>

namespace moesim {

struct SourceLocation {
  std::string file;  // empty when the input has no file (a command-line flag)
  int line = 0;      // 1-based; 0 when unknown
  int column = 0;    // 1-based; 0 when unknown

  std::string to_string() const;
};

class InputError : public std::runtime_error {
 public:
  InputError(SourceLocation where, std::string rule);
  explicit InputError(std::string rule) : InputError(SourceLocation{}, std::move(rule)) {}

  const SourceLocation& where() const { return where_; }
  const std::string& rule() const { return rule_; }

 private:
  SourceLocation where_;
  std::string rule_;
};

class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

[[noreturn]] void raise_internal_error(const char* file, int line, const std::string& message);

}  // namespace moesim

#define MOESIM_CHECK(cond, message)                                      \
  do {                                                                   \
    if (!(cond)) {                                                       \
      ::moesim::raise_internal_error(__FILE__, __LINE__,                 \
                                     std::string("check failed: " #cond \
                                                 ": ") +                 \
                                         (message));                     \
    }                                                                    \
  } while (false)
