#include "server/client_watch.h"

#include <sys/socket.h>

#include <cerrno>

#include "server/socket_lookup.h"

namespace minivllm::server {

ClientWatch::ClientWatch(std::string local_addr, int local_port, std::string remote_addr, int remote_port)
    : local_addr_(std::move(local_addr)),
      remote_addr_(std::move(remote_addr)),
      local_port_(local_port),
      remote_port_(remote_port) {}

bool ClientWatch::gone() {
  if (!searched_) {
    searched_ = true;
    fd_ = find_connection_socket(local_addr_, local_port_, remote_addr_, remote_port_);
  }
  if (fd_ < 0) return false;
  char byte;
  const ssize_t r = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (r == 0) return true;  // the client's FIN: it will read nothing more
  if (r > 0) return false;  // a pipelined next request: still there
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;  // reset or failed
}

}  // namespace minivllm::server
