#include "python/src/session.h"

#include <chrono>
#include <optional>
#include <set>
#include <vector>

#include "collectives/communicator.h"
#include "python/src/errors.h"
#include "runtime/error.h"

namespace nkisim::python {
namespace {

KernelRun* g_current = nullptr;
std::set<KernelRun*>& LiveRuns() {  // touched with the GIL held (construction, destruction)
  static std::set<KernelRun*> runs;
  return runs;
}
thread_local int t_prg_id = 0;
thread_local int t_n_prgs = 1;

class ScopedProgram {
 public:
  ScopedProgram(int prg_id, int n_prgs) : saved_id_(t_prg_id), saved_n_(t_n_prgs) {
    t_prg_id = prg_id;
    t_n_prgs = n_prgs;
  }
  ~ScopedProgram() {
    t_prg_id = saved_id_;
    t_n_prgs = saved_n_;
  }

 private:
  int saved_id_, saved_n_;
};

class ScopedRun {
 public:
  explicit ScopedRun(KernelRun* run) : saved_(g_current) { g_current = run; }
  ~ScopedRun() { g_current = saved_; }

 private:
  KernelRun* saved_;
};

double ElapsedNs(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
}

// Re-raises the root Python error of a failed LNC 2 launch: a program's own exception before the
// CommError it caused in its peer.
[[noreturn]] void RaiseRoot(std::vector<std::optional<py::error_already_set>>& errors) {
  for (bool want_root : {true, false}) {
    for (auto& e : errors) {
      if (e && (!want_root || !e->matches(CommErrorType()))) {
        e->restore();
        throw py::error_already_set();
      }
    }
  }
  throw;  // no Python error: the C++ error Launch rethrew
}

}  // namespace

HardwareProfile ResolveProfile(const std::string& spec) {
  if (spec.empty() || spec == "trn2") return Trn2Profile();
  if (spec.find('/') == std::string::npos && spec.find('.') == std::string::npos) {
    return LoadHardwareProfile(std::string(NKISIM_CONFIG_DIR) + "/hardware/" + spec + ".textproto");
  }
  return LoadHardwareProfile(spec);
}

KernelRun::KernelRun(int lnc, const HardwareProfile& profile, std::string name)
    : lnc_(std::make_unique<LogicalCore>(lnc, profile)), name_(std::move(name)) {
  if (lnc_->lnc() == 2) hbm_order_ = std::make_unique<HbmWriteOrder>();
  LiveRuns().insert(this);
}

KernelRun::~KernelRun() { LiveRuns().erase(this); }

void ReleaseRankContexts() {
  for (KernelRun* run : LiveRuns()) run->rank_context().reset();
}

void KernelRun::Run(const py::function& body) {
  ScopedRun current(this);
  const auto start = std::chrono::steady_clock::now();
  if (lnc_->lnc() == 1) {
    ScopedCurrentCore core(lnc_->core(0));
    ScopedProgram program(0, 1);
    body(0);
    host_ns_ = ElapsedNs(start);
    return;
  }
  std::vector<std::optional<py::error_already_set>> errors(lnc_->lnc());
  // The write order's stamps (4 bytes a byte written) are not kept with the run's report.
  struct ReleaseOrder {
    std::unique_ptr<HbmWriteOrder>& order;
    ~ReleaseOrder() { order.reset(); }
  } release_order{hbm_order_};
  try {
    py::gil_scoped_release release;
    lnc_->Launch([&](const KernelContext& ctx) {
      ScopedProgram program(ctx.prg_id, ctx.n_prgs);
      py::gil_scoped_acquire gil;
      try {
        body(ctx.prg_id);
      } catch (py::error_already_set& e) {
        const bool consequence = e.matches(CommErrorType());
        errors[ctx.prg_id] = std::move(e);
        Raise(consequence ? ErrorCode::kCommError : ErrorCode::kInvalidArgument,
              StrCat("program ", ctx.prg_id, " raised a Python exception"));
      }
    });
  } catch (const Error&) {
    RaiseRoot(errors);
  }
  host_ns_ = ElapsedNs(start);
}

void KernelRun::RunNative(const std::function<void(const KernelContext&)>& kernel) {
  ScopedRun current(this);
  py::gil_scoped_release release;
  const auto start = std::chrono::steady_clock::now();
  lnc_->Launch(kernel);
  host_ns_ = ElapsedNs(start);
}

KernelRun* CurrentRun() { return g_current; }

void OrderedHbmWrite(const TensorView& dst, const std::function<void()>& write) {
  KernelRun* run = CurrentRun();
  if (run == nullptr || run->hbm_order() == nullptr) {
    write();
    return;
  }
  run->hbm_order()->Write(dst, CurrentProgramId(), write);
}

void OrderedHbmWrite(const TensorView& base, const std::vector<int64_t>& offsets,
                     const std::function<void()>& write) {
  KernelRun* run = CurrentRun();
  if (run == nullptr || run->hbm_order() == nullptr) {
    write();
    return;
  }
  run->hbm_order()->Write(base, offsets, CurrentProgramId(), write);
}

bool OrderingHbmWrites() {
  KernelRun* run = CurrentRun();
  return run != nullptr && run->hbm_order() != nullptr;
}

int CurrentProgramId() { return t_prg_id; }
int CurrentNumPrograms() { return t_n_prgs; }

}  // namespace nkisim::python
