// RoutingSpec: how the router spreads tokens over experts (`--routing`, a run file's `routing`, a
// sweep's routing axis).
//
//   uniform          every expert receives exactly its capacity share: the balanced, padded
//                    [E, C, M] layout of the papers; one representative rank is simulated.
//   zipf:<s>         expert popularity follows Zipf's law with exponent s >= 0 (s = 0 is an even
//                    spread of k*B choices, which, unlike `uniform`, sends only the routed rows).
//   matrix:<file>    a CSV of tokens routed per (source rank, expert); see sim/routing/routing.h.
//
// Every value other than `uniform` turns into per-pair token counts (sim/routing) and the graph
// simulates every rank.
#pragma once

#include <string>
#include <string_view>

#include "sim/core/error.h"

namespace moesim {

enum class RoutingKind { kUniform, kZipf, kMatrix };

struct RoutingSpec {
  RoutingKind kind = RoutingKind::kUniform;
  double zipf_exponent = 0.0;  // s, for kZipf
  std::string matrix_path;     // for kMatrix, as resolved (absolute or relative to the cwd)

  bool balanced() const { return kind == RoutingKind::kUniform; }
  // The spelling parse_routing_spec accepts: "uniform", "zipf:1.2", "matrix:<path>".
  std::string to_string() const;
};

// Parses `text`; a matrix path is taken relative to `base_dir` unless absolute (base_dir empty:
// the current directory). Throws InputError at `where` naming the accepted forms. The matrix file
// itself is read when the routing is built (it needs the layer's sizes to be checked).
RoutingSpec parse_routing_spec(std::string_view text, const SourceLocation& where, const std::string& base_dir = "");

}  // namespace moesim
