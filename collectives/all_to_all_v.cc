#include "collectives/all_to_all_v.h"

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <functional>
#include <numeric>

#include "collectives/mpi_datatype.h"
#include "runtime/error.h"
#include "runtime/sim_mode.h"

namespace nkisim::collectives {
namespace {

constexpr const char* kOp = "all_to_all_v";

template <typename MakeRule>
void Require(bool ok, MakeRule rule) {
  if (!ok) Raise(ErrorCode::kInvalidArgument, StrCat(kOp, ": ", rule()));
}

std::string Describe(const char* role, const TensorView& t) {
  return StrCat(role, " '", t.name(), "' ", ShapeString(t.shape()), " ", DTypeName(t.dtype()));
}

std::string CountsString(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size() && i < 16; ++i) s += StrCat(i ? ", " : "", v[i]);
  if (v.size() > 16) s += StrCat(", ... (", v.size(), " entries)");
  return s + "]";
}

int ToInt(int64_t v, const char* what) {
  Require(v <= std::numeric_limits<int>::max(), [&] {
    return StrCat(what, " ", v, " bytes exceeds MPI's int count (", std::numeric_limits<int>::max(),
                  ")");
  });
  return static_cast<int>(v);
}

}  // namespace

CollectivePlan PlanAllToAllV(const GroupPlacement& group, const std::vector<int64_t>& rows,
                             double row_bytes, const HardwareProfile& profile,
                             const std::string& requested, Launch launch) {
  const int n = group.size();
  if (static_cast<int64_t>(rows.size()) != static_cast<int64_t>(n) * n) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(kOp, ": rows has ", rows.size(), " entries; the rule is group size squared (",
                 n * n, ")"));
  }
  // The algorithm chosen as for a uniform all_to_all of this member's buffer size.
  int64_t max_out = 0;
  for (int i = 0; i < n; ++i) {
    int64_t out = 0;
    for (int j = 0; j < n; ++j) out += rows[static_cast<size_t>(i * n + j)];
    max_out = std::max(max_out, out);
  }
  const double buffer_bytes = static_cast<double>(max_out) * row_bytes;
  const AlgorithmChoice choice =
      ChooseAlgorithm(CollectiveOp::kAllToAll, group, buffer_bytes, profile, requested);
  Schedule uniform = BuildSchedule(*choice.row, CollectiveOp::kAllToAll, group, buffer_bytes, profile);
  // Each chunk i * n + j of the uniform schedule stands for rows[i][j] rows. The weighted
  // schedule's chunk is `unit` rows, the gcd of the counts the schedule carries, so a transfer of
  // rows[i][j] rows carries rows[i][j] / unit chunks (exact; few chunks when counts share a
  // factor, as token counts of one hidden size do not need to).
  int64_t unit = 0;
  for (const Step& st : uniform.steps) {
    for (const Transfer& t : st.transfers) {
      for (int c : t.chunks) unit = std::gcd(unit, rows[static_cast<size_t>(c)]);
    }
  }
  if (unit == 0) unit = 1;
  auto weighted = std::make_shared<Schedule>();
  weighted->op = CollectiveOp::kAllToAll;
  weighted->members = n;
  int next = 0;
  for (const Step& st : uniform.steps) {
    Step w{st.label, {}};
    for (const Transfer& t : st.transfers) {
      Transfer wt = t;
      wt.chunks.clear();
      for (int c : t.chunks) {
        const int64_t r = rows[static_cast<size_t>(c)] / unit;
        for (int64_t k = 0; k < r; ++k) wt.chunks.push_back(next++);
      }
      if (!wt.chunks.empty()) w.transfers.push_back(std::move(wt));
    }
    // A round that moves nothing still costs its latency: keep it as a zero-byte transfer so the
    // step is counted (the runtime runs every round whatever it carries).
    if (w.transfers.empty() && !st.transfers.empty()) {
      Transfer z = st.transfers[0];
      z.chunks.clear();
      w.transfers.push_back(std::move(z));
    }
    weighted->steps.push_back(std::move(w));
  }
  weighted->num_chunks = next;
  CollectivePlan plan;
  plan.op = CollectiveOp::kAllToAll;
  plan.algorithm = choice.row->name;
  plan.reason = StrCat(choice.reason, "; per-peer counts (all_to_all_v)");
  plan.launch = launch;
  plan.chunk_bytes = row_bytes * static_cast<double>(unit);
  plan.cost = PlaySchedule(*weighted, group, plan.chunk_bytes,
                           ResolveParams(profile, CollectiveOp::kAllToAll, plan.algorithm), launch);
  plan.schedule = std::move(weighted);
  return plan;
}

AllToAllVResult all_to_all_v(RankContext& ctx, const GroupComm& group, const TensorView& input,
                             const std::vector<int64_t>& send_rows, const TensorView& output) {
  const int n = group.size();
  Require(input.rank() >= 1,
          [&] { return StrCat(Describe("input", input), " needs at least one dim (rows)"); });
  Require(static_cast<int>(send_rows.size()) == n, [&] {
    return StrCat("send_rows has ", send_rows.size(), " entries ", CountsString(send_rows),
                  "; the rule is one per group member (", n, ")");
  });
  int64_t total = 0;
  for (int j = 0; j < n; ++j) {
    Require(send_rows[j] >= 0, [&] {
      return StrCat("send_rows[", j, "] = ", send_rows[j], "; the rule is counts >= 0");
    });
    total += send_rows[j];
  }
  Require(total == input.shape()[0], [&] {
    return StrCat("send_rows ", CountsString(send_rows), " sum to ", total,
                  "; the rule is that they sum to input dim 0 (", input.shape()[0], ") of ",
                  Describe("input", input));
  });
  Shape trailing_in(input.shape().begin() + 1, input.shape().end());
  Require(output.rank() == input.rank() && output.dtype() == input.dtype() &&
              Shape(output.shape().begin() + 1, output.shape().end()) == trailing_in,
          [&] {
            return StrCat(Describe("output", output), " must have the dtype and trailing dims of ",
                          Describe("input", input));
          });
  Require(input.is_contiguous() && output.is_contiguous(), [&] {
    return StrCat(Describe("input", input), " and ", Describe("output", output),
                  " must be contiguous");
  });
  Require(ctx.local() == nullptr, [&] {
    return std::string(
        "not supported on a LocalFabric (ranks as threads) yet: run it under MPI");
  });
  const int64_t row_bytes = std::accumulate(trailing_in.begin(), trailing_in.end(), int64_t{1},
                                            std::multiplies<int64_t>()) *
                            static_cast<int64_t>(SizeOf(input.dtype()));

  WaitingInCollective waiting(kOp);
  // Counts known only now: every member learns the whole matrix (for the price) and its column
  // (what it receives).
  // Each member's counts and output capacity in one gather: every member then checks every
  // member's capacity, so a too-small output is refused by all members alike (no member is left
  // waiting in the payload exchange).
  std::vector<int64_t> mine(send_rows);
  mine.push_back(output.shape()[0]);
  std::vector<int64_t> gathered(static_cast<size_t>(n) * (n + 1));
  CheckMpi(MPI_Allgather(mine.data(), n + 1, MPI_INT64_T, gathered.data(), n + 1, MPI_INT64_T,
                         group.comm),
           "all_to_all_v counts (MPI_Allgather)");
  std::vector<int64_t> matrix(static_cast<size_t>(n) * n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      matrix[static_cast<size_t>(i * n + j)] = gathered[static_cast<size_t>(i * (n + 1) + j)];
    }
  }
  AllToAllVResult result;
  result.recv_rows.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    result.recv_rows[i] = matrix[static_cast<size_t>(i * n + group.position)];
    result.rows_received += result.recv_rows[i];
  }
  Require(output.shape()[0] >= result.rows_received, [&] {
    return StrCat(Describe("output", output), " holds ", output.shape()[0], " rows but ",
                  result.rows_received, " arrive ", CountsString(result.recv_rows),
                  "; the rule is output dim 0 >= the rows received");
  });
  for (int m = 0; m < n; ++m) {
    int64_t arriving = 0;
    for (int i = 0; i < n; ++i) arriving += matrix[static_cast<size_t>(i * n + m)];
    const int64_t capacity = gathered[static_cast<size_t>(m * (n + 1) + n)];
    Require(capacity >= arriving, [&] {
      return StrCat("group member ", m, "'s output holds ", capacity, " rows but ", arriving,
                    " arrive there; the rule is output dim 0 >= the rows received");
    });
  }
  const GroupPlacement placement = PlaceGroup(ctx.topology(), ctx.profile(), *group.members);
  const CollectivePlan plan = PlanAllToAllV(placement, matrix, static_cast<double>(row_bytes),
                                            ctx.profile(), group.set->algorithm, ctx.launch());
  // Clock join overlapping the payload.
  double local = ctx.lnc().now(), joined = 0;
  MPI_Request request = MPI_REQUEST_NULL;
  CheckMpi(MPI_Iallreduce(&local, &joined, 1, MPI_DOUBLE, MPI_MAX, group.comm, &request),
           "all_to_all_v clock join (MPI_Iallreduce)");
  if (Functional()) {
    std::vector<int> scounts(n), sdispls(n), rcounts(n), rdispls(n);
    int64_t s_at = 0, r_at = 0;
    for (int j = 0; j < n; ++j) {
      scounts[j] = ToInt(send_rows[j] * row_bytes, "send count");
      sdispls[j] = ToInt(s_at, "send displacement");
      s_at += send_rows[j] * row_bytes;
      rcounts[j] = ToInt(result.recv_rows[j] * row_bytes, "receive count");
      rdispls[j] = ToInt(r_at, "receive displacement");
      r_at += result.recv_rows[j] * row_bytes;
    }
    CheckMpi(MPI_Alltoallv(ViewData(input), scounts.data(), sdispls.data(), MPI_BYTE,
                           ViewData(output), rcounts.data(), rdispls.data(), MPI_BYTE, group.comm),
             "all_to_all_v (MPI_Alltoallv)");
  }
  CheckMpi(MPI_Wait(&request, MPI_STATUS_IGNORE), "all_to_all_v clock join (MPI_Wait)");
  const double start = joined, end = start + plan.cost.total_ns;
  Timeline& clock = ctx.lnc().core(0).timeline();
  clock.Occupy(Engine::kCollective, start, end);
  const int64_t bytes_sent = total * row_bytes;
  if (clock.keeps_records()) {
    clock.Record(kOp, Engine::kCollective, start, end, bytes_sent, 0,
                 StrCat("algorithm=", plan.algorithm, " launch=", LaunchName(plan.launch), " ",
                        ShapeString(input.shape()), DTypeName(input.dtype()), " -> ",
                        result.rows_received, " rows"));
  }
  for (int c = 0; c < ctx.lnc().lnc(); ++c) ctx.lnc().core(c).timeline().AdvanceAllTo(end);
  result.start_ns = start;
  result.end_ns = end;
  result.bytes = bytes_sent;
  result.algorithm = plan.algorithm;
  result.reason = plan.reason;
  return result;
}

}  // namespace nkisim::collectives
