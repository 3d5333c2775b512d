#include <gmock/gmock.h>
#include <gtest/gtest.h>

// Boost 1.74's Asio misses this include under C++20 (std::exchange).
#include <utility>

#include <boost/asio.hpp>

#include "launcher/control/client.h"
#include "launcher/control/framing.h"
#include "launcher/control/server.h"
#include "runtime/error.h"

namespace nkisim::launcher::control {
namespace {

using namespace std::chrono_literals;

Event NextOrFail(Server& server) {
  std::optional<Event> e = server.Next(5s);
  EXPECT_TRUE(e.has_value()) << "no event within 5 s";
  return e.value_or(Event{Event::Kind::kDisconnected, -2, {}, "timeout"});
}

TEST(ControlPlaneTest, FramesCarryMessagesInOrderWithTheRank) {
  Server server("127.0.0.1", 0);
  ASSERT_GT(server.port(), 0);
  {
    Client client("127.0.0.1", server.port(), 7);
    proto::RankMessage hello;
    hello.mutable_hello()->set_world_size(64);
    client.Send(hello);
    proto::RankMessage progress;
    progress.mutable_progress()->set_phase("qkv");
    progress.mutable_progress()->set_done(true);
    client.Send(progress);
    Event first = NextOrFail(server);
    EXPECT_EQ(first.kind, Event::Kind::kMessage);
    EXPECT_EQ(first.rank, 7);
    EXPECT_EQ(first.message.hello().world_size(), 64u);
    Event second = NextOrFail(server);
    EXPECT_EQ(second.message.progress().phase(), "qkv");
    EXPECT_TRUE(second.message.progress().done());
  }
  // Closing the client is seen as a disconnection of rank 7.
  Event gone = NextOrFail(server);
  EXPECT_EQ(gone.kind, Event::Kind::kDisconnected);
  EXPECT_EQ(gone.rank, 7);
}

TEST(ControlPlaneTest, HeartbeatsArriveWhileIdle) {
  Server server("127.0.0.1", 0);
  Client client("127.0.0.1", server.port(), 3);
  client.StartHeartbeat(20ms);
  int beats = 0;
  while (beats < 3) {
    Event e = NextOrFail(server);
    if (e.kind != Event::Kind::kMessage) break;
    beats += e.message.has_heartbeat();
  }
  EXPECT_EQ(beats, 3);
  client.StopHeartbeat();
}

TEST(ControlPlaneTest, CorruptFrameDisconnects) {
  Server server("127.0.0.1", 0);
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket socket(io);
  socket.connect({boost::asio::ip::make_address("127.0.0.1"), server.port()});
  const unsigned char huge[4] = {0xff, 0xff, 0xff, 0xff};
  boost::asio::write(socket, boost::asio::buffer(huge, 4));
  Event e = NextOrFail(server);
  EXPECT_EQ(e.kind, Event::Kind::kDisconnected);
  EXPECT_THAT(e.detail, ::testing::HasSubstr("corrupt frame"));
}

TEST(ControlPlaneTest, NothingArrivesAndNextTimesOut) {
  Server server("127.0.0.1", 0);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(server.Next(50ms).has_value());
  EXPECT_GE(std::chrono::steady_clock::now() - start, 50ms);
}

TEST(ControlPlaneTest, BadAddressesAreClearErrors) {
  EXPECT_THROW(Server("not-an-address", 0), Error);
  Server server("127.0.0.1", 0);
  const uint16_t port = server.port();
  EXPECT_THROW(Server("127.0.0.1", port), Error);  // already in use
  try {
    Client("127.0.0.1", 1, 0, 200ms);  // nothing listens on port 1
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCommError);
    EXPECT_THAT(e.what(), ::testing::HasSubstr("cannot reach the launcher's control plane"));
  }
}

TEST(ControlPlaneTest, LengthPrefixIsBigEndian) {
  proto::RankMessage m;
  m.set_rank(300);
  const std::string frame = EncodeFrame(m);
  const auto* bytes = reinterpret_cast<const unsigned char*>(frame.data());
  EXPECT_EQ(DecodeLength(bytes), frame.size() - 4);
  EXPECT_EQ(bytes[0], 0);
}

}  // namespace
}  // namespace nkisim::launcher::control
