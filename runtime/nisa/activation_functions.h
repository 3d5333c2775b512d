// Functions of the Scalar (ACT) engine's activation unit. ApplyActivation is the plain reference
// body of each: the simulator's functional path and the golden the nl tests compare against.
#pragma once

namespace nkisim::nisa {

enum class ActFn {
  kIdentity, kExp, kLog, kTanh, kSigmoid, kRelu,
  kGelu, kGeluApproxTanh, kGeluApproxSigmoid, kGeluApproxSigmoidDx, kGeluDx,
  kSilu, kSiluDx, kErf, kErfDx, kSoftplus, kMish,
  kRsqrt, kSqrt, kSquare, kReciprocal, kSin, kCos, kTan, kArctan, kSign, kAbs,
};

const char* ActFnName(ActFn fn);
float ApplyActivation(ActFn fn, float x);

}  // namespace nkisim::nisa
