#include "pipeline/config/keys.hh"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

namespace rawpipe {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // Optimal string alignment: insertions, deletions, substitutions and swaps of two neighbours
  // ("synht" -> "synth") cost one each; case is ignored.
  auto same = [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
  };
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (same(a[i - 1], b[j - 1]) ? 0 : 1)});
      if (i > 1 && j > 1 && same(a[i - 1], b[j - 2]) && same(a[i - 2], b[j - 1]))
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

std::string_view closest_name(std::string_view word, std::span<const std::string_view> candidates) {
  // A third of the word's length (at least 1, at most 3) keeps "did you mean" to real typos:
  // "rate_ps" -> "rate_pps", but not "seed" -> "speed"-like guesses between unrelated short words.
  const std::size_t limit = std::clamp<std::size_t>(word.size() / 3, 1, 3);
  std::string_view best;
  std::size_t best_distance = limit + 1;
  for (std::string_view c : candidates) {
    if (c == word) continue;
    const std::size_t d = edit_distance(word, c);
    if (d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view word, std::span<const std::string_view> candidates) {
  const std::string_view best = closest_name(word, candidates);
  return best.empty() ? std::string() : fmt::format(" (did you mean \"{}\"?)", best);
}

}  // namespace rawpipe
