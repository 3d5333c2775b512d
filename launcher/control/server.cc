#include "launcher/control/server.h"

// Boost 1.74's Asio misses this include under C++20 (std::exchange).
#include <utility>

#include <boost/asio.hpp>

#include <array>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "launcher/control/framing.h"
#include "runtime/error.h"

namespace nkisim::launcher::control {

namespace asio = boost::asio;
using asio::ip::tcp;

struct Server::Impl {
  std::string host;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::thread thread;
  std::mutex mutex;
  std::condition_variable arrived;
  std::deque<Event> events;

  void Push(Event e) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      events.push_back(std::move(e));
    }
    arrived.notify_one();
  }

  // One rank's connection: reads frames until the stream ends.
  struct Session : std::enable_shared_from_this<Session> {
    Session(Impl* owner, tcp::socket s) : impl(owner), socket(std::move(s)) {}
    void ReadHeader() {
      auto self = shared_from_this();
      asio::async_read(socket, asio::buffer(header), [self](boost::system::error_code ec, size_t) {
        if (ec) return self->Close(ec == asio::error::eof ? "connection closed" : ec.message());
        const uint32_t n = DecodeLength(self->header.data());
        if (n > kMaxFrameBytes) return self->Close(StrCat("corrupt frame of ", n, " bytes"));
        self->body.resize(n);
        self->ReadBody();
      });
    }
    void ReadBody() {
      auto self = shared_from_this();
      asio::async_read(socket, asio::buffer(body), [self](boost::system::error_code ec, size_t) {
        if (ec) return self->Close(ec.message());
        Event e{Event::Kind::kMessage, self->rank, {}, {}};
        if (!e.message.ParseFromArray(self->body.data(), static_cast<int>(self->body.size()))) {
          return self->Close("unparsable control message");
        }
        self->rank = static_cast<int>(e.message.rank());
        e.rank = self->rank;
        self->impl->Push(std::move(e));
        self->ReadHeader();
      });
    }
    void Close(const std::string& why) {
      impl->Push(Event{Event::Kind::kDisconnected, rank, {}, why});
      boost::system::error_code ignored;
      socket.close(ignored);
    }
    Impl* impl;
    tcp::socket socket;
    std::array<unsigned char, 4> header{};
    std::vector<char> body;
    int rank = -1;
  };

  void Accept() {
    acceptor.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
      if (ec) return;  // the acceptor was closed: shutting down
      std::make_shared<Session>(this, std::move(socket))->ReadHeader();
      Accept();
    });
  }
};

Server::Server(const std::string& host, uint16_t port) : impl_(std::make_unique<Impl>()) {
  impl_->host = host;
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  if (!ec) {
    const tcp::endpoint endpoint(address, port);
    impl_->acceptor.open(endpoint.protocol(), ec);
    if (!ec) impl_->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) impl_->acceptor.bind(endpoint, ec);
    if (!ec) impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  }
  if (ec) {
    Raise(ErrorCode::kBadConfig, StrCat("control.host/port: cannot listen on ", host, ":", port,
                                        ": ", ec.message()));
  }
  impl_->Accept();
  impl_->thread = std::thread([this] { impl_->io.run(); });
}

Server::~Server() {
  impl_->io.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

uint16_t Server::port() const { return impl_->acceptor.local_endpoint().port(); }
const std::string& Server::host() const { return impl_->host; }

std::optional<Event> Server::Next(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(impl_->mutex);
  if (!impl_->arrived.wait_for(lock, timeout, [this] { return !impl_->events.empty(); })) {
    return std::nullopt;
  }
  Event e = std::move(impl_->events.front());
  impl_->events.pop_front();
  return e;
}

}  // namespace nkisim::launcher::control
