/* rawpipe filter-plugin ABI: a shared object that rawpipe loads by path (api->load_filter_plugin
 * or a [[filters]] config entry) and attaches as a filter to an endpoint or an rx queue.
 *
 * A plugin exports one symbol, RAWPIPE_FILTER_PLUGIN_ENTRY, returning a static descriptor whose
 * abi_version must equal the RAWPIPE_FILTER_PLUGIN_ABI_VERSION rawpipe was built with; rawpipe
 * refuses any other version, naming both. Build a plugin with only the installed headers:
 *     cc -shared -fPIC $(pkg-config --cflags rawpipe) my_filter.c -o my_filter.so
 * It links nothing from rawpipe: everything it may call comes through the rawpipe_api_t passed
 * to create().
 *
 * Life cycle: create() once with the attachment's config (key/value strings, in file order);
 * the filter callback then runs on lcore threads with the returned state as ctx; report() may be
 * called from the control thread at any time (keep what it reads atomic); destroy() runs after
 * the lcores stopped. A plugin that HOLDs packets must free every one (api->free_buff) by the
 * time destroy() returns.
 */
#ifndef RAWPIPE_FILTER_PLUGIN_H
#define RAWPIPE_FILTER_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#include "rawpipe/extra.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 2: the verdict values became VMA's (DROP 0, RECV 1, HOLD 2) and the Extra API table of version
 * 2 is what create() receives; a plugin built for version 1 would return inverted verdicts. */
#define RAWPIPE_FILTER_PLUGIN_ABI_VERSION 2u
#define RAWPIPE_FILTER_PLUGIN_ENTRY rawpipe_filter_plugin_entry
#define RAWPIPE_FILTER_PLUGIN_ENTRY_NAME "rawpipe_filter_plugin_entry"

struct rawpipe_filter_plugin {
  uint32_t abi_version;  /* RAWPIPE_FILTER_PLUGIN_ABI_VERSION */
  const char *name;
  /* Returns the plugin's state, or NULL after writing the reason to err (NUL-terminated). */
  void *(*create)(const rawpipe_api_t *api, const char *const *keys, const char *const *values, unsigned n,
                  char *err, size_t err_len);
  rawpipe_filter_fn filter;              /* exactly one of filter / filter_burst */
  rawpipe_filter_burst_fn filter_burst;
  void (*report)(void *state, char *buf, size_t len);  /* optional one-line summary */
  void (*destroy)(void *state);
};

typedef const struct rawpipe_filter_plugin *(*rawpipe_filter_plugin_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* RAWPIPE_FILTER_PLUGIN_H */
