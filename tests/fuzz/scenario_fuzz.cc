// Fuzz target: the scenario file of `nkisim run` (launcher::ResolveScenario: text format or JSON,
// defaults, field ranges, the model, the topology or sharding plans resolved against the profile).
// Only ResolveScenario and world_size() are used, so the target follows the scenario schema as it
// changes.
#if __has_include("model/scenario_config.h")
#include "model/scenario_config.h"
#else
#include "launcher/scenario_config.h"
#endif
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, size_t size) {
  const std::string text = nkisim::fuzz::Text(data, size);
  nkisim::fuzz::Guarded("ResolveScenario", [&] {
    const nkisim::launcher::ResolvedScenario r =
        nkisim::launcher::ResolveScenario(text, nkisim::fuzz::kSource);
    if (r.world_size() <= 0) {
      nkisim::fuzz::Finding(nkisim::StrCat("accepted scenario with world size ", r.world_size()));
    }
  });
  return 0;
}
