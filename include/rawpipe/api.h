/* Symbol visibility of librawpipe's public API (C and C++).
 *
 * librawpipe is built with hidden visibility: only declarations marked RAWPIPE_API are exported
 * from librawpipe.so, and its version script (librawpipe.map) gives them their version node. An
 * application sees the same headers and needs nothing defined. */
#ifndef RAWPIPE_API_H
#define RAWPIPE_API_H

#if defined(__GNUC__) || defined(__clang__)
#define RAWPIPE_API __attribute__((visibility("default")))
#else
#define RAWPIPE_API
#endif

#endif /* RAWPIPE_API_H */
