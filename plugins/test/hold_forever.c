/* Test fixture: a plugin that HOLDs every packet and never frees it, breaking the HOLD contract, so
 * that a run ends with buffers outstanding and `rawpipe run` must exit with status 2. Not installed. */
#include <stddef.h>

#include "rawpipe/filter_plugin.h"

static int hold(const struct rawpipe_packet *p, void *ctx) {
  (void)p;
  (void)ctx;
  return RAWPIPE_HOLD;
}
static void *create(const rawpipe_api_t *api, const char *const *k, const char *const *v, unsigned n, char *e, size_t l) {
  (void)api, (void)k, (void)v, (void)n, (void)e, (void)l;
  return (void *)1;
}

static const struct rawpipe_filter_plugin kPlugin = {
    RAWPIPE_FILTER_PLUGIN_ABI_VERSION, "hold_forever", create, hold, NULL, NULL, NULL,
};

const struct rawpipe_filter_plugin *RAWPIPE_FILTER_PLUGIN_ENTRY(void) { return &kPlugin; }
