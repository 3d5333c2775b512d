// Scenario files of `nkisim run`: parse (text proto or JSON), fill defaults, validate the model,
// the workload and every sharding plan, and resolve what every rank needs (its Q and KV heads,
// its TP group, its attention-DP group, the replica groups of each plan). Pure: no MPI, so the
// launcher and `nkisim validate` check a file before any rank starts.
//
// A plan (proto/scenario.proto Plan) splits one transformer layer over tp x replicas ranks:
//   * the ranks of one TP group (tp consecutive ranks) split the Q heads evenly, rank position p
//     holding heads [p * n_q / tp, (p + 1) * n_q / tp), and the o_proj contraction;
//   * the KV heads are divided among them when n_kv is a multiple of tp, else (tp a multiple of
//     n_kv) each KV head is replicated on the tp / n_kv ranks whose Q heads use it;
//   * attention_dp = G > 1 (decode) regroups each block of G consecutive ranks of a TP group:
//     every rank then attends G x (its heads) for B / G batch rows;
//   * replicas > 1 copies the TP group (data parallel), each copy with its own batch.
#pragma once

#include <string>
#include <vector>

#include "collectives/topology.h"
#include "proto/scenario.pb.h"
#include "runtime/dtype.h"
#include "runtime/hardware_profile.h"

namespace nkisim::launcher {

enum class Workload { kDecode, kPrefill, kMoe };

// Names of the replica-group sets every plan derives.
inline constexpr const char* kTpGroups = "tp";                     // one group per TP replica
inline constexpr const char* kAttentionDpGroups = "attention_dp";  // blocks of G ranks
// Workload moe: the expert-parallel groups, ranks of the same TP position spaced moe_tp apart
// (model/moe_config.h).
inline constexpr const char* kEpGroups = "ep";

struct ResolvedPlan {
  std::string name;
  int tp = 0;
  int attention_dp = 1;     // G
  int lnc = 2;
  int instances = 1;
  int replicas = 1;
  int heads_per_rank = 0;   // Q heads per rank: n_q / tp
  int kv_per_rank = 0;      // KV heads per rank (1 when replicated)
  int q_per_kv = 0;         // Q heads per KV head: n_q / n_kv
  int kv_replication = 1;   // ranks of a TP group holding each KV head
  int moe_ep = 0;           // workload moe: expert-parallel degree (0: not an MoE plan)
  int moe_tp = 0;           // workload moe: ranks splitting each expert's I (= tp)
  collectives::ResolvedTopology topology;  // with the derived "tp" (and "attention_dp") sets

  int world_size() const { return tp * replicas; }
  int tp_position(int rank) const { return rank % tp; }
  int replica(int rank) const { return rank / tp; }
  int first_q_head(int rank) const { return tp_position(rank) * heads_per_rank; }
  int first_kv_head(int rank) const { return first_q_head(rank) / q_per_kv; }
  // The KV heads whose Q heads the attention-DP group of `rank` attends, ascending (G = 1: the
  // rank's own KV heads).
  std::vector<int> group_kv_heads(int rank) const;
};

struct ResolvedScenario {
  proto::Scenario spec;  // with defaults filled in
  std::string source;
  HardwareProfile profile;
  DType dtype = DType::kBFloat16;
  Workload workload = Workload::kDecode;
  std::vector<ResolvedPlan> plans;

  int world_size() const { return plans.front().world_size(); }
  // Tolerance of a phase; "qkv[2]" (step 2 of a multi-step decode) uses the one of "qkv".
  proto::Tolerance tolerance(const std::string& phase) const;
};

// A phase's name without its layer and step ("qkv.L2[3]" -> "qkv"): what tolerances and faults
// name.
std::string PhaseBase(const std::string& phase);
// "qkv" for one layer and one step; "qkv.L2" for layer 2 of several; "qkv.L2[3]" at step 3.
std::string PhaseName(const char* phase, int layer, int layers, int step, int steps);

// Phase names of a workload, in order ("qkv", "batch_shard", ...).
std::vector<std::string> PhaseNames(Workload workload);

// Throws Error(kBadConfig) "source:line:column: ..." on syntax errors and unknown fields, and a
// list of every problem found (field, value, rule) when the scenario does not fit together.
ResolvedScenario LoadScenario(const std::string& path);
ResolvedScenario ResolveScenario(const std::string& text, const std::string& source);

// `nkisim validate` for a scenario: the workload, and per plan its groups, the rank -> Q heads /
// KV heads map (ranges folded when long) and the memory per rank.
std::string FormatScenario(const ResolvedScenario& scenario);

}  // namespace nkisim::launcher
