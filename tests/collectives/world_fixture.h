// The MPI tests' common fixture: this rank of MPI_COMM_WORLD as one replica group "world" of
// every rank (LNC 2, trn2), its logical core and its RankContext; TearDown drops the context and
// waits for every rank, so one test's collectives never meet the next one's.
#pragma once

#include <mpi.h>

#include <gtest/gtest.h>

#include <memory>

#include "collectives/collectives.h"
#include "collectives/topology.h"
#include "runtime/hardware_profile.h"
#include "runtime/logical_core.h"

namespace nkisim::collectives {

template <typename Base = ::testing::Test>
class WorldFixture : public Base {
 protected:
  void SetUp() override {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &world_);
    proto::Topology spec;
    spec.set_world_size(world_);
    spec.set_lnc(2);
    auto* all = spec.add_replica_groups();
    all->set_name("world");
    all->mutable_contiguous()->set_group_size(world_);
    topology_ = ResolveTopology(spec, Trn2Profile(), "test");
    lnc_ = std::make_unique<LogicalCore>(2, Trn2Profile(), rank_);
    ctx_ = std::make_unique<RankContext>(MPI_COMM_WORLD, topology_, *lnc_);
  }
  void TearDown() override {
    ctx_.reset();
    MPI_Barrier(MPI_COMM_WORLD);
  }
  const GroupComm& World() { return ctx_->group("world"); }

  int rank_ = 0, world_ = 0;
  ResolvedTopology topology_;
  std::unique_ptr<LogicalCore> lnc_;
  std::unique_ptr<RankContext> ctx_;
};

}  // namespace nkisim::collectives
