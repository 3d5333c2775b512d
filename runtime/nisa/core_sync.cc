#include "runtime/error.h"
#include "runtime/nisa/nisa.h"

namespace nkisim::nisa {
namespace {

LogicalCore& Owner(NeuronCore& core, const char* instruction) {
  if (core.logical_core() == nullptr) {
    Raise(ErrorCode::kInvalidArgument, StrCat(instruction, ": core ", core.id(),
                                              " is not part of a LogicalCore; launch the kernel "
                                              "with LogicalCore::Launch"));
  }
  return *core.logical_core();
}

}  // namespace

void sendrecv(const Tile& send, const Tile& recv) {
  NeuronCore& core = CurrentCore();
  Owner(core, "sendrecv").SendRecv(core, send, recv);
}

void core_barrier() {
  NeuronCore& core = CurrentCore();
  Owner(core, "core_barrier").Barrier(core);
}

}  // namespace nkisim::nisa
