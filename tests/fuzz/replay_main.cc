// Stand-in for libFuzzer's driver when the compiler has no -fsanitize=fuzzer (gcc builds): runs
// every file of the given corpus directories once through LLVMFuzzerTestOneInput, so the seed
// corpora and every crash input ever checked in stay regression tests in every build.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
  std::size_t inputs = 0;
  for (int i = 1; i < argc; ++i) {
    std::filesystem::path dir(argv[i]);
    if (!std::filesystem::is_directory(dir)) {
      std::fprintf(stderr, "replay: %s is not a corpus directory\n", argv[i]);
      return 2;
    }
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (!entry.is_regular_file()) continue;
      std::ifstream in(entry.path(), std::ios::binary);
      std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
      ++inputs;
    }
  }
  if (inputs == 0) {
    std::fprintf(stderr, "replay: no corpus inputs found\n");
    return 2;
  }
  std::printf("replay: %zu inputs ran without a crash\n", inputs);
  return 0;
}
