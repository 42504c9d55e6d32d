// A deterministic stand-in for libFuzzer where clang is not available: runs
// LLVMFuzzerTestOneInput on every corpus file, then on mutations of them (bit
// flips, byte sets, interesting integers, splices, truncations, insertions)
// from a fixed seed, for -runs=N inputs or -max_total_time=S seconds. Same
// command-line shape as libFuzzer's for the flags we use:
//   fuzz_trace [-runs=N] [-max_total_time=S] [-seed=K] [-max_len=B] DIR_OR_FILE...
// A crash is a crash; the input that caused it is written to ./crash-<n> first.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::vector<std::vector<uint8_t>> LoadCorpus(const std::vector<std::string>& paths) {
  std::vector<std::vector<uint8_t>> corpus;
  auto load = [&](const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    corpus.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  for (const auto& p : paths) {
    struct stat st {};
    if (stat(p.c_str(), &st) != 0) continue;
    if (!S_ISDIR(st.st_mode)) {
      load(p);
      continue;
    }
    DIR* d = opendir(p.c_str());
    if (!d) continue;
    std::vector<std::string> names;
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') names.push_back(p + "/" + e->d_name);
    closedir(d);
    std::sort(names.begin(), names.end());  // deterministic order
    for (const auto& n : names) load(n);
  }
  if (corpus.empty()) corpus.emplace_back();
  return corpus;
}

void Mutate(std::vector<uint8_t>& b, const std::vector<std::vector<uint8_t>>& corpus, std::mt19937_64& rng,
            size_t max_len) {
  static const uint64_t kInteresting[] = {0, 1, 0x7f, 0x80, 0xff, 0x7fff, 0xffff, 0x7fffffff, 0xffffffff,
                                          0x8000000000000000ull, ~0ull};
  const int steps = 1 + static_cast<int>(rng() % 4);
  for (int s = 0; s < steps; ++s) {
    switch (rng() % 7) {
      case 0:
        if (!b.empty()) b[rng() % b.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 1:
        if (!b.empty()) b[rng() % b.size()] = static_cast<uint8_t>(rng());
        break;
      case 2: {
        if (b.size() < 8) break;
        const uint64_t v = kInteresting[rng() % (sizeof(kInteresting) / sizeof(kInteresting[0]))];
        const size_t width = size_t{1} << (rng() % 4);
        const size_t at = rng() % (b.size() - width + 1);
        std::memcpy(b.data() + at, &v, width);
        break;
      }
      case 3:
        if (!b.empty()) b.resize(rng() % b.size());
        break;
      case 4: {
        const size_t at = b.empty() ? 0 : rng() % (b.size() + 1);
        const size_t n = 1 + rng() % 16;
        std::vector<uint8_t> ins(n);
        for (auto& x : ins) x = static_cast<uint8_t>(rng());
        b.insert(b.begin() + static_cast<long>(at), ins.begin(), ins.end());
        break;
      }
      case 5: {  // splice in a piece of another input
        const auto& other = corpus[rng() % corpus.size()];
        if (other.empty()) break;
        const size_t from = rng() % other.size();
        const size_t n = 1 + rng() % std::min<size_t>(256, other.size() - from);
        const size_t at = b.empty() ? 0 : rng() % (b.size() + 1);
        b.insert(b.begin() + static_cast<long>(at), other.begin() + static_cast<long>(from),
                 other.begin() + static_cast<long>(from + n));
        break;
      }
      case 6:
        if (b.size() >= 2) {
          const size_t a = rng() % b.size(), c = rng() % b.size();
          std::swap(b[a], b[c]);
        }
        break;
    }
  }
  if (b.size() > max_len) b.resize(max_len);
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t runs = 10000, seed = 1, max_len = 1 << 16;
  double max_seconds = 0;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("-runs=", 0) == 0) runs = std::stoull(a.substr(6));
    else if (a.rfind("-seed=", 0) == 0) seed = std::stoull(a.substr(6));
    else if (a.rfind("-max_len=", 0) == 0) max_len = std::stoull(a.substr(9));
    else if (a.rfind("-max_total_time=", 0) == 0) {
      max_seconds = std::stod(a.substr(16));
      runs = UINT64_MAX;
    } else if (a[0] != '-') paths.push_back(a);
  }
  const auto corpus = LoadCorpus(paths);
  std::mt19937_64 rng(seed);
  const auto start = std::chrono::steady_clock::now();
  uint64_t done = 0;
  for (const auto& input : corpus) {
    LLVMFuzzerTestOneInput(input.data(), input.size());
    ++done;
  }
  std::vector<uint8_t> current;
  for (uint64_t i = 0; i < runs; ++i) {
    if (max_seconds > 0 && (i & 63) == 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > max_seconds)
      break;
    current = corpus[rng() % corpus.size()];
    Mutate(current, corpus, rng, max_len);
    // Keep the input that is about to run, so a crash leaves it behind.
    if (std::FILE* f = std::fopen("crash-candidate", "wb")) {
      std::fwrite(current.data(), 1, current.size(), f);
      std::fclose(f);
    }
    LLVMFuzzerTestOneInput(current.data(), current.size());
    ++done;
  }
  std::remove("crash-candidate");
  std::printf("driver: %llu inputs from %zu corpus files, seed %llu, no crash\n", static_cast<unsigned long long>(done),
              corpus.size(), static_cast<unsigned long long>(seed));
  return 0;
}
