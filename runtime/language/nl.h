// The nl kernel language over nisa: include this one header in kernels written in nl.
// Every op runs on the calling thread's current core (see runtime/neuron_core.h), allocates its
// result there and emits the nisa instructions docs/nl-ops.md lists for it.
#pragma once

#include "runtime/language/composites.h"
#include "runtime/language/creation_ops.h"
#include "runtime/language/dispatch.h"
#include "runtime/language/indexing_ops.h"
#include "runtime/language/math_ops.h"
#include "runtime/language/matmul_ops.h"
#include "runtime/language/memory_ops.h"
#include "runtime/language/op_table.h"
#include "runtime/language/operands.h"
#include "runtime/language/reduction_ops.h"
