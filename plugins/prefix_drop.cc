// Payload-prefix drop filter, a rawpipe filter plugin in C++ (burst form): drops every packet
// whose UDP/TCP payload starts with a configured byte string, passes the rest.
//
// Config: prefix (text) or prefix_hex (e.g. "deadbeef"), exactly one. Counters are relaxed
// atomics with several possible writers (an endpoint filter may run on several lcores).
#include <atomic>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include "rawpipe/filter_plugin.h"

namespace {

struct PrefixDrop {
  std::string prefix;
  std::atomic<unsigned long long> dropped{0};
  std::atomic<unsigned long long> passed{0};
};

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void* create(const rawpipe_api_t*, const char* const* keys, const char* const* values, unsigned n, char* err,
             std::size_t err_len) {
  std::string prefix;
  bool have = false;
  for (unsigned i = 0; i < n; ++i) {
    std::string k = keys[i], v = values[i];
    if (have && (k == "prefix" || k == "prefix_hex")) {
      std::snprintf(err, err_len, "give one of 'prefix' or 'prefix_hex', not both");
      return nullptr;
    }
    if (k == "prefix") {
      prefix = v;
    } else if (k == "prefix_hex") {
      if (v.size() % 2) {
        std::snprintf(err, err_len, "key 'prefix_hex': '%s' has an odd number of digits", v.c_str());
        return nullptr;
      }
      for (std::size_t j = 0; j < v.size(); j += 2) {
        int hi = hex(v[j]), lo = hex(v[j + 1]);
        if (hi < 0 || lo < 0) {
          std::snprintf(err, err_len, "key 'prefix_hex': '%s' is not hexadecimal", v.c_str());
          return nullptr;
        }
        prefix.push_back(static_cast<char>(hi * 16 + lo));
      }
    } else {
      std::snprintf(err, err_len, "unknown key '%s' (known: prefix, prefix_hex)", k.c_str());
      return nullptr;
    }
    have = true;
  }
  if (prefix.empty()) {
    std::snprintf(err, err_len, "set a non-empty 'prefix' or 'prefix_hex'");
    return nullptr;
  }
  auto* s = new (std::nothrow) PrefixDrop;
  if (!s) {
    std::snprintf(err, err_len, "out of memory");
    return nullptr;
  }
  s->prefix = std::move(prefix);
  return s;
}

void filter_burst(const rawpipe_packet* pkts, int* verdicts, unsigned n, void* ctx) {
  auto* s = static_cast<PrefixDrop*>(ctx);
  const std::size_t plen = s->prefix.size();
  unsigned long long dropped = 0;
  for (unsigned i = 0; i < n; ++i) {
    const rawpipe_packet& p = pkts[i];
    if (p.payload.iov_len >= plen && std::memcmp(p.payload.iov_base, s->prefix.data(), plen) == 0) {
      verdicts[i] = RAWPIPE_DROP;
      ++dropped;
    }
  }
  s->dropped.fetch_add(dropped, std::memory_order_relaxed);
  s->passed.fetch_add(n - dropped, std::memory_order_relaxed);
}

void report(void* ctx, char* buf, std::size_t len) {
  auto* s = static_cast<PrefixDrop*>(ctx);
  std::snprintf(buf, len, "dropped=%llu passed=%llu", s->dropped.load(), s->passed.load());
}

void destroy(void* ctx) { delete static_cast<PrefixDrop*>(ctx); }

const rawpipe_filter_plugin kPlugin = {
    RAWPIPE_FILTER_PLUGIN_ABI_VERSION, "prefix_drop", &create, nullptr, &filter_burst, &report, &destroy,
};

}  // namespace

extern "C" const rawpipe_filter_plugin* RAWPIPE_FILTER_PLUGIN_ENTRY(void) { return &kPlugin; }
