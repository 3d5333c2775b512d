// Scenario files of `nkisim run`: parse (text proto or JSON), fill defaults, validate against
// the topology and the model, and resolve what every rank needs (its Q head, its KV head, its
// position in its GQA group). Pure: no MPI, so the launcher checks a file before starting ranks.
#pragma once

#include <string>
#include <vector>

#include "collectives/topology.h"
#include "proto/scenario.pb.h"
#include "runtime/dtype.h"
#include "runtime/hardware_profile.h"

namespace nkisim::launcher {

inline constexpr const char* kAttentionDecode = "attention_decode";       // TP64 -> TP8DP8 -> TP64
inline constexpr const char* kAttentionDecodeTp = "attention_decode_tp";  // TP64 throughout

struct ResolvedScenario {
  proto::Scenario spec;  // with defaults filled in
  std::string source;
  collectives::ResolvedTopology topology;
  HardwareProfile profile;
  DType dtype = DType::kBFloat16;
  int gqa_group_size = 0;  // G = n_q_heads / n_kv_heads: Q heads per KV head

  int world_size() const { return topology.world_size; }
  // The Q head of rank r is r; its KV head is r / G (the ranks of one GQA group share it).
  int kv_head_of(int rank) const { return rank / gqa_group_size; }
  proto::Tolerance tolerance(const std::string& phase) const;
};

// Throws Error(kBadConfig) "source:line:column: ..." on syntax errors and unknown fields, and a
// list of every problem found (field, value, rule) when the scenario does not fit together.
ResolvedScenario LoadScenario(const std::string& path);
ResolvedScenario ResolveScenario(const std::string& text, const std::string& source);

}  // namespace nkisim::launcher
