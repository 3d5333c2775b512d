// `nkisim dma-curve`: the DMA engine model (runtime/dma_engines.h) beside the published figures it
// is checked against (docs/dma.md): the relative-throughput sweep of [128, n] bf16 HBM -> SBUF
// transfers, the DMA overview's two profiled examples, and the mixed-DGE worked example at 1 KiB
// and 4 KiB per partition, for any hardware profile. Prints the error of each figure.
#pragma once

namespace CLI {
class App;
}

namespace nkisim::launcher {

// Adds the options of `nkisim dma-curve` to `cmd`; the callback stores its exit code (0).
void AddDmaCurveCommand(CLI::App* cmd, int* exit_code);

}  // namespace nkisim::launcher
