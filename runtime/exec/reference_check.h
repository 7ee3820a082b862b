// Checks an executor's results against the CPU reference (runtime/reference), tensor by tensor,
// with the tolerance table of docs/runtime.md (reference::tolerance_for the GEMM math dtype).
//
// The reference is computed from the values the devices actually hold (downloaded after
// rounding to the storage type), so only the arithmetic is compared; the routing must agree
// exactly (same experts, same slots), which holds when the reference's top-k margin is far above
// the rounding of the fp32 logits.
#pragma once

#include <string>
#include <vector>

#include "runtime/exec/layer_executor.h"

namespace moesim::runtime {

struct CheckEntry {
  std::string tensor;  // "y@0", "dx@1", "dgate", "dw1[e3]", "routing@0", ...
  double relative = 0;  // max |got - want| / max |want|; for routing the count of mismatches
  double tolerance = 0;
  bool ok() const { return relative <= tolerance; }
};

struct CheckReport {
  std::vector<CheckEntry> entries;
  double topk_margin = 0;  // the reference's smallest gap p_(k) - p_(k+1) over every rank's tokens
  bool ok() const;
  double worst_ratio() const;  // max relative / tolerance
};

// Every rank of the layer must be local to `executor`. Throws InputError otherwise.
CheckReport check_against_reference(const LayerExecutor& executor, const ModelSpec& model, const LayerDims& dims,
                                    bool normalize_scores = false);
// The same from values already downloaded: got[r] is rank r's (every rank of the layer; a run
// with one process per rank gathers them at rank 0).
CheckReport check_against_reference(const std::vector<RankValues>& got, const ModelSpec& model, const LayerDims& dims,
                                    bool normalize_scores = false);

}  // namespace moesim::runtime
