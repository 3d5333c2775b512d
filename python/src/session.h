// One kernel run from Python: a fresh logical core (LNC 1 or 2) on a hardware profile, the
// Python kernel body run once per program, and what the run leaves behind for the report
// (timelines, host time). nkisim.last_run() is the most recent KernelRun.
//
// Threads: LNC 1 runs the body on the calling (Python main) thread, so breakpoint() and debuggers
// work as in the NKI simulator. LNC 2 runs it on the logical core's two threads, each holding the
// GIL while it runs Python and releasing it while it waits for its peer (sendrecv, barrier,
// collectives). A Python exception in one program aborts the other's waits; Run re-raises the
// program's own exception (not the CommError it caused in the peer).
#pragma once

#include <pybind11/pybind11.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/hardware_profile.h"
#include "runtime/hbm_write_order.h"
#include "runtime/logical_core.h"

namespace nkisim::collectives {
class RankContext;
}

namespace nkisim::python {

namespace py = pybind11;

// "" or "trn2": the built-in trn2 profile; "trn3" (or any name with a file
// configs/hardware/<name>.textproto): that file; anything else: a profile file's path, merged over
// trn2. Throws Error(kBadConfig) as LoadHardwareProfile does.
HardwareProfile ResolveProfile(const std::string& spec);

class KernelRun {
 public:
  KernelRun(int lnc, const HardwareProfile& profile, std::string name);
  ~KernelRun();

  // Runs body(prg_id) for every program; see the header comment for threads and errors.
  void Run(const py::function& body);
  // Runs a C++ kernel on the logical core (the example kernels), without the GIL.
  void RunNative(const std::function<void(const KernelContext&)>& kernel);

  LogicalCore& lnc() { return *lnc_; }
  const std::string& name() const { return name_; }
  double host_ns() const { return host_ns_; }
  // LNC 2: the order of the two programs' shared-HBM writes (runtime/hbm_write_order.h);
  // nullptr at LNC 1.
  HbmWriteOrder* hbm_order() { return hbm_order_.get(); }
  // The rank's collectives context for this run, made on first use by bind_collectives.cc.
  std::unique_ptr<collectives::RankContext>& rank_context() { return rank_context_; }

 private:
  std::unique_ptr<LogicalCore> lnc_;
  std::string name_;
  double host_ns_ = 0;
  std::unique_ptr<HbmWriteOrder> hbm_order_;
  std::unique_ptr<collectives::RankContext> rank_context_;
};

// Drops the collectives context of every live run (their MPI communicators), before MPI ends:
// a run kept for its report outlives MPI_Finalize.
void ReleaseRankContexts();

// The run whose kernel is executing (nullptr outside a kernel): nl ops that need the logical
// core or the rank (collectives) find it here.
KernelRun* CurrentRun();
// Runs `write`, an instruction whose HBM result is dst, through the current LNC 2 run's
// HbmWriteOrder (the device's order of the two programs' writes, not the host threads'); at LNC 1
// or outside a kernel just runs it.
void OrderedHbmWrite(const TensorView& dst, const std::function<void()>& write);
// The same for a scatter that writes only base's elements at `offsets` (HbmWriteOrder::Write).
void OrderedHbmWrite(const TensorView& base, const std::vector<int64_t>& offsets,
                     const std::function<void()>& write);
// True when this thread runs a program of an LNC 2 run (its HBM writes are ordered).
bool OrderingHbmWrites();
// The calling thread's program: prg_id and n_prgs; (0, 1) outside a kernel.
int CurrentProgramId();
int CurrentNumPrograms();

}  // namespace nkisim::python
