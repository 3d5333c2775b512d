// The nisa ISA of the simulated NeuronCore: include this one header in kernels.
// Every instruction runs on the calling thread's current core (see neuron_core.h), computes its
// result at once and records itself on that core's timeline.
#pragma once

#include "runtime/logical_core.h"
#include "runtime/nisa/activation_functions.h"
#include "runtime/nisa/alu.h"
#include "runtime/nisa/dma.h"
#include "runtime/nisa/dma_descriptors.h"
#include "runtime/nisa/elementwise.h"
#include "runtime/nisa/gather.h"
#include "runtime/nisa/matmul.h"
#include "runtime/nisa/mx.h"
#include "runtime/nisa/random.h"
#include "runtime/nisa/reduce.h"

namespace nkisim::nisa {

// Intra-LNC transfer and barrier; see LogicalCore::SendRecv / Barrier. Throw
// Error(kInvalidArgument) on a core that is not part of a LogicalCore.
void sendrecv(const Tile& send, const Tile& recv);
void core_barrier();

}  // namespace nkisim::nisa
