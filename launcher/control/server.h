// The launcher's side of the control plane: a TCP server (Boost.Asio, one I/O thread) that
// accepts the ranks' connections and turns their framed messages into a queue of events.
// Thread-safe: the launcher's loop calls Next() while the I/O thread fills the queue.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "proto/control.pb.h"

namespace nkisim::launcher::control {

struct Event {
  enum class Kind { kMessage, kDisconnected };
  Kind kind;
  int rank;  // the connection's rank (from its first message), -1 before any
  proto::RankMessage message;  // kMessage only
  std::string detail;          // kDisconnected: why (end of stream, corrupt frame, ...)
};

class Server {
 public:
  // Binds host:port (port 0: any free port) and starts serving. Throws Error(kBadConfig) naming
  // the address when it cannot bind.
  Server(const std::string& host, uint16_t port);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  uint16_t port() const;
  const std::string& host() const;
  // The next event, waiting at most `timeout`; nullopt when none came.
  std::optional<Event> Next(std::chrono::milliseconds timeout);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nkisim::launcher::control
