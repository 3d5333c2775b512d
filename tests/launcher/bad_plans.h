// Bad plans and workloads: each scenario text breaks one rule and must be refused with its own
// message (field, value, rule) and Error(kBadConfig) / exit 14, by the library and by the CLI.
#pragma once

#include <string>
#include <vector>

namespace nkisim::testing {

struct BadPlan {
  const char* what;
  std::string text;     // a whole scenario file
  const char* message;  // a fragment of the error
};

// A small decode scenario: 8 Q heads, 2 KV heads, B = 8; `body` adds the plans and the rest.
inline std::string PlanScenario(const std::string& body, const std::string& model =
                                    "model { hidden: 512 n_q_heads: 8 n_kv_heads: 2 d_head: 64 intermediate: 1024 }") {
  return model + "\nseed: 1\n" + body + "\n";
}

inline constexpr const char* kModel128 = "model { hidden: 512 n_q_heads: 8 n_kv_heads: 2 d_head: 128 intermediate: 1024 }";

inline std::vector<BadPlan> BadPlans() {
  return {
      {"tp not dividing the Q heads", PlanScenario("batch: 8 kv_length: 16 plans { tp: 3 }"),
       "plan 'tp3': tp: 3 must divide model.n_q_heads (8)"},
      {"tp and KV heads not dividing one another",
       PlanScenario("batch: 8 kv_length: 16 plans { tp: 6 }",
                    "model { hidden: 512 n_q_heads: 24 n_kv_heads: 8 d_head: 64 intermediate: 1024 }"),
       "tp: 6 and model.n_kv_heads (8) must divide one another"},
      {"G not dividing the TP group", PlanScenario("batch: 6 kv_length: 16 plans { tp: 8 attention_dp: 3 }"),
       "attention_dp: 3 must divide tp (8)"},
      {"G not dividing the batch", PlanScenario("batch: 6 kv_length: 16 plans { tp: 8 attention_dp: 4 }"),
       "attention_dp: 4 must divide batch (6)"},
      {"attention DP in prefill",
       PlanScenario("workload: \"prefill\" batch: 4 seq_len: 128 plans { tp: 8 attention_dp: 2 }", kModel128),
       "batch-sharded attention is a decode plan"},
      {"LNC 3", PlanScenario("batch: 8 kv_length: 16 plans { tp: 8 lnc: 3 }"), "lnc: 3 must be 1 or 2"},
      {"more instances than a job can have ranks (found by the scenario fuzzer: the product overflowed)",
       PlanScenario("batch: 8 kv_length: 16 plans { tp: 8 instances: 666666661 }"),
       "instances: 666666661 must be in [0, 16384] (0: as many as the ranks need)"},
      {"a world that does not fill its instances",
       PlanScenario("batch: 8 kv_length: 16 plans { tp: 8 instances: 2 }"),
       "8 ranks do not fill 2 instances of 64 ranks at LNC 2 (need 128)"},
      {"a world larger than its one instance",
       PlanScenario("batch: 8 kv_length: 16 plans { tp: 8 replicas: 16 instances: 1 }"),
       "instances: 1 holds 64 ranks at LNC 2; 128 ranks need 2"},
      {"topology world size contradicting the plan",
       PlanScenario("batch: 8 kv_length: 16 plans { tp: 8 } topology { world_size: 16 }"),
       "topology.world_size: 16 contradicts the plan (tp 8 x replicas 1 = 8 ranks)"},
      {"topology LNC contradicting the plan",
       PlanScenario("batch: 8 kv_length: 16 plans { tp: 8 lnc: 2 } topology { lnc: 1 }"),
       "topology.lnc: 1 contradicts the plan's lnc 2"},
      {"topology TP groups contradicting the plan",
       PlanScenario("batch: 8 kv_length: 16 plans { tp: 4 replicas: 2 } topology { replica_groups "
                    "{ name: \"tp\" strided { group_size: 4 } } }"),
       "topology.replica_groups 'tp': group 0 is [0 2 4 6]; the plan needs blocks of 4 consecutive ranks"},
      {"topology attention-DP groups contradicting the plan",
       PlanScenario("batch: 8 kv_length: 16 plans { tp: 8 attention_dp: 4 } topology { replica_groups "
                    "{ name: \"attention_dp\" strided { group_size: 4 } } }"),
       "topology.replica_groups 'attention_dp': group 0 is [0 2 4 6]"},
      {"topology batch shard contradicting the plan",
       PlanScenario("batch: 8 kv_length: 16 plans { tp: 8 attention_dp: 4 } topology { batch_shard "
                    "{ replica_group: \"attention_dp\" batch: 4 } }"),
       "topology.batch_shard: replica group 'attention_dp' with batch 4 contradicts the plan"},
      {"plans of different world sizes",
       PlanScenario("batch: 8 kv_length: 16 plans { tp: 8 } plans { tp: 4 }"),
       "plans: 'tp4' has 4 ranks (tp 4 x replicas 1) but 'tp8' has 8"},
      {"two plans of one name",
       PlanScenario("batch: 8 kv_length: 16 plans { name: \"a\" tp: 8 } plans { name: \"a\" tp: 8 attention_dp: 2 }"),
       "plans: name 'a' is used twice (plans 0 and 1)"},
      {"no plan", PlanScenario("batch: 8 kv_length: 16"), "plans: none given"},
      {"tp 0", PlanScenario("batch: 8 kv_length: 16 plans { name: \"zero\" tp: 0 }"),
       "plan 'zero': tp: 0 must be in [1, 16384]"},
      {"an unknown workload", PlanScenario("workload: \"train\" batch: 8 plans { tp: 8 }"),
       "workload: 'train' is not one of decode, prefill"},
      {"steps in prefill",
       PlanScenario("workload: \"prefill\" batch: 1 seq_len: 128 steps: 4 plans { tp: 8 }", kModel128),
       "steps: 4: only the decode workload has steps"},
      {"prefill without a prompt length", PlanScenario("workload: \"prefill\" batch: 1 plans { tp: 8 }", kModel128),
       "seq_len: 0: prefill needs the prompt length S >= 1"},
      {"sequence parallel with S not divisible by tp",
       PlanScenario("workload: \"prefill\" batch: 1 seq_len: 100 sequence_parallel: true plans { tp: 8 }",
                    kModel128),
       "sequence_parallel: seq_len 100 must be a multiple of tp (8)"},
      {"too many heads per rank for the o_proj CTE",
       PlanScenario("workload: \"prefill\" batch: 1 seq_len: 128 plans { tp: 1 }",
                    "model { hidden: 512 n_q_heads: 32 n_kv_heads: 8 d_head: 128 intermediate: 1024 }"),
       "tp: 1 gives 32 Q heads per rank; the o_proj CTE kernel takes at most 17"},
      {"a plan too big for a rank's memory",
       PlanScenario("batch: 128 kv_length: 1048576 plans { tp: 1 }"),
       "does not fit HBM: weights"},
      {"a plan name with a space", PlanScenario("batch: 8 kv_length: 16 plans { name: \"a b\" tp: 8 }"),
       "plans: name 'a b' must be 1 to 64 letters"},
      {"prefill with d_head 64",
       PlanScenario("workload: \"prefill\" batch: 1 seq_len: 128 plans { tp: 8 }"),
       "model.d_head: 64: prefill needs 128"},
      {"decode steps out of range", PlanScenario("batch: 8 kv_length: 16 steps: 5000 plans { tp: 8 }"),
       "steps: 5000 must be in [1, 1024]"},
      {"an integer layer dtype", PlanScenario("batch: 8 kv_length: 16 dtype: \"int32\" plans { tp: 8 }"),
       "dtype: 'int32' is not one of bf16, fp16, fp32"},
      {"an unknown layer dtype", PlanScenario("batch: 8 kv_length: 16 dtype: \"fp8\" plans { tp: 8 }"),
       "dtype: 'fp8' is not one of bf16, fp16, fp32"},
      {"a fault on a rank outside the job",
       PlanScenario("batch: 8 kv_length: 16 plans { tp: 8 } fault { kind: THROW rank: 8 phase: \"qkv\" }"),
       "fault.rank: 8 is outside the job's 8 ranks"},
      {"a fault in a phase the workload lacks",
       PlanScenario("batch: 8 kv_length: 16 plans { tp: 8 } fault { kind: KILL rank: 1 phase: \"reduce_scatter\" }"),
       "fault.phase: 'reduce_scatter' is not a phase of the decode workload"},
  };
}

}  // namespace nkisim::testing
