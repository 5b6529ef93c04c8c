//===- ReplayMain.cpp - Runs a fuzz target over files and folders ---------===//
//
// `archc-replay-<target> PATH...`: every file named, and every file of every
// folder named (sorted), goes through the target's LLVMFuzzerTestOneInput
// once. A crash, a sanitizer report, an uncaught exception, a non-zero
// return value (libFuzzer reserves them) or an input running past the
// timeout (20 s, scripts/fuzz.sh's -timeout; ARCHC_REPLAY_TIMEOUT overrides)
// fails the run; it prints how many inputs ran. Built with any compiler, no
// libFuzzer.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

namespace {
/// The input being run, for the timeout's message.
const char *current = "";

extern "C" void onTimeout(int) {
  const char msg[] = "replay: timeout on ";
  // Only async-signal-safe calls here.
  (void)!write(2, msg, sizeof msg - 1);
  (void)!write(2, current, std::char_traits<char>::length(current));
  (void)!write(2, "\n", 1);
  _exit(1);
}
} // namespace

int main(int argc, char **argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    std::error_code ec;
    if (fs::is_directory(argv[i], ec)) {
      for (const auto &e : fs::recursive_directory_iterator(argv[i], ec))
        if (e.is_regular_file())
          inputs.push_back(e.path());
    } else {
      inputs.emplace_back(argv[i]);
    }
  }
  std::sort(inputs.begin(), inputs.end());
  unsigned timeout = 20;
  if (const char *t = std::getenv("ARCHC_REPLAY_TIMEOUT"))
    timeout = static_cast<unsigned>(std::strtoul(t, nullptr, 10));
  std::signal(SIGALRM, onTimeout);
  if (inputs.empty()) {
    std::fprintf(stderr, "replay: no inputs\n");
    return 1;
  }
  for (const fs::path &p : inputs) {
    std::ifstream in(p, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "replay: cannot read %s\n", p.c_str());
      return 1;
    }
    std::string bytes((std::istreambuf_iterator<char>(in)),
                      std::istreambuf_iterator<char>());
    std::fprintf(stderr, "replay: %s (%zu bytes)\n", p.c_str(), bytes.size());
    current = p.c_str();
    alarm(timeout);
    int rc = LLVMFuzzerTestOneInput(
        reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
    alarm(0);
    if (rc != 0) {
      std::fprintf(stderr, "replay: %s: the target returned %d\n", p.c_str(),
                   rc);
      return 1;
    }
  }
  std::fprintf(stderr, "replay: %zu inputs, no crash\n", inputs.size());
  return 0;
}
