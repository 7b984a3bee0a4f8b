// The Extra API on sockets (rawpipe/socket_extra.h), handed out by getsockopt(SO_RAWPIPE_GET_API).
#pragma once

#include <sys/socket.h>

namespace rawpipe::preload {

// Writes the table's address into value (*len >= sizeof(void*)); 0, or -1 with errno.
int get_socket_api(void* value, socklen_t* len);

}  // namespace rawpipe::preload
