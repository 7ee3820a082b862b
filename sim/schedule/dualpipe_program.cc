#include "sim/schedule/dualpipe_program.h"

#include <algorithm>
#include <deque>

namespace moesim {
namespace {

// One stage's program, written in DualPipe's own terms. The reference code names the two chunks
// by "phase": on the first half of the stages phase 0 is the forward direction (our chunk 0) and
// phase 1 the reverse one; on the second half the two swap, which makes stage p - 1 - s run the
// mirror image of stage s. Microbatches are counted per direction, in order, as the reference's
// current_f_chunk_id / current_b_chunk_id do; direction d's k-th microbatch is d m/2 + k.
// DualPipeV's phases are its chunks, never swapped, and every microbatch passes both: phase d's
// k-th microbatch is microbatch k.
class DualPipeWriter {
 public:
  DualPipeWriter(int per_direction, bool mirrored, bool v_shape)
      : per_direction_(per_direction), mirrored_(mirrored), v_shape_(v_shape) {}

  void forward(int phase) {
    const int chunk = direction(phase);
    out_.push_back(PipeAction{PipeWork::kForward, next_microbatch(forwards_, chunk), chunk});
  }
  // A backward with the split into B and W (zero bubble) or whole; a split one's W waits in a
  // first-in first-out queue until weight() (the reference's WeightGradStore).
  void backward(int phase, bool split = false) {
    const int chunk = direction(phase);
    const int microbatch = next_microbatch(backwards_, chunk);
    out_.push_back(PipeAction{split ? PipeWork::kBackwardInput : PipeWork::kBackward, microbatch, chunk});
    if (split) weights_.push_back(PipeAction{PipeWork::kBackwardWeight, microbatch, chunk});
  }
  void weight() {
    out_.push_back(weights_.front());
    weights_.pop_front();
  }
  // _forward_backward_chunk: the forward of one phase overlapped with the backward of the other.
  void forward_backward(int forward_phase, int backward_phase) {
    forward(forward_phase);
    out_.back().overlaps_next = true;
    backward(backward_phase);
  }
  std::vector<PipeAction> take() { return std::move(out_); }

 private:
  int direction(int phase) const { return phase ^ (mirrored_ ? 1 : 0); }
  int next_microbatch(int (&counts)[2], int chunk) { return (v_shape_ ? 0 : chunk * per_direction_) + counts[chunk]++; }

  int per_direction_;  // microbatches through each phase
  bool mirrored_;
  bool v_shape_;
  int forwards_[2] = {0, 0};
  int backwards_[2] = {0, 0};
  std::deque<PipeAction> weights_;
  std::vector<PipeAction> out_;
};

// Steps 6-8: the backwards left, the later half of them split (zero bubble) so that the W's fill
// the tail; which one switches first depends on the stage's parity, as in the reference.
void drain(DualPipeWriter& w, int half_stages, int half_rank) {
  bool split = false;
  const int both = half_rank + 1;
  for (int i = 0; i < both; ++i) {
    if (i == both / 2 && half_rank % 2 == 1) split = true;
    w.backward(1, split);
    if (i == both / 2 && half_rank % 2 == 0) split = true;
    w.backward(0, split);
  }
  for (int i = 0; i < half_stages - half_rank - 1; ++i) {
    w.weight();
    w.backward(0, true);
  }
  for (int i = 0; i < half_rank + 1; ++i) w.weight();
}

// The eight steps of DualPipe.step and DualPipeV.step, which differ only in their counts: a stage
// at `rank` of `ranks` (DualPipe: its position in the pipeline's half, of half the stages), with
// `per_direction` microbatches through each phase.
std::vector<PipeAction> eight_steps(DualPipeWriter& w, int ranks, int rank, int per_direction) {
  const bool last = rank == ranks - 1;
  const int outer = ranks - rank - 1;  // ranks between this one and the end of its arm
  for (int i = 0; i < 2 * outer; ++i) w.forward(0);  // step 1: nF0
  for (int i = 0; i < rank + 1; ++i) {               // step 2: nF0F1
    w.forward(0);
    w.forward(1);
  }
  for (int i = 0; i < outer; ++i) {  // step 3: nB1W1F1, zero bubble
    w.backward(1, true);
    w.weight();
    w.forward(1);
  }
  const int steady = per_direction - 2 * ranks + rank + 1;
  for (int i = 0; i < steady; ++i) {  // step 4, the main step: nF0B1F1B0
    if (i == 0 && last) {
      // The reference does not overlap this pair on the innermost stages, to shrink the bubble.
      w.forward(0);
      w.backward(1);
    } else {
      w.forward_backward(0, 1);
    }
    w.forward_backward(1, 0);
  }
  for (int i = 0; i < outer; ++i) {  // step 5: nB1F1B0
    w.backward(1);
    w.forward_backward(1, 0);
  }
  drain(w, ranks, rank);
  return w.take();
}

}  // namespace

std::vector<PipeAction> dualpipe_program(const PipelineShape& shape, int stage) {
  // Stages s and p - 1 - s share a position in the pipeline's two halves.
  const int half_rank = std::min(stage, shape.stages - 1 - stage);
  DualPipeWriter w(shape.microbatches / 2, stage >= shape.stages / 2, false);
  return eight_steps(w, shape.stages / 2, half_rank, shape.microbatches / 2);
}

std::vector<PipeAction> dualpipev_program(const PipelineShape& shape, int stage) {
  DualPipeWriter w(shape.microbatches, false, true);
  return eight_steps(w, shape.stages, stage, shape.microbatches);
}

}  // namespace moesim
