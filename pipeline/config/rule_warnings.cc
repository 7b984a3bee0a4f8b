// Warnings about the endpoints' rules that are legal but almost certainly not what was meant:
// a rule that can never win because another endpoint's rule covers it and is looked at first,
// and an IPv6 destination written without brackets whose last group reads like a port.
#include "pipeline/config/rule_warnings.hh"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <sstream>
#include <tuple>

#include "pipeline/classify/rule.hh"

namespace rawpipe {
namespace {

// The classifier's levels (pipeline/classify/table.hh): exact 5-tuples, then exact 3-tuples, then
// the wildcard list; inside a level, more specific first, ties in config order.
int level_of(const MatchRule& m) {
  if (m.ip_proto == kIpProtoAny || !m.dst_ip || !m.dst_ip->is_host() || !m.dst_port) return 2;
  if (m.src_ip && m.src_ip->is_host() && m.src_port) return 0;
  return 1;
}

auto rank(const MatchRule& m) {
  return std::make_tuple(m.dst_ip ? m.dst_ip->len : 0, m.dst_port.has_value(), m.src_ip ? m.src_ip->len : 0,
                         m.src_port.has_value(), m.vlan.has_value(), !m.ingress_port_name.empty(),
                         m.ip_proto != kIpProtoAny);
}

bool prefix_covers(const std::optional<IpPrefix>& wide, const std::optional<IpPrefix>& narrow) {
  if (!wide) return true;
  if (!narrow || narrow->family != wide->family || narrow->len < wide->len) return false;
  return wide->contains(narrow->addr.data());
}

template <class T>
bool field_covers(const std::optional<T>& wide, const std::optional<T>& narrow) {
  return !wide || (narrow && *narrow == *wide);
}

// Every packet `narrow` matches, `wide` matches too.
bool covers(const MatchRule& wide, const MatchRule& narrow) {
  if (wide.ip_proto != kIpProtoAny && wide.ip_proto != narrow.ip_proto) return false;
  if (wide.dst_ip && !narrow.dst_ip && wide.family() != narrow.family()) return false;
  return prefix_covers(wide.dst_ip, narrow.dst_ip) && prefix_covers(wide.src_ip, narrow.src_ip) &&
         field_covers(wide.dst_port, narrow.dst_port) && field_covers(wide.src_port, narrow.src_port) &&
         field_covers(wide.vlan, narrow.vlan) &&
         (wide.ingress_port_name.empty() || wide.ingress_port_name == narrow.ingress_port_name);
}

// `a` (earlier in config order) is looked at before `b`.
bool looked_at_first(const MatchRule& a, const MatchRule& b) {
  if (level_of(a) != level_of(b)) return level_of(a) < level_of(b);
  return rank(a) >= rank(b);
}

// "ff15::1:5000" after dst/src: an IPv6 address whose last group is also a plausible port.
void ambiguous_ipv6(const std::string& rule, std::vector<RuleWarning>& out, std::size_t endpoint, std::size_t index) {
  std::istringstream words(rule);
  std::string word, previous;
  while (words >> word) {
    if ((previous == "dst" || previous == "src") && word.find('[') == std::string::npos &&
        std::count(word.begin(), word.end(), ':') >= 2 && word.find('/') == std::string::npos) {
      const std::size_t colon = word.rfind(':');
      const std::string head = word.substr(0, colon), tail = word.substr(colon + 1);
      in6_addr a{};
      const bool digits = !tail.empty() && tail.size() <= 5 &&
                          std::all_of(tail.begin(), tail.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
      if (digits && std::stoul(tail) <= 65535 && inet_pton(AF_INET6, head.c_str(), &a) == 1) {
        RuleWarning w;
        w.endpoint = endpoint;
        w.rule = index;
        w.message = fmt::format(
            "rule \"{}\": {} {} is read as the IPv6 address {} with any port; for address {} port {} write {} "
            "[{}]:{} (and {} [{}]:* keeps this meaning without the warning)",
            rule, previous, word, word, head, tail, previous, head, tail, previous, word);
        out.push_back(std::move(w));
      }
    }
    previous = word;
  }
}

}  // namespace

std::vector<RuleWarning> find_rule_warnings(const Plan& plan) {
  std::vector<RuleWarning> out;
  struct Parsed {
    std::size_t endpoint, index;
    MatchRule rule;
  };
  std::vector<Parsed> rules;  // config order, as the classifier ties them
  for (std::size_t e = 0; e < plan.endpoints.size(); ++e) {
    for (std::size_t i = 0; i < plan.endpoints[e].match.size(); ++i) {
      const std::string& text = plan.endpoints[e].match[i];
      ambiguous_ipv6(text, out, e, i);
      if (auto r = parse_match_rule(text)) rules.push_back({e, i, std::move(r).value()});
    }
  }
  for (std::size_t b = 0; b < rules.size(); ++b) {
    for (std::size_t a = 0; a < rules.size(); ++a) {
      if (a == b || rules[a].endpoint == rules[b].endpoint) continue;
      const bool earlier = a < b;
      const MatchRule& wide = rules[a].rule;
      const MatchRule& narrow = rules[b].rule;
      if (!covers(wide, narrow)) continue;
      // Same level and rank: config order decides, so only an earlier rule wins the tie.
      const bool tie = level_of(wide) == level_of(narrow) && rank(wide) == rank(narrow);
      if (tie ? !earlier : !looked_at_first(wide, narrow)) continue;
      const auto& other = plan.endpoints[rules[a].endpoint];
      RuleWarning w;
      w.endpoint = rules[b].endpoint;
      w.rule = rules[b].index;
      w.other_endpoint = rules[a].endpoint;
      w.other_rule = rules[a].index;
      w.message = fmt::format("rule \"{}\" never matches: {} rule \"{}\" of endpoint \"{}\" ({}:{}) takes every "
                              "packet it would; remove one of them or make this one more specific",
                              narrow.text.empty() ? plan.endpoints[rules[b].endpoint].match[rules[b].index] : narrow.text,
                              tie ? "the identical" : "the wider", other.match[rules[a].index], other.name,
                              other.where.file, other.where.line);
      out.push_back(std::move(w));
      break;  // one reason per starved rule is enough
    }
  }
  return out;
}

}  // namespace rawpipe
