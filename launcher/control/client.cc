#include "launcher/control/client.h"

// Boost 1.74's Asio misses this include under C++20 (std::exchange).
#include <boost/asio.hpp>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>

#include "launcher/control/framing.h"
#include "runtime/error.h"

namespace nkisim::launcher::control {

namespace asio = boost::asio;
using asio::ip::tcp;

struct Client::Impl {
  int rank;
  asio::io_context io;
  tcp::socket socket{io};
  std::mutex write_mutex;
  std::thread heartbeat;
  std::mutex stop_mutex;
  std::condition_variable stop_changed;
  bool stop = false;
};

Client::Client(const std::string& host, uint16_t port, int rank,
               std::chrono::milliseconds connect_timeout)
    : impl_(std::make_unique<Impl>()) {
  impl_->rank = rank;
  const auto deadline = std::chrono::steady_clock::now() + connect_timeout;
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  while (!ec) {
    impl_->socket.connect(tcp::endpoint(address, port), ec);
    if (!ec || std::chrono::steady_clock::now() > deadline) break;
    impl_->socket.close();
    ec.clear();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (ec) {
    Raise(ErrorCode::kCommError,
          StrCat("rank ", rank, ": cannot reach the launcher's control plane at ", host, ":", port,
                 ": ", ec.message()));
  }
  impl_->socket.set_option(tcp::no_delay(true));
}

Client::~Client() {
  StopHeartbeat();
  boost::system::error_code ignored;
  impl_->socket.shutdown(tcp::socket::shutdown_both, ignored);
}

void Client::Send(proto::RankMessage message) {
  message.set_rank(static_cast<uint32_t>(impl_->rank));
  const std::string frame = EncodeFrame(message);
  std::lock_guard<std::mutex> lock(impl_->write_mutex);
  boost::system::error_code ec;
  asio::write(impl_->socket, asio::buffer(frame), ec);
  if (ec) {
    Raise(ErrorCode::kCommError,
          StrCat("rank ", impl_->rank, ": control plane send failed: ", ec.message()));
  }
}

void Client::StartHeartbeat(std::chrono::milliseconds period,
                            std::function<std::string()> waiting_in) {
  impl_->heartbeat = std::thread([this, period, waiting_in] {
    proto::RankMessage beat;
    std::unique_lock<std::mutex> lock(impl_->stop_mutex);
    while (!impl_->stop_changed.wait_for(lock, period, [this] { return impl_->stop; })) {
      beat.mutable_heartbeat()->set_waiting_in(waiting_in());
      try {
        Send(beat);
      } catch (const Error&) {
        return;  // the launcher is gone; the main thread finds out on its next send
      }
    }
  });
}

void Client::StopHeartbeat() {
  {
    std::lock_guard<std::mutex> lock(impl_->stop_mutex);
    impl_->stop = true;
  }
  impl_->stop_changed.notify_all();
  if (impl_->heartbeat.joinable()) impl_->heartbeat.join();
}

}  // namespace nkisim::launcher::control
