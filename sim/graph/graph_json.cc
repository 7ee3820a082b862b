#include "sim/graph/graph_json.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "sim/core/error.h"
#include "sim/core/input_file.h"
#include "sim/graph/graph_algorithms.h"
#include "sim/graph/op_disagreement.h"

namespace moesim {
namespace {

using OrderedJson = nlohmann::ordered_json;
using Json = nlohmann::json;

constexpr int kMaxJsonDepth = 32;

constexpr std::string_view kCommonTaskKeys[] = {"id", "layer", "pass", "stage", "chunk",
                                                 "rank", "stream", "kind"};

OrderedJson work_json(const Work& work) {
  struct Visitor {
    OrderedJson operator()(const GemmWork& w) const {
      OrderedJson j = OrderedJson::object();
      j["batch"] = w.batch;
      j["m"] = w.m;
      j["n"] = w.n;
      j["k"] = w.k;
      j["dtype"] = std::string(to_string(w.dtype));
      j["element_bytes"] = w.element_bytes;
      j["layout"] = std::string(to_string(w.layout));
      j["accumulate"] = w.accumulate;
      return j;
    }
    OrderedJson operator()(const ElementwiseWork& w) const {
      OrderedJson j = OrderedJson::object();
      j["bytes_read"] = w.bytes_read;
      j["bytes_written"] = w.bytes_written;
      j["flops"] = w.flops;
      return j;
    }
    OrderedJson operator()(const CollectiveWork& w) const {
      OrderedJson j = OrderedJson::object();  // its CollectiveOp is the task's op's
      j["group"] = w.group;
      j["bytes_per_peer"] = w.bytes_per_peer;
      return j;
    }
    OrderedJson operator()(const CopyWork& w) const {
      OrderedJson j = OrderedJson::object();
      j["bytes"] = w.bytes;
      j["direction"] = std::string(to_string(w.direction));
      return j;
    }
    OrderedJson operator()(const HostWork& w) const {
      OrderedJson j = OrderedJson::object();
      j["duration_ns"] = w.duration_ns;
      return j;
    }
  };
  return std::visit(Visitor{}, work);
}

// Reads fields of one JSON object, naming `context` (e.g. "task #3 'L0.fwd.gate'") in errors.
class Reader {
 public:
  Reader(const Json& obj, std::string context, const std::string& source)
      : obj_(obj), context_(std::move(context)), source_(source) {
    if (!obj_.is_object()) fail("must be a JSON object, got " + std::string(obj_.type_name()));
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(SourceLocation{source_, 0, 0}, context_ + ": " + what);
  }

  const Json& field(std::string_view key) const {
    auto it = obj_.find(key);
    if (it == obj_.end()) fail("missing field '" + std::string(key) + "'");
    return *it;
  }

  std::int64_t integer(std::string_view key, std::int64_t min,
                       std::int64_t max = std::numeric_limits<std::int64_t>::max()) const {
    const Json& v = field(key);
    if (!v.is_number_integer())
      fail("field '" + std::string(key) + "' must be an integer, got " + v.dump());
    std::int64_t x = 0;
    if (v.is_number_unsigned()) {
      const auto u = v.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        fail("field '" + std::string(key) + "' = " + v.dump() + " does not fit in 64 bits");
      x = static_cast<std::int64_t>(u);
    } else {
      x = v.get<std::int64_t>();
    }
    if (x < min || x > max)
      fail("field '" + std::string(key) + "' = " + std::to_string(x) + " must be in [" +
           std::to_string(min) + ", " + std::to_string(max) + "]");
    return x;
  }

  int small_integer(std::string_view key, int min) const {
    return static_cast<int>(integer(key, min, std::numeric_limits<int>::max()));
  }

  std::string string(std::string_view key) const {
    const Json& v = field(key);
    if (!v.is_string()) fail("field '" + std::string(key) + "' must be a string, got " + v.dump());
    return v.get<std::string>();
  }

  template <typename E>
  E name(std::string_view key, std::optional<E> (*parse)(std::string_view),
         const std::vector<std::string>& valid) const {
    const std::string s = string(key);
    if (auto e = parse(s)) return *e;
    std::string list;
    for (const auto& v : valid) list += (list.empty() ? "" : ", ") + v;
    fail("unknown " + std::string(key) + " '" + s + "' (valid: " + list + ")");
  }

  bool has(std::string_view key) const { return obj_.contains(key); }

  bool boolean(std::string_view key) const {
    const Json& v = field(key);
    if (!v.is_boolean()) fail("field '" + std::string(key) + "' must be true or false, got " + v.dump());
    return v.get<bool>();
  }

  // An optional list of buffer ids (absent = empty).
  std::vector<BufferId> buffer_ids(std::string_view key) const {
    std::vector<BufferId> out;
    if (!has(key)) return out;
    const Json& v = field(key);
    if (!v.is_array()) fail("field '" + std::string(key) + "' must be an array of buffer ids");
    for (const Json& e : v) {
      if (!e.is_number_integer() || e.get<std::int64_t>() < 0 ||
          e.get<std::int64_t>() > std::numeric_limits<BufferId>::max())
        fail("field '" + std::string(key) + "' holds " + e.dump() + ", not a buffer id");
      out.push_back(static_cast<BufferId>(e.get<std::int64_t>()));
    }
    return out;
  }

  // [buffer, offset, bytes, dtype] per operand (schema 3); the graph checks the range.
  std::vector<Operand> operands(std::string_view key) const {
    std::vector<Operand> out;
    if (!has(key)) return out;
    const Json& v = field(key);
    const std::string what = "field '" + std::string(key) + "'";
    if (!v.is_array()) fail(what + " must be an array of [buffer, offset, bytes, dtype]");
    for (const Json& e : v) {
      const auto id = [&](std::size_t i, std::int64_t most) {
        if (!e[i].is_number_integer() || e[i].get<std::int64_t>() < 0 || e[i].get<std::int64_t>() > most)
          fail(what + " holds " + e.dump() + ": its element " + std::to_string(i) + " must be an integer in [0, " +
               std::to_string(most) + "]");
        return e[i].get<std::int64_t>();
      };
      if (!e.is_array() || e.size() != 4 || !e[3].is_string())
        fail(what + " holds " + e.dump() + ", not [buffer, offset, bytes, dtype]");
      const std::optional<DType> dtype = parse_dtype(e[3].get<std::string>());
      if (!dtype) {
        std::string valid;
        for (const std::string& d : dtype_names()) valid += (valid.empty() ? "" : ", ") + d;
        fail(what + " holds " + e.dump() + ": unknown dtype (valid: " + valid + ")");
      }
      constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
      out.push_back(Operand{static_cast<BufferId>(id(0, std::numeric_limits<BufferId>::max())), id(1, kMax),
                            id(2, kMax), *dtype});
    }
    return out;
  }

  void allow_only(const std::vector<std::string_view>& allowed) const {
    for (auto it = obj_.begin(); it != obj_.end(); ++it) {
      if (std::find(allowed.begin(), allowed.end(), it.key()) != allowed.end()) continue;
      std::string list;
      for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      fail("unknown field '" + it.key() + "' (allowed: " + list + ")");
    }
  }

 private:
  const Json& obj_;
  std::string context_;
  const std::string& source_;
};

std::vector<std::string> names_of_kinds() {
  return {"gemm", "elementwise", "collective", "copy", "host"};
}
std::vector<std::string> names_of_streams() {
  std::vector<std::string> out;
  for (int s = 0; s < kNumStreamClasses; ++s)
    out.emplace_back(to_string(static_cast<StreamClass>(s)));
  return out;
}
std::optional<TaskKind> parse_task_kind(std::string_view s) {
  for (auto k : {TaskKind::kGemm, TaskKind::kElementwise, TaskKind::kCollective, TaskKind::kCopy,
                 TaskKind::kHost})
    if (to_string(k) == s) return k;
  return std::nullopt;
}

std::vector<int> int_list(const Json& v, const std::string& what, const Reader& at) {
  if (!v.is_array()) at.fail(what + " must be an array of integers, got " + v.dump());
  std::vector<int> out;
  for (const Json& x : v) {
    if (!x.is_number_integer() || x.get<std::int64_t>() < std::numeric_limits<int>::min() ||
        x.get<std::int64_t>() > std::numeric_limits<int>::max())
      at.fail(what + " must hold integers, got " + x.dump());
    out.push_back(x.get<int>());
  }
  return out;
}

using TrafficList = std::vector<std::shared_ptr<const TrafficMatrix>>;

// A collective's work. Schema 1 names its CollectiveOp in "op" ("all-to-all"); from schema 2 that
// key is the task's op (all_to_all, all_to_allv, send_recv, ...), which gives the CollectiveOp.
CollectiveWork read_collective(const Reader& r, const TrafficList& traffic, std::optional<Op> op) {
  CollectiveWork w;
  if (!op) {
    w.op = r.name<CollectiveOp>("op", &parse_collective_op,
                                {"all-to-all", "all-reduce", "all-gather", "reduce-scatter"});
  } else if (*op == Op::kAllReduce || *op == Op::kAllGather || *op == Op::kReduceScatter) {
    w.op = *op == Op::kAllReduce   ? CollectiveOp::kAllReduce
           : *op == Op::kAllGather ? CollectiveOp::kAllGather
                                   : CollectiveOp::kReduceScatter;
  } else if (kind_of(*op) != TaskKind::kCollective) {
    r.fail(op_disagreement(*op, CollectiveWork{}));
  }
  w.group = static_cast<GroupId>(r.integer("group", 0, std::numeric_limits<GroupId>::max()));
  w.bytes_per_peer = r.integer("bytes_per_peer", 0);
  if (r.has("traffic")) {
    const auto m = r.integer("traffic", 0, static_cast<std::int64_t>(traffic.size()) - 1);
    w.traffic = traffic[static_cast<std::size_t>(m)];
    w.transposed = r.boolean("transposed");
    if (w.op != CollectiveOp::kAllToAll) r.fail("only an all-to-all can carry a traffic matrix");
  }
  return w;
}

Task read_task(const Json& j, std::size_t index, const std::string& source, const TrafficList& traffic,
               int version) {
  const std::string where = "task #" + std::to_string(index);
  Reader pre(j, where, source);
  const std::string id = pre.string("id");
  const Reader r(j, where + " '" + id + "'", source);
  Task t;
  t.id = id;
  t.stream = r.name<StreamClass>("stream", &parse_stream_class, names_of_streams());
  t.layer = r.small_integer("layer", 0);
  t.pass = r.name<Pass>("pass", &parse_pass, {"fwd", "bwd"});
  t.stage = r.string("stage");
  t.chunk = r.small_integer("chunk", -1);
  const TaskKind kind = r.name<TaskKind>("kind", &parse_task_kind, names_of_kinds());
  // Schema 1 had no op: add_task gives the task op_for(work) (graph_json.h).
  if (version >= 2) t.op = r.name<Op>("op", &parse_op, op_names());
  std::vector<std::string_view> allowed(std::begin(kCommonTaskKeys), std::end(kCommonTaskKeys));
  if (version >= 2 || kind == TaskKind::kCollective) allowed.push_back("op");
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  switch (kind) {
    case TaskKind::kGemm: {
      GemmWork w;
      w.batch = r.integer("batch", 1);
      w.m = r.integer("m", 1);
      w.n = r.integer("n", 1);
      w.k = r.integer("k", 1);
      w.dtype = r.name<DType>("dtype", &parse_dtype, dtype_names());
      w.element_bytes = static_cast<int>(r.integer("element_bytes", 1, 16));
      // Graphs written before GEMMs had a layout read as nn (as every GEMM was priced then).
      if (r.has("layout")) w.layout = r.name<GemmLayout>("layout", &parse_gemm_layout, gemm_layout_names());
      if (r.has("accumulate")) w.accumulate = r.boolean("accumulate");
      t.work = w;
      allowed.insert(allowed.end(), {"batch", "m", "n", "k", "dtype", "element_bytes", "layout", "accumulate"});
      break;
    }
    case TaskKind::kElementwise:
      t.work = ElementwiseWork{r.integer("bytes_read", 0), r.integer("bytes_written", 0),
                               r.integer("flops", 0)};
      allowed.insert(allowed.end(), {"bytes_read", "bytes_written", "flops"});
      break;
    case TaskKind::kCollective:
      t.work = read_collective(r, traffic, t.op);
      allowed.insert(allowed.end(), {"group", "bytes_per_peer", "traffic", "transposed"});
      break;
    case TaskKind::kCopy:
      t.work = CopyWork{r.integer("bytes", 0),
                        r.name<CopyDirection>("direction", &parse_copy_direction, {"d2h", "h2d", "d2d"})};
      allowed.insert(allowed.end(), {"bytes", "direction"});
      break;
    case TaskKind::kHost:
      t.work = HostWork{r.integer("duration_ns", 0, kMax)};
      allowed.insert(allowed.end(), {"duration_ns"});
      break;
  }
  if (t.op && !op_agrees(*t.op, t.work)) r.fail(op_disagreement(*t.op, t.work));
  t.allocates = r.buffer_ids("allocates");
  t.frees = r.buffer_ids("frees");
  allowed.insert(allowed.end(), {"allocates", "frees"});
  if (version >= 3) {
    t.reads = r.operands("reads");
    t.writes = r.operands("writes");
    allowed.insert(allowed.end(), {"reads", "writes"});
  } else if (r.has("reads") || r.has("writes")) {
    r.fail("operand bindings ('reads', 'writes') need schema_version 3");
  }
  if (kind == TaskKind::kCollective) {
    t.rank = static_cast<int>(r.integer("rank", -1, -1));
  } else {
    t.rank = r.small_integer("rank", 0);
  }
  r.allow_only(allowed);
  return t;
}

std::shared_ptr<const TrafficMatrix> read_traffic_matrix(const Json& j, std::size_t m, const std::string& source) {
  const Reader r(j, "traffic matrix #" + std::to_string(m), source);
  r.allow_only({"size", "row_bytes", "rows"});
  auto matrix = std::make_shared<TrafficMatrix>();
  matrix->size = static_cast<int>(r.integer("size", 1, 1 << 20));
  matrix->row_bytes = r.integer("row_bytes", 0);
  const Json& rows = r.field("rows");
  const auto cells = static_cast<std::size_t>(matrix->size) * static_cast<std::size_t>(matrix->size);
  if (!rows.is_array() || rows.size() != cells)
    r.fail("rows must be an array of size * size = " + std::to_string(cells) + " row counts");
  std::vector<std::int64_t> counts;
  counts.reserve(cells);
  for (const Json& x : rows) {
    if (!x.is_number_integer() || x.get<std::int64_t>() < 0)
      r.fail("rows must hold non-negative integers, got " + x.dump());
    counts.push_back(x.get<std::int64_t>());
  }
  matrix->rows = std::make_shared<const std::vector<std::int64_t>>(std::move(counts));
  return matrix;
}

// The optional "traffic" list; tasks refer to its matrices by index.
TrafficList read_traffic(const Reader& top, const std::string& source) {
  TrafficList traffic;
  if (!top.has("traffic")) return traffic;
  const Json& list = top.field("traffic");
  if (!list.is_array()) top.fail("traffic must be an array of matrices");
  for (std::size_t m = 0; m < list.size(); ++m) traffic.push_back(read_traffic_matrix(list[m], m, source));
  return traffic;
}

Buffer read_buffer(const Json& j, std::size_t b, const std::string& source) {
  const Reader r(j, "buffer #" + std::to_string(b), source);
  r.allow_only({"name", "rank", "bytes", "category", "resident"});
  Buffer buf;
  buf.name = r.string("name");
  buf.rank = r.small_integer("rank", 0);
  buf.bytes = r.integer("bytes", 0);
  buf.category = r.name<MemoryCategory>("category", &parse_memory_category,
                                        {"model_states", "activations", "temporary", "host_pinned"});
  buf.resident = r.boolean("resident");
  return buf;
}

void add_buffers(const Reader& top, const std::string& source, TaskGraph& graph) {
  if (!top.has("buffers")) return;
  const Json& buffers = top.field("buffers");
  if (!buffers.is_array()) top.fail("buffers must be an array");
  for (std::size_t b = 0; b < buffers.size(); ++b) graph.add_buffer(read_buffer(buffers[b], b, source));
}

void add_groups(const Json& groups, const Reader& top, TaskGraph& graph) {
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const std::string what = "group #" + std::to_string(g);
    const GroupId id = graph.add_group(int_list(groups[g], what, top));
    if (id != g) top.fail(what + " repeats group #" + std::to_string(id));
  }
}

// A collective task #i names a group the graph has, and its traffic matrix (if any) spans it.
void check_collective_group(const TaskGraph& graph, const Task& t, std::size_t i, const SourceLocation& at) {
  const auto* c = std::get_if<CollectiveWork>(&t.work);
  if (c == nullptr) return;
  if (c->group >= graph.num_groups())
    throw InputError(at, "task #" + std::to_string(i) + " '" + t.id + "': unknown group " +
                             std::to_string(c->group) + " (the file defines " +
                             std::to_string(graph.num_groups()) + ")");
  if (c->traffic && static_cast<std::size_t>(c->traffic->size) != graph.group(c->group).size())
    throw InputError(at, "task #" + std::to_string(i) + " '" + t.id + "': its traffic matrix has " +
                             std::to_string(c->traffic->size) + " ranks but group " + std::to_string(c->group) +
                             " has " + std::to_string(graph.group(c->group).size()));
}

// Edge #e: [from, to, "data" | "reuse"] between tasks the graph has.
void add_edge(const Json& edge, std::size_t e, const Reader& top, TaskGraph& graph) {
  const std::string what = "edge #" + std::to_string(e);
  if (!edge.is_array() || edge.size() != 3 || !edge[0].is_number_integer() ||
      !edge[1].is_number_integer() || !edge[2].is_string())
    top.fail(what + " must be [from, to, \"data\" | \"reuse\"], got " + edge.dump());
  const auto n = static_cast<std::int64_t>(graph.num_tasks());
  const auto from = edge[0].get<std::int64_t>();
  const auto to = edge[1].get<std::int64_t>();
  for (std::int64_t end : {from, to}) {
    if (end < 0 || end >= n)
      top.fail(what + " " + edge.dump() + " refers to task index " + std::to_string(end) +
               ", but the graph has tasks 0.." + std::to_string(n - 1));
  }
  const auto kind = parse_dep_kind(edge[2].get<std::string>());
  if (!kind || *kind == DepKind::kStream)
    top.fail(what + " " + edge.dump() + ": kind must be \"data\" or \"reuse\" (stream edges " +
             "follow from the task order)");
  graph.add_dependency(static_cast<TaskIndex>(from), static_cast<TaskIndex>(to), *kind);
}

// Builds the graph from a parsed document; import_graph_json adds the file name to its errors.
TaskGraph build_graph(const Json& root, const Reader& top, const std::string& source_name, int version) {
  const SourceLocation at{source_name, 0, 0};
  const int world = top.small_integer("world_size", 1);
  const std::vector<int> ranks = int_list(top.field("simulated_ranks"), "simulated_ranks", top);
  const Json& groups = top.field("groups");
  if (!groups.is_array()) top.fail("groups must be an array of rank lists");
  const Json& tasks = top.field("tasks");
  if (!tasks.is_array()) top.fail("tasks must be an array");
  const Json& edges = root.at("edges");

  TaskGraph graph(world, ranks);
  const TrafficList traffic = read_traffic(top, source_name);
  add_buffers(top, source_name, graph);
  add_groups(groups, top, graph);
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    Task t = read_task(tasks[i], i, source_name, traffic, version);
    check_collective_group(graph, t, i, at);
    graph.add_task(std::move(t));
  }
  for (std::size_t e = 0; e < edges.size(); ++e) add_edge(edges[e], e, top, graph);
  check_acyclic(graph);
  return graph;
}

}  // namespace

std::string export_graph_json(const TaskGraph& graph) {
  // The file gives no stream edges: importing re-derives them from the index order, which a
  // released stream order (TaskGraph::hold_stream_order) is not.
  if (graph.stream_order_released())
    throw InputError("graph JSON lists each stream's tasks in index order; this graph runs some tasks in another "
                     "order (interleaved passes: DualPipe's or combined 1F1B's overlapped pairs), which the file "
                     "cannot keep");
  OrderedJson root = OrderedJson::object();
  root["schema_version"] = kGraphJsonSchemaVersion;
  root["world_size"] = graph.world_size();
  root["simulated_ranks"] = graph.simulated_ranks();
  OrderedJson groups = OrderedJson::array();
  for (std::size_t g = 0; g < graph.num_groups(); ++g)
    groups.push_back(graph.group(static_cast<GroupId>(g)));
  root["groups"] = std::move(groups);
  if (graph.num_buffers() > 0) {
    OrderedJson buffers = OrderedJson::array();
    for (BufferId b = 0; b < graph.num_buffers(); ++b) {
      const Buffer& buf = graph.buffer(b);
      buffers.push_back({{"name", buf.name},
                         {"rank", buf.rank},
                         {"bytes", buf.bytes},
                         {"category", std::string(to_string(buf.category))},
                         {"resident", buf.resident}});
    }
    root["buffers"] = std::move(buffers);
  }
  // Traffic matrices, numbered by first use; tasks refer to them by that number.
  std::map<const TrafficMatrix*, std::size_t> traffic_index;
  OrderedJson traffic = OrderedJson::array();
  for (TaskIndex i = 0; i < graph.num_tasks(); ++i) {
    const auto* c = std::get_if<CollectiveWork>(&graph.task(i).work);
    if (c == nullptr || !c->traffic || traffic_index.count(c->traffic.get()) != 0) continue;
    traffic_index.emplace(c->traffic.get(), traffic_index.size());
    traffic.push_back({{"size", c->traffic->size}, {"row_bytes", c->traffic->row_bytes}, {"rows", *c->traffic->rows}});
  }
  if (!traffic.empty()) root["traffic"] = std::move(traffic);
  OrderedJson tasks = OrderedJson::array();
  for (TaskIndex i = 0; i < graph.num_tasks(); ++i) {
    const Task& t = graph.task(i);
    OrderedJson j = OrderedJson::object();
    j["id"] = t.id;
    j["rank"] = t.rank;
    j["stream"] = std::string(to_string(t.stream));
    j["kind"] = std::string(to_string(t.kind()));
    j["op"] = std::string(to_string(*t.op));
    j["layer"] = t.layer;
    j["pass"] = std::string(to_string(t.pass));
    j["stage"] = t.stage;
    j["chunk"] = t.chunk;
    const OrderedJson work = work_json(t.work);
    for (const auto& [key, value] : work.items()) j[key] = value;
    if (const auto* c = std::get_if<CollectiveWork>(&t.work); c && c->traffic) {
      j["traffic"] = traffic_index.at(c->traffic.get());
      j["transposed"] = c->transposed;
    }
    if (!t.allocates.empty()) j["allocates"] = t.allocates;
    if (!t.frees.empty()) j["frees"] = t.frees;
    for (const auto& [key, operands] : {std::pair{"reads", &t.reads}, std::pair{"writes", &t.writes}}) {
      if (operands->empty()) continue;
      OrderedJson list = OrderedJson::array();
      for (const Operand& o : *operands)
        list.push_back(OrderedJson::array({o.buffer, o.offset, o.bytes, std::string(to_string(o.dtype))}));
      j[key] = std::move(list);
    }
    tasks.push_back(std::move(j));
  }
  root["tasks"] = std::move(tasks);
  OrderedJson edges = OrderedJson::array();
  for (const auto& [from, to, kind] : graph.edges()) {
    if (kind == DepKind::kStream) continue;
    edges.push_back(OrderedJson::array({from, to, std::string(to_string(kind))}));
  }
  root["edges"] = std::move(edges);
  return root.dump(2) + "\n";
}

TaskGraph import_graph_json(std::string_view text, const std::string& source_name) {
  const SourceLocation at{source_name, 0, 0};
  Json root;
  // Nesting deeper than the schema's (4 levels) is refused while parsing: the library's dump(), which
  // the error messages use, recurses once per level and overflowed the stack on [[[[...]]]] in an edge.
  const auto depth_limit = [&at](int depth, Json::parse_event_t event, Json&) {
    if (depth >= kMaxJsonDepth &&
        (event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start))
      throw InputError(at, "nesting deeper than " + std::to_string(kMaxJsonDepth) +
                               " levels of [ and {; a task graph needs 4");
    return true;
  };
  try {
    root = Json::parse(text.begin(), text.end(), depth_limit);
  } catch (const nlohmann::json::exception& e) {
    // A syntax error (parse_error), and also a number beyond a double such as 1e400 (out_of_range).
    throw InputError(at, std::string("invalid JSON: ") + e.what());
  }
  const Reader top(root, "task graph", source_name);
  top.allow_only({"schema_version", "world_size", "simulated_ranks", "groups", "traffic", "buffers", "tasks", "edges"});
  const Json& version = top.field("schema_version");
  if (!version.is_number_integer() || version.get<std::int64_t>() < 1 ||
      version.get<std::int64_t>() > kGraphJsonSchemaVersion)
    top.fail("unsupported schema_version " + version.dump() + " (supported: 1 to " +
             std::to_string(kGraphJsonSchemaVersion) + ")");
  const Json& edges = top.field("edges");
  if (!edges.is_array()) top.fail("edges must be an array");
  try {
    return build_graph(root, top, source_name, version.get<int>());
  } catch (const InputError& e) {
    if (!e.where().file.empty()) throw;
    throw InputError(at, e.rule());
  }
}

TaskGraph load_graph_json(const std::string& path) {
  return import_graph_json(read_input_file(path, kMaxGraphJsonBytes, "graph file"), path);
}

}  // namespace moesim
