// JSON form of the task graph, to inspect a built graph or to feed a hand-written one to the engine.
//
// Schema (schema_version 3):
//   {"schema_version": 3, "world_size": N, "simulated_ranks": [...], "groups": [[ranks], ...],
//    "tasks": [{"id", "rank", "stream", "kind", "op", "layer", "pass", "stage", "chunk", <work fields>}],
//    "edges": [[from, to, "data" | "reuse"], ...]}
// Work fields per kind: gemm {batch, m, n, k, dtype, element_bytes, layout (nn, nt or tn),
// accumulate (C read and added to); both optional, nn and false when absent, as files written
// before they existed mean}; elementwise {bytes_read,
// bytes_written, flops}; collective {op, group, bytes_per_peer, and for an all-to-allv traffic (an
// index into the top-level "traffic" list of {size, row_bytes, rows: size*size row counts}) and
// transposed}; copy {bytes, direction};
// host {duration_ns}. Every task may list "allocates" and "frees" (buffer ids) and, from schema 3,
// "reads" and "writes": its operand bindings (task.h), each [buffer id, offset, bytes, dtype].
// "op" is the task's op (op.h: gemm, batched_gemm, top_k, encode, decode,
// activation, elementwise, all_to_all, all_to_allv, send_recv, all_reduce, all_gather,
// reduce_scatter, copy_d2h, copy_h2d, copy_d2d, host) and must agree with the work (op_agrees).
// Schema 2, the same without operand bindings, is still read (its tasks bind none). Schema 1, the
// same without "op" either, is still read: each task gets the op its work gives, a
// memory-bound kernel `elementwise` (a migration, not an error: the cost of a task does not depend
// on its op, so a simulation of the file is unchanged). Tasks are listed in index (= issue) order and edges refer to those indices;
// stream edges are not listed because importing re-derives them from that order. Collectives
// carry rank -1. Export uses 2-space indentation; export(import(export(g))) == export(g).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sim/graph/task_graph.h"

namespace moesim {

inline constexpr int kGraphJsonSchemaVersion = 3;  // 2: tasks carry their "op"; 3: their operands

// Throws InputError for a graph whose stream order was released in another order than its
// indices (TaskGraph::stream_order_released): the file could not keep it.
std::string export_graph_json(const TaskGraph& graph);

// Parses and validates a graph; every problem is an InputError whose location is source_name and
// whose rule names the task (id or index) and the field: bad JSON, a missing or mistyped field, an
// unknown key, kind, stream, dtype, op or direction, an op that disagrees with the task's work, an edge to a missing task, an unknown group, a
// task on a rank the graph does not simulate, an operand that is not [buffer, offset, bytes,
// dtype] or lies outside its buffer or on another rank (or appears before schema 3), and a
// dependency cycle (with its whole path).
TaskGraph import_graph_json(std::string_view text, const std::string& source_name);

// The graph files of the largest clusters with every rank simulated are hundreds of megabytes.
inline constexpr std::uintmax_t kMaxGraphJsonBytes = std::uintmax_t{1} << 30;

// import_graph_json of a file; also an InputError when the file is missing, is not a regular file
// or is larger than kMaxGraphJsonBytes.
TaskGraph load_graph_json(const std::string& path);

}  // namespace moesim
