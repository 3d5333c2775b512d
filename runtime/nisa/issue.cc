#include "runtime/nisa/issue.h"

#include <algorithm>
#include <charconv>
#include <vector>

#include "runtime/error.h"

namespace nkisim::nisa {

Issue::Issue(const char* name, Engine engine)
    : name_(name), engine_(engine), core_(&CurrentCore()),
      keep_shapes_(core_->timeline().keeps(engine)) {
  if (keep_shapes_) shapes_.reserve(104);
}

void Issue::CheckCore(const char* operand, const Tile& tile) const {
  if (!tile.valid()) {
    Raise(ErrorCode::kInvalidArgument, StrCat(name_, ": operand '", operand, "' is a null tile"));
  }
  if (tile.core() != core_) {
    Illegal(name_, operand, tile,
            StrCat("lives on core ", tile.core()->id(), " but the instruction is issued on core ",
                   core_->id()));
  }
  if (engine_ == Engine::kGpSimd && tile.memory() == MemorySpace::kPsum) {
    Illegal(name_, operand, tile,
            "is in PSUM, which the GpSimd engine cannot access (issue it on Vector or Scalar)");
  }
}

void Issue::AddShape(const char* operand, const Shape& shape, DType dtype) {
  if (!keep_shapes_) return;  // the record is not kept: nobody reads the operands' text
  if (!shapes_.empty()) shapes_ += ' ';
  shapes_ += operand;
  char digits[24];
  for (size_t i = 0; i < shape.size(); ++i) {
    shapes_ += i ? ',' : '[';
    const auto end = std::to_chars(digits, digits + sizeof digits, shape[i]).ptr;
    shapes_.append(digits, end);
  }
  shapes_ += ']';
  shapes_ += DTypeName(dtype);
}

namespace {

// Appends to a fixed-size operand list; instructions have at most a handful of operands.
template <typename T, size_t N>
void Push(std::array<T, N>& list, int& count, T item, const char* instruction) {
  if (count == static_cast<int>(N)) {
    Raise(ErrorCode::kInternal, StrCat(instruction, ": more than ", N, " operands of one kind"));
  }
  list[count++] = item;
}

}  // namespace

Issue& Issue::Reads(const char* operand, const Tile& tile) {
  CheckCore(operand, tile);
  Push(tile_reads_, n_tile_reads_, &tile.buffer(), name_);
  AddShape(operand, tile.shape(), tile.dtype());
  return *this;
}

Issue& Issue::Writes(const char* operand, const Tile& tile) {
  CheckCore(operand, tile);
  Push(tile_writes_, n_tile_writes_, &tile.buffer(), name_);
  AddShape(operand, tile.shape(), tile.dtype());
  return *this;
}

Issue& Issue::Reads(const char* operand, const TensorView& tensor) {
  Push(hbm_reads_, n_hbm_reads_, &tensor.buffer(), name_);
  AddShape(operand, tensor.shape(), tensor.dtype());
  return *this;
}

Issue& Issue::Writes(const char* operand, const TensorView& tensor) {
  Push(hbm_writes_, n_hbm_writes_, &tensor.buffer(), name_);
  AddShape(operand, tensor.shape(), tensor.dtype());
  return *this;
}

double Issue::Start() const {
  double start = core_->timeline().free_at(engine_);
  for (int i = 0; i < n_tile_reads_; ++i) start = std::max(start, tile_reads_[i]->ready_at);
  for (int i = 0; i < n_tile_writes_; ++i) start = std::max(start, tile_writes_[i]->readers_done_at);
  for (int i = 0; i < n_hbm_reads_; ++i) start = std::max(start, hbm_reads_[i]->ready_at());
  return start;
}

void Issue::Finish(double start_ns, double end_ns, int64_t bytes, int64_t flops) {
  Timeline& clock = core_->timeline();
  clock.Occupy(engine_, start_ns, end_ns);
  clock.Record(name_, engine_, start_ns, end_ns, bytes, flops, shapes_);
  for (int i = 0; i < n_tile_reads_; ++i) {
    tile_reads_[i]->readers_done_at = std::max(tile_reads_[i]->readers_done_at, end_ns);
  }
  for (int i = 0; i < n_tile_writes_; ++i) {
    tile_writes_[i]->ready_at = std::max(tile_writes_[i]->ready_at, end_ns);
  }
  for (int i = 0; i < n_hbm_writes_; ++i) hbm_writes_[i]->MarkWritten(end_ns);
}

double Issue::Commit(double duration_ns, int64_t bytes, int64_t flops) {
  const double start = Start();
  Finish(start, start + duration_ns, bytes, flops);
  return start + duration_ns;
}

double Issue::FinishTransfer(DmaRequest request, int64_t bytes) {
  request.queue = EngineIndex(engine_) - EngineIndex(Engine::kDmaQueue0);
  request.ready_ns = std::max(request.ready_ns, Start());
  const DmaTiming t = core_->dma().Schedule(request);
  RecordDmaTransfer(core_->timeline(), profile(), name_, request, t, bytes, shapes_);
  for (int i = 0; i < n_tile_reads_; ++i) {
    tile_reads_[i]->readers_done_at = std::max(tile_reads_[i]->readers_done_at, t.done_ns);
  }
  for (int i = 0; i < n_tile_writes_; ++i) {
    tile_writes_[i]->ready_at = std::max(tile_writes_[i]->ready_at, t.done_ns);
  }
  for (int i = 0; i < n_hbm_writes_; ++i) hbm_writes_[i]->MarkWritten(t.done_ns);
  return t.done_ns;
}

bool Issue::WaitsOnOperand() const {
  const double free_at = core_->timeline().free_at(engine_);
  for (int i = 0; i < n_tile_reads_; ++i) {
    const double ready = tile_reads_[i]->ready_at;
    if (ready > 0 && ready == free_at) return true;  // written by this engine's last instruction
  }
  return false;
}

double Issue::CommitRow(const CostRow& row, int64_t n, bool narrow, int64_t bytes, int64_t flops) {
  return Commit(RowNs(profile(), engine_, row, n, narrow, WaitsOnOperand()), bytes, flops);
}

double Issue::CommitOnPe(double full_rate_ns, int64_t bytes, int64_t flops) {
  const double start = Start();
  const double end = start + core_->pe_throttle().Run(profile(), start, full_rate_ns);
  Finish(start, end, bytes, flops);
  return end;
}

float* ScratchRow(int slot, int64_t n) {
  thread_local std::vector<float> rows[6];
  std::vector<float>& row = rows[slot];
  if (static_cast<int64_t>(row.size()) < n) row.resize(static_cast<size_t>(n));
  return row.data();
}

void Illegal(const char* instruction, const char* operand, const Tile& tile,
             const std::string& rule) {
  Raise(ErrorCode::kInvalidArgument,
        StrCat(instruction, ": operand '", operand, "' ", tile.Describe(), ": ", rule));
}

void CheckSamePartitions(const char* instruction, const char* a_name, const Tile& a,
                         const char* b_name, const Tile& b) {
  if (a.partitions() != b.partitions()) {
    Illegal(instruction, b_name, b,
            StrCat("has ", b.partitions(), " partitions but operand '", a_name, "' has ",
                   a.partitions(), "; they must match"));
  }
}

void CheckPsumOneBank(const char* inst, const char* name, const Tile& dst) {
  const HardwareProfile& prof = dst.core()->profile();
  const uint64_t bank = prof.psum_bytes_per_partition() / prof.psum_banks();
  const uint64_t first = dst.buffer().offset() + dst.free_offset() * SizeOf(dst.dtype());
  const uint64_t last = first + dst.free_size() * SizeOf(dst.dtype()) - 1;
  if (first / bank != last / bank) {
    Illegal(inst, name, dst, StrCat("spans PSUM bytes [", first, ", ", last, "] of a partition, ",
                                    "crossing a ", bank, " B bank boundary; a matmul output must ",
                                    "lie in one bank"));
  }
}

void CheckMatmulOutput(const char* inst, const Tile& stationary, const Tile& moving,
                       const Tile& dst, int64_t m, int64_t n) {
  const HardwareProfile& prof = dst.core()->profile();
  if (m > prof.pe_cols()) {
    Illegal(inst, "stationary", stationary, StrCat("free size M = ", m, " exceeds ", prof.pe_cols()));
  }
  if (n > prof.pe_max_moving_free()) {
    Illegal(inst, "moving", moving,
            StrCat("free size N = ", n, " exceeds ", prof.pe_max_moving_free(), " (one PSUM bank of fp32)"));
  }
  if (dst.memory() != MemorySpace::kPsum || dst.dtype() != DType::kFloat32) {
    Illegal(inst, "dst", dst, "must be an fp32 PSUM tile");
  }
  if (dst.partitions() != m || dst.free_size() != n || !dst.free_contiguous()) {
    Illegal(inst, "dst", dst, StrCat("must be a contiguous [M, N] = [", m, ", ", n, "] view"));
  }
  CheckPsumOneBank(inst, "dst", dst);
}

}  // namespace nkisim::nisa
