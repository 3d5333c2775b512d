// Writes the control_frame target's seed corpus: real frames of every RankMessage kind, made by
// EncodeFrame as a rank's client sends them, one file per frame plus one stream of all of them.
// Usage: make_control_seeds DIR
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "launcher/control/framing.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  using nkisim::proto::RankMessage;
  std::vector<RankMessage> messages(6);
  messages[0].set_rank(3);
  auto* hello = messages[0].mutable_hello();
  hello->set_rank(3);
  hello->set_world_size(8);
  hello->set_pid(4242);
  hello->set_host("localhost");
  messages[1].set_rank(1);
  messages[1].mutable_progress()->set_scenario("attention_decode");
  messages[1].mutable_progress()->set_phase("qkv");
  messages[1].mutable_progress()->set_done(true);
  messages[2].set_rank(7);
  messages[2].mutable_heartbeat()->set_waiting_in("all_reduce");
  messages[3].set_rank(0);
  auto* result = messages[3].mutable_result();
  auto* phase = result->add_phases();
  phase->set_scenario("attention_decode");
  phase->set_phase("all_reduce");
  phase->set_sim_ns(306789.0);
  phase->set_host_ms(805.1);
  phase->set_max_abs_error(1.2e-3);
  phase->set_bound(2.2e-3);
  phase->set_elements(262144);
  phase->set_bytes_moved(33554432);
  phase->set_algorithm("all_reduce:mesh");
  (*result->mutable_kv_cache_bytes())["attention_decode"] = 2 << 20;
  (*result->mutable_weight_bytes())["attention_decode"] = 8 << 20;
  (*result->mutable_step_sim_ns())["attention_decode"] = 369157.0;
  auto* event = result->add_trace();
  event->set_name("nc_matmul");
  event->set_core(1);
  event->set_engine(2);
  event->set_start_ns(10);
  event->set_end_ns(250);
  event->set_bytes(65536);
  event->set_flops(16777216);
  event->set_operands("[128,512] bf16");
  event->set_scenario("attention_decode");
  result->set_peak_rss_mib(106);
  messages[4].set_rank(2);
  messages[4].mutable_error()->set_phase("attention_decode/qkv");
  messages[4].mutable_error()->set_message("injected fault");
  messages[4].mutable_error()->set_code(4);
  messages[5].set_rank(5);  // no kind set
  const std::string dir = argv[1];
  std::string stream;
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string frame = nkisim::launcher::control::EncodeFrame(messages[i]);
    std::ofstream(dir + "/frame" + std::to_string(i), std::ios::binary) << frame;
    stream += frame;
  }
  std::ofstream(dir + "/stream", std::ios::binary) << stream;
  return 0;
}
