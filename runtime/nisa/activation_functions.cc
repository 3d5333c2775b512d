#include "runtime/nisa/activation_functions.h"

#include <cmath>
#include <limits>

namespace nkisim::nisa {
namespace {
constexpr double kPi = 3.14159265358979323846;
double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double Softplus(double x) { return std::log1p(std::exp(-std::fabs(x))) + std::fmax(x, 0.0); }
}  // namespace

const char* ActFnName(ActFn fn) {
  switch (fn) {
    case ActFn::kIdentity: return "identity";
    case ActFn::kExp: return "exp";
    case ActFn::kLog: return "log";
    case ActFn::kTanh: return "tanh";
    case ActFn::kSigmoid: return "sigmoid";
    case ActFn::kRelu: return "relu";
    case ActFn::kGelu: return "gelu";
    case ActFn::kGeluApproxTanh: return "gelu_apprx_tanh";
    case ActFn::kGeluApproxSigmoid: return "gelu_apprx_sigmoid";
    case ActFn::kGeluApproxSigmoidDx: return "gelu_apprx_sigmoid_dx";
    case ActFn::kGeluDx: return "gelu_dx";
    case ActFn::kSilu: return "silu";
    case ActFn::kSiluDx: return "silu_dx";
    case ActFn::kErf: return "erf";
    case ActFn::kErfDx: return "erf_dx";
    case ActFn::kSoftplus: return "softplus";
    case ActFn::kMish: return "mish";
    case ActFn::kRsqrt: return "rsqrt";
    case ActFn::kSqrt: return "sqrt";
    case ActFn::kSquare: return "square";
    case ActFn::kReciprocal: return "reciprocal";
    case ActFn::kSin: return "sin";
    case ActFn::kCos: return "cos";
    case ActFn::kTan: return "tan";
    case ActFn::kArctan: return "arctan";
    case ActFn::kSign: return "sign";
    case ActFn::kAbs: return "abs";
  }
  return "?";
}

float ApplyActivation(ActFn fn, float xf) {
  const double x = xf;
  double y = std::numeric_limits<double>::quiet_NaN();
  switch (fn) {
    case ActFn::kIdentity: y = x; break;
    case ActFn::kExp: y = std::exp(x); break;
    case ActFn::kLog: y = std::log(x); break;
    case ActFn::kTanh: y = std::tanh(x); break;
    case ActFn::kSigmoid: y = Sigmoid(x); break;
    case ActFn::kRelu: y = std::fmax(x, 0.0); break;
    case ActFn::kGelu: y = 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); break;
    case ActFn::kGeluApproxTanh:
      y = 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / kPi) * (x + 0.044715 * x * x * x)));
      break;
    case ActFn::kGeluApproxSigmoid: y = x * Sigmoid(1.702 * x); break;
    case ActFn::kGeluApproxSigmoidDx: {
      const double s = Sigmoid(1.702 * x);
      y = s + 1.702 * x * s * (1.0 - s);
      break;
    }
    case ActFn::kGeluDx:
      y = 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * kPi);
      break;
    case ActFn::kSilu: y = x * Sigmoid(x); break;
    case ActFn::kSiluDx: {
      const double s = Sigmoid(x);
      y = s * (1.0 + x * (1.0 - s));
      break;
    }
    case ActFn::kErf: y = std::erf(x); break;
    case ActFn::kErfDx: y = 2.0 / std::sqrt(kPi) * std::exp(-x * x); break;
    case ActFn::kSoftplus: y = Softplus(x); break;
    case ActFn::kMish: y = x * std::tanh(Softplus(x)); break;
    case ActFn::kRsqrt: y = 1.0 / std::sqrt(x); break;
    case ActFn::kSqrt: y = std::sqrt(x); break;
    case ActFn::kSquare: y = x * x; break;
    case ActFn::kReciprocal: y = 1.0 / x; break;
    case ActFn::kSin: y = std::sin(x); break;
    case ActFn::kCos: y = std::cos(x); break;
    case ActFn::kTan: y = std::tan(x); break;
    case ActFn::kArctan: y = std::atan(x); break;
    case ActFn::kSign: y = (x > 0) - (x < 0); break;
    case ActFn::kAbs: y = std::fabs(x); break;
  }
  return static_cast<float>(y);
}

}  // namespace nkisim::nisa
