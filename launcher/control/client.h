// A rank's side of the control plane: one TCP connection to the launcher, framed messages, and a
// heartbeat thread. Thread-safe: the rank's main thread and the heartbeat share the socket under
// a mutex. A failed send throws Error(kCommError).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "proto/control.pb.h"

namespace nkisim::launcher::control {

class Client {
 public:
  // Connects, retrying for up to `connect_timeout`; throws Error(kCommError) naming the address.
  Client(const std::string& host, uint16_t port, int rank,
         std::chrono::milliseconds connect_timeout = std::chrono::seconds(10));
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Sets message.rank and sends it.
  void Send(proto::RankMessage message);
  // Sends a heartbeat every `period` until StopHeartbeat or destruction, each saying what
  // waiting_in() returns (the collective the rank is blocked in, or "").
  void StartHeartbeat(std::chrono::milliseconds period,
                      std::function<std::string()> waiting_in = [] { return std::string(); });
  void StopHeartbeat();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nkisim::launcher::control
