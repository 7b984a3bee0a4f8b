// The Extra API behind include/rawpipe/extra.h: a C function table over a Pipeline.
//
// A handle (rawpipe_pipeline) either owns its Pipeline (api->create from a config file) or wraps
// one the host built (extra_wrap: the rawpipe app, tests, benchmarks). The handle owns what the
// API created for it: endpoint user_data, loaded plugins. Destroy it after the pipeline stopped
// (api->stop or Pipeline::stop), because plugins' callbacks may run until then.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rawpipe/config.hh"
#include "rawpipe/pipeline.hh"
#include "pipeline/filter/plugin.hh"
#include "rawpipe/extra.h"

namespace rawpipe::ops {
class StatsPublisher;
}

struct rawpipe_pipeline {
  rawpipe_pipeline();
  ~rawpipe_pipeline();
  std::unique_ptr<rawpipe::Pipeline> owned;
  rawpipe::Pipeline* pipeline = nullptr;
  std::vector<std::uint64_t> user_data;  // by endpoint
  std::vector<std::unique_ptr<rawpipe::FilterPlugin>> plugins;
  std::uint16_t next_endpoint = 0;       // poll(RAWPIPE_ANY_ENDPOINT) rotation
  // The stats segment of a pipeline from create() ([metrics] stats_segment), as rawpipe run has.
  std::unique_ptr<rawpipe::ops::StatsPublisher> publisher;
  int any_epoll_fd = -1;                 // endpoint_fd(RAWPIPE_ANY_ENDPOINT), closed by destroy
};

namespace rawpipe {

// A handle over a pipeline the caller owns; free it with api->destroy (the pipeline stays).
rawpipe_pipeline* extra_wrap(Pipeline& pipeline);

// api->create loads configs with the built-in drivers (LoadOptions' defaults). Tests replace the
// options (a fake driver lookup, a CPU count) with extra_set_load_options.
void extra_set_load_options(const LoadOptions& options);

// "ENDPOINT: RULE" -> (endpoint id, rule text); the add_conf_rule grammar.
Result<std::pair<std::uint16_t, std::string>> parse_conf_rule(const Pipeline& p, std::string_view line);

// Attachment text for plugins: "endpoint NAME" or "queue PORT:QUEUE" (PORT a name or id).
Result<FilterAttach> parse_filter_attach(const Pipeline& p, std::string_view text);

}  // namespace rawpipe
