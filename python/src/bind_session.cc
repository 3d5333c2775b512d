// Kernel launch and the run report: KernelRun as a Python class with the figures nkisim.last_run()
// exposes (python/nkisim/__init__.py builds RunReport from them) and the trace writer.
#include <pybind11/stl.h>

#include "python/src/bindings.h"
#include "python/src/session.h"
#include "runtime/hardware_profile.h"
#include "runtime/sim_mode.h"
#include "runtime/trace.h"

namespace nkisim::python {
namespace {

py::dict BusyByEngine(const CoreSummary& summary) {
  py::dict busy;
  for (int e = 0; e < kNumEngines; ++e) {
    if (summary.busy_ns[e] > 0)
      busy[py::str(EngineName(static_cast<Engine>(e)))] = summary.busy_ns[e];
  }
  return busy;
}

py::dict CoreDict(const NeuronCore& core) {
  const CoreSummary s = core.Summary();
  py::dict d;
  d["core"] = s.core_id;
  d["simulated_ns"] = s.sim_time_ns;
  d["engine_busy_ns"] = BusyByEngine(s);
  d["instructions"] = s.instructions;
  d["flops"] = s.flops;
  d["dma_bytes"] = s.dma_bytes;
  d["peak_tflops"] = s.peak_tflops;
  return d;
}

// One tuple per instruction: (name, engine, start_ns, end_ns, bytes, flops, operands).
py::list Records(const NeuronCore& core) {
  py::list out;
  for (const InstructionRecord& r : core.timeline().records()) {
    out.append(py::make_tuple(r.name, EngineName(r.engine), r.start_ns, r.end_ns, r.bytes, r.flops,
                              std::string(r.shapes.data())));
  }
  return out;
}

// The trace nkisim's commands write (launcher/commands/kernel_io.cc): one process per core.
void WriteTrace(KernelRun& run, const std::string& path) {
  ChromeTrace trace;
  for (int i = 0; i < run.lnc().lnc(); ++i) {
    trace.AddProcess(i, "core " + std::to_string(i), run.lnc().core(i).timeline());
  }
  trace.WriteFile(path);
}

py::dict ProfileDict(const HardwareProfile& p) {
  py::dict d;
  d["name"] = p.name();
  d["peak_bf16_tflops"] = PeakBf16Tflops(p);
  d["peak_mx_tflops"] = PeakMxTflops(p);
  d["hbm_gbps_per_core"] = p.hbm_gbps_per_core();
  d["partitions"] = p.partitions();
  d["sbuf_bytes_per_partition"] = p.sbuf_bytes_per_partition();
  d["psum_bytes_per_partition"] = p.psum_bytes_per_partition();
  d["psum_banks"] = p.psum_banks();
  d["pe_cols"] = p.pe_cols();
  d["pe_max_moving_free"] = p.pe_max_moving_free();
  d["hbm_bytes_per_chip"] = p.hbm_bytes_per_chip();
  d["physical_cores_per_chip"] = p.physical_cores_per_chip();
  // The DMA engine model (docs/dma.md): what a kernel author needs to reason about descriptors.
  d["dma_engines"] = p.dma_engines();
  d["dma_queues"] = p.dma_queues();
  d["dma_engine_gbps"] = p.dma_engine_gbps();
  d["dma_engine_raw_gbps"] = p.dma_engine_raw_gbps();
  d["dma_descriptor_max_bytes"] = p.dma_descriptor_max_bytes();
  d["dma_issue_ns"] = p.dma_issue_ns();
  d["dma_latency_ns"] = p.dma_latency_ns();
  return d;
}

}  // namespace

void BindSession(py::module_& m) {
  py::class_<KernelRun, std::shared_ptr<KernelRun>>(m, "KernelRun")
      .def(py::init([](int lnc, const std::string& profile, const std::string& name) {
             return std::make_shared<KernelRun>(lnc, ResolveProfile(profile), name);
           }),
           py::arg("lnc"), py::arg("profile") = "", py::arg("name") = "kernel")
      .def("run", &KernelRun::Run)
      .def_property_readonly("name", &KernelRun::name)
      .def_property_readonly("lnc", [](KernelRun& r) { return r.lnc().lnc(); })
      .def_property_readonly("simulated_ns", [](KernelRun& r) { return r.lnc().now(); })
      .def_property_readonly("host_ns", &KernelRun::host_ns)
      .def_property_readonly("profile", [](KernelRun& r) { return ProfileDict(r.lnc().profile()); })
      .def("core_summary", [](KernelRun& r, int i) { return CoreDict(r.lnc().core(i)); })
      .def("core_summary_text",
           [](KernelRun& r, int i) { return FormatSummary(r.lnc().core(i).Summary()); })
      .def("records", [](KernelRun& r, int i) { return Records(r.lnc().core(i)); })
      .def("write_trace", &WriteTrace);
  m.def("profile_info", [](const std::string& spec) { return ProfileDict(ResolveProfile(spec)); });
  // The process-wide simulation mode (runtime/sim_mode.h): the package sets it for each run.
  m.def("set_timing_only", [](bool on) {
    SetSimMode(on ? SimMode::kTimingOnly : SimMode::kFunctional);
  });
  m.def("program_id", &CurrentProgramId);
  m.def("num_programs", &CurrentNumPrograms);
  m.def("in_kernel", [] { return CurrentRun() != nullptr; });
}

}  // namespace nkisim::python
