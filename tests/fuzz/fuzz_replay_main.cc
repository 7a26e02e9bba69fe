// Runs a fuzzer's entry point on files, without libFuzzer: every build (gcc, asan, tsan) replays
// the committed corpora (tests/fuzz/corpus/<fuzzer>/) this way, so a reproducer added there stays
// a regression test. Usage: <fuzzer>_replay FILE_OR_DIRECTORY...  (directories: every file in
// them, in name order). Fails when an argument is missing or a directory holds no file.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_check.h"

extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

bool run_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "%s: cannot read\n", path.c_str());
    return false;
  }
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // An exactly-sized copy, as libFuzzer passes it, so that AddressSanitizer sees over-reads.
  auto data = std::make_unique<uint8_t[]>(std::max<size_t>(bytes.size(), 1));
  std::copy(bytes.begin(), bytes.end(), data.get());
  LLVMFuzzerTestOneInput(data.get(), bytes.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE_OR_DIRECTORY...\n", argv[0]);
    return 2;
  }
  size_t runs = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg(argv[i]);
    std::error_code ec;
    if (std::filesystem::is_directory(arg, ec)) {
      std::vector<std::filesystem::path> files;
      for (const auto& e : std::filesystem::directory_iterator(arg, ec)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
      if (files.empty()) {
        std::fprintf(stderr, "%s: no inputs\n", arg.c_str());
        return 1;
      }
      std::sort(files.begin(), files.end());
      for (const auto& f : files) {
        if (!run_file(f)) return 1;
        ++runs;
      }
    } else if (run_file(arg)) {
      ++runs;
    } else {
      return 1;
    }
  }
  std::printf("%zu inputs ran without a finding\n", runs);
  return 0;
}
