// `nkisim collective batch_shard --topology FILE ...`: one attn_q_batch_shard call on real inputs,
// the second mode of the batch_shard collective (without --topology it is a synthetic size sweep).
//
//   mpirun -n 4 nkisim collective batch_shard
//       --topology configs/topologies/reference_batch_shard.textproto --layout nbsd --b 8
//       --n 2 --s 1 --d 8 [--in-dir DIR] [--out-dir DIR] [--dtype bf16] [--seed 7]
//
// The topology file's batch_shard block names the replica group set (G = its group size) and B;
// its resolved iota_workers table is the (1, world) int32 table every rank passes to
// attn_q_batch_shard. Layouts (case-insensitive):
//   nbsd  input (n, B, S, d)          -> output (G * n, B / G, S, d)
//   dbns  input (d, B, 1, S), n == 1  -> output (G, d, B / G, S)
// Rank R reads <in-dir>/q.rank<R>.npy (exactly the input shape; bf16/fp8 exchanged as float32),
// or without --in-dir fills its input from the counter-based RNG keyed by (--seed, "q.rank<R>").
// With --out-dir it writes <out-dir>/q_out.rank<R>.npy (the directory is created).
//
// Every rank checks its output element by element (bit-exact: the call only moves data) against a
// plain expectation built from all ranks' inputs, gathered with MPI_Allgather: rank r at position
// p of its group holds rows [p * B / G, (p + 1) * B / G) of every member's heads, in group order.
// Rank 0 prints the ranks, group set, G, layout, shapes, the simulated time of the call and
// PASS/FAIL with the number of wrong elements over all ranks.
//
// Errors: a flag that breaks a rule (--b other than the file's batch, --lnc other than the file's
// lnc, an unknown --layout or --dtype, dims < 1, dbns with --n != 1) is Error(kInvalidArgument);
// a topology or .npy file that cannot be read, has no batch_shard block, a world size other than
// the job's, or an input of the wrong shape is Error(kBadConfig). Each message names the flag or
// file, the value and the rule.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "launcher/commands/common_options.h"

namespace nkisim::launcher {

struct BatchShardCaseOptions {
  std::string topology, layout = "nbsd", in_dir, out_dir, dtype = "bf16";
  int b = 0, n = 1, s = 1, d = 128;
  CommonOptions common;  // --seed (default 1); lnc: the collective command's --lnc
};

// Registers --topology --layout --b --n --s --d --in-dir --out-dir --seed on cmd, writing into *o
// (which must outlive cmd's parse). --dtype and --lnc are not registered: the caller owns them
// and copies them into *o (--lnc into o->common.lnc). --b 0 (the default) means the topology file's batch.
void AddBatchShardCaseOptions(CLI::App* cmd, BatchShardCaseOptions* o);

// Runs the real-input case on this rank. REQUIRES: MPI initialised (by the caller), every rank of
// MPI_COMM_WORLD calls it with the same options. Returns the process exit code: 0 when every
// element of every rank's output is as expected, 1 otherwise. An Error on any rank is printed as
// "nkisim: rank R: <code>: <message>" and ends the whole job with MPI_Abort(ExitCodeFor(code)),
// so this function does not return on error.
int RunBatchShardCase(const BatchShardCaseOptions& o);

}  // namespace nkisim::launcher
