// Fuzz target: .npy files (ReadNpy, and ReadNpyAs as the kernel commands' --in-dir reads them:
// bf16 and fp8 from float32 values or raw bits, fp32 as is). The reader takes a path, so each input
// is written to a file in the fuzzer's private temporary directory first.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "runtime/npy.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

const std::string& InputPath() {
  static const std::string path = [] {
    const char* base = std::getenv("TMPDIR");
    std::string dir = nkisim::StrCat(base && *base ? base : "/tmp", "/nkisim-npy-fuzz-XXXXXX");
    if (::mkdtemp(dir.data()) == nullptr) nkisim::fuzz::Finding("cannot create a temporary dir");
    return dir + "/input.npy";
  }();
  return path;
}

// Removes the file and its directory when the fuzzer exits normally.
void RemoveInput() {
  const std::string& path = InputPath();
  std::remove(path.c_str());
  ::rmdir(path.substr(0, path.rfind('/')).c_str());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)InputPath();
  std::atexit(RemoveInput);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, size_t size) {
  const std::string& path = InputPath();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  using nkisim::DType;
  using nkisim::NpyExchange;
  nkisim::fuzz::Guarded("ReadNpy", [&] { (void)nkisim::ReadNpy(path); });
  nkisim::fuzz::Guarded("ReadNpyAs(fp32)", [&] { (void)nkisim::ReadNpyAs(path, DType::kFloat32); });
  nkisim::fuzz::Guarded("ReadNpyAs(bf16, float32)",
                        [&] { (void)nkisim::ReadNpyAs(path, DType::kBFloat16); });
  nkisim::fuzz::Guarded("ReadNpyAs(bf16, raw bits)", [&] {
    (void)nkisim::ReadNpyAs(path, DType::kBFloat16, NpyExchange::kRawBits);
  });
  nkisim::fuzz::Guarded("ReadNpyAs(fp8 e4m3, raw bits)", [&] {
    (void)nkisim::ReadNpyAs(path, DType::kFp8E4M3, NpyExchange::kRawBits);
  });
  return 0;
}
