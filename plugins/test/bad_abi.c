/* Test fixture: a plugin that claims a filter ABI this rawpipe does not provide; loading it must
 * be refused with a message naming both versions. Not installed. */
#include <stddef.h>

#include "rawpipe/filter_plugin.h"

static int pass(const struct rawpipe_packet *p, void *ctx) {
  (void)p;
  (void)ctx;
  return RAWPIPE_RECV;
}
static void *create(const rawpipe_api_t *api, const char *const *k, const char *const *v, unsigned n, char *e, size_t l) {
  (void)api, (void)k, (void)v, (void)n, (void)e, (void)l;
  return (void *)1;
}

static const struct rawpipe_filter_plugin kPlugin = {
    RAWPIPE_FILTER_PLUGIN_ABI_VERSION + 41, "bad_abi", create, pass, NULL, NULL, NULL,
};

const struct rawpipe_filter_plugin *RAWPIPE_FILTER_PLUGIN_ENTRY(void) { return &kPlugin; }
