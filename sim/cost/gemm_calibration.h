// GEMM time from a calibration table (GemmTimeTable, measured by `moesim calibrate`).
//
// design.md section 4: efficiency piecewise-linear in the log of the dimension. The table's times
// become rates r = 2 m n k / t at its points; a GEMM (batch, m, n, k) reads the rate at
// (batch * m, n, k) by trilinear interpolation of log r in (log m, log n, log k), and costs
// 2 batch m n k / r. That is exact at measured points, and between them it follows a GEMM's
// efficiency, which grows smoothly with each dimension until the tiles fill the GPU.
//
// Why batch * m: a strided-batched GEMM launches batch x tiles(m) x tiles(n) blocks, as one GEMM
// with batch times the rows does, so it fills the GPU alike (the expert GEMMs of an MoE layer are
// batched over local experts). The tables are measured with batch 1.
//
// Outside the measured range: below an axis's smallest point a GEMM costs as if it had that
// dimension (the smallest shapes are bound by the launch gap, which does not shrink); above its
// largest point the rate is held at the edge, so the GEMM keeps the efficiency of the nearest
// measured shape, never an extrapolated trend. That is not silent: range_warnings() names every
// dtype whose GEMMs leave the range, and the CLI prints it.
#pragma once

#include <string>
#include <vector>

#include "sim/graph/task.h"
#include "sim/graph/task_graph.h"
#include "sim/spec/hardware_spec.h"

namespace moesim {

// Batched tables (BatchedGemmTable, measured on strided-batched GEMMs): a GEMM with batch > 1 whose
// dtype has one reads its rate at (batch, m, n, k) by quadrilinear interpolation of log r in
// (log batch, log m, log n, log k), r = 2 batch m n k / t, and costs 2 batch m n k / r. Folding
// the batch into the rows overrates many small GEMMs: 64 experts x 64 rows do not run as one
// GEMM of 4,096 rows (on an H200, 179 us measured against 69 us so priced). Outside the range the
// same convention holds per axis (batch included): raised to the smallest point, held at the
// largest point's rate, and warned about.
//
// Duration in ns of `work` (its dtype's table); 0 for a GEMM without FLOPs.
double calibrated_gemm_ns(const GemmTimeTable& table, const GemmWork& work);

double calibrated_gemm_ns(const BatchedGemmTable& table, const GemmWork& work);

// Whether (batch * m, n, k) lies within the table's axes.
bool in_measured_range(const GemmTimeTable& table, const GemmWork& work);
// Whether (batch, m, n, k) lies within the batched table's axes.
bool in_measured_range(const BatchedGemmTable& table, const GemmWork& work);

// The batched table that prices `work` (batch > 1): its layout's and dtype's when the GPU's
// calibration has one, else its dtype's nn table (files measured before layouts hold nn tables
// alone); otherwise null (the single-GEMM table or the shape model). GEMMs with batch 1 read the
// single-GEMM table, which is measured nn only, whatever their layout.
const BatchedGemmTable* batched_table_for(const GpuSpec& gpu, const GemmWork& work);

// One line per calibrated dtype whose GEMMs in `graph` fall outside its table: how many, the
// first one's id and shape, and the measured range. Empty without a calibration.
std::vector<std::string> calibration_range_warnings(const TaskGraph& graph, const GpuSpec& gpu);

}  // namespace moesim
