#include "server/client_watch.h"

#include <dirent.h>
#include <netdb.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>

namespace minivllm::server {

namespace {

// (numeric host, port) of a socket address, as httplib's get_remote_ip_and_port writes them.
bool host_and_port(const sockaddr_storage& addr, socklen_t len, std::string& host, int& port) {
  char buf[NI_MAXHOST];
  char serv[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, buf, sizeof buf, serv, sizeof serv,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return false;
  }
  host = buf;
  port = std::atoi(serv);
  return true;
}

bool matches(int fd, const std::string& local_addr, int local_port, const std::string& remote_addr,
             int remote_port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  std::string host;
  int port = -1;
  // Not a socket, or not connected: getpeername fails and the descriptor is skipped.
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return false;
  if (!host_and_port(addr, len, host, port) || port != remote_port || host != remote_addr) return false;
  len = sizeof addr;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return false;
  return host_and_port(addr, len, host, port) && port == local_port && host == local_addr;
}

}  // namespace

int find_socket(const std::string& local_addr, int local_port, const std::string& remote_addr, int remote_port) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int found = -1;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    if (matches(static_cast<int>(fd), local_addr, local_port, remote_addr, remote_port)) {
      found = static_cast<int>(fd);
      break;
    }
  }
  closedir(dir);
  return found;
}

ClientWatch::ClientWatch(std::string local_addr, int local_port, std::string remote_addr, int remote_port)
    : local_addr_(std::move(local_addr)),
      remote_addr_(std::move(remote_addr)),
      local_port_(local_port),
      remote_port_(remote_port) {}

bool ClientWatch::gone() {
  if (!searched_) {
    searched_ = true;
    fd_ = find_socket(local_addr_, local_port_, remote_addr_, remote_port_);
  }
  if (fd_ < 0) return false;
  char byte;
  const ssize_t r = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (r == 0) return true;  // the client's FIN: it will read nothing more
  if (r > 0) return false;  // a pipelined next request: still there
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;  // reset or failed
}

}  // namespace minivllm::server
